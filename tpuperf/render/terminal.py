"""Render a :class:`~tpuperf.analysis.Report` for a terminal with rich.

The console is passed in (tests pin its width); nothing here computes a
number the report does not already hold. The report is made of
:mod:`tpuperf.render.plain`'s lines, box and numbered grid, which rich draws on a terminal and
the plain console writes itself on a pipe or in a file (the same text, without importing
rich).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpuperf.render.fit import Column, Fit, fit, shorten
from tpuperf.render.plain import Line, Numbered, Panel
from tpuperf.render.plain import cells as cell_len
from tpuperf.render.text import (
    SEGMENTS,
    fmt_ms,
    fmt_pct,
    memory_text,
    peaks_text,
    workload_text,
)

if TYPE_CHECKING:
    from rich.console import Console

    from tpuperf.analysis import Report
    from tpuperf.findings import CollectiveKind


def split_bar(summary: dict[str, Any], width: int) -> Line:
    """A bar of ``width`` cells split by compute / exposed collective / copy / idle, each
    part drawn with its own character (and colour, where the console has colour)."""
    bar = Line()
    values = [(summary.get(key) or 0.0, style, char) for key, _, style, char in SEGMENTS]
    total = sum(v for v, _, _ in values) or 1.0
    used = 0
    for i, (value, style, char) in enumerate(values):
        cells = round(width * value / total) if i < len(values) - 1 else width - used
        cells = max(0, min(cells, width - used))
        bar.append(char * cells, style=style)
        used += cells
    return bar


def _legend(summary: dict[str, Any], width: int) -> Line:
    """The bar's key, one part per item; lines break between items, never inside one."""
    legend = Line()
    line = 0
    for key, label, style, char in SEGMENTS:
        item = f"{label} {fmt_pct(summary.get(key))}"
        size = len(item) + 2
        if line and line + 3 + size > width:
            legend.append("\n")
            line = 0
        elif line:
            legend.append("   ")
            line += 3
        legend.append(f"{char} ", style=style)
        legend.append(item)
        line += size
    return legend


def _header(report: Report, width: int) -> Panel:
    s = report.summary
    lines = Line()
    chip = s.get("chip") or "unknown chip"
    lines.append("Chip     ", style="bold")
    lines.append(f"{chip} ({s.get('platform')})")
    peaks = peaks_text(s)
    if peaks is not None:
        lines.append(f"  peaks {peaks} from {s.get('peaks_source')}")
    else:
        lines.append("  peaks unknown", style="yellow")
    lines.append("\nDevices  ", style="bold")
    lines.append(f"{s.get('devices')} on {s.get('hosts')} host(s)")
    lines.append("\nWorkload ", style="bold")
    lines.append(workload_text(s.get("workload")))
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
        it = s.get("iteration_time_ms") or {}
        if s.get("outside_steps_ms_per_iteration"):
            # Only where the host's time between steps makes the iteration longer.
            lines.append("\nIter.    ", style="bold")
            lines.append(
                f"median {fmt_ms(it.get('median'))}   mean {fmt_ms(it.get('mean'))}   "
                f"p90 {fmt_ms(it.get('p90'))}   "
                f"outside {fmt_ms(s['outside_steps_ms_per_iteration'])}"
            )
    else:
        lines.append(f"none found; window {fmt_ms(s.get('window_ms'))} per device")
    lines.append("\nPasses   ", style="bold")
    lines.extend(_passes(s.get("passes"), width - 4 - 9))
    util = s.get("flops_utilization_pct")
    if util is not None:
        lines.append("\nFLOPs    ", style="bold")
        lines.append(f"utilization {fmt_pct(util)}")
        if s.get("mfu_pct") is not None:
            lines.append(f"   MFU {fmt_pct(s['mfu_pct'])}")
    memory = memory_text(s)
    if memory is not None:
        lines.append("\nMemory   ", style="bold")
        lines.append(memory)
    inner = max(10, width - 4)  # the panel's border and padding
    lines.append("\n\n")
    lines.extend(split_bar(s, inner))
    lines.append("\n")
    lines.extend(_legend(s, inner))
    title = "tpuperf analyze"
    if report.source:
        title += ": " + shorten(report.source, max(10, width - len(title) - 8))
    return Panel(lines, title)


