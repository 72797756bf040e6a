"""Render the scope tree (:func:`tpuperf.scopes.tree_report`) for a terminal with rich.

One line per node: the name under tree guides (shortened in the middle to fit), time per step,
share of all op time, and a bar of that share split by pass. Names come from the profile, so
they go in as Text, never as markup.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tpuperf.render.fit import display_name, shorten
from tpuperf.render.terminal import fmt_ms, fmt_pct

# Pass -> (bar glyph, style), in bar order: the glyphs tell passes apart without colour.
PASS_STYLES = {
    "forward": ("█", "green"),
    "backward": ("▓", "magenta"),
    "optimizer": ("▒", "yellow"),
    "other": ("░", "grey50"),
}
_TIME_WIDTH = 9
_PCT_WIDTH = 6
_MIN_NAME_WIDTH = 16
_MAX_BAR_WIDTH = 24


def pass_bar(passes: dict[str, float], total: float, cells: int) -> Text:
    """``cells`` cells for a node taking ``total`` of the root's time, split by pass (each
    segment rounded on the running sum, so the segments add up to the node's length)."""
    bar = Text()
    if total <= 0 or cells <= 0:
        return bar
    used = 0
    running = 0.0
    for name, (glyph, style) in PASS_STYLES.items():
        running += max(passes.get(name, 0.0), 0.0)
        end = min(cells, round(cells * running / total))
        if end > used:
            bar.append(glyph * (end - used), style=style)
            used = end
    return bar


def legend(passes: dict[str, float]) -> Text:
    total = sum(passes.values()) or 1.0
    text = Text()
    for name, (glyph, style) in PASS_STYLES.items():
        text.append(f"{glyph} ", style=style)
        text.append(f"{name} {fmt_pct(100.0 * passes.get(name, 0.0) / total)}   ")
    return text


def _short_source(source: str) -> str:
    """``/long/path/model.py:29`` -> ``model.py:29``."""
    return source.rsplit("/", 1)[-1]


def render_tree(document: dict[str, Any], console: Console) -> None:
    """Write a tree report (see :func:`tpuperf.scopes.tree_report`) to ``console``."""
    root = document["tree"]
    width = console.width
    bar_width = max(8, min(_MAX_BAR_WIDTH, width // 4))
    # Columns are separated by one space; the name takes what is left.
    name_width = max(_MIN_NAME_WIDTH, width - _TIME_WIDTH - _PCT_WIDTH - bar_width - 3)
    head = Text()
    head.append("Scope tree ", style="bold")
    head.append(str(document["source"]))
    head.append(
        f"\n{fmt_ms(root['ms_per_step'])} of op time per step per device "
        f"({document['windows']} step windows)"
    )
    console.print(head)
    console.print(legend(root["passes"]))
    table = Table(box=None, show_header=True, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("scope", no_wrap=True, width=name_width, overflow="ellipsis")
    table.add_column("ms/step", justify="right", no_wrap=True, width=_TIME_WIDTH)
    table.add_column("%", justify="right", no_wrap=True, width=_PCT_WIDTH)
    table.add_column("by pass", no_wrap=True, width=bar_width)
    total_ms = root["ms_per_step"] or 1.0
    hidden = 0
    for prefix, node in _walk(root):
        hidden += node.get("hidden", 0)
        if node is root:
            continue
        name = Text(prefix, style="grey50")
        label = display_name(node["name"])
        room = name_width - len(prefix)
        if node["kind"] == "op" and node["source"]:
            source = _short_source(node["source"])
            if len(label) + 1 + len(source) <= room:
                name.append(label, style="cyan")
                name.append(" " + source, style="dim")
            else:
                name.append(shorten(label, room), style="cyan")
        else:
            style = "bold" if node["kind"] == "scope" else "italic"
            name.append(shorten(label, room), style=style)
        cells = round(bar_width * node["ms_per_step"] / total_ms)
        table.add_row(
            name,
            fmt_step_ms(node["ms_per_step"]),
            fmt_pct(node["pct"]),
            pass_bar(node["passes"], node["ms_per_step"], cells),
        )
    console.print(table)
    for note in document.get("notes", []):
        console.print(Text(f"note: {note}", style="yellow"))
    if hidden:
        cut = []
        if document.get("depth") is not None:
            cut.append(f"deeper than --depth {document['depth']}")
        if document.get("min_pct"):
            cut.append(f"under --min-pct {document['min_pct']:g}%")
        console.print(
            Text(
                f"{hidden} node(s) not shown ({' or '.join(cut)}); their time is in their parents'",
                style="dim",
            )
        )


def fmt_step_ms(value: float) -> str:
    """Milliseconds with three significant digits or more, without the unit."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _walk(
    node: dict[str, Any], prefix: str = "", last: bool = True, top: bool = True
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(guide prefix, node) in depth-first order; the root has no guide."""
    yield ("", node) if top else (prefix + ("└─ " if last else "├─ "), node)
    children = node["children"]
    inner = "" if top else prefix + ("   " if last else "│  ")
    for i, child in enumerate(children):
        yield from _walk(child, inner, i == len(children) - 1, False)
