"""Render a :class:`~tpuperf.report.Report` for a terminal with rich.

The console is passed in (tests pin its width); nothing here computes a
number the report does not already hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from tpuperf.report import Report

# The split of step time, in bar order: (summary key, label, style).
SEGMENTS = [
    ("compute_pct", "compute", "green"),
    ("exposed_collective_pct", "exposed collective", "red"),
    ("exposed_copy_pct", "exposed copy", "yellow"),
    ("no_op_pct", "idle (no op)", "grey50"),
]


def _number(value: Any) -> float | None:
    """A float, or None for None/NaN/NA (table cells may hold any of them)."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if f != f else f


def fmt_ms(value: Any) -> str:
    value = _number(value)
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 1:
        return f"{value:.2f} ms"
    return f"{value * 1000:.1f} us"


def fmt_pct(value: Any) -> str:
    value = _number(value)
    return "-" if value is None else f"{value:.1f}%"


def split_bar(summary: dict[str, Any], width: int) -> Text:
    """A bar of ``width`` cells split by compute / exposed collective / copy / idle."""
    bar = Text()
    values = [(summary.get(key) or 0.0, style) for key, _, style in SEGMENTS]
    total = sum(v for v, _ in values) or 1.0
    used = 0
    for i, (value, style) in enumerate(values):
        cells = round(width * value / total) if i < len(values) - 1 else width - used
        cells = max(0, min(cells, width - used))
        bar.append("█" * cells, style=style)
        used += cells
    return bar


def _legend(summary: dict[str, Any]) -> Text:
    legend = Text()
    for key, label, style in SEGMENTS:
        legend.append("█ ", style=style)
        legend.append(f"{label} {fmt_pct(summary.get(key))}   ")
    return legend


def _header(report: Report, width: int) -> Panel:
    s = report.summary
    lines = Text()
    chip = s.get("chip") or "unknown chip"
    lines.append("Chip     ", style="bold")
    lines.append(f"{chip} ({s.get('platform')})")
    if s.get("peak_tflops") is not None:
        lines.append(
            f"  peaks {s['peak_tflops']:g} TFLOP/s, {s['peak_hbm_gbps']:g} GB/s from "
            f"{s.get('peaks_source')}"
        )
    else:
        lines.append("  peaks unknown", style="yellow")
    lines.append("\nDevices  ", style="bold")
    lines.append(f"{s.get('devices')} on {s.get('hosts')} host(s)")
    lines.append("\nSteps    ", style="bold")
    st = s.get("step_time_ms") or {}
    if s.get("step_source"):
        lines.append(
            f"{s.get('steps_analyzed')} analysed ({s['step_source']}), "
            f"{s.get('steps_excluded')} left out"
        )
        lines.append("\nStep     ", style="bold")
        lines.append(
            f"median {fmt_ms(st.get('median'))}   mean {fmt_ms(st.get('mean'))}   "
            f"p90 {fmt_ms(st.get('p90'))}"
        )
    else:
        lines.append(f"none found; window {fmt_ms(s.get('window_ms'))} per device")
    util = s.get("flops_utilization_pct")
    if util is not None:
        lines.append("\nFLOPs    ", style="bold")
        lines.append(f"utilization {fmt_pct(util)}")
        if s.get("mfu_pct") is not None:
            lines.append(f"   MFU {fmt_pct(s['mfu_pct'])}")
    lines.append("\n\n")
    lines.append(split_bar(s, max(10, width - 6)))
    lines.append("\n")
    lines.append(_legend(s))
    # Profile strings are literal text (Text), never rich markup: an op named "[bold]x[/]"
    # prints as itself.
    title = Text(f"tpuperf analyze: {report.source}" if report.source else "tpuperf analyze")
    return Panel(lines, title=title, title_align="left")


def _top_ops_table(report: Report) -> Table:
    table = Table(title="Top ops (self time per step per device)", title_justify="left")
    # Same-named ops of different programs are different ops: say which program when it varies.
    programs = len(set(report.top_ops.strings("module").tolist())) > 1
    table.add_column("op", overflow="fold")
    if programs:
        table.add_column("program", overflow="fold")
    table.add_column("kind")
    table.add_column("time/step", justify="right")
    table.add_column("% busy", justify="right")
    table.add_column("count/step", justify="right")
    table.add_column("bound")
    table.add_column("roofline eff.", justify="right")
    for row in report.top_ops.records():
        table.add_row(
            Text(str(row["op"])),
            *([Text(str(row["module"]))] if programs else []),
            Text(str(row["kind"])),
            fmt_ms(row["ms_per_step"]),
            fmt_pct(row["pct_of_busy"]),
            f"{row['count_per_step']:.3g}",
            Text(str(row["bound"] or "")),
            fmt_pct(row["efficiency_pct"]),
        )
    return table


