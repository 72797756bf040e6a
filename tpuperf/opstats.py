"""Aggregate the ops: time, count and cost per op (of each program), category, module or
program, computed on the profile's columns (no pandas; ``aggregate`` gives a DataFrame)."""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any

import numpy as np

from tpuperf import kernels
from tpuperf._dataclasses import dataclass
from tpuperf.columns import (
    Column,
    Lookup,
    Strings,
    Table,
    concat_strings,
    group_index,
    sum_by,
    sum_by_min_count,
)
from tpuperf.errors import UsageError

if TYPE_CHECKING:
    from tpuperf.profiles import Profile

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
# --by values that group by where ops sit in the model's code (tpuperf/scopes.py).
SCOPE_GROUPINGS = ("scope", "source", "pass")
# --by collective: the collectives analyzer's per-collective table (README, Collectives).
COLLECTIVE_GROUPING = "collective"
SCOPE_SORT_KEYS = ("total_time", "self_time", "occurrences", "name")
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


def aggregate_table(
    profile: Profile,
    by: str = DEFAULT_GROUPING,
    per_device: bool = False,
    sort: str = "total_time",
    top: int | None = None,
    depth: int | None = None,
) -> Table:
    """One row per ``by`` group (per device with ``per_device``), most total time first.

    Columns: [host, device,] the group's key columns (``program_op``: program_id, op),
    module (for program groupings), category (the one with the most time in the
    group), programs (with ``op``: how many programs' ops the row merges),
    occurrences, total_time_ms, self_time_ms, avg_time_us, time_pct (of all op time
    in the table, per device with ``per_device``), flops, bytes_accessed (sums; NaN
    when the profile does not record them).

    ``by`` scope, source or pass groups by where the ops sit in the model's code (see
    :func:`scope_groups`); ``depth`` limits scope levels.
    """
    if by in SCOPE_GROUPINGS:
        return scope_groups(profile, by, per_device, sort, top, depth)
    if by == COLLECTIVE_GROUPING:  # a table of the analysis, above this module
        raise UsageError(
            f"--by {by}: one row per collective op is the collectives analyzer's table: "
            "tpuperf.analysis.collective_table(profile)"
        )
    if by not in GROUPINGS:
        choices = (*GROUPINGS, *SCOPE_GROUPINGS, COLLECTIVE_GROUPING)
        raise UsageError(f"--by {by}: choose one of {', '.join(choices)}")
    if sort not in SORT_KEYS:
        raise UsageError(f"--sort {sort}: choose one of {', '.join(SORT_KEYS)}")
    key = GROUPINGS[by]
    labels = [c for c in ("category",) if c not in key] + (
        ["module"] if "program_id" in key else []
    )
    # Each device's groups (one part a device, in device order), merged below into the
    # groups of the table by their names: a group's row is where its name first appears.
    parts: list[dict[str, Any]] = []
    for device in profile.device_tables:
        ops = device.ops
        if not ops.n:
            continue
        part = _part_by_index(ops, key, labels, by) or _part_by_row(ops, key, labels, by)
        n_groups = len(part["occurrences"])
        part["host"] = Strings.constant(device.host, n_groups)
        part["device"] = np.full(n_groups, device.device, dtype=np.int64)
        parts.append(part)
    return _table(_merge(parts, key, labels, by, per_device), by, key, per_device, sort, top)


def _part_by_row(ops: Table, key: tuple[str, ...], labels: list[str], by: str) -> dict[str, Any]:
    """A device's groups (see :func:`aggregate_table`), computed row by row: the group of
    each op, then sums over the ops."""
    keys = [ops.strings(c) for c in key]
    group, first = group_index(keys)
    n_groups = len(first)
    dur = ops.array("dur_ps")
    part: dict[str, Any] = {
        "names": [k.take(first).compact() for k in keys],
        "occurrences": np.bincount(group, minlength=n_groups).astype(np.int64),
        "total": sum_by(group, n_groups, dur).astype(np.int64),
        "self": sum_by(group, n_groups, ops.array("self_ps")).astype(np.int64),
    }
    for name, column in (("flops", "flops"), ("bytes", "bytes_accessed")):
        floats = ops.array(column).astype(np.float64, copy=False)
        part[name] = sum_by_min_count(group, n_groups, floats)
    for label in labels:
        # The op time of each (group, value of the label) pair, pairs in order of first
        # appearance.
        values = ops.strings(label)
        pairs, pair_first = group_index([*keys, values])
        part[label] = (
            group[pair_first],
            values.take(pair_first).compact(),
            sum_by(pairs, len(pair_first), dur).astype(np.int64),
        )
    if by == "op":
        # The programs of each group: its distinct (group, program) pairs, not every op.
        program = ops.strings("program_id")
        _, pair_first = group_index([group, program])
        part["programs"] = (group[pair_first], program.take(pair_first).compact())
    return part


