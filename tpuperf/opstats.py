"""Aggregate the ops table: time, count and cost per op, category, module or program."""

from __future__ import annotations

import pandas as pd

from tpuperf.errors import UsageError

# --by value -> the columns of a row's identity. Ops are identified per program, as in XProf's
# hlo_stats: same-named ops of different programs (fusion.3 of two jitted functions) are
# different ops. `op` merges them by name, and says how many programs each row merged.
GROUPINGS: dict[str, tuple[str, ...]] = {
    "program_op": ("program_id", "op"),
    "op": ("op",),
    "category": ("category",),
    "module": ("module",),
    "program": ("program_id",),
}
DEFAULT_GROUPING = "program_op"
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
    by: str = DEFAULT_GROUPING,
    per_device: bool = False,
    sort: str = "total_time",
    top: int | None = None,
) -> pd.DataFrame:
    """One row per ``by`` group (per device with ``per_device``), most total time first.

    Columns: [host, device,] the group's key columns (``program_op``: program_id, op),
    module (for program groupings), category (the one with the most time in the
    group), programs (with ``op``: how many programs' ops the row merges),
    occurrences, total_time_ms, self_time_ms, avg_time_us, time_pct (of all op time
    in the table, per device with ``per_device``), flops, bytes_accessed (sums; NaN
    when the profile does not record them).
    """
    if by not in GROUPINGS:
        raise UsageError(f"--by {by}: choose one of {', '.join(GROUPINGS)}")
    if sort not in SORT_KEYS:
        raise UsageError(f"--sort {sort}: choose one of {', '.join(SORT_KEYS)}")
    key = list(GROUPINGS[by])
    keys = (["host", "device"] if per_device else []) + key
    grouped = ops.groupby(keys, observed=True, sort=False)
    table = grouped.agg(
        occurrences=("dur_ps", "size"),
        total_ps=("dur_ps", "sum"),
        self_ps=("self_ps", "sum"),
        flops=("flops", lambda s: s.sum(min_count=1)),
        bytes_accessed=("bytes_accessed", lambda s: s.sum(min_count=1)),
    ).reset_index()
    labels = []
    if "category" not in key:
        labels.append("category")
    if "program_id" in key:
        labels.append("module")
    for label in labels:
        table = table.merge(_dominant(ops, keys, label), on=keys, how="left")
    if by == "op":
        programs = grouped["program_id"].nunique().rename("programs").reset_index()
        table = table.merge(programs, on=keys, how="left")
    for column in key:
        table[column] = table[column].astype(str)
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
    ordered = [
        *keys,
        *(c for c in ("module", "category", "programs") if c in table and c not in keys),
    ]
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
        table = table.sort_values(key[::-1], kind="stable")
    else:
        table = table.sort_values(_SORT_COLUMNS[sort], ascending=False, kind="stable")
    if top is not None:
        table = (
            table.groupby(["host", "device"], observed=True).head(top)
            if per_device
            else table.head(top)
        )
    return table.reset_index(drop=True)


def _dominant(ops: pd.DataFrame, keys: list[str], column: str) -> pd.DataFrame:
    """Per group of ``keys``, the value of ``column`` with the most op time (a group's label:
    a module whose time is 96% copy-done is labelled copy-done, not its most frequent op's)."""
    time = (
        ops.groupby([*keys, column], observed=True, sort=False)["dur_ps"]
        .sum()
        .reset_index()
        .sort_values("dur_ps", ascending=False, kind="stable")
    )
    first = time.drop_duplicates(keys)[[*keys, column]]
    return first.assign(**{column: first[column].astype(str)})
