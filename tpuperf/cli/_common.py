"""What the profile-reading commands share: the PROFILE argument and loading with notices."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from tpuperf._dataclasses import dataclass
from tpuperf.cli._params import Argument, Option
from tpuperf.output import Format, listed

if TYPE_CHECKING:
    from tpuperf.analysis import Report
    from tpuperf.cache import Cache
    from tpuperf.config import AnalysisConfig
    from tpuperf.profiles import Profile

PROFILE_ARGUMENT_HELP = (
    "A *.xplane.pb file, a run directory (plugins/profile/<run>/) or a logdir; local or gs://."
)


def profile_argument() -> Any:
    return Argument(..., metavar="PROFILE", help=PROFILE_ARGUMENT_HELP, show_default=False)


def run_option(name: str = "--run", of: str = "a logdir") -> Any:
    return Option(None, name, help=f"This run of {of} (default: the latest).")


def host_option(help: str = "Only this host of a run.") -> Any:
    return Option(None, "--host", help=help)


def no_cache_option() -> Any:
    return Option(
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
    write_behind: bool = False,
    store: Cache | None = None,
) -> Any:
    """Load with a spinner (on a terminal) and the profile's notices on stderr (``notices``:
    a command whose output lists them itself, as analyze's report does, passes False).
    ``run_flag`` is the option that picks ``run`` (``diff`` has one per side): messages
    name it. ``cache``: through the cache of decoded tables (:mod:`tpuperf.cache`), which a
    damaged entry notes on stderr. ``write_behind``: the tables decoded are stored while the
    command goes on, and :func:`finish_writes` waits for them (the commands of
    :func:`profile_command` and :func:`analysis_command` call it as they end). ``store``:
    the cache to read through (by default one of its own, from the environment)."""
    from tpuperf import output
    from tpuperf.errors import UsageError

    read: Callable[..., Profile]
    if cache:
        from tpuperf import cache as cache_mod

        if store is None:
            store = cache_mod.Cache(note=output.note, write_behind=write_behind)
        if write_behind:
            _WRITING.append(store)
        read = functools.partial(cache_mod.load, cache=store)
    else:
        from tpuperf import profiles as profile_mod

        read = profile_mod.load

    try:
        with _spinner(f"reading {path}"):
            profile = read(path, host=host, run=run)
    except UsageError as exc:
        raise UsageError(named_run_flag(str(exc), run_flag)) from None
    for warning in profile.warnings if notices else ():
        output.note(named_run_flag(warning, run_flag))
    return profile


def named_run_flag(message: str, run_flag: str) -> str:
    """A message of loading a profile, naming the option that picks its run (``diff`` has
    one per side) rather than ``--run``."""
    return re.sub(r"--run\b", run_flag, message)


# The caches of :func:`load_profile` storing entries in the background, for finish_writes.
_WRITING: list[Cache] = []

# The reports analysed (not read back) this command, to store as it ends: (cache, key,
# report, whether it is kept with its page's data, the profile's notes).
_ANALYSED: list[tuple[Cache, str, Report, bool, list[str]]] = []

# Other results made this command (a diff's comparison), to store as it ends: (cache, key,
# the values Cache.put_report keeps).
_KEPT: list[tuple[Cache, str, dict[str, Any]]] = []


def keep(store: Cache, key: str, values: dict[str, Any]) -> None:
    """Store ``values`` under ``key`` as the command ends (:func:`finish_writes`), once its
    output is written; not where it fails."""
    _KEPT.append((store, key, values))


def finish_writes(store_reports: bool = True) -> None:
    """Wait for the cache entries :func:`load_profile` stores in the background, and store
    the reports :meth:`AnalysisRequest.analyze` and :func:`run_analysis` made and what
    :func:`keep` was given (once the output is written, so that the page's data HTML
    computed is kept with them; not for a command that failed)."""
    while _ANALYSED:
        store, key, report, page, warnings = _ANALYSED.pop()
        if store_reports:
            if page:
                report.compute_page()  # (what the page did not draw)
            store.put_report(key, {"report": report.stored(), "warnings": warnings})
    while _KEPT:
        store, key, values = _KEPT.pop()
        if store_reports:
            store.put_report(key, values)
    while _WRITING:
        _WRITING.pop().wait()


@contextlib.contextmanager
def writes_finished() -> Iterator[None]:
    """A command's work, then :func:`finish_writes` once its output is written: the cache
    entries it decoded may end, and the reports it made are kept; none is where it failed
    (its own error is the one said)."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            finish_writes(store_reports=False)
        raise
    finish_writes()


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
    return Option(
        None,
        "--analyzer",
        "-a",
        help="Run only this analyzer (repeatable; see `tpuperf analyzers`).",
    )


