"""Step windows, computed in this one place: steps from module periods, and which window a
time falls in.

The table builder uses them to give every op its step and to derive steps where a profile
has no Steps line or step markers; the timeline to select and measure windows.
"""

from __future__ import annotations

import numpy as np

from tpuperf.columns import Strings, Table, median

SOURCE_MODULE_PERIOD = "module_period"


def window_of(times: np.ndarray, win_starts: np.ndarray, win_ends: np.ndarray) -> np.ndarray:
    """Index of the window [start, end) holding each time, or -1 for none.

    Windows are sorted by start and do not overlap.
    """
    times = np.asarray(times)
    if (
        len(times) > 4 * len(win_starts)
        and len(win_starts)
        and bool(np.all(win_starts[1:] >= win_ends[:-1]))
        and bool(np.all(times[1:] >= times[:-1]))
    ):
        # Sorted times (a line's ops) in disjoint windows: window w holds the run of times
        # [first[w], stop[w]). Its label is added where the run starts and taken off where it
        # stops, and a running sum labels every time: one pass, no search per time.
        first = np.searchsorted(times, win_starts, side="left")
        stop = np.maximum(np.searchsorted(times, win_ends, side="left"), first)
        label = np.arange(1, len(win_starts) + 1, dtype=np.int64)
        marks = np.zeros(len(times) + 1, dtype=np.int64)
        np.add.at(marks, first, label)
        np.add.at(marks, stop, -label)
        out = np.cumsum(marks[:-1])
        out -= 1
        return out
    index = np.searchsorted(win_starts, times, side="right") - 1
    clipped = np.maximum(index, 0)
    inside = (index >= 0) & (times < win_ends[clipped]) if len(win_ends) else index >= 0
    return np.where(inside, index, -1)


def dominant_module_steps(modules: Table) -> Table | None:
    """One device's steps from its dominant module (the one with the most total time).

    Step i runs from execution i's start to execution i+1's; the last lasts the
    median period (or, with a single execution, that execution). Columns: step,
    start_ps, end_ps, source ("module_period"); None without module executions.
    """
    if not modules.n:
        return None
    module = modules.strings("module")
    codes = module.codes
    totals = np.bincount(codes, weights=modules.array("dur_ps"), minlength=len(module.values))
    # The dominant module: the most time, the first value on a tie (as pandas' idxmax over
    # the values in sorted order).
    order = sorted(range(len(module.values)), key=lambda c: module.values[c])
    dominant = max(order, key=lambda c: totals[c])
    chosen = np.flatnonzero(codes == dominant)
    start = modules.array_at("start_ps", chosen)
    start = start[np.argsort(start, kind="stable")]
    if len(start) >= 2:
        end = np.append(start[1:], start[-1] + int(median(np.diff(start))))
    else:
        end = start + modules.array_at("dur_ps", chosen)
    return Table(
        {
            "step": np.arange(len(start), dtype=np.int64),
            "start_ps": start,
            "end_ps": end,
            "source": Strings.constant(SOURCE_MODULE_PERIOD, len(start)),
        }
    )
