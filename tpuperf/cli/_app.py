"""The typer application behind :func:`tpuperf.cli.main`: the commands, their help, usage
errors, and the command lines :mod:`tpuperf.cli._run` does not read directly.

Command modules declare their options with :mod:`tpuperf.cli._params` and import only it and
:mod:`tpuperf.output` at the top; everything heavy (numpy, pandas, the decoder, jax) is
imported inside the command. A command's docstring is its help: paragraphs are reflowed to
the terminal's width, indented blocks (the Example lines) kept as written.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from tpuperf import __version__, output
from tpuperf._malloc import keep_freed_memory
from tpuperf.cli._help import format_help
from tpuperf.cli._params import for_typer
from tpuperf.cli._root import COMMANDS, DEBUG_HELP, HELP, VERSION_HELP, reflow, summaries
from tpuperf.cli._run import (
    Interrupted,
    OutputClosed,
    command_module,
    exit_code,
    failed,
    print_traceback,
)


def _plain_flags(command: Any, ctx: Any) -> None:
    """Flags (--wide, --help, ...) take no value: no ``<bool>`` after them in the help."""
    for param in command.get_params(ctx):
        if getattr(param, "is_flag", False):
            param.metavar = ""


class _Command(TyperCommand):
    def format_help(self, ctx: Any, formatter: Any) -> None:
        _plain_flags(self, ctx)
        formatter.write(format_help(self, ctx))

    def invoke(self, ctx: Any) -> Any:
        output.COMMAND.set(self.name or "tpuperf")  # messages name the command
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:  # click would make it exit 1
            raise OutputClosed from exc


class _Group(TyperGroup):
    def format_help(self, ctx: Any, formatter: Any) -> None:
        _plain_flags(self, ctx)
        formatter.write(format_help(self, ctx, summaries()))

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise Interrupted from exc


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


def register(names: Iterable[str]) -> typer.Typer:
    """Add these commands to ``app`` (once each, kept in the order of ``COMMANDS``); returns
    ``app``. Typer builds the click command of every registered command on each run, reading
    its signature: a run registers only the command it runs."""
    for name in names:
        module = None if name in _registered else command_module(dict(COMMANDS)[name])
        if module is None:
            continue
        app.command(name=name, cls=_Command, help=reflow(module.command.__doc__))(
            for_typer(module.command)
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
    """Run the command line ``argv`` (default ``sys.argv[1:]``) with the typer application:
    what :func:`tpuperf.cli._run.direct` does not read directly (help, errors of usage, and
    the command lines :func:`tpuperf.cli._params.parse` leaves to typer)."""
    args = argv if argv is not None else sys.argv[1:]
    debug = "--debug" in args
    keep_freed_memory()
    register(_commands_to_register(args))
    try:
        result = app(args=argv, standalone_mode=False, prog_name="tpuperf")
    except typer.Exit as exc:
        return exit_code(exc.exit_code, argv)
    except typer.Abort:
        return exit_code(failed(KeyboardInterrupt(), debug), argv)
    except Exception as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `tpuperf` alone: the help, exit 2
            typer.echo(_click_message_text(exc))
            return exit_code(2, argv)
        # Usage errors of click (or of the copy of click that typer ships): one line, as ours.
        message, code = _click_message(exc), getattr(exc, "exit_code", None)
        if message is not None and isinstance(code, int):
            print_traceback(debug)
            output.say(f"error: {message}")
            return exit_code(code, argv)
        return exit_code(failed(exc, debug), argv)
    except KeyboardInterrupt as exc:
        return exit_code(failed(exc, debug), argv)
    # Without standalone mode, an abort (Ctrl-C) or ctx.exit(n) comes back as a return value.
    return exit_code(result if isinstance(result, int) else 0, argv)


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
