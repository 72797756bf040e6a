"""Plain text drawn without rich, where it is the text rich would draw.

Output that goes to a pipe or a file is plain text (no colours, no cursor moves), and most of
what tpuperf prints there is lines, wrapped to the width, and tables of
:mod:`tpuperf.render.fit`, whose lines it lays out itself. :class:`PlainConsole` writes those
directly, and hands everything else (a line of wide characters to wrap, a control character
to write out, a rich renderable) to the rich console :func:`tpuperf.output.console` would
have made, made on first use. So ``tpuperf info``, ``ops`` or ``analyze`` on a pipe does not
import rich (40-50 ms), and what it prints is the same, byte for byte (tests/golden_text,
tests/test_render_plain.py).

:class:`Line` is a line of text with styles, for the renderers: drawn on a rich console it is
the :class:`rich.text.Text` it describes (:meth:`Line.__rich__`). :class:`Panel` (a box with a
title) and :class:`Numbered` (lines beside their number) are rich's renderables of the same
names, drawn directly too.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

# What rich itself draws differently from the text as written: control characters (the
# consoles' render hook writes them out), tabs (expanded).
_NOT_PLAIN = re.compile(r"[\x00-\x1f\x7f-\x9f]")


# Printable ASCII and the characters tpuperf draws itself (the step bar's blocks, box, rule and tree
# guide lines, the dash, a shortened name's ellipsis): one cell each, as rich measures them
# (tests/test_render_plain.py), so their text is measured without importing rich.
_ONE_CELL = frozenset(map(chr, range(0x20, 0x7F))).union("█▓▒░─│├└╭╮╰╯—…")


def cells(text: str) -> int:
    """The cells ``text`` takes on a terminal (:func:`rich.cells.cell_len`), at once for
    printable ASCII and tpuperf's own symbols."""
    if (text.isascii() and text.isprintable()) or _ONE_CELL.issuperset(text):
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def one_cell_each(text: str) -> bool:
    """Whether each character of ``text`` is printable and takes one cell, so that rich
    measures and wraps it as it does ASCII (``é``, ``—``, ``█`` do; ``漢`` and accents
    written apart do not)."""
    if text.isascii():
        return text.isprintable()
    return text.isprintable() and all(cells(char) == 1 for char in set(text))


def padded(text: str, width: int) -> str:
    """``text`` (at most ``width`` cells) with spaces after it up to ``width`` cells."""
    return text + " " * (width - cells(text))


def all_plain(texts: Iterable[str]) -> bool:
    """Whether every one of ``texts`` is printable ASCII, a cell a character (so that its
    :func:`cells` is its length): one check of them joined, for a table's thousands of cells."""
    joined = "".join(texts)
    return joined.isascii() and joined.isprintable()


class Line:
    """A line of text with styles, as :class:`rich.text.Text` makes one: ``Line(text,
    style)``, then :meth:`append` of more text, each part in its own style."""

    def __init__(self, text: str = "", style: str | None = None) -> None:
        self.style = style
        self.parts: list[tuple[str, str | None]] = [(text, None)] if text else []

    def append(self, text: str, style: str | None = None) -> Line:
        if text:
            self.parts.append((text, style))
        return self

    def extend(self, line: Line) -> Line:
        """Append each part of ``line``, in its own style over ``line``'s (as appending a
        :class:`rich.text.Text` to another styles it)."""
        for text, style in line.parts:
            both = " ".join(s for s in (line.style, style) if s)
            self.append(text, both or None)
        return self

    def copy(self) -> Line:
        line = Line(style=self.style)
        line.parts = list(self.parts)
        return line

    @property
    def plain(self) -> str:
        return "".join(text for text, _ in self.parts)

    @property
    def cell_len(self) -> int:
        return cells(self.plain)

    def __str__(self) -> str:
        return self.plain

    def __rich__(self) -> Any:
        from rich.text import Text

        text = Text(style=self.style or "")
        for part, style in self.parts:
            text.append(part, style)
        return text


class PlainConsole:
    """A console on a file that draws no colours: :class:`Line`\\ s that need no wrapping and
    tables laid out line by line (anything with a ``plain_lines(console)`` method that returns
    its lines, or None to leave them to rich) are written as they are; everything else goes
    to the rich console ``rich_console()`` makes, on first use."""

    color_system = None
    is_terminal = False

    def __init__(self, file: Any, width: int, rich_console: Callable[[], Any]) -> None:
        self.file = file
        self.width = width
        self._make_rich = rich_console
        self._rich: Any = None

    @property
    def rich(self) -> Any:
        """The rich console this one stands for."""
        if self._rich is None:
            self._rich = self._make_rich()
        return self._rich

    def print(
        self, *objects: Any, soft_wrap: bool | None = None, crop: bool = True, **options: Any
    ) -> None:
        """As rich's ``Console.print``; what takes other ``options`` (a style, a separator,
        markup) is rich's to print."""
        if not options:
            if not objects:
                self._write("\n")
                return
            if len(objects) == 1:
                text = self._plain_text(objects[0], soft_wrap, crop)
                if text is not None:
                    self._write(text)
                    return
        if soft_wrap is not None:
            options["soft_wrap"] = soft_wrap
        self.rich.print(*objects, crop=crop, **options)

    def _plain_text(self, item: Any, soft_wrap: bool | None, crop: bool) -> str | None:
        """What rich would print for ``item``, where that is its text as written; else None."""
        if isinstance(item, Line):
            text = item.plain
            if _NOT_PLAIN.search(text.replace("\n", "")):
                return None
            if soft_wrap:
                return text + "\n"
            wrapped_text = wrapped_lines(text, self.width)
            return None if wrapped_text is None else "".join(f"{line}\n" for line in wrapped_text)
        lines_of = getattr(item, "plain_lines", None)
        lines: list[str] | None = None if lines_of is None else lines_of(self)
        if lines is None or _NOT_PLAIN.search("".join(lines)):
            return None
        if crop and any(cells(line) > self.width for line in lines):
            return None  # rich crops them
        return "".join(line + "\n" for line in lines)

    def _write(self, text: str) -> None:
        # As rich writes each print: at once, flushed (rich holds nothing back, so what it
        # printed before is out already).
        self.file.write(text)
        self.file.flush()

    def __getattr__(self, name: str) -> Any:
        # What a renderer asks of a console beyond printing (its size, options): rich's.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.rich, name)


