"""The kernels in numpy: what ``tpuperf/_wire_native.c`` does, for where it is not built.

Each function takes what its twin in :mod:`tpuperf.kernels._c` takes (the arguments already
checked and made contiguous by :mod:`tpuperf.kernels`) and returns the same arrays, bit for
bit; tests/test_kernels.py checks every pair. The bulk work is vectorised; a malformed input
is then walked once more record by record, in the C loop's order, so that the error names
the same fault at the same byte as the C module does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpuperf.kernels.wire import (
    EMPTY,
    EVENT_RECORD_TAG,
    EVENT_STATS,
    STAT_BYTES,
    STAT_DOUBLE,
    STAT_INT64,
    STAT_REF,
    STAT_STR,
    STAT_UINT64,
    STAT_VALUE_FIELDS,
    WIRE_LEN,
    DecodeError,
    decode_events,
    field_values,
    read_varint,
    record_starts,
    scalar_field,
    walk_fields,
)
from tpuperf.kernels.wire import (
    message_fields as rounds,
)

MISSING = np.iinfo(np.int64).min
_INT_KINDS = (STAT_UINT64, STAT_INT64, STAT_REF)


def event_records(data: Any, first: int, stop: int) -> tuple[Any, ...]:
    try:
        return _event_records(data, first, stop)
    except DecodeError:
        _walk_like_c(data, first, stop, stats=False)
        raise


def _event_records(data: Any, first: int, stop: int) -> tuple[Any, ...]:
    buf = np.frombuffer(data, dtype=np.uint8)
    starts, run_end = _records(buf, first, stop)
    metadata_id, offset_ps, duration_ps, (owner, stat_start, stat_stop) = decode_events(buf, starts)
    if len(owner) > 1 and not bool((owner[1:] >= owner[:-1]).all()):
        # Found a field of every event per round: put them in file order, as the C loop
        # (an event's own stats are in order already, one per round).
        order = np.argsort(owner, kind="stable")
        owner, stat_start, stat_stop = owner[order], stat_start[order], stat_stop[order]
    return run_end, metadata_id, offset_ps, duration_ps, owner, stat_start, stat_stop


def skip_records(data: Any, first: int, stop: int) -> tuple[int, int]:
    buf = np.frombuffer(data, dtype=np.uint8)
    starts, run_end = _records(buf, first, stop)
    return run_end, len(starts)


def extent(data: Any, first: int, stop: int) -> tuple[int, int, int, int]:
    run_end, _, offset_ps, duration_ps, *_ = event_records(data, first, stop)
    if not len(offset_ps):
        return run_end, 0, int(np.iinfo(np.int64).max), int(MISSING)
    end_ps = offset_ps + duration_ps  # wraps as int64, as the C loop's unsigned sum does
    return run_end, len(offset_ps), int(offset_ps.min()), int(end_ps.max())


def int_events(
    data: Any,
    first: int,
    stop: int,
    wanted_ids: np.ndarray,
    wanted_columns: np.ndarray,
    n_columns: int,
    keep_column: int,
    expected: int = 0,  # sizes C's columns; numpy knows the count once it has the records
) -> tuple[int, list[np.ndarray]]:
    # (As the C loop: no stat is read when none is asked for.)
    with_stats = bool(len(wanted_ids))
    try:
        run_end, metadata_id, offset_ps, duration_ps, owner, stat_start, stat_stop = _event_records(
            data, first, stop
        )
        if with_stats:
            ids, kind, value, *_ = stats(data, stat_start, stat_stop)
    except DecodeError:
        _walk_like_c(data, first, stop, stats=with_stats)
        raise
    n = len(metadata_id)
    columns = [np.full(n, MISSING, dtype=np.int64) for _ in range(n_columns)]
    if with_stats:
        # Each stat id goes to the column of its first entry in wanted_ids.
        wanted, first_entry = np.unique(wanted_ids, return_index=True)
        at = np.minimum(np.searchsorted(wanted, ids), len(wanted) - 1)
        taken = np.isin(kind, _INT_KINDS) & (wanted[at] == ids)
        column_of = wanted_columns[first_entry[at[taken]]]
        rows, values = owner[taken], value[taken]
        for c in range(n_columns):
            mine = column_of == c
            _last_into(columns[c], rows[mine], np.flatnonzero(mine), values[mine])
    events = [metadata_id, offset_ps, duration_ps, *columns]
    if keep_column >= 0:
        kept = columns[keep_column] != MISSING
        events = [column[kept] for column in events]
    return run_end, events


def stats(data: Any, starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, ...]:
    n = len(starts)
    if n and (starts.min() < 0 or stops.max() > len(data) or (starts > stops).any()):
        _stats_like_c(data, starts, stops)
    buf = np.frombuffer(data, dtype=np.uint8)
    try:
        fields = rounds(buf, starts, stops)
    except DecodeError:
        _stats_like_c(data, starts, stops)
        raise
    kind = np.zeros(n, dtype=np.uint8)
    int_value = np.zeros(n, dtype=np.int64)
    double_value = np.zeros(n, dtype=np.float64)
    text_start = np.zeros(n, dtype=np.int64)
    text_stop = np.zeros(n, dtype=np.int64)
    # Every value field, in file order: a stat's kind is that of its last value field (as
    # protobuf's oneof reads it), and each value column holds the last field of its kind.
    found = [
        (*field_values(fields, number, wire), code) for number, wire, code in STAT_VALUE_FIELDS
    ]
    rows = np.concatenate([f[0] for f in found])
    values = np.concatenate([f[1] for f in found])
    after = np.concatenate([f[2] for f in found])
    codes = np.concatenate([np.full(len(f[0]), f[3], dtype=np.uint8) for f in found])
    _last_into(kind, rows, after, codes)
    is_int = np.isin(codes, _INT_KINDS)
    _last_into(int_value, rows[is_int], after[is_int], values[is_int])
    is_double = codes == STAT_DOUBLE
    _last_into(double_value, rows[is_double], after[is_double], values[is_double].view(np.float64))
    is_text = (codes == STAT_STR) | (codes == STAT_BYTES)
    _last_into(text_start, rows[is_text], after[is_text], values[is_text])
    _last_into(text_stop, rows[is_text], after[is_text], after[is_text])
    return scalar_field(fields, 1, n), kind, int_value, double_value, text_start, text_stop


def _last_into(out: np.ndarray, rows: np.ndarray, after: np.ndarray, values: np.ndarray) -> None:
    """out[row] = the value of each row's last field (the largest ``after``)."""
    if not len(rows):
        return
    if int(np.bincount(rows, minlength=len(out)).max()) == 1:  # one field a row: the rule
        out[rows] = values
        return
    order = np.lexsort((after, rows))
    rows, values = rows[order], values[order]
    last = np.ones(len(rows), dtype=bool)
    np.not_equal(rows[1:], rows[:-1], out=last[:-1])
    out[rows[last]] = values[last]


