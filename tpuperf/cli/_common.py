"""What the profile-reading commands share: the PROFILE argument and loading with notices."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from enum import Enum
from typing import TYPE_CHECKING, Any

from tpuperf.output import Format, listed

if TYPE_CHECKING:
    from tpuperf.analysis import Report
    from tpuperf.profiles import Profile

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


def no_cache_option() -> Any:
    import typer

    return typer.Option(
        False,
        "--no-cache",
        help="Decode the profile without reading or writing the cache of decoded tables.",
    )


def load_profile(
    path: str,
    host: str | None = None,
    run: str | None = None,
    run_flag: str = "--run",
    notices: bool = True,
    cache: bool = True,
) -> Any:
    """Load with a spinner (on a terminal) and the profile's notices on stderr (``notices``:
    a command whose output lists them itself, as analyze's report does, passes False).
    ``run_flag`` is the option that picks ``run`` (``diff`` has one per side): messages
    name it. ``cache``: through the cache of decoded tables (:mod:`tpuperf.cache`), which a
    damaged entry notes on stderr."""
    from tpuperf import output
    from tpuperf.errors import UsageError

    read: Callable[..., Profile]
    if cache:
        from tpuperf import cache as cache_mod

        read = functools.partial(cache_mod.load, cache=cache_mod.Cache(note=output.note))
    else:
        from tpuperf import profiles as profile_mod

        read = profile_mod.load

    def flag(message: str) -> str:
        return re.sub(r"--run\b", run_flag, message)

    try:
        with _spinner(f"reading {path}"):
            profile = read(path, host=host, run=run)
    except UsageError as exc:
        raise UsageError(flag(str(exc))) from None
    for warning in profile.warnings if notices else ():
        output.note(flag(warning))
    return profile


def _spinner(status: str) -> AbstractContextManager[Any]:
    """A spinner with ``status`` on stderr when it is a terminal; elsewhere rich would draw
    nothing, and is not imported."""
    import sys

    try:
        terminal = sys.stderr.isatty()
    except (AttributeError, ValueError, OSError):
        terminal = False
    if not terminal:
        return contextlib.nullcontext()
    from rich.text import Text

    from tpuperf import output

    # A str status is read as markup whatever the console says: a path is Text.
    return output.console(stderr=True).status(Text(status), spinner="dots")


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


def analyze_profile(profile: Profile, **options: Any) -> Report:
    """``tpuperf.analyze(profile, **options)`` (the options of analyze, report and diff),
    with each analyzer that failed said on stderr."""
    from tpuperf import output
    from tpuperf.analysis import analyze

    report = analyze(profile, **options)
    for name, error in report.errors.items():
        output.say(f"analyzer {name} failed: {error}")
    return report


def html_page(report: Report) -> str:
    """The report as one HTML page (the page's own data is computed on first use)."""
    from tpuperf.render.html_page import render_html

    return render_html(report)


# The output options, worded the same in every command.


def format_option(*formats: Format, help: str | None = None) -> Any:
    """The ``--format/-f`` option of a command offering ``formats`` (the first is the
    default when ``-o`` has no known suffix). The CLI turns the annotation ``Format | None``
    into an enum of just these formats (:func:`bind_formats`), so help and completion list
    them."""
    import typer

    text = help or f"{listed(formats)} (default: from the -o suffix, else {formats[0].value})."
    option = typer.Option(None, "--format", "-f", help=text, metavar="FORMAT", show_default=False)
    option.tpuperf_formats = tuple(formats)  # type: ignore[attr-defined]
    return option


def bind_formats(function: Callable[..., Any]) -> Callable[..., Any]:
    """Give each ``format_option`` parameter of ``function`` an enum of the formats it offers,
    so that Typer checks, lists and completes only those. Returns ``function``."""
    import inspect

    for name, parameter in inspect.signature(function).parameters.items():
        offered = getattr(parameter.default, "tpuperf_formats", None)
        if offered:
            subset = Enum(  # type: ignore[misc]
                f"{function.__module__.rsplit('.', 1)[-1].capitalize()}Format",
                {f.name: f.value for f in offered},
                type=str,
            )
            function.__annotations__[name] = subset | None
    return function


def output_option(
    help: str = "Write to FILE (a path or a URL such as gs://) instead of stdout.",
) -> Any:
    import typer

    return typer.Option(None, "--output", "-o", help=help, metavar="FILE", show_default=False)


def wide_option() -> Any:
    import typer

    return typer.Option(
        False,
        "--wide",
        help="Full names and every column, however wide (lines may wrap in the terminal).",
    )


# The profile-reading commands (info, ops, memory, tree, host): one way to declare and read
# the PROFILE argument and the options they all take.


@dataclasses.dataclass(frozen=True)
class ProfileRequest:
    """What a profile-reading command is asked beside its own options: the PROFILE, where and
    how to write (``--format``, ``-o``, ``--wide``; ``fmt`` is the format chosen from them) and
    what to read (``--host``, ``--run``, ``--no-cache``)."""

    profile: str
    fmt: Format
    output: str | None
    wide: bool
    host: str | None
    run: str | None
    no_cache: bool

    def load(self) -> Profile:
        """The profile, through the shared loader (:func:`load_profile`)."""
        loaded: Profile = load_profile(self.profile, self.host, self.run, cache=not self.no_cache)
        return loaded

    def emit(self, view: Any) -> None:
        """Write ``view`` as asked (:func:`tpuperf.output.emit`)."""
        from tpuperf import output

        output.emit(view, self.fmt, self.output, wide=self.wide)


def profile_command(
    *formats: Format, then: tuple[str, ...] = ()
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Declare a profile-reading command offering ``formats``: the decorated
    ``command(request, **own)`` takes a :class:`ProfileRequest` first and then its own options.
    Typer reads the signature of the command this returns, which is, in the order of the help:
    PROFILE, the own options, ``--format --output --wide``, the own options named in ``then``,
    ``--host --run --no-cache``."""
    import inspect

    def parameter(name: str, annotation: Any, default: Any) -> inspect.Parameter:
        return inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
        )

    def decorate(function: Callable[..., None]) -> Callable[..., None]:
        own = list(inspect.signature(function).parameters.values())[1:]  # after ``request``
        shared = {
            "profile": parameter("profile", str, profile_argument()),
            "format": parameter("format", Format | None, format_option(*formats)),
            "output": parameter("output", str | None, output_option()),
            "wide": parameter("wide", bool, wide_option()),
            "host": parameter("host", str, host_option()),
            "run": parameter("run", str, run_option()),
            "no_cache": parameter("no_cache", bool, no_cache_option()),
        }
        order = [
            shared["profile"],
            *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p.name not in then),
            shared["format"],
            shared["output"],
            shared["wide"],
            *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p.name in then),
            shared["host"],
            shared["run"],
            shared["no_cache"],
        ]

        @functools.wraps(function)
        def command(**values: Any) -> None:
            from tpuperf.output import choose_format

            given = {name: values.pop(name) for name in shared}
            output = given["output"]
            request = ProfileRequest(
                profile=given["profile"],
                fmt=choose_format(given["format"], output, formats),
                output=output,
                wide=given["wide"],
                host=given["host"],
                run=given["run"],
                no_cache=given["no_cache"],
            )
            function(request, **values)

        command.__signature__ = inspect.Signature(order, return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in order} | {"return": None}
        return command

    return decorate