def _part_by_index(
    ops: Table, key: tuple[str, ...], labels: list[str], by: str
) -> dict[str, Any] | None:
    """:func:`_part_by_row`, the same arrays to the bit, where the key and label columns
    share one index (a TPU op's names, by metadata row): the ops are read once, into counts,
    first rows and time per index value (kernels.group_totals), and the groups and pairs
    are made of the few distinct index values instead of every op. None where the columns
    do not share an index (GPU tables) or the times are not int64 columns.

    Integer sums are the same in any order; the float sums (flops, bytes_accessed) are added
    op by op in the ops' order, as over the ops (:func:`_float_sums`)."""
    keys = [ops.strings(c) for c in key]
    named = [*keys, *(ops.strings(c) for c in labels)]
    if by == "op":
        named.append(ops.strings("program_id"))
    index = keys[0].index
    mapping = keys[0].mapping
    times = tuple(c for c in (ops["dur_ps"], ops["self_ps"]) if isinstance(c, np.ndarray))
    if (
        mapping is None
        or index.dtype not in (np.int32, np.int64)
        or any(s.index is not index or s.mapping is None for s in named)
        or len(times) != 2
        or any(t.dtype != np.int64 for t in times)
    ):
        return None
    # Every index value has a mapping entry: an index outside them is not this way.
    totals = kernels.group_totals(index, times, len(mapping))
    if totals is None:
        return None
    first_op, counts, (dur, self_time) = totals
    # The index values in use, in order of their first op: groups and pairs then come in
    # order of first appearance, as over the ops.
    used = np.flatnonzero(counts)
    used = used[np.argsort(first_op[used], kind="stable")]
    first_op, counts, dur = first_op[used], counts[used], dur[used]
    # The names of the index values in use (their codes, grouped without a sort)
    group, first = group_index(
        [Strings(s.mapping[used], s.values) for s in keys if s.mapping is not None]
    )
    n_groups = len(first)
    part: dict[str, Any] = {
        "names": [k.take(first_op[first]).compact() for k in keys],
        "occurrences": sum_by(group, n_groups, counts),
        "total": sum_by(group, n_groups, dur),
        "self": sum_by(group, n_groups, self_time[used]),
    }
    part["flops"], part["bytes"] = _float_sums(
        [ops["flops"], ops["bytes_accessed"]], index, used, group, n_groups
    )
    for label in [*labels, *(["program_id"] if by == "op" else [])]:
        values = ops.strings(label)
        assert values.mapping is not None
        pairs, pair_first = group_index([group, Strings(values.mapping[used], values.values)])
        pair = (group[pair_first], values.take(first_op[pair_first]).compact())
        if label in labels:
            part[label] = (*pair, sum_by(pairs, len(pair_first), dur))
        else:
            part["programs"] = pair
    return part


