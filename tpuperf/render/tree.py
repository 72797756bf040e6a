"""Render the scope tree (:func:`tpuperf.scopes.tree_report`) for a terminal.

One line per node: the name under tree guides (shortened in the middle to fit), time per step,
share of all op time, and a bar of that share split by pass. A primitive leaf keeps its source
line: where both do not fit, the name is shortened first (down to a few cells), then the
source (keeping its end, the line number). ``wide`` shows every name whole. Names come from the
profile, so they go in as text, never as markup.

The tree's table is rich's (a terminal's colours), and on a pipe the same lines written
directly (:class:`_ScopeTable`): rich lays out each row of a table on its own, tens of
milliseconds for a large model's hundreds of nodes, and is not imported there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

from tpuperf.render.fit import display_name, justified, shorten, wider_console
from tpuperf.render.plain import Line, cells
from tpuperf.render.text import fmt_ms, fmt_pct, fmt_step_ms

if TYPE_CHECKING:
    from rich.console import Console

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
# A leaf's name is shortened down to this many cells before its source line is.
_MIN_LEAF_NAME = 12
# A source line shorter than this says too little to show (file and line number).
_MIN_SOURCE = 8


def pass_bar(passes: dict[str, float], total: float, length: int) -> Line:
    """``length`` cells for a node taking ``total`` of the root's time, split by pass (each
    segment rounded on the running sum, so the segments add up to the node's length)."""
    bar = Line()
    if total <= 0 or length <= 0:
        return bar
    used = 0
    running = 0.0
    for name, (glyph, style) in PASS_STYLES.items():
        running += max(passes.get(name, 0.0), 0.0)
        end = min(length, round(length * running / total))
        if end > used:
            bar.append(glyph * (end - used), style=style)
            used = end
    return bar


def legend(passes: dict[str, float]) -> Line:
    total = sum(passes.values()) or 1.0
    text = Line()
    for name, (glyph, style) in PASS_STYLES.items():
        text.append(f"{glyph} ", style=style)
        text.append(f"{name} {fmt_pct(100.0 * passes.get(name, 0.0) / total)}   ")
    return text


def _short_source(source: str) -> str:
    """``/long/path/model.py:29`` -> ``model.py:29``."""
    return source.rsplit("/", 1)[-1]


def leaf_text(label: str, source: str, room: int) -> tuple[str, str]:
    """An op leaf's name and source line in ``room`` cells (a space between them): both whole
    when they fit; else the name shortened, down to ``_MIN_LEAF_NAME`` cells; then the source
    too (its end, the line number, kept); the name alone when even that does not fit."""
    if not source or cells(label) + 1 + cells(source) <= room:
        return (label, source) if source else (shorten(label, room), "")
    keep = min(cells(label), _MIN_LEAF_NAME)
    name_room = room - 1 - cells(source)
    if name_room >= keep:
        return shorten(label, name_room), source
    source_room = room - 1 - keep
    if source_room >= _MIN_SOURCE:
        return shorten(label, keep), shorten(source, source_room)
    return shorten(label, room), ""


def _steps_text(document: dict[str, Any]) -> str:
    """Which steps the windows are, in analyze's words (``99 analysed (module_period), 1 left
    out``), on a line of its own; nothing without steps (a window is a device's op span)."""
    source = document.get("step_source")
    if not source:
        return ""
    return (
        f"\nSteps: {document['steps_analyzed']} analysed ({source}), "
        f"{document['steps_excluded']} left out"
    )