def steps_option(of: str = "") -> Any:
    return Option(
        None,
        "--steps",
        help=f"Analyse step numbers A <= n < B{of} (A:B, either side optional).",
    )


def warmup_option() -> Any:
    return Option(
        1, "--warmup", help="Leading steps to leave out as warm-up (ignored with --steps)."
    )


def peak_options() -> tuple[Any, Any]:
    """``--peak-tflops`` and ``--peak-hbm-gbps``."""
    return (
        Option(
            None,
            "--peak-tflops",
            help="Dense bf16 peak TFLOP/s, used when the profile and chip table do not know it.",
        ),
        Option(
            None,
            "--peak-hbm-gbps",
            help="HBM bandwidth in GB/s, used when the profile and chip table do not know it.",
        ),
    )


def analyze_profile(profile: Profile, **options: Any) -> Report:
    """``tpuperf.analyze(profile, **options)`` (the options of analyze, report and diff),
    with each analyzer that failed said on stderr."""
    from tpuperf.analysis import analyze

    report = analyze(profile, **options)
    _say_errors(report)
    return report


def _say_errors(report: Report) -> None:
    """Each analyzer that failed, on stderr."""
    from tpuperf import output

    for name, error in report.errors.items():
        output.say(f"analyzer {name} failed: {error}")


def html_page(report: Report) -> str:
    """The report as one HTML page (the page's own data is computed on first use)."""
    from tpuperf.render.html_page import render_html

    return render_html(report)


# The output options, worded the same in every command.


def format_option(*formats: Format, help: str | None = None) -> Any:
    """The ``--format/-f`` option of a command offering ``formats`` (the first is the
    default when ``-o`` has no known suffix). The CLI turns the annotation ``Format | None``
    into an enum of just these formats (:func:`tpuperf.cli._params.for_typer`), so help and
    completion list them."""
    text = help or f"{listed(formats)} (default: from the -o suffix, else {formats[0].value})."
    option = Option(None, "--format", "-f", help=text, metavar="FORMAT", show_default=False)
    return dataclasses.replace(option, formats=tuple(formats))


def output_option(
    help: str = "Write to FILE (a path or a URL such as gs://) instead of stdout.",
) -> Any:
    return Option(None, "--output", "-o", help=help, metavar="FILE", show_default=False)


def wide_option() -> Any:
    return Option(
        False,
        "--wide",
        help="Full names and every column, however wide (lines may wrap in the terminal).",
    )


# The commands that read a profile (info, ops, memory, tree, host; analyze and report): one
# way to declare and read the PROFILE argument and the options they all take.


@dataclass(frozen=True)
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
        loaded: Profile = load_profile(
            self.profile, self.host, self.run, cache=not self.no_cache, write_behind=True
        )
        return loaded

    def emit(self, view: Any) -> None:
        """Write ``view`` as asked (:func:`tpuperf.output.emit`)."""
        from tpuperf import output

        output.emit(view, self.fmt, self.output, wide=self.wide)


