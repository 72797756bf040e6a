"""Terminal renderings of `tpuperf info` and `tpuperf ops` (rich tables on a given console)."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tpuperf import columns


def _number(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def _si(value: Any) -> str:
    """1.23e12 -> '1.23 T' (FLOPs, bytes)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    for scale, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {suffix}"
    return f"{value:.0f}"


def render_info(info: dict[str, Any], console: Console) -> None:
    hosts = info["hosts"]
    # Profile strings (paths, hosts, planes, lines, op names) are escaped or Text: never markup.
    console.print(
        f"[bold]{escape(info['source'])}[/]  platform: {escape(info['platform'])}", highlight=False
    )
    for host in hosts:
        extra = []
        if host["hostnames"]:
            extra.append("hostname " + ", ".join(host["hostnames"]))
        if host["capture_start_ns"] and host["capture_stop_ns"]:
            extra.append(
                f"capture window {(host['capture_stop_ns'] - host['capture_start_ns']) / 1e9:.2f} s"
            )
        for name, version in host["versions"].items():
            extra.append(f"{name} {version}")
        console.print(
            f"host [cyan]{escape(host['host'])}[/]  {host['size_bytes'] / 1e6:.1f} MB"
            + ("  " + escape("; ".join(extra)) if extra else ""),
            highlight=False,
        )

    devices = Table(title="Devices", title_justify="left")
    for column, justify in (
        ("host", "left"),
        ("device", "right"),
        ("kind", "left"),
        ("core", "left"),
        ("chip", "left"),
        ("peak TFLOP/s", "right"),
        ("peak HBM GB/s", "right"),
        ("ops", "right"),
    ):
        devices.add_column(column, justify=justify, no_wrap=column != "chip")  # type: ignore[arg-type]
    for d in info["devices"]:
        devices.add_row(
            Text(d["host"]),
            str(d["device"]),
            Text(d["kind"]),
            Text(d["core"]),
            Text(d["chip"]),
            _number(d["peak_tflops"]),
            _number(d["peak_hbm_gbps"], 2),
            f"{d['ops']:,}",
        )
    console.print(devices)

    steps = info["steps"]
    if steps:
        sources = sorted({s["source"] for s in steps})
        counts = sorted({s["count"] for s in steps})
        console.print(
            f"steps: {'/'.join(map(str, counts))} per device on {len(steps)} device(s), "
            f"from {escape(', '.join(sources))}",
            highlight=False,
        )
    else:
        console.print("steps: none found (no Steps line, step markers or repeated module)")
    span = info["time_span"]
    if span["duration_ms"] is not None:
        console.print(f"op time span: {span['duration_ms']:,.3f} ms", highlight=False)

    lines = Table(title="Lines", title_justify="left")
    for column, justify in (
        ("host", "left"),
        ("plane", "left"),
        ("line", "left"),
        ("events", "right"),
    ):
        lines.add_column(column, justify=justify)  # type: ignore[arg-type]
    shown = [row for row in info["lines"] if row["events"]]
    for row in shown[:40]:
        lines.add_row(
            Text(row["host"]), Text(row["plane"]), Text(row["line"]), f"{row['events']:,}"
        )
    console.print(lines)
    if len(shown) > 40:
        console.print(f"... and {len(shown) - 40} more lines with events (--format json lists all)")
    for warning in info["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)


def render_ops(table: columns.Table, by: str, console: Console, title: str | None = None) -> None:
    out = Table(title=title, title_justify="left")
    from tpuperf.opstats import GROUPINGS

    key_columns = [c for c in ("host", "device") if c in table]
    key_columns += [c for c in GROUPINGS[by] if c not in key_columns]
    key_columns += [
        c for c in ("module", "category", "programs") if c in table and c not in key_columns
    ]
    for column in key_columns:
        out.add_column(column, overflow="fold", max_width=48)
    numeric = (
        ("occurrences", "count"),
        ("total_time_ms", "total ms"),
        ("self_time_ms", "self ms"),
        ("avg_time_us", "avg us"),
        ("time_pct", "time %"),
        ("flops", "FLOPs"),
        ("bytes_accessed", "bytes"),
    )
    for _, header in numeric:
        out.add_column(header, justify="right", no_wrap=True)
    for values in table.records():
        cells: list[Any] = [Text(str(values[c])) for c in key_columns]
        cells += [
            f"{values['occurrences']:,}",
            _number(values["total_time_ms"], 3),
            _number(values["self_time_ms"], 3),
            _number(values["avg_time_us"], 2),
            _number(values["time_pct"], 1),
            _si(values["flops"]),
            _si(values["bytes_accessed"]),
        ]
        out.add_row(*cells)
    console.print(out)