def _fix_for(fix: dict[str, str], platform: str) -> list[tuple[str, str]]:
    key = platform.lower()
    if key in fix:
        return [(key.upper(), fix[key])]
    return [(k.upper(), v) for k, v in fix.items()]


def _recommendations(report: Report) -> Group:
    parts: list[Any] = [Text("Recommendations (ranked by estimated savings)", style="bold")]
    if not report.recommendations:
        parts.append(Text("  none: nothing in this profile stands out", style="dim"))
    for i, rec in enumerate(report.recommendations, 1):
        head = Text()
        head.append(f"{i}. ", style="bold")
        head.append(rec.title, style="bold")
        head.append(f"  [{rec.kind}]", style="cyan")
        parts.append(head)
        savings = Text("   saves up to ")
        savings.append(
            f"{fmt_ms(rec.est_savings_ms)}/step ({rec.est_savings_pct:.1f}%)", style="bold green"
        )
        savings.append(f", confidence {rec.confidence}")
        parts.append(savings)
        parts.append(Text(f"   Evidence: {rec.evidence}"))
        for label, text in _fix_for(rec.fix, report.platform):
            parts.append(Text(f"   Fix ({label}): {text}"))
    return Group(*parts)


def _details(report: Report) -> Group:
    parts: list[Any] = []
    idle = report.results.get("idle")
    if idle and idle.metrics.get("idle_pct") is not None:
        m = idle.metrics
        parts.append(
            Text(
                f"Idle: {fmt_pct(m['idle_pct'])} — between steps "
                f"{fmt_pct(m['between_steps_idle_pct'])}, "
                f"inside steps {fmt_pct(m['in_step_idle_pct'])} (micro < {m['micro_gap_us']:g} us: "
                f"{fmt_pct(m['micro_idle_pct'])}); {m['equivalent_idle_chips']:.2f} equivalent "
                "idle chips" + ("; host-bound" if m["host_bound"] else "")
            )
        )
    coll = report.results.get("collectives")
    if coll and coll.metrics.get("by_kind"):
        table = Table(title="Exposed collectives by kind", title_justify="left")
        for col in ("kind", "exposed/step", "total/step", "ops/step", "sync", "group size"):
            table.add_column(col, justify="left" if col == "kind" else "right")
        for kind, m in coll.metrics["by_kind"].items():
            table.add_row(
                Text(kind),
                fmt_ms(m["exposed_ms_per_step"]),
                fmt_ms(m["ms_per_step"]),
                f"{m['ops_per_step']:g}",
                "yes" if m["async_ops_per_step"] == 0 else "no",
                ",".join(str(x) for x in m["replica_group_sizes"]) or "-",
            )
        parts.append(table)
        a = coll.metrics.get("async") or {}
        if a.get("windows"):
            parts.append(
                Text(
                    f"Async windows: {a['windows']} — {a['hidden']} hidden, {a['partial']} "
                    f"partial, {a['exposed']} exposed; compute covers "
                    f"{fmt_pct(a['overlap_pct'])} of async time"
                )
            )
    steps = report.results.get("steps")
    if steps:
        for s in steps.metrics.get("stragglers") or []:
            parts.append(
                Text(
                    f"Straggler: {s['host']} device {s['device']} (modified z {s['z']:.1f}): "
                    f"compute {fmt_ms(s['compute_ms_per_step'])}/step vs median "
                    f"{fmt_ms(s['median_compute_ms_per_step'])}",
                    style="red",
                )
            )
    for name, result in report.results.items():
        for note in result.notes:
            if note not in report.notes:
                parts.append(Text(f"{name}: {note}", style="yellow"))
    for name, error in report.errors.items():
        parts.append(Text(f"analyzer {name} failed: {error}", style="bold red"))
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return Group(*parts)


def render_report(report: Report, console: Console) -> None:
    """Write the report to ``console``: summary, top ops, recommendations, details."""
    width = console.width
    console.print(_header(report, width))
    if report.top_ops.n:
        console.print(_top_ops_table(report))
    console.print(_recommendations(report))
    details = _details(report)
    if details.renderables:
        console.print()
        console.print(details)
