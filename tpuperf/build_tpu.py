"""A TPU device plane's tables: ops of the ``XLA Ops`` line (per-op costs from the event
metadata, spread to the events by index), module executions, ``Async XLA Ops`` windows, all
on the device clock (:class:`~tpuperf.tables.DeviceClock`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import numpy as np

from tpuperf import kernels
from tpuperf._dataclasses import dataclass
from tpuperf.columns import Lookup, Strings, Table, distinct, factorize
from tpuperf.tables import (
    EMPTY_ASYNC,
    EMPTY_MODULES,
    IDENTITY_CLOCK,
    DeviceClock,
    classify_op,
    device_clock,
    empty_ops,
    find_line,
    instruction_name,
    placed_times,
    self_time,
    split_module_name,
)
from tpuperf.xspace import Line, Plane

# Line names on TensorCore planes, then on SparseCore planes ("/device:TPU:N SparseCore M").
_TPU_OPS_LINE = ("XLA Ops", "Sparse Core Ops")
TPU_MODULES_LINE = ("XLA Modules", "Sparse Core Modules")
_TPU_ASYNC_LINE = ("Async XLA Ops",)

# memory_access_breakdown entries: operation 1 read, 2 write; memory space 1 HBM,
# 2 CMEM, 3 VMEM (XProf's MemoryAccessed enums).
_MEMORY_SPACES = {1: "hbm", 2: "cmem", 3: "vmem"}
_MEMORY_OPERATIONS = {1: "read", 2: "write"}


def _costs(values: np.ndarray | list[Any]) -> np.ndarray:
    """A cost stat (FLOPs, bytes) per metadata row as float64: NaN (unknown) where it is not
    a number from 0 up to 2**64 (XLA writes them as 64-bit integers; 1e308 is a broken writer's,
    and would make every sum infinite)."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
        costs = values.astype(np.float64)
    else:
        costs = np.array(
            [
                v if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan
                for v in values
            ],
            dtype=np.float64,
        )
    costs[~np.isfinite(costs) | (costs < 0) | (costs >= 2.0**64)] = np.nan
    return costs


_COST_STATS = ("flops", "model_flops", "bytes_accessed")


