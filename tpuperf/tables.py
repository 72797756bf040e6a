"""The model of a host's tables (see :mod:`tpuperf.schema`), and what every platform's
builder shares: :class:`DeviceTables` and :class:`HostTables`, the TPU device clock
(:class:`DeviceClock`), how an HLO op is classified by its name (kind, collective, async role),
self time, and the empty tables of the schema.

The builders that fill them from a decoded XSpace are :mod:`tpuperf.build` (a host: its
planes, steps and lines) and one module per platform: :mod:`tpuperf.build_tpu`,
:mod:`tpuperf.build_gpu` (GPU streams, and the op rows of stat-labelled events that XLA:CPU
shares), :mod:`tpuperf.build_cpu`. What an HLO module's collectives move is
:mod:`tpuperf.hlo_collectives`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import field
from typing import TYPE_CHECKING, Any

import numpy as np

from tpuperf._dataclasses import dataclass
from tpuperf.columns import Strings, Table, median
from tpuperf.schema import KIND_ASYNC_COPY, KIND_COLLECTIVE, KIND_COMPUTE

if TYPE_CHECKING:  # the decoder: a command served from the cache does not import it
    from tpuperf.xspace import Line, Plane

_OP_SUFFIX = re.compile(r"\.\d+$")

# HLO op base names (no ".N" suffix, no "-start"/"-done"; "_" read as "-") that are
# collectives, in XLA's spelling and in JAX's: shard_map and pmap name an instruction after
# the primitive that made it (all_gather.3, reduce_scatter.7, psum_invariant, ppermute).
COLLECTIVES = {
    "all-reduce": "all-reduce",
    "all-gather": "all-gather",
    "reduce-scatter": "reduce-scatter",
    "all-to-all": "all-to-all",
    "ragged-all-to-all": "all-to-all",
    "collective-permute": "collective-permute",
    "collective-broadcast": "collective-broadcast",
    "send": "send-recv",
    "recv": "send-recv",
    "psum": "all-reduce",
    "pmean": "all-reduce",
    "pmax": "all-reduce",
    "pmin": "all-reduce",
    "psum-invariant": "all-reduce",
    "psum-scatter": "reduce-scatter",
    "ppermute": "collective-permute",
    "pshuffle": "collective-permute",
}
_ASYNC_COPIES = {"copy-start", "copy-done", "copy"}


def instruction_name(text: str) -> str:
    """The HLO instruction named by ``%copy-start.4 = (f32[...]) copy-start(...)``
    (``copy-start.4``); text that is not an HLO instruction comes back as it is."""
    text = text.strip()
    if text.startswith("%"):
        return text[1:].split(" = ", 1)[0].strip()
    return text


def op_base(name: str) -> str:
    """``all-gather-start.3`` -> ``all-gather-start``; ``%fusion.12`` -> ``fusion``."""
    name = name.lstrip("%")
    head, dot, number = name.rpartition(".")
    if dot and number.isdecimal():  # what _OP_SUFFIX takes off, without the regex (3x faster)
        return head
    return _OP_SUFFIX.sub("", name) if name.endswith("\n") else name


def _split_role(name: str) -> tuple[str, str]:
    """(base, async role) of an op name or opcode: ``all_gather-start.3`` -> (all-gather,
    start)."""
    return _base_role(op_base(name))


@functools.lru_cache(maxsize=65536)  # op names are many, their bases few
def _base_role(base: str) -> tuple[str, str]:
    base = base.replace("_", "-")
    for suffix in ("-start", "-done", "-update"):
        if base.endswith(suffix):
            return base[: -len(suffix)], "start" if suffix == "-start" else "done"
    return base, ""


def collective_of(name: str) -> str:
    """The collective an op name or opcode is (all-reduce, ...), or ""."""
    return COLLECTIVES.get(_split_role(name)[0], "")


@functools.lru_cache(maxsize=65536)  # chips of one program share their op names
def classify_op(name: str, category: str = "") -> tuple[str, str, str]:
    """(kind, collective, async_role) of an HLO op from its name and its opcode (the HLO
    proto's, or TPU's hlo_category), which wins where it names a collective."""
    base, role = _split_role(name)
    opcode, opcode_role = _split_role(category) if category else ("", "")
    collective = COLLECTIVES.get(opcode, "") or COLLECTIVES.get(base, "")
    if collective:
        return KIND_COLLECTIVE, collective, opcode_role or role
    if base in _ASYNC_COPIES and role:
        return KIND_ASYNC_COPY, "", role
    return KIND_COMPUTE, "", role


@dataclass
class DeviceTables:
    """One device's tables: schema.TABLES' columns but ``host`` and ``device`` (constant)."""

    host: str
    device: int
    row: dict[str, Any]  # the devices table's row
    ops: Table
    modules: Table
    async_ops: Table
    steps: Table | None = None
    clock: DeviceClock | None = None  # TPU: the device clock (see DeviceClock)
    # Waiting for peers inside collectives (XLA:CPU's Rendezvous events): schema "waits".
    waits: Table | None = None
    untimed: int = 0  # events left out: their times are past what int64 picoseconds hold


@dataclass
class HostTables:
    host: str
    devices: list[DeviceTables]
    lines: Table  # plane, line, events, first_ps, last_ps
    hostnames: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    capture_start_ns: int | None = None
    capture_stop_ns: int | None = None
    warnings: list[str] = field(default_factory=list)
    # Serialized xla.HloProto per module (`name(program_id)`), from the metadata plane: read
    # only when scope data is asked for (tpuperf/scopes.py).
    hlo_protos: dict[str, bytes] = field(default_factory=dict)


def split_module_name(name: str) -> tuple[str, str] | None:
    """``jit_train_step(16)`` -> (``jit_train_step``, ``16``); None for other names."""
    if not name.endswith(")"):
        return None
    head, _, digits = name[:-1].rpartition("(")
    return (head, digits) if head and digits.isdecimal() else None


def find_line(plane: Plane, names: tuple[str, ...]) -> Line | None:
    """The plane's line with the first of ``names`` that it has."""
    by_name = {line.name: line for line in plane.lines}
    return next((by_name[name] for name in names if name in by_name), None)