def scan_fields(data: Any, start: int, stop: int) -> tuple[np.ndarray, ...]:
    rows = list(walk_fields(data, start, stop))
    if not rows:
        return tuple(np.zeros(0, dtype=np.int64) for _ in range(5))
    return tuple(np.array(column, dtype=np.int64) for column in zip(*rows, strict=True))


def message_fields(
    data: Any, starts: np.ndarray, stops: np.ndarray
) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    buf = np.frombuffer(data, dtype=np.uint8)
    outside = (starts < stops) & ((starts < 0) | (stops > len(buf)))
    if outside.any():  # as the C loop says it (numpy would index around or past the end)
        raise DecodeError("message span outside the buffer")
    return rounds(buf, starts, stops)


def texts(data: Any, starts: np.ndarray, stops: np.ndarray) -> list[str]:
    bad = (starts < 0) | (stops > len(data)) | (starts > stops)
    if bad.any():
        at = int(starts[np.argmax(bad)])
        raise DecodeError(f"a string lies outside the buffer, at byte {at}")
    # The bytes gathered into one buffer and decoded at once: when it is ASCII (as names
    # nearly always are) character offsets are byte offsets, and each string a slice.
    lengths = stops - starts
    ends = np.cumsum(lengths)
    view = memoryview(data).cast("B")
    blob = b"".join([view[b:e] for b, e in zip(starts.tolist(), stops.tolist(), strict=True)])
    if blob.isascii():
        text = blob.decode("ascii")
        return [text[b:e] for b, e in zip((ends - lengths).tolist(), ends.tolist(), strict=True)]
    return [
        bytes(view[b:e]).decode("utf-8", "replace")
        for b, e in zip(starts.tolist(), stops.tolist(), strict=True)
    ]


