"""Running a command read directly, without typer; every error turned into its exit code.

``tpuperf info run.xplane.pb --format json`` is read against the command's declared options
(:func:`tpuperf.cli._params.parse`) and run without importing typer or click. Help, an
unknown or malformed option, a missing argument, and every command line the direct reading
does not take go to :mod:`tpuperf.cli._app`, the typer application, as before; both end in
:func:`failed` and :func:`exit_code`.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from tpuperf import output
from tpuperf._malloc import keep_freed_memory
from tpuperf.cli._params import parse
from tpuperf.cli._root import COMMANDS
from tpuperf.errors import TpuperfError


class OutputClosed(Exception):
    """stdout was closed by its reader (``tpuperf ... | head -1``)."""


class Interrupted(Exception):
    """Ctrl-C in a command, carried to :func:`main` (typer turns a ``KeyboardInterrupt`` into a
    silent exit 130)."""


def direct(args: list[str]) -> Callable[[], Any] | None:
    """``tpuperf [--debug] COMMAND ARGS`` as a call of the command, when its arguments are
    read directly (:func:`tpuperf.cli._params.parse`); None for the typer application."""
    rest = list(args)
    while rest and rest[0] == "--debug":
        rest.pop(0)
    if not rest or rest[0] not in dict(COMMANDS):
        return None
    name = rest[0]
    module = command_module(dict(COMMANDS)[name])
    if module is None:
        return None
    values = parse(module.command, rest[1:])
    if values is None:
        return None

    def command() -> Any:
        output.COMMAND.set(name)  # messages name the command
        return module.command(**values)

    return command


def run(command: Callable[[], Any], argv: list[str] | None) -> int:
    """Run ``command`` (of :func:`direct`); its exit code (as :func:`tpuperf.cli.main`)."""
    args = argv if argv is not None else sys.argv[1:]
    keep_freed_memory()
    try:
        try:
            command()
        except BrokenPipeError as exc:  # as the typer application's commands end
            raise OutputClosed from exc
    except (Exception, KeyboardInterrupt) as exc:
        return exit_code(failed(exc, "--debug" in args), argv)
    return exit_code(0, argv)


def command_module(module_name: str) -> Any:
    """A command's module; None for a command not built yet."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        raise


def failed(exc: BaseException, debug: bool) -> int:
    """The exit code of a command that raised ``exc``, said on stderr in one line (with the
    traceback under ``--debug``)."""
    if isinstance(exc, TpuperfError):
        print_traceback(debug)
        output.say(f"error: {exc}")
        return exc.exit_code
    if isinstance(exc, OutputClosed):
        # The reader went away (`tpuperf ... | head -1`): end quietly, as a command killed by
        # SIGPIPE does (128 + 13), so `set -o pipefail` still sees that the output was cut.
        stdout_to_devnull()
        return 141
    if isinstance(exc, KeyboardInterrupt | Interrupted):
        print_traceback(debug)
        sys.stderr.write("tpuperf: interrupted\n")
        sys.stderr.flush()
        return 130
    print_traceback(debug)
    output.say(
        f"internal error: {type(exc).__name__}: {exc}"
        + ("" if debug else " (run with --debug for the traceback, and please report it)")
    )
    return 1


def stdout_to_devnull() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what is still
    buffered does not fail again (and print "Exception ignored ...") on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a file (tests capture it)
        pass


def print_traceback(debug: bool) -> None:
    """Under ``--debug``, the traceback of the error being handled, on stderr."""
    if debug:
        import traceback  # for --debug only: it imports linecache and tokenize

        traceback.print_exc(file=sys.stderr)


def exit_code(code: int, argv: list[str] | None) -> int:
    """``code``, returned; as the console script (``argv`` None), the process exits with it
    (:func:`leave`)."""
    if argv is None:
        leave(code)
    return code


def leave(code: int) -> None:
    """End the process with ``code`` as an interpreter's exit does, less its teardown.

    What an exit owes others still happens, in the interpreter's order: the threads that are
    not daemons are waited for (a cache entry being written, thread pools' workers), the
    ``atexit`` handlers run (temporary folders, process pools, logging), and the standard
    streams are flushed. What is skipped is the interpreter freeing every object and module
    one by one: with a profile's tables, their strings and numpy's modules loaded, a tenth to a
    third of a second of every command, for memory the operating system takes back at once.
    """
    import atexit
    import threading

    threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter runs first
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left before the last of the output
        code = 141
    except (OSError, ValueError):  # stdout closed or gone: nothing left to say there
        pass
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)
