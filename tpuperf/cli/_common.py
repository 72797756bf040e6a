"""What the profile-reading commands share: the PROFILE argument and loading with notices."""

from __future__ import annotations

from typing import Any

PROFILE_ARGUMENT_HELP = (
    "A *.xplane.pb file, a run directory (plugins/profile/<run>/) or a logdir; local or gs://."
)


def profile_argument() -> Any:
    import typer

    return typer.Argument(..., metavar="PROFILE", help=PROFILE_ARGUMENT_HELP, show_default=False)


def load_profile(path: str, host: str | None = None, run: str | None = None) -> Any:
    """Load with a spinner (on a terminal) and the profile's notices on stderr."""
    from tpuperf import output
    from tpuperf.profile import load

    err = output.console(stderr=True)
    with err.status(f"reading {path}", spinner="dots"):
        profile = load(path, host=host, run=run)
    for warning in profile.warnings:
        output.note(warning)
    return profile
