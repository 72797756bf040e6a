"""Render the memory view (:func:`tpuperf.memory_plan.to_document`) for a terminal and as Markdown.

The terminal view: the capacity, largest peak and headroom per device kind; one row per
program, largest peak first, with its split; the buffers live at the peak of each program
(``top`` of them) with their op, shape, scope, pass and, with ``wide``, source line; the
bytes live at the peak by scope for the largest program; the allocators' memory over time.
Names come from the profile, so they go in as Text, never as markup.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tpuperf.render.fit import wider_console
from tpuperf.render.text import fmt_bytes, md_text
from tpuperf.render.text import md_code as _md_code
from tpuperf.render.tree import PASS_STYLES, pass_bar

_SCOPES_SHOWN = 10
_BYTES_WIDTH = 10  # "545.53 MiB"
_WIDE = 1000
# Buffer kinds as the terminal table shows them.
_KIND_SHORT = {"parameter": "param", "output": "out", "temporary": "temp", "constant": "const"}


def md_code(text: str) -> str:
    """A profile string as a Markdown code span (empty stays empty)."""
    return f"`{_md_code(text)}`" if text else ""


def _pct(part: Any, whole: Any) -> str:
    if part is None or not whole:
        return "?"
    return f"{100.0 * part / whole:.1f}%"


def program_label(program: dict[str, Any]) -> str:
    pid = program["program_id"]
    return f"{program['module']}({pid})" if pid else program["module"]


def capacity_lines(document: dict[str, Any]) -> list[str]:
    """One line per device kind: capacity, where it comes from, largest peak, headroom."""
    lines = []
    for kind, capacity in document["capacity_bytes"].items():
        peak = document["largest_peak_bytes"][kind]
        headroom = document["headroom_bytes"][kind]
        source = document["capacity_source"][kind]
        planned = any(p["device_kind"] == kind for p in document["programs"])
        if not planned:
            capacity_text = fmt_bytes(capacity) if capacity is not None else "unknown"
            lines.append(f"{kind or 'device'}: capacity {capacity_text} ({source})")
            continue
        if capacity is None:
            lines.append(
                f"{kind or 'device'}: capacity unknown (give --hbm-gib); largest peak "
                f"{fmt_bytes(peak)}"
            )
            continue
        lines.append(
            f"{kind or 'device'}: capacity {fmt_bytes(capacity)} ({source}), largest peak "
            f"{fmt_bytes(peak)}, headroom {fmt_bytes(headroom)} ({_pct(headroom, capacity)})"
        )
    return lines


def _room(width: int | None, fixed: int, columns: int) -> int | None:
    """Cells left for the flexible columns of a table ``width`` wide (None: no limit) whose
    fixed columns take ``fixed`` cells, with two cells between ``columns`` columns."""
    return None if width is None else max(12, width - fixed - 2 * (columns - 1))


def _share(room: int | None, part: float) -> int | None:
    return None if room is None else max(6, int(room * part))


def _programs_table(document: dict[str, Any], width: int | None) -> Table:
    table = Table(title="Programs by peak HBM", title_justify="left", box=None, pad_edge=False)
    room = _room(width, 5 * _BYTES_WIDTH, 6)
    table.add_column("program", overflow="ellipsis", no_wrap=True, max_width=room)
    for name in ("peak", "params", "outputs", "temps", "headroom"):
        table.add_column(name, justify="right", no_wrap=True, min_width=_BYTES_WIDTH)
    for program in document["programs"]:
        split = program["split_bytes"]
        table.add_row(
            Text(program_label(program)),
            fmt_bytes(program["peak_bytes"]),
            fmt_bytes(split["parameter"]),
            fmt_bytes(split["output"]),
            fmt_bytes(split["temporary"] + split["constant"]),
            fmt_bytes(program["headroom_bytes"]),
        )
    return table


def _buffers_table(program: dict[str, Any], width: int | None) -> Table:
    wide = width is None
    title = (
        f"{program_label(program)}: {fmt_bytes(program['peak_bytes'])}; live at the peak "
        f"{fmt_bytes(program['live_peak_bytes'])} in {program['buffer_count']} buffers"
        + (f" (at {program['peak_op']})" if program["peak_op"] else "")
    )
    table = Table(title=Text(title), title_justify="left", box=None, pad_edge=False)
    room = _room(width, _BYTES_WIDTH + 5 + 9, 6)
    table.add_column("size", justify="right", no_wrap=True, min_width=_BYTES_WIDTH)
    table.add_column("op", overflow="ellipsis", no_wrap=True, max_width=_share(room, 0.34))
    table.add_column("shape", overflow="ellipsis", no_wrap=True, max_width=_share(room, 0.3))
    table.add_column("kind", no_wrap=True, min_width=5)
    table.add_column("scope", overflow="ellipsis", no_wrap=True, max_width=_share(room, 0.36))
    table.add_column("pass", no_wrap=True, min_width=9)
    if wide:
        table.add_column("source", no_wrap=True)
    for buffer in program["buffers"]:
        row = [
            fmt_bytes(buffer["size_bytes"]),
            Text(buffer["op"]),
            Text(buffer["shape"]),
            _KIND_SHORT.get(buffer["kind"], buffer["kind"]),
            Text(buffer["scope"]),
            buffer["pass"],
        ]
        if wide:
            row.append(Text(buffer["source"]))
        table.add_row(*row)
    hidden = program["buffer_count"] - len(program["buffers"])
    if hidden > 0:
        table.caption = f"{hidden} smaller buffers not shown (--top)"
        table.caption_justify = "left"
    return table


def _scopes_table(program: dict[str, Any], width: int | None) -> Table:
    table = Table(
        title=Text(f"{program_label(program)}: bytes live at the peak by scope"),
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    room = _room(width, _BYTES_WIDTH + 7 + 20, 4)
    table.add_column("scope", overflow="ellipsis", no_wrap=True, max_width=room)
    table.add_column("bytes", justify="right", no_wrap=True, min_width=_BYTES_WIDTH)
    table.add_column("buffers", justify="right", no_wrap=True)
    table.add_column("by pass", no_wrap=True, width=20)
    total = max(sum(r["bytes"] for r in program["by_scope"]), 1)
    for row in program["by_scope"][:_SCOPES_SHOWN]:
        table.add_row(
            Text(row["scope"]),
            fmt_bytes(row["bytes"]),
            str(row["buffers"]),
            pass_bar(row["passes"], total, 20).__rich__(),
        )
    return table


def _pass_legend(program: dict[str, Any]) -> Text:
    text = Text("by pass: ")
    for name, (glyph, style) in PASS_STYLES.items():
        text.append(f"{glyph} ", style=style)
        text.append(f"{name} {fmt_bytes(program['by_pass_bytes'][name])}   ")
    return text


def _allocators_table(document: dict[str, Any]) -> Table:
    table = Table(
        title="Allocators over the capture (MemoryAllocation events)",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    table.add_column("allocator", overflow="ellipsis", no_wrap=True)
    for name in ("events", "peak in use", "capacity", "frag", "lifetime peak"):
        table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
    for a in document["allocators"]:
        table.add_row(
            Text(a["allocator"]),
            str(a["events"]),
            fmt_bytes(a["peak_bytes"]),
            fmt_bytes(a["capacity_bytes"]),
            f"{a['fragmentation_pct']:.2f}%",
            fmt_bytes(a["lifetime_peak_bytes"]),
        )
    return table


def render_memory(document: dict[str, Any], console: Console, wide: bool = False) -> None:
    """The memory view on ``console`` (its notes are the caller's to say, on stderr)."""
    console.print(Text(f"Memory of {document['source']}", style="bold"))
    for line in capacity_lines(document):
        console.print(Text(line))
    width = None if wide else console.width
    if wide:  # rich never prints a table wider than its console: give it one wide enough
        console = wider_console(console, _WIDE)
    if document["programs"]:
        console.print()
        console.print(_programs_table(document, width))
        for program in document["programs"]:
            console.print()
            console.print(_buffers_table(program, width))
        largest = document["programs"][0]
        if largest["by_scope"]:
            console.print()
            console.print(_scopes_table(largest, width))
            console.print(_pass_legend(largest))
    if document["allocators"]:
        console.print()
        console.print(_allocators_table(document))


def render_memory_markdown(document: dict[str, Any]) -> str:
    """The memory view as Markdown."""
    out = [f"# Memory of {md_text(document['source'])}", ""]
    out += [f"- {md_text(line)}" for line in capacity_lines(document)]
    out += [f"- {md_text(note)}" for note in document["notes"]]
    if document["programs"]:
        out += [
            "",
            "## Programs by peak HBM",
            "",
            "| program | peak | parameters | outputs | temporaries | constants | headroom |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for p in document["programs"]:
            s = p["split_bytes"]
            out.append(
                f"| {md_code(program_label(p))} | {fmt_bytes(p['peak_bytes'])} | "
                f"{fmt_bytes(s['parameter'])} | {fmt_bytes(s['output'])} | "
                f"{fmt_bytes(s['temporary'])} | {fmt_bytes(s['constant'])} | "
                f"{fmt_bytes(p['headroom_bytes'])} |"
            )
    for p in document["programs"]:
        out += [
            "",
            f"## {md_text(program_label(p))}",
            "",
            f"Peak {fmt_bytes(p['peak_bytes'])}; live at the peak "
            f"{fmt_bytes(p['live_peak_bytes'])} in {p['buffer_count']} buffers.",
            "",
            "| size | op | shape | kind | scope | pass | source |",
            "|---:|---|---|---|---|---|---|",
        ]
        for b in p["buffers"]:
            out.append(
                f"| {fmt_bytes(b['size_bytes'])} | {md_code(b['op'])} | {md_code(b['shape'])} "
                f"| {b['kind']} | {md_code(b['scope'])} | {b['pass']} | {md_code(b['source'])} |"
            )
    if document["allocators"]:
        out += [
            "",
            "## Allocators",
            "",
            "| allocator | events | peak in use | capacity | fragmentation | lifetime peak |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for a in document["allocators"]:
            out.append(
                f"| {md_code(a['allocator'])} | {a['events']} | {fmt_bytes(a['peak_bytes'])} | "
                f"{fmt_bytes(a['capacity_bytes'])} | {a['fragmentation_pct']:.2f}% | "
                f"{fmt_bytes(a['lifetime_peak_bytes'])} |"
            )
    return "\n".join(out) + "\n"