@dataclass(frozen=True)
class AnalysisRequest(ProfileRequest):
    """A :class:`ProfileRequest` of analyze and report, with the analysis options
    (``--analyzer``, ``--steps``, ``--warmup``, the peaks); ``--host`` picks the host in the
    analysis, not at load."""

    analyzers: list[str] | None
    steps: str | None
    warmup: int
    peak_tflops: float | None
    peak_hbm_gbps: float | None

    def analyze(self, top: int, notices: bool = True) -> Report:
        """The report (:func:`analyze_profile`) listing ``top`` top ops; ``notices``: the
        profile's notes on stderr too (see :func:`load_profile`).

        Through the cache, a report of the same files, read the same way, under the same
        options (``top`` aside, up to RANKED_OPS: the entry ranks that many ops) and tpuperf,
        is read back instead of analysed again; one analysed is stored as the command ends
        (:func:`finish_writes`). HTML draws data the other formats do not compute (the
        page's): a report is kept with it where HTML drew it; HTML reads back such a one, or
        else one without it, and then builds only the timeline that data is made of."""
        from tpuperf import output

        if self.no_cache:
            loaded = load_profile(self.profile, None, self.run, notices=notices, cache=False)
            return analyze_profile(loaded, **self._options(top))
        from tpuperf import cache as cache_mod

        store = cache_mod.Cache(note=output.note, write_behind=True)
        options = self._options(top)
        page = self.fmt is Format.html
        # The files' content keys, where they are known without reading the files: a report
        # read back then needs none of their tables.
        try:
            known = cache_mod.known_files(self.profile, None, self.run, store)
        except Exception:  # (reading the profile says what is wrong with it)
            known = None
        keys = None if known is None else _report_keys(self.profile, *known, options)
        report = None if keys is None else _read_back(store, keys, page, top, notices)
        if report is not None:
            return report
        loaded = load_profile(
            self.profile,
            None,
            self.run,
            notices=notices,
            cache=True,
            write_behind=True,
            store=store,
        )
        if keys is None:
            keys = _report_keys(self.profile, store.last_loaded, store.last_notices, options)
            report = None if keys is None else _read_back(store, keys, page, top, False)
            if report is not None:
                return report
        if page and keys is not None:
            # An analysis kept without the page's data: the page's data needs the timeline
            # alone, not the analyzers.
            report = _read_back(store, keys, False, top, False)
            if report is not None:
                from tpuperf.timeline import build_timeline

                report._timeline = build_timeline(loaded, report.config)
                _ANALYSED.append((store, keys[1], report, page, loaded.warnings))
                return report
        report = analyze_profile(loaded, **options)
        if keys is not None:
            _ANALYSED.append((store, keys[1] if page else keys[0], report, page, loaded.warnings))
        return report

    def _options(self, top: int) -> dict[str, Any]:
        """The options of :func:`analyze_profile` this request gives."""
        return {
            "analyzers": self.analyzers,
            "steps": self.steps,
            "warmup": self.warmup,
            "host": self.host,
            "peak_tflops": self.peak_tflops,
            "peak_hbm_gbps": self.peak_hbm_gbps,
            "top": top,
        }


def _read_back(
    store: Cache, keys: tuple[str, str], page: bool, top: int, notices: bool
) -> Report | None:
    """The report the cache keeps under ``keys`` (alone, then with its page; HTML only the
    latter) listing ``top`` top ops, with its analyzers' failures said, and the profile's
    notes too with ``notices``; None when it keeps none that lists them."""
    from tpuperf import output

    found = _stored_report(store, keys, page, top)
    if found is None:
        return None
    report, warnings = found
    for warning in warnings if notices else ():
        output.note(warning)
    _say_errors(report)
    return report


def _stored_report(
    store: Cache, keys: tuple[str, str], page: bool, top: int
) -> tuple[Report, list[str]] | None:
    """:func:`_read_back`'s report and the profile's notes, nothing said."""
    from tpuperf.analysis import Report

    alone, paged = keys
    for key in [paged] if page else [alone, paged]:
        stored = store.get_report(key)
        if stored is None:
            continue
        report = Report.from_stored(stored["report"])
        if report.can_list(top):
            return report.with_top(top), stored["warnings"]
    return None