def _passes(passes: dict[str, Any] | None, width: int) -> Line:
    """``forward 5.73 ms 43.6%  backward ...`` in lines of ``width``, continued under the
    first; one line saying so without scope data."""
    if passes is None:
        return Line("no scope information in this profile (no forward/backward split)", "dim")
    # Passes that round to 0.0% are left out (the backward pass of an inference profile).
    entries = [
        f"{name} {fmt_ms(v['ms_per_step'])} {fmt_pct(v['pct'])}"
        for name, v in passes.items()
        if (v["pct"] or 0.0) >= 0.05
    ]
    lines = [""]
    for entry in entries:
        if lines[-1] and len(lines[-1]) + 2 + len(entry) > width:
            lines.append("")
        lines[-1] += ("  " if lines[-1] else "") + entry
    return Line(("\n" + " " * 9).join(lines))


def _top_ops_code(report: Report, width: int | None) -> list[Line]:
    """One line per top op: where the model's code made it (pass, scope/primitive, file:line),
    scope and source shortened to fit ``width`` (None: whole), under their heading; none when
    no top op has scope information."""
    rows = [
        r
        for r in report.top_ops.records()
        if r.get("scope") or r.get("primitive") or r.get("source")
    ]
    if not rows:
        return []
    op_width = min(max(cell_len(str(r["op"])) for r in rows), 28)
    lines = [Line("Top ops in the code (pass, name scope, source line)", style="bold")]
    for r in rows:
        path = "/".join(p for p in (r["scope"], r["primitive"]) if p)
        source = str(r["source"]).rsplit("/", 1)[-1]
        if width is not None:
            # "  op  pass      path  source": what is left after the op and the pass.
            path, source = code_text(path, source, width - (op_width + 16))
        line = Line("  ")
        line.append(shorten(str(r["op"]), op_width).ljust(op_width), style="cyan")
        line.append(f"  {r['pass']:<9} ")
        line.append(path)
        line.append(f"  {source}", style="dim")
        lines.append(line)
    return lines


# A source line is never shortened below this many cells; a scope path keeps at least a third
# of the room (and this many cells).
_MIN_SOURCE = 12
_MIN_PATH = 8


