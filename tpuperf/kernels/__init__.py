"""The hot loops: one boundary between tpuperf and its optional C module.

Each kernel below has two implementations with the same signature: one in C
(``tpuperf/_wire_native.c``, reached through :mod:`tpuperf.kernels._c`, the only importer of
the C module) and its numpy twin (:mod:`tpuperf.kernels._numpy`). This module picks one, once:
C where it is built, numpy where it is not or where ``TPUPERF_DECODER=numpy`` asks for it.
Callers never ask which they got: arguments are checked and made contiguous here, results are
numpy arrays, and a malformed profile raises :class:`DecodeError` with the same message either
way (tests/test_kernels.py checks every kernel's two implementations against each other).

Buffers (``data``) are anything with the buffer protocol: bytes, mmap, a uint8 array.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from tpuperf.kernels.wire import DecodeError

# Every kernel, by name: tests/test_kernels.py fails for one without a parity case.
KERNELS = (
    "event_records",
    "skip_records",
    "extent",
    "int_events",
    "stats",
    "scan_fields",
    "message_fields",
    "texts",
    "factorize",
    "kind_runs",
    "apart",
    "union_length",
    "search_sorted",
    "gap_sums",
    "dense_groups",
    "first_rows",
    "counts",
    "group_sums",
    "roofline_sums",
    "group_totals",
    "group_nansums",
    "bootstrap_medians",
)

# The two implementations: "native" (the C module) and "numpy".
IMPLEMENTATIONS = ("native", "numpy")

# Integer stats read into event columns (int_events) mark an event without the stat so.
MISSING = int(np.iinfo(np.int64).min)

# (run_end, metadata_id, offset_ps, duration_ps, stat_owner, stat_start, stat_stop)
EventRecords = tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def numpy_asked() -> bool:
    """Whether ``TPUPERF_DECODER=numpy`` asks for the numpy kernels where C is built."""
    return os.environ.get("TPUPERF_DECODER", "").strip().lower() == "numpy"


def load(name: str) -> ModuleType:
    """The implementation ``name`` ("native" or "numpy"): a module with every kernel, of the
    signatures below (tests/test_kernels.py checks both); ImportError where C is not built."""
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"no kernels {name!r}: one of {', '.join(IMPLEMENTATIONS)}")
    if name == "native":
        return importlib.import_module("tpuperf.kernels._c")
    return importlib.import_module("tpuperf.kernels._numpy")


def _choose() -> tuple[str, ModuleType]:
    if not numpy_asked():
        try:
            return "native", load("native")
        except ImportError:  # pragma: no cover - depends on the build
            pass
    return "numpy", load("numpy")


_name, _impl = _choose()


def implementation() -> str:
    """Which implementation runs the kernels: ``native`` (C) or ``numpy``."""
    return _name


def native_built() -> bool:
    """Whether the C module is built (whether or not it is in use)."""
    try:
        load("native")
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def use(name: str) -> Iterator[None]:
    """Run the kernels with the implementation ``name`` for the duration (tests, benchmarks)."""
    global _name, _impl
    saved = _name, _impl
    _name, _impl = name, load(name)
    try:
        yield
    finally:
        _name, _impl = saved


# --------------------------------------------------------------------------- checks


def _int64(values: Any) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64)


def _span(data: Any, first: int, stop: int, what: str) -> tuple[int, int]:
    first, stop = int(first), int(stop)
    if first < 0 or stop > memoryview(data).nbytes or first > stop:
        raise DecodeError(f"{what} span outside the buffer")
    return first, stop


def _spans(starts: Any, stops: Any) -> tuple[np.ndarray, np.ndarray]:
    starts, stops = _int64(starts), _int64(stops)
    if starts.shape != stops.shape or starts.ndim != 1:
        raise ValueError("starts and stops differ in length")
    return starts, stops


# --------------------------------------------------------------------------- kernels


def event_records(data: Any, first: int, stop: int) -> EventRecords:
    """The run of event records (XLine.events) at ``first``, up to ``stop`` at most, as int64
    columns: (run_end, metadata_id, offset_ps, duration_ps, stat_owner, stat_start,
    stat_stop), the stats as the event each belongs to and the span of its payload."""
    return _impl.event_records(data, *_span(data, first, stop, "line"))


def skip_records(data: Any, first: int, stop: int) -> tuple[int, int]:
    """(run_end, n_events): where the run of event records at ``first`` ends, read without
    decoding the events."""
    return _impl.skip_records(data, *_span(data, first, stop, "line"))


def extent(data: Any, first: int, stop: int) -> tuple[int, int, int, int]:
    """(run_end, n_events, first_offset_ps, last_end_ps) of the run of event records at
    ``first``, keeping no event; with no events, (run_end, 0, int64 max, int64 min)."""
    return _impl.extent(data, *_span(data, first, stop, "line"))


# The most integer stats int_events reads at once (the C loop's fixed array).
MAX_INT_COLUMNS = 16


def int_events(
    data: Any,
    first: int,
    stop: int,
    wanted_ids: Any,
    wanted_columns: Any,
    n_columns: int,
    keep_column: int = -1,
    expected: int = 0,
) -> tuple[int, list[np.ndarray]]:
    """The run of event records at ``first`` with chosen integer stats (int64, uint64 or ref
    values) as columns: (run_end, [metadata_id, offset_ps, duration_ps, column 0, ...]).

    The stat with id ``wanted_ids[i]`` goes to column ``wanted_columns[i]`` (the first entry
    of an id repeated), MISSING where an event lacks it (a later stat of an event wins). With
    ``keep_column >= 0`` only the events that have that column's stat are kept. ``expected``
    (the run's events, where known) sizes the columns; any number gives the same result."""
    ids, columns = _int64(wanted_ids), _int64(wanted_columns)
    if not 0 <= n_columns <= MAX_INT_COLUMNS or ids.shape != columns.shape:
        raise ValueError(f"int_events: 0 to {MAX_INT_COLUMNS} columns, one for each id")
    if len(columns) and (int(columns.min()) < 0 or int(columns.max()) >= n_columns):
        raise ValueError("int_events: a wanted column is out of range")
    if keep_column >= n_columns:
        raise ValueError("int_events: keep_column is out of range")
    first, stop = _span(data, first, stop, "line")
    return _impl.int_events(
        data, first, stop, ids, columns, int(n_columns), int(keep_column), max(int(expected), 0)
    )


def stats(data: Any, starts: Any, stops: Any) -> tuple[np.ndarray, ...]:
    """XStat payloads (at ``starts``/``stops``) decoded into columns: (metadata_id int64,
    kind uint8 (a STAT_* code: that of the last value field), int_value int64, double_value
    float64, text_start int64, text_stop int64)."""
    return _impl.stats(data, *_spans(starts, stops))


def scan_fields(data: Any, start: int, stop: int) -> tuple[np.ndarray, ...]:
    """The fields of one message as int64 columns: (number, wire, field_start, value_start,
    value_stop); a length-delimited value's span is its payload."""
    return _impl.scan_fields(data, *_span(data, start, stop, "message"))


# What message_fields returns: per field key (number * 8 + wire type, see wire.field_key),
# (message index, value, value stop) as int64 columns.
Fields = dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]