@dataclass(frozen=True, eq=False)
class DeviceClock:
    """Puts one TPU device's host-clock events on its device clock.

    TPU op events carry ``device_offset_ps`` / ``device_duration_ps``, the
    device's own timing, which XProf's op statistics use. Their host-clock
    times are that timing converted piece by piece, and the conversion drifts:
    on the v6e profile, host minus device moves by 260 ms over the capture, even
    inside one program execution, and host-clock durations differ by up to 10%.
    So every interval of a device goes on the device clock: ops by their device
    times, and host-clock-only events (module executions, ``Async XLA Ops``
    windows, steps, host step markers) by mapping each window onto it
    (:meth:`place`). The whole device timeline is shifted by one constant, the
    median host-minus-device offset of its ops, so that devices and hosts still
    line up roughly with each other.
    """

    host_start: np.ndarray  # host-clock starts of the ops with device times, sorted
    host_dur: np.ndarray  # their host-clock durations
    start: np.ndarray  # their placed (device-clock) starts
    dur: np.ndarray  # and durations
    shift: int = 0  # placed time = device time + shift

    def place(self, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Host-clock windows [start, end) on the device clock.

        Each boundary moves as the op nearest it inside the window: the start as the
        first op that starts in the window moves its start, the end as the last one
        moves its end. So a window from a start op's start to its done op's end maps
        exactly onto theirs. A window with no op inside moves whole, as the next op's
        start (else the last op's).
        """
        start = np.asarray(start, dtype=np.int64)
        end = np.asarray(end, dtype=np.int64)
        n = len(self.host_start)
        if n == 0:
            return start, end
        first = np.searchsorted(self.host_start, start, side="left")
        last = np.searchsorted(self.host_start, end, side="left") - 1
        # How far an op moves, its host time less its placed time, read for the ops asked
        # (a few hundred windows) rather than kept for every op.
        op = np.minimum(first, n - 1)
        moved = self.host_start[op] - self.start[op]
        op = np.clip(last, 0, n - 1)
        end_moved = (self.host_start[op] + self.host_dur[op]) - (self.start[op] + self.dur[op])
        end_moved = np.where(first <= last, end_moved, moved)
        placed_start = start - moved
        return placed_start, np.maximum(end - end_moved, placed_start)

    def place_steps(self, steps: Table) -> Table:
        """A steps table (host step markers) on the device clock, in order (see in_order)."""
        if not len(self.host_start):
            return steps
        start, end = self.place(steps.array("start_ps"), steps.array("end_ps"))
        return in_order(steps.with_columns(start_ps=start, end_ps=end))


NO_ROWS = np.empty(0, dtype=np.int64)
IDENTITY_CLOCK = DeviceClock(NO_ROWS, NO_ROWS, NO_ROWS, NO_ROWS)


# Device times past this (about 53 days in ps) are no times a capture holds: a broken writer's
# (int64 max, a uint64 read as negative). They are treated as missing, like negative ones.
LATEST_PS = 2**62


def _device_times(offset: np.ndarray, duration: np.ndarray) -> np.ndarray:
    """Which events carry device times to use: both present (MISSING is negative) and
    plausible (under LATEST_PS, so that sums of them never overflow int64)."""
    return (offset >= 0) & (duration >= 0) & (offset < LATEST_PS) & (duration < LATEST_PS)


def _all_device_times(offset: np.ndarray, duration: np.ndarray) -> bool:
    """Whether every event carries device times to use (_device_times all true), by four
    reductions instead of masks."""
    return bool(
        offset.min() >= 0
        and duration.min() >= 0
        and offset.max() < LATEST_PS
        and duration.max() < LATEST_PS
    )


def device_clock(events: Any, timestamp_ns: int) -> tuple[np.ndarray, np.ndarray, DeviceClock]:
    """Start and duration of TPU ops on the device clock, and that clock (see DeviceClock)."""
    host_start = events.start_ps(timestamp_ns)
    host_dur = events.duration_ps
    device_offset = events.stats["device_offset_ps"]
    device_duration = events.stats["device_duration_ps"]
    if len(host_start) and _all_device_times(device_offset, device_duration):
        # The usual case: no masks and no copies; the placed starts are made in the events'
        # own column of device offsets, which nothing reads after.
        offset = host_start - device_offset
        shift = int(median(offset, overwrite=True))
        del offset
        start = device_offset if device_offset.flags.writeable else device_offset.copy()
        start += shift
        dur = device_duration
        clock_start, clock_dur, clock_placed, clock_placed_dur = host_start, host_dur, start, dur
    else:
        use = _device_times(device_offset, device_duration)
        if not use.any():
            return host_start, host_dur, IDENTITY_CLOCK
        shift = int(median((host_start - device_offset)[use]))
        start = np.where(use, device_offset + shift, host_start)
        dur = np.where(use, device_duration, host_dur)
        clock_start, clock_dur, clock_placed, clock_placed_dur = (
            host_start[use],
            host_dur[use],
            start[use],
            dur[use],
        )
    if not bool(np.all(clock_start[1:] >= clock_start[:-1])):  # a line is in host order, as a rule
        order = np.argsort(clock_start, kind="stable")
        clock_start, clock_dur, clock_placed, clock_placed_dur = (
            clock_start[order],
            clock_dur[order],
            clock_placed[order],
            clock_placed_dur[order],
        )
    return start, dur, DeviceClock(clock_start, clock_dur, clock_placed, clock_placed_dur, shift)


def placed_times(line: Line, clock: DeviceClock) -> tuple[np.ndarray, np.ndarray]:
    """Start and duration of a TPU line's events on the device clock: from their own device
    times where they carry them (as Steps events do), else mapped by ``clock``."""
    events = line.int_events(("device_offset_ps", "device_duration_ps"))
    host_start = events.start_ps(line.timestamp_ns)
    start, end = clock.place(host_start, host_start + events.duration_ps)
    if len(clock.host_start):
        device_offset = events.stats["device_offset_ps"]
        device_duration = events.stats["device_duration_ps"]
        use = _device_times(device_offset, device_duration)
        own = device_offset + clock.shift
        start = np.where(use, own, start)
        end = np.where(use, own + device_duration, end)
    return start, end - start


def in_order(steps: Table) -> Table:
    """Steps sorted by start, none starting before the one before it ended (mapping windows
    onto a device clock can make neighbours overlap by the clocks' jitter)."""
    order = np.argsort(steps.array("start_ps"), kind="stable")
    ordered = steps.take(order)
    start = ordered.array("start_ps")
    end = ordered.array("end_ps")
    if len(start) > 1:
        start = np.maximum(start, np.concatenate([[start[0]], np.maximum.accumulate(end)[:-1]]))
        end = np.maximum(end, start)
        ordered = ordered.with_columns(start_ps=start, end_ps=end)
    return ordered


def untimed_warning(where: str, untimed: int) -> str:
    return (
        f"{where}: {untimed} op event{'s' if untimed != 1 else ''} with times past what int64 "
        "picoseconds hold left out (their times are unknown)"
    )


OP_COST_COLUMNS = (
    "flops",
    "model_flops",
    "bytes_accessed",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "vmem_read_bytes",
    "vmem_write_bytes",
    "cmem_read_bytes",
    "cmem_write_bytes",
)


# The string columns of an ops table, in schema order (tf_op and source come after the costs).
OP_STRING_COLUMNS = (
    "line",
    "module",
    "program_id",
    "op",
    "hlo_text",
    "category",
    "kind",
    "collective",
    "async_role",
    "tf_op",
    "source",
)


def empty_ops() -> Table:
    empty = np.zeros(0, dtype=np.int64)
    return Table(
        {
            **{name: Strings(empty, ()) for name in OP_STRING_COLUMNS[:9]},
            "start_ps": empty,
            "dur_ps": empty,
            "self_ps": empty,
            **{name: np.zeros(0, dtype=np.float64) for name in OP_COST_COLUMNS},
            "tf_op": Strings(empty, ()),
            "source": Strings(empty, ()),
            "step": empty,
        }
    )


EMPTY_MODULES = Table(
    {
        "module": Strings(NO_ROWS, ()),
        "program_id": Strings(NO_ROWS, ()),
        "start_ps": NO_ROWS,
        "dur_ps": NO_ROWS,
    }
)
EMPTY_WAITS = Table({"line": Strings(NO_ROWS, ()), "start_ps": NO_ROWS, "dur_ps": NO_ROWS})
EMPTY_ASYNC = Table(
    {
        "op": Strings(NO_ROWS, ()),
        "done_op": Strings(NO_ROWS, ()),
        "category": Strings(NO_ROWS, ()),
        "collective": Strings(NO_ROWS, ()),
        "start_ps": NO_ROWS,
        "dur_ps": NO_ROWS,
    }
)


def self_time(start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each event's duration less the time of events nested inside it (one line's events).

    Most lines have no nesting, which one vectorised check finds (and then the
    durations themselves come back, not a copy); only clusters of events that do
    nest are walked with a stack.
    """
    n = len(start)
    if n < 2:
        return dur.astype(np.int64, copy=False)
    # By start, an enclosing event before what it encloses; most lines are already in order.
    in_order = bool(np.all(start[1:] > start[:-1]))
    order = None if in_order else np.lexsort((-dur, start))
    s, d = (start, dur) if order is None else (start[order], dur[order])
    e = s + d
    if in_order and not (s[1:] < e[:-1]).any():
        return dur  # the usual case, no event reaching into the next: durations, shared
    running_end = np.maximum.accumulate(e)
    nested = np.zeros(n, dtype=bool)
    nested[1:] = s[1:] < running_end[:-1]
    if not nested.any():
        return dur  # self time is the duration, and shares its array
    result = d.astype(np.int64, copy=True)
    cluster_starts = np.flatnonzero(~nested)
    cluster_ends = np.append(cluster_starts[1:], n)
    several = cluster_ends - cluster_starts > 1  # only clusters that nest are walked
    for begin, end in zip(
        cluster_starts[several].tolist(), cluster_ends[several].tolist(), strict=True
    ):
        _subtract_children(s, e, result, begin, end)
    if order is None:
        return result
    out = np.empty(n, dtype=np.int64)
    out[order] = result
    return out


def _subtract_children(
    s: np.ndarray, e: np.ndarray, result: np.ndarray, begin: int, end: int
) -> None:
    stack: list[int] = []
    for i in range(begin, end):
        while stack and e[stack[-1]] <= s[i]:
            stack.pop()
        if stack:
            parent = stack[-1]
            result[parent] -= min(e[i], e[parent]) - s[i]
        stack.append(i)
