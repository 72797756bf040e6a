"""The ``tpuperf`` command line: one module per command, errors turned into exit codes.

This module is what the ``tpuperf`` console script imports, so it imports nothing itself:
``tpuperf --version`` is answered here, and everything else is run by :mod:`tpuperf.cli._run`
(directly, or by the typer application in :mod:`tpuperf.cli._app`; ``app``, ``COMMANDS`` and
``reflow`` are reached from here on first use).
"""

from __future__ import annotations

import os
import sys

# typing itself is not imported: `import tpuperf` and `tpuperf --version` need nothing of it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_APP_NAMES = ("app", "COMMANDS", "reflow")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return (and, as a console script, exit with) the exit code.

    Every error becomes its documented exit code (2 usage, 3 gate, 4 bad input, 5 capture,
    6 cannot write the output, 1 internal) with one line on stderr; ``--debug`` adds the
    traceback, not another code. A closed stdout ends quietly with 141.
    """
    args = argv if argv is not None else sys.argv[1:]
    # The answers that need no command line parser (typer and click take longer to import
    # than the interpreter takes to start): the version, and the list of commands (alone,
    # `tpuperf` shows it and exits 2, as a missing command does).
    if args == ["--version"]:
        from tpuperf import __version__

        return _print(f"tpuperf {__version__}\n", 0, argv)
    if args in ([], ["-h"], ["--help"]):
        from tpuperf.cli._root import page

        return _print(page(), 0 if args else 2, argv)
    # numpy's OpenBLAS starts a thread per core as it is loaded, and they spin a while: on
    # a small profile, a sixth of the CPU of the run. tpuperf does little matrix algebra (a
    # diff's bootstrap); a user's own setting is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # A plain command line is read against the command's declared options and run without
    # typer; help, usage errors and the rest go to the typer application.
    from tpuperf.cli import _run

    command = _run.direct(args)
    if command is not None:
        return _run.run(command, argv)
    from tpuperf.cli._app import main as run

    return run(argv)


def _print(text: str, code: int, argv: list[str] | None) -> int:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `tpuperf --help | head -1`: end as the other commands do
        from tpuperf.cli._run import stdout_to_devnull

        stdout_to_devnull()
        code = 141
    if argv is None:  # called as the console script
        sys.exit(code)
    return code


def __getattr__(name: str) -> Any:
    if name not in _APP_NAMES:
        raise AttributeError(f"module 'tpuperf.cli' has no attribute {name!r}")
    if name == "app":  # every command on it, as the top-level help lists them
        from tpuperf.cli import _app

        return _app.register(command for command, _ in _app.COMMANDS)
    from tpuperf.cli import _root

    return getattr(_root, name)