def message_fields(data: Any, starts: Any, stops: Any) -> Fields:
    """The fields of many small messages (at ``starts``/``stops``) at once, per field key
    (number * 8 + wire type): the index of the message of each, its value (a varint as
    int64, a fixed64's raw bits, a length-delimited field's payload start, 0 for a fixed32)
    and where the value ends. Each key's entries come in the order of rounds that read the
    first field of every message, then the second, ...; keys in the order first met so."""
    return _impl.message_fields(data, *_spans(starts, stops))


def texts(data: Any, starts: Any, stops: Any) -> list[str]:
    """The spans of ``data`` decoded as UTF-8, bad bytes replaced."""
    return _impl.texts(data, *_spans(starts, stops))


def factorize(values: Sequence[Any]) -> tuple[np.ndarray, tuple[Any, ...]]:
    """(codes, distinct values): each of hashable ``values`` as an int32 code into the
    distinct values, in order of first appearance; equal values (``==`` of equal hashes) are
    one, as a dict's keys are."""
    return _impl.factorize(values)


def kind_runs(
    starts: Any, ends: Any, kinds: Any, n_kinds: int
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """The interval sets of one line of ops in order: for each kind 0 .. n_kinds - 1 (int8
    codes; others belong to no kind) and last for all ops, (starts, ends) of its ops with
    touching ones joined and empty ones (end <= start) left out. None where two ops overlap
    (the caller then takes the general way)."""
    starts, ends = _spans(starts, ends)
    kinds = np.ascontiguousarray(kinds, dtype=np.int8)
    if kinds.shape != starts.shape or not 0 <= n_kinds <= 100:
        raise ValueError("kind_runs: columns of different lengths")
    return _impl.kind_runs(starts, ends, kinds, int(n_kinds))


def apart(starts: Any, ends: Any) -> bool:
    """Whether every interval [starts[i], ends[i]) is non-empty and starts after the one
    before it ends: a line of ops that is its own interval set (kind_runs would copy it)."""
    return bool(_impl.apart(*_spans(starts, ends)))


# Runs of intervals union_length takes at most (it says None for more).
MAX_RUNS = 64


def union_length(runs: Sequence[tuple[Any, Any]]) -> int | None:
    """The length of the union of the intervals [start, end) of ``runs`` ((starts, ends) of
    int64 each; empty intervals add nothing), each run in order of start (a line of ops):
    what ``intervals.union`` of them all totals, without sorting them. None when a run is out
    of order, or there are more than MAX_RUNS runs."""
    if len(runs) > MAX_RUNS:
        return None
    pairs = [_spans(starts, ends) for starts, ends in runs]
    return _impl.union_length(tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))


