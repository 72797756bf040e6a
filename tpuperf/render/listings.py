"""Terminal renderings of ``info``, ``ops``, ``scan`` and ``analyzers`` on a given console.

Each takes the command's data and a rich console (the width comes from the console;
``wide`` shows full names and every column) and draws tables with :mod:`tpuperf.render.fit`.
Profile strings reach the console only as :class:`~tpuperf.render.plain.Line` (drawn as
:class:`rich.text.Text` by rich), never as markup.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tpuperf.render.fit import Column, Kind, fit
from tpuperf.render.plain import Line
from tpuperf.render.text import fmt_step_ms

if TYPE_CHECKING:
    from rich.console import Console

    from tpuperf.columns import Table


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value: Any, digits: int = 1) -> str:
    return "-" if _missing(value) else f"{value:,.{digits}f}"


def _si(value: Any) -> str:
    """1.23e12 -> '1.23 T' (FLOPs, bytes)."""
    if _missing(value):
        return "-"
    for scale, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {suffix}"
    return f"{value:.0f}"


def _name(value: Any) -> str:
    """A name cell: ``-`` when empty, so the row's name is never blank."""
    text = "" if value is None else str(value)
    return text if text.strip() else "-"


def _width(console: Console, wide: bool) -> int | None:
    return None if wide else console.width


def _line(console: Console, text: Line | str, wide: bool = False) -> None:
    """One line of text (``wide``: never wrapped, however long)."""
    console.print(text if isinstance(text, Line) else Line(text), soft_wrap=wide)


def _packed(head: Line, items: list[str], width: int) -> Line:
    """``head`` then ``items`` separated by ``; ``, lines broken between items (never inside
    one), continuation lines indented."""
    text = head.copy()
    line = text.cell_len
    for item in items:
        if line + 2 + len(item) > width and line > 2:
            text.append(";\n  " + item)
            line = 2 + len(item)
        else:
            text.append("; " + item)
            line += 2 + len(item)
    return text


