"""Render a :class:`~tpuperf.diffing.DiffReport` for a terminal (rich, on a given console) or
as Markdown. Nothing here computes a number the diff does not already hold."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from tpuperf.output import visible
from tpuperf.render.fit import Column, fit, shorten
from tpuperf.render.text import fmt_ms, fmt_pct, md_code, md_text

if TYPE_CHECKING:
    from tpuperf.diffing import DiffReport

STATUS_STYLES = {
    "changed": "bold",
    "same": "dim",
    "added": "cyan",
    "removed": "magenta",
    "appeared": "cyan",
    "went_away": "magenta",
}
# The summary rows: (label, summary key, kind): "time" rows are ms with a change in %,
# "split" rows ms per step and share of step, "points" rows percentages.
_SUMMARY_ROWS = (
    ("step time median", "median", "time"),
    ("step time mean", "mean", "time"),
    ("step time p90", "p90", "time"),
    ("compute", "compute", "split"),
    ("exposed collective", "exposed_collective", "split"),
    ("exposed copy", "exposed_copy", "split"),
    ("idle", "idle", "split"),
    ("FLOP utilization", "flops_utilization_pct", "points"),
    ("MFU", "mfu_pct", "points"),
)
# The smallest time a cell shows (0.1 us).
SHOWN_MS = 5e-5
# Programs that differ, one line each, before the rest are counted.
PROGRAM_LINES = 5
# Below this many ms, a change is floating-point noise (sums of the same times in another
# order), shown as 0 rather than as -0.0 us.
NOISE_MS = 1e-9


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def signed_ms(value: Any) -> str:
    """A change in ms with its sign: +80.0 us, -2.50 ms; 0 for no change (or noise)."""
    number = _finite(value)
    if number is None:
        return "-"
    if abs(number) < NOISE_MS:
        return "0"
    return ("+" if number > 0 else "-") + fmt_ms(abs(number))


def signed_pct(value: Any, unit: str = "%") -> str:
    number = _finite(value)
    if number is None:
        return "-"
    return f"{0.0 if abs(number) < NOISE_MS else number:+.1f}{unit}"


def change_text(entry: dict[str, Any]) -> str:
    """A step time's change: ``+107 ms (+52.4%)``."""
    change = signed_ms(entry["delta"])
    if entry.get("delta_pct") is not None:
        change += f" ({signed_pct(entry['delta_pct'])})"
    return change


def ci_text(low: Any, high: Any) -> str:
    """An interval of a change in ms: ``+98.0 ms..+115 ms``; ``-`` when there is none."""
    low, high = _finite(low), _finite(high)
    if low is None or high is None:
        return "-"
    if max(abs(low), abs(high)) < SHOWN_MS:  # both read 0.0 us: no interval to speak of
        return "0"
    return f"{signed_ms(low)}..{signed_ms(high)}"


def interval_text(entry: dict[str, Any]) -> str:
    """A step time's change with its interval: ``+107 ms (+52.4%), 95% CI +98.0 ms..+115 ms``
    (no interval without two steps a side)."""
    text = change_text(entry)
    if _finite(entry.get("ci_low")) is not None:
        text += f", 95% CI {ci_text(entry['ci_low'], entry['ci_high'])}"
    return text


def _summary_cells(summary: dict[str, Any], key: str, kind: str) -> tuple[str, str, str, str]:
    if kind == "time":
        d = summary["step_time_ms"][key]
        ci = ci_text(d.get("ci_low"), d.get("ci_high"))
        return fmt_ms(d["before"]), fmt_ms(d["after"]), change_text(d), ci
    if kind == "points":
        d = summary[key]
        return fmt_pct(d["before"]), fmt_pct(d["after"]), signed_pct(d["delta"], " pt"), ""
    ms, pct = summary[f"{key}_ms"], summary[f"{key}_pct"]

    def cell(side: str) -> str:
        return f"{fmt_ms(ms[side])} ({fmt_pct(pct[side])})" if ms[side] is not None else "-"

    return (
        cell("before"),
        cell("after"),
        f"{signed_ms(ms['delta'])} ({signed_pct(pct['delta'], ' pt')})",
        "",
    )