def factorize(values: Sequence[Any]) -> tuple[np.ndarray, tuple[Any, ...]]:
    seen: dict[Any, int] = {}
    codes = np.fromiter(
        (seen.setdefault(v, len(seen)) for v in values), dtype=np.int32, count=len(values)
    )
    return codes, tuple(seen)


def kind_runs(
    starts: np.ndarray, ends: np.ndarray, kinds: np.ndarray, n_kinds: int
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    taken = ends > starts
    s, e, k = starts[taken], ends[taken], kinds[taken]
    if bool((s[1:] < e[:-1]).any()):
        return None
    return [_touching_joined(s[k == j], e[k == j]) for j in range(n_kinds)] + [
        _touching_joined(s, e)
    ]


def _touching_joined(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intervals in order that do not overlap, joined where one starts where the last ends."""
    if not len(s):
        return EMPTY.copy(), EMPTY.copy()
    gap = s[1:] > e[:-1]
    return s[np.r_[True, gap]], e[np.r_[gap, True]]


def apart(starts: np.ndarray, ends: np.ndarray) -> bool:
    return bool((ends > starts).all() and (starts[1:] > ends[:-1]).all())


def union_length(starts: tuple[np.ndarray, ...], ends: tuple[np.ndarray, ...]) -> int | None:
    if any((s[1:] < s[:-1]).any() for s in starts):
        return None
    if not starts:
        return 0
    s, e = np.concatenate(starts), np.concatenate(ends)
    keep = e > s
    s, e = s[keep], e[keep]
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    # Each interval adds its part past the furthest end of those before it (they start no
    # later: what covers its start covers a span from it).
    reach = np.maximum.accumulate(e)
    before = np.concatenate([s[:1], reach[:-1]])
    return int(np.maximum(e - np.maximum(s, before), 0).sum())


def search_sorted(a: np.ndarray, v: np.ndarray, right: bool) -> np.ndarray:
    return np.searchsorted(a, v, side="right" if right else "left").astype(np.int64, copy=False)


def gap_sums(
    starts: np.ndarray, ends: np.ndarray, cuts: np.ndarray, short_ps: int
) -> tuple[np.ndarray, np.ndarray]:
    gaps = starts[1:] - ends[:-1]
    short = gaps < short_ps
    np.multiply(gaps, short, out=gaps)  # the long ones zeroed
    out = []
    for column in (gaps, short):
        running = np.zeros(len(column) + 1, dtype=np.int64)
        np.cumsum(column, out=running[1:], dtype=np.int64)
        out.append(running[cuts])
    return out[0], out[1]


def dense_groups(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    if size < 0:
        raise ValueError("dense_groups: negative size")
    n = len(keys)
    outside = (keys < 0) | (keys >= size)
    if outside.any():
        key = int(keys[np.argmax(outside)])
        raise ValueError(f"dense_groups: key {key} outside [0, {size})")
    first_row = np.full(size, n, dtype=np.int64)
    # Rows written in reverse, so that the first is the last written.
    first_row[keys[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
    present = np.flatnonzero(first_row < n)
    order = present[np.argsort(first_row[present], kind="stable")]
    code_of = np.empty(size, dtype=np.int64)
    code_of[order] = np.arange(len(order), dtype=np.int64)
    return code_of[keys], first_row[order]


def first_rows(codes: np.ndarray, n_codes: int) -> np.ndarray | None:
    n = len(codes)
    if n and (int(codes.min()) < 0 or int(codes.max()) >= n_codes):
        return None
    first = np.full(n_codes, n, dtype=np.int64)
    # Rows written in reverse, so that the first is the last written (numpy assigns repeated
    # indices in order; 4x faster than minimum.at).
    first[codes[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
    return first


def counts(codes: np.ndarray, n_codes: int) -> np.ndarray | None:
    if len(codes) and (int(codes.min()) < 0 or int(codes.max()) >= n_codes):
        return None
    return np.bincount(codes, minlength=n_codes).astype(np.int64, copy=False)


def group_sums(
    groups: np.ndarray, values: np.ndarray, n_groups: int, into: np.ndarray | None = None
) -> np.ndarray | None:
    if len(groups) and (int(groups.min()) < 0 or int(groups.max()) >= n_groups):
        return None
    if into is not None:
        np.add.at(into, groups, values)  # in place; wraps past int64, as the C loop's sums do
        return into
    as_float = values.astype(np.float64)
    if float(np.abs(as_float).sum()) < 2.0**53:  # every partial sum is exact in a double
        return np.bincount(groups, weights=as_float, minlength=n_groups).astype(np.int64)
    out = np.zeros(n_groups, dtype=np.int64)
    np.add.at(out, groups, values)  # wraps past int64, as the C loop's sums do
    return out


def roofline_sums(
    keys: np.ndarray,
    size: int,
    dur: np.ndarray,
    flops: np.ndarray,
    nbytes: np.ndarray,
    ideal: np.ndarray,
) -> tuple[np.ndarray, ...] | None:
    if len(keys) and (int(keys.min()) < 0 or int(keys.max()) >= size):
        return None
    group, first = dense_groups(keys.astype(np.int64), size)
    k = len(first)
    dur_sum = group_sums(group, dur, k)
    lost = dur - ideal[keys]
    np.clip(lost, 0, None, out=lost)
    sums = (
        np.bincount(group, weights=weights, minlength=k).astype(np.float64, copy=False)
        for weights in (flops[keys], nbytes[keys], lost)
    )  # (float64 for no op too: bincount of nothing gives int64)
    return (first, dur_sum if dur_sum is not None else np.zeros(k, dtype=np.int64), *sums)


def group_totals(
    groups: np.ndarray, values: tuple[np.ndarray, ...], n_groups: int
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]] | None:
    if len(groups) and (int(groups.min()) < 0 or int(groups.max()) >= n_groups):
        return None
    n = len(groups)
    first = np.full(n_groups, n, dtype=np.int64)
    # Rows written in reverse, so that the first is the last written.
    first[groups[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
    counts = np.bincount(groups, minlength=n_groups).astype(np.int64)
    sums = tuple(group_sums(groups, column, n_groups) for column in values)
    return first, counts, sums  # type: ignore[return-value]  # not None: groups checked


def group_nansums(
    groups: np.ndarray,
    values: tuple[np.ndarray, ...],
    n_groups: int,
    index: np.ndarray | None,
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    if index is not None:
        if len(index) and (int(index.min()) < 0 or int(index.max()) >= len(groups)):
            return None
        groups, values = groups[index], tuple(column[index] for column in values)
    if len(groups) and (int(groups.min()) < 0 or int(groups.max()) >= n_groups):
        return None
    found = []
    for column in values:
        present = ~np.isnan(column)
        kept = groups[present]
        sums = np.bincount(kept, weights=column[present], minlength=n_groups)
        counts = np.bincount(kept, minlength=n_groups).astype(np.int64)
        found.append((sums.astype(np.float64, copy=False), counts))
    return found


def bootstrap_medians(samples: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    n = samples.shape[1]
    if len(counts) and ((counts < 0).any() or (counts.sum(axis=1) != n).any()):
        return None
    out = np.empty((len(samples), len(counts)))
    low, high = (n - 1) // 2, n // 2  # the ranks of the middle draws (one when n is odd)
    for i, row in enumerate(samples):
        order = np.argsort(row, kind="stable")  # NaN last
        drawn = np.cumsum(counts[:, order], axis=1)  # per replicate, draws up to each value
        below = row[order[(drawn > low).argmax(axis=1)]]
        above = row[order[(drawn > high).argmax(axis=1)]]
        # numpy's median is the mean of the middle values, a sum from 0.0 (so -0.0 is 0.0);
        # -inf and inf in the middle make NaN, without a warning (as in C)
        with np.errstate(invalid="ignore"):
            out[i] = 0.0 + below if low == high else (0.0 + below + above) / 2.0
        nan = np.isnan(row)
        if nan.any():
            out[i, counts[:, nan].sum(axis=1) > 0] = np.nan
    return out


# --------------------------------------------------------------------------- faults


def _records(buf: np.ndarray, first: int, stop: int) -> tuple[np.ndarray, int]:
    """:func:`record_starts`, failing where the C loop fails: at the first record of the run
    that does not fit (the vectorised search ends the run before it instead)."""
    if first >= stop or buf[first] != EVENT_RECORD_TAG:
        return EMPTY, first
    try:
        starts, run_end = record_starts(buf, first, stop)
    except DecodeError:
        _record_length(buf.data, first, stop)  # it does not fit: the C loop's error
        raise
    if run_end < stop and buf[run_end] == EVENT_RECORD_TAG:
        _record_length(buf.data, run_end, stop)  # raises: else the run goes on
    return starts, run_end


def _record_length(data: Any, pos: int, stop: int) -> tuple[int, int]:
    """Where the payload of the event record at ``pos`` (its 0x22 tag) starts and ends,
    with the C loop's errors (``data`` indexed as Python ints: bytes or a memoryview)."""
    length, pos = read_varint(data, pos + 1, stop)
    if length > stop - pos:
        raise DecodeError(
            f"an event record runs past the end of its line (truncated file?), at byte {pos}"
        )
    return pos, pos + length


def _walk_like_c(data: Any, first: int, stop: int, *, stats: bool) -> None:
    """Walk a run of event records (and, with ``stats``, each stat's fields) one by one, in
    the C loop's order, raising the error it raises at the first fault."""
    buf = memoryview(data).cast("B")
    pos = first
    while pos < stop and buf[pos] == EVENT_RECORD_TAG:
        payload, record_end = _record_length(buf, pos, stop)
        for number, wire, _, value_start, value_stop in walk_fields(buf, payload, record_end):
            if stats and number == EVENT_STATS and wire == WIRE_LEN:
                for _ in walk_fields(buf, value_start, value_stop):
                    pass
        pos = record_end


def _stats_like_c(data: Any, starts: np.ndarray, stops: np.ndarray) -> None:
    """Read the stats one by one, in order, raising the C loop's error at the first fault."""
    buf = memoryview(data).cast("B")
    for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
        if start < 0 or stop > len(buf) or start > stop:
            at = f", at byte {start}" if start >= 0 else ""  # (as the C module words it)
            raise DecodeError(f"a stat lies outside the buffer{at}")
        for _ in walk_fields(buf, start, stop):
            pass


__all__ = [
    "dense_groups",
    "event_records",
    "extent",
    "group_sums",
    "int_events",
    "kind_runs",
    "scan_fields",
    "skip_records",
    "stats",
    "texts",
]