def _size(size_bytes: float) -> str:
    """A size in B, kB, MB or GB with 3 significant digits: 44.0 kB, 1.23 MB, 784 MB."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if size_bytes >= scale * 0.9995:  # 999.6 kB rounds to 1.00 MB, not 1000 kB
            value = size_bytes / scale
            digits = 2 if value < 9.995 else 1 if value < 99.95 else 0
            return f"{value:.{digits}f} {unit}"
    return f"{size_bytes:.0f} B"


# --------------------------------------------------------------------------- info


def render_info(info: dict[str, Any], console: Console, wide: bool = False) -> None:
    """``tpuperf info``: the source, hosts, devices, steps, time span and lines."""
    width = _width(console, wide)
    _line(console, Line(info["source"], style="bold"))
    decoder = (
        "C module (tpuperf._wire_native)"
        if info["decoder"] == "native"
        else f"numpy ({info.get('decoder_reason') or 'the C module is not built'}: slower, "
        "same results)"
    )
    _line(console, f"platform {info['platform']}; decoder {decoder}")
    for host in info["hosts"]:
        text = Line("host ")
        text.append(host["host"], style="cyan")
        size = f"  {_size(host['size_bytes'])}"
        if host.get("gzip"):
            size += f" decompressed (gzip file {_size(host['file_bytes'])})"
        text.append(size)
        extra = []
        if host["hostnames"]:
            extra.append("hostname " + ", ".join(host["hostnames"]))
        if host["capture_start_ns"] and host["capture_stop_ns"]:
            seconds = (host["capture_stop_ns"] - host["capture_start_ns"]) / 1e9
            extra.append(f"capture window {seconds:.2f} s")
        extra += [f"{name} {version}" for name, version in host["versions"].items()]
        _line(console, _packed(text, extra, width or 2**31), wide=width is None)

    several_hosts = len(info["hosts"]) > 1
    device_columns = [
        Column("device"),
        Column("chip", "key"),
        Column("core", "text", drop=4),
        Column("kind", "text", drop=5),
        Column("peak TFLOP/s", drop=2),
        Column("peak HBM GB/s", drop=1),
        Column("peaks from", "text", drop=6),
        Column("ops"),
    ]
    rows = [
        [
            str(d["device"]),
            _name(d["chip"]),
            _name(d["core"]),
            _name(d["kind"]),
            _number(d["peak_tflops"]),
            _number(d["peak_hbm_gbps"], 2),
            _name(d["peaks_source"]),
            f"{d['ops']:,}",
        ]
        for d in info["devices"]
    ]
    if several_hosts:
        device_columns.insert(0, Column("host", "text", drop=3))
        for row, d in zip(rows, info["devices"], strict=True):
            row.insert(0, _name(d["host"]))
    console.print()
    fit(device_columns, rows, width).print(console, rows, title="Devices")

    steps = info["steps"]
    if steps:
        sources = sorted({s["source"] for s in steps})
        counts = sorted({s["count"] for s in steps})
        _line(
            console,
            f"steps: {'/'.join(map(str, counts))} per device on {len(steps)} device(s), "
            f"from {', '.join(sources)}"
            + "".join(
                f" of one program, {p}"
                for p in sorted({s["program"] for s in steps if s.get("program")})[:1]
            ),
        )
    else:
        _line(console, "steps: none found (no Steps line, step markers or repeated module)")
    span = info["time_span"]
    if span["duration_ms"] is not None:
        _line(console, f"op time span: {span['duration_ms']:,.3f} ms")

    shown = [row for row in info["lines"] if row["events"]]
    line_columns = [Column("plane", "text", drop=1), Column("line", "key"), Column("events")]
    rows = [[_name(r["plane"]), _name(r["line"]), f"{r['events']:,}"] for r in shown[:40]]
    if several_hosts:
        line_columns.insert(0, Column("host", "text", drop=2))
        for row, r in zip(rows, shown, strict=False):
            row.insert(0, _name(r["host"]))
    console.print()
    fit(line_columns, rows, width).print(console, rows, title="Lines with events")
    if len(shown) > 40:
        _line(
            console, f"... and {len(shown) - 40} more lines with events (--format json lists all)"
        )
    for warning in info["warnings"]:
        text = Line("warning: ", style="yellow")
        text.append(warning)
        console.print(text)


# --------------------------------------------------------------------------- ops

# Numeric columns of the op table: (field, header, format, drop order); a missing value is
# "-" (_cells).
_OPS_NUMBERS = (
    ("occurrences", "count", ",", 2),
    ("total_time_ms", "total ms", ",.3f", 0),
    ("time_pct", "time %", ",.1f", 1),
    ("avg_time_us", "avg us", ",.2f", 5),
    ("self_time_ms", "self ms", ",.3f", 6),
    ("flops", "FLOPs", _si, 7),
    ("bytes_accessed", "bytes", _si, 8),
)

# The name columns of each --by grouping: (field, header, kind, drop order). The key first.
_OPS_NAMES: dict[str, tuple[tuple[str, str, Any, int], ...]] = {
    "program_op": (
        ("op", "op", "key", 0),
        ("module", "program", "text", 4),
        ("category", "category", "text", 3),
        ("program_id", "program id", "number", 9),
    ),
    "op": (
        ("op", "op", "key", 0),
        ("category", "category", "text", 4),
        ("programs", "programs", "number", 3),
    ),
    "category": (("category", "category", "key", 0),),
    "module": (("module", "module", "key", 0), ("category", "category", "text", 4)),
    "program": (
        ("module", "program", "key", 0),
        ("program_id", "program id", "number", 3),
        ("category", "category", "text", 4),
    ),
}


def render_ops(
    table: Table, by: str, console: Console, wide: bool = False, per_device: bool = False
) -> None:
    """``tpuperf ops``: one table, or with ``per_device`` one per device, in one layout."""
    names = [n for n in _OPS_NAMES[by] if n[0] in table]
    spec = [Column(header, kind, drop=drop) for _, header, kind, drop in names]
    spec += [Column(header, drop=drop) for _, header, _, drop in _OPS_NUMBERS]
    # Cells are made a column at a time: thousands of rows, each formatted once.
    values = {field: table.plain(field) for field, *_ in names}
    if "module" in table and "program_id" in table:
        values["module"] = _programs_apart(values["module"], table.plain("program_id"))
    cells = [[_name(v) for v in values[field]] for field, *_ in names]
    cells += [_cells(table.plain(field), fmt) for field, _, fmt, _ in _OPS_NUMBERS]
    rows = [list(row) for row in zip(*cells, strict=True)]
    layout = fit(spec, rows, _width(console, wide))
    if not per_device:
        layout.print(console, rows)
        return
    groups: dict[tuple[str, int], list[list[str]]] = {}
    for host, device, row in zip(table.plain("host"), table.plain("device"), rows, strict=True):
        groups.setdefault((host, device), []).append(row)
    for i, ((host, device), group) in enumerate(sorted(groups.items())):
        if i:
            console.print()
        layout.print(console, group, title=f"{host} device {device}", note_hidden=False)
    layout.print_hidden(console)


# ``ops --by collective``: (field, header, kind, format, drop order); the op is the key.
_COLLECTIVE_CELLS: tuple[tuple[str, str, Kind, Any, int], ...] = (
    ("op", "op", "key", _name, 0),
    ("kind", "kind", "text", _name, 2),
    ("bytes", "bytes", "number", _si, 4),
    ("group_size", "n", "number", lambda v: _number(v, 0), 7),
    ("count_per_step", "x/step", "number", lambda v: _number(v, 1), 9),
    ("ms_per_step", "ms/step", "number", lambda v: _number(v, 3), 0),
    ("wait_ms", "wait ms", "number", lambda v: _number(v, 3), 1),
    ("transfer_ms", "move ms", "number", lambda v: _number(v, 3), 3),
    ("busbw_gbps", "busbw GB/s", "number", lambda v: _number(v, 2), 5),
    ("link_peak_pct", "link %", "number", lambda v: _number(v, 1), 10),
    ("arrival_spread_ms", "spread ms", "number", lambda v: _number(v, 3), 8),
    ("last_arriver", "last", "text", _name, 6),
)


def render_collectives(table: Table, console: Console, wide: bool = False) -> None:
    """``tpuperf ops --by collective``: one row per collective op."""
    spec = [Column(header, kind, drop=drop) for _, header, kind, _, drop in _COLLECTIVE_CELLS]
    rows = [
        [_number_cell(fmt, r[field]) for field, _, _, fmt, _ in _COLLECTIVE_CELLS]
        for r in table.records()
    ]
    fit(spec, rows, _width(console, wide)).print(console, rows)


# Numeric columns of ``ops --by scope|source|pass``: (field, header, format, drop order).
_SCOPE_NUMBERS = (
    ("ms_per_step", "ms/step", fmt_step_ms, 0),
    ("self_ms_per_step", "self/step", fmt_step_ms, 1),
    ("time_pct", "%", lambda v: _number(v, 1), 2),
    ("occurrences", "count", lambda v: f"{v:,}", 3),
)


def render_scope_ops(
    table: Table, by: str, console: Console, wide: bool = False, per_device: bool = False
) -> None:
    """``tpuperf ops --by scope|source|pass``, per step (the JSON, CSV and Parquet forms also
    hold the totals over the capture). Scopes are indented by depth (rows come in tree order)."""
    spec = [Column(by, "key")] + ([Column("scope", "text", drop=4)] if by == "source" else [])
    numbers = [n for n in _SCOPE_NUMBERS if n[0] in table]
    spec += [Column(header, drop=drop) for _, header, _, drop in numbers]
    if per_device:
        spec = [Column("host", "text", drop=5), Column("device", drop=6), *spec]
    records = table.records()
    rows = []
    parents: dict[int, str] = {}  # depth -> the path of the last scope seen at that depth
    for r in records:
        name = str(r[by])
        if by == "scope":
            depth = int(r["depth"])
            parents[depth] = name
            if depth > 1:
                name = "  " * (depth - 1) + _leaf(name, parents.get(depth - 1, ""))
        row = [_name(name)] + ([_name(r["scope"])] if by == "source" else [])
        row += [_number_cell(fmt, r[field]) for field, _, fmt, _ in numbers]
        if per_device:
            row = [_name(r["host"]), str(r["device"]), *row]
        rows.append(row)
    fit(spec, rows, _width(console, wide)).print(console, rows)


def _leaf(path: str, parent: str) -> str:
    """A scope's own level: its path after its parent's (rows come in tree order, a parent
    before its children, so the parent is the last scope one level up)."""
    return path[len(parent) + 1 :] if parent and path.startswith(parent + "/") else path


def _programs_apart(modules: list[str], program_ids: list[str]) -> list[str]:
    """Program names shared by several programs (two jits of ``jit_dot``) get the program id
    after the name, so that rows of different programs never look alike."""
    ids: dict[str, set[str]] = {}
    for module, program_id in zip(modules, program_ids, strict=True):
        ids.setdefault(module, set()).add(program_id)
    return [
        f"{module} #{program_id}" if len(ids[module]) > 1 and program_id else module
        for module, program_id in zip(modules, program_ids, strict=True)
    ]


def _cells(values: list[Any], format_value: Any) -> list[str]:
    """One column's cells: ``-`` where a value is missing (None or NaN). ``format_value``: a
    format spec (a column of thousands of numbers with none missing is formatted at once) or
    a function."""
    if isinstance(format_value, str):
        spec = format_value
        if None not in values and not any(map(math.isnan, values)):
            return list(map(format, values, itertools.repeat(spec)))
        format_value = lambda v: format(v, spec)  # noqa: E731
    return ["-" if v is None or v != v else format_value(v) for v in values]


def _number_cell(format_value: Any, value: Any) -> str:
    return "-" if _missing(value) else format_value(value)


# --------------------------------------------------------------------------- scan

# Columns of the scan table: (row field, column). "profile" is run/host.
_SCAN_COLUMNS = (
    ("profile", Column("profile", "key")),
    ("chip", Column("chip", "text", drop=5)),
    ("step_time_ms.median", Column("step ms")),
    ("iteration_time_ms.median", Column("iter ms", drop=6)),
    ("idle_pct", Column("idle %", drop=1)),
    ("exposed_collective_pct", Column("coll %", drop=3)),
    ("flops_utilization_pct", Column("flops %", drop=4)),
    ("top_recommendation.kind", Column("top recommendation", "text", drop=2, min_width=18)),
    ("top_recommendation.est_savings_pct", Column("saves %", drop=2)),
)  # devices, steps, p90 and the rest are in the ndjson, CSV and Parquet rows


def render_scan(rows: Sequence[dict[str, Any]], console: Console, wide: bool = False) -> None:
    """``tpuperf scan --format table``: one line per profile (named by :func:`scan_labels`),
    errors listed below."""
    errors = []
    cells = []
    for row, label in zip(rows, scan_labels(rows, wide), strict=True):
        values = {**row, "profile": label}
        if row["error"]:
            errors.append(f"{values['profile']}: {row['error']}")
            values["top_recommendation.kind"] = "error (below)"
        cells.append(
            [
                _name(values[field]) if column.kind != "number" else _scan_number(values[field])
                for field, column in _SCAN_COLUMNS
            ]
        )
    spec = [column for _, column in _SCAN_COLUMNS]
    fit(spec, cells, _width(console, wide)).print(console, cells)
    if errors:
        console.print()
        _line(console, "errors:")
        for line in errors:
            console.print(Line(f"  {line}"), soft_wrap=True)


def scan_labels(rows: Sequence[dict[str, Any]], wide: bool = False) -> list[str]:
    """What names each scan row: ``run/host`` (``run`` with ``--per-run``); where several
    rows would read the same (runs of one name in two logdirs, ``base/`` and ``new/``), the
    shortest end of their paths that tells them apart
    (``base/plugins/profile/recompiled/tpu-host-0``). ``wide``: the full path of each."""
    if wide:
        return [str(row["path"]) for row in rows]
    labels = ["/".join(p for p in (row["run"], row["host"]) if p) for row in rows]
    same: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        same.setdefault(label, []).append(i)
    for members in same.values():
        if len(members) < 2:
            continue
        parts = {i: _path_parts(rows[i]) for i in members}
        for i in members:
            shared = max(_common_end(parts[i], parts[j]) for j in members if j != i)
            labels[i] = "/".join(parts[i][-(shared + 1) :])
    return labels


def _path_parts(row: dict[str, Any]) -> list[str]:
    """The components of a row's path, the file named by its host (as ``run/host`` is)."""
    parts = str(row["path"]).rstrip("/").split("/")
    if row["host"]:
        parts[-1] = str(row["host"])
    return parts


def _common_end(a: list[str], b: list[str]) -> int:
    """How many trailing components ``a`` and ``b`` share."""
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def _scan_number(value: Any) -> str:
    if _missing(value):
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return str(value)


# --------------------------------------------------------------------------- analyzers


def render_analyzers(rows: Sequence[dict[str, Any]], console: Console, wide: bool = False) -> None:
    """``tpuperf analyzers``: name, origin and what each finds."""
    spec = [Column("analyzer", "key"), Column("origin", "text", drop=1), Column("summary", "prose")]
    cells = [[_name(r["name"]), r["origin"], r["summary"]] for r in rows]
    fit(spec, cells, _width(console, wide)).print(console, cells)