class SharedMetadata:
    """The columns a host's TPU planes read from their event metadata, made once per metadata
    (:class:`_MetadataColumns`): the chips of one program carry the same metadata, which
    :func:`tpuperf.xspace.decode` decodes once for them, so their names, costs and memory
    bytes per metadata row are the same; only which rows each chip's ops use differs. Used
    from the device threads at once: a chip asking for columns being made waits for them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[Any, tuple[threading.Lock, list[_MetadataColumns]]] = {}

    def of(self, plane: Plane) -> _MetadataColumns:
        # Stats are read by name: the same metadata under other stat names is other columns.
        key = (id(plane.metadata), tuple(sorted(plane.stat_names.items())))
        with self._lock:
            lock, made = self._made.setdefault(key, (threading.Lock(), []))
        with lock:
            if not made:
                made.append(_MetadataColumns.of(plane))
        return made[0]


def tpu_ops(
    plane: Plane, module_names: dict[str, str], shared: SharedMetadata | None = None
) -> tuple[Table, Table, Table, DeviceClock]:
    """The plane's ops, module executions and async windows, on its device clock.
    ``shared`` holds the metadata columns already made for other chips of the host."""
    n_meta = len(plane.metadata.ids)
    line = find_line(plane, _TPU_OPS_LINE)
    async_line = find_line(plane, _TPU_ASYNC_LINE)
    clock = IDENTITY_CLOCK
    host_times: tuple[np.ndarray, np.ndarray] | None = None
    if line is None:
        ops = empty_ops()
    else:
        events = line.int_events(("device_offset_ps", "device_duration_ps"))
        rows = _metadata_rows(plane, events.metadata_id, np.int32)
        start, dur, clock = device_clock(events, line.timestamp_ns)
        # The ops' host-clock times: what async windows are matched to them by (a line of
        # 200,000 ops a chip: made only where the plane has such windows).
        if async_line is not None:
            host_times = (events.start_ps(line.timestamp_ns), events.duration_ps)
        del events
        # Of the metadata, the rows the op line uses only: a plane's metadata also names every
        # step and module execution, thousands on a long capture.
        used = distinct(rows)
        columns = (shared or SharedMetadata()).of(plane)

        def strings(values: _Factors) -> Strings:
            return values.at(used).strings(rows, used, n_meta)

        program = columns.program_ids.at(used)
        classes = columns.classes.at(used)
        ops = Table(
            {
                "line": Strings(rows, (line.name,), np.zeros(n_meta + 1, dtype=np.int32)),
                "module": program.mapped(lambda p: module_names.get(p, "")).strings(
                    rows, used, n_meta
                ),
                "program_id": program.strings(rows, used, n_meta),
                "op": strings(columns.op_names),
                "hlo_text": strings(columns.hlo_texts),
                "category": strings(columns.categories),
                "kind": classes.mapped(itemgetter(0)).strings(rows, used, n_meta),
                "collective": classes.mapped(itemgetter(1)).strings(rows, used, n_meta),
                "async_role": classes.mapped(itemgetter(2)).strings(rows, used, n_meta),
                "start_ps": start,
                "dur_ps": dur,
                "self_ps": self_time(start, dur),
                # Each chip its own copy (a few thousand rows): tables share no arrays.
                **{name: Lookup(rows, values.copy()) for name, values in columns.numbers.items()},
                "tf_op": strings(columns.tf_ops),
                "source": strings(columns.sources),
                "step": np.full(len(rows), -1, dtype=np.int64),
            }
        )
    modules = _tpu_modules(plane, clock)
    if line is not None:
        module = ops.strings("module")
        missing = module.eq("")
        if missing.any():
            names = np.array(module.tolist(), dtype=object)
            names[missing] = _modules_by_time(modules, ops.array_at("start_ps", missing))
            ops = ops.with_columns(module=Strings.from_list(names.tolist()))
    async_ops = (
        _tpu_async(plane, async_line, clock, ops, host_times)
        if async_line is not None
        else EMPTY_ASYNC
    )
    return ops, modules, async_ops, clock


def _metadata_rows(plane: Plane, metadata_id: np.ndarray, dtype: Any = np.int64) -> np.ndarray:
    """The metadata row of each event; an unknown id points at the extra last row ("", NaN)."""
    return plane.metadata.rows(metadata_id, unknown=len(plane.metadata.ids), dtype=dtype)


@dataclass(frozen=True, eq=False)
class _OpMeta:
    """What a TPU plane's metadata says of each of ``rows`` (metadata rows; the row past the
    last, for events of unknown metadata, has no names and no stats): the op's name, its HLO
    text, hlo_category, program id and classes (kind, collective, async role)."""

    rows: np.ndarray
    op_names: list[str]
    hlo_texts: list[str]
    categories: list[str]
    program_ids: list[str]
    classes: list[tuple[str, str, str]]

    @classmethod
    def of(cls, plane: Plane, rows: np.ndarray) -> _OpMeta:
        meta = plane.metadata
        n = len(meta.ids)
        texts = [meta.names[row] if row < n else "" for row in rows.tolist()]
        display = [meta.display_names[row] if row < n else "" for row in rows.tolist()]
        names = [shown or text for shown, text in zip(display, texts, strict=True)]
        categories = list(map(_text, plane.metadata_values("hlo_category", rows, "")))
        program_ids = list(map(_program_id, plane.metadata_values("program_id", rows)))
        classes = list(map(classify_op, names, categories))
        return cls(rows, names, texts, categories, program_ids, classes)

    def texts(self, plane: Plane, stat: str) -> list[str]:
        """A text stat of the metadata at ``rows`` ("" where it is not text)."""
        return list(map(_text, plane.metadata_values(stat, self.rows, "")))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _program_id(value: Any) -> str:
    return str(value) if value is not None else ""


@dataclass(frozen=True, eq=False)
class _MetadataColumns:
    """What a TPU plane's event metadata says of every row, the row past the last (events of
    unknown metadata: no names, no stats) included: the name columns of its ops, factorized,
    and their cost and memory-bytes columns (schema names; NaN where unknown)."""

    op_names: _Factors
    hlo_texts: _Factors
    categories: _Factors
    program_ids: _Factors
    classes: _Factors
    tf_ops: _Factors
    sources: _Factors
    numbers: dict[str, np.ndarray]

    @classmethod
    def of(cls, plane: Plane) -> _MetadataColumns:
        n_meta = len(plane.metadata.ids)
        meta = _OpMeta.of(plane, np.arange(n_meta + 1))
        numbers = {
            name: np.append(_costs(plane.metadata_stat(name, np.nan)), np.nan)
            for name in _COST_STATS
        }
        return cls(
            _Factors.of(meta.op_names),
            _Factors.of(meta.hlo_texts),
            _Factors.of(meta.categories),
            _Factors.of(meta.program_ids),
            _Factors.of(meta.classes),
            _Factors.of(meta.texts(plane, "tf_op")),
            _Factors.of(meta.texts(plane, "source")),
            numbers | _memory_breakdown(plane, n_meta),
        )


@dataclass(frozen=True, eq=False)
class _Factors:
    """Values, one per metadata row in use, as codes into ``unique`` (in order of first
    appearance)."""

    codes: np.ndarray
    unique: tuple[Any, ...]

    @classmethod
    def of(cls, values: list[Any]) -> _Factors:
        return cls(*factorize(values))

    def at(self, rows: np.ndarray) -> _Factors:
        """The values at ``rows`` alone, factorized: what factorizing them gives (codes in
        their order of first appearance, only the values they hold), from the codes."""
        codes = self.codes[rows]
        first = kernels.first_rows(codes, len(self.unique))
        assert first is not None  # codes are in range: factorize made them
        # The codes held, by first appearance (one not held has first row len(codes), last).
        held = np.argsort(first, kind="stable")[: int(np.count_nonzero(first < len(codes)))]
        renumber = np.zeros(len(self.unique), dtype=np.int32)
        renumber[held] = np.arange(len(held), dtype=np.int32)
        return _Factors(renumber[codes], tuple(map(self.unique.__getitem__, held.tolist())))

    def mapped(self, function: Callable[[Any], str]) -> _Factors:
        """What ``function`` makes of each value: computed once per distinct value, and in the
        order that factorizing the results row by row would give."""
        codes, unique = factorize([function(value) for value in self.unique])
        return _Factors(codes[self.codes], unique)

    def strings(self, rows: np.ndarray, used: np.ndarray, n_meta: int) -> Strings:
        """The strings of events of metadata ``rows``, when these are the values of the rows
        ``used`` (the distinct ``rows``, in order) of a plane of ``n_meta`` metadata rows."""
        mapping = np.zeros(n_meta + 1, dtype=np.int32)
        mapping[used] = self.codes
        return Strings(rows, self.unique, mapping)


def _memory_breakdown(plane: Plane, n: int) -> dict[str, np.ndarray]:
    """HBM / VMEM / CMEM read and write bytes per metadata row (NaN where not recorded), with
    an extra last row (NaN) for events whose metadata is unknown."""
    rows, operation, memory_space, size = plane.metadata_memory_breakdown()
    recorded = np.zeros(n + 1, dtype=bool)
    recorded[np.flatnonzero(_has_stat(plane, "memory_access_breakdown"))] = True
    columns = {}
    for space_code, space in _MEMORY_SPACES.items():
        for operation_code, direction in _MEMORY_OPERATIONS.items():
            column = np.where(recorded, 0.0, np.nan)
            pick = (memory_space == space_code) & (operation == operation_code)
            np.add.at(column, rows[pick], size[pick].astype(np.float64))
            columns[f"{space}_{direction}_bytes"] = column
    return columns


def _has_stat(plane: Plane, name: str) -> np.ndarray:
    """Whether each metadata row carries the stat ``name``."""
    stats = plane.metadata.stats
    has = np.zeros(len(plane.metadata.ids), dtype=bool)
    has[stats.owner[np.isin(stats.metadata_id, plane.stat_ids(name))]] = True
    return has


def _modules_by_time(modules: Table, starts: np.ndarray) -> list[str]:
    """Module of each op start, by which module execution contains it ("" for none)."""
    if not modules.n:
        return [""] * len(starts)
    module_start = modules.array("start_ps")
    order = np.argsort(module_start, kind="stable")
    module_start = module_start[order]
    module_end = module_start + modules.array_at("dur_ps", order)
    names = modules.strings("module").take(order).tolist()
    index = np.searchsorted(module_start, starts, side="right") - 1
    return [
        names[i] if i >= 0 and s < module_end[i] else ""
        for i, s in zip(index.tolist(), np.asarray(starts).tolist(), strict=True)
    ]


def _tpu_modules(plane: Plane, clock: DeviceClock) -> Table:
    """Executions of the `XLA Modules` line, on the device clock: each runs from about its
    first op's start to its last op's end (see DeviceClock.place)."""
    line = find_line(plane, TPU_MODULES_LINE)
    if line is None:
        return EMPTY_MODULES
    rows = _metadata_rows(plane, line.metadata_id)
    n_meta = len(plane.metadata.names)
    used = distinct(rows)
    names, program_ids = [], []
    for row in used.tolist():
        name = plane.metadata.names[row] if row < n_meta else ""
        module, program_id = split_module_name(name) or (name, "")
        names.append(module)
        program_ids.append(program_id)
    start, dur = placed_times(line, clock)
    return Table(
        {
            "module": _Factors.of(names).strings(rows, used, n_meta),
            "program_id": _Factors.of(program_ids).strings(rows, used, n_meta),
            "start_ps": start,
            "dur_ps": dur,
        }
    )


def _tpu_async(
    plane: Plane,
    line: Line,
    clock: DeviceClock,
    ops: Table,
    host_times: tuple[np.ndarray, np.ndarray] | None,
) -> Table:
    """Windows of the `Async XLA Ops` line ``line``, on the device clock: each from its start
    op's start to its done op's end, the ops it names (see _nearest_named). ``host_times`` are
    the ops' host-clock starts and durations."""
    n_meta = len(plane.metadata.names)
    rows = _metadata_rows(plane, line.metadata_id)
    used = distinct(rows)
    meta = _OpMeta.of(plane, used)
    done_codes, done_names = line.stat_strings("hlo_op")
    done = Strings.from_values(done_names, done_codes)
    start, dur = placed_times(line, clock)
    # The event's display name is generic ("async-copy"); its HLO text names the start op.
    start_op = _Factors.of(
        [
            instruction_name(text) if text.lstrip().startswith("%") else name
            for text, name in zip(meta.hlo_texts, meta.op_names, strict=True)
        ]
    ).strings(rows, used, n_meta)
    if host_times is not None and len(clock.host_start) and ops.n:
        op_host_start, op_host_dur = host_times
        op_name = ops.strings("op")
        op_start = ops.array("start_ps")
        op_end = op_start + ops.array("dur_ps")
        host_start = line.start_ps
        host_end = host_start + line.duration_ps
        found_start = _nearest_named(start_op, host_start, op_name, op_host_start, op_start)
        found_end = _nearest_named(done, host_end, op_name, op_host_start + op_host_dur, op_end)
        end = np.where(found_end >= 0, found_end, start + dur)
        start = np.where(found_start >= 0, found_start, start)
        dur = np.maximum(end - start, 0)
    return Table(
        {
            "op": start_op,
            "done_op": done,
            "category": _Factors.of(meta.categories).strings(rows, used, n_meta),
            "collective": _Factors.of([c[1] for c in meta.classes]).strings(rows, used, n_meta),
            "start_ps": start,
            "dur_ps": dur,
        }
    )


