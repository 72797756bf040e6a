"""The output layer: the one place where the CLI chooses a format, renders, and writes.

A command describes what it produced as a :class:`View` and hands it to :func:`emit` with the
:class:`Format` the user chose; this module picks the renderer, writes stdout or a file
(atomically), and says so on stderr. What a command needs, and all it should use:

``Format``, ``choose_format(value, output, formats)``
    Every output format is declared once, in ``Format``. A command offers its subset as its
    ``--format/-f`` option (``format_option`` in :mod:`tpuperf.cli._common`, where every
    typer option lives) and resolves the user's choice with ``choose_format``: the explicit
    one, else the ``-o`` suffix (``.json``, ``.csv``, ...; one naming a format the command
    does not offer is a usage error), else the first offered. A format that needs a file
    (parquet) without ``-o`` is a usage error, raised before any work is done.
``View``
    What a command produced, as callables run only for the format asked for: ``document``
    (json; a view with ``rows`` only is written as ``{"rows": [...]}``), ``rows`` (csv,
    parquet, ndjson: a :class:`Rows`, which may stream), ``table`` (``table(console, wide)``
    draws on a rich console), ``markdown`` (md), ``html`` (one self-contained page).
``emit(view, fmt, output, wide=False)``
    Renders ``view`` as ``fmt`` on stdout, or into ``output`` (a path or an fsspec URL such
    as ``gs://``) written whole or not at all, then ``tpuperf: wrote OUTPUT`` on stderr.
``RENDERERS``
    ``Format -> renderer(view, destination)``, one per format. Adding a format is adding a
    member to ``Format``, a renderer here, and the ``View`` field it reads.
``write_atomic(path, data)``
    The one atomic writer (defined in :mod:`tpuperf.files`, which core modules use without
    this layer): a temporary file in the target directory, fsync, rename; parent directories
    created; the file mode follows the umask, as a shell redirect does. A path that cannot be
    written is a :class:`~tpuperf.errors.CannotWrite` (exit 6), never an internal error, and
    leaves nothing behind.
``console(file=None, stderr=False)``, ``text_width()``
    The one console factory and the one width rule: a terminal is drawn at its own width and
    colours; a pipe or a file at ``$COLUMNS`` columns, else ``FILE_WIDTH`` (100), in plain
    text (``--wide`` lifts the width: full names, no column left out).
``SCHEMA_VERSION``, ``json_text(document)``
    The one version of every JSON document and row layout, and the JSON text of a document.
``say(message)``, ``note(message)``, ``wrote(path)``
    Messages on stderr, each ``tpuperf: ...``.

Tables that fit a width (identifying column kept, long names shortened in the middle,
numbers never cut) are drawn with :mod:`tpuperf.render.fit`. Only stdlib modules are imported
at the top: rich, pyarrow and fsspec are imported where they are used (typer never: it
belongs to the CLI).
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from enum import Enum
from typing import TYPE_CHECKING, Any, BinaryIO

from tpuperf import jsonout
from tpuperf._dataclasses import dataclass
from tpuperf.errors import UsageError
from tpuperf.files import local_path, path_name, write_atomic
from tpuperf.jsonout import SCHEMA_VERSION, clean

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "FILE_WIDTH",
    "RENDERERS",
    "SCHEMA_VERSION",
    "Format",
    "Rows",
    "View",
    "choose_format",
    "console",
    "emit",
    "json_text",
    "listed",
    "note",
    "say",
    "text_width",
    "write_atomic",
    "wrote",
]

# Width of a table or report written to a file or a pipe, unless $COLUMNS says otherwise.
FILE_WIDTH = 100

# Rows per Parquet row group when rows stream into a file.
_PARQUET_BATCH = 512


class Format(str, Enum):
    """Every output format of every command (each command offers a subset)."""

    table = "table"  # a rich table or report: the terminal's width, plain text in files
    json = "json"  # one JSON document with schema_version
    md = "md"  # Markdown
    csv = "csv"  # a header line, then one line per row
    parquet = "parquet"  # columns in a Parquet file (needs -o)
    ndjson = "ndjson"  # one JSON object per row and line
    html = "html"  # one self-contained HTML page

    @property
    def needs_file(self) -> bool:
        return self is Format.parquet


# File suffixes that choose a format when --format is not given.
SUFFIXES = {
    ".json": Format.json,
    ".md": Format.md,
    ".csv": Format.csv,
    ".parquet": Format.parquet,
    ".ndjson": Format.ndjson,
    ".jsonl": Format.ndjson,
    ".txt": Format.table,
    ".log": Format.table,
    ".html": Format.html,
    ".htm": Format.html,
}


def choose_format(value: Any, output: str | None, formats: Sequence[Format]) -> Format:
    """The format to write: ``value`` (one of ``formats``) when given, else the one the suffix
    of ``output`` names, else ``formats[0]`` (no suffix, ``.txt``, ``.log`` or one that names
    no format). A suffix naming a format the command does not offer (``diff -o d.parquet``)
    is a usage error, not a text table under that name. Checks that the format can be written
    there: a binary format needs ``output``; a URL needs a filesystem fsspec knows."""
    if value is not None:
        chosen = Format(getattr(value, "value", value))
        if chosen not in formats:
            offered = ", ".join(f.value for f in formats)
            raise UsageError(f"--format {chosen.value}: choose one of {offered}")
    else:
        named = SUFFIXES.get(_suffix(output)) if output else None
        if named is not None and named not in formats and named is not Format.table:
            hint = "; use -f to choose" if len(formats) > 1 else ""
            raise UsageError(f"-o {output}: {_command_name()} writes {listed(formats)}{hint}")
        chosen = named if named is not None and named in formats else formats[0]
    if chosen.needs_file and output is None:
        raise UsageError(f"--format {chosen.value} writes a file: add -o FILE.{chosen.value}")
    if output is not None and "://" in output:
        _check_url(output)
    return chosen


def _suffix(path: str) -> str:
    """The suffix of ``path``'s last name, lowercased, as pathlib's ``suffix`` finds it (none
    for ``.json`` or ``report.``)."""
    name = path_name(path)
    dot = name.rfind(".")
    return name[dot:].lower() if 0 < dot < len(name) - 1 else ""


def listed(formats: Sequence[Format]) -> str:
    names = [f.value for f in formats]
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]


# The command being run (``diff``), for messages; the CLI sets it as a command starts.
COMMAND: ContextVar[str] = ContextVar("tpuperf_command", default="this command")


def _command_name() -> str:
    return COMMAND.get()


# --------------------------------------------------------------------------- what to render


@dataclass
class Rows:
    """Rows for csv, parquet and ndjson: field names and records (a list, or an iterator
    that streams). ``arrow_schema`` makes the Parquet column types (else the first batch's):
    a function, called only when Parquet is written, so that csv and ndjson import neither
    pyarrow nor pandas."""

    fields: Sequence[str]
    records: Iterable[Mapping[str, Any]]
    arrow_schema: Callable[[], Any] | None = None

    @classmethod
    def from_table(cls, table: Any) -> Rows:
        """The rows of a :class:`tpuperf.columns.Table`, with its column types."""
        return cls(list(table), table.records(), lambda: _arrow_schema(table))


@dataclass
class View:
    """What a command produced, for each format it offers (see the module docstring)."""

    document: Callable[[], Mapping[str, Any]] | None = None
    rows: Callable[[], Rows] | None = None
    table: Callable[[Console, bool], None] | None = None
    markdown: Callable[[], str] | None = None
    html: Callable[[], str] | None = None


class Destination:
    """Where a renderer writes: stdout, or an open file (binary)."""

    def __init__(self, handle: BinaryIO | None, wide: bool = False) -> None:
        self._handle = handle
        self.wide = wide

    @property
    def is_file(self) -> bool:
        return self._handle is not None

    @property
    def is_terminal(self) -> bool:
        """Whether what is written here is read on a terminal (stdout that is one)."""
        return self._handle is None and _isatty(sys.stdout)

    @property
    def binary(self) -> BinaryIO:
        if self._handle is not None:
            return self._handle
        sys.stdout.flush()
        return sys.stdout.buffer

    def write_text(self, text: str) -> None:
        if self._handle is None:
            sys.stdout.write(text)
        else:
            self._handle.write(text.encode("utf-8"))

    @contextlib.contextmanager
    def console(self) -> Iterator[Console]:
        """A console on stdout (the terminal's width and colours), or plain text at the file
        width on the file."""
        if self._handle is None:
            yield console()
            return
        text = io.TextIOWrapper(self._handle, encoding="utf-8", newline="")  # type: ignore[arg-type]
        try:
            yield console(text, color=False)
        finally:
            text.flush()
            text.detach()


# --------------------------------------------------------------------------- renderers


def _render_table(view: View, destination: Destination) -> None:
    assert view.table is not None
    with destination.console() as out:
        view.table(out, destination.wide)


def _render_json(view: View, destination: Destination) -> None:
    if view.document is not None:
        destination.write_text(json_text(view.document()))
        return
    # A view of rows only (scan): one document ``{"schema_version": N, "rows": [...]}``,
    # written row by row as they come, the same text json_text would make of the list.
    assert view.rows is not None
    handle = destination.binary
    handle.write(json_text({"rows": []}).removesuffix("[]\n}\n").encode("utf-8") + b"[")
    first = True
    for record in view.rows().records:
        text = jsonout.dumps(clean(dict(record)))
        handle.write((("\n" if first else ",\n") + _indented(text, 4)).encode("utf-8"))
        handle.flush()
        first = False
    handle.write(b"]\n}\n" if first else b"\n  ]\n}\n")


def _indented(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line for line in text.splitlines())


def _render_markdown(view: View, destination: Destination) -> None:
    assert view.markdown is not None
    text = view.markdown()
    destination.write_text(text if text.endswith("\n") else text + "\n")


def _render_html(view: View, destination: Destination) -> None:
    assert view.html is not None
    destination.write_text(view.html())


def _render_csv(view: View, destination: Destination) -> None:
    import csv

    assert view.rows is not None
    rows = view.rows()
    handle = destination.binary
    buffer = io.StringIO()
    # csv quotes a cell holding a character of the line terminator: with "\r\n" a cell with a
    # lone carriage return is quoted too. Rows still end in "\n".
    writer = csv.writer(buffer, lineterminator="\r\n")

    def line(values: Iterable[Any]) -> None:
        writer.writerow(values)
        handle.write((buffer.getvalue()[:-2] + "\n").encode("utf-8"))
        buffer.seek(0)
        buffer.truncate()
        handle.flush()

    # Cells hold the real text (a path with an ESC byte still names its file); only on a
    # terminal, where they would be obeyed, are control characters written out.
    shown = visible if destination.is_terminal else None
    line(rows.fields)
    for record in rows.records:
        line(_csv_cell(record.get(name), shown) for name in rows.fields)


def _csv_cell(value: Any, shown: Callable[[str], str] | None = None) -> Any:
    """One CSV cell: empty for null, NaN and infinities; floats in full (repr); text that a
    spreadsheet would run as a formula made inert (:func:`csv_text_cell`), then ``shown``."""
    if type(value) not in _PLAIN_CELLS and hasattr(value, "item"):  # a numpy scalar
        value = value.item()
    if isinstance(value, str):
        text = csv_text_cell(value)
        return shown(text) if shown is not None else text
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return "" if value is None else value


# Cell values that are no numpy scalar, told by exact type (cheaper than hasattr "item").
_PLAIN_CELLS = frozenset({str, int, float, bool, type(None)})


def _render_ndjson(view: View, destination: Destination) -> None:
    assert view.rows is not None
    handle = destination.binary
    for record in view.rows().records:
        line = json.dumps(clean(dict(record)), allow_nan=False, separators=(",", ":"))
        handle.write((line + "\n").encode("utf-8"))
        handle.flush()


def _render_parquet(view: View, destination: Destination) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    assert view.rows is not None
    rows = view.rows()
    schema = rows.arrow_schema() if rows.arrow_schema is not None else None
    writer = None
    batch: list[Mapping[str, Any]] = []

    def flush() -> None:
        nonlocal schema, writer
        table = pa.Table.from_pylist([dict(r) for r in batch], schema=schema)
        if writer is None:
            schema = _with_version(table.schema)
            writer = pq.ParquetWriter(destination.binary, schema)
        writer.write_table(table.cast(schema) if table.schema != schema else table)
        batch.clear()

    try:
        for record in rows.records:
            batch.append(record)
            if len(batch) >= _PARQUET_BATCH:
                flush()
        if batch or writer is None:
            if schema is None and not batch:
                schema = pa.schema([(name, pa.null()) for name in rows.fields])
            flush()
    finally:
        if writer is not None:
            writer.close()


def _with_version(schema: Any) -> Any:
    """``schema`` with the file metadata ``tpuperf`` = ``{"schema_version": N}``."""
    metadata = dict(schema.metadata or {})
    metadata[b"tpuperf"] = json.dumps({"schema_version": SCHEMA_VERSION}).encode()
    return schema.with_metadata(metadata)


def _arrow_schema(table: Any) -> Any:
    import pyarrow as pa

    from tpuperf.columns import Strings

    fields = []
    for name in table:
        column = table[name]
        if isinstance(column, Strings):
            fields.append((name, pa.string()))
        else:
            fields.append((name, pa.from_numpy_dtype(table.array(name).dtype)))
    return pa.schema(fields)


RENDERERS: dict[Format, Callable[[View, Destination], None]] = {
    Format.table: _render_table,
    Format.json: _render_json,
    Format.md: _render_markdown,
    Format.csv: _render_csv,
    Format.parquet: _render_parquet,
    Format.ndjson: _render_ndjson,
    Format.html: _render_html,
}


def emit(view: View, fmt: Format, output: str | None = None, wide: bool = False) -> None:
    """Render ``view`` as ``fmt`` on stdout, or into ``output`` (whole or not at all)."""
    render = RENDERERS[fmt]
    if output is None:
        render(view, Destination(None, wide))
        sys.stdout.flush()
        return
    write_atomic(output, lambda handle: render(view, Destination(handle, wide)))
    wrote(output)


def json_text(document: Mapping[str, Any]) -> str:
    """The JSON text of ``document``: ``schema_version`` first, plain types, no NaN."""
    ordered = {"schema_version": SCHEMA_VERSION, **document}
    return jsonout.dumps(clean(ordered)) + "\n"


def _check_url(url: str) -> None:
    if local_path(url) is not None:
        return
    import fsspec

    try:
        fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        hint = " (install tpuperf[gcs] for gs:// paths)" if url.startswith("gs://") else ""
        raise UsageError(f"-o {url}: cannot write there: {exc}{hint}") from None


# --------------------------------------------------------------------------- consoles


def text_width() -> int:
    """The width of text that does not go to a terminal: $COLUMNS, else FILE_WIDTH."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else FILE_WIDTH


# Control characters: C0 (ESC, BEL, CR, newline, tab, ...), DEL and C1 (CSI, OSC, ...).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def visible(text: str, keep_newlines: bool = False) -> str:
    """``text`` with each control character written out (``\\x1b``, ``\\n``): shown on a
    terminal, never obeyed. Profile strings (op, host, chip names) come from whoever wrote the
    profile; an escape sequence in an op name must not clear the screen or plant a link."""

    def spelled(match: re.Match[str]) -> str:
        char = match.group()
        if keep_newlines and char == "\n":
            return char
        return _SPELLED.get(char) or f"\\x{ord(char):02x}"

    return _CONTROL.sub(spelled, text) if _CONTROL.search(text) else text


_SPELLED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}

# Characters a spreadsheet reads as the start of a formula (OWASP, "CSV injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_text_cell(text: str) -> str:
    """A text cell as CSV carries it: one starting like a formula (``=HYPERLINK(...)``,
    ``+cmd``, ``@SUM``, or a tab or carriage return) gets a leading ``'``, so a spreadsheet
    shows it as text and never runs it (OWASP's advice). Otherwise the text as it is: the
    csv module quotes what needs it, and a terminal gets :func:`visible` on top."""
    return "'" + text if text.startswith(_FORMULA_START) else text


class _Visible:
    """A renderable drawn with the control characters of its text written out (see
    :func:`visible`); rich's own control codes (cursor moves of a live display) pass."""

    def __init__(self, renderable: Any) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.segment import Segment

        for segment in console.render(self.renderable, options):
            if segment.control or not _CONTROL.search(segment.text):
                yield segment
            else:
                yield Segment(visible(segment.text, keep_newlines=True), segment.style)


class _VisibleHook:
    """Every console tpuperf draws on shows, never obeys, control characters in what it
    prints: the last line of defence behind the renderers (which write names out with
    :func:`visible` before they measure them)."""

    def process_renderables(self, renderables: list[Any]) -> list[Any]:
        return [_Visible(r) for r in renderables]


def console(
    file: Any = None,
    stderr: bool = False,
    color: bool | None = None,
    width: int | None = None,
) -> Console:
    """The console every command draws on: ``file`` (default stdout, or stderr); a terminal
    at its own width with colours, anything else at :func:`text_width` columns, plain
    unless ``color`` (or FORCE_COLOR) says otherwise. ``NO_COLOR`` is honoured. Plain text
    is drawn without rich where it is the text rich would draw
    (:class:`tpuperf.render.plain.PlainConsole`)."""
    stream = file if file is not None else (sys.stderr if stderr else sys.stdout)
    is_terminal = _isatty(stream)
    if width is None and not is_terminal:
        width = text_width()

    def drawn() -> Console:
        from rich.console import Console

        made = Console(
            file=stream,
            width=width,
            highlight=False,
            soft_wrap=False,
            stderr=stderr and file is None,
            color_system=None if color is False else "auto",
            force_terminal=True if color else None,
            markup=False,  # a path or a name may hold "[/]" or "[bold]": printed as written
        )
        return guarded(made)

    if not is_terminal and not color and width is not None:
        from tpuperf.render.plain import PlainConsole, writes_plain

        if writes_plain(stream, os.environ):
            return PlainConsole(stream, width, drawn)  # type: ignore[return-value]
    return drawn()


def guarded(drawn: Console) -> Console:
    """``drawn`` as every console tpuperf prints on: control characters shown, never obeyed,
    and a closed stdout ending quietly (its markup is off where it is made)."""
    drawn.push_render_hook(_VisibleHook())  # type: ignore[arg-type]
    drawn.on_broken_pipe = _broken_pipe  # type: ignore[method-assign]
    return drawn


def _broken_pipe() -> None:
    """A closed stdout (``tpuperf ... | head -1``) is a BrokenPipeError, which the CLI ends
    quietly, rather than rich's exit 1."""
    raise BrokenPipeError(errno.EPIPE, "the output was closed")


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


# --------------------------------------------------------------------------- messages


def say(message: str, details: Iterable[str] = ()) -> None:
    """A line on stderr, ``tpuperf: message``, and ``details`` under it, indented."""
    lines = [f"tpuperf: {message}", *(f"  {line}" for line in details)]
    sys.stderr.write("".join(visible(line) + "\n" for line in lines))
    sys.stderr.flush()


def note(message: str) -> None:
    """Something the user should know about the input: ``tpuperf: note: message``."""
    say(f"note: {message}")


def wrote(path: str | os.PathLike[str]) -> None:
    say(f"wrote {os.fspath(path)}")
