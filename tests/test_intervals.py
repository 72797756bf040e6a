"""tpuperf.intervals against brute force: sets as masks over the integers.

Every operation is checked on random intervals (overlapping, touching, nested, empty,
reversed) against the same question asked of a boolean mask with one cell per picosecond:
cell t is covered when some interval [s, e) has s <= t < e.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tpuperf import kernels
from tpuperf.intervals import (
    EMPTY,
    Intervals,
    covered_before,
    first_inside,
    gaps_in,
    interior_gaps,
    intersect,
    last_inside,
    measure_in,
    merge,
    nonempty,
    overlap_by_group,
    subtract,
    sums_before,
    union,
    union_by_group,
    window_edges,
)

# The kernels' implementations: both where C is built.
BUILT = [name for name in kernels.IMPLEMENTATIONS if name == "numpy" or kernels.native_built()]

# The mask covers [LOW, HIGH): every interval and window below lies inside it.
LOW, HIGH = -100, 1400

spans = st.lists(
    st.tuples(st.integers(0, 1000), st.integers(-20, 200)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=30,
)
windows = st.lists(
    st.tuples(st.integers(-50, 1300), st.integers(0, 400)).map(lambda t: (t[0], t[0] + t[1])),
    min_size=1,
    max_size=8,
)


def mask(pairs: list[tuple[int, int]]) -> np.ndarray:
    covered = np.zeros(HIGH - LOW, dtype=bool)
    for s, e in pairs:
        if e > s:
            covered[s - LOW : e - LOW] = True
    return covered


def mask_of(a: Intervals) -> np.ndarray:
    return mask(list(zip(a.starts.tolist(), a.ends.tolist(), strict=True)))


def as_set(pairs: list[tuple[int, int]]) -> Intervals:
    return union(
        np.array([s for s, _ in pairs], dtype=np.int64),
        np.array([e for _, e in pairs], dtype=np.int64),
    )


def assert_well_formed(a: Intervals) -> None:
    """Sorted, disjoint, non-empty, not touching: the form every set keeps."""
    assert a.starts.dtype == a.ends.dtype == np.int64
    assert np.all(a.ends > a.starts)
    assert np.all(a.starts[1:] > a.ends[:-1])


@settings(max_examples=300, deadline=None)
@given(spans)
def test_union_covers_what_the_intervals_cover(a: list[tuple[int, int]]) -> None:
    for pairs in (a, sorted(a)):  # in any order, and in time order (read without a sort)
        sa = as_set(pairs)
        assert_well_formed(sa)
        assert np.array_equal(mask_of(sa), mask(a))
        assert sa.total == int(mask(a).sum())


@settings(max_examples=300, deadline=None)
@given(st.lists(spans, max_size=5))
def test_union_length_of_runs_is_the_covered_cells(runs: list[list[tuple[int, int]]]) -> None:
    """kernels.union_length of runs each in order of start (op lines: XProf's duty cycle
    merges them without a sort) measures what they cover; a run out of order says None."""
    in_order = [sorted(run) for run in runs]
    columns = [([s for s, _ in run], [e for _, e in run]) for run in in_order]
    covered = int(mask([pair for run in runs for pair in run]).sum())
    for implementation in BUILT:
        with kernels.use(implementation):
            assert kernels.union_length(columns) == covered
            backwards = [(starts[::-1], ends[::-1]) for starts, ends in columns]
            if any(starts[0] != starts[-1] for starts, _ in columns if starts):
                assert kernels.union_length(backwards) is None


@settings(max_examples=300, deadline=None)
@given(spans, spans)
def test_intersect_subtract_and_merge_are_the_mask_operations(
    a: list[tuple[int, int]], b: list[tuple[int, int]]
) -> None:
    sa, sb = as_set(a), as_set(b)
    ma, mb = mask(a), mask(b)
    for result, expected in (
        (intersect(sa, sb), ma & mb),
        (subtract(sa, sb), ma & ~mb),
        (merge(sa, sb), ma | mb),
        (merge(subtract(sa, sb), subtract(sb, sa)), ma ^ mb),
    ):
        assert_well_formed(result)
        assert np.array_equal(mask_of(result), expected)
    # overlap <= min(a, b), whatever the sets (STYLE.md's property).
    assert intersect(sa, sb).total <= min(sa.total, sb.total)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), spans), max_size=6), spans)
def test_sets_by_group_are_each_groups_union_and_its_overlap(
    groups: list[tuple[int, list[tuple[int, int]]]], b: list[tuple[int, int]]
) -> None:
    # Groups numbered 0..4 (some absent, some given twice: their parts join), the intervals
    # of each in the order given.
    pairs = [(number, s, e) for number, part in groups for s, e in part]
    group = np.array([g for g, _, _ in pairs], dtype=np.int64)
    starts = np.array([s for _, s, _ in pairs], dtype=np.int64)
    ends = np.array([e for _, _, e in pairs], dtype=np.int64)
    got_starts, got_ends, got_group = union_by_group(starts, ends, group)
    assert np.all(got_group[1:] >= got_group[:-1])
    sb = as_set(b)
    overlap = overlap_by_group(got_starts, got_ends, got_group, 5, sb)
    assert overlap.dtype == np.int64
    for number in range(5):
        mine = [(s, e) for g, s, e in pairs if g == number]
        expected = as_set(mine)
        at = got_group == number
        assert np.array_equal(got_starts[at], expected.starts)
        assert np.array_equal(got_ends[at], expected.ends)
        assert overlap[number] == int((mask(mine) & mask(b)).sum())


@settings(max_examples=300, deadline=None)
@given(spans, windows)
def test_measures_in_windows_count_the_covered_cells(
    a: list[tuple[int, int]], wins: list[tuple[int, int]]
) -> None:
    sa, covered = as_set(a), mask(a)
    starts = np.array([s for s, _ in wins], dtype=np.int64)
    ends = np.array([e for _, e in wins], dtype=np.int64)
    assert covered_before(sa, ends).tolist() == [int(covered[: e - LOW].sum()) for e in ends]
    assert measure_in(sa, starts, ends).tolist() == [
        int(covered[s - LOW : e - LOW].sum()) for s, e in wins
    ]
    firsts, lasts = [], []
    for s, e in wins:
        inside = np.flatnonzero(covered[s - LOW : e - LOW])
        firsts.append(s + int(inside[0]) if len(inside) else e)
        lasts.append(s + int(inside[-1]) + 1 if len(inside) else s)
    assert first_inside(sa, starts, ends).tolist() == firsts
    assert last_inside(sa, starts, ends).tolist() == lasts
    edges = window_edges(sa, starts, ends)  # found once for both: the same answers
    assert first_inside(sa, starts, ends, edges).tolist() == firsts
    assert last_inside(sa, starts, ends, edges).tolist() == lasts


@settings(max_examples=300, deadline=None)
@given(spans, windows, st.integers(1, 60))
def test_interior_gaps_are_the_gaps_between_intervals_inside_each_window(
    a: list[tuple[int, int]], wins: list[tuple[int, int]], short_ps: int
) -> None:
    sa = as_set(a)
    starts = np.array([s for s, _ in wins], dtype=np.int64)
    ends = np.array([e for _, e in wins], dtype=np.int64)
    expected: tuple[list[int], list[int], list[int]] = ([], [], [])
    for s, e in wins:
        # A gap (end of one interval, start of the next) inside the window's span.
        gaps = [
            nxt - end
            for end, nxt in zip(sa.ends[:-1].tolist(), sa.starts[1:].tolist(), strict=True)
            if end > s and nxt < e
        ]
        expected[0].append(sum(g for g in gaps if g < short_ps))
        expected[1].append(sum(1 for g in gaps if g < short_ps))
        expected[2].append(sum(1 for g in gaps if g >= short_ps))
    for implementation in BUILT:  # the gaps are summed by kernels.gap_sums
        with kernels.use(implementation):
            got = interior_gaps(sa, starts, ends, short_ps)
            edges = window_edges(sa, starts, ends)
            given_edges = interior_gaps(sa, starts, ends, short_ps, edges)
        assert tuple(column.tolist() for column in got) == expected
        assert tuple(column.tolist() for column in given_edges) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(-(2**40), 2**40), max_size=200),
    st.lists(st.integers(0, 200), min_size=1, max_size=3),
)
def test_sums_before_are_the_prefix_sums(values: list[int], at: list[int]) -> None:
    at = [min(k, len(values)) for k in at]
    flags = [v > 0 for v in values]
    # Few points among many values (the runs between them summed) and as many points as
    # values (running sums): the same sums.
    for points in (at, at * 80):
        got, counts = sums_before(
            np.array(points, dtype=np.int64),
            np.array(values, dtype=np.int64),
            np.array(flags, dtype=bool),
        )
        assert got.dtype == counts.dtype == np.int64
        assert got.tolist() == [sum(values[:k]) for k in points]
        assert counts.tolist() == [sum(flags[:k]) for k in points]


def test_measures_hold_where_sums_of_times_pass_int64() -> None:
    # Times near 2**62 ps: the starts sum past 2**63, yet every measure fits in int64. Few
    # windows among many intervals: their sums are taken over the runs between the windows.
    base = 2**62
    widths = [1 + (7 * k) % 9 for k in range(400)]
    starts = np.array([base + 10 * k for k in range(400)], dtype=np.int64)
    a = Intervals(starts, starts + np.array(widths, dtype=np.int64))
    lo = np.array([base, base + 5, base + 1012, base + 3990], dtype=np.int64)
    hi = np.array([base + 4000, base + 45, base + 1013, base + 3991], dtype=np.int64)
    spans_ = [(base + 10 * k, base + 10 * k + w) for k, w in enumerate(widths)]
    inside = [
        sum(max(0, min(e, int(h)) - max(s, int(low))) for s, e in spans_)
        for low, h in zip(lo.tolist(), hi.tolist(), strict=True)
    ]
    assert inside[0] == sum(widths) and inside[2] == 1
    assert measure_in(a, lo, hi).tolist() == inside
    gaps = [10 - w for w in widths[:-1]]  # between consecutive intervals
    short, count, long_ = interior_gaps(a, lo, hi, 6)
    expected = sum(g for g in gaps if g < 6), sum(g < 6 for g in gaps), sum(g >= 6 for g in gaps)
    assert (short[0], count[0], long_[0]) == expected


@settings(max_examples=300, deadline=None)
@given(spans, st.integers(-50, 1300), st.integers(-50, 400))
def test_gaps_in_a_window_are_what_it_leaves_uncovered(
    a: list[tuple[int, int]], start: int, length: int
) -> None:
    sa = as_set(a)
    gaps = gaps_in(sa, start, start + length)
    assert_well_formed(gaps)
    assert np.array_equal(mask_of(gaps), mask([(start, start + length)]) & ~mask(a))


def test_the_empty_set() -> None:
    some = as_set([(10, 20)])
    assert len(EMPTY) == 0 and EMPTY.total == 0
    assert union(np.array([5, 9]), np.array([5, 3])) is EMPTY  # empty and reversed: dropped
    assert subtract(some, EMPTY) is some and intersect(some, EMPTY) is EMPTY
    assert merge() is EMPTY and merge(EMPTY, some) is some
    assert nonempty(np.zeros(0, np.int64), np.zeros(0, np.int64)) is EMPTY
    assert nonempty(some.starts, some.ends).total == 10
    assert gaps_in(some, 30, 30) is EMPTY


def test_records_of_arrays_are_equal_only_to_themselves() -> None:
    """A dataclass's generated == compares the fields, and arrays' == is elementwise (it
    raises); Intervals (as every record of arrays) compares and hashes by identity."""
    a = Intervals(np.array([0, 5]), np.array([2, 9]))
    same = Intervals(a.starts.copy(), a.ends.copy())
    assert a == a and a != same
    assert len({a, same, a}) == 2