_WORD = re.compile(r"\s*\S+\s*")


def wrapped(text: str, width: int) -> list[str] | None:
    """``text`` (one line) in lines of ``width`` cells as rich wraps it (broken before a
    word that does not fit, a word longer than the width folded every ``width`` cells, a
    line's trailing spaces past the width dropped: :func:`rich._wrap.divide_line`); None
    where rich would measure characters (not each one cell wide)."""
    if cells(text) <= width:
        return [text]
    if width < 1 or not one_cell_each(text):
        return None
    breaks = []
    used = 0
    for word in _WORD.finditer(text):
        start, end = word.span()
        length = len(word.group().rstrip())
        if width - used >= length:
            used += end - start
        elif length > width:  # cut, with its trailing spaces, every `width` cells
            for piece in range(start, end, width):
                if piece:
                    breaks.append(piece)
            used = end - piece  # its last piece begins the line
        elif used and start:
            breaks.append(start)
            used = end - start
    # A line is longer than the width by trailing spaces only: rich drops as many.
    return [text[a:b][:width] for a, b in zip([0, *breaks], [*breaks, len(text)], strict=True)]


def wrapped_lines(text: str, width: int) -> list[str] | None:
    """Each line of ``text`` wrapped as :func:`wrapped` wraps it; None where one of them is
    rich's to wrap."""
    out: list[str] = []
    for line in text.split("\n"):
        parts = wrapped(line, width)
        if parts is None:
            return None
        out += parts
    return out


class Panel:
    """rich's ``Panel(body, title=title, title_align="left")`` (a rounded box as wide as the
    console, a cell of padding inside each side), drawn line by line where the body wraps
    as :func:`wrapped` wraps it and the title fits; rich draws it otherwise."""

    def __init__(self, body: Line, title: str) -> None:
        self.body = body
        self.title = title

    def plain_lines(self, console: Any) -> list[str] | None:
        inner = console.width - 4  # the borders and the padding
        title = f" {self.title} " if self.title else ""  # rich draws no empty title
        body = wrapped_lines(self.body.plain, inner) if inner >= 1 else None
        if body is None or cells(title) > inner:
            return None
        return [
            "╭─" + title + "─" * (inner - cells(title)) + "─╮",
            *(f"│ {padded(line, inner)} │" for line in body),
            "╰" + "─" * (inner + 2) + "╯",
        ]

    def __rich__(self) -> Any:
        from rich.panel import Panel
        from rich.text import Text

        return Panel(self.body.__rich__(), title=Text(self.title), title_align="left")


class Numbered:
    """rich's grid of a number and lines beside it (``Table.grid()``: the number in a column
    ``width`` cells wide in ``style``, the lines in one as wide as the longest of them,
    folded to the rest of the console), drawn line by line where the lines wrap as
    :func:`wrapped` wraps them; rich draws it otherwise."""

    def __init__(self, number: str, lines: list[Line], width: int, style: str) -> None:
        self.number = number
        self.lines = lines
        self.width = width
        self.style = style

    def plain_lines(self, console: Any) -> list[str] | None:
        text = "\n".join(line.plain for line in self.lines)
        # rich measures the lines' column by its longest line, narrowed to the room left.
        column = min(console.width - self.width, max(map(cells, text.split("\n"))))
        if column < 1 or cells(self.number) > self.width:
            return None
        body = wrapped_lines(text, column)
        if body is None:
            return None
        number = [padded(self.number, self.width)] + [" " * self.width] * (len(body) - 1)
        return [head + padded(line, column) for head, line in zip(number, body, strict=True)]

    def __rich__(self) -> Any:
        from rich.console import Group
        from rich.table import Table

        grid = Table.grid()
        grid.add_column(width=self.width, no_wrap=True, style=self.style)
        grid.add_column(overflow="fold")
        grid.add_row(self.number, Group(*(line.__rich__() for line in self.lines)))
        return grid


def utf8(file: Any) -> bool:
    """Whether rich would draw on ``file`` with its Unicode boxes (its encoding is UTF-*)."""
    return (getattr(file, "encoding", "utf-8") or "utf-8").lower().startswith("utf")


def writes_plain(stream: Any, environ: Iterable[str] = ()) -> bool:
    """Whether a rich console on ``stream`` (not a terminal) would draw plain text as
    :class:`PlainConsole` does: no colour forced by the environment, a UTF-8 encoding, not
    in a notebook."""
    forced = {"FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS"}
    if forced.intersection(environ):
        return False
    if "ipykernel" in sys.modules:  # rich draws HTML in a notebook
        return False
    return utf8(stream)
