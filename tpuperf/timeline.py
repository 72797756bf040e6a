"""The timeline: the one model every analyzer reads (DESIGN.md, Definitions).

:func:`build_timeline` picks the devices and step windows to analyse (host filter,
``--steps``, warm-up), and splits each device's time into disjoint sets:

- compute: time in compute ops;
- exposed collective: time in collective ops (sync, and the ``-start``/``-done``
  halves of async ones) not covered by compute on any line of the device;
- other: async copies and memcpys covered by neither;
- idle: the window less busy time. Busy is the union of all op time on TPU and
  CPU, and compute-kernel time only on GPU (DESIGN.md: "compute streams"), so a
  GPU's idle time includes time when only NCCL kernels or memcpys run;
- no-op: the window less every op, whatever its kind. Idle gaps are classified on
  this set, so a gap means nothing at all ran (the same as idle on TPU).

On one op line, ops overlap only by nesting (a ``while`` around its body), so
there the inner, more specific kind wins (collective, then other, over
compute). Across lines (GPU streams, CPU threads) compute wins, which is what
makes NCCL time hidden behind a compute stream not exposed.

Sets are sorted, disjoint half-open intervals [start, end) as numpy arrays
(:class:`Intervals`): busy, idle and exposed time are set algebra on op intervals
(unions, differences) and the measure of a set inside each step window. The
timeline is built once per analysis and is frozen; it reads the profile's
columns and never imports pandas.
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import field, fields
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from tpuperf import _threads, kernels, schema
from tpuperf._dataclasses import dataclass
from tpuperf.columns import (
    Strings,
    Table,
    as_run,
    code_counts,
    concat_strings,
    distinct,
    median,
    percentile,
    sorted_codes,
    sum_by,
)
from tpuperf.config import AnalysisConfig
from tpuperf.errors import UsageError
from tpuperf.intervals import (
    EMPTY,
    Intervals,
    first_inside,
    interior_gaps,
    last_inside,
    measure_in,
    merge,
    nonempty,
    subtract,
    union,
    window_edges,
)
from tpuperf.roofline import chips
from tpuperf.step_windows import (
    SOURCE_MODULE_PERIOD,
    dominant_module_steps,
    program_label,
    window_of,
)

if TYPE_CHECKING:
    from tpuperf.profiles import Profile
    from tpuperf.roofline.chips import Peaks
    from tpuperf.tables import DeviceTables
    from tpuperf.workload import Workload

# --------------------------------------------------------------------------- the timeline

SOURCE_OP_SPAN = "op_span"  # no steps: the window is the device's first to last op

_OTHER_KINDS = (schema.KIND_ASYNC_COPY, schema.KIND_MEMCPY)

# The per-window measures of a breakdown, in their column order.
BREAKDOWN_COLUMNS = (
    "step_ps",
    "compute_ps",
    "exposed_collective_ps",
    "other_ps",
    "busy_ps",
    "idle_ps",
    "no_op_ps",
    "leading_idle_ps",
    "trailing_idle_ps",
    "interior_idle_ps",
    "micro_idle_ps",
    "micro_gaps",
    "macro_gaps",
)


@dataclass(frozen=True, eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class DeviceSets:
    compute: Intervals
    collective: Intervals  # exposed: not covered by compute
    other: Intervals  # not covered by compute or collectives
    busy: Intervals  # DESIGN.md's busy: all ops (TPU, CPU) or compute kernels (GPU)
    occupied: Intervals  # any op at all


class OpSpans(Intervals):
    """A set of a device's ops where each interval is one op (none empty, none touching the
    next): the ops' start and duration columns and, where the set is some of the ops, their
    rows (int32). Starts and ends are made when read rather than kept: 16 bytes an interval
    for as long as the analysis runs, against 4 for a row or nothing for every op. The
    breakdowns, which read the set many times, are measured before it takes this form."""

    op_starts: np.ndarray
    durations: np.ndarray
    rows: np.ndarray | None

    def __init__(
        self, op_starts: np.ndarray, durations: np.ndarray, rows: np.ndarray | None = None
    ) -> None:
        object.__setattr__(self, "op_starts", op_starts)
        object.__setattr__(self, "durations", durations)
        object.__setattr__(self, "rows", rows)

    @classmethod
    def of(cls, times: Intervals, ops: Table, kind: np.ndarray, code: int) -> Intervals:
        """``times`` as an OpSpans of ``ops`` where it is the ops of set ``code`` (``kind``:
        each op's) that last, one interval each; else ``times`` itself."""
        start, dur = ops.array("start_ps"), ops.array("dur_ps")
        if ops["dur_ps"] is not dur or not len(times):  # a duration read out of a Lookup
            return times
        if times.starts is start:
            return cls(start, dur)
        rows = np.flatnonzero((kind == code) & (dur > 0))
        if len(rows) != len(times):
            return times
        rows = rows.astype(np.int32 if len(start) < 2**31 else np.int64)
        begin = start[rows]
        if not (
            np.array_equal(begin, times.starts) and np.array_equal(begin + dur[rows], times.ends)
        ):
            return times
        return cls(start, dur, rows)

    @property
    def starts(self) -> np.ndarray:
        return self.op_starts if self.rows is None else self.op_starts[self.rows]

    @property
    def ends(self) -> np.ndarray:
        if self.rows is None:
            return self.op_starts + self.durations
        return self.op_starts[self.rows] + self.durations[self.rows]

    def __len__(self) -> int:
        return len(self.op_starts if self.rows is None else self.rows)


@dataclass(frozen=True, eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class Windows:
    """One device's windows, sorted by start: step numbers and [start, end)."""

    step: np.ndarray
    start_ps: np.ndarray
    end_ps: np.ndarray

    def __len__(self) -> int:
        return len(self.step)

    @classmethod
    def of(cls, step: Any, start: Any, end: Any) -> Windows:
        step = np.asarray(step, dtype=np.int64)
        start = np.asarray(start, dtype=np.int64)
        end = np.asarray(end, dtype=np.int64)
        order = np.argsort(start, kind="stable")
        return cls(step[order], start[order], end[order])


class OfDevice:
    """``key`` and ``name`` of what belongs to one device: a class with ``host`` and ``device``
    (a DeviceView, the Report's per-device breakdowns and stragglers)."""

    host: str
    device: int

    @property
    def key(self) -> tuple[str, int]:
        return self.host, self.device

    @property
    def name(self) -> str:
        return f"{self.host}/device:{self.device}"


@dataclass(frozen=True, eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class DeviceSelection(OfDevice):
    """One analysed device's step windows and the ops that start in them: what the scope
    tree reads (:func:`select_steps`). A :class:`DeviceView` adds the time sets and
    breakdowns the analyzers read."""

    host: str
    device: int
    chip: str
    kind: str  # TPU, GPU or CPU
    peak_tflops: float  # from the profile's plane stats; NaN when it does not say
    peak_hbm_gbps: float
    tables: DeviceTables  # the profile's tables of the device
    ops: Table  # every op of the device (tables.ops)
    windows: Windows  # the selected step windows (the op span when there are no steps)
    all_windows: Windows  # every step window, warm-up and unselected steps included
    span: Windows  # one window: the device's first op to its last op's end
    selected: np.ndarray  # rows of ops that start in a selected window, increasing

    def selected_ops(self, *columns: str) -> Table:
        """``columns`` of the ops that start in a selected window (only those are copied, or
        none where they are one run of rows: views then)."""
        return self.ops.select(columns).take(as_run(self.selected))

    def of_selected(self, values: np.ndarray) -> np.ndarray:
        """``values`` (one per window of ``windows``) at each selected op, in the order of
        ``selected``: the value of the window the op starts in. Where the windows' ops are
        runs of rows (:func:`_window_runs`, as :func:`_starting_in` selected them), each
        window's value repeated over its run; else each selected op's window searched for."""
        runs = _window_runs(self.ops.array("start_ps"), self.windows)
        if runs is not None:
            first, stop = runs
            return np.repeat(values, stop - first)
        starts = self.ops.array_at("start_ps", self.selected)
        return values[window_of(starts, self.windows.start_ps, self.windows.end_ps)]

    def selected_sums(self, index: np.ndarray, size: int, column: str) -> np.ndarray:
        """Per value 0 .. size - 1 of ``index`` (an integer per op, as a Lookup's shared
        index: a TPU op's metadata row; ``size`` more than any selected op's value), the sum
        of the int64 ``column`` over the selected ops. Summed once per index and column: the
        op table and the scopes' tables read the same sums, each in a thread of its own (the
        second waits for the first's)."""
        with self.__dict__.setdefault("_sums_lock", threading.Lock()):
            cache = self.__dict__.setdefault("_selected_sums", {})
            if (id(index), column) not in cache:  # (it holds the index: the id is not reused)
                rows = as_run(self.selected)
                sums = sum_by(index[rows], size, self.ops.array_at(column, rows))
                sums.flags.writeable = False  # shared by its readers
                cache[id(index), column] = (index, sums)
            sums = cache[id(index), column][1]
        if len(sums) < size:  # no selected op has the values past it: sums of nothing
            return np.concatenate([sums, np.zeros(size - len(sums), dtype=sums.dtype)])
        return sums[:size]

    def selected_counts(self, index: np.ndarray, size: int) -> np.ndarray:
        """How many selected ops have each value 0 .. size - 1 of ``index`` (as
        :meth:`selected_sums`)."""
        return code_counts(index[as_run(self.selected)], size)


@dataclass(frozen=True, eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class DeviceView(DeviceSelection):
    """One analysed device: its ops, disjoint time sets, step windows and their breakdown."""

    sets: DeviceSets
    # Rows of the selected compute ops with no op nested inside (self_ps == dur_ps): the ops
    # whose FLOPs and bytes count toward totals (a while loop's body counts, not the loop);
    # increasing too (columns.as_run reads both as a slice where they are one run).
    leaves: np.ndarray
    breakdown: dict[str, np.ndarray]  # BREAKDOWN_COLUMNS per selected window
    # Iterations: from a selected step's start to the next step's start (see _iterations);
    # their breakdown, and per iteration the time after its step ends (outside steps) and
    # the part of that no op ran in.
    iterations: Windows
    iteration_breakdown: dict[str, np.ndarray]
    outside_steps: dict[str, np.ndarray]  # outside_ps, outside_no_op_ps per iteration
    span_breakdown: dict[str, np.ndarray]  # the same over the span (XProf's window)
    outside: dict[str, int]  # span totals less step totals: time outside every step

    def leaf_counts(self, index: np.ndarray, size: int) -> np.ndarray:
        """How many leaves have each value 0 .. size - 1 of ``index`` (an integer per op, as
        a Lookup's shared index: a TPU op's metadata row). Counted once per index: the
        roofline analyzer and the summary both read it."""
        cache = self.__dict__.setdefault("_leaf_counts", {})
        if id(index) not in cache:  # (the cache holds the index: its id is not reused)
            cache[id(index)] = (index, code_counts(index[as_run(self.leaves)]))
        counts = cache[id(index)][1]
        if len(counts) < size:  # as bincount's minlength makes it
            counts = np.concatenate([counts, np.zeros(size - len(counts), dtype=counts.dtype)])
        return counts

    def selected_counts(self, index: np.ndarray, size: int) -> np.ndarray:
        """How many selected ops have each value 0 .. size - 1 of ``index``: the leaves'
        counts where the leaves are the selected ops (a line of compute ops, none nested, as
        a rule on TPU), counted once for both."""
        if self.leaves is self.selected:
            return self.leaf_counts(index, size)
        return super().selected_counts(index, size)

    def window_ps(self) -> int:
        return int(self.breakdown["step_ps"].sum())

    def iteration_ps(self) -> int:
        return int(self.iteration_breakdown["step_ps"].sum())

    def mean(self, column: str) -> float:
        """The mean of a breakdown column over this device's windows (pandas' mean of ints)."""
        values = self.breakdown[column]
        return float(values.sum()) / len(values) if len(values) else float("nan")


@dataclass(frozen=True, eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class Selection:
    """The devices and step windows an analysis reads, and the ops that start in them,
    without the time sets and breakdowns (:func:`select_steps`): what the scope tree reads.
    A :class:`Timeline` is one, with them."""

    devices: tuple[DeviceSelection, ...]  # analysed devices with windows, by (host, device)
    step_source: str  # one of schema.STEP_SOURCES, or SOURCE_OP_SPAN
    steps_selected: tuple[int, ...]
    steps_excluded: tuple[int, ...]  # warm-up steps, or steps outside --steps
    notes: tuple[str, ...]
    platform: str
    profile: Any = field(default=None, repr=False, compare=False)  # what it was built from

    @property
    def has_steps(self) -> bool:
        return self.step_source != SOURCE_OP_SPAN

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    @property
    def n_windows(self) -> int:
        """Selected windows over all devices (steps x devices when every device has all)."""
        return sum(len(d.windows) for d in self.devices)

    @property
    def n_all_windows(self) -> int:
        return sum(len(d.all_windows) for d in self.devices)

    @property
    def hosts(self) -> list[str]:
        return sorted({d.host for d in self.devices})


@dataclass(frozen=True, eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class Timeline(Selection):
    """The shared analysis model (DESIGN.md, Definitions): built once per analysis by
    :func:`build_timeline`, read by every analyzer, never changed."""

    devices: tuple[DeviceView, ...]  # analysed devices with windows, by (host, device)
    # What ran (framework, platform, training): the analyzers choose fixes from it. Set by
    # report.analyze; analyzers read it through tpuperf.analyzers.fixes.workload_of.
    workload: Workload | None = field(default=None, compare=False)
    # Each device's peak FLOP/s and HBM bandwidth, resolved once by DESIGN.md's order (the
    # profile, the chip table, the --peak-* flags): the roofline analyzer and the summary read
    # these, so every number of one analysis uses the same peaks.
    peaks: dict[tuple[str, int], Peaks] = field(default_factory=dict, repr=False, compare=False)

    @property
    def step_time_ps(self) -> np.ndarray:
        """Step durations, one per step number (in order): the slowest device's window."""
        if not self.devices:
            return np.empty(0)
        steps = np.concatenate([v.windows.step for v in self.devices])
        lengths = np.concatenate([v.windows.end_ps - v.windows.start_ps for v in self.devices])
        numbers, index = sorted_codes(steps)
        longest = np.full(len(numbers), np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(longest, index, lengths)
        return longest.astype("float64")

    @property
    def iteration_time_ps(self) -> np.ndarray:
        """Iteration durations (a step's start to the next step's start), one per step number
        that has a successor: the slowest device's. The step times when no step has one."""
        if not self.devices:
            return np.empty(0)
        steps = np.concatenate([v.iterations.step for v in self.devices])
        lengths = np.concatenate(
            [v.iterations.end_ps - v.iterations.start_ps for v in self.devices]
        )
        numbers, index = sorted_codes(steps)
        longest = np.full(len(numbers), np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(longest, index, lengths)
        return longest.astype("float64")

    @property
    def n_iterations(self) -> int:
        """Iteration windows over all devices."""
        return sum(len(d.iterations) for d in self.devices)

    @property
    def mean_window_ps(self) -> float:
        """The mean iteration length per device: the denominator of every per-step share.

        Savings are per step per device, and a step's share of the run is its iteration (the
        step and the host time before the next one), so shares use the same average; with
        synchronous steps it equals the mean iteration time.
        """
        n = self.n_iterations
        total = sum(d.iteration_ps() for d in self.devices)
        return float(total) / n if n else 0.0

    def per_iteration(self, total_ps: float) -> float:
        """A total over all iteration windows and devices, as ps per iteration per device."""
        n = self.n_iterations
        return total_ps / n if n else 0.0

    def iteration_total(self, column: str) -> float:
        """An iteration breakdown column summed over every iteration of every device."""
        return float(sum(int(d.iteration_breakdown[column].sum()) for d in self.devices))

    def iteration_mean_pct(self, column: str) -> float | None:
        """``column`` over the iterations, per device in percent, averaged over devices."""
        shares = [
            100.0
            * float(d.iteration_breakdown[column].sum())
            / float(d.iteration_breakdown["step_ps"].sum())
            for d in self.devices
            if d.iteration_breakdown["step_ps"].sum() > 0
        ]
        return float(np.mean(shares)) if shares else None

    def per_step(self, total_ps: float) -> float:
        """A total over all analysed windows and devices, as ps per step per device."""
        n = self.n_windows
        return total_ps / n if n else 0.0

    def total(self, column: str) -> float:
        """A breakdown column summed over every window of every device."""
        return float(sum(int(d.breakdown[column].sum()) for d in self.devices))

    def device_mean_pct(self, column: str) -> float | None:
        """``column`` over the window, per device in percent, averaged over devices."""
        shares = [
            100.0 * float(d.breakdown[column].sum()) / float(d.breakdown["step_ps"].sum())
            for d in self.devices
        ]
        return float(np.mean(shares)) if shares else None

    def breakdown_table(self) -> Table:
        """One row per selected window: host, device, step, start_ps, end_ps, then
        BREAKDOWN_COLUMNS."""
        views = self.devices
        columns: dict[str, Any] = {
            "host": concat_strings([Strings.constant(v.host, len(v.windows)) for v in views]),
            "device": _stack([np.full(len(v.windows), v.device, np.int64) for v in views]),
            "step": _stack([v.windows.step for v in views]),
            "start_ps": _stack([v.windows.start_ps for v in views]),
            "end_ps": _stack([v.windows.end_ps for v in views]),
        }
        for name in BREAKDOWN_COLUMNS:
            columns[name] = _stack([v.breakdown[name] for v in views])
        return Table(columns)

    def selected_ops(self, view: DeviceView) -> Table:
        """The device's ops that start in a selected window, with that window's step."""
        step = view.of_selected(view.windows.step)
        return view.ops.take(view.selected).with_columns(step=step)

    def outside_rows(self, view: DeviceView) -> np.ndarray:
        """Rows of the device's ops that start outside every step (setup, one-off calls)."""
        if not self.has_steps:
            return np.zeros(0, dtype=np.int64)
        index = window_of(
            view.ops.array("start_ps"), view.all_windows.start_ps, view.all_windows.end_ps
        )
        return np.flatnonzero(index < 0)


def _stack(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)


def stats_ms(values_ps: np.ndarray) -> dict[str, Any]:
    """median, mean, p90 (linear interpolation), min, max in ms, and count."""
    values = np.asarray(values_ps, dtype="float64")
    if len(values) == 0:
        return {"median": None, "mean": None, "p90": None, "min": None, "max": None, "count": 0}
    ms = values / 1e9
    return {
        "median": median(ms),
        "mean": float(np.mean(ms)),
        "p90": percentile(ms, 90),
        "min": float(ms.min()),
        "max": float(ms.max()),
        "count": len(ms),
    }


# Timelines already built, by the profile and config they were built for: every analyzer of
# one analysis asks for the same timeline, and it is built once.
_BUILT: list[tuple[Any, AnalysisConfig, Timeline]] = []


def build_timeline(profile: Profile, config: AnalysisConfig) -> Timeline:
    """The timeline of ``profile`` under ``config`` (built once per pair; see _BUILT)."""
    timeline = _built(profile, config)
    if timeline is None:
        timeline = _build(profile, config)
        _BUILT.append((profile, config, timeline))
        del _BUILT[:-2]  # the last two: an analysis and, at most, one beside it
    return timeline


def select_steps(profile: Profile, config: AnalysisConfig) -> Selection:
    """The devices, step windows and selected ops of ``profile`` under ``config``, as
    :func:`build_timeline` selects them, without the time sets and their breakdowns (most of
    the timeline's work): the timeline itself where one is built."""
    timeline = _built(profile, config)
    return timeline if timeline is not None else _build(profile, config, views=False)


def _built(profile: Profile, config: AnalysisConfig) -> Timeline | None:
    """The timeline already built for ``profile`` under ``config``, if any."""
    for built_profile, built_config, built in _BUILT:
        if built_profile is profile and built_config == config:
            return built
    return None


@overload
def _build(profile: Profile, config: AnalysisConfig, views: Literal[True] = True) -> Timeline: ...
@overload
def _build(profile: Profile, config: AnalysisConfig, views: Literal[False]) -> Selection: ...


def _build(profile: Profile, config: AnalysisConfig, views: bool = True) -> Selection:
    """The timeline; without ``views``, only its selection (DeviceSelection per device)."""
    notes: list[str] = []
    candidates = _analysed_devices(profile, config.host)
    source, steps_of = _step_tables(profile, candidates, notes)
    if source == "module_period" and not any(
        d.steps is not None and d.steps.n for d in profile.device_tables
    ):
        labels = sorted(
            {
                label
                for d in candidates
                if d.key in steps_of and (label := program_label(d.tables.modules)) is not None
            }
        )
        notes.append(
            "no Steps line or step markers: steps are the periods between executions of one "
            f"program, {', '.join(labels)} (the most time); the last execution only ends the "
            "last step"
        )
    selected: list[int] = []
    excluded: list[int] = []
    if source != SOURCE_OP_SPAN:
        numbers = sorted(
            {int(n) for steps in steps_of.values() for n in steps.array("step").tolist()}
        )
        selected, excluded = _select_steps(numbers, config, notes)
        stepless = [d for d in candidates if d.key not in steps_of or not steps_of[d.key].n]
        if stepless:
            # A device with ops but no steps of its own (a GPU that only ran memcpys) has no
            # window to measure; averaging it in as 100% idle would misstate the others.
            notes.append(
                "left out devices with ops but no steps: "
                + ", ".join(f"{d.host}/device:{d.device}" for d in stepless)
            )
    elif any(d.tables.ops.n for d in candidates):
        notes.append("no steps in this profile: each device's window is its first to last op")
    wanted = set(selected)
    micro_ps = int(config.micro_gap_us * 1e6)

    def view_of(candidate: _Candidate) -> DeviceSelection | None:
        steps = steps_of.get(candidate.key) if source != SOURCE_OP_SPAN else None
        if source != SOURCE_OP_SPAN and (steps is None or not steps.n):
            return None
        chosen = _selection(candidate, steps, wanted)
        if chosen is None:
            return None
        selection, start, end, apart = chosen
        if not views:
            return selection
        return _view(
            selection,
            start,
            end,
            apart,
            steps,
            micro_ps,
            period_steps=source == SOURCE_MODULE_PERIOD,
        )

    # Devices are independent and numpy lets go of the GIL in its loops: a thread each.
    workers = min(os.cpu_count() or 1, len(candidates))
    parallel = sum(c.tables.ops.n for c in candidates) >= _threads.PARALLEL_OPS
    with _threads.pool(workers, "tpuperf-timeline", parallel=parallel) as pool:
        built = [v for v in pool.map(view_of, candidates) if v is not None]
    common: dict[str, Any] = {
        "step_source": source,
        "steps_selected": tuple(selected),
        "steps_excluded": tuple(excluded),
        "notes": tuple(notes),
        "platform": profile.platform,
        "profile": profile,
    }
    if not views:
        return Selection(devices=tuple(built), **common)
    devices = tuple(v for v in built if isinstance(v, DeviceView))
    return Timeline(
        devices=devices,
        **common,
        peaks={
            v.key: chips.resolve_peaks(
                v.chip or None,
                v.peak_tflops,
                v.peak_hbm_gbps,
                config.peak_tflops,
                config.peak_hbm_gbps,
            )
            for v in devices
        },
    )


def _selection(
    candidate: _Candidate, steps: Table | None, wanted: set[int]
) -> tuple[DeviceSelection, np.ndarray, np.ndarray, bool] | None:
    """One device's windows (``steps``; the op span when None) and the ops that start in
    them; with, for its view, its ops' starts and ends (start + dur, made once) and whether
    they are apart (kernels.apart). None when no selected step falls on it."""
    ops = candidate.tables.ops
    start, dur = ops.array("start_ps"), ops.array("dur_ps")
    end = start + dur
    # Ops none empty, each starting after the last ends (a TPU op line, as a rule): in order.
    apart = kernels.apart(start, end)
    # Apart, the first op starts first and the last ends last: no pass over the op list.
    first, last = (start[0], end[-1]) if apart else (start.min(), end.max())
    span = Windows.of([-1], [first], [last])
    if steps is None:
        windows = all_windows = span
    else:
        all_windows = Windows.of(
            steps.array("step"), steps.array("start_ps"), steps.array("end_ps")
        )
        keep = np.isin(all_windows.step, np.fromiter(wanted, dtype=np.int64, count=len(wanted)))
        windows = Windows(
            all_windows.step[keep], all_windows.start_ps[keep], all_windows.end_ps[keep]
        )
        if not len(windows):
            return None
    selection = DeviceSelection(
        host=candidate.host,
        device=candidate.device,
        chip=candidate.chip,
        kind=candidate.kind,
        peak_tflops=candidate.peak_tflops,
        peak_hbm_gbps=candidate.peak_hbm_gbps,
        tables=candidate.tables,
        ops=ops,
        windows=windows,
        all_windows=all_windows,
        span=span,
        selected=_starting_in(start, windows, in_order=apart),
    )
    return selection, start, end, apart


def _view(
    selection: DeviceSelection,
    start: np.ndarray,
    end: np.ndarray,
    apart: bool,
    steps: Table | None,
    micro_ps: int,
    period_steps: bool = False,
) -> DeviceView:
    """One device's view: its selection, its time sets and their breakdown over its
    windows."""
    ops = selection.ops
    kind = _set_codes(ops.strings("kind"))
    sets = _device_sets(ops, start, end, kind, gpu=selection.kind == "GPU", apart=apart)
    span, windows, all_windows = selection.span, selection.windows, selection.all_windows
    iterations, gaps = (
        _iterations(windows, all_windows, periods=period_steps)
        if steps is not None
        else (span, span)
    )
    span_breakdown, breakdown, iteration_breakdown, gap_breakdown, all_breakdown = _breakdowns(
        sets, (span, windows, iterations, gaps, all_windows), micro_ps
    )
    return DeviceView(
        **{f.name: getattr(selection, f.name) for f in fields(DeviceSelection)},
        # The analyzers read compute, collective and other; busy and occupied were for the
        # breakdowns above, and are let go of (they are as large as the op list). A compute
        # set whose intervals are its compute ops is kept as their rows (see OpSpans).
        sets=DeviceSets(
            OpSpans.of(sets.compute, ops, kind, _SET_COMPUTE),
            sets.collective,
            sets.other,
            EMPTY,
            EMPTY,
        ),
        leaves=_leaves(ops, selection.selected, kind),
        breakdown=breakdown,
        iterations=iterations,
        iteration_breakdown=iteration_breakdown if steps is not None else breakdown,
        outside_steps=(
            {"outside_ps": gap_breakdown["step_ps"], "outside_no_op_ps": gap_breakdown["no_op_ps"]}
            if steps is not None
            else {"outside_ps": np.zeros(1, np.int64), "outside_no_op_ps": np.zeros(1, np.int64)}
        ),
        span_breakdown=span_breakdown,
        outside=_outside(span_breakdown, all_breakdown),
    )


def _window_runs(
    start: np.ndarray, windows: Windows, in_order: bool = False
) -> tuple[np.ndarray, np.ndarray] | None:
    """Where ops in time order (``in_order``: known to be) start in windows that do not
    overlap (a TPU op line's steps, as a rule), each window's ops are one run of rows
    [first, stop), found by two searches: those runs, one per window. None otherwise."""
    ws, we = windows.start_ps, windows.end_ps
    if not bool(np.all(ws[1:] >= we[:-1])):
        return None
    if not (in_order or bool(np.all(start[1:] >= start[:-1]))):
        return None
    first = kernels.search_sorted(start, ws, "left")
    return first, np.maximum(kernels.search_sorted(start, we, "left"), first)


def _starting_in(start: np.ndarray, windows: Windows, in_order: bool = False) -> np.ndarray:
    """Rows of the ops that start in one of ``windows``, in row order, int32 where that holds
    them (4 bytes an op): the windows' runs of rows where there are such (:func:`_window_runs`),
    else each op's window searched for."""
    dtype = np.int32 if len(start) < 2**31 else np.int64
    runs = _window_runs(start, windows, in_order)
    if runs is not None:
        first, stop = runs
        # Runs that touch the next (steps that end where the next begins) joined: few runs.
        if len(first):
            cut = np.flatnonzero(first[1:] != stop[:-1]) + 1
            first, stop = first[np.r_[0, cut]], stop[np.r_[cut - 1, len(stop) - 1]]
        if len(first) == 1:  # one run: made in place rather than copied in
            return np.arange(first[0], stop[0], dtype=dtype)
        rows = np.empty(int((stop - first).sum()), dtype=dtype)
        at = 0
        for a, b in zip(first.tolist(), stop.tolist(), strict=True):
            rows[at : at + b - a] = np.arange(a, b, dtype=dtype)
            at += b - a
        return rows
    return np.flatnonzero(window_of(start, windows.start_ps, windows.end_ps) >= 0).astype(dtype)


def _iterations(
    windows: Windows, all_windows: Windows, periods: bool = False
) -> tuple[Windows, Windows]:
    """The iterations of the selected steps, and the part of each after its step ends.

    Iteration i runs from step i's start to the start of the step after it (of every step,
    selected or not), so it holds the step and the host's time before the next one. A step
    with no successor (the last) has no measured iteration and is left out; when no selected
    step has one (a single step), or the steps leave no time between them, the iterations are
    the steps themselves, with no outside.
    Steps from module periods already run from one call's start to the next's (``periods``):
    they are their own iterations.
    """
    if periods:
        return windows, Windows(windows.step, windows.end_ps, windows.end_ps)
    nxt = np.searchsorted(all_windows.start_ps, windows.start_ps, side="right")
    has = nxt < len(all_windows)
    if not has.any() or np.array_equal(all_windows.end_ps[:-1], all_windows.start_ps[1:]):
        # No step with a successor, or steps that leave no time between them (a Steps line):
        # the steps are their own iterations, the last one included.
        return windows, Windows(windows.step, windows.end_ps, windows.end_ps)
    start = windows.start_ps[has]
    end = all_windows.start_ps[nxt[has]]
    # Overlapping steps (a step that ends after the next begins) have no time outside.
    step_end = np.minimum(windows.end_ps[has], end)
    step = windows.step[has]
    return Windows(step, start, end), Windows(step, step_end, end)


@dataclass(frozen=True, eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class _Candidate:
    host: str
    device: int
    chip: str
    kind: str
    peak_tflops: float
    peak_hbm_gbps: float
    tables: DeviceTables

    @property
    def key(self) -> tuple[str, int]:
        return self.host, self.device


def _analysed_devices(profile: Profile, host: str | None) -> list[_Candidate]:
    """The devices to analyse, by (host, device): those that ran ops, SparseCores left out
    (they run their own programs beside the TensorCore; their idle time is not the chip's)."""
    tables = profile.device_tables
    if host is not None:
        hosts = sorted({d.host for d in tables})
        if host not in hosts:
            raise UsageError(
                f"--host {host!r} is not in this profile; its hosts: {', '.join(hosts)}"
            )
    out = []
    for d in sorted(tables, key=lambda d: (d.host, d.device)):
        if (
            (host is not None and d.host != host)
            or not d.ops.n
            or d.row.get("core") == "SparseCore"
        ):
            continue
        out.append(
            _Candidate(
                host=d.host,
                device=d.device,
                chip=str(d.row.get("chip") or ""),
                kind=str(d.row.get("kind") or profile.platform),
                peak_tflops=float(d.row.get("peak_tflops", float("nan"))),
                peak_hbm_gbps=float(d.row.get("peak_hbm_gbps", float("nan"))),
                tables=d,
            )
        )
    return out


def _step_tables(
    profile: Profile, candidates: list[_Candidate], notes: list[str]
) -> tuple[str, dict[tuple[str, int], Table]]:
    """The step source used (the best one any device has, in DESIGN.md's order) and each
    device's steps from it. Steps that end where they start (or before) hold no time to
    share out; they are left out with a note."""
    steps = {
        d.key: d.tables.steps for d in candidates if d.tables.steps is not None and d.tables.steps.n
    }
    if not steps:
        # A Profile built without steps (from_tables): the dominant module's periods.
        steps = {
            d.key: s
            for d in candidates
            if (s := dominant_module_steps(d.tables.modules)) is not None and s.n
        }
    if not steps:
        return SOURCE_OP_SPAN, {}
    present = {value for s in steps.values() for value in s.strings("source").values}
    source = next((s for s in schema.STEP_SOURCES if s in present), sorted(present)[0])
    chosen = {}
    empty = 0
    for key, table in steps.items():
        keep = table.strings("source").eq(source)
        timed = table.array("end_ps") > table.array("start_ps")
        empty += int((keep & ~timed).sum())
        if (keep & timed).any():
            chosen[key] = table.take(keep & timed)
    if empty:
        notes.append(f"left out {empty} step(s) of zero or negative length")
    if not chosen:
        return SOURCE_OP_SPAN, {}
    return source, chosen


def _select_steps(
    numbers: list[int], config: AnalysisConfig, notes: list[str]
) -> tuple[list[int], list[int]]:
    if config.steps is not None:
        lo, hi = config.steps
        keep = [n for n in numbers if (lo is None or n >= lo) and (hi is None or n < hi)]
        if not keep:
            shown = f"{numbers[0]}..{numbers[-1]}" if numbers else "none"
            raise UsageError(
                f"--steps {'' if lo is None else lo}:{'' if hi is None else hi} selects no step; "
                f"this profile has steps {shown}"
            )
        return keep, [n for n in numbers if n not in set(keep)]
    warmup = max(int(config.warmup_steps), 0)
    if warmup and len(numbers) > warmup:
        return numbers[warmup:], numbers[:warmup]
    if warmup and numbers:
        notes.append(
            f"only {len(numbers)} step(s): kept all, warm-up ({warmup} step(s)) not left out"
        )
    return numbers, []


def _device_sets(
    ops: Table, start: np.ndarray, end: np.ndarray, kind: np.ndarray, gpu: bool, apart: bool
) -> DeviceSets:
    """Split a device's time into compute, exposed collective, other (copies), busy and
    occupied (see the module docstring); ``kind``: each op's set (_set_codes); ``apart``:
    kernels.apart of the ops."""
    lines = ops.strings("line")
    one_line = (
        len(lines.values) == 1
        or not len(lines)
        or lines.index.min() == lines.index.max()
        or len(distinct(lines.codes)) == 1
    )
    if one_line:
        # One line whose ops neither nest nor overlap (a TPU op line, as a rule): the sets are
        # its ops by kind, in order, touching neighbours joined; one pass.
        every_compute = not (kind != _SET_COMPUTE).any()
        if every_compute and apart:
            # Compute ops only, none empty and none touching the next (the rule on a TPU op
            # line): the one set is the ops themselves, their columns rather than a copy (8
            # bytes an op kept), as kind_runs would find after copying them.
            occupied = nonempty(start, end)
            return DeviceSets(occupied, EMPTY, EMPTY, occupied, occupied)
        # A line of compute ops only has one set, every op: the others are empty.
        runs = kernels.kind_runs(start, end, kind, 0 if every_compute else 3)
        if runs is not None and every_compute:
            occupied = nonempty(*runs[0])
            return DeviceSets(occupied, EMPTY, EMPTY, occupied, occupied)
        if runs is not None:
            compute, collective, other, occupied = (nonempty(s, e) for s, e in runs)
            return DeviceSets(compute, collective, other, compute if gpu else occupied, occupied)
    is_coll_all = kind == _SET_COLLECTIVE
    is_other_all = kind == _SET_OTHER
    is_comp_all = kind == _SET_COMPUTE
    line = lines.codes
    comp_parts, coll_parts, other_parts = [], [], []
    for code in distinct(line):
        on = line == code
        is_coll = on & is_coll_all
        coll = union(start[is_coll], end[is_coll])
        is_other = on & is_other_all
        other = subtract(union(start[is_other], end[is_other]), coll)
        is_comp = on & is_comp_all
        comp = subtract(subtract(union(start[is_comp], end[is_comp]), coll), other)
        comp_parts.append(comp)
        coll_parts.append(coll)
        other_parts.append(other)
    compute = merge(*comp_parts)
    collective = subtract(merge(*coll_parts), compute)
    other = subtract(subtract(merge(*other_parts), compute), collective)
    occupied = merge(compute, collective, other)
    return DeviceSets(compute, collective, other, compute if gpu else occupied, occupied)


_SET_COMPUTE, _SET_COLLECTIVE, _SET_OTHER = 0, 1, 2


def _set_codes(kind: Strings) -> np.ndarray:
    """Each op's set as int8: 0 compute, 1 collective, 2 other (copies), -1 none."""
    per_value = np.full(len(kind.values) + 1, -1, dtype=np.int8)
    kinds = ((schema.KIND_COMPUTE,), (schema.KIND_COLLECTIVE,), _OTHER_KINDS)
    for code, wanted in enumerate(kinds):
        for value in wanted:
            if (at := kind.code(value)) >= 0:
                per_value[at] = code
    if kind.mapping is not None:
        per_index = per_value[kind.mapping]  # (on TPU one per metadata row)
        if len(per_index) and (per_index == per_index[0]).all():  # every op in one set
            return np.full(len(kind), per_index[0], dtype=np.int8)
    return kind.per_row(per_value)


def _leaves(ops: Table, rows: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """``rows`` that are compute ops with nothing nested inside them (see DeviceView);
    ``kind``: each op's set (_set_codes)."""
    if (kind != _SET_COMPUTE).any():  # (a TPU op line often runs nothing but compute ops)
        rows = rows[kind[rows] == _SET_COMPUTE]
    self_ps, dur_ps = ops.array("self_ps"), ops.array("dur_ps")
    if self_ps is dur_ps:  # no op of the device nests another: every op is a leaf
        return rows
    return rows[self_ps[rows] >= dur_ps[rows]]


def _breakdowns(
    sets: DeviceSets, parts: tuple[Windows, ...], micro_ps: int
) -> list[dict[str, np.ndarray]]:
    """The breakdown of each of several window sets (see _breakdown), measured together: the
    set algebra is a few passes over all their windows at once rather than over each set.
    Each part's columns are its own (copies, not views of the whole), so that what a view
    keeps of one part does not keep all of them (13 int64 columns of every window of every
    part: 7.6 MB a device of 18,000 steps)."""
    every = Windows(
        np.concatenate([w.step for w in parts]),
        np.concatenate([w.start_ps for w in parts]),
        np.concatenate([w.end_ps for w in parts]),
    )
    whole = _breakdown(sets, every, micro_ps)
    bounds = np.cumsum([0] + [len(w) for w in parts]).tolist()
    return [
        {name: values[lo:hi].copy() for name, values in whole.items()}
        for lo, hi in itertools.pairwise(bounds)
    ]


def _breakdown(sets: DeviceSets, win: Windows, micro_ps: int) -> dict[str, np.ndarray]:
    """BREAKDOWN_COLUMNS of each window of ``win`` (in its order; windows may overlap)."""
    ws, we = win.start_ps, win.end_ps
    measured: dict[int, np.ndarray] = {}  # by set: busy is the same set as occupied or compute

    def inside(times: Intervals) -> np.ndarray:
        """The length of ``times`` inside each window."""
        if id(times) not in measured:
            measured[id(times)] = measure_in(times, ws, we)
        return measured[id(times)]

    out: dict[str, np.ndarray] = {"step_ps": we - ws}
    out["compute_ps"] = inside(sets.compute)
    out["exposed_collective_ps"] = inside(sets.collective)
    out["other_ps"] = inside(sets.other)
    out["busy_ps"] = inside(sets.busy)
    out["idle_ps"] = out["step_ps"] - out["busy_ps"]
    occupied_ps = inside(sets.occupied)
    out["no_op_ps"] = out["step_ps"] - occupied_ps
    edges = window_edges(sets.occupied, ws, we)  # (searched once for the three below)
    leading = first_inside(sets.occupied, ws, we, edges) - ws
    trailing = np.where(occupied_ps > 0, we - last_inside(sets.occupied, ws, we, edges), 0)
    out["leading_idle_ps"] = leading
    out["trailing_idle_ps"] = trailing
    out["interior_idle_ps"] = out["no_op_ps"] - leading - trailing
    micro, micro_n, macro_n = interior_gaps(sets.occupied, ws, we, micro_ps, edges)
    out["micro_idle_ps"] = micro
    out["micro_gaps"] = micro_n
    out["macro_gaps"] = macro_n
    return out


_OUTSIDE_COLUMNS = (
    "step_ps",
    "compute_ps",
    "exposed_collective_ps",
    "other_ps",
    "busy_ps",
    "no_op_ps",
)


def _outside(span: dict[str, np.ndarray], steps: dict[str, np.ndarray]) -> dict[str, int]:
    """Span totals less step totals: what happened on the device outside every step."""
    out = {}
    for column in _OUTSIDE_COLUMNS:
        # Steps can reach past the first or last op; time there is not "outside".
        value = max(int(span[column].sum()) - int(steps[column].sum()), 0)
        out["outside_ps" if column == "step_ps" else column] = value
    return out