def verdict_line(summary: dict[str, Any]) -> str:
    """``Verdict: slower: step time median +107 ms (+52.4%), 95% CI ...; attribution: code``."""
    median = summary["step_time_ms"]["median"]
    if median.get("delta") is None:
        return f"Verdict: {_word(summary['verdict'])} (no step times to compare)"
    return (
        f"Verdict: {_word(summary['verdict'])}: step time median {interval_text(median)}; "
        f"attribution: {summary['attribution']}"
    )


def factor_line(summary: dict[str, Any]) -> str:
    """``Common factor: x1.30 (95% CI x1.28..x1.33) over 40 ops of unchanged code``."""
    factor = summary["common_factor"]
    if factor["ratio"] is None:
        return "Common factor: none (no op runs on both sides)"
    text = f"Common factor: x{factor['ratio']:.3f}"
    if factor["ci_low"] is not None:
        text += f" (95% CI x{factor['ci_low']:.3f}..x{factor['ci_high']:.3f})"
    return text + f" over {factor['ops']} ops of unchanged code"


def programs_lines(diff: DiffReport) -> list[str]:
    """One line when every program is identical; else one per program that is not."""
    programs = diff.programs
    if not programs:
        return []
    if all(p["identical"] for p in programs):
        return [f"Programs: all {len(programs)} identical (same fingerprint on both sides)"]
    lines = []
    different = [p for p in programs if not p["identical"]]
    for p in different[:PROGRAM_LINES]:
        b, n = p["base_fingerprint"], p["new_fingerprint"]
        what = "only in NEW" if b is None else "only in BASE" if n is None else "changed"
        lines.append(f"Program {p['module']}: {what} (BASE {_short(b)}, NEW {_short(n)})")
    if len(different) > PROGRAM_LINES:
        lines.append(f"... and {len(different) - PROGRAM_LINES} more programs (JSON lists all)")
    same = len(programs) - len(different)
    lines.append(f"Programs: {same} of {len(programs)} identical")
    return lines


def _short(fingerprint: Any) -> str:
    return "-" if fingerprint is None else str(fingerprint)[:12]


def _word(verdict: Any) -> str:
    return str(verdict).replace("_", " ")


def _run_line(label: str, run: dict[str, Any], width: int | None) -> Text:
    """``BASE  source  chip, devices, steps``; the details on a line of their own, indented,
    when the whole does not fit ``width``, and a source longer than the line shortened in the
    middle (its last directories kept)."""
    line = Text()
    line.append(f"{label:<5}", style="bold")
    source = visible(str(run.get("source") or "?"))
    line.append(source if width is None else shorten(source, width - 5))
    steps = (
        f"{run.get('steps_analyzed')} steps from {run['step_source']}"
        if run.get("step_source")
        else "no steps"
    )
    details = f"{run.get('chip') or 'unknown chip'}, {run.get('devices')} device(s), {steps}"
    fits = width is None or line.cell_len + 2 + cell_len(details) <= width
    line.append(("  " if fits else "\n     ") + details, style="dim")
    return line


def _heading_line(console: Console, line: str, width: int | None) -> None:
    """A line of text, wrapped at spaces to ``width`` (continuations indented)."""
    if width is None or cell_len(line) <= width:
        console.print(Text(line), soft_wrap=True)
        return
    out, current = [], ""
    for word in line.split(" "):
        if current and cell_len(current) + 1 + cell_len(word) > width:
            out.append(current)
            current = "  " + word
        else:
            current = f"{current} {word}" if current else word
    out.append(current)
    console.print(Text("\n".join(out)), soft_wrap=True)


def _heading(console: Console, head: str, tail: str, width: int | None) -> None:
    """``head: tail`` on one line, or ``head`` and ``tail`` on two when it does not fit."""
    one = f"{head}: {tail}"
    fits = width is None or cell_len(one) <= width
    console.print(Text(one if fits else f"{head}\n{tail}", style="italic"), soft_wrap=width is None)


