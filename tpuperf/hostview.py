"""What the host was doing while the devices waited (issue 23).

Two halves:

- :func:`events_of` reads a host file's host-plane events (``/host:CPU``) into one small
  table, at load time: every event of a thread line that runs no XLA op, with its kind:
  ``python`` (JAX's Python tracer: ``$file.py:line function``, or ``$module function`` for
  a C function), ``input`` (infeed, ``HOST_WAIT_INPUT``, ``HOST_TO_DEVICE``, tf.data and grain
  iterators), ``runtime`` (``PjitFunction``, execution, dispatch, ``block_until_ready``,
  transfers) or ``traceme`` (every other annotation: ``TraceAnnotation``, step markers).
- :func:`activity` lays those events over each device's idle time inside its iterations
  (the timeline's iteration windows: a step's start to the next step's start), and ranks them
  by the device-idle time they overlap: *explain*.

Python frames are credited by their *self time as the innermost user frame*: at each instant
the deepest user frame on the thread gets it, library frames below it (NumPy, ``time.sleep``,
``float(loss)``'s sync) count as its own time. A user frame is one of a file whose functions
the traced code called directly (the outermost frames the tracer recorded: the training loop's
callees), less files whose frames run under JAX's dispatch (``PjitFunction``, execution).

Host events are on the host clock. CPU and GPU device events are too; a TPU's ops are on its
device clock. Given the TPU devices' clocks (:func:`tpu_clocks`, as ``tpuperf host`` does),
each host event goes onto each TPU device's clock as the host's step markers do; without them
TPU devices are not compared (said in a note).
"""

from __future__ import annotations

import functools
import re
from dataclasses import field
from typing import TYPE_CHECKING, Any

import numpy as np

from tpuperf._dataclasses import dataclass
from tpuperf.columns import Strings, Table, distinct, factorize, index_groups, sum_by
from tpuperf.intervals import (
    EMPTY,
    Intervals,
    intersect,
    merge,
    overlap_by_group,
    subtract,
    union,
    union_by_group,
)
from tpuperf.step_windows import window_of

if TYPE_CHECKING:
    from tpuperf.tables import DeviceClock
    from tpuperf.timeline import DeviceView, Timeline
    from tpuperf.xspace import Space

KIND_PYTHON = "python"
KIND_INPUT = "input"
KIND_RUNTIME = "runtime"
KIND_TRACEME = "traceme"
KINDS = (KIND_PYTHON, KIND_INPUT, KIND_RUNTIME, KIND_TRACEME)

# Input events: what XProf's input-pipeline analysis counts, and the iterators of tf.data,
# grain and PyTorch's DataLoader; in any case (the patterns are matched in the lowercased
# name).
_INPUT = re.compile(
    r"infeed|host_wait_input|hostwaitinput|host_to_device|hosttodevice|iterator::|"
    r"iteratorgetnext|multideviceiterator|grain|dataloader|tf\.data"
)
# The JAX/XLA runtime on the host: dispatch, execution, syncs and transfers; the names that
# start so, and those that hold one of the words.
_RUNTIME_STARTS = ("PjitFunction", "ExecuteReplicated", "shard_args", "Wait for")
_RUNTIME = re.compile(
    r"block_until_ready|BlockHostUntilReady|BlockUntilReady|Transfer|device_put|"
    r"BufferFromPyval|CopyToDevice|ToLiteral|Await|PjRt|Pjrt|Execute|Thunk|Dispatch|dispatch|"
    r"ThreadpoolListener|Compil|compil"
)
# (Plain words, no IGNORECASE, no anchor or class in the alternation: re then finds them
# ten times faster, and a TensorFlow profile's host plane names thousands of events.)
# `$file.py:123 function` (a Python function) or `$module function` (a C function).
_FRAME = re.compile(r"^\$(?P<file>\S+?\.py):(?P<line>\d+) (?P<function>.+)$")

HOST_EVENT_COLUMNS = ("line", "name", "kind", "start_ps", "dur_ps")


def kind_of(name: str) -> str:
    """The kind of a host event by its name (see the module docstring)."""
    if name.startswith("$"):
        return KIND_PYTHON
    if _INPUT.search(name.lower()):
        return KIND_INPUT
    if name.startswith(_RUNTIME_STARTS) or _RUNTIME.search(name):
        return KIND_RUNTIME
    return KIND_TRACEME


@functools.lru_cache(maxsize=65536)  # asked once per event: a few hundred names, many calls
def frame_of(name: str) -> tuple[str, int, str] | None:
    """(file, line, function) of a Python tracer event of Python code; None otherwise."""
    match = _FRAME.match(name)
    if match is None:
        return None
    return match["file"], int(match["line"]), match["function"]


