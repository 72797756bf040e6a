"""The kernels in C (``tpuperf/_wire_native.c``), with numpy arrays in and out.

The only module that imports the C module. It hands back numpy views of the bytearrays the
C functions return and turns their ValueError into :class:`DecodeError`, so that each
function here is a drop-in twin of the one of the same name in :mod:`tpuperf.kernels._numpy`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpuperf import _wire_native as c
from tpuperf.kernels.wire import DecodeError


def _int64(column: bytearray) -> np.ndarray:
    return np.frombuffer(column, dtype=np.int64)


def event_records(data: Any, first: int, stop: int) -> tuple[Any, ...]:
    try:
        run_end, *columns = c.event_records(data, first, stop)
    except ValueError as exc:
        raise DecodeError(str(exc)) from None
    return (run_end, *(_int64(column) for column in columns))


def skip_records(data: Any, first: int, stop: int) -> tuple[int, int]:
    try:
        return c.skip_records(data, first, stop)
    except ValueError as exc:
        raise DecodeError(str(exc)) from None


def extent(data: Any, first: int, stop: int) -> tuple[int, int, int, int]:
    try:
        return c.extent(data, first, stop)
    except ValueError as exc:
        raise DecodeError(str(exc)) from None


def int_events(
    data: Any,
    first: int,
    stop: int,
    wanted_ids: np.ndarray,
    wanted_columns: np.ndarray,
    n_columns: int,
    keep_column: int,
    expected: int = 0,
) -> tuple[int, list[np.ndarray]]:
    try:
        run_end, *columns = c.events(
            data, first, stop, wanted_ids, wanted_columns, n_columns, keep_column, expected
        )
    except ValueError as exc:
        raise DecodeError(str(exc)) from None
    return run_end, [_int64(column) for column in columns]


def stats(data: Any, starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, ...]:
    try:
        metadata_id, kind, int_value, double_value, text_start, text_stop = c.stats(
            data, starts, stops
        )
    except ValueError as exc:
        raise DecodeError(str(exc)) from None
    return (
        _int64(metadata_id),
        np.frombuffer(kind, dtype=np.uint8),
        _int64(int_value),
        np.frombuffer(double_value, dtype=np.float64),
        _int64(text_start),
        _int64(text_stop),
    )


def scan_fields(data: Any, start: int, stop: int) -> tuple[np.ndarray, ...]:
    try:
        columns = c.scan_fields(data, start, stop)
    except ValueError as exc:
        raise DecodeError(str(exc)) from None
    return tuple(_int64(column) for column in columns)


def message_fields(
    data: Any, starts: np.ndarray, stops: np.ndarray
) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    try:
        found = c.message_fields(data, starts, stops)
    except ValueError as exc:
        raise DecodeError(str(exc)) from None
    return {key: (_int64(rows), _int64(values), _int64(ends)) for key, rows, values, ends in found}


def texts(data: Any, starts: np.ndarray, stops: np.ndarray) -> list[str]:
    try:
        return c.texts(data, starts, stops)
    except ValueError as exc:
        raise DecodeError(str(exc)) from None


def factorize(values: Sequence[Any]) -> tuple[np.ndarray, tuple[Any, ...]]:
    codes, unique = c.factorize(values)
    return np.frombuffer(codes, dtype=np.int32), unique


def kind_runs(
    starts: np.ndarray, ends: np.ndarray, kinds: np.ndarray, n_kinds: int
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    runs = c.kind_runs(starts, ends, kinds, n_kinds)
    if runs is None:
        return None
    return [(_int64(s), _int64(e)) for s, e in runs]


def apart(starts: np.ndarray, ends: np.ndarray) -> bool:
    return c.apart(starts, ends)


def union_length(starts: tuple[np.ndarray, ...], ends: tuple[np.ndarray, ...]) -> int | None:
    return c.union_length(starts, ends)


def search_sorted(a: np.ndarray, v: np.ndarray, right: bool) -> np.ndarray:
    return _int64(c.search_sorted(a, v, right))


def gap_sums(
    starts: np.ndarray, ends: np.ndarray, cuts: np.ndarray, short_ps: int
) -> tuple[np.ndarray, np.ndarray]:
    length, count = c.gap_sums(starts, ends, cuts, short_ps)
    return _int64(length), _int64(count)


def dense_groups(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    codes, first = c.dense_groups(keys, size)
    return _int64(codes), _int64(first)


def first_rows(codes: np.ndarray, n_codes: int) -> np.ndarray | None:
    first = c.first_rows(codes, codes.dtype.itemsize, n_codes)
    return None if first is None else _int64(first)


def counts(codes: np.ndarray, n_codes: int) -> np.ndarray | None:
    found = c.counts(codes, codes.dtype.itemsize, n_codes)
    return None if found is None else _int64(found)


def group_sums(
    groups: np.ndarray, values: np.ndarray, n_groups: int, into: np.ndarray | None = None
) -> np.ndarray | None:
    if into is not None:
        added = c.group_sums(groups, groups.dtype.itemsize, values, n_groups, into)
        return None if added is None else into
    sums = c.group_sums(groups, groups.dtype.itemsize, values, n_groups)
    return None if sums is None else _int64(sums)


def roofline_sums(
    keys: np.ndarray,
    size: int,
    dur: np.ndarray,
    flops: np.ndarray,
    nbytes: np.ndarray,
    ideal: np.ndarray,
) -> tuple[np.ndarray, ...] | None:
    sums = c.roofline_sums(keys, keys.dtype.itemsize, size, dur, flops, nbytes, ideal)
    if sums is None:
        return None
    first, dur_sum, flops_sum, bytes_sum, lost_sum = sums
    as_float = (np.frombuffer(s, dtype=np.float64) for s in (flops_sum, bytes_sum, lost_sum))
    return (_int64(first), _int64(dur_sum), *as_float)


def group_totals(
    groups: np.ndarray, values: tuple[np.ndarray, ...], n_groups: int
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]] | None:
    totals = c.group_totals(groups, groups.dtype.itemsize, values, n_groups)
    if totals is None:
        return None
    first, counts, sums = totals
    return _int64(first), _int64(counts), tuple(_int64(column) for column in sums)


def group_nansums(
    groups: np.ndarray,
    values: tuple[np.ndarray, ...],
    n_groups: int,
    index: np.ndarray | None,
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    itemsize = 8 if index is None else index.dtype.itemsize
    found = c.group_nansums(groups, groups.dtype.itemsize, values, n_groups, index, itemsize)
    if found is None:
        return None
    return [(np.frombuffer(sums, dtype=np.float64), _int64(counts)) for sums, counts in found]


# Rows of at least this many steps start at their floor (below): fewer, and the C loop over
# every value is as quick as the product of matrices that finds where to start.
_FLOOR_STEPS = 128
_FLOOR_BLOCK = 256  # rows per product: the 0/1 matrix of values below the floor stays small


def bootstrap_medians(samples: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    medians = c.bootstrap_medians(samples, samples.shape[1], counts, *_floors(samples, counts))
    if medians is None:
        return None
    return np.frombuffer(medians, dtype=np.float64).reshape(len(samples), len(counts))


def _rank_values(samples: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """(rows, len(ranks)): each row of float64 ``samples`` (C order) at int64 ``ranks``
    (ascending, in [0, steps)) of its values in order, NaN last: what
    ``np.partition(samples, ranks, axis=1)[:, ranks]`` gives (-0.0 as 0.0). A diff's
    per-step times make numpy's partition slow (1,500 rows of 5,834 steps: 106 ms, against
    12 ms for random values); the C loop draws its pivots (45 ms)."""
    found = c.rank_values(samples, samples.shape[1], ranks)
    return np.frombuffer(found, dtype=np.float64).reshape(len(samples), len(ranks))


def _floors(samples: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, ...]:
    """Where the C loop starts each row: its floor, the value 3 x sqrt(steps) ranks below the
    middle (six standard deviations of a replicate's draws below it: a replicate whose draws
    below the floor pass the middle rank, which the loop then takes from the smallest value,
    is about one in a billion), and each replicate's draws of the values below it and up
    to it. The draws are products of matrices for a block of rows, (rows x steps) 0/1 by
    (steps x replicates) counts: exact in float32, as every sum is a whole number under 2**24.
    Where fewer than 1/16 of a row's steps are below the floor, or equal to it, the C loop adds
    those itself (-1 here): most rows of a real diff, whose floor is the time most steps take.
    The loop over every value up to the floor, each replicate at once, was most of a large
    diff."""
    rows, n = samples.shape
    rank = (n - 1) // 2 - 3 * int(np.ceil(np.sqrt(n)))
    if n < _FLOOR_STEPS or n >= 2**24 or rank < 1 or not rows or not len(counts):
        return ()
    if (counts < 0).any() or (counts > n).any():
        return ()  # the loop says None for these, before any floor
    floors = np.empty(rows)
    drawn_below = np.full((rows, len(counts)), -1, dtype=np.int32)
    drawn_through = np.empty_like(drawn_below)
    by_step = counts.T.astype(np.float32)
    for first in range(0, rows, _FLOOR_BLOCK):
        block = samples[first : first + _FLOOR_BLOCK]
        floor = _rank_values(block, np.array([rank]))  # NaN last: a NaN floor is none
        floors[first : first + len(block)] = floor[:, 0]
        below, through = block < floor, block <= floor
        drawn_through[first : first + len(block)] = through.astype(np.float32) @ by_step
        n_below = below.sum(axis=1)
        fewer = np.minimum(n_below, through.sum(axis=1) - n_below)
        many = np.flatnonzero(fewer * 16 > n)
        if len(many):
            drawn_below[first + many] = below[many].astype(np.float32) @ by_step
    return floors, drawn_below, drawn_through
