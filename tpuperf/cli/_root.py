"""The root of the command line: its commands, its options, and its help page drawn without
importing typer.

``tpuperf --help`` (and ``tpuperf`` alone) lists each command with the first paragraph of its
docstring. Importing the thirteen command modules (and what they share) takes longer than
reading their source, so this page reads the docstrings from the modules' source instead;
tests/test_startup.py checks that it is the page typer's application draws.
"""

from __future__ import annotations

import os
import re

from tpuperf import __version__
from tpuperf.cli._help import cleandoc, terminal_width
from tpuperf.cli._help import page as draw

# The commands, in the order `tpuperf --help` lists them: (name, module).
COMMANDS = [
    ("info", "tpuperf.cli.info"),
    ("ops", "tpuperf.cli.ops"),
    ("tree", "tpuperf.cli.tree"),
    ("memory", "tpuperf.cli.memory"),
    ("analyze", "tpuperf.cli.analyze"),
    ("host", "tpuperf.cli.host"),
    ("analyzers", "tpuperf.cli.analyzers"),
    ("capture", "tpuperf.cli.capture"),
    ("demo", "tpuperf.cli.demo"),
    ("scan", "tpuperf.cli.scan"),
    ("diff", "tpuperf.cli.diff"),
    ("report", "tpuperf.cli.report"),
    ("export", "tpuperf.cli.export"),
]

HELP = (
    f"tpuperf {__version__}: profile XLA workloads on TPUs and GPUs; what to fix first, "
    "and how much it buys."
)
DEBUG_HELP = "Show the traceback of an error (the exit code stays the same)."
VERSION_HELP = "Print the version and exit."
HELP_HELP = "Show this message and exit."  # click's own words for -h/--help
USAGE = "Usage: tpuperf [OPTIONS] COMMAND [ARGS]..."

# `def command(...) -> ...:` (on one line, or its parameters on lines of their own) and the
# docstring under it.
_DOCSTRING = re.compile(
    r'^def command\((?:[^\n]*|.*?^\)[^\n]*):\n[ ]+"""(.*?)"""', re.DOTALL | re.MULTILINE
)


def reflow(doc: str | None) -> str:
    """A docstring as help text: each prose paragraph on one line (the help wraps it to the
    terminal), indented blocks kept line by line, ``code`` with single backticks."""
    paragraphs = cleandoc(doc or "").split("\n\n")
    out = []
    for paragraph in paragraphs:
        paragraph = re.sub(r"``([^`]+)``", r"`\1`", paragraph)
        if paragraph.startswith(" "):  # an example: keep its lines and indentation
            out.append(paragraph)
        else:
            out.append(" ".join(line.strip() for line in paragraph.splitlines()))
    if len(out) < 2:
        return "\n\n".join(out)
    # Typer dedents what follows the first paragraph as one block, measuring the indentation
    # from its second line: a leading empty line makes it measure every line, so the indented
    # Example lines keep their indentation whichever paragraph comes first.
    return out[0] + "\n\n\n" + "\n\n".join(out[1:])


def summaries() -> list[tuple[str, str]]:
    """Each command's name and summary, read from its module's source (or, where there is
    no source to read, from the module itself); a command not built yet is left out."""
    here = os.path.dirname(__file__)
    found = []
    for name, module in COMMANDS:
        try:
            path = os.path.join(here, f"{module.rpartition('.')[2]}.py")
            with open(path, encoding="utf-8") as file:
                match = _DOCSTRING.search(file.read())
        except OSError:  # installed without sources, or not built yet
            match = None
        doc = match.group(1) if match is not None else _imported_doc(module)
        if doc is not None:
            found.append((name, reflow(doc).split("\n\n")[0]))
    return found


def _imported_doc(module: str) -> str | None:
    """The docstring of a command, imported; None when its module is not there."""
    import importlib

    try:
        return importlib.import_module(module).command.__doc__ or ""
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        raise


def page() -> str:
    """``tpuperf --help``."""
    width = terminal_width()
    options = [
        ["--debug", "", [DEBUG_HELP]],
        ["--version", "", [VERSION_HELP]],
        ["--help", "-h", [HELP_HELP]],
    ]
    # The empty columns of typer's table: the secondary (--no-...) names and the metavar.
    rows = [[long, short, "", "", "", items] for long, short, items in options]
    return draw(width, USAGE, HELP, [("Options", rows, None)], summaries())
