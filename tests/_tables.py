"""Reading tpuperf's terminal tables back from text, to check them against the data.

A table is a header (one or two lines), a rule of ``─``, then its rows. Its identifying
column is found by its header word; its cells start where the header starts (names are left
aligned).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.cells import cell_len

from tpuperf.render.fit import ELLIPSIS, compact_name, display_name


@dataclass
class Found:
    """A table found in the text: where its rule is and where its key column starts."""

    rule: int  # index of the ─ line
    key_at: int  # character offset of the key column


def tables(lines: list[str], key_header: str) -> list[Found]:
    """Every table whose header holds ``key_header`` as a word, in order."""
    found = []
    pattern = re.compile(rf"(?<!\S){re.escape(key_header)}(?!\S)")
    for i, line in enumerate(lines):
        if not line.strip() or set(line.strip()) != {"─"}:
            continue
        for header in lines[max(0, i - 2) : i][::-1]:
            match = pattern.search(header)
            if match:
                found.append(Found(i, match.start()))
                break
    return found


def key_cell(line: str, at: int) -> str:
    """The key cell of a row: from the key column's start to the next gap of two spaces."""
    return line[at:].split("  ")[0].rstrip()


def is_shortening(cell: str, full: str) -> bool:
    """``cell`` shows ``full`` whole, or pieces of it in order around ellipses (of the name
    as tables show it, or of a C++ template's compact form)."""
    name = display_name(full).strip() or "-"
    return any(_pieces_of(cell, shown) for shown in (name, compact_name(name)))


def _pieces_of(cell: str, name: str) -> bool:
    if ELLIPSIS not in cell:
        return cell == name
    position = 0
    for piece in cell.split(ELLIPSIS):
        found = name.find(piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def check_table(
    lines: list[str],
    found: Found,
    names: list[str],
    numbers: list[list[str]],
    width: int | None,
    multiline: bool = False,
) -> None:
    """The table at ``found`` has one row per name, in order, each on one line (``multiline``:
    prose may continue on lines with an empty key): the key cell is non-empty and shows the
    name (whole or shortened), every string of ``numbers[i]`` appears whole in row i, and
    no line is wider than ``width``. A row that wrapped would leave a line with an empty key
    where the next row should be."""
    rows = []
    i = found.rule + 1
    while len(rows) < len(names):
        assert i < len(lines), f"the table ends after {len(rows)} of {len(names)} rows"
        line = lines[i]
        if width is not None:
            assert cell_len(line) <= width, f"wider than {width}: {line!r}"
        if multiline and rows and not line[: found.key_at + 1].strip():
            rows[-1] += " " + line.strip()
        else:
            rows.append(line)
        i += 1
    for line, name, values in zip(rows, names, numbers, strict=True):
        cell = key_cell(line, found.key_at)
        assert cell and line[found.key_at] != " ", f"empty key in {line!r}"
        assert is_shortening(cell, name), f"{cell!r} does not show {name!r}"
        for value in values:
            assert re.search(rf"(?<![\w.,]){re.escape(value)}(?![\w.,])", line), (
                f"{value!r} not whole in {line!r}"
            )
