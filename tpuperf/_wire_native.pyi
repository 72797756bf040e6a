# The C module of tpuperf/_wire_native.c, as the type checker sees it. Only
# tpuperf.kernels._c imports it; everything else calls tpuperf.kernels, whose functions are
# the typed interface (numpy arrays in and out, one signature for C and numpy). Every
# function here reads buffers (bytes, numpy arrays: anything with the buffer protocol),
# returns columns as bytearrays of int64 (or float64 where said), and raises ValueError
# with the byte offset of a malformed record.

from collections.abc import Sequence
from mmap import mmap
from typing import Any, TypeVar, overload

import numpy as np

# What the functions read: anything with the buffer protocol (typing's Buffer needs 3.12).
Buffer = bytes | bytearray | memoryview | mmap | np.ndarray[Any, Any]
_B = TypeVar("_B", bytearray, memoryview, np.ndarray[Any, Any])  # a writable one, given back

def event_records(
    data: Buffer, first: int, stop: int, /
) -> tuple[int, bytearray, bytearray, bytearray, bytearray, bytearray, bytearray]:
    """(run_end, metadata_id, offset_ps, duration_ps, stat_owner, stat_start, stat_stop)."""

def scan_fields(
    data: Buffer, start: int, stop: int, /
) -> tuple[bytearray, bytearray, bytearray, bytearray, bytearray]:
    """(number, wire, field_start, value_start, value_stop) of each field in [start, stop)."""

def extent(data: Buffer, first: int, stop: int, /) -> tuple[int, int, int, int]:
    """(run_end, n_events, first_offset_ps, last_end_ps) of a run of event records."""

def skip_records(data: Buffer, first: int, stop: int, /) -> tuple[int, int]:
    """(run_end, n_events): the extent of a run of event records."""

def events(
    data: Buffer,
    first: int,
    stop: int,
    wanted_ids: Buffer,
    wanted_columns: Buffer,
    n_columns: int,
    keep_column: int,
    expected: int = 0,
    /,
) -> tuple[Any, ...]:
    """(run_end, metadata_id, offset_ps, duration_ps, *columns): chosen integer stats as int64
    columns, INT64_MIN where absent."""

def stats(
    data: Buffer, starts: Buffer, stops: Buffer, /
) -> tuple[bytearray, bytearray, bytearray, bytearray, bytearray, bytearray]:
    """(metadata_id, kind, int_value, double_value (float64), text_start, text_stop)."""

def kind_runs(
    starts: Buffer, ends: Buffer, kinds: Buffer, n_kinds: int, /
) -> list[tuple[bytearray, bytearray]] | None:
    """The merged (starts, ends) of each kind and of all ops; None when ops overlap."""

def apart(starts: Buffer, ends: Buffer, /) -> bool:
    """Whether every interval is non-empty and starts after the one before it ends."""

def union_length(starts: tuple[Buffer, ...], ends: tuple[Buffer, ...], /) -> int | None:
    """The length of the union of the intervals of runs (int64 starts and ends per run), each
    run in order of start; None when a run is not, or there are more than 64 runs."""

def search_sorted(a: Buffer, v: Buffer, right: bool, /) -> bytearray:
    """np.searchsorted(a, v, "right" if right else "left") of sorted int64 a, as int64."""

def gap_sums(
    starts: Buffer, ends: Buffer, cuts: Buffer, short_ps: int, /
) -> tuple[bytearray, bytearray]:
    """(length, count) of the gaps shorter than short_ps before each cut."""

def dense_groups(keys: Buffer, size: int, /) -> tuple[bytearray, bytearray]:
    """(group of each row, first row of each group) for int64 keys in [0, size)."""

def first_rows(codes: Buffer, itemsize: int, n_codes: int, /) -> bytearray | None:
    """The first row of each code (int64); None when a code is outside [0, n_codes)."""

def counts(codes: Buffer, itemsize: int, n_codes: int, /) -> bytearray | None:
    """How many rows hold each code (int64); None when a code is outside [0, n_codes)."""

@overload
def group_sums(
    groups: Buffer, group_itemsize: int, values: Buffer, n_groups: int, /
) -> bytearray | None:
    """int64 sums per group; None when a group is outside [0, n_groups)."""

@overload
def group_sums(
    groups: Buffer, group_itemsize: int, values: Buffer, n_groups: int, into: _B, /
) -> _B | None:
    """``into`` with the values added to its int64 sums; None (nothing added) when a group is
    outside [0, n_groups)."""

def roofline_sums(
    keys: Buffer,
    itemsize: int,
    size: int,
    dur: Buffer,
    flops: Buffer,
    nbytes: Buffer,
    ideal: Buffer,
    /,
) -> tuple[bytearray, bytearray, bytearray, bytearray, bytearray] | None:
    """(first, dur_sum, flops_sum, bytes_sum, lost_sum) per group of ops by key (float64 for
    the last three); None when a key is outside [0, size)."""

def group_totals(
    groups: Buffer, group_itemsize: int, values: tuple[Buffer, ...], n_groups: int, /
) -> tuple[bytearray, bytearray, tuple[bytearray, ...]] | None:
    """(first row, rows, int64 sums of each column) per group; None when a group is outside
    [0, n_groups)."""

def rank_values(samples: Buffer, n: int, ranks: Buffer, /) -> bytearray:
    """float64 rows x len(ranks): each row's values at the ascending ranks, NaN last (-0.0
    as 0.0)."""

def bootstrap_medians(
    samples: Buffer,
    n_steps: int,
    counts: Buffer,
    floors: Buffer = ...,
    drawn_below: Buffer = ...,
    drawn_through: Buffer = ...,
    /,
) -> bytearray | None:
    """float64 medians, rows x replicates, of each row of ``samples`` (float64, rows x
    n_steps) drawn as each replicate of ``counts`` (int64, replicates x n_steps) says; None when
    a replicate does not draw n_steps values. With ``floors`` (float64 per row; NaN: none),
    ``drawn_below`` and ``drawn_through`` (int32, rows x replicates: each replicate's draws of
    the row's values below its floor, or -1 to count them, and up to it), a row sorts only its
    values above the floor, unless a replicate's draws below it pass the middle rank."""

def group_nansums(
    groups: Buffer,
    group_itemsize: int,
    values: tuple[Buffer, ...],
    n_groups: int,
    index: Buffer | None,
    index_itemsize: int,
    /,
) -> list[tuple[bytearray, bytearray]] | None:
    """[(float64 sums, int64 counts)] of each column's values that are not NaN, per group,
    row i being entry index[i] (entry i without an index); None when a group or an index is
    outside."""

def message_fields(
    data: Buffer, starts: Buffer, stops: Buffer, /
) -> list[tuple[int, bytearray, bytearray, bytearray]]:
    """[(key, rows, values, value_stops)]: the fields of many messages per key (number * 8 +
    wire), in the order of the numpy rounds of tpuperf.kernels.wire.message_fields."""

def texts(data: Buffer, starts: Buffer, stops: Buffer, /) -> list[str]:
    """The spans decoded as UTF-8, bad bytes replaced."""

def factorize(values: Sequence[Any], /) -> tuple[bytearray, tuple[Any, ...]]:
    """(int32 codes, distinct values in order of first appearance) of hashable values."""