def _float_sums(
    columns: list[Column], index: np.ndarray, used: np.ndarray, group: np.ndarray, n_groups: int
) -> list[np.ndarray]:
    """Sums per group of float columns, NaN skipped, NaN for a group with no value
    (:func:`sum_by_min_count` over the ops), in a table whose ``index`` values ``used`` are in
    the groups ``group`` (see :func:`_part_by_index`). Lookups through ``index`` (FLOPs and
    bytes per metadata row) are summed through it in one pass, without reading them out."""
    lookups = [c for c in columns if isinstance(c, Lookup) and c.index is index]
    sizes = {len(c.values) for c in lookups}
    if len(lookups) == len(columns) and len(sizes) == 1:
        group_of = np.zeros(sizes.pop(), dtype=np.int64)
        group_of[used] = group
        values = tuple(c.values for c in lookups)
        found = kernels.group_nansums(group_of, values, n_groups, index)
        if found is not None:
            return [np.where(counts > 0, sums, np.nan) for sums, counts in found]
    group_of = np.zeros(int(used.max()) + 1, dtype=np.int64)
    group_of[used] = group
    rows = group_of[index]
    return [
        sum_by_min_count(
            rows,
            n_groups,
            (c.array() if isinstance(c, Lookup) else np.asarray(c)).astype(np.float64, copy=False),
        )
        for c in columns
    ]


def _merge(
    parts: list[dict[str, Any]],
    key: tuple[str, ...],
    labels: list[str],
    by: str,
    per_device: bool,
) -> dict[str, Any]:
    """The devices' groups (``parts``) summed by name ([host, device,] the key columns), as
    the columns of the table before its order. The rules, as a sum over devices in their order:

    - a row per distinct name, in order of first appearance (device order, then each device's
      groups in order of their first op);
    - occurrences, total and self time: exact integer sums;
    - flops, bytes_accessed: each device's sum skipping NaN (NaN where the device's group has
      no value), then those summed skipping NaN in device order (the first value as it is,
      then added one by one), NaN where no device has a value;
    - category, module: the value with the most op time summed over the devices (exact
      integer picoseconds); on equal time the value whose (group, value) pair appeared first
      (device order, then each device's pairs in order of their first op); "" when no value
      has time >= 0 (or the group has none);
    - programs (``by`` op): how many distinct program ids the row's ops have.
    """
    columns: dict[str, Any] = {}
    if not parts:
        for name in ("host", *key, *labels):
            columns[name] = Strings.from_list([])
        columns["device"] = np.zeros(0, dtype=np.int64)
        for name in ("occurrences", "total", "self", "programs"):
            columns[name] = np.zeros(0, dtype=np.int64)
        columns["flops"] = columns["bytes"] = np.zeros(0, dtype=np.float64)
        return columns
    names = [concat_strings([p["names"][i] for p in parts]) for i in range(len(key))]
    if per_device:
        hosts = concat_strings([p["host"] for p in parts])
        devices = np.concatenate([p["device"] for p in parts])
        row, first = group_index([hosts, devices, *names])
        columns["host"] = hosts.take(first)
        columns["device"] = devices[first]
    else:
        row, first = group_index(names)
    n_rows = len(first)
    for name, strings in zip(key, names, strict=True):
        columns[name] = strings.take(first)
    for name in ("occurrences", "total", "self"):
        columns[name] = sum_by(row, n_rows, np.concatenate([p[name] for p in parts]))
    for name in ("flops", "bytes"):
        per_device_sums = np.concatenate([p[name] for p in parts])
        present = ~np.isnan(per_device_sums)
        sums = np.full(n_rows, -0.0)  # -0.0 + x is x, to the bit: the first value as it is
        np.add.at(sums, row[present], per_device_sums[present])  # one by one, in order
        counts = np.bincount(row[present], minlength=n_rows)
        columns[name] = np.where(counts > 0, sums, np.nan)
    # Each device's rows start where the parts before it end.
    starts = np.cumsum([0] + [len(p["occurrences"]) for p in parts])[:-1]
    for label in labels:
        pair_row = np.concatenate(
            [row[start + p[label][0]] for start, p in zip(starts, parts, strict=True)]
        )
        values = concat_strings([p[label][1] for p in parts])
        time = np.concatenate([p[label][2] for p in parts])
        # (row, value) pairs over the devices, in order of first appearance
        pair, pair_first = group_index([pair_row, values.codes])
        pair_time = sum_by(pair, len(pair_first), time).astype(np.int64)
        pair_of_row = pair_row[pair_first]
        # By row, then most time, then first appearance: the first of each row wins.
        order = np.lexsort((np.arange(len(pair_first)), -pair_time, pair_of_row))
        lead = np.ones(len(order), dtype=bool)
        lead[1:] = pair_of_row[order[1:]] != pair_of_row[order[:-1]]
        best = order[lead]
        # "" where no value has time >= 0 (as a first pick that must beat -1)
        none = values.code("")
        texts = values.values if none >= 0 else (*values.values, "")
        value_code = np.full(n_rows, none if none >= 0 else len(values.values), dtype=np.int64)
        keep = pair_time[best] > -1
        value_code[pair_of_row[best][keep]] = values.codes[pair_first[best][keep]]
        columns[label] = Strings(value_code, texts)
    if by == "op":
        program_row = np.concatenate(
            [row[start + p["programs"][0]] for start, p in zip(starts, parts, strict=True)]
        )
        programs = concat_strings([p["programs"][1] for p in parts])
        _, pair_first = group_index([program_row, programs.codes])
        columns["programs"] = np.bincount(program_row[pair_first], minlength=n_rows).astype(
            np.int64
        )
    return columns