def search_sorted(a: Any, v: Any, side: str = "left") -> np.ndarray:
    """``np.searchsorted(a, v, side)`` (int64) of int64 ``a`` sorted in increasing order (an
    interval set's starts or ends), each search starting from the answer before: fast where
    ``v`` comes in runs in increasing order (windows' edges)."""
    if side not in ("left", "right"):
        raise ValueError(f"search_sorted: side {side!r} is not 'left' or 'right'")
    a, v = _int64(a), _int64(v)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError("search_sorted: one-dimensional columns")
    return _impl.search_sorted(a, v, side == "right")


def gap_sums(starts: Any, ends: Any, cuts: Any, short_ps: int) -> tuple[np.ndarray, np.ndarray]:
    """For each cut (sorted, each in [0, n - 1] for n intervals), of the gaps between
    neighbouring intervals before it (gap k = starts[k + 1] - ends[k], k < cut) those shorter
    than ``short_ps``: their summed length and their count, as int64 (sums wrap as numpy's
    integer sums do)."""
    starts, ends = _spans(starts, ends)
    cuts = _int64(cuts)
    if cuts.ndim != 1 or (
        len(cuts)
        and (
            int(cuts[0]) < 0
            or int(cuts[-1]) > max(len(starts) - 1, 0)
            or bool((cuts[1:] < cuts[:-1]).any())
        )
    ):
        raise ValueError("gap_sums: cuts out of order or out of range")
    return _impl.gap_sums(starts, ends, cuts, int(short_ps))