def render_diff_table(
    diff: DiffReport, console: Console, top: int = 10, wide: bool = False
) -> None:
    """Write the diff to ``console``: runs, summary, the ``top`` ops by change, categories,
    recommendations, in tables that fit the console's width (:mod:`tpuperf.render.fit`: op
    names shortened in the middle, numbers never cut, one line per row); ``wide`` shows
    every column and whole names."""
    width = None if wide else console.width
    console.print(Text("tpuperf diff", style="bold"))
    for label, side in (("BASE", "base"), ("NEW", "new")):
        console.print(_run_line(label, diff.runs.get(side, {}), width), soft_wrap=wide)
    console.print()
    rows = [[label, *_summary_cells(diff.summary, key, kind)] for label, key, kind in _SUMMARY_ROWS]
    columns = [
        Column("", "key"),
        *(Column(header) for header in _CHANGE_HEADERS),
        Column("95% CI", drop=1),
    ]
    fit(columns, rows, width).print(
        console, rows, title="Summary (per step; the split per device, with its share of the step)"
    )
    for line in (verdict_line(diff.summary), *programs_lines(diff), factor_line(diff.summary)):
        _heading_line(console, line, width)
    console.print()
    _ops(console, diff, top, width)
    console.print()
    _categories(console, diff, width)
    console.print()
    _recommendations(console, diff, width)


_CHANGE_HEADERS = ("before", "after", "change")


def _ops(console: Console, diff: DiffReport, top: int, width: int | None) -> None:
    counts = diff.summary["ops"]
    _heading(
        console,
        "Ops by change (self time per step per device)",
        f"{counts['changed']} changed, {counts['added']} added, {counts['removed']} removed, "
        f"{counts['same']} same",
        width,
    )
    records = diff.ops.records()[:top]
    if not records:
        return
    columns = [
        Column("op", "key"),
        Column("status", "text", drop=3),
        Column("before", drop=2),
        Column("after", drop=2),
        Column("change"),
        Column("%", drop=1),
        Column("95% CI", drop=6),
    ]
    rows = [
        [
            str(r["op"]),
            r["status"],
            *_time_cells(r, "ms_per_step", "added", "removed"),
            signed_pct(r["delta_pct"]),
            ci_text(r["delta_ci_low_ms"], r["delta_ci_high_ms"]),
        ]
        for r in records
    ]
    names = [r["op"] for r in records]
    if len(set(names)) < len(names):
        # Rows that would read the same: same-named ops of different programs.
        columns.append(Column("program", "text"))
        for row, r in zip(rows, records, strict=True):
            row.append(str(r["module"]))
    if any(r["base_op"] and r["base_op"] != r["op"] for r in records):
        # A renamed op: its name in BASE, and the rule that paired them (MATCH_RULES).
        columns += [Column("was", "text", drop=4), Column("match", "text", drop=5)]
        for row, r in zip(rows, records, strict=True):
            row += [r["base_op"] if r["base_op"] != r["op"] else "-", r["match"] or "-"]
    styles = [STATUS_STYLES[r["status"]] for r in records]
    fit(columns, rows, width).print(console, rows, styles=styles)


def _time_cells(record: dict[str, Any], prefix: str, no_before: str, no_after: str) -> list[str]:
    """before, after and change of ``<prefix>_before`` / ``_after`` and ``delta_ms`` ("-" for
    the side a row does not exist on)."""
    status = record.get("status")
    return [
        fmt_ms(record[f"{prefix}_before"]) if status != no_before else "-",
        fmt_ms(record[f"{prefix}_after"]) if status != no_after else "-",
        signed_ms(record["delta_ms"]),
    ]


def _categories(console: Console, diff: DiffReport, width: int | None) -> None:
    records = diff.categories.records()
    if not records:
        return
    columns = [
        Column("category", "key"),
        *(Column(header) for header in _CHANGE_HEADERS),
        Column("%", drop=1),
    ]
    rows = [
        [str(r["category"]), *_time_cells(r, "ms_per_step", "", ""), signed_pct(r["delta_pct"])]
        for r in records
    ]
    fit(columns, rows, width).print(
        console, rows, title="Categories (self time per step per device)"
    )


