"""Render a :class:`~tpuperf.diffing.DiffReport` for a terminal (rich, on a given console) or
as Markdown. Nothing here computes a number the diff does not already hold."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from tpuperf.render.fit import display_name, shorten, shorten_apart
from tpuperf.render.markdown import md_code, md_text
from tpuperf.render.terminal import fmt_ms, fmt_pct

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
_MIN_NAME = 12  # an op name is never shortened below this many characters


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def signed_ms(value: Any) -> str:
    """A change in ms with its sign: +80.0 us, -2.50 ms."""
    number = _finite(value)
    if number is None:
        return "-"
    if number == 0:
        return "0"
    return ("+" if number > 0 else "-") + fmt_ms(abs(number))


def signed_pct(value: Any, unit: str = "%") -> str:
    number = _finite(value)
    if number is None:
        return "-"
    return f"{number:+.1f}{unit}"


def _summary_cells(summary: dict[str, Any], key: str, kind: str) -> tuple[str, str, str]:
    if kind == "time":
        d = summary["step_time_ms"][key]
        change = signed_ms(d["delta"])
        if d["delta_pct"] is not None:
            change += f" ({signed_pct(d['delta_pct'])})"
        return fmt_ms(d["before"]), fmt_ms(d["after"]), change
    if kind == "points":
        d = summary[key]
        return fmt_pct(d["before"]), fmt_pct(d["after"]), signed_pct(d["delta"], " pt")
    ms, pct = summary[f"{key}_ms"], summary[f"{key}_pct"]

    def cell(side: str) -> str:
        return f"{fmt_ms(ms[side])} ({fmt_pct(pct[side])})" if ms[side] is not None else "-"

    return (
        cell("before"),
        cell("after"),
        f"{signed_ms(ms['delta'])} ({signed_pct(pct['delta'], ' pt')})",
    )


def _run_line(label: str, run: dict[str, Any]) -> Text:
    line = Text()
    line.append(f"{label:<5}", style="bold")
    line.append(str(run.get("source") or "?"))
    steps = (
        f"{run.get('steps_analyzed')} steps from {run['step_source']}"
        if run.get("step_source")
        else "no steps"
    )
    line.append(
        f"  {run.get('chip') or 'unknown chip'}, {run.get('devices')} device(s), {steps}",
        style="dim",
    )
    return line


def _table(
    width: int,
    title: str | None,
    name_header: str,
    names: list[tuple[str, str]],
    columns: list[tuple[str, list[str], list[str]]],
) -> Table:
    """A table of one name column and ``columns`` (header, cells, styles) of short text and
    numbers. The short columns are as wide as their widest cell, so numbers are never cut;
    the name column takes what is left of ``width`` and long names (and their dim second
    line, ``names[i][1]``) are shortened in the middle."""
    widths = [max(len(header), *(len(c) for c in cells)) for header, cells, _ in columns]
    # Each column but the first adds a space, a divider and a space.
    room = width - sum(widths) - 3 * len(columns)
    longest = max(len(header) for header in [name_header, *(n for pair in names for n in pair)])
    name_width = max(_MIN_NAME, min(room, longest))
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False
    )
    table.add_column(name_header, no_wrap=True, width=name_width)
    for (header, _cells, _), w in zip(columns, widths, strict=True):
        if header == "status":
            table.add_column(header, no_wrap=True, min_width=w)
        else:
            table.add_column(header, justify="right", no_wrap=True, min_width=w)
    firsts = shorten_apart([display_name(name) for name, _ in names], name_width)
    for i, (_, second) in enumerate(names):
        cell = Text(firsts[i])
        if second:
            cell.append("\n" + shorten(display_name(second), name_width), "dim")
        table.add_row(cell, *(Text(cells[i], styles[i]) for _, cells, styles in columns))
    return table


def render_diff_table(diff: DiffReport, console: Console, top: int = 10) -> None:
    """Write the diff to ``console``: runs, summary, the ``top`` ops by change, categories,
    recommendations. Fits the console's width (80 columns and up): long op names are
    shortened in the middle, numbers never."""
    width = console.width
    console.print(Text("tpuperf diff", style="bold"))
    console.print(_run_line("BASE", diff.runs.get("base", {})), overflow="fold")
    console.print(_run_line("NEW", diff.runs.get("new", {})), overflow="fold")
    rows = [(label, *_summary_cells(diff.summary, key, kind)) for label, key, kind in _SUMMARY_ROWS]
    summary = _table(
        width,
        "Summary (per step; the split per device, with its share of the step)",
        "",
        [(r[0], "") for r in rows],
        [(h, [r[i] for r in rows], [""] * len(rows)) for i, h in enumerate(_CHANGE_HEADERS, 1)],
    )
    for part in (
        summary,
        _ops(diff, top, width),
        _categories(diff, width),
        _recommendations(diff, width),
    ):
        console.print()
        console.print(part)


_CHANGE_HEADERS = ("before", "after", "change")


def _ops(diff: DiffReport, top: int, width: int) -> Group:
    counts = diff.summary["ops"]
    head = Text(
        f"Ops by change (self time per step per device): {counts['changed']} changed, "
        f"{counts['added']} added, {counts['removed']} removed, {counts['same']} same",
        style="italic",
    )
    records = diff.ops.records()[:top]
    if not records:
        return Group(head)
    names = [
        (
            str(r["op"]),
            f"was {r['base_op']} ({r['match']})"
            if r["base_op"] and r["base_op"] != r["op"]
            else "",
        )
        for r in records
    ]
    columns = [
        ("status", [r["status"] for r in records], [STATUS_STYLES[r["status"]] for r in records]),
        *_time_columns(records, "ms_per_step", "added", "removed"),
        ("%", [signed_pct(r["delta_pct"]) for r in records], [""] * len(records)),
    ]
    return Group(head, _table(width, None, "op", names, columns))


def _time_columns(
    records: list[dict[str, Any]], prefix: str, no_before: str, no_after: str
) -> list[tuple[str, list[str], list[str]]]:
    """before, after and change columns of ``<prefix>_before`` / ``_after`` and ``delta_ms``
    ("-" for the side a row does not exist on)."""
    plain = [""] * len(records)
    return [
        (
            "before",
            [
                fmt_ms(r[f"{prefix}_before"]) if r.get("status") != no_before else "-"
                for r in records
            ],
            plain,
        ),
        (
            "after",
            [fmt_ms(r[f"{prefix}_after"]) if r.get("status") != no_after else "-" for r in records],
            plain,
        ),
        ("change", [signed_ms(r["delta_ms"]) for r in records], plain),
    ]


def _categories(diff: DiffReport, width: int) -> Table | Text:
    records = diff.categories.records()
    if not records:
        return Text("")
    columns = [
        *_time_columns(records, "ms_per_step", "", ""),
        ("%", [signed_pct(r["delta_pct"]) for r in records], [""] * len(records)),
    ]
    names = [(str(r["category"]), "") for r in records]
    return _table(width, "Categories (self time per step per device)", "category", names, columns)


def _recommendations(diff: DiffReport, width: int) -> Table | Text:
    records = diff.recommendations.records()
    if not records:
        return Text("Recommendations: none on either side", style="dim")
    columns = [
        (
            "status",
            [r["status"].replace("_", " ") for r in records],
            [STATUS_STYLES[r["status"]] for r in records],
        ),
        *_time_columns(records, "est_savings_ms", "appeared", "went_away"),
    ]
    names = [(str(r["kind"]), "") for r in records]
    return _table(width, "Recommendations (estimated saving per step)", "kind", names, columns)


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
    out += ["## Summary", "", "| | before | after | change |", "|---|---:|---:|---:|"]
    for label, key, kind in _SUMMARY_ROWS:
        out.append(f"| {label} | " + " | ".join(_summary_cells(diff.summary, key, kind)) + " |")
    out.append("")

    counts = diff.summary["ops"]
    out += [
        "## Ops",
        "",
        f"{counts['changed']} changed, {counts['added']} added, {counts['removed']} removed, "
        f"{counts['same']} same; self time per step per device, largest change first.",
        "",
    ]
    records = diff.ops.records()[:top]
    if records:
        out += [
            "| op | was | match | status | before | after | change | % |",
            "|---|---|---|---|---:|---:|---:|---:|",
        ]
        for r in records:
            was = f"`{md_code(r['base_op'])}`" if r["base_op"] and r["base_op"] != r["op"] else ""
            before = fmt_ms(r["ms_per_step_before"]) if r["status"] != "added" else "-"
            after = fmt_ms(r["ms_per_step_after"]) if r["status"] != "removed" else "-"
            out.append(
                f"| `{md_code(r['op'])}` | {was} | {r['match'] or ''} | {r['status']} | "
                f"{before} | {after} | "
                f"{signed_ms(r['delta_ms'])} | {signed_pct(r['delta_pct'])} |"
            )
        out.append("")

    categories = diff.categories.records()
    if categories:
        out += [
            "## Categories",
            "",
            "| category | before | after | change | % |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in categories:
            out.append(
                f"| {md_text(r['category'])} | {fmt_ms(r['ms_per_step_before'])} | "
                f"{fmt_ms(r['ms_per_step_after'])} | {signed_ms(r['delta_ms'])} | "
                f"{signed_pct(r['delta_pct'])} |"
            )
        out.append("")

    out += ["## Recommendations", ""]
    recs = diff.recommendations.records()
    if not recs:
        out += ["None on either side.", ""]
    else:
        out += [
            "| recommendation | kind | status | saving before | after | change |",
            "|---|---|---|---:|---:|---:|",
        ]
        for r in recs:
            before = fmt_ms(r["est_savings_ms_before"]) if r["status"] != "appeared" else "-"
            after = fmt_ms(r["est_savings_ms_after"]) if r["status"] != "went_away" else "-"
            out.append(
                f"| {md_text(r['title'])} | `{r['kind']}` | {r['status'].replace('_', ' ')} | "
                f"{before} | {after} | "
                f"{signed_ms(r['delta_ms'])} |"
            )
        out.append("")
    return "\n".join(out)
