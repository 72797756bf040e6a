"""``tpuperf diff``: what changed between two runs, and a regression gate for CI."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tpuperf.cli._common import (
    format_option,
    host_option,
    no_cache_option,
    output_option,
    run_option,
    steps_option,
    warmup_option,
    wide_option,
)
from tpuperf.cli._params import Argument, Option
from tpuperf.output import Format

if TYPE_CHECKING:
    from tpuperf.analysis import Report
    from tpuperf.cache import Cache
    from tpuperf.config import AnalysisConfig
    from tpuperf.diffing import DiffReport, Side
    from tpuperf.profiles import Profile

FORMATS = (Format.table, Format.json, Format.md)


def command(
    base: str = Argument(
        ...,
        help="The run(s) to compare against: a file, run dir or logdir; several, comma-separated.",
    ),
    new: str = Argument(
        ..., help="The run(s) to compare: a file, run dir or logdir; several, comma-separated."
    ),
    format: Format | None = format_option(*FORMATS),
    output: str | None = output_option(),
    wide: bool = wide_option(),
    top: int = Option(10, "--top", help="Op rows in table and md (JSON has every op)."),
    fail_on: list[str] = Option(
        None,
        "--fail-on",
        help="Exit 3 when FIELD OP VALUE holds, e.g. step_time_ms.median.delta_pct>5 or "
        "verdict==slower (repeatable); a step-time gate trips only on a significant change.",
    ),
    no_significance: bool = Option(
        False,
        "--no-significance",
        help="Let step-time gates trip on any change, significant or not.",
    ),
    steps: str = steps_option(" of both"),
    warmup: int = warmup_option(),
    host: str = host_option("Analyse only this host of both runs."),
    base_run: str = run_option("--base-run", "BASE, a logdir; several, comma-separated"),
    new_run: str = run_option("--new-run", "NEW, a logdir; several, comma-separated"),
    no_cache: bool = no_cache_option(),
) -> None:
    """Compare two runs: step time with its 95% interval and a verdict, the compute /
    collective / copy / idle split, programs by fingerprint, ops matched across
    recompilations (each judged beyond the run-wide common factor), categories and
    recommendations.

    Each run is analysed as `tpuperf analyze` does, through the same cache: a run analyze
    analysed under the same options is read back, not analysed again, and so is the same
    diff made again (in any format, with any gates). A side may be several runs: several
    paths, comma-separated, or several runs of one logdir (`--base-run a,b`); their
    per-step samples are pooled, so the intervals include run-to-run variation. Warns on
    stderr when the runs differ in chip, devices, hosts, step source or jax/jaxlib versions.
    Exit 0, or 3 when a `--fail-on` gate trips (one line per gate on stderr). A gate on a
    step time's change trips only when the change is significant (its 95% interval
    excludes 0), and says so in one line when it does not, unless `--no-significance`; a
    gate on a value unknown on either side (no MFU without model FLOPs) is not evaluated,
    and a note says so.

    Example:

        tpuperf diff base_logdir/ new_logdir/

        tpuperf diff logdir/ logdir/ --base-run 2026_01_05 --new-run 2026_01_06

        tpuperf diff a1.xplane.pb,a2.xplane.pb b1.xplane.pb,b2.xplane.pb

        tpuperf diff logdir/ logdir/ --base-run run1,run2 --new-run run3,run4

        tpuperf diff base.xplane.pb new.xplane.pb -f json \\
            --fail-on 'step_time_ms.median.delta_pct>5' \\
            --fail-on 'verdict==slower' --fail-on 'exposed_collective_pct.delta>3'
    """
    from tpuperf import gates
    from tpuperf import output as out
    from tpuperf.cli._common import keep, writes_finished
    from tpuperf.config import analysis_config
    from tpuperf.diffing import (
        GATE_FIELDS,
        GATE_TEXT_FIELDS,
        SIGNIFICANCE_OF,
        compare_sides,
    )
    from tpuperf.errors import GateFailed, UsageError

    fmt = out.choose_format(format, output, FORMATS)
    config = analysis_config(warmup=warmup, steps=steps, host=host)
    if top < 0:
        raise UsageError("--top must be 0 or more")
    parsed = [
        gates.parse_gate(
            text, GATE_FIELDS, GATE_TEXT_FIELDS, example="step_time_ms.median.delta_pct>5"
        )
        for text in fail_on or []
    ]

    def table(console: Any, wide: bool) -> None:
        from tpuperf.render.diff import render_diff_table  # rich: for a table only

        render_diff_table(result, console, top=top, wide=wide)

    def markdown() -> str:
        from tpuperf.render.diff import render_diff_markdown

        return render_diff_markdown(result, top=top)

    asked = ((base, base_run, "--base-run"), (new, new_run, "--new-run"))
    with writes_finished():  # what is made is kept once the output is written
        served = None if no_cache else _served(asked, config)
        if served is not None:
            result = served
        else:
            (base_side, base_keys), (new_side, new_keys) = _sides(asked, config, no_cache)
            result = compare_sides(base_side, new_side)
            if base_keys and new_keys:  # each run's analysis is kept: so is the comparison
                keep(_cache(), _diff_key(base_keys, new_keys), {"diff": result.stored()})
        for label, reports in (("BASE", result.base_reports), ("NEW", result.new_reports)):
            for report in reports:
                for name, error in report.errors.items():
                    out.say(f"{label}: analyzer {name} failed: {error}")
        for warning in result.warnings:
            out.say(f"warning: {warning}")
        view = out.View(document=result.to_dict, table=table, markdown=markdown)
        out.emit(view, fmt, output, wide=wide)

    row = result.gate_row()
    tripped = []
    for gate in parsed:
        if not gate.known(row):
            out.note(f"gate {gate.text} not evaluated: {gate.field} is unknown")
        elif gate.trips(row):
            judge = SIGNIFICANCE_OF.get(gate.field)
            if judge and not no_significance and row[judge] != "true":
                out.note(f"gate {gate.text} not tripped: {_why_not(result.summary, gate.field)}")
                continue
            tripped.append(gate)
            value = row[gate.field]
            shown = f"{value:.6g}" if isinstance(value, float) else str(value)
            out.say(f"gate {gate.text}: tripped ({gate.field} = {shown})")
    if tripped:
        raise GateFailed(f"{len(tripped)} of {len(parsed)} --fail-on gates tripped")


def _sides(
    asked: Sequence[tuple[str, str | None, str]], config: AnalysisConfig, no_cache: bool
) -> list[tuple[Side, list[str] | None]]:
    """Both sides, each with the cache keys of its runs' analyses (see :func:`_side`): the
    runs read and analysed side after side (their notes in order), then the two sides pooled
    from them side by side, where they are large (each side's per-step samples of every op:
    numpy and the C kernels let go of the GIL; a diff of 1.8 GB with itself 5.9 s -> 5.2 s)."""
    from tpuperf import _threads
    from tpuperf.diffing import side

    read = [_side(paths, runs, flag, config, no_cache) for paths, runs, flag in asked]
    ops = sum(d.ops.n for profiles, _, _ in read for p in profiles for d in p.device_tables)

    def pooled(run: tuple[list[Profile], list[Report | None], list[str] | None]) -> Side:
        profiles, reports, _ = run
        return side(profiles, config, reports=reports)

    parallel = ops >= _threads.PARALLEL_OPS
    with _threads.pool(len(read), "tpuperf-side", parallel=parallel) as pool:
        sides = list(pool.map(pooled, read))
    return [(pooled_side, kept) for pooled_side, (_, _, kept) in zip(sides, read, strict=True)]


def _side(
    paths: str, runs: str | None, flag: str, config: AnalysisConfig, no_cache: bool
) -> tuple[list[Profile], list[Report | None], list[str] | None]:
    """One side's runs, their reports (None: to analyse, without the cache) and the cache keys
    of their analyses (None where one is not kept, or without the cache): each run read, and
    analysed, through the cache as analyze does (its analysis read back where an earlier
    command kept it, else kept for the next)."""
    from tpuperf.cli._common import analysis_keys, load_profile, run_analysis

    profiles: list[Profile] = []
    reports: list[Report | None] = []
    kept: list[str] | None = None if no_cache else []
    for path, run in _runs(paths, runs):
        store = None if no_cache else _cache()
        loaded = load_profile(path, None, run, run_flag=flag, store=store, cache=not no_cache)
        profiles.append(loaded)
        if store is None:
            reports.append(None)
            continue
        keys = analysis_keys(path, store.last_loaded, store.last_notices, config)
        reports.append(run_analysis(loaded, store, keys, config))
        if keys is None:  # a plug-in analyzer runs: its analysis is not kept
            kept = None
        elif kept is not None:
            kept.append(keys[0])
    return profiles, reports, kept


def _served(
    asked: Sequence[tuple[str, str | None, str]], config: AnalysisConfig
) -> DiffReport | None:
    """The comparison an earlier ``diff`` of the same runs under the same options kept (its
    key is theirs: :func:`_diff_key`), with each run's analysis read back and the notes of
    loading each run said, as loading them says them; None where the cache cannot give it
    without reading a profile (a file changed or never hashed, an entry evicted)."""
    from tpuperf import output
    from tpuperf.cache import known_files
    from tpuperf.cli._common import analysis_keys, named_run_flag, stored_analysis
    from tpuperf.diffing import DiffReport

    store = _cache()
    sides = []  # per side, per run: (its run flag, the keys of its analysis)
    for paths, runs, flag in asked:
        found = []
        for path, run in _runs(paths, runs):
            try:
                known = known_files(path, None, run, store)
            except Exception:  # (reading the profile says what is wrong with it)
                return None
            keys = None if known is None else analysis_keys(path, *known, config)
            if keys is None:
                return None
            found.append((flag, keys))
        sides.append(found)
    entry = store.get_report(_diff_key(*([keys[0] for _, keys in side] for side in sides)))
    if entry is None:
        return None
    reports: list[list[Report]] = [[], []]
    said: list[str] = []  # said once every analysis is found: else the runs are loaded
    for side, into in zip(sides, reports, strict=True):
        for flag, keys in side:
            analysis = stored_analysis(store, keys, config)
            if analysis is None:
                return None
            into.append(analysis[0])
            said += [named_run_flag(note, flag) for note in analysis[1]]
    for note in said:
        output.note(note)
    return DiffReport.from_stored(entry["diff"], *reports)


def _diff_key(base: list[str], new: list[str]) -> str:
    """The cache key of the comparison of runs whose analyses have these keys (which say
    what the runs' files are, how they were chosen, the options and the tpuperf version)."""
    from tpuperf.cache import Cache

    return Cache.report_key(["diff", base, new])


def _cache() -> Cache:
    from tpuperf import output
    from tpuperf.cache import Cache

    return Cache(note=output.note)


def _runs(paths: str, runs: str | None) -> list[tuple[str, str | None]]:
    """A side's runs: each path (comma-separated), with each of its runs (``--base-run a,b``)."""
    return [(path, run) for path in _split(paths) for run in (_split(runs) if runs else [None])]


def _split(text: str) -> list[str]:
    """``a,b`` -> [a, b]: several runs of one side."""
    parts = [part.strip() for part in text.split(",")]
    return [part for part in parts if part] or [text]


def _why_not(summary: dict, field: str) -> str:  # type: ignore[type-arg]
    """Why a gate whose comparison holds did not trip: the change is within the noise."""
    from tpuperf.render.diff import interval_text

    stat = field.split(".")[1]
    entry = summary["step_time_ms"][stat]
    return (
        f"step time {stat} changed by {interval_text(entry)}, "
        "an interval that includes 0: not significant (--no-significance trips it anyway)"
    )