def dense_groups(keys: Any, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(group of each row, first row of each group) for int64 keys in [0, ``size``), groups
    numbered in order of first appearance; ValueError for a key outside."""
    return _impl.dense_groups(_int64(keys), int(size))


def first_rows(codes: np.ndarray, n_codes: int) -> np.ndarray | None:
    """The first row holding each code 0 .. n_codes - 1 of int32 or int64 ``codes`` (int64;
    ``len(codes)`` for a code no row has); None when a code lies outside [0, n_codes)."""
    codes = np.ascontiguousarray(codes)
    if codes.dtype not in (np.int32, np.int64) or codes.ndim != 1 or n_codes < 0:
        raise ValueError("first_rows: int32 or int64 codes")
    return _impl.first_rows(codes, int(n_codes))


def counts(codes: np.ndarray, n_codes: int) -> np.ndarray | None:
    """How many of int32 or int64 ``codes`` hold each code 0 .. n_codes - 1 (int64, as
    ``np.bincount(codes, minlength=n_codes)``); None when a code lies outside [0, n_codes)."""
    codes = np.ascontiguousarray(codes)
    if codes.dtype not in (np.int32, np.int64) or codes.ndim != 1 or n_codes < 0:
        raise ValueError("counts: int32 or int64 codes")
    return _impl.counts(codes, int(n_codes))


def group_sums(
    groups: np.ndarray, values: np.ndarray, n_groups: int, into: np.ndarray | None = None
) -> np.ndarray | None:
    """int64 sums of int64 ``values`` per group (int32 or int64 ``groups``), wrapping past
    int64 as numpy's integer sums do; None when a group lies outside [0, n_groups). With
    ``into`` (a contiguous int64 array of n_groups sums), the values are added to its sums in
    place and ``into`` is given back (None, and nothing added, when a group is outside)."""
    groups, values = np.ascontiguousarray(groups), np.ascontiguousarray(values)
    if (
        groups.dtype not in (np.int32, np.int64)
        or values.dtype != np.int64
        or groups.shape != values.shape
        or n_groups < 0
    ):
        raise ValueError("group_sums: int32 or int64 groups, one for each int64 value")
    if into is not None and (
        into.dtype != np.int64
        or into.shape != (n_groups,)
        or not into.flags.c_contiguous
        or not into.flags.writeable
    ):
        raise ValueError("group_sums: into is a writable contiguous int64 array of n_groups")
    return _impl.group_sums(groups, values, int(n_groups), into)


# What roofline_sums returns: per group, (first row, dur sum, flops sum, bytes sum, lost sum).
RooflineSums = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def roofline_sums(
    keys: np.ndarray, size: int, dur: Any, flops: Any, nbytes: Any, ideal: Any
) -> RooflineSums | None:
    """Ops grouped by int32 or int64 ``keys`` in [0, ``size``) (a TPU op's metadata row),
    groups in order of first appearance: each group's first row (int64), the sum of its int64
    ``dur`` (wrapping as numpy's integer sums do), and, added op by op in row order as
    np.bincount with weights adds them, its key's ``flops`` and ``nbytes`` and the time each
    op loses against the roofline, max(dur - ``ideal``, 0) (``flops``, ``nbytes``,
    ``ideal``: float64, one per key); None when a key lies outside [0, ``size``)."""
    keys = np.ascontiguousarray(keys)
    dur = _int64(dur)
    columns = [np.ascontiguousarray(c, dtype=np.float64) for c in (flops, nbytes, ideal)]
    if (
        keys.dtype not in (np.int32, np.int64)
        or keys.shape != dur.shape
        or size < 0
        or any(c.shape != (size,) for c in columns)
    ):
        raise ValueError("roofline_sums: a key and duration per op, a value of each column per key")
    return _impl.roofline_sums(keys, int(size), dur, *columns)


__all__ = [
    *KERNELS,
    "DecodeError",
    "Fields",
    "MISSING",
    "RooflineSums",
    "implementation",
    "native_built",
    "use",
]


def _groups(groups: Any, what: str) -> np.ndarray:
    """Groups (or an index): one contiguous int32 or int64 column."""
    groups = np.ascontiguousarray(groups)
    if groups.dtype not in (np.int32, np.int64) or groups.ndim != 1:
        raise ValueError(f"{what}: int32 or int64 groups")
    return groups


def group_totals(
    groups: np.ndarray, values: tuple[np.ndarray, ...], n_groups: int
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]] | None:
    """(first row, number of rows, int64 sums of each int64 column of ``values``) per group,
    in one pass: what first_rows, bincount and :func:`group_sums` give (a group no row has:
    first row ``len(groups)``, 0 rows, sums 0); None when a group lies outside
    [0, n_groups)."""
    columns = tuple(np.ascontiguousarray(column) for column in values)
    groups = _groups(groups, "group_totals")
    if (
        any(column.dtype != np.int64 or column.shape != groups.shape for column in columns)
        or len(columns) > 8
        or n_groups < 0
    ):
        raise ValueError("group_totals: at most 8 int64 columns, one value for each group")
    return _impl.group_totals(groups, columns, int(n_groups))


def group_nansums(
    groups: np.ndarray,
    values: tuple[np.ndarray, ...],
    n_groups: int,
    index: np.ndarray | None = None,
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """(sums, counts) per group of each float64 column of ``values``, NaN skipped: each
    group's values added in row order from 0.0 (numpy's bincount over them, to the bit), and
    how many. Row i is entry ``index[i]`` of ``groups`` and the columns (a Lookup's values
    through its index), or entry i without ``index``. None when a group lies outside
    [0, n_groups) or an index outside the entries."""
    columns = tuple(np.ascontiguousarray(column, dtype=np.float64) for column in values)
    groups = _groups(groups, "group_nansums")
    if any(column.shape != groups.shape for column in columns) or len(columns) > 8 or n_groups < 0:
        raise ValueError("group_nansums: at most 8 float64 columns, one value for each group")
    if index is not None:
        index = _groups(index, "group_nansums")
    return _impl.group_nansums(groups, columns, int(n_groups), index)


def bootstrap_medians(samples: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    """(rows, replicates) medians: of each row of ``samples`` (one float64 value per step),
    the values a bootstrap replicate draws, ``counts[r, j]`` times step j. What numpy's
    median of the drawn values gives, bit for bit: the middle value, or the two middle ones
    added and halved, a sum from 0.0 as numpy's mean makes it (-0.0 is 0.0); NaN where a NaN
    is drawn. None when a replicate's counts are negative or do not add up to the steps."""
    samples = np.ascontiguousarray(samples, dtype=np.float64)
    counts = np.ascontiguousarray(counts)
    if (
        samples.ndim != 2
        or counts.ndim != 2
        or counts.dtype != np.int64
        or samples.shape[1] != counts.shape[1]
        or samples.shape[1] < 1
    ):
        raise ValueError("bootstrap_medians: rows and replicates of int64 counts, one per step")
    return _impl.bootstrap_medians(samples, counts)


__all__ = [*KERNELS, "DecodeError", "Fields", "MISSING", "implementation", "native_built", "use"]