def _recommendations(console: Console, diff: DiffReport, width: int | None) -> None:
    records = diff.recommendations.records()
    if not records:
        console.print(Text("Recommendations: none on either side", style="dim"))
        return
    columns = [
        Column("kind", "key"),
        Column("status", "text", drop=3),
        *(Column(header, drop=2 if header != "change" else 0) for header in _CHANGE_HEADERS),
    ]
    rows = [
        [
            str(r["kind"]),
            r["status"].replace("_", " "),
            *_time_cells(r, "est_savings_ms", "appeared", "went_away"),
        ]
        for r in records
    ]
    styles = [STATUS_STYLES[r["status"]] for r in records]
    fit(columns, rows, width).print(
        console, rows, title="Recommendations (estimated saving per step)", styles=styles
    )


# --------------------------------------------------------------------------- Markdown


def render_diff_markdown(diff: DiffReport, top: int = 10) -> str:
    """The diff as Markdown (for a pull request or an issue)."""
    base, new = diff.runs.get("base", {}), diff.runs.get("new", {})
    out = ["# tpuperf diff", ""]
    for label, run in (("BASE", base), ("NEW", new)):
        steps = (
            f"{run.get('steps_analyzed')} steps from {run['step_source']}"
            if run.get("step_source")
            else "no steps"
        )
        chip = md_text(run.get("chip") or "unknown chip")
        out.append(
            f"- **{label}**: `{md_code(run.get('source'))}`: {chip}, "
            f"{run.get('devices')} device(s) on {run.get('hosts')} host(s), {steps}"
        )
    out.append("")
    if diff.warnings:
        out += ["## Warnings", "", *(f"- {md_text(w)}" for w in diff.warnings), ""]
    out += [
        "## Summary",
        "",
        "| | before | after | change | 95% CI |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, key, kind in _SUMMARY_ROWS:
        out.append(f"| {label} | " + " | ".join(_summary_cells(diff.summary, key, kind)) + " |")
    out.append("")
    lines = [verdict_line(diff.summary), *programs_lines(diff), factor_line(diff.summary)]
    out += [*(f"- {md_text(line)}" for line in lines), ""]

    counts = diff.summary["ops"]
    out += [
        "## Ops",
        "",
        f"{counts['changed']} changed (beyond the common factor), {counts['added']} added, "
        f"{counts['removed']} removed, {counts['same']} same; self time per step per device, "
        "largest change first.",
        "",
    ]
    records = diff.ops.records()[:top]
    if records:
        out += _md_table(
            ["op", "was", "match", "program", "status", "before", "after", "change", "%", "95% CI"],
            5,
            [
                [
                    f"`{md_code(r['op'])}`",
                    f"`{md_code(r['base_op'])}`"
                    if r["base_op"] and r["base_op"] != r["op"]
                    else "",
                    r["match"] or "",
                    f"`{md_code(r['module'])}`",
                    r["status"],
                    *_time_cells(r, "ms_per_step", "added", "removed"),
                    signed_pct(r["delta_pct"]),
                    ci_text(r["delta_ci_low_ms"], r["delta_ci_high_ms"]),
                ]
                for r in records
            ],
        )

    categories = diff.categories.records()
    if categories:
        out += ["## Categories", ""]
        out += _md_table(
            ["category", "before", "after", "change", "%"],
            1,
            [
                [
                    md_text(r["category"]),
                    *_time_cells(r, "ms_per_step", "", ""),
                    signed_pct(r["delta_pct"]),
                ]
                for r in categories
            ],
        )

    out += ["## Recommendations", ""]
    recs = diff.recommendations.records()
    if not recs:
        out += ["None on either side.", ""]
    else:
        out += _md_table(
            ["recommendation", "kind", "status", "saving before", "after", "change"],
            3,
            [
                [
                    md_text(r["title"]),
                    f"`{r['kind']}`",
                    r["status"].replace("_", " "),
                    *_time_cells(r, "est_savings_ms", "appeared", "went_away"),
                ]
                for r in recs
            ],
        )
    return "\n".join(out)


def _md_table(header: list[str], numbers_from: int, rows: list[list[str]]) -> list[str]:
    """A Markdown table (the columns from ``numbers_from`` on right-aligned), then a blank
    line."""
    align = ["---" if i < numbers_from else "---:" for i in range(len(header))]
    return [_md_row(header), "|" + "|".join(align) + "|", *map(_md_row, rows), ""]


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"
