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


def group_sums(groups: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray | None:
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


def bootstrap_medians(samples: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    medians = c.bootstrap_medians(samples, samples.shape[1], counts)
    if medians is None:
        return None
    return np.frombuffer(medians, dtype=np.float64).reshape(len(samples), len(counts))
