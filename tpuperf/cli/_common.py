"""Pieces the command modules share: output formats, consoles, writing results."""

from __future__ import annotations

import sys
from typing import Any

import typer

from tpuperf.errors import UsageError


def check_format(value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise UsageError(f"--format {value}: choose one of {', '.join(allowed)}")
    return value


def stdout_console(width: int | None = None) -> Any:
    """A console on stdout; 120 columns when stdout is not a terminal (unless COLUMNS says)."""
    import os

    from rich.console import Console

    if width is None and not sys.stdout.isatty():
        width = int(os.environ.get("COLUMNS", "120"))
    return Console(file=sys.stdout, width=width, soft_wrap=False)


def stderr_console() -> Any:
    from rich.console import Console

    return Console(file=sys.stderr, stderr=True)


def emit_text(text: str, output: str | None) -> None:
    """Write ``text`` to ``output`` atomically, or to stdout."""
    if output:
        from tpuperf.jsonout import write_text_atomic

        write_text_atomic(output, text)
        typer.echo(f"wrote {output}", err=True)
    else:
        sys.stdout.write(text)


def load_profile(path: str, host: str | None, run: str | None = None) -> Any:
    """Load with notices and progress on stderr."""
    from tpuperf.profile import load

    console = stderr_console()
    with console.status(f"reading {path}", spinner="dots"):
        profile = load(path, host=host, run=run)
    from rich.markup import escape

    for warning in profile.warnings:  # they quote file and host names: not markup
        console.print(f"[yellow]note:[/] {escape(warning)}", highlight=False)
    return profile


PROFILE_ARGUMENT_HELP = (
    "A *.xplane.pb file, a run directory (plugins/profile/<run>/) or a logdir; local or gs://."
)