def _nearest_named(
    names: Strings,
    host_times: np.ndarray,
    op_names: Strings,
    op_host_times: np.ndarray,
    op_placed_times: np.ndarray,
) -> np.ndarray:
    """For each (name, host time), the placed time of the op so named whose host time is
    nearest; -1 where no op has the name. Host times of one event and the ops it names agree,
    while several ops can share one host instant, so the name decides."""
    out = np.full(len(names), -1, dtype=np.int64)
    name_codes = names.codes
    op_codes = op_names.codes
    for code in distinct(name_codes).tolist():
        name = names.values[code]
        op_code = op_names.code(name)
        if not name or op_code < 0:
            continue
        ask = np.flatnonzero(name_codes == code)
        have = np.flatnonzero(op_codes == op_code)
        order = np.argsort(op_host_times[have], kind="stable")
        times = op_host_times[have][order]
        placed = op_placed_times[have][order]
        at = np.searchsorted(times, host_times[ask])
        before = np.clip(at - 1, 0, len(times) - 1)
        after = np.clip(at, 0, len(times) - 1)
        pick = np.where(
            np.abs(times[before] - host_times[ask]) <= np.abs(times[after] - host_times[ask]),
            before,
            after,
        )
        out[ask] = placed[pick]
    return out


def plane_clock(plane: Plane) -> DeviceClock | None:
    """The device clock a TPU plane's tables are built on (from its op line, as ``_tpu_ops``
    builds it), to place the plane's other lines when they are read again; None without an op
    line with events."""
    line = find_line(plane, _TPU_OPS_LINE)
    if line is None or not len(line):
        return None
    events = line.int_events(("device_offset_ps", "device_duration_ps"))
    _, _, clock = device_clock(events, line.timestamp_ns)
    line.release()
    return clock