def code_text(path: str, source: str, room: int) -> tuple[str, str]:
    """A scope path and a source line in ``room`` cells (two more go between them): both
    whole when they fit; else the source whole as long as it leaves the path a third of the
    room, shortened beyond (keeping its line number), and the path shortened to the rest
    (keeping its last levels)."""
    path_cells, source_cells = cell_len(path), cell_len(source)
    if path_cells + source_cells <= room:
        return path, source
    source_room = min(source_cells, max(_MIN_SOURCE, room - max(_MIN_PATH, room // 3)))
    path_room = max(_MIN_PATH, room - source_room)
    if path_cells < path_room:  # a short path leaves its room to the source
        source_room = min(source_cells, max(_MIN_SOURCE, room - path_cells))
    return shorten(path, path_room), shorten(source, source_room)


def _top_ops(report: Report, width: int | None) -> tuple[Fit, list[list[str]]]:
    # Same-named ops of different programs are different ops: say which program when it varies.
    programs = len(set(report.top_ops.strings("module").tolist())) > 1
    spec = [Column("op", "key")]
    if programs:
        spec.append(Column("program", "text", drop=3))
    spec += [
        Column("kind", "text", drop=2, min_width=10),
        Column("time/step"),
        Column("% busy", drop=1),
        Column("count/step", drop=5),
        Column("bound", "text", drop=6, min_width=7),
        Column("roofline eff.", drop=4),
    ]
    rows = [
        [
            str(row["op"]),
            *([str(row["module"] or "-")] if programs else []),
            str(row["kind"]),
            fmt_ms(row["ms_per_step"]),
            fmt_pct(row["pct_of_busy"]),
            f"{row['count_per_step']:.3g}",
            str(row["bound"] or ""),
            fmt_pct(row["efficiency_pct"]),
        ]
        for row in report.top_ops.records()
    ]
    return fit(spec, rows, width), rows


def _fix_for(fix: dict[str, str], platform: str) -> list[tuple[str, str]]:
    key = platform.lower()
    if key in fix:
        return [(key.upper(), fix[key])]
    return [(k.upper(), v) for k, v in fix.items()]


def _recommendations(report: Report) -> list[Line | Numbered]:
    """Each recommendation under its number, its lines indented under its title."""
    parts: list[Line | Numbered] = [
        Line("Recommendations (ranked by estimated savings)", style="bold")
    ]
    if not report.recommendations:
        parts.append(Line("  none: nothing in this profile stands out", style="dim"))
    for i, rec in enumerate(report.recommendations, 1):
        head = Line(rec.title, style="bold")
        head.append(f"  [{rec.kind}]", style="cyan")
        savings = Line("saves up to ")
        savings.append(
            f"{fmt_ms(rec.est_savings_ms)}/step ({rec.est_savings_pct:.1f}%)", style="bold green"
        )
        savings.append(f", confidence {rec.confidence}")
        lines = [head, savings, Line(f"Evidence: {rec.evidence}")]
        lines += [
            Line(f"Fix ({label}): {text}") for label, text in _fix_for(rec.fix, report.platform)
        ]
        number = f"{i}."
        parts.append(Numbered(number, lines, width=max(3, len(number) + 1), style="bold"))
    return parts


def _collectives(kinds: list[CollectiveKind], width: int | None) -> tuple[Fit, list[list[str]]]:
    spec = [
        Column("kind", "key"),
        Column("exposed/step"),
        Column("total/step", drop=1),
        Column("ops/step", drop=2),
        Column("sync", "text", drop=3, min_width=4),
        Column("group size", "text", drop=4),
    ]
    rows = [
        [
            k.kind,
            fmt_ms(k.exposed_ms_per_step),
            fmt_ms(k.ms_per_step),
            f"{k.ops_per_step:g}",
            "yes" if k.async_ops_per_step == 0 else "no",
            ",".join(str(x) for x in k.replica_group_sizes) or "-",
        ]
        for k in kinds
    ]
    return fit(spec, rows, width), rows


def _details(report: Report, console: Console, width: int | None) -> None:
    m = report.idle
    if m is not None:
        console.print(
            Line(
                f"Idle (not busy): {fmt_pct(m.idle_pct)}; no op: {fmt_pct(m.no_op_pct)} — "
                "between steps "
                f"{fmt_pct(m.between_steps_idle_pct)}, "
                f"inside steps {fmt_pct(m.in_step_idle_pct)} (micro < {m.micro_gap_us:g} us: "
                f"{fmt_pct(m.micro_idle_pct)}); {m.equivalent_idle_chips:.2f} equivalent "
                "idle chips" + ("; host-bound" if m.host_bound else "")
            )
        )
    kinds = report.collective_kinds
    if kinds:
        layout, rows = _collectives(kinds, width)
        layout.print(console, rows, title="Exposed collectives by kind")
        a = report.async_windows
        if a.windows:
            console.print(
                Line(
                    f"Async windows: {a.windows} — {a.hidden} hidden, {a.partial} "
                    f"partial, {a.exposed} exposed; compute covers "
                    f"{fmt_pct(a.overlap_pct)} of async time"
                )
            )
    for s in report.stragglers:
        console.print(
            Line(
                f"Straggler: {s.host} device {s.device} (modified z {s.z:.1f}): "
                f"compute {fmt_ms(s.compute_ms_per_step)}/step vs median "
                f"{fmt_ms(s.median_compute_ms_per_step)}",
                style="red",
            )
        )
    for name, result in report.results.items():
        for note in result.notes:
            if note not in report.notes:
                console.print(Line(f"{name}: {note}", style="yellow"))
    for name, error in report.errors.items():
        console.print(Line(f"analyzer {name} failed: {error}", style="bold red"))
    for note in report.notes:
        console.print(Line(f"note: {note}", style="dim"))


def _has_details(report: Report) -> bool:
    return bool(
        report.idle is not None
        or report.collective_kinds
        or report.stragglers
        or any(r.notes for r in report.results.values())
        or report.errors
        or report.notes
    )


def render_report(report: Report, console: Console, wide: bool = False) -> None:
    """Write the report to ``console``: summary, top ops, recommendations, details. Tables
    fit the console's width (``wide``: full names and every column)."""
    width = None if wide else console.width
    console.print(_header(report, console.width))
    if report.top_ops.n:
        layout, rows = _top_ops(report, width)
        layout.print(console, rows, title="Top ops (self time per step per device)")
        for line in _top_ops_code(report, width):
            console.print(line)
    for part in _recommendations(report):
        console.print(part)
    if _has_details(report):
        console.print()
        _details(report, console, width)
