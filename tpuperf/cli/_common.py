"""What the profile-reading commands share: the PROFILE argument and loading with notices."""

from __future__ import annotations

import re
from typing import Any

PROFILE_ARGUMENT_HELP = (
    "A *.xplane.pb file, a run directory (plugins/profile/<run>/) or a logdir; local or gs://."
)


def profile_argument() -> Any:
    import typer

    return typer.Argument(..., metavar="PROFILE", help=PROFILE_ARGUMENT_HELP, show_default=False)


def run_option(name: str = "--run", of: str = "a logdir") -> Any:
    import typer

    return typer.Option(None, name, help=f"This run of {of} (default: the latest).")


def host_option(help: str = "Only this host of a run.") -> Any:
    import typer

    return typer.Option(None, "--host", help=help)


def load_profile(
    path: str, host: str | None = None, run: str | None = None, run_flag: str = "--run"
) -> Any:
    """Load with a spinner (on a terminal) and the profile's notices on stderr. ``run_flag``
    is the option that picks ``run`` (``diff`` has one per side): messages name it."""
    from rich.text import Text

    from tpuperf import output
    from tpuperf.errors import UsageError
    from tpuperf.profile import load

    def flag(message: str) -> str:
        return re.sub(r"--run\b", run_flag, message)

    err = output.console(stderr=True)
    try:
        # A str status is read as markup whatever the console says: a path is Text.
        with err.status(Text(f"reading {path}"), spinner="dots"):
            profile = load(path, host=host, run=run)
    except UsageError as exc:
        raise UsageError(flag(str(exc))) from None
    for warning in profile.warnings:
        output.note(flag(warning))
    return profile


# The analysis options of analyze, report and diff, worded the same in each.


def analyzer_option() -> Any:
    import typer

    return typer.Option(
        None,
        "--analyzer",
        "-a",
        help="Run only this analyzer (repeatable; see `tpuperf analyzers`).",
    )


def steps_option(of: str = "") -> Any:
    import typer

    return typer.Option(
        None,
        "--steps",
        help=f"Analyse step numbers A <= n < B{of} (A:B, either side optional).",
    )


def warmup_option() -> Any:
    import typer

    return typer.Option(
        1, "--warmup", help="Leading steps to leave out as warm-up (ignored with --steps)."
    )


def peak_options() -> tuple[Any, Any]:
    """``--peak-tflops`` and ``--peak-hbm-gbps``."""
    import typer

    return (
        typer.Option(
            None,
            "--peak-tflops",
            help="Dense bf16 peak TFLOP/s, used when the profile and chip table do not know it.",
        ),
        typer.Option(
            None,
            "--peak-hbm-gbps",
            help="HBM bandwidth in GB/s, used when the profile and chip table do not know it.",
        ),
    )
