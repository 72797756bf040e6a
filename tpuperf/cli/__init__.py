"""The ``tpuperf`` command line: one module per command, errors turned into exit codes here.

Command modules import only typer at the top; everything heavy (pandas, the
decoder, jax) is imported inside the command, so ``tpuperf --help`` stays fast
and imports none of jax, xprof, ray or gcsfs.
"""

from __future__ import annotations

import importlib
import sys

import typer

from tpuperf.errors import TpuperfError

# The commands, in the order `tpuperf --help` lists them: (name, module).
COMMANDS = [
    ("info", "tpuperf.cli.info"),
    ("ops", "tpuperf.cli.ops"),
    ("analyze", "tpuperf.cli.analyze"),
    ("analyzers", "tpuperf.cli.analyzers"),
    ("capture", "tpuperf.cli.capture"),
    ("demo", "tpuperf.cli.demo"),
    ("scan", "tpuperf.cli.scan"),
    ("report", "tpuperf.cli.report"),
    ("export", "tpuperf.cli.export"),
]

app = typer.Typer(
    name="tpuperf",
    help="Profile XLA workloads on TPUs and GPUs: what to fix first, and how much it buys.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"debug": False}


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
) -> None:
    _state["debug"] = debug


def _register() -> None:
    for name, module_name in COMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # a command not built yet
                continue
            raise
        app.command(name=name)(module.command)


_register()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return (and, as a console script, exit with) the exit code."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        result = app(args=argv, standalone_mode=False)
    except TpuperfError as exc:
        if debug:
            raise
        typer.echo(f"tpuperf: error: {exc}", err=True)
        return _exit(exc.exit_code, argv)
    except typer.Exit as exc:
        return _exit(exc.exit_code, argv)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("tpuperf: interrupted", err=True)
        return _exit(130, argv)
    except Exception as exc:
        # Usage errors of click (or of the copy of click that typer ships) show themselves.
        show, exit_code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(exit_code, int):
            show()
            return _exit(exit_code, argv)
        if debug:
            raise
        typer.echo(
            f"tpuperf: internal error: {type(exc).__name__}: {exc} (run with --debug for the "
            "traceback, and please report it)",
            err=True,
        )
        return _exit(1, argv)
    # Without standalone mode, an abort (Ctrl-C) or ctx.exit(n) comes back as a return value.
    return _exit(result if isinstance(result, int) else 0, argv)


def _exit(code: int, argv: list[str] | None) -> int:
    if argv is None:  # called as the console script
        sys.exit(code)
    return code