def run_analysis(
    loaded: Profile, store: Cache, keys: tuple[str, str] | None, config: AnalysisConfig
) -> Report:
    """The report of ``loaded`` (read through ``store``) under ``config``, as ``tpuperf
    analyze`` makes it (every analyzer; its failures are the caller's to say): read back
    from the cache where it keeps one under ``keys`` (:func:`analysis_keys`), else analysed,
    and kept as the command ends (:func:`finish_writes`) for the next command on the same
    files; with no keys (a plug-in analyzer runs), analysed and not kept."""
    from tpuperf.analysis import analyze

    if keys is None:
        return analyze(loaded, config=config)
    made = [report for _, key, report, _, _ in _ANALYSED if key == keys[0]]
    if made:  # this command analysed the same files under the same options (diff A A)
        return made[0]
    found = stored_analysis(store, keys, config)
    if found is not None:
        return found[0]
    report = analyze(loaded, config=config)
    _ANALYSED.append((store, keys[0], report, False, loaded.warnings))
    return report


def analysis_keys(
    path: str, files: list[tuple[str, str, str]], notices: list[str], config: AnalysisConfig
) -> tuple[str, str] | None:
    """:func:`_report_keys` of the analysis ``tpuperf analyze`` makes of ``path`` under
    ``config`` (every analyzer)."""
    options = {
        "analyzers": None,
        "steps": config.steps,
        "warmup": config.warmup_steps,
        "host": config.host,
        "peak_tflops": config.peak_tflops,
        "peak_hbm_gbps": config.peak_hbm_gbps,
        "top": config.top_ops,
    }
    return _report_keys(path, files, notices, options)


def stored_analysis(
    store: Cache, keys: tuple[str, str], config: AnalysisConfig
) -> tuple[Report, list[str]] | None:
    """The analysis :func:`run_analysis` would read back under ``keys``, with the notes of
    loading its profile; None where the cache keeps none made under ``config``."""
    found = _stored_report(store, keys, False, config.top_ops)
    return found if found is not None and found[0].config == config else None


def _report_keys(
    source: str,
    files: list[tuple[str, str, str]],
    notices: list[str],
    options: dict[str, Any],
) -> tuple[str, str] | None:
    """The cache keys of the report of profile ``source`` (the path given; ``files`` and
    ``notices`` as :attr:`Cache.last_loaded` and :attr:`Cache.last_notices` give them) under
    ``options`` (:meth:`AnalysisRequest.analyze`'s; ``top`` aside, up to RANKED_OPS), alone
    and with its page's data; None where it is not kept: an analyzer of a plug-in would run
    (its code is not tpuperf's, whose version keys the entry). Bad options raise here, as
    analysing would. The files' own notes are theirs: their content keys them."""
    from tpuperf.analysis import RANKED_OPS, analysis_config
    from tpuperf.analyzers import base
    from tpuperf.cache import Cache

    builtin = [name for name, _ in base.BUILTIN]
    names = options["analyzers"]
    if names is not None and not set(names) <= set(builtin):
        return None
    if names is None and base.entry_point_names():
        return None
    config = analysis_config(**{k: v for k, v in options.items() if k != "analyzers"})
    parts = {
        "source": source,
        "files": files,
        "notices": notices,
        # One entry lists any top up to RANKED_OPS; a longer one has its own.
        "config": dataclasses.asdict(
            dataclasses.replace(config, top_ops=max(config.top_ops - RANKED_OPS, 0))
        ),
        "analyzers": sorted(set(names or builtin)),
    }
    return Cache.report_key([parts, "alone"]), Cache.report_key([parts, "page"])


