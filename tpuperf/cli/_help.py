"""Help pages laid out as typer lays them out with rich, without importing rich.

A usage line, the description (its first paragraph, then the rest with the Example lines kept
as written), and boxed panels of arguments, options and commands: the same text in the same
places as typer's rich help, in plain text (no colours). Rich, its markdown parser and typer's
``rich_utils`` took 0.2-0.45 s to import, longer than the rest of ``tpuperf --help``.
"""

from __future__ import annotations

import os
import re

# typing and inspect are not imported: the help of `tpuperf --help` needs nothing of them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_WORD = re.compile(r"\s*\S+\s*")


def cleandoc(doc: str) -> str:
    """``inspect.cleandoc``: the first line stripped, the others dedented by their common
    indentation, blank lines at either end dropped."""
    lines = doc.expandtabs().split("\n")
    margin = min((len(x) - len(x.lstrip()) for x in lines[1:] if x.lstrip()), default=0)
    lines = [lines[0].lstrip(), *(x[margin:] for x in lines[1:])]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def terminal_width() -> int:
    """The width rich would draw at: ``TERMINAL_WIDTH`` (typer's), ``COLUMNS``, the terminal
    of stdin, stdout or stderr, else 80."""
    for name in ("TERMINAL_WIDTH", "COLUMNS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns or 80
        except (OSError, ValueError):
            continue
    return 80


def wrap(text: str, width: int) -> list[str]:
    """``text`` wrapped to ``width`` as rich wraps it: each line of it on its own, a word moves
    to the next line when it does not fit, a word longer than a line is cut, leading spaces
    (an indented Example line) are kept."""
    width = max(width, 1)
    lines: list[str] = []
    for raw in text.split("\n"):
        line = ""
        for word in _WORD.findall(raw):
            length = len(word.rstrip())
            if len(line) + length <= width:
                line += word
            elif length > width:
                if line:
                    lines.append(line.rstrip())
                chunks = [word[i : i + width] for i in range(0, len(word), width)]
                lines.extend(chunk.rstrip() for chunk in chunks[:-1])
                line = chunks[-1]
            else:
                lines.append(line.rstrip())
                line = word
        lines.append(line.rstrip())
    return lines


def _items(items: list[str], width: int) -> list[str]:
    """rich's ``Columns`` of a parameter's help, default and ``[required]``: side by side where
    they fit in ``width``, else one under the other."""
    sizes = [max(len(line) for line in item.split("\n")) for item in items]
    count = len(items)
    while count > 1:
        widths = [max(sizes[i::count]) for i in range(count)]
        if sum(widths) + count - 1 <= width:
            break
        count -= 1
    if count == 1:
        return [line for item in items for line in wrap(item, width)]
    out = []
    for start in range(0, len(items), count):
        row = [wrap(item, w) for item, w in zip(items[start : start + count], widths, strict=False)]
        for i in range(max(len(cell) for cell in row)):
            cells = [cell[i] if i < len(cell) else "" for cell in row]
            out.append(" ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
    return out


def _table(rows: list[list[Any]], width: int, fixed_last: int | None = None) -> list[str]:
    """Rows of cells (strings; the last one a list of items) in columns 2 apart, the last
    column taking what is left of ``width``, as rich's expanding table without a box."""
    n = len(rows[0])
    widths = [max(len(row[i]) for row in rows) for i in range(n - 1)]
    if fixed_last is not None:
        widths[-1] = fixed_last
    last = width - sum(widths) - 2 * (n - 1)
    # Too narrow for every column: the widest give way, one character at a time, until the
    # last is as wide as they are (rich collapses the widest wrapping columns first).
    while widths and last < max(widths):
        widths[widths.index(max(widths))] -= 1
        last += 1
    lines = []
    for row in rows:
        cells = [wrap(cell, w) if cell else [""] for cell, w in zip(row[:-1], widths, strict=True)]
        cells.append(_items(row[-1], last) if row[-1] else [""])
        for i in range(max(len(cell) for cell in cells)):
            parts = [cell[i] if i < len(cell) else "" for cell in cells]
            text = "  ".join(p.ljust(w) for p, w in zip(parts, [*widths, last], strict=True))
            lines.append(text)
    return lines


def _panel(title: str, lines: list[str], width: int) -> list[str]:
    inner = width - 4
    top = f"╭─ {title} " + "─" * max(width - 5 - len(title), 0) + "╮"
    body = [f"│ {line[:inner].ljust(inner)} │" for line in lines]
    return [top, *body, "╰" + "─" * (width - 2) + "╯"]


def _param_help(param: Any, ctx: Any) -> list[str]:
    from typer.core import TyperArgument, TyperOption

    items = []
    text: str | None = getattr(param, "help", None)
    if text:
        paragraphs = [
            p.replace("\n", " ").strip() if not p.startswith("\b") else p.strip("\b\n") + "\n"
            for p in text.split("\n\n")
        ]
        items.append(cleandoc("\n".join(paragraphs).strip()))
    if isinstance(param, (TyperOption, TyperArgument)):
        default = param._extract_default_help_str(ctx=ctx)
        shown = isinstance(param.show_default, str)
        if shown or (default is not None and (param.show_default or ctx.show_default)):
            string = param._get_default_string(
                ctx=ctx, show_default_is_str=shown, default_value=default
            )
            if string:
                items.append(f"[default: {string}]")
    if param.required:
        items.append("[required]")
    return items


def _param_rows(params: list[Any], ctx: Any) -> list[list[Any]]:
    """typer's table of parameters: [required], names, --no- names, metavar, help items."""
    from typer._click.types import _NumberRangeBase
    from typer.core import TyperArgument, TyperOption

    rows: list[list[Any]] = []
    for param in params:
        name = None
        if isinstance(param, TyperArgument):
            name = param.metavar if param.metavar is not None else param.name or ""
            kind = param.type.get_metavar(param=param, ctx=ctx) or f"<{param.type.name}>"
        else:
            kind = param.make_metavar(ctx=ctx)
        kind = "" if "bool" in kind.lower() else kind
        ranged = isinstance(param.type, _NumberRangeBase) and isinstance(param, TyperOption)
        if ranged and not (param.count and param.type.min == 0 and param.type.max is None):
            described = param.type._describe_range()
            kind += f" [{described}]" if described else ""
        row = []
        for opts in (param.opts, param.secondary_opts):
            row.append(",".join(o for o in opts if "--" in o))
            row.append(",".join(name or o for o in opts if "--" not in o))
        rows.append(["*" if param.required else "", *row, kind, _param_help(param, ctx)])
    if not any(row[0] for row in rows):
        rows = [row[1:] for row in rows]
    return rows


def page(
    width: int,
    usage: str,
    description: str,
    panels: list[tuple[str, list[list[Any]], int | None]],
    commands: list[tuple[str, str]],
) -> str:
    """A help page: the usage line, the description (its first paragraph, then the rest as
    written), each panel of rows (title, rows, the fixed width of the last column but one)
    and the commands (name, summary)."""
    text = max(width - 2, 1)
    lines = ["", *(" " + line for line in wrap(usage, text)), ""]
    doc = cleandoc(description).partition("\f")[0]
    if doc:
        first, *rest = doc.split("\n\n")
        if not first.startswith("\b"):
            first = first.replace("\n", " ")
        lines += [" " + line for line in wrap(first.strip(), text)]
        if rest:
            lines.append("")
            lines += [" " + line for line in wrap(cleandoc("\n\n".join(rest)), text)]
        lines.append("")
    for title, rows, fixed in panels:
        if rows:
            lines += _panel(title, _table(rows, width - 4, fixed), width)
    if commands:
        name_width = max(len(name) for name, _ in commands)
        rows = [[name, [cleandoc(text).split("\n\n")[0].strip()]] for name, text in commands]
        lines += _panel("Commands", _table(rows, width - 4, name_width), width)
    return "\n".join(line.rstrip() for line in lines) + "\n"


def format_help(command: Any, ctx: Any, commands: list[tuple[str, str]] | None = None) -> str:
    """The help page of ``command`` (a typer command or group), as typer's rich help shows it
    at the terminal's width. A group lists ``commands`` (name, help) when given, else those it
    holds."""
    from typer.core import TyperArgument, TyperGroup, TyperOption

    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    arguments = [p for p in params if isinstance(p, TyperArgument)]
    options = [p for p in params if isinstance(p, TyperOption)]
    panels: list[tuple[str, list[list[Any]], int | None]] = [
        ("Arguments", _param_rows(arguments, ctx), None),
        ("Options", _param_rows(options, ctx), None),
    ]
    if commands is None and isinstance(command, TyperGroup):
        found = [command.get_command(ctx, name) for name in command.list_commands(ctx)]
        shown = [c for c in found if c is not None and not c.hidden]
        commands = [(c.name or "", c.short_help or c.help or "") for c in shown]
    width = terminal_width()
    return page(width, command.get_usage(ctx), command.help or "", panels, commands or [])
