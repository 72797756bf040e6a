"""Tables that fit a width: what every terminal table of tpuperf is drawn with.

Each column says what it holds (:class:`Column`):

- ``key``: what names the row (an op, a profile, a chip). Never left out, never narrower than
  it needs to tell rows apart when there is room; long names are shortened in the middle
  with an ellipsis, keeping their distinctive tail (``…/Dense_3/dot_general``); C++
  template kernels are first written compactly (``Eigen: half = half(float)``, see
  :func:`compact_name`); rows that would still read the same show where they differ.
- ``text``: other names (a category, a program): shortened the same way, left out when the
  width is short.
- ``number``: formatted numbers, never cut: shown whole or left out whole.
- ``prose``: a sentence (a summary); it wraps instead of being shortened.

Rows stay on one line (prose aside). When columns are left out, a line under the table names
them. ``width=None`` (``--wide``) shows every column at its full width with full names. The
layout is computed once for all the rows, so several tables (one per device) line up.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

from tpuperf._dataclasses import dataclass
from tpuperf.output import guarded, visible
from tpuperf.render.plain import Line, PlainConsole, all_plain
from tpuperf.render.plain import cells as _cells

if TYPE_CHECKING:
    from rich.console import Console
    from rich.segment import Segment
    from rich.table import Table

ELLIPSIS = "…"
# Columns are separated by two spaces (a SIMPLE_HEAD box without edges, padding collapsed).
GAP = 2
# A key column gets at least this much when the row is wider than the width (columns are
# left out to make the room), and up to KEY_COMFORT before other columns widen.
KEY_MIN = 24
KEY_COMFORT = 40
TEXT_MIN = 12
PROSE_MIN = 24

Kind = Literal["key", "text", "number", "prose"]


@dataclass(frozen=True)
class Column:
    """One column: its header, what it holds, and how soon it is left out (higher
    ``drop`` goes first; a key column is never left out)."""

    header: str
    kind: Kind = "number"
    drop: int = 0
    min_width: int | None = None
    style: str | None = None

    @property
    def justify(self) -> Literal["left", "right"]:
        return "right" if self.kind == "number" else "left"


def display_name(name: str) -> str:
    """A name as tables show it: control characters written out (``\\x1b``; see
    :func:`tpuperf.output.visible`); a C++ kernel signature
    (``void ns::Kernel<...>(args)``) without its return type, arguments and namespaces,
    which are the same for every kernel of a library and push the distinctive part out."""
    name = visible(name)
    if not _signature(name):
        return name
    name = name.removeprefix("void ")
    depth = 0
    for i, char in enumerate(name):
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "(" and depth == 0 and i > 0:
            name = name[:i]
            break
    return re.sub(r"\b[A-Za-z_]\w*::", "", name).strip() or name


def display_names(names: Sequence[str]) -> list[str]:
    """:func:`display_name` of each of ``names``: at once where none has anything to change
    (printable ASCII, no C++ signature), as most columns of op names are."""
    if all_plain(names) and not _any_signature(names):
        return list(names)
    return [display_name(name) for name in names]


def _any_signature(names: Sequence[str]) -> bool:
    """Whether :func:`_signature` may hold for one of ``names``, read of them joined (one per
    line: where a name holds a line break, it may say so of one that is not)."""
    joined = "\n" + "\n".join(names)
    return "::" in joined or "\nvoid " in joined


def _signature(name: str) -> bool:
    """Whether ``name`` may be a C++ signature that :func:`display_name` shortens."""
    return "::" in name or name.startswith("void ")


# --------------------------------------------------------------------------- C++ templates


@dataclass(frozen=True)
class _Template:
    """One template argument (or a whole name): ``name<args>rest``; ``args`` None for a
    plain name (``half``, ``16``), ``rest`` what follows the closing ``>`` (``::type``)."""

    name: str
    args: tuple[_Template, ...] | None = None
    rest: str = ""


# Templates that only wrap their first argument, as a kernel name shows them: an Eigen
# tensor is its element type, an evaluator its expression.
_WRAPPERS = frozenset({"TensorMap", "TensorEvaluator", "TensorRef", "TensorFixedSize", "Tensor"})


def compact_name(name: str) -> str:
    """A C++ template name (as :func:`display_name` gives it) written short enough to tell
    kernels of one library apart at 80 columns; other names unchanged.

    ``const`` and integer suffixes (``2ul``) are dropped; Eigen's wrappers (``TensorMap``,
    ``Tensor``, ``TensorEvaluator``) become what they wrap; an Eigen expression is written
    as one: ``TensorAssignOp<half, TensorConversionOp<half, float>>`` is ``half =
    half(float)``, a unary op of ``scalar_right<bool, half, greater_equal<half>>`` on ``x``
    is ``greater_equal(x, c)``; ``EigenMetaKernel<expression, index>`` is ``Eigen:
    expression``. So ``EigenMetaKernel<TensorEvaluator<TensorAssignOp<TensorMap<Tensor<half,
    1, 1, long>, 16, MakePointer>, TensorConversionOp<half, TensorMap<Tensor<float const,
    1, 1, long>, 16, MakePointer> const> const> const, GpuDevice>, long>`` reads ``Eigen:
    half = half(float)``."""
    if "<" not in name:
        return name
    text = re.sub(r"\b(?:const|volatile)\b", " ", name)
    text = re.sub(r"\b(\d+)(?:ull|ul|ll|u|l)\b", r"\1", text, flags=re.IGNORECASE)
    text = re.sub(r"\s+", " ", text).strip()
    try:
        parsed, end = _parse_template(text, 0)
    except ValueError:
        return name
    if end != len(text):
        return name
    return _compact(parsed)


def _parse_template(text: str, i: int) -> tuple[_Template, int]:
    """The template argument starting at ``text[i]`` and where it ends (at ``,``, ``>`` or
    the end); ValueError when the brackets do not balance."""
    j = i
    while j < len(text) and text[j] not in "<>,":
        j += 1
    name = text[i:j].strip()
    if j == len(text) or text[j] != "<":
        return _Template(name), j
    args = []
    j += 1
    while True:
        arg, j = _parse_template(text, j)
        args.append(arg)
        if j >= len(text):
            raise ValueError("unbalanced <")
        j += 1
        if text[j - 1] == ">":
            break
    k, depth = j, 0  # what follows the closing >, raw (``::type<...>``)
    while k < len(text) and not (depth == 0 and text[k] in ",>"):
        depth += {"<": 1, ">": -1}.get(text[k], 0)
        k += 1
    return _Template(name, tuple(args), text[j:k].strip()), k


def _compact(t: _Template) -> str:
    args = t.args
    if args is None:
        return t.name
    if not t.rest:
        if t.name in _WRAPPERS:
            return _compact(args[0])
        if t.name == "EigenMetaKernel":
            return "Eigen: " + _compact(args[0])
        expression = _eigen_expression(t.name, args)
        if expression is not None:
            return expression
    inner = ", ".join(_compact(a) for a in args)
    return f"{t.name}<{inner}>{t.rest}"


def _eigen_expression(name: str, args: tuple[_Template, ...]) -> str | None:
    """An Eigen expression template (``TensorCwiseBinaryOp<F, X, Y>``) written as the
    expression it computes (``F(X, Y)``); None for other templates."""
    if not (name.startswith("Tensor") and name.endswith("Op")):
        return None
    operands = [_compact(a) for a in args[1:]]
    if name == "TensorAssignOp" and len(args) == 2:
        return f"{_compact(args[0])} = {_compact(args[1])}"
    if name == "TensorConversionOp" and len(args) == 2:
        return f"{_compact(args[0])}({operands[0]})"
    if name.startswith("TensorCwise") and args:
        functor = args[0]
        bound = {"scalar_left": 0, "bind1st_op": 0, "scalar_right": 1, "bind2nd_op": 1}
        if functor.name in bound and functor.args and len(operands) == 1:
            inner = next((a for a in functor.args if a.args is not None), functor.args[0])
            pair = ["c", operands[0]] if bound[functor.name] == 0 else [operands[0], "c"]
            return f"{_functor(inner)}({', '.join(pair)})"
        return f"{_functor(functor)}({', '.join(operands)})"
    return f"{name.removeprefix('Tensor').removesuffix('Op')}({', '.join(map(_compact, args))})"


def _functor(t: _Template) -> str:
    """A functor by its name, without its types: ``scalar_product_op<half, half>`` is
    ``product``."""
    if t.rest or any(a.args is not None for a in t.args or ()):
        return _compact(t)
    return t.name.removeprefix("scalar_").removesuffix("_op") or t.name


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells: whole when it fits, else shortened: a C++ template
    written compactly (:func:`compact_name`), then in the middle where still too long. A path
    (``a/b/c``) keeps its last components whole after ``…/``, and its first ones whole before
    it where they fit (``base/…/recompiled/host``); other names keep a third of the room for
    their start and the rest for their end (``broadcast_…add_fusion.1``)."""
    if _cells(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    if "<" in text:  # a C++ template: its compact form first (compact_name)
        text = compact_name(text)
        if _cells(text) <= width:
            return text
    if "/" in text.rstrip("/"):
        parts = text.split("/")
        first = len(parts) - 1
        while first > 1 and _cells("/".join(parts[first - 1 :])) + 2 <= width:
            first -= 1
        tail = "/".join(parts[first:])
        room = width - 2 - _cells(tail)
        if room >= 0:
            lead = ""  # the first components that fit whole (``base/…/run/host``)
            for part in parts[:first]:
                if _cells(lead) + _cells(part) + 1 > room:
                    break
                lead += part + "/"
            head = lead or (_head(text, room) if room >= 6 else "")
            return f"{head}{ELLIPSIS}/{tail}"
    keep = width - 1
    head_cells = keep // 3
    return _head(text, head_cells) + ELLIPSIS + _tail(text, keep - head_cells)


def shorten_apart(names: Sequence[str], width: int) -> list[str]:
    """:func:`shorten` each of ``names``, and where two different names would look the same
    (C++ kernels of one library share long starts and ends), show instead the part where
    the name differs from the others: ``EigenM…TensorConversionOp<half, Tens…``."""
    if _all_fit(names, width):  # nothing shortened, so no two names look the same
        return list(names)
    short = [shorten(name, width) for name in names]
    compact = {name: compact_name(name) if _cells(name) > width else name for name in names}
    seen: dict[str, set[str]] = {}
    for name, text in zip(names, short, strict=True):
        seen.setdefault(text, set()).add(name)
    for i, (name, text) in enumerate(zip(names, short, strict=True)):
        others = seen[text] - {name}
        if not others:
            continue
        # Where the compact forms differ, show it in those; else in the names themselves.
        tried = [(compact[name], {compact[o] for o in others}), (name, others)]
        for own, other in tried:
            if own in other:
                continue
            found = _path_apart(own, other, width) or _window(own, other, width)
            if found:
                short[i] = found
                break
    return short


def shorten_all(names: Sequence[str], width: int) -> list[str]:
    """:func:`shorten` of each of ``names``: at once where each fits."""
    if _all_fit(names, width):
        return list(names)
    return [shorten(name, width) for name in names]


def _all_fit(names: Sequence[str], width: int) -> bool:
    """Whether each of ``names`` is printable ASCII of at most ``width`` characters, so that
    :func:`shorten` leaves it as it is."""
    return all_plain(names) and max(map(len, names), default=0) <= width


def _path_apart(name: str, others: set[str], width: int) -> str | None:
    """A path shortened to show the component where it differs from ``others`` and as many
    of its last components as fit: ``base/…/recompiled/tpu-host-0`` beside
    ``new/…/recompiled/tpu-host-0``. None when it is no path, or differs only in its last
    component (which :func:`shorten` keeps), or that does not fit."""
    parts = name.split("/")
    if len(parts) < 2:
        return None
    first = max(_common_parts(parts, other.split("/")) for other in others)
    if first >= len(parts) - 1:
        return None
    lead = ("…/" if first > 0 else "") + parts[first]
    rest = parts[first + 1 :]
    for keep in range(len(rest), 0, -1):
        text = lead + ("/" if keep == len(rest) else "/…/") + "/".join(rest[-keep:])
        if _cells(text) <= width:
            return text
    return None


def _common_parts(a: list[str], b: list[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _window(name: str, others: set[str], width: int) -> str | None:
    """``name`` shortened to show where it differs from ``others``; None when that does not
    help (the difference is in its first cells already, or the name has wide characters)."""
    if not name.isascii():
        return None
    differs = max(_common_prefix(name, other) for other in others)
    head = min(6, max(0, (width - 2) // 4))
    start = max(head, differs - 3)
    room = width - head - 1
    if start <= head or room < 4:
        return None
    if start + room >= len(name):
        start = max(start - (start + room - len(name)), head + 1)
        return name[:head] + ELLIPSIS + name[start:]
    return name[:head] + ELLIPSIS + name[start : start + room - 1] + ELLIPSIS


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _head(text: str, cells: int) -> str:
    out, used = [], 0
    for char in text:
        used += _cells(char)
        if used > cells:
            break
        out.append(char)
    return "".join(out)


def _tail(text: str, cells: int) -> str:
    return _head(text[::-1], cells)[::-1]


@dataclass
class Fit:
    """The layout of columns over some rows at a width: which columns show, how wide."""

    columns: Sequence[Column]
    widths: list[int | None]  # None: left out

    @property
    def hidden(self) -> list[str]:
        return [c.header for c, w in zip(self.columns, self.widths, strict=True) if w is None]

    @property
    def total_width(self) -> int:
        shown = [w for w in self.widths if w is not None]
        return sum(shown) + GAP * (len(shown) - 1)

    def table(
        self,
        rows: Sequence[Sequence[str]],
        title: str | None = None,
        styles: Sequence[str | None] | None = None,
    ) -> Table:
        """A rich table of ``rows`` (cells as strings, one per column) in this layout,
        each row in its style from ``styles`` (a colour, ``dim``), if given."""
        from rich import box
        from rich.table import Table
        from rich.text import Text

        table = Table(
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
            header_style="bold",
            title=Text(title, style="bold") if title else None,
            title_justify="left",
        )
        for column, width in zip(self.columns, self.widths, strict=True):
            if width is None:
                continue
            table.add_column(
                Text(_header(column.header, width)),
                justify=column.justify,
                width=width,
                min_width=width,
                max_width=width,
                no_wrap=column.kind != "prose",
                overflow="fold" if column.kind == "prose" else "ellipsis",
                style=column.style,
            )
        texts = [cells for _, _, cells in self.shown_cells(rows)]
        for i, row in enumerate(zip(*texts, strict=True)):
            table.add_row(*(Text(cell) for cell in row), style=styles[i] if styles else None)
        return table

    def shown_cells(self, rows: Sequence[Sequence[str]]) -> list[tuple[Column, int, list[str]]]:
        """Each column shown in this layout, its width, and its cells as they are drawn:
        names shortened to the width (keys apart from each other), numbers as given."""
        return [
            (
                column,
                width,
                shorten_apart(display_names([row[i] for row in rows]), width)
                if column.kind == "key"
                else shorten_all(display_names([row[i] for row in rows]), width)
                if column.kind == "text"
                else [row[i] for row in rows],
            )
            for i, (column, width) in enumerate(zip(self.columns, self.widths, strict=True))
            if width is not None
        ]

    def print(
        self,
        console: Console,
        rows: Sequence[Sequence[str]],
        title: str | None = None,
        note_hidden: bool = True,
        styles: Sequence[str | None] | None = None,
    ) -> None:
        """Print the table of ``rows`` (and, when columns are left out, a line naming them);
        ``styles``: one per row, as :meth:`table` takes them."""
        if title:  # a line of its own: a table's title would be padded to the table's width
            console.print(Line(title, style="bold"))
        table = _Lines.of(self, rows, styles) or self.table(rows, styles=styles)
        # Its lines are as wide as the layout (crop: rich would measure each line again).
        if self.total_width > console.width:  # --wide: let the terminal wrap long lines
            wider_console(console, self.total_width).print(table, crop=False)
        else:
            console.print(table, crop=False)
        if note_hidden:
            self.print_hidden(console)

    def print_hidden(self, console: Console) -> None:
        if self.hidden:
            console.print(Line(f"(--wide shows {', '.join(self.hidden)})", style="dim"))


class _Lines:
    """A table of :meth:`Fit.table`'s layout drawn line by line: the segments rich's ``Table``
    draws for it (each cell justified to its width in its style, the padding after it, the
    divider; the rule under the header), made directly. rich lays out each cell of a table
    on its own (about a millisecond a row: seconds for the thousands of rows of ``tpuperf
    ops``); here the layout is already known. Only for tables whose cells each fit their
    width on one line, without tabs; others are drawn by rich (:meth:`of` says which)."""

    def __init__(
        self,
        widths: list[int],
        justify: list[Literal["left", "right"]],
        header: list[str],
        rows: list[list[str]],
        styles: Sequence[str | None] | None,
    ) -> None:
        self.widths = widths
        self.justify = justify
        self.header = header
        self.rows = rows
        self.styles = styles

    @classmethod
    def of(
        cls, layout: Fit, rows: Sequence[Sequence[str]], styles: Sequence[str | None] | None
    ) -> _Lines | None:
        """The lines of ``layout`` over ``rows``; None where only rich's table draws them
        the same (a prose column wraps, a cell is wider than its column or holds a tab or a
        line break)."""
        if any(
            column.kind == "prose" or column.style
            for column, width in zip(layout.columns, layout.widths, strict=True)
            if width is not None
        ):
            return None
        shown = layout.shown_cells(rows)
        texts = [cells for _, _, cells in shown]
        header = [_header(column.header, width) for column, width, _ in shown]
        widths = [width for _, width, _ in shown]
        justify = [column.justify for column, _, _ in shown]
        cells = []  # each column's cells justified to its width
        for width, right, values in zip(widths, justify, texts, strict=True):
            column_cells = _justified_all(values, width, right == "right")
            if column_cells is None:
                return None
            cells.append(column_cells)
        lines = [head.split("\n") for head in header]
        for width, right, head in zip(widths, justify, lines, strict=True):
            if None in (justified(line, width, right == "right") for line in head):
                return None
        body = [list(row) for row in zip(*cells, strict=True)] if cells else []
        return cls(widths, justify, header, body, styles)

    def plain_lines(self, console: Any) -> list[str] | None:
        """The lines as rich draws them where no style is drawn and boxes are Unicode
        (:class:`tpuperf.render.plain.PlainConsole`): the header's lines, the rule under it
        (``─``, rich's SIMPLE_HEAD), the rows; columns apart by two spaces."""
        if console.color_system is not None:
            return None
        padded = [width + 1 for width in self.widths[:-1]] + self.widths[-1:]
        last = len(self.widths) - 1
        header = [text.split("\n") for text in self.header]
        height = max(len(lines) for lines in header)
        lines = []
        for line_no in range(height):
            parts = []
            for i, cell_lines in enumerate(header):
                top = height - len(cell_lines)  # blank lines above: aligned to the bottom
                if line_no < top:
                    parts.append(" " * padded[i])
                else:
                    text = justified(cell_lines[line_no - top], self.widths[i], self._right(i))
                    parts.append((text or "") + (" " if i < last else ""))
                if i < last:
                    parts.append(" ")
            lines.append("".join(parts))
        lines.append("─" * (sum(padded) + last))
        lines += ["  ".join(row) for row in self.rows]
        return lines

    def __rich_console__(self, console: Console, options: Any) -> Iterator[Segment]:
        from rich.segment import Segment

        new_line = Segment.line()
        plain = console.color_system is None  # no style is drawn: one segment per line
        for line in self._lines(console, options):
            if isinstance(line, str):
                yield Segment(line)
            elif plain:
                yield Segment("".join(segment.text for segment in line))
            else:
                yield from line
            yield new_line

    def _lines(self, console: Console, options: Any) -> Iterator[list[Segment] | str]:
        """Each line as rich's table draws it: its segments, or where no style is drawn
        (``console.color_system`` None) a body line as its text."""
        # As rich's Table with box SIMPLE_HEAD, no edge, padding (0, 1) collapsed and not at
        # the edges: a column's cells are its width wide plus one space of padding in the
        # cell's style (none after the last column), then the box's divider, unstyled. The
        # header is bold and aligned to the bottom of its lines.
        from rich import box
        from rich.segment import Segment
        from rich.style import Style

        drawn_box = box.SIMPLE_HEAD.substitute(options, safe=console.safe_box)
        padded = [width + 1 for width in self.widths[:-1]] + self.widths[-1:]
        last = len(self.widths) - 1
        bold = console.get_style("bold") + console.get_style("")
        header = [text.split("\n") for text in self.header]
        height = max(len(lines) for lines in header)
        divider = Segment(drawn_box.head_vertical, Style.null())
        for line_no in range(height):
            line: list[Segment] = []
            for i, lines in enumerate(header):
                top = height - len(lines)  # blank lines above: aligned to the bottom
                if line_no < top:
                    line.append(Segment(" " * padded[i], bold))
                else:
                    text = justified(lines[line_no - top], self.widths[i], self._right(i))
                    line.append(Segment(text or "", bold))
                    if i < last:
                        line.append(Segment(" ", bold))
                if i < last:
                    line.append(divider)
            yield line
        yield [Segment(drawn_box.get_row(padded, "head", edge=False), Style.null())]
        null = console.get_style("")
        row_styles: dict[str | None, Style] = {}
        for n, row in enumerate(self.rows):
            vertical = (
                drawn_box.foot_vertical if n == len(self.rows) - 1 else drawn_box.mid_vertical
            )
            if console.color_system is None:
                yield (" " + vertical).join(row)
                continue
            name = self.styles[n] if self.styles else None
            if name not in row_styles:
                row_styles[name] = console.get_style(name or "")
            row_style = row_styles[name]
            style = null + row_style
            divider = Segment(vertical, row_style.background_style + Style.null())
            line = []
            for i, value in enumerate(row):
                line.append(Segment(value, style))
                if i < last:
                    line += (Segment(" ", style), divider)
            yield line

    def _right(self, column: int) -> bool:
        return self.justify[column] == "right"


def justified(text: str, width: int, right: bool) -> str | None:
    """``text`` justified to ``width`` cells as rich justifies a cell (right: without its
    trailing space); None where rich's table draws it otherwise (wider than the width, or
    holding a tab or a line break)."""
    if "\t" in text or "\n" in text:
        return None
    if right:
        text = text.rstrip()
    cells = _cells(text)
    if cells > width:
        return None
    return " " * (width - cells) + text if right else text + " " * (width - cells)


def _justified_all(texts: list[str], width: int, right: bool) -> list[str] | None:
    """:func:`justified` of each of ``texts``; None where one of them is None. Printable
    ASCII (:func:`all_plain`: a cell a character, no tab or line break) is justified by
    str.rjust and str.ljust, which pad the same spaces."""
    if not all_plain(texts):
        each = [justified(text, width, right) for text in texts]
        return None if None in each else each  # type: ignore[return-value]
    if right:
        texts = [text.rstrip() for text in texts]
    if max(map(len, texts), default=0) > width:
        return None
    return [text.rjust(width) for text in texts] if right else [t.ljust(width) for t in texts]


def wider_console(console: Console, width: int) -> Console:
    """A console like ``console`` on the same file, but ``width`` wide (rich never prints a
    renderable wider than its console)."""
    if isinstance(console, PlainConsole):  # plain too; rich's wider console on first need
        plain = console
        return PlainConsole(plain.file, width, lambda: wider_console(plain.rich, width))  # type: ignore[return-value]
    from rich.console import Console

    wider = Console(
        file=console.file,
        width=width,
        color_system=console.color_system,  # type: ignore[arg-type]
        force_terminal=console.is_terminal,
        no_color=console.no_color,
        highlight=False,
        markup=False,
    )
    return guarded(wider)


def fit(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None) -> Fit:
    """Lay ``columns`` out for ``rows`` in ``width`` cells (``None``: every column at its full
    width, names whole).

    When the columns do not all fit at their narrowest, they are left out whole: first those
    that tell little (:func:`_low_value`), then by their ``drop`` order. The room left goes
    to number headers (so they take one line), then the key up to KEY_COMFORT, then the
    other names, then the key's full width. When that still squeezes a column, the columns
    that tell little are left out too."""
    names = [
        display_names([r[i] for r in rows]) if c.kind in ("key", "text") else [r[i] for r in rows]
        for i, c in enumerate(columns)
    ]
    widest = [max(map(len if all_plain(values) else _cells, values), default=0) for values in names]
    natural = [max(_header_width(c.header), w) for c, w in zip(columns, widest, strict=True)]
    if width is None:
        return Fit(columns, list(natural))
    need = [_need(c, n, w) for c, n, w in zip(columns, natural, widest, strict=True)]
    low = _low_value(columns, names)
    left_out: set[int] = set()
    widths = _layout(columns, need, natural, low, width, left_out)
    squeezed = any(w is not None and w < n for w, n in zip(widths, natural, strict=True))
    if squeezed and any(low):
        # Columns that tell little give their room to those that were squeezed.
        left_out = {i for i, b in enumerate(low) if b}
        widths = _layout(columns, need, natural, low, width, left_out)
    while True:
        # A shortened name outranks the columns that are left out before it.
        short = [
            columns[i].drop
            for i, w in enumerate(widths)
            if w is not None and columns[i].kind == "text" and w < natural[i]
        ]
        later = [
            i
            for i, w in enumerate(widths)
            if w is not None and columns[i].kind != "key" and short and columns[i].drop > min(short)
        ]
        if not later:
            return Fit(columns, widths)
        left_out.add(max(later, key=lambda i: (columns[i].drop, i)))
        widths = _layout(columns, need, natural, low, width, left_out)


def _low_value(columns: Sequence[Column], names: list[list[str]]) -> list[bool]:
    """Columns that tell little: nothing in them (every cell ``-``), one name in every row,
    or the key's own name in most rows (a GPU kernel's category is often its name)."""
    keys = next((names[i] for i, c in enumerate(columns) if c.kind == "key"), None)
    low = []
    for column, values in zip(columns, names, strict=True):
        blank = all(v.strip() in ("", "-") for v in values)
        text = column.kind == "text" and len(values) > 1
        constant = text and len(set(values)) == 1
        copies = text and keys is not None and 2 * sum(map(str.__eq__, values, keys)) >= len(values)
        low.append(column.kind != "key" and (blank or constant or copies))
    return low


def _layout(
    columns: Sequence[Column],
    need: list[int],
    natural: list[int],
    low: list[bool],
    width: int,
    left_out: set[int],
) -> list[int | None]:
    shown = [i for i in range(len(columns)) if i not in left_out]

    def used() -> int:
        return sum(need[i] for i in shown) + GAP * (len(shown) - 1)

    droppable = sorted(
        (i for i in shown if columns[i].kind != "key"),
        key=lambda i: (not low[i], -columns[i].drop, -i),
    )
    for i in droppable:
        if used() <= width:
            break
        shown.remove(i)
    widths: list[int | None] = [need[i] if i in shown else None for i in range(len(columns))]
    spare = width - used()
    for i in shown:  # a key wider than the whole width (a very narrow terminal) shrinks
        if columns[i].kind == "key" and spare < 0:
            widths[i] = max(1, need[i] + spare)
            spare = 0

    def grow(i: int, upto: int) -> None:
        nonlocal spare
        current = widths[i]
        if current is None or spare <= 0 or current >= upto:
            return
        extra = min(spare, upto - current)
        widths[i] = current + extra
        spare -= extra

    kinds = [c.kind for c in columns]
    for i in shown:
        if kinds[i] == "number":
            grow(i, natural[i])
    for i in shown:
        if kinds[i] == "key":
            grow(i, min(natural[i], KEY_COMFORT))
    for i in sorted(shown, key=lambda i: columns[i].drop):
        if kinds[i] == "text":
            grow(i, natural[i])
    for i in shown:
        if kinds[i] in ("key", "prose"):
            grow(i, natural[i])
    return widths


def _need(column: Column, natural: int, widest: int) -> int:
    """The narrowest a column may be: numbers whole (their header may take two lines),
    names down to a minimum (``widest``: its widest cell)."""
    if column.kind == "number":
        words = max((_cells(w) for w in column.header.split()), default=0)
        return max(words, widest)
    floor = column.min_width or {"key": KEY_MIN, "text": TEXT_MIN, "prose": PROSE_MIN}[column.kind]
    return min(natural, floor)


def _header_width(header: str) -> int:
    return max(_cells(line) for line in header.split("\n"))


def _header(header: str, width: int) -> str:
    """``header`` in lines of at most ``width`` cells: wrapped between words, a word longer
    than the width shortened."""
    lines: list[str] = []
    for word in header.split():
        if lines and _cells(lines[-1]) + 1 + _cells(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "\n".join(shorten(line, width) for line in lines) or header


def cells(values: Sequence[Any]) -> list[str]:
    """Cells as strings (None as ``-``)."""
    return ["-" if v is None else str(v) for v in values]
