"""The typer application behind :func:`tpuperf.cli.main`: the commands, their help, and every
error turned into its exit code.

Command modules import only typer and :mod:`tpuperf.output` at the top; everything heavy
(numpy, pandas, the decoder, jax) is imported inside the command, so ``tpuperf --help`` stays
fast and imports none of them. A command's docstring is its help: paragraphs are reflowed to the
terminal's width, indented blocks (the Example lines) kept as written.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Iterable
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from tpuperf import __version__, output
from tpuperf._malloc import keep_freed_memory
from tpuperf.cli._common import bind_formats
from tpuperf.cli._help import format_help
from tpuperf.cli._root import COMMANDS, DEBUG_HELP, HELP, VERSION_HELP, reflow, summaries
from tpuperf.errors import TpuperfError


def _plain_flags(command: Any, ctx: Any) -> None:
    """Flags (--wide, --help, ...) take no value: no ``<bool>`` after them in the help."""
    for param in command.get_params(ctx):
        if getattr(param, "is_flag", False):
            param.metavar = ""


class _Interrupted(Exception):
    """Ctrl-C in a command, carried to :func:`main` (typer turns a ``KeyboardInterrupt`` into a
    silent exit 130)."""


class _Command(TyperCommand):
    def format_help(self, ctx: Any, formatter: Any) -> None:
        _plain_flags(self, ctx)
        formatter.write(format_help(self, ctx))

    def invoke(self, ctx: Any) -> Any:
        output.COMMAND.set(self.name or "tpuperf")  # messages name the command
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:  # click would make it exit 1
            raise _OutputClosed from exc


class _OutputClosed(Exception):
    """stdout was closed by its reader (``tpuperf ... | head -1``)."""


class _Group(TyperGroup):
    def format_help(self, ctx: Any, formatter: Any) -> None:
        _plain_flags(self, ctx)
        formatter.write(format_help(self, ctx, summaries()))

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _Interrupted from exc


app = typer.Typer(
    name="tpuperf",
    cls=_Group,
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"debug": False}


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"tpuperf {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help=DEBUG_HELP),
    version: bool = typer.Option(
        False,
        "--version",
        help=VERSION_HELP,
        callback=_print_version,
        is_eager=True,
    ),
) -> None:
    _state["debug"] = debug


_registered: dict[str, Any] = {}  # command name -> its typer CommandInfo


def _module(module_name: str) -> Any:
    """A command's module; None for a command not built yet."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        raise


def register(names: Iterable[str]) -> typer.Typer:
    """Add these commands to ``app`` (once each, kept in the order of ``COMMANDS``); returns
    ``app``. Typer builds the click command of every registered command on each run, reading
    its signature: a run registers only the command it runs."""
    for name in names:
        module = None if name in _registered else _module(dict(COMMANDS)[name])
        if module is None:
            continue
        app.command(name=name, cls=_Command, help=reflow(module.command.__doc__))(
            bind_formats(module.command)
        )
        _registered[name] = app.registered_commands[-1]
    order = [name for name, _ in COMMANDS]
    app.registered_commands.sort(key=lambda info: order.index(info.name or ""))
    return app


def _commands_to_register(args: list[str]) -> list[str]:
    """The commands a run of ``args`` needs: the one it names; none for the top-level help
    (which lists them from :func:`command_summaries`); every one otherwise (an unknown name,
    so that the error can suggest the nearest)."""
    names = [name for name, _ in COMMANDS]
    positional = [a for a in args if not a.startswith("-")]  # the root's options take no value
    if positional:
        return [positional[0]] if positional[0] in names else names
    if set(args) & {"-h", "--help"} and set(args) <= {"--debug", "-h", "--help"}:
        return []
    return names if args else []


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return (and, as a console script, exit with) the exit code.

    Every error becomes its documented exit code (2 usage, 3 gate, 4 bad input, 5 capture,
    6 cannot write the output, 1 internal) with one line on stderr; ``--debug`` adds the
    traceback, not another code. A closed stdout ends quietly with 141.
    """
    args = argv if argv is not None else sys.argv[1:]
    debug = "--debug" in args
    keep_freed_memory()
    register(_commands_to_register(args))
    try:
        result = app(args=argv, standalone_mode=False, prog_name="tpuperf")
    except TpuperfError as exc:
        _traceback(debug)
        output.say(f"error: {exc}")
        return _exit(exc.exit_code, argv)
    except typer.Exit as exc:
        return _exit(exc.exit_code, argv)
    except _OutputClosed:
        # The reader went away (`tpuperf ... | head -1`): end quietly, as a command killed by
        # SIGPIPE does (128 + 13), so `set -o pipefail` still sees that the output was cut.
        _stdout_to_devnull()
        return _exit(141, argv)
    except (typer.Abort, KeyboardInterrupt, _Interrupted):
        _traceback(debug)
        typer.echo("tpuperf: interrupted", err=True)
        return _exit(130, argv)
    except Exception as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `tpuperf` alone: the help, exit 2
            typer.echo(_click_message_text(exc))
            return _exit(2, argv)
        # Usage errors of click (or of the copy of click that typer ships): one line, as ours.
        message, exit_code = _click_message(exc), getattr(exc, "exit_code", None)
        if message is not None and isinstance(exit_code, int):
            _traceback(debug)
            output.say(f"error: {message}")
            return _exit(exit_code, argv)
        _traceback(debug)
        output.say(
            f"internal error: {type(exc).__name__}: {exc}"
            + ("" if debug else " (run with --debug for the traceback, and please report it)")
        )
        return _exit(1, argv)
    # Without standalone mode, an abort (Ctrl-C) or ctx.exit(n) comes back as a return value.
    return _exit(result if isinstance(result, int) else 0, argv)


def _click_message_text(exc: Exception) -> str:
    return str(exc.format_message()) if hasattr(exc, "format_message") else str(exc)


def _click_message(exc: Exception) -> str | None:
    """A click exception's message on one line, with the hint click would print under its
    usage block (``see 'tpuperf analyze -h'``); None for any other exception."""
    format_message = getattr(exc, "format_message", None)
    if not callable(format_message) or not callable(getattr(exc, "show", None)):
        return None
    message = " ".join(str(format_message()).split()).rstrip(".")
    message = message[:1].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        message += f"; see '{ctx.command_path} -h'"
    return message


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what is still
    buffered does not fail again (and print "Exception ignored ...") on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a file (tests capture it)
        pass


def _traceback(debug: bool) -> None:
    if debug:
        traceback.print_exc(file=sys.stderr)


def _exit(code: int, argv: list[str] | None) -> int:
    if argv is None:  # called as the console script
        sys.exit(code)
    return code