def _first_seen(values: list[str], index: np.ndarray) -> Strings:
    """``Strings.from_list([values[i] for i in index])`` (codes in the order the rows first
    show each value) without a Python string per row: a host plane holds millions of events
    and a few thousand names."""
    value_codes, per_value = factorize(values)
    codes = value_codes[index]
    seen, first = np.unique(codes, return_index=True)
    order = seen[np.argsort(first, kind="stable")]
    remap = np.zeros(len(per_value), dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    return Strings(remap[codes], tuple(per_value[i] for i in order.tolist()))


def events_of(space: Space) -> Table | None:
    """The host-plane events of one host file (columns HOST_EVENT_COLUMNS, host clock); None
    when it has none. Thread lines that run XLA ops (XLA:CPU's worker threads) are left out:
    their events are the device's, not the host's."""
    lines, names, starts, durs = [], [], [], []
    known: list[str] = []  # every host plane's event names, then "" (an event without one)
    for plane in space.planes:
        if not plane.name.startswith("/host:") or plane.name == "/host:metadata":
            continue
        offset = None  # where this plane's names start in `known`, once it has an event
        for line in plane.lines:
            if not len(line):
                continue
            if plane.stat_ids("hlo_op") and (line.stat_codes("hlo_op")[0] >= 0).any():
                continue
            if offset is None:
                offset = len(known)
                known.extend(plane.metadata.names)
            rows = plane.metadata.rows(line.metadata_id)
            names.append(np.where(rows >= 0, rows + offset, -1))
            starts.append(np.asarray(line.start_ps, dtype=np.int64))
            durs.append(np.asarray(line.duration_ps, dtype=np.int64))
            lines.append(line.name)
    if not lines:
        return None
    name = _first_seen([*known, ""], np.concatenate(names))
    kinds = [kind_of(v) for v in name.values]
    counts = np.array([len(rows) for rows in names])
    return Table(
        {
            "line": _first_seen(lines, np.repeat(np.arange(len(lines)), counts)),
            "name": name,
            "kind": Strings.from_values(kinds, name.codes),
            "start_ps": np.concatenate(starts),
            "dur_ps": np.concatenate(durs),
        }
    )


# --------------------------------------------------------------------------- analysis


@dataclass(frozen=True, eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class HostActivity:
    """Host events ranked by the device-idle time they overlap, per iteration per device.

    ``table``: kind, name, where (``file:line`` for Python code), idle_ms_per_iteration (the
    device-idle time it overlaps: Python frames by their self time as innermost user frame),
    between_ms_per_iteration (of that, outside steps and before a step's first op or after
    its last), outside_steps_ms_per_iteration (of that, outside the steps), calls_per_iteration
    and ms_per_call (its events that start in the iterations), pct_of_idle.
    """

    table: Table
    iterations: int  # iteration windows over the compared devices
    devices: int  # devices compared
    idle_ms_per_iteration: float  # device idle inside the iterations
    between_ms_per_iteration: float  # of which outside steps or at a step's edges
    outside_steps_ms_per_iteration: float  # of which outside the step windows
    explained_ms_per_iteration: float  # idle some user Python frame overlaps
    explained_between_ms_per_iteration: float
    has_python: bool
    input: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class _Host:
    """One host's events, prepared once for all its devices: labelled, disjoint-per-label
    intervals."""

    labels: list[tuple[str, str, str]]  # (kind, name, where)
    # Each label's time as a set: the intervals of every label's set, one label after
    # another: starts, ends and the label's number (its place in labels).
    set_starts: np.ndarray
    set_ends: np.ndarray
    set_label: np.ndarray
    # Each label's events: starts, durations and the label's number.
    event_starts: np.ndarray
    event_durs: np.ndarray
    event_label: np.ndarray
    user: Intervals  # union of every user frame's self time
    load: Intervals  # union of data-loading code (user frames named so, and input events)
    input_events: Intervals  # union of input-kind events
    # tf.data iterator events (`Iterator::...`, what XProf's input-pipeline analysis lists as
    # input ops): name -> (count, total ps) over the whole capture
    input_ops: dict[str, tuple[int, int]] = field(default_factory=dict)

    def overlaps(self, other: Intervals) -> np.ndarray:
        """Each label's time inside ``other`` (int64 ps, in the order of ``labels``): what
        ``intersect(label's set, other).total`` gives, for every label at once."""
        return overlap_by_group(
            self.set_starts, self.set_ends, self.set_label, len(self.labels), other
        )


NO_TIMES = np.zeros(0, dtype=np.int64)


# A user function whose name says it loads data (for plain JAX loops without input events).
_LOADING = re.compile(
    r"load|batch|data|read|fetch|input|decode|prefetch|__next__|next|sample", re.IGNORECASE
)


def is_loading(function: str) -> bool:
    """Whether a function's name says it loads data (load_batch, next_batch, read_records)."""
    return _LOADING.search(function) is not None


def _python_segments(
    names: list[str], start: np.ndarray, end: np.ndarray, user_files: set[str]
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Self segments of the innermost user frames of one thread: (event index, start, end)."""
    keep = [i for i, n in enumerate(names) if (f := frame_of(n)) is not None and f[0] in user_files]
    if not keep:
        return [], np.empty(0, np.int64), np.empty(0, np.int64)
    idx = np.array(keep)
    order = idx[np.lexsort((-(end[idx] - start[idx]), start[idx]))]
    out_i: list[int] = []
    out_s: list[int] = []
    out_e: list[int] = []
    stack: list[tuple[int, int]] = []  # (event index, where its self time resumes)

    def close_until(t: int) -> None:
        # Pop frames that end by t, emitting the rest of their self time.
        while stack and int(end[stack[-1][0]]) <= t:
            i, resume = stack.pop()
            if int(end[i]) > resume:
                out_i.append(i)
                out_s.append(resume)
                out_e.append(int(end[i]))
            if stack:
                stack[-1] = (stack[-1][0], max(stack[-1][1], int(end[i])))

    for i in order.tolist():
        s = int(start[i])
        close_until(s)
        if stack:
            parent, resume = stack[-1]
            if s > resume:
                out_i.append(parent)
                out_s.append(resume)
                out_e.append(s)
        stack.append((i, s))
    close_until(np.iinfo(np.int64).max)
    return out_i, np.array(out_s, dtype=np.int64), np.array(out_e, dtype=np.int64)


def _prepare(events: Table) -> _Host:
    name = events.strings("name")
    kind = events.strings("kind")
    line = events.strings("line")
    start = events.array("start_ps")
    end = start + events.array("dur_ps")
    names = name.tolist()
    is_python = kind.eq(KIND_PYTHON)
    is_runtime = kind.eq(KIND_RUNTIME)
    # columns.distinct, not np.unique: that imports numpy.ma (8-16 ms) on first use
    threads = [np.flatnonzero(line.codes == code) for code in distinct(line.codes)]
    # User files: those of the outermost Python frames, less those run under the runtime.
    user_files: set[str] = set()
    runtime_files: set[str] = set()
    for on in threads:
        py = on[is_python[on]]
        if not len(py):
            continue
        order = py[np.lexsort((-(end[py] - start[py]), start[py]))]
        reach = np.maximum.accumulate(end[order])
        outer = np.ones(len(order), dtype=bool)
        outer[1:] = start[order][1:] >= reach[:-1]
        for i in order[outer].tolist():
            if (f := frame_of(names[i])) is not None:
                user_files.add(f[0])
        rt = on[is_runtime[on]]
        runtime = union(start[rt], end[rt])
        if len(runtime):
            at = np.searchsorted(runtime.starts, start[py], side="right") - 1
            inside = (at >= 0) & (start[py] < runtime.ends[np.maximum(at, 0)])
            for i in py[inside].tolist():
                if (f := frame_of(names[i])) is not None:
                    runtime_files.add(f[0])
    user_files -= runtime_files

    parts: dict[tuple[str, str, str], list[tuple[np.ndarray, np.ndarray]]] = {}
    # Each label's events: (starts, durations) arrays.
    label_events: dict[tuple[str, str, str], list[tuple[np.ndarray, np.ndarray]]] = {}
    user_parts: list[tuple[np.ndarray, np.ndarray]] = []
    load_parts: list[tuple[np.ndarray, np.ndarray]] = []
    for on in threads:
        py = on[is_python[on]]
        seg_i, seg_s, seg_e = _python_segments(
            [names[i] for i in py], start[py], end[py], user_files
        )
        owner = py[np.array(seg_i, dtype=np.int64)] if seg_i else np.empty(0, np.int64)
        user_parts.append((seg_s, seg_e))
        labels = {}
        for i in py.tolist():
            f = frame_of(names[i])
            if f is None or f[0] not in user_files:
                continue
            label = labels[i] = (KIND_PYTHON, f[2], f"{f[0]}:{f[1]}")
            label_events.setdefault(label, []).append(
                (start[i : i + 1], end[i : i + 1] - start[i : i + 1])
            )
        for j in distinct(owner).tolist():
            label = labels[j]
            mine = owner == j
            parts.setdefault(label, []).append((seg_s[mine], seg_e[mine]))
            if _LOADING.search(label[1]):
                load_parts.append((seg_s[mine], seg_e[mine]))
    # Annotations and runtime events: a label per name, over every thread, after the Python
    # frames' labels; each name's events in row order. One stable sort, then whole arrays: a
    # TensorFlow profile names thousands, each too few events for numpy calls of its own.
    other = np.flatnonzero(~is_python)
    codes = name.codes  # made once: each read of Strings.codes maps every row
    other_codes = codes[other]
    order = np.argsort(other_codes, kind="stable")
    rows = other[order]  # name by name
    names_in_use = distinct(other_codes)
    bounds = np.searchsorted(other_codes[order], names_in_use, side="left")
    counts = np.diff(np.append(bounds, len(rows)))
    name_kinds = kind.codes[rows[bounds]] if len(rows) else np.zeros(0, dtype=np.int64)
    python_keys = list(parts)
    keys = python_keys + [
        (kind.values[k], name.values[code], "")
        for k, code in zip(name_kinds.tolist(), names_in_use.tolist(), strict=True)
    ]
    row_label = np.repeat(np.arange(len(python_keys), len(keys), dtype=np.int64), counts)
    row_start, row_end = start[rows], end[rows]
    named_input = [k == KIND_INPUT for k, _, _ in keys[len(python_keys) :]]
    is_input = np.repeat(np.array(named_input, dtype=bool), counts)
    input_events = union(row_start[is_input], row_end[is_input])
    input_ops = {}
    for code, value in enumerate(name.values):
        if value.startswith("Iterator::"):
            matching = np.flatnonzero(codes == code)
            input_ops[value] = (len(matching), int((end[matching] - start[matching]).sum()))
    python_sets = _by_label(parts, python_keys)
    set_starts, set_ends, set_label = union_by_group(
        np.concatenate([python_sets[0], row_start]),
        np.concatenate([python_sets[1], row_end]),
        np.concatenate([python_sets[2], row_label]),
    )
    python_events = _by_label(label_events, python_keys)
    event_starts = np.concatenate([python_events[0], row_start])
    event_durs = np.concatenate([python_events[1], row_end - row_start])
    event_label = np.concatenate([python_events[2], row_label])
    return _Host(
        input_ops=input_ops,
        labels=keys,
        set_starts=set_starts,
        set_ends=set_ends,
        set_label=set_label,
        event_starts=event_starts,
        event_durs=event_durs,
        event_label=event_label,
        user=_union_of(user_parts),
        load=merge(_union_of(load_parts), input_events),
        input_events=input_events,
    )


def _by_label(
    parts: dict[Any, list[tuple[np.ndarray, np.ndarray]]], keys: list[Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (a, b) arrays of each key's parts one key after another, in ``keys`` order (each
    key's parts in order), with each element's key number."""
    pieces = [(a, b, number) for number, key in enumerate(keys) for a, b in parts.get(key, ())]
    if not pieces:
        return NO_TIMES, NO_TIMES, NO_TIMES
    return (
        np.concatenate([a for a, _, _ in pieces]),
        np.concatenate([b for _, b, _ in pieces]),
        np.repeat(
            np.array([number for _, _, number in pieces], dtype=np.int64),
            [len(a) for a, _, _ in pieces],
        ),
    )


def _union_of(parts: list[tuple[np.ndarray, np.ndarray]]) -> Intervals:
    if not parts:
        return EMPTY
    return union(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def _measure(a: Intervals, b: Intervals) -> int:
    return intersect(a, b).total


def _idle_sets(view: DeviceView) -> tuple[Intervals, Intervals, Intervals]:
    """The device's idle time inside its iterations (nothing at all runs); the part of it
    between steps: outside the step windows, or before a step's first op or after its last
    (the idle analyzer's between-steps idle); and the part outside the step windows."""
    it = view.iterations
    windows = union(it.start_ps, it.end_ps)
    occupied = merge(view.sets.compute, view.sets.collective, view.sets.other)
    idle = subtract(windows, occupied)
    # Inside-step idle: between a step's first and last op.
    steps = view.windows
    inner = EMPTY
    if len(steps) and len(occupied):
        first = np.searchsorted(occupied.ends, steps.start_ps, side="right")
        last = np.searchsorted(occupied.starts, steps.end_ps, side="left") - 1
        ok = (first < len(occupied)) & (last >= 0) & (last >= first)
        lo = np.maximum(occupied.starts[np.minimum(first, len(occupied) - 1)], steps.start_ps)
        hi = np.minimum(occupied.ends[np.maximum(last, 0)], steps.end_ps)
        inner = union(lo[ok], hi[ok])
    return idle, subtract(idle, inner), subtract(idle, union(steps.start_ps, steps.end_ps))


_CACHE: list[tuple[Timeline, object, HostActivity | None]] = []
TPU_NOT_COMPARED = (
    "TPU ops are on the device clock, host events on the host clock: TPU devices not compared"
)


def activity(
    tl: Timeline, clocks: dict[tuple[str, int], DeviceClock] | None = None
) -> HostActivity | None:
    """Host events ranked by the device idle they overlap (see HostActivity); None when the
    profile holds no host events. TPU devices are compared where ``clocks`` holds their
    device clock (:func:`tpu_clocks`): each host event goes onto it as the host's step markers
    do. Computed once per timeline and clocks."""
    for built, built_clocks, found in _CACHE:
        if built is tl and built_clocks is clocks:
            return found
    found = _activity(tl, clocks or {})
    _CACHE.append((tl, clocks, found))
    del _CACHE[:-2]
    return found


def tpu_clocks(profile: Any) -> dict[tuple[str, int], DeviceClock]:
    """Each TPU device's clock, (host, device) -> DeviceClock, rebuilt from its file (read
    again through :meth:`Profile.read_space`) as the tables built it
    (:func:`tpuperf.build_tpu.plane_clock`) and dropped once its steps were placed."""
    from tpuperf import build_tpu

    clocks: dict[tuple[str, int], DeviceClock] = {}
    hosts = {d.host for d in profile.device_tables if d.row.get("kind") == "TPU"}
    for info in profile.hosts:
        space = profile.read_space(info.host) if info.host in hosts else None
        for plane in space.planes if space is not None else []:
            match = re.fullmatch(r"/device:TPU:(\d+)", plane.name)
            clock = build_tpu.plane_clock(plane) if match is not None else None
            if match is not None and clock is not None:
                clocks[info.host, int(match[1])] = clock
    return clocks


def _on_clock(events: Table, clock: DeviceClock) -> Table:
    """Host events placed on a device clock (each event as a host-clock window)."""
    start = events.array("start_ps")
    placed_start, placed_end = clock.place(start, start + events.array("dur_ps"))
    return events.with_columns(start_ps=placed_start, dur_ps=placed_end - placed_start)


def _activity(tl: Timeline, clocks: dict[tuple[str, int], DeviceClock]) -> HostActivity | None:
    events_by_host: dict[str, Table] = getattr(tl.profile, "host_events", None) or {}
    if not events_by_host:
        return None
    notes: list[str] = []
    views = [v for v in tl.devices if (t := events_by_host.get(v.host)) is not None and t.n]
    if any(v.kind == "TPU" and (v.host, v.device) not in clocks for v in views):
        notes.append(TPU_NOT_COMPARED)
    views = [v for v in views if v.kind != "TPU" or (v.host, v.device) in clocks]
    if not views:
        return None
    # A host's events as each device sees them: TPU devices on their own clock.
    prepared_by_host = {
        h: _prepare(events_by_host[h]) for h in sorted({v.host for v in views if v.kind != "TPU"})
    }
    prepared_by_view = {
        (v.host, v.device): (
            _prepare(_on_clock(events_by_host[v.host], clocks[v.host, v.device]))
            if v.kind == "TPU"
            else prepared_by_host[v.host]
        )
        for v in views
    }
    # Calls, event time and input ops: each host's events as its first compared device sees
    # them (the devices of a host share its events).
    prepared = {
        h: prepared_by_view[next((v.host, v.device) for v in views if v.host == h)]
        for h in sorted({v.host for v in views})
    }
    labels: dict[tuple[str, str, str], int] = {}
    for key in prepared_by_view:
        for label in prepared_by_view[key].labels:
            labels.setdefault(label, len(labels))
    idle_by_label = np.zeros(len(labels))
    between_by_label = np.zeros(len(labels))
    calls = np.zeros(len(labels))
    event_ps = np.zeros(len(labels))
    outside_by_label = np.zeros(len(labels))
    idle_total = between_total = outside_total = explained = explained_between = 0
    load_between = input_between = 0
    iterations = 0
    for view in views:
        events = prepared_by_view[view.host, view.device]
        idle, between, outside = _idle_sets(view)
        iterations += len(view.iterations)
        idle_total += idle.total
        between_total += between.total
        outside_total += outside.total
        explained += _measure(events.user, idle)
        explained_between += _measure(events.user, between)
        load_between += _measure(events.load, between)
        input_between += _measure(events.input_events, idle)
        # Each label's events inside the idle; between and outside are parts of the idle, so
        # the events' part of those is the idle part's (labels are distinct: one add each).
        at = [labels[label] for label in events.labels]
        idle_by_label[at] += events.overlaps(idle)
        between_by_label[at] += events.overlaps(between)
        outside_by_label[at] += events.overlaps(outside)
    # Calls and event time: once per host (the devices of a host share its events), the
    # events that start in the iterations of the host's first device.
    per_host_iterations = 0
    for host in sorted({v.host for v in views}):
        h = prepared[host]
        first = next(v for v in views if v.host == host)
        per_host_iterations += len(first.iterations)
        it = first.iterations
        inside = window_of(h.event_starts, it.start_ps, it.end_ps) >= 0
        label_of = h.event_label[inside]
        at = [labels[label] for label in h.labels]
        calls[at] += np.bincount(label_of, minlength=len(h.labels))
        event_ps[at] += sum_by(label_of, len(h.labels), h.event_durs[inside])
    n = max(iterations, 1)
    keys = list(labels)
    order = sorted(range(len(keys)), key=lambda i: (-idle_by_label[i], keys[i]))
    order = [i for i in order if idle_by_label[i] > 0]
    iteration_ms = tl.mean_window_ps / 1e9
    table = Table(
        {
            "kind": Strings.from_list([keys[i][0] for i in order]),
            "name": Strings.from_list([keys[i][1] for i in order]),
            "where": Strings.from_list([keys[i][2] for i in order]),
            "idle_ms_per_iteration": np.array([idle_by_label[i] / n / 1e9 for i in order]),
            "between_ms_per_iteration": np.array([between_by_label[i] / n / 1e9 for i in order]),
            "outside_steps_ms_per_iteration": np.array(
                [outside_by_label[i] / n / 1e9 for i in order]
            ),
            "calls_per_iteration": np.array(
                [calls[i] / max(per_host_iterations, 1) for i in order]
            ),
            "ms_per_call": np.array(
                [event_ps[i] / calls[i] / 1e9 if calls[i] else np.nan for i in order]
            ),
            "pct_of_idle": np.array(
                [100.0 * idle_by_label[i] / idle_total if idle_total else 0.0 for i in order]
            ),
        }
    )
    has_input = any(prepared[v.host].input_events.total for v in views)
    input_ops: dict[str, list[float]] = {}
    for host in sorted({v.host for v in views}):
        for op, (count, ps) in prepared[host].input_ops.items():
            entry = input_ops.setdefault(op, [0, 0.0])
            entry[0] += count
            entry[1] += ps / 1e9
    input_ms = input_between / n / 1e9
    load_ms = load_between / n / 1e9
    share = 100.0 * (input_ms if has_input else load_ms) / iteration_ms if iteration_ms else 0.0
    return HostActivity(
        table=table,
        iterations=iterations,
        devices=len(views),
        idle_ms_per_iteration=idle_total / n / 1e9,
        between_ms_per_iteration=between_total / n / 1e9,
        outside_steps_ms_per_iteration=outside_total / n / 1e9,
        explained_ms_per_iteration=explained / n / 1e9,
        explained_between_ms_per_iteration=explained_between / n / 1e9,
        has_python=any(label[0] == KIND_PYTHON for label in keys),
        input={
            "source": "input_events" if has_input else "loading_code",
            "input_ms_per_iteration": input_ms if has_input else load_ms,
            "input_pct_of_iteration": share,
            # XProf's thresholds on the input share of the step.
            # tf.data's iterators as XProf's input-pipeline analysis lists them: every event
            # of the capture, by name, most time first.
            "input_ops": [
                {"op": op, "count": int(c), "total_ms": ms}
                for op, (c, ms) in sorted(input_ops.items(), key=lambda kv: -kv[1][1])
            ],
            "classification": (
                "highly input-bound"
                if share >= 20.0
                else "moderately input-bound"
                if share >= 5.0
                else "not input-bound"
            ),
        },
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------- the document


def report(profile: Any, config: Any, top: int = 20) -> dict[str, Any]:
    """The data behind ``tpuperf host``: the iterations, their device idle, the host events
    that overlap it (ranked, ``top`` rows) and the input verdict."""
    from tpuperf import jsonout
    from tpuperf.timeline import build_timeline, stats_ms

    tl = build_timeline(profile, config)
    has_events = bool(getattr(profile, "host_events", None))
    clocks = tpu_clocks(profile) if tl.has_steps and has_events else {}
    found = activity(tl, clocks) if tl.has_steps else None
    notes = list(tl.notes)
    if not tl.has_steps:
        notes.append("no steps: iterations need steps (a Steps line, step markers or a program)")
    elif found is None and has_events and tl.platform == "TPU":
        notes.append(TPU_NOT_COMPARED)
    elif found is None:
        notes.append(
            "no host events to compare: capture with the host tracer on (and, for Python "
            "functions, jax.profiler.ProfileOptions().python_tracer_level = 1)"
        )
    else:
        notes.extend(n for n in found.notes if n not in notes)
    rows: list[dict[str, Any]] = []
    if found is not None:
        table = found.table
        for i in range(min(table.n, max(top, 0))):
            rows.append(
                {
                    "kind": table.strings("kind").tolist()[i],
                    "name": table.strings("name").tolist()[i],
                    "where": table.strings("where").tolist()[i] or None,
                    **{
                        c: float(table.array(c)[i])
                        for c in (
                            "idle_ms_per_iteration",
                            "between_ms_per_iteration",
                            "outside_steps_ms_per_iteration",
                            "calls_per_iteration",
                            "ms_per_call",
                            "pct_of_idle",
                        )
                    },
                }
            )
    document = {
        "schema_version": jsonout.SCHEMA_VERSION,
        "source": profile.source,
        "step_source": tl.step_source if tl.has_steps else None,
        "iterations": len(tl.iteration_time_ps) if tl.has_steps else 0,
        "devices": found.devices if found is not None else 0,
        "step_time_ms": stats_ms(tl.step_time_ps) if tl.has_steps else None,
        "iteration_time_ms": stats_ms(tl.iteration_time_ps) if tl.has_steps else None,
        "idle_ms_per_iteration": found.idle_ms_per_iteration if found else None,
        "between_steps_idle_ms_per_iteration": found.between_ms_per_iteration if found else None,
        "outside_steps_idle_ms_per_iteration": (
            found.outside_steps_ms_per_iteration if found else None
        ),
        "explained_ms_per_iteration": found.explained_ms_per_iteration if found else None,
        "input": dict(found.input) if found else None,
        "xprof_host_boundness": xprof_host_boundness(profile),
        "xprof_input_pipeline": xprof_input_pipeline(profile),
        "events": rows,
        "notes": notes,
    }
    return jsonout.clean(document)


def _one_space(profile: Any, platform: str) -> Space | None:
    """The decoded file of a one-host ``platform`` profile, read again (for what XProf reads
    and the loaded tables do not keep); None on other platforms or with several hosts."""
    if profile.platform != platform or len(profile.hosts) != 1:
        return None
    return profile.read_space(profile.hosts[0].host)


def xprof_input_pipeline(profile: Any) -> dict[str, Any] | None:
    """XProf's GPU input-pipeline breakdown and verdict (:mod:`tpuperf.xprof_compat`) of a
    one-host GPU profile (the loaded tables keep no step groups); None on other platforms,
    several hosts, or where the file carries no step groups."""
    from tpuperf import xprof_compat

    space = _one_space(profile, "GPU")
    return xprof_compat.input_pipeline(space) if space is not None else None


# XProf 2.24.2's `check_host_boundness` (xprof/cli/tools/check_host_boundness_tool.py): the
# overview's step count and average step time (as the overview prints it, two decimals), the
# HLO op profile's op time summed over the cores and divided by their number (collectives as
# ICI, copies as HBM, the rest as compute), the rest of the steps' total is idle. HOST_BOUND
# needs more than 10% idle AND MXU idleness over 70% AND HBM and ICI bandwidth under 30%, all
# three read from TPU hardware counters (utilization viewer, tpuperf.xprof_compat.utilization;
# each rounded to 2 decimals as the CLI prints it); without them XProf reads 0% MXU idleness
# and answers NOT_HOST_BOUND.
_XPROF_ICI = (
    "all-reduce",
    "all-gather",
    "all-to-all",
    "reduce-scatter",
    "collective-broadcast",
    "collective-permute",
)
_XPROF_HBM = ("copy",)
XPROF_IDLE_THRESHOLD_PCT = 10.0
XPROF_MXU_IDLENESS_PCT = 70.0
XPROF_BANDWIDTH_PCT = 30.0
_XPROF_COUNTER_FIELDS = (
    "mxu_idleness_percent",
    "hbm_bandwidth_utilization_percent",
    "ici_read_utilization_percent",
    "ici_write_utilization_percent",
)


def xprof_host_boundness(profile: Any) -> dict[str, Any] | None:
    """XProf's `check_host_boundness` quantities, computed as it does (see above), or None
    without steps. `tpu_duty_cycle_percent` is XProf's (:func:`tpuperf.xprof_compat.duty_cycle`,
    read again from the file: one-host TPU profiles only, else None).
    `xprof_idle_time_ratio_pct` is over the steps' total (XProf's average step times the step
    count), not over tpuperf's iterations. The counter fields are None without v6e counters
    (XProf then reads 0%, and so does `status`)."""
    # The steps of the first device that has some (XProf's overview reads one device's).
    first = next(
        (d.steps for d in profile.device_tables if d.steps is not None and d.steps.n), None
    )
    if first is None:
        return None
    n_steps = first.n
    lengths = first.array("end_ps") - first.array("start_ps")
    # their mean, a float64 sum over their count
    average_ms = round(float(lengths.sum(dtype=np.float64) / n_steps) / 1e9, 2)
    total_ms = average_ms * n_steps
    cores = len(profile.device_tables)
    # Op time by XProf's kind of each distinct (op, category): ICI, HBM or compute.
    by_kind = {"ici": 0, "hbm": 0, "compute": 0}
    kinds: dict[tuple[str, str], str] = {}  # each pair's kind, found once for every device
    for device in profile.device_tables:
        ops = device.ops
        if not ops.n:
            continue
        op, category = ops.strings("op"), ops.strings("category")
        # Summed per op index first (a TPU op's metadata row), then per pair: exact integers.
        index, group, first = index_groups([op, category])
        time_ps = sum_by(group, len(first), sum_by(index, len(group), ops.array("dur_ps")))
        pairs = zip(op.take(first).tolist(), category.take(first).tolist(), strict=True)
        for pair, ps in zip(pairs, time_ps.tolist(), strict=True):
            if pair not in kinds:
                label = f"{pair[0]} {pair[1]}".lower()
                kinds[pair] = (
                    "ici"
                    if any(p in label for p in _XPROF_ICI)
                    else "hbm"
                    if any(p in label for p in _XPROF_HBM)
                    else "compute"
                )
            by_kind[kinds[pair]] += int(ps)
    compute_ms = by_kind["compute"] / 1e9 / cores
    hbm_ms = by_kind["hbm"] / 1e9 / cores
    ici_ms = by_kind["ici"] / 1e9 / cores
    idle_ms = max(0.0, total_ms - (compute_ms + hbm_ms + ici_ms))
    fraction = min(1.0, idle_ms / total_ms) if total_ms else 0.0
    active_ms = total_ms - idle_ms
    from tpuperf import xprof_compat

    space = _one_space(profile, "TPU")
    duty = xprof_compat.duty_cycle(space) if space is not None else None
    counters = xprof_compat.utilization(space) if space is not None else None
    # XProf reads a profile without counters as 0% everywhere.
    read = counters or dict.fromkeys(_XPROF_COUNTER_FIELDS, 0.0)
    host_bound = (
        100.0 * fraction > XPROF_IDLE_THRESHOLD_PCT
        and round(read["mxu_idleness_percent"], 2) > XPROF_MXU_IDLENESS_PCT
        and round(read["hbm_bandwidth_utilization_percent"], 2) < XPROF_BANDWIDTH_PCT
        and round(read["ici_read_utilization_percent"], 2) < XPROF_BANDWIDTH_PCT
        and round(read["ici_write_utilization_percent"], 2) < XPROF_BANDWIDTH_PCT
    )
    return {
        "status": "HOST_BOUND" if host_bound else "NOT_HOST_BOUND",
        "tpu_duty_cycle_percent": duty["duty_cycle_percent"] if duty else None,
        **{name: counters[name] if counters else None for name in _XPROF_COUNTER_FIELDS},
        "number_of_steps": n_steps,
        "steptime_ms_average": average_ms,
        "total_duration_ms": total_ms,
        "core_count": cores,
        "scaled_compute_time_ms": compute_ms,
        "scaled_hbm_time_ms": hbm_ms,
        "scaled_ici_time_ms": ici_ms,
        "pure_idle_time_ms": idle_ms,
        "xprof_idle_time_ratio_pct": 100.0 * fraction,
        "idle_to_active_compute_ratio": idle_ms / active_ms if active_ms > 0 else 0.0,
        "equivalent_idle_chips": cores * fraction,
        "idle_above_threshold": 100.0 * fraction > XPROF_IDLE_THRESHOLD_PCT,
    }
