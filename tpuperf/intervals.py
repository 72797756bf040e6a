"""Sets of time as sorted, disjoint, half-open intervals, and their algebra.

An :class:`Intervals` holds [starts[i], ends[i]) with starts sorted, every interval
non-empty and none touching or overlapping the next, as int64 numpy arrays (picoseconds in
the timeline). :func:`union` makes one from any intervals; :func:`intersect`,
:func:`subtract` and :func:`merge` combine sets; the rest measure a set inside windows
(:func:`measure_in`, :func:`interior_gaps`, :func:`first_inside`, :func:`last_inside`) or
find what a window leaves uncovered (:func:`gaps_in`). Every operation is a few sorted
numpy passes or kernels (searches that start from the last answer, sums of gaps), no
per-interval Python loop; tests/test_intervals.py checks each against a
brute-force count over the integers.
"""

from __future__ import annotations

import numpy as np

from tpuperf import kernels
from tpuperf._dataclasses import dataclass
from tpuperf.columns import distinct, sum_by


@dataclass(frozen=True, eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class Intervals:
    """Disjoint, sorted, non-empty half-open intervals [starts[i], ends[i])."""

    starts: np.ndarray
    ends: np.ndarray

    @property
    def total(self) -> int:
        return int((self.ends - self.starts).sum())

    def __len__(self) -> int:
        return len(self.starts)


def sums_before(at: np.ndarray, *columns: np.ndarray) -> list[np.ndarray]:
    """For each k of ``at`` (0 <= k <= n, the columns' length), the int64 sum of column[:k],
    for each column; sums wrap past int64 as numpy's integer sums do.

    For few points (see _few), one pass over each column summing the runs between the
    distinct points, then the running sum of those few sums: no array as long as the columns
    (a device's intervals are one an op), so that nothing of that size is kept or made. A
    difference of two such sums is exact whenever the true difference fits in int64, even
    where each sum wrapped: sums of op start times in ps can pass 2**63, the covered time
    they measure cannot. For many points, running sums over each column (made and let go
    of here) cost less than sorting the points.
    """
    at = np.asarray(at, dtype=np.int64)
    n = len(columns[0])
    if not n or not len(at):
        return [np.zeros(len(at), dtype=np.int64) for _ in columns]
    if not _few(at, n):
        return [_running_sums(column)[at] for column in columns]
    cuts = distinct(at)
    inner = cuts[(cuts > 0) & (cuts < n)]
    bounds = np.empty(len(inner) + 2, dtype=np.int64)
    bounds[0], bounds[-1] = 0, n
    bounds[1:-1] = inner
    where = np.searchsorted(bounds, at)
    out = []
    for column in columns:
        sums = np.empty(len(bounds), dtype=np.int64)  # sums[j]: column[:bounds[j]]
        sums[0] = 0
        np.cumsum(np.add.reduceat(column, bounds[:-1], dtype=np.int64), out=sums[1:])
        out.append(sums[where])
    return out


def _few(at: np.ndarray, n: int) -> bool:
    """Whether ``at`` are few enough points among ``n`` values to sort them rather than sum
    over every value (a device's step windows against its ops, as a rule; a training profile
    of short steps has one window for every few ops)."""
    return 16 * len(at) < n


def _running_sums(values: np.ndarray) -> np.ndarray:
    """0, then the running int64 sum of ``values`` (len(values) + 1 values)."""
    out = np.empty(len(values) + 1, dtype=np.int64)
    out[0] = 0
    np.cumsum(values, out=out[1:], dtype=np.int64)
    return out


EMPTY = Intervals(np.empty(0, dtype="int64"), np.empty(0, dtype="int64"))


def union(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """The union of possibly overlapping intervals; empty ones are dropped."""
    starts = np.asarray(starts, dtype="int64")
    ends = np.asarray(ends, dtype="int64")
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if len(starts) == 0:
        return EMPTY
    if not bool((starts[1:] >= starts[:-1]).all()):  # (an op line's are in order, as a rule)
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    # A new interval begins where the start lies past everything before it.
    new = np.empty(len(starts), dtype=bool)
    new[0] = True
    new[1:] = starts[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(starts) - 1)
    return Intervals(starts[first], reach[last])


def union_by_group(
    starts: np.ndarray, ends: np.ndarray, group: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The union of each group's intervals, as :func:`union` makes it group by group: the
    starts, ends and group of every interval of every union, in group order (thousands of
    small sets made in a few passes over all of them, not a sort each)."""
    starts = np.asarray(starts, dtype="int64")
    ends = np.asarray(ends, dtype="int64")
    group = np.asarray(group, dtype="int64")
    keep = ends > starts
    starts, ends, group = starts[keep], ends[keep], group[keep]
    if len(starts) == 0:
        return starts, ends, group
    order = np.lexsort((starts, group))  # by group, then start; stable, as union's sort
    starts, ends, group = starts[order], ends[order], group[order]
    new_group = np.empty(len(starts), dtype=bool)
    new_group[0] = True
    np.not_equal(group[1:], group[:-1], out=new_group[1:])
    # The running maximum of the ends within each group: taken over the ends' ranks, each
    # group lifted past every rank of the groups before it, so that one running maximum
    # never carries from one group into the next.
    values = distinct(ends)
    lift = (np.cumsum(new_group) - 1) * len(values)
    reach = values[np.maximum.accumulate(np.searchsorted(values, ends) + lift) - lift]
    # A new interval begins a group, or where its start lies past everything before it.
    new = new_group
    new[1:] |= starts[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(starts) - 1)
    return starts[first], reach[last], group[first]


def _membership(a: Intervals, points: np.ndarray) -> np.ndarray:
    """For each point, whether it lies in ``a``."""
    if len(a) == 0:
        return np.zeros(len(points), dtype=bool)
    idx = np.searchsorted(a.starts, points, side="right") - 1
    inside = idx >= 0
    inside[inside] = a.ends[idx[inside]] > points[inside]
    return inside


def _combine(a: Intervals, b: Intervals, both: bool) -> Intervals:
    bounds = distinct(np.concatenate([a.starts, a.ends, b.starts, b.ends]))
    if len(bounds) < 2:
        return EMPTY
    lo, hi = bounds[:-1], bounds[1:]
    in_a = _membership(a, lo)
    in_b = _membership(b, lo)
    mask = in_a & in_b if both else in_a & ~in_b
    return union(lo[mask], hi[mask])


def _touching(x: Intervals, y: Intervals) -> np.ndarray:
    """For each interval of x, whether it overlaps some interval of y."""
    idx = np.searchsorted(y.ends, x.starts, side="right")  # first y ending after x starts
    hit = idx < len(y)
    hit[hit] = y.starts[idx[hit]] < x.ends[hit]
    return hit


def _take(x: Intervals, mask: np.ndarray) -> Intervals:
    return Intervals(x.starts[mask], x.ends[mask])


def intersect(a: Intervals, b: Intervals) -> Intervals:
    if len(a) == 0 or len(b) == 0:
        return EMPTY
    # Only intervals that touch the other set matter; the sweep then sorts far fewer bounds.
    return _combine(_take(a, _touching(a, b)), _take(b, _touching(b, a)), both=True)


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """a minus b."""
    if len(a) == 0 or len(b) == 0:
        return a
    hit = _touching(a, b)
    if not hit.any():
        return a
    cut = _combine(_take(a, hit), _take(b, _touching(b, a)), both=False)
    return merge(_take(a, ~hit), cut)


def merge(*sets: Intervals) -> Intervals:
    """The union of several disjoint sets."""
    sets = tuple(s for s in sets if len(s))
    if not sets:
        return EMPTY
    if len(sets) == 1:
        return sets[0]
    return union(np.concatenate([s.starts for s in sets]), np.concatenate([s.ends for s in sets]))


def covered_before(a: Intervals, t: np.ndarray) -> np.ndarray:
    """For each time t, the length of ``a`` that lies before t."""
    t = np.asarray(t, dtype="int64")
    if len(a) == 0:
        return np.zeros(len(t), dtype="int64")
    starts, ends = a.starts, a.ends  # each read once (a set may make them when read)
    idx = kernels.search_sorted(starts, t, "right")  # intervals starting at or before t
    # Their whole length (for few t, the ends' sum less the starts', so that no array of
    # lengths is made) ...
    if _few(idx, len(starts)):
        end_sums, start_sums = sums_before(idx, ends, starts)
        full = end_sums - start_sums
    else:
        (full,) = sums_before(idx, ends - starts)
    # ... less the part of the last one that lies after t.
    last = idx - 1
    has = last >= 0
    over = np.zeros(len(t), dtype="int64")
    over[has] = np.maximum(ends[last[has]] - t[has], 0)
    return full - over


def overlap_by_group(
    starts: np.ndarray, ends: np.ndarray, group: np.ndarray, n_groups: int, b: Intervals
) -> np.ndarray:
    """For intervals [starts, ends) labelled by ``group`` (0 <= group < n_groups; each group's
    intervals disjoint, as the sets of :func:`union` are), the int64 length of each group's
    intersection with ``b``: ``intersect(group's set, b).total`` for every group in one pass
    (how much of ``b`` lies before each end, less how much before each start, summed)."""
    if not len(starts) or not len(b):
        return np.zeros(n_groups, dtype=np.int64)
    inside = covered_before(b, ends) - covered_before(b, starts)
    return sum_by(group, n_groups, inside)


def measure_in(a: Intervals, win_starts: np.ndarray, win_ends: np.ndarray) -> np.ndarray:
    """For each window [s, e), the length of ``a`` inside it (one pass over both edges)."""
    n = len(win_starts)
    before = covered_before(a, np.concatenate([win_ends, win_starts]))
    return before[:n] - before[n:]


# For each window, (the first interval of a set ending after the window starts, how many of
# its intervals start before the window ends): where the measures below look (window_edges).
Edges = tuple[np.ndarray, np.ndarray]


def window_edges(a: Intervals, win_starts: np.ndarray, win_ends: np.ndarray) -> Edges:
    """Where each window's edges fall among the intervals of ``a`` (see Edges): found once
    for :func:`interior_gaps`, :func:`first_inside` and :func:`last_inside` of one set."""
    return (
        kernels.search_sorted(a.ends, win_starts, "right"),
        kernels.search_sorted(a.starts, win_ends, "left"),
    )


def interior_gaps(
    a: Intervals,
    win_starts: np.ndarray,
    win_ends: np.ndarray,
    short_ps: int,
    edges: Edges | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each window, the gaps between intervals of ``a`` that lie wholly inside it
    (``edges``: window_edges of the same, where already found).

    Returns (total length of gaps shorter than ``short_ps``, their count, the count of
    the others). The gaps between intervals k and k+1 with k from the first interval
    ending after the window start to the one before the last starting before its end.
    """
    n = len(win_starts)
    if len(a) < 2:
        zeros = np.zeros(n, dtype="int64")
        return zeros, zeros.copy(), zeros.copy()
    first, starting = edges if edges is not None else window_edges(a, win_starts, win_ends)
    stop = np.maximum(starting - 1, first)  # fewer than two intervals in the window: no gap
    # Windows past the last interval (or overlapping ones) count no gap, never past the end.
    last = len(a) - 1
    first, stop = np.minimum(first, last), np.minimum(stop, last)
    # The short gaps' length and count before each bound: summed up to the few distinct
    # bounds in one pass over the intervals (each gap > 0: no interval touches the next).
    bounds = np.concatenate([stop, first])
    cuts = distinct(bounds)
    length, count = kernels.gap_sums(a.starts, a.ends, cuts, short_ps)
    at = np.searchsorted(cuts, bounds)
    length, count = length[at], count[at]
    short_n = count[:n] - count[n:]
    return length[:n] - length[n:], short_n, (stop - first) - short_n


def first_inside(
    a: Intervals, win_starts: np.ndarray, win_ends: np.ndarray, edges: Edges | None = None
) -> np.ndarray:
    """For each window, the first time in it covered by ``a`` (the window end when none;
    ``edges``: window_edges of the same, where already found)."""
    win_starts = np.asarray(win_starts, dtype="int64")
    win_ends = np.asarray(win_ends, dtype="int64")
    if len(a) == 0:
        return win_ends.copy()
    # The interval containing the window start, if any, else the next one to begin.
    idx = edges[0] if edges is not None else kernels.search_sorted(a.ends, win_starts, "right")
    out = win_ends.copy()
    ok = idx < len(a)
    out[ok] = np.minimum(np.maximum(a.starts[idx[ok]], win_starts[ok]), win_ends[ok])
    return out


def last_inside(
    a: Intervals, win_starts: np.ndarray, win_ends: np.ndarray, edges: Edges | None = None
) -> np.ndarray:
    """For each window, the last time in it covered by ``a`` (the window start when none;
    ``edges``: window_edges of the same, where already found)."""
    win_starts = np.asarray(win_starts, dtype="int64")
    win_ends = np.asarray(win_ends, dtype="int64")
    if len(a) == 0:
        return win_starts.copy()
    starting = edges[1] if edges is not None else kernels.search_sorted(a.starts, win_ends, "left")
    idx = starting - 1
    out = win_starts.copy()
    ok = idx >= 0
    out[ok] = np.maximum(np.minimum(a.ends[idx[ok]], win_ends[ok]), win_starts[ok])
    return out


def gaps_in(a: Intervals, win_start: int, win_end: int) -> Intervals:
    """The uncovered parts of one window."""
    window = Intervals(np.array([win_start], dtype="int64"), np.array([win_end], dtype="int64"))
    if win_end <= win_start:
        return EMPTY
    return subtract(window, a)


def nonempty(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Intervals already sorted, disjoint and non-empty (as the kernels' kind_runs gives
    them), as a set; EMPTY for none."""
    return Intervals(starts, ends) if len(starts) else EMPTY