def profile_command(
    *formats: Format, then: tuple[str, ...] = ()
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Declare a profile-reading command offering ``formats``: the decorated
    ``command(request, **own)`` takes a :class:`ProfileRequest` first and then its own options.
    Typer reads the signature of the command this returns, which is, in the order of the help:
    PROFILE, the own options, ``--format --output --wide``, the own options named in ``then``,
    ``--host --run --no-cache``."""

    def decorate(function: Callable[..., None]) -> Callable[..., None]:
        return _declare(
            function, ProfileRequest, formats, None, then, [], ["host", "run", "no_cache"]
        )

    return decorate


def analysis_command(
    *formats: Format, output: Any = None
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Declare analyze or report: as :func:`profile_command`, with an
    :class:`AnalysisRequest`. The signature is PROFILE, the own options but ``top``, ``--format
    --output --wide`` (or only ``output``, this option, for a command writing one format),
    ``--analyzer --steps --warmup --host --run --peak-tflops --peak-hbm-gbps``, ``top``,
    ``--no-cache``."""
    analysis = [
        "analyzer",
        "steps",
        "warmup",
        "host",
        "run",
        "peak_tflops",
        "peak_hbm_gbps",
    ]

    def decorate(function: Callable[..., None]) -> Callable[..., None]:
        return _declare(
            function, AnalysisRequest, formats, output, ("top",), analysis, ["no_cache"]
        )

    return decorate


def _declare(
    function: Callable[..., None],
    request_type: type[ProfileRequest],
    formats: tuple[Format, ...],
    output_option_: Any,
    then: tuple[str, ...],
    before_then: list[str],
    after_then: list[str],
) -> Callable[..., None]:
    """The command of :func:`profile_command` and :func:`analysis_command`: ``function`` with
    the shared options spliced into its signature (after ``request``, its first parameter),
    called with the request built from them."""
    import inspect

    def parameter(name: str, annotation: Any, default: Any) -> inspect.Parameter:
        return inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
        )

    peak_tflops, peak_hbm_gbps = peak_options()
    declared = {
        "profile": parameter("profile", str, profile_argument()),
        "format": parameter("format", Format | None, format_option(*formats)),
        "output": parameter("output", str | None, output_option_ or output_option()),
        "wide": parameter("wide", bool, wide_option()),
        "analyzer": parameter("analyzer", list[str], analyzer_option()),
        "steps": parameter("steps", str, steps_option()),
        "warmup": parameter("warmup", int, warmup_option()),
        "host": parameter(
            "host",
            str,
            host_option("Analyse only this host of a multi-host run.")
            if request_type is AnalysisRequest
            else host_option(),
        ),
        "run": parameter("run", str, run_option()),
        "peak_tflops": parameter("peak_tflops", float, peak_tflops),
        "peak_hbm_gbps": parameter("peak_hbm_gbps", float, peak_hbm_gbps),
        "no_cache": parameter("no_cache", bool, no_cache_option()),
    }
    outputs = ["output"] if output_option_ is not None else ["format", "output", "wide"]
    shared = ["profile", *outputs, *before_then, *after_then]
    own = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in list(inspect.signature(function).parameters.values())[1:]  # after ``request``
    ]
    order = [
        declared["profile"],
        *(p for p in own if p.name not in then),
        *(declared[name] for name in outputs),
        *(declared[name] for name in before_then),
        *(p for p in own if p.name in then),
        *(declared[name] for name in after_then),
    ]

    @functools.wraps(function)
    def command(**values: Any) -> None:
        from tpuperf.output import choose_format

        given = {name: values.pop(name) for name in shared}
        fields = {
            "profile": given["profile"],
            # -o with a suffix of a format not offered is refused (report -o x.json).
            "fmt": choose_format(given.get("format"), given["output"], formats),
            "output": given["output"],
            "wide": given.get("wide", False),
            "host": given["host"],
            "run": given["run"],
            "no_cache": given["no_cache"],
        }
        if request_type is AnalysisRequest:
            fields |= {
                "analyzers": given["analyzer"] or None,
                "steps": given["steps"],
                "warmup": given["warmup"],
                "peak_tflops": given["peak_tflops"],
                "peak_hbm_gbps": given["peak_hbm_gbps"],
            }
        with writes_finished():
            function(request_type(**fields), **values)

    command.__signature__ = inspect.Signature(order, return_annotation=None)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in order} | {"return": None}
    return command