def _dominant(per_value: dict[str, int]) -> str:
    """The value with the most time; on a tie, the first seen."""
    best, best_time = "", -1
    for value, time in per_value.items():
        if time > best_time:
            best, best_time = value, time
    return best


def _table(
    merged: dict[str, Any],
    by: str,
    key: tuple[str, ...],
    per_device: bool,
    sort: str,
    top: int | None,
) -> Table:
    n_rows = len(merged["occurrences"])
    columns: dict[str, Any] = {}
    if per_device:
        columns["host"] = merged["host"]
        columns["device"] = merged["device"].astype(np.int64)
    for name in key:
        columns[name] = merged[name]
    for label in ("module", "category"):
        if label in merged and label not in key:
            columns[label] = merged[label]
    if by == "op":
        columns["programs"] = merged["programs"]
    occurrences = merged["occurrences"].astype(np.int64)
    total_ms = merged["total"].astype(np.int64) / 1e9
    columns["occurrences"] = occurrences
    columns["total_time_ms"] = total_ms
    columns["self_time_ms"] = merged["self"].astype(np.int64) / 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        columns["avg_time_us"] = total_ms * 1e3 / occurrences
    if per_device:
        hosts = list(zip(merged["host"].tolist(), merged["device"].tolist(), strict=True))
        device_total: dict[tuple[Any, ...], float] = {}
        for h, t in zip(hosts, total_ms.tolist(), strict=True):
            device_total[h] = device_total.get(h, 0.0) + t
        denominator = np.array([device_total[h] for h in hosts])
    else:
        denominator = np.full(n_rows, total_ms.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        columns["time_pct"] = 100.0 * total_ms / denominator
    columns["flops"] = merged["flops"].astype(np.float64)
    columns["bytes_accessed"] = merged["bytes"].astype(np.float64)
    table = Table(columns, n=n_rows)
    if sort == "name":
        names = list(zip(*(merged[name].tolist() for name in key), strict=True))
        order = sorted(range(n_rows), key=lambda i: names[i][::-1])
    else:
        values = table.array(_SORT_COLUMNS[sort]).astype("float64")
        # Descending and stable; NaN (no FLOPs recorded) last, as pandas sorts them.
        missing = np.isnan(values)
        order = sorted(
            range(n_rows), key=lambda i: (missing[i], -0.0 if missing[i] else -values[i])
        )
    return _top_rows(table.take(np.array(order, dtype=np.int64)), per_device, top)


def aggregate(
    profile: Profile,
    by: str = DEFAULT_GROUPING,
    per_device: bool = False,
    sort: str = "total_time",
    top: int | None = None,
    depth: int | None = None,
) -> Any:
    """:func:`aggregate_table` as a pandas DataFrame (the Python API's form)."""
    return aggregate_table(profile, by, per_device, sort, top, depth).to_pandas()


# --------------------------------------------------------------------------- by scope


@dataclass
class _ScopeGroup:
    occurrences: int = 0
    total_ps: int = 0
    self_ps: int = 0
    labels: dict[str, int] = field(default_factory=dict)  # scope -> ps (for --by source)


def scope_groups(
    profile: Profile,
    by: str,
    per_device: bool = False,
    sort: str = "total_time",
    top: int | None = None,
    depth: int | None = None,
) -> Table:
    """Op time by where the model's code made the ops (see :mod:`tpuperf.scopes`).

    Time is the ops' self time (nested ops are not counted twice). Per ``by``:

    - ``scope``: one row per scope, every level down to ``depth`` (all levels by default):
      ``scope``, ``depth``, ``total_time_ms`` (the scope and the scopes inside it),
      ``self_time_ms`` (its own ops only), their ``ms_per_step`` / ``self_ms_per_step``.
      Ops outside every scope are the rows ``(no scope)`` (no path) and ``(top level)`` (a
      path that is only their primitive), each of depth 1, as in the scope tree.
    - ``source``: one row per source line (``source``, ``(no source)`` for none), with the
      ``scope`` that has most of its time (named as ``--by scope`` names it), followed by
      `` +N`` when the line's ops are in N more scopes.
    - ``pass``: one row per pass (forward, backward, optimizer, other).

    Every table has ``occurrences``, ``total_time_ms``, ``ms_per_step`` (over the step windows
    of every device, so per step per device; a device without steps counts one window; work
    outside the steps is amortized over them) and ``time_pct`` (of all op time, per device with
    ``per_device``).
    """
    from tpuperf import scopes as sc

    if by not in SCOPE_GROUPINGS:
        raise UsageError(f"--by {by}: choose one of {', '.join(SCOPE_GROUPINGS)}")
    if sort not in SCOPE_SORT_KEYS:
        raise UsageError(
            f"--sort {sort}: with --by {by}, choose one of {', '.join(SCOPE_SORT_KEYS)}"
        )
    if depth is not None and depth < 1:
        raise UsageError("--depth must be at least 1")
    data = sc.scopes(profile)
    groups: dict[tuple[Any, ...], _ScopeGroup] = {}
    device_total: dict[tuple[Any, ...], int] = {}
    device_windows: dict[tuple[Any, ...], int] = {}
    devices = [d for d in profile.device_tables if d.ops.n]
    scope_names = [sc.scope_label(data, row) for row in range(data.n)] if by == "source" else []
    labels = data.table.strings(by).tolist() if by != "scope" else []
    for device in devices if per_device else [None]:
        times = sc.scope_time(profile, device)
        prefix: tuple[Any, ...] = (device.host, device.device) if device is not None else ()
        device_total[prefix] = int(times.time_ps.sum())
        device_windows[prefix] = times.windows
        for row in np.flatnonzero(times.occurrences).tolist():
            count, time_ps = int(times.occurrences[row]), int(times.time_ps[row])
            for name, own in _scope_keys(data, row, by, depth, labels):
                group = groups.setdefault((*prefix, name), _ScopeGroup())
                group.occurrences += count
                group.total_ps += time_ps
                if own:
                    group.self_ps += time_ps
                if by == "source":
                    scope = scope_names[row]
                    group.labels[scope] = group.labels.get(scope, 0) + time_ps
    names = list(groups)
    rows = list(groups.values())
    width = 2 if per_device else 0
    columns = _device_columns(names, per_device)
    columns[by] = Strings.from_list([n[width] for n in names])
    if by == "scope":
        columns["depth"] = np.array([_scope_depth(n[width]) for n in names], dtype=np.int64)
    if by == "source":
        columns["scope"] = Strings.from_list([_scopes_text(r.labels) for r in rows])
    total_ps = np.array([r.total_ps for r in rows], dtype=np.int64)
    self_ps = np.array([r.self_ps for r in rows], dtype=np.int64)
    windows = np.array([device_windows[n[:width]] for n in names], dtype=np.int64)
    denominator = np.array([device_total[n[:width]] for n in names], dtype=np.float64)
    columns["occurrences"] = np.array([r.occurrences for r in rows], dtype=np.int64)
    columns["total_time_ms"] = total_ps / 1e9
    if by == "scope":
        columns["self_time_ms"] = self_ps / 1e9
    columns["ms_per_step"] = total_ps / np.maximum(windows, 1) / 1e9
    if by == "scope":
        columns["self_ms_per_step"] = self_ps / np.maximum(windows, 1) / 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        columns["time_pct"] = 100.0 * total_ps / denominator
    table = Table(columns, n=len(rows))
    if sort == "name":
        rank = sorted(range(len(rows)), key=lambda i: names[i][width])
    else:
        # Descending and stable: a scope comes before the scopes inside it on a tie.
        key = {
            "total_time": total_ps,
            "self_time": self_ps if by == "scope" else total_ps,
            "occurrences": table.array("occurrences"),
        }[sort]
        rank = sorted(range(len(rows)), key=lambda i: -int(key[i]))
    order = _tree_order(names, width, rank) if by == "scope" else _by_device(names, width, rank)
    table = table.take(np.array(order, dtype=np.int64))
    return _top_rows(table, per_device, top)


def _by_device(names: list[tuple[Any, ...]], width: int, rank: list[int]) -> list[int]:
    """``rank`` (row indices in sort order), devices kept together in order of appearance."""
    devices = list(dict.fromkeys(n[:width] for n in names))
    position = {d: i for i, d in enumerate(devices)}
    return sorted(rank, key=lambda i: position[names[i][:width]])


def _tree_order(names: list[tuple[Any, ...]], width: int, rank: list[int]) -> list[int]:
    """Scope rows depth-first (a scope, then the scopes inside it), siblings in ``rank``
    order; devices kept together."""
    from tpuperf.scopes import split_levels

    children: dict[tuple[Any, ...], list[int]] = {}
    for i in rank:
        levels = split_levels(names[i][width])
        parent = (*names[i][:width], "/".join(levels[:-1]))
        children.setdefault(parent, []).append(i)
    order: list[int] = []

    def visit(key: tuple[Any, ...]) -> None:
        for i in children.get(key, []):
            order.append(i)
            visit((*names[i][:width], names[i][width]))

    for device in dict.fromkeys(n[:width] for n in names):
        visit((*device, ""))
    return order


def _scope_keys(
    data: Any, row: int, by: str, depth: int | None, labels: list[str]
) -> list[tuple[str, bool]]:
    """The groups a scope row adds its time to, each with whether the time is the group's own
    (for --by scope: the row's own scope, not a scope around it). ``labels``: each row's pass
    or source."""
    from tpuperf import scopes as sc

    if by == "pass":
        return [(labels[row], True)]
    if by == "source":
        return [(labels[row] or "(no source)", True)]
    levels, _ = sc.tree_path(data, row)  # (no scope) and (top level) are levels here
    shown = levels if depth is None else levels[:depth]
    return [("/".join(levels[: i + 1]), i + 1 == len(levels)) for i in range(len(shown))]


def _scope_depth(scope: str) -> int:
    from tpuperf import scopes as sc

    return len(sc.split_levels(scope))  # (no scope) and (top level) are one level, as a scope


def _scopes_text(per_scope: dict[str, int]) -> str:
    """The scope with the most time, and `` +N`` for the N other scopes (``Block_1/MLP +1``)."""
    best = _dominant(per_scope)
    return f"{best} +{len(per_scope) - 1}" if len(per_scope) > 1 else best


def _device_columns(names: list[tuple[Any, ...]], per_device: bool) -> dict[str, Any]:
    """The host and device columns of groups keyed (host, device, ...), when per device."""
    if not per_device:
        return {}
    return {
        "host": Strings.from_list([n[0] for n in names]),
        "device": np.array([n[1] for n in names], dtype=np.int64),
    }


def _top_rows(table: Table, per_device: bool, top: int | None) -> Table:
    if top is None:
        return table
    if not per_device:
        return table.take(np.arange(min(top, table.n)))
    seen: dict[tuple[Any, ...], int] = {}
    keep = []
    for i, h in enumerate(
        zip(table.strings("host").tolist(), table.array("device").tolist(), strict=True)
    ):
        seen[h] = seen.get(h, 0) + 1
        if seen[h] <= top:
            keep.append(i)
    return table.take(np.array(keep, dtype=np.int64))
