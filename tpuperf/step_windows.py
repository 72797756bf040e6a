"""Step windows, computed in this one place: steps from module periods, and which window a
time falls in.

The table builder uses them to give every op its step and to derive steps where a profile
has no Steps line or step markers; the timeline to select and measure windows.
"""

from __future__ import annotations

import numpy as np

from tpuperf.columns import Strings, Table

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


def dominant_program(modules: Table) -> tuple[str, str, np.ndarray] | None:
    """The dominant program of one device: the (module, program id) with the most total
    execution time (the first in name order on a tie), and the rows of its executions.

    A program, not a module name: one name can stand for several programs (a jitted
    function compiled for several shapes), whose interleaved calls have no common period.
    None without module executions.
    """
    if not modules.n:
        return None
    module = modules.strings("module")
    has_program = "program_id" in modules
    program = modules.strings("program_id") if has_program else Strings.constant("", modules.n)
    pair = module.codes.astype(np.int64) * (len(program.values) + 1) + program.codes
    pairs, index = np.unique(pair, return_inverse=True)
    totals = np.bincount(index, weights=modules.array("dur_ps"), minlength=len(pairs))

    def name(i: int) -> tuple[str, str]:
        code = int(pairs[i])
        return module.values[code // (len(program.values) + 1)], program.values[
            code % (len(program.values) + 1)
        ]

    order = sorted(range(len(pairs)), key=name)
    dominant = max(order, key=lambda i: totals[i])
    module_name, program_id = name(dominant)
    return module_name, program_id, np.flatnonzero(index == dominant)


def dominant_module_steps(modules: Table) -> Table | None:
    """One device's steps from the executions of its dominant program (:func:`dominant_program`).

    Step i runs from execution i's start to execution i+1's. The last execution has no
    successor, so it bounds the last step and is not a step itself (giving it a made-up length
    would turn the idle time after the final call into a step). A single execution is the one
    step, bounded by its own duration. Columns: step, start_ps, end_ps, source
    ("module_period"); None without module executions.
    """
    found = dominant_program(modules)
    if found is None:
        return None
    chosen = found[2]
    start = modules.array_at("start_ps", chosen)
    order = np.argsort(start, kind="stable")
    start = start[order]
    if len(start) >= 2:
        start, end = start[:-1], start[1:]
    else:
        end = start + modules.array_at("dur_ps", chosen)[order]
    return Table(
        {
            "step": np.arange(len(start), dtype=np.int64),
            "start_ps": start,
            "end_ps": end,
            "source": Strings.constant(SOURCE_MODULE_PERIOD, len(start)),
        }
    )


def program_label(modules: Table) -> str | None:
    """``module(program_id)`` of the dominant program, as the metadata plane names it."""
    found = dominant_program(modules)
    if found is None:
        return None
    module, program, _ = found
    return f"{module}({program})" if program else module