def render_tree(document: dict[str, Any], console: Console, wide: bool = False) -> None:
    """Write a tree report (see :func:`tpuperf.scopes.tree_report`) to ``console``; ``wide``:
    every name whole, however wide the lines get."""
    root = document["tree"]
    rows = [(prefix, node) for prefix, node in _walk(root) if node is not root]
    width = console.width
    bar_width = max(8, min(_MAX_BAR_WIDTH, width // 4))
    fixed = _TIME_WIDTH + _PCT_WIDTH + bar_width + 3  # columns are separated by one space
    if wide:
        needed = max((cells(prefix) + cells(_label(node)) for prefix, node in rows), default=0)
        name_width = max(_MIN_NAME_WIDTH, needed, width - fixed)
    else:
        name_width = max(_MIN_NAME_WIDTH, width - fixed)
    head = Line()
    head.append("Scope tree ", style="bold")
    head.append(str(document["source"]))
    head.append(
        f"\n{fmt_ms(root['ms_per_step'])} of op time per step per device "
        f"({document['windows']} step windows){_steps_text(document)}"
    )
    console.print(head)
    console.print(legend(root["passes"]))
    table = _ScopeTable([name_width, _TIME_WIDTH, _PCT_WIDTH, bar_width])
    total_ms = root["ms_per_step"] or 1.0
    hidden = root.get("hidden", 0)
    for prefix, node in rows:
        hidden += node.get("hidden", 0)
        name = Line(prefix, style="grey50")
        label = display_name(node["name"])
        room = name_width - cells(prefix)
        if node["kind"] == "op":
            text, source = leaf_text(label, _short_source(node["source"]), room)
            name.append(text, style="cyan")
            if source:
                name.append(" " + source, style="dim")
        else:
            style = "bold" if node["kind"] == "scope" else "italic"
            name.append(shorten(label, room), style=style)
        length = round(bar_width * node["ms_per_step"] / total_ms)
        table.rows.append(
            [
                name,
                Line(fmt_step_ms(node["ms_per_step"])),
                Line(fmt_pct(node["pct"])),
                pass_bar(node["passes"], node["ms_per_step"], length),
            ]
        )
    if name_width + fixed > width:  # --wide: lines as long as the names (the terminal wraps)
        wider_console(console, name_width + fixed).print(table)
    else:
        console.print(table)
    for note in document.get("notes", []):
        console.print(Line(f"note: {note}", style="yellow"))
    if hidden:
        cut = []
        if document.get("depth") is not None:
            cut.append(f"deeper than --depth {document['depth']}")
        if document.get("min_pct"):
            cut.append(f"under --min-pct {document['min_pct']:g}%")
        console.print(
            Line(
                f"{hidden} node(s) not shown ({' or '.join(cut)}); their time is in their parents'",
                style="dim",
            )
        )


class _ScopeTable:
    """The tree's table: rich's ``Table`` of the name, ms/step, % and bar columns at fixed
    widths (no box, a space after each column but the last), or on a plain console the
    lines that table draws, written directly where each cell fits its width."""

    _HEADER = ("scope", "ms/step", "%", "by pass")
    _JUSTIFY: tuple[Literal["left", "right"], ...] = ("left", "right", "right", "left")

    def __init__(self, widths: list[int]) -> None:
        self.widths = widths
        self.rows: list[list[Line]] = []

    def plain_lines(self, console: Any) -> list[str] | None:
        """The table's lines as rich draws them without styles, each cell justified as rich
        justifies it (:func:`~tpuperf.render.fit.justified`); None where a cell is not drawn
        so (wider than its column: rich cuts it) or a style is drawn."""
        if console.color_system is not None:
            return None
        lines = []
        for row in [[Line(text) for text in self._HEADER], *self.rows]:
            parts = []
            for line, width, justify in zip(row, self.widths, self._JUSTIFY, strict=True):
                cell = justified(line.plain, width, justify == "right")
                if cell is None:
                    return None
                parts.append(cell)
            lines.append(" ".join(parts))
        return lines

    def __rich__(self) -> Any:
        from rich.table import Table

        table = Table(box=None, show_header=True, pad_edge=False, padding=(0, 1, 0, 0))
        for header, width, justify in zip(self._HEADER, self.widths, self._JUSTIFY, strict=True):
            table.add_column(header, justify=justify, no_wrap=True, width=width)
        for row in self.rows:
            table.add_row(*(line.__rich__() for line in row))
        return table


def _label(node: dict[str, Any]) -> str:
    """A node's name as shown whole, with its source line for an op leaf."""
    label = display_name(node["name"])
    source = _short_source(node["source"]) if node["kind"] == "op" else ""
    return f"{label} {source}" if source else label


def _walk(
    node: dict[str, Any], prefix: str = "", last: bool = True, top: bool = True
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(guide prefix, node) in depth-first order; the root has no guide."""
    yield ("", node) if top else (prefix + ("└─ " if last else "├─ "), node)
    children = node["children"]
    inner = "" if top else prefix + ("   " if last else "│  ")
    for i, child in enumerate(children):
        yield from _walk(child, inner, i == len(children) - 1, False)
