"""Step windows: steps from module periods, and which window a time falls in.

Shared by the table builder (which records each op's step) and the analyzers
(which select and measure windows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def window_of(times: np.ndarray, win_starts: np.ndarray, win_ends: np.ndarray) -> np.ndarray:
    """Index of the window [start, end) holding each time, or -1 for none.

    Windows are sorted by start and do not overlap.
    """
    index = np.searchsorted(win_starts, times, side="right") - 1
    clipped = np.maximum(index, 0)
    inside = (index >= 0) & (times < win_ends[clipped]) if len(win_ends) else index >= 0
    return np.where(inside, index, -1)


def dominant_module_steps(modules: pd.DataFrame) -> pd.DataFrame | None:
    """One device's steps from its dominant module (the one with the most total time).

    Step i runs from execution i's start to execution i+1's; the last lasts the
    median period (or, with a single execution, that execution). Columns: step,
    start_ps, end_ps, source ("module_period"); None without module executions.
    """
    if modules.empty:
        return None
    totals = modules.groupby("module", observed=True)["dur_ps"].sum()
    runs = modules[modules["module"] == totals.idxmax()].sort_values("start_ps")
    start = runs["start_ps"].to_numpy(dtype=np.int64)
    if len(start) >= 2:
        end = np.append(start[1:], start[-1] + int(np.median(np.diff(start))))
    else:
        end = start + runs["dur_ps"].to_numpy(dtype=np.int64)
    return pd.DataFrame(
        {
            "step": np.arange(len(start), dtype=np.int64),
            "start_ps": start,
            "end_ps": end,
            "source": "module_period",
        }
    )


def module_period_steps(modules: pd.DataFrame) -> pd.DataFrame:
    """:func:`dominant_module_steps` for every (host, device) of a modules table."""
    parts = []
    for (host, device), group in modules.groupby(["host", "device"], observed=True):
        steps = dominant_module_steps(group)
        if steps is not None:
            steps.insert(0, "device", int(device))
            steps.insert(0, "host", str(host))
            parts.append(steps)
    if not parts:
        return pd.DataFrame(columns=["host", "device", "step", "start_ps", "end_ps", "source"])
    return pd.concat(parts, ignore_index=True)
