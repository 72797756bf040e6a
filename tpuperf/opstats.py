"""Aggregate the ops table: time, count and cost per op, category, module or program."""

from __future__ import annotations

import pandas as pd

from tpuperf.errors import UsageError

GROUPINGS = {"op": "op", "category": "category", "module": "module", "program": "program_id"}
SORT_KEYS = (
    "total_time",
    "self_time",
    "occurrences",
    "avg_time",
    "flops",
    "bytes_accessed",
    "name",
)
_SORT_COLUMNS = {
    "total_time": "total_time_ms",
    "self_time": "self_time_ms",
    "occurrences": "occurrences",
    "avg_time": "avg_time_us",
    "flops": "flops",
    "bytes_accessed": "bytes_accessed",
}


def aggregate(
    ops: pd.DataFrame,
    by: str = "op",
    per_device: bool = False,
    sort: str = "total_time",
    top: int | None = None,
) -> pd.DataFrame:
    """One row per ``by`` value (per device with ``per_device``), most total time first.

    Columns: [host, device,] key, category (the most common one of the group),
    occurrences, total_time_ms, self_time_ms, avg_time_us, time_pct (of all op
    time in the table, per device with ``per_device``), flops, bytes_accessed
    (sums; NaN when the profile does not record them).
    """
    if by not in GROUPINGS:
        raise UsageError(f"--by {by}: choose one of {', '.join(GROUPINGS)}")
    if sort not in SORT_KEYS:
        raise UsageError(f"--sort {sort}: choose one of {', '.join(SORT_KEYS)}")
    key = GROUPINGS[by]
    keys = (["host", "device"] if per_device else []) + [key]
    grouped = ops.groupby(keys, observed=True, sort=False)
    table = grouped.agg(
        occurrences=("dur_ps", "size"),
        total_ps=("dur_ps", "sum"),
        self_ps=("self_ps", "sum"),
        flops=("flops", lambda s: s.sum(min_count=1)),
        bytes_accessed=("bytes_accessed", lambda s: s.sum(min_count=1)),
    ).reset_index()
    if key != "category":
        category = grouped["category"].agg(lambda s: s.mode().iat[0] if len(s) else "")
        table.insert(len(keys), "category", category.astype(str).to_numpy())
    if key == "program_id":
        module = grouped["module"].agg(lambda s: s.mode().iat[0] if len(s) else "")
        table.insert(len(keys), "module", module.astype(str).to_numpy())
    table[key] = table[key].astype(str)
    table["total_time_ms"] = table.pop("total_ps") / 1e9
    table["self_time_ms"] = table.pop("self_ps") / 1e9
    table["avg_time_us"] = table["total_time_ms"] * 1e3 / table["occurrences"]
    if per_device:
        device_total = table.groupby(["host", "device"], observed=True)["total_time_ms"].transform(
            "sum"
        )
    else:
        device_total = table["total_time_ms"].sum()
    table["time_pct"] = 100.0 * table["total_time_ms"] / device_total
    ordered = [*keys, *(c for c in ("module", "category") if c in table and c != key)]
    ordered += [
        "occurrences",
        "total_time_ms",
        "self_time_ms",
        "avg_time_us",
        "time_pct",
        "flops",
        "bytes_accessed",
    ]
    table = table[ordered]
    if sort == "name":
        table = table.sort_values(key, kind="stable")
    else:
        table = table.sort_values(_SORT_COLUMNS[sort], ascending=False, kind="stable")
    if top is not None:
        table = (
            table.groupby(["host", "device"], observed=True).head(top)
            if per_device
            else table.head(top)
        )
    return table.reset_index(drop=True)
