"""Run analyzers on a profile and gather their findings into one ranked :class:`Report`.

``analyze(profile)`` is the library's entry point; renderers (terminal,
markdown, JSON via :meth:`Report.to_dict`) only format what it returns.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from dataclasses import field
from typing import TYPE_CHECKING, Any

import numpy as np

from tpuperf import _threads, jsonout
from tpuperf._dataclasses import dataclass
from tpuperf.analyzers import base
from tpuperf.analyzers.base import AnalyzerResult, Recommendation
from tpuperf.columns import Strings, Table, index_groups, sum_by
from tpuperf.config import AnalysisConfig, analysis_config
from tpuperf.errors import UsageError
from tpuperf.roofline import model as rl
from tpuperf.timeline import BREAKDOWN_COLUMNS, Timeline, build_timeline, stats_ms

if TYPE_CHECKING:
    from tpuperf.findings import (
        AsyncWindows,
        CollectiveKind,
        DeviceBreakdown,
        IdleFigures,
        MemoryPeak,
        RooflinePeaks,
        StepBreakdown,
        Straggler,
    )
    from tpuperf.profiles import Profile
    from tpuperf.workload import Workload

# Bump on any change to the JSON layout that could break a reader.
SCHEMA_VERSION = jsonout.SCHEMA_VERSION

# The documented JSON layout (README, "tpuperf analyze --format json"): name -> JSON types.
# "number" is int or float; a list of types means any of them; None is null. Tests hold
# the output to this, and README documents every name here.
TOP_LEVEL_FIELDS: dict[str, Any] = {
    "schema_version": "int",
    "tool": "object",
    "source": "string",
    "platform": "string",
    "summary": "object",
    "top_ops": "array",
    "recommendations": "array",
    "analyzers": "object",
    "notes": "array",
}
SUMMARY_FIELDS: dict[str, Any] = {
    "platform": "string",
    "chip": ["string", None],
    "hosts": "int",
    "devices": "int",
    "step_source": ["string", None],
    "steps_analyzed": "int",
    "steps_excluded": "int",
    "step_time_ms": "object",  # median, mean, p90, min, max (null without steps), count
    "iteration_time_ms": "object",  # a step's start to the next's: as step_time_ms
    "outside_steps_ms_per_iteration": ["number", None],  # after a step ends, before the next
    "window_ms": "number",
    "busy_pct": ["number", None],
    "compute_pct": ["number", None],
    "exposed_collective_pct": ["number", None],
    "exposed_copy_pct": ["number", None],
    "idle_pct": ["number", None],
    "no_op_pct": ["number", None],
    "span_idle_pct": ["number", None],
    "equivalent_idle_chips": ["number", None],
    "flops_utilization_pct": ["number", None],
    "mfu_pct": ["number", None],
    "peak_tflops": ["number", None],
    "peak_hbm_gbps": ["number", None],
    "peaks_source": ["string", None],
    # forward / backward / optimizer / other: {ms_per_step, pct}; null without scope data
    "passes": ["object", None],
    "workload": ["object", None],  # framework, platform, vendor, training: see workload.py
    "top_recommendation": ["object", None],  # kind, est_savings_pct, est_savings_ms
    # Memory (tpuperf/memory_plan.py): the largest program's peak, its device's capacity, the
    # headroom, each program's peak by module name; null without HLO modules.
    "peak_hbm_gib": ["number", None],
    "peak_program": ["string", None],
    "hbm_capacity_gib": ["number", None],
    "headroom_pct": ["number", None],
    "program_peak_gib": ["object", None],
}
PASS_FIELDS: dict[str, Any] = {
    "ms_per_step": "number",
    "pct": ["number", None],
}
STEP_TIME_FIELDS: dict[str, Any] = {
    "median": ["number", None],
    "mean": ["number", None],
    "p90": ["number", None],
    "min": ["number", None],
    "max": ["number", None],
    "count": "int",
}
RECOMMENDATION_FIELDS: dict[str, Any] = {
    "rank": "int",
    "analyzer": "string",
    "kind": "string",
    "title": "string",
    "evidence": "object",  # text, ops, values, scopes
    "fix": "object",  # {platform: text}: the fix for the workload (analyzers/fixes.py)
    "est_savings_ms": "number",
    "est_savings_pct": "number",
    "confidence": "string",
}
TOP_OP_FIELDS: dict[str, Any] = {
    "op": "string",
    "module": "string",
    "kind": "string",
    "count_per_step": "number",
    "ms_per_step": "number",
    "pct_of_busy": ["number", None],
    "bound": ["string", None],
    "efficiency_pct": ["number", None],
    "scope": "string",  # where the code made the op ("" when unknown): see tpuperf/scopes.py
    "primitive": "string",
    "pass": "string",
    "source": "string",  # file:line
}
ANALYZER_FIELDS: dict[str, Any] = {
    "summary": "string",
    "error": ["string", None],
    "metrics": "object",
    "notes": "array",
    "tables": "object",  # name -> {columns, rows, total_rows}
}

# Recommendations that would save less than this share of a step are noise, not advice.
MIN_SAVINGS_PCT = 0.05

# Top ops take at least this share of busy time.
TOP_OP_MIN_SHARE = 1e-4

# A report ranks at least this many top ops (Report.with_top lists up to as many, or as many
# as it was asked for, without analysing again).
RANKED_OPS = 100

# Tables in JSON are cut to this many rows (total_rows says how many there were).
JSON_TABLE_ROWS = 50

# A recommendation's evidence text names at most this many places in the code (scope, primitive,
# pass, source line) of the ops it cites, each with its ops; it counts the ops at the others
# (evidence.scopes lists every cited op's place).
EVIDENCE_SCOPES = 3


# What only the HTML page draws: Report's properties computed from its timeline on first use.
PAGE = ("step_breakdown", "device_breakdowns", "scope_tree")


@dataclass
class Report:
    """A profile's summary, every analyzer's result and the recommendations, ranked."""

    source: str
    platform: str
    summary: dict[str, Any]
    results: dict[str, AnalyzerResult]
    recommendations: list[Recommendation]  # highest est_savings_pct first
    top_ops: Table  # see TOP_OP_FIELDS; .to_pandas() for a DataFrame
    # Every op of the analysed steps (OP_COLUMNS), the table top_ops is cut from; not in JSON.
    ops: Table = field(default_factory=lambda: Table({}), repr=False)
    notes: list[str] = field(default_factory=list)
    summaries: dict[str, str] = field(default_factory=dict)  # analyzer name -> one-line summary
    # The frozen options the analysis ran with (the steps, host and peaks asked for); not in JSON.
    config: AnalysisConfig = field(default_factory=AnalysisConfig, repr=False)
    # The timeline the analysis read. What only the HTML page draws (PAGE: step_breakdown,
    # device_breakdowns, scope_tree) is computed from it on first use, so the JSON and
    # terminal forms never pay for it; not in JSON, not compared.
    _timeline: Timeline | None = field(default=None, repr=False, compare=False)
    # The top ops top_ops is the first rows of: at least RANKED_OPS of them, ranked as it
    # ranks them (:meth:`with_top`); not in JSON, not compared.
    _ranked_ops: Table | None = field(default=None, repr=False, compare=False)

    @property
    def errors(self) -> dict[str, str]:
        """Analyzers that failed on this profile: name -> error."""
        return {n: r.error for n, r in self.results.items() if r.error}

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (README, "JSON output"): plain types, no NaN or Infinity."""
        from tpuperf import __version__

        out = {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "tpuperf", "version": __version__},
            "source": self.source,
            "platform": self.platform,
            "summary": self.summary,
            "top_ops": self.top_ops.records(),
            "recommendations": [
                {"rank": i + 1, **r.to_dict()} for i, r in enumerate(self.recommendations)
            ],
            "analyzers": {
                name: {
                    "summary": self.summaries.get(name, ""),
                    "error": r.error,
                    "metrics": r.metrics,
                    "notes": r.notes,
                    "tables": {t: _table(table) for t, table in r.tables.items()},
                }
                for name, r in self.results.items()
            },
            "notes": self.notes,
        }
        return jsonout.clean(out)

    def to_json(self, indent: int | None = 2) -> str:
        return jsonout.dumps(self.to_dict(), indent)

    @functools.cached_property
    def step_breakdown(self) -> StepBreakdown:
        """Where each analysed step's time went, averaged over the devices that ran it."""
        from tpuperf.findings import StepBreakdown

        tl = self._timeline
        if tl is None or not tl.n_windows or not tl.has_steps:
            return StepBreakdown(
                windows=tl.n_windows if tl is not None else 0,
                step_source=None,
                steps=np.zeros(0, dtype=np.int64),
                ms={},
            )
        table = tl.breakdown_table()
        numbers, index = np.unique(table.array("step"), return_inverse=True)
        devices = np.bincount(index, minlength=len(numbers))
        ms = {
            column: np.bincount(index, weights=table.array(column), minlength=len(numbers))
            / devices
            / 1e9
            for column in BREAKDOWN_COLUMNS
        }
        return StepBreakdown(tl.n_windows, tl.step_source, numbers, ms)

    @functools.cached_property
    def device_breakdowns(self) -> list[DeviceBreakdown]:
        """Each analysed device's breakdown per step (mean over its windows), by host and
        device."""
        from tpuperf.findings import DeviceBreakdown

        if self._timeline is None:
            return []
        views = sorted(self._timeline.devices, key=lambda v: (v.host, v.device))
        return [
            DeviceBreakdown(
                v.host,
                v.device,
                {
                    column: v.breakdown[column].sum() / max(len(v.windows), 1) / 1e9
                    for column in BREAKDOWN_COLUMNS
                },
            )
            for v in views
        ]

    @functools.cached_property
    def op_categories(self) -> dict[tuple[str, str], str]:
        """Each analysed (module, op)'s hlo category, as the profile records it (on the first
        device that ran it: the ops table's)."""
        ops = self.ops
        if not ops.n or "category" not in ops:
            return {}
        keys = zip(ops.strings("module").tolist(), ops.strings("op").tolist(), strict=True)
        return dict(zip(keys, ops.strings("category").tolist(), strict=True))

    @functools.cached_property
    def scope_tree(self) -> dict[str, Any] | None:
        """Op time by JAX name scope over the analysed windows
        (:func:`tpuperf.scopes.scope_tree`); None when the report has no scope information
        (``summary["passes"]``)."""
        tl = self._timeline
        if self.summary.get("passes") is None or tl is None or tl.profile is None:
            return None
        from tpuperf.scopes import scope_tree

        return scope_tree(tl.profile, tl)

    # -------------------------------------------------------------- the cache's form
    # A report the cache keeps (tpuperf.cache, Cache.put_report) is its fields but the
    # timeline, and what the page has computed of its own data.

    def stored(self) -> dict[str, Any]:
        """The report as the cache keeps it: :meth:`from_stored` makes it again."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        del values["_timeline"]
        values["page"] = self._page_data()
        return values

    def _page_data(self) -> dict[str, Any]:
        """What of the page's data is computed, as its cached properties keep it."""
        return {name: self.__dict__[name] for name in PAGE if name in self.__dict__}

    def can_list(self, top: int) -> bool:
        """Whether :meth:`with_top` lists ``top`` top ops as analysing with ``top`` would."""
        ranked = max(self.config.top_ops, RANKED_OPS)
        return top == self.config.top_ops or (self._ranked_ops is not None and top <= ranked)

    def with_top(self, top: int) -> Report:
        """This report listing ``top`` top ops, as analysing with ``top`` lists them
        (:meth:`can_list` says whether it can)."""
        if top == self.config.top_ops or self._ranked_ops is None:
            return self
        page = self._page_data()
        report = dataclasses.replace(
            self,
            top_ops=_first_rows(self._ranked_ops, top),
            config=dataclasses.replace(self.config, top_ops=top),
        )
        report.__dict__.update(page)
        return report

    def compute_page(self) -> None:
        """Compute every part of the page's data (each is otherwise computed on first use)."""
        for name in PAGE:
            getattr(self, name)

    @classmethod
    def from_stored(cls, values: dict[str, Any]) -> Report:
        """The report :meth:`stored` gave ``values`` of, with the page's data it had."""
        values = dict(values)
        page = values.pop("page")
        report = cls(**values)
        report.__dict__.update(page)  # what the cached properties computed, as they keep it
        return report

    # -------------------------------------------------------------- what renderers read
    # The analyzers' findings a renderer shows, as declared types (tpuperf.findings): read
    # from the results' documented metrics and tables here, so no renderer names an
    # analyzer's keys.

    @property
    def roofline_peaks(self) -> RooflinePeaks:
        """The peaks the roofline analyzer used (all None: it did not run or no device ran
        ops)."""
        from tpuperf.findings import RooflinePeaks, declared

        return declared(RooflinePeaks, self._metrics("roofline").get("peaks") or {})

    @property
    def roofline_ops(self) -> Table | None:
        """The roofline analyzer's per-op table (intensity, achieved TFLOP/s, bound, ...)."""
        return self._table("roofline", "ops")

    @property
    def stragglers(self) -> list[Straggler]:
        """Devices that compute longer than the others (steps analyzer), worst first."""
        from tpuperf.findings import Straggler, declared

        return [declared(Straggler, s) for s in self._metrics("steps").get("stragglers") or []]

    @property
    def straggler_confidence(self) -> str:
        """The straggler verdict's confidence: its recommendation's, taken before the report
        cut advice that saves too little ("low" without one)."""
        steps = self.results.get("steps")
        return next(
            (
                r.confidence
                for r in (steps.recommendations if steps else [])
                if r.kind == "straggler"
            ),
            "low",
        )

    @property
    def idle(self) -> IdleFigures | None:
        """How idle the devices were (idle analyzer); None when it did not run or had no steps."""
        from tpuperf.findings import IdleFigures, declared

        metrics = self._metrics("idle")
        return declared(IdleFigures, metrics) if metrics.get("idle_pct") is not None else None

    @property
    def host_events(self) -> Table | None:
        """What the host ran while the devices were idle (idle analyzer's host_events table)."""
        return self._table("idle", "host_events")

    @property
    def collective_kinds(self) -> list[CollectiveKind]:
        """Collectives by kind (collectives analyzer), in its order."""
        from tpuperf.findings import CollectiveKind, declared

        by_kind = self._metrics("collectives").get("by_kind") or {}
        return [declared(CollectiveKind, {"kind": k, **m}) for k, m in by_kind.items()]

    @property
    def async_windows(self) -> AsyncWindows:
        """How far compute hides the async windows (collectives analyzer)."""
        from tpuperf.findings import AsyncWindows, declared

        return declared(AsyncWindows, self._metrics("collectives").get("async") or {})

    @property
    def memory_peak(self) -> MemoryPeak | None:
        """The largest program's peak device memory (memory analyzer); None without one."""
        from tpuperf.findings import MemoryPeak, declared

        metrics = self._metrics("memory")
        return declared(MemoryPeak, metrics) if metrics else None

    def _metrics(self, analyzer: str) -> dict[str, Any]:
        result = self.results.get(analyzer)
        return result.metrics if result is not None else {}

    def _table(self, analyzer: str, table: str) -> Table | None:
        result = self.results.get(analyzer)
        return result.tables.get(table) if result is not None else None


def analyze(
    source: Profile | str | os.PathLike[str],
    config: AnalysisConfig | None = None,
    analyzers: list[str] | None = None,
    *,
    steps: str | tuple[int | None, int | None] | None = None,
    warmup: int | None = None,
    host: str | None = None,
    run: str | None = None,
    peak_tflops: float | None = None,
    peak_hbm_gbps: float | None = None,
    top: int | None = None,
    scopes: bool = True,
) -> Report:
    """Run the analyzers (all by default) on ``source`` and rank their recommendations.

    ``source`` is a :class:`~tpuperf.profiles.Profile` or anything :func:`tpuperf.load`
    reads (a file, a run directory, a logdir, a URL; ``run`` picks a run of a logdir).
    The options are those of ``tpuperf analyze``: ``steps`` ("A:B" or (A, B)) keeps step
    numbers A <= n < B instead of leaving out ``warmup`` steps; ``host`` analyses one host
    of a multi-host profile; ``peak_tflops``/``peak_hbm_gbps`` are used where neither the
    profile nor the chip table knows the chip; ``top`` top ops are listed. They override
    ``config`` where given. An analyzer that fails is recorded in the report
    (``Report.errors``); the others still run. ``scopes`` adds where the model's code made
    the ops (the forward / backward / optimizer split, the scope and source line of top ops
    and of the ops recommendations cite); without it nothing of tpuperf/scopes.py runs.
    """
    config = analysis_config(
        steps=steps,
        warmup=warmup,
        host=host,
        peak_tflops=peak_tflops,
        peak_hbm_gbps=peak_hbm_gbps,
        top=top,
        config=config,
    )
    if isinstance(source, (str, os.PathLike)):
        from tpuperf.profiles import load

        profile = load(source, run=run)
    else:
        profile = source
    workers = min(os.cpu_count() or 1, 4)
    parallel = sum(d.ops.n for d in profile.device_tables) >= _threads.PARALLEL_OPS
    with _threads.pool(workers, "tpuperf-analyze", parallel=parallel, beside=True) as pool:
        # What ran (the scope table) is read from the profile alone: beside the analyzers'
        # imports (an unknown name fails there) and the timeline.
        workload = pool.submit(_workload, profile, scopes)
        chosen = base.select(analyzers)
        builtin = {name for name, _ in base.BUILTIN}
        summaries = {analyzer.name: analyzer.summary for analyzer in chosen}
        tl = build_timeline(profile, config)  # bad --steps/--host fail here, before analyzers
        tl = dataclasses.replace(tl, workload=workload.result())
        # The built-in analyzers read the frozen timeline and share nothing: they run side by
        # side (numpy lets go of the GIL in its loops), as do the report's own tables.
        # Plug-ins run one after another, as they always have.
        running = {
            a.name: pool.submit(_run_one, a, tl, config) for a in chosen if a.name in builtin
        }
        ops_future = pool.submit(op_table, tl)
        memory_future = pool.submit(_memory_summary, profile)
        code_future = pool.submit(_Code.of, profile, tl) if scopes else None
        results = {
            a.name: running[a.name].result() if a.name in running else _run_one(a, tl, config)
            for a in chosen
        }
        ops = ops_future.result()
        code = code_future.result() if code_future is not None else None
    recommendations = sorted(
        (
            _platform_fix(rec, tl.platform)
            for r in results.values()
            for rec in r.recommendations
            if _finite(rec.est_savings_pct) >= MIN_SAVINGS_PCT or rec.kind in base.URGENT_KINDS
        ),
        key=lambda r: (
            r.kind not in base.URGENT_KINDS,  # near out-of-memory first
            -_finite(r.est_savings_pct),
            -_finite(r.est_savings_ms),
        ),
    )
    roofline = results.get("roofline")
    if code is not None:
        recommendations = [code.annotate(rec) for rec in recommendations]
    summary = _summary(tl, config, recommendations, code)
    summary.update(memory_future.result())
    notes = list(profile.warnings) + list(tl.notes)
    busy_ps = tl.total("busy_ps") if tl.n_windows else 0.0
    roofline_ops = roofline.tables.get("ops") if roofline else None
    ranked = _top_ops(ops, roofline_ops, max(config.top_ops, RANKED_OPS), busy_ps, code)
    top_ops = _first_rows(ranked, config.top_ops)
    return Report(
        source=profile.source,
        platform=profile.platform,
        summary=summary,
        results=results,
        recommendations=recommendations,
        top_ops=top_ops,
        ops=ops,
        notes=notes,
        summaries=summaries,
        config=config,
        _timeline=tl,
        _ranked_ops=ranked,
    )


def _platform_fix(rec: Recommendation, platform: str) -> Recommendation:
    """``rec`` with the fix for the platform that ran only, where it gives one per platform
    (a plug-in may): the built-in analyzers choose theirs in analyzers/fixes.py."""
    key = platform.lower()
    if key in rec.fix:
        return dataclasses.replace(rec, fix={key: rec.fix[key]}) if len(rec.fix) > 1 else rec
    texts = set(rec.fix.values())
    if len(texts) == 1:  # one text for every platform: it is this platform's too
        return dataclasses.replace(rec, fix={key: texts.pop()})
    if key == "cpu" and "tpu" in rec.fix:
        # XLA:CPU gets the TPU text: written against JAX's APIs, where the GPU text adds
        # CUDA/ROCm flags and graphs that do not exist on a CPU.
        return dataclasses.replace(rec, fix={key: rec.fix["tpu"]})
    return rec


def _workload(profile: Profile, scopes: bool) -> Workload:
    """What ran, for the analyzers to choose fixes from: training or inference needs the scope
    table, so it stays unknown without ``scopes``."""
    from tpuperf.workload import detect

    if not scopes:
        return detect(profile)
    from tpuperf import scopes as sc

    return detect(profile, sc.scopes(profile))


def _memory_summary(profile: Profile) -> dict[str, Any]:
    """Peak, capacity and headroom for the summary (tpuperf/memory_plan.py; a module that
    cannot be read is left out there, with a note)."""
    from tpuperf import memory_plan

    return memory_plan.summary_fields(profile)


def _run_one(analyzer: base.Analyzer, tl: Timeline, config: AnalysisConfig) -> AnalyzerResult:
    """One analyzer's result; its failure, as an error, must not hide the others' findings."""
    try:
        return base.run(analyzer, tl, config)
    except Exception as exc:
        return AnalyzerResult(analyzer.name, error=f"{type(exc).__name__}: {exc}")


def _finite(value: float) -> float:
    return value if isinstance(value, (int, float)) and math.isfinite(value) else 0.0


_SUMMARY_PCTS = (
    ("busy_pct", "busy_ps"),
    ("compute_pct", "compute_ps"),
    ("exposed_collective_pct", "exposed_collective_ps"),
    ("exposed_copy_pct", "other_ps"),
    ("idle_pct", "idle_ps"),
    ("no_op_pct", "no_op_ps"),
)


def _summary(
    tl: Timeline,
    config: AnalysisConfig,
    recommendations: list[Recommendation],
    code: _Code | None = None,
) -> dict[str, Any]:
    # Computed here from the shared timeline, not read from analyzers, so the summary is the
    # same whichever analyzers were selected (fleet scans flatten it).
    peaks_by_device = tl.peaks
    views = tl.devices
    # Shares of the iteration (a step's start to the next's), so host time between steps counts.
    pct: dict[str, float | None] = {name: tl.iteration_mean_pct(col) for name, col in _SUMMARY_PCTS}
    span_idle = (
        float(
            np.mean(
                [
                    100.0
                    * float(v.span_breakdown["idle_ps"][0])
                    / float(v.span_breakdown["step_ps"][0])
                    for v in views
                ]
            )
        )
        if views
        else None
    )
    util = rl.utilization(tl, peaks_by_device)
    common = rl.common_peaks(peaks_by_device)
    chips_seen = sorted({v.chip for v in views if v.chip})
    top = recommendations[0] if recommendations else None
    return {
        "platform": tl.platform,
        "chip": chips_seen[0] if len(chips_seen) == 1 else (", ".join(chips_seen) or None),
        "hosts": len(tl.hosts),
        "devices": tl.n_devices,
        "step_source": tl.step_source if tl.has_steps else None,
        "steps_analyzed": len(tl.steps_selected),
        "steps_excluded": len(tl.steps_excluded),
        "step_time_ms": stats_ms(tl.step_time_ps)
        if tl.has_steps
        else dict.fromkeys(("median", "mean", "p90", "min", "max")) | {"count": 0},
        "iteration_time_ms": stats_ms(tl.iteration_time_ps)
        if tl.has_steps
        else dict.fromkeys(("median", "mean", "p90", "min", "max")) | {"count": 0},
        "outside_steps_ms_per_iteration": (
            tl.per_iteration(sum(int(v.outside_steps["outside_ps"].sum()) for v in views)) / 1e9
            if tl.has_steps
            else None
        ),
        "window_ms": (
            tl.iteration_total("step_ps") / max(tl.n_devices, 1) / 1e9 if tl.n_windows else 0.0
        ),
        **pct,
        "span_idle_pct": span_idle,
        "equivalent_idle_chips": (
            float(
                sum(
                    float(v.iteration_breakdown["idle_ps"].sum())
                    / float(v.iteration_breakdown["step_ps"].sum())
                    for v in views
                )
            )
            if tl.n_windows
            else None
        ),
        "flops_utilization_pct": util["flops_utilization_pct"],
        "mfu_pct": util["mfu_pct"],
        "peak_tflops": common.peak_tflops if common else None,
        "peak_hbm_gbps": common.peak_hbm_gbps if common else None,
        "peaks_source": common.source if common else None,
        "passes": code.passes if code is not None else None,
        "workload": tl.workload.to_dict() if tl.workload is not None else None,
        "top_recommendation": (
            {
                "kind": top.kind,
                "est_savings_pct": top.est_savings_pct,
                "est_savings_ms": top.est_savings_ms,
            }
            if top
            else None
        ),
    }


_CODE_COLUMNS = ("scope", "primitive", "pass", "source")
_TOP_OP_COLUMNS = (
    "op",
    "module",
    "kind",
    "count_per_step",
    "ms_per_step",
    "pct_of_busy",
    "bound",
    "efficiency_pct",
    *_CODE_COLUMNS,
)
_NOWHERE = dict.fromkeys(_CODE_COLUMNS, "")

# Columns of Report.ops: every op of the analysed steps, as `tpuperf diff` matches them.
OP_COLUMNS = (
    "op",
    "module",
    "kind",
    "category",
    "tf_op",
    "hlo_text",
    "source",
    "order",
    "self_ps",
    "count_per_step",
    "ms_per_step",
    "pct_of_busy",
)
_OP_ATTRIBUTES = ("kind", "category", "tf_op", "hlo_text", "source")


@dataclass(frozen=True)
class _Code:
    """Where the model's code made the analysed ops: the pass split and, per op, its scope,
    primitive, pass and source line (see tpuperf/scopes.py)."""

    passes: dict[str, dict[str, float | None]] | None  # None: no scope information at all
    by_op: dict[tuple[str, str], dict[str, str]]  # (module, op) -> where
    by_name: dict[str, dict[str, str]]  # op -> where, of the (module, op) with most time

    @classmethod
    def of(cls, profile: Profile, tl: Timeline) -> _Code:
        from tpuperf import scopes as sc
        from tpuperf.schema import PASSES

        data = sc.scopes(profile)
        if not data.has_scopes:
            return cls(None, {}, {})
        table = data.table
        values = {c: table.strings(c).tolist() for c in ("module", "op", *_CODE_COLUMNS)}
        row_time = np.zeros(data.n, dtype=np.int64)
        for view in tl.devices:
            if view.key not in data.device_rows or not len(view.selected):
                continue
            row_time += data.sums_at(view, "self_ps")
        # Integer sums: by pass from the rows' sums, exactly as from the ops'.
        per_pass = sum_by(data.pass_codes(), len(PASSES), row_time)
        windows = max(tl.n_windows, 1)
        total = int(per_pass.sum())
        passes: dict[str, dict[str, float | None]] = {
            name: {
                "ms_per_step": float(per_pass[i]) / windows / 1e9,
                "pct": 100.0 * float(per_pass[i]) / total if total else None,
            }
            for i, name in enumerate(PASSES)
        }
        by_op: dict[tuple[str, str], dict[str, str]] = {}
        by_name: dict[str, dict[str, str]] = {}
        for row in np.argsort(-row_time, kind="stable").tolist():  # most time first
            where = {c: values[c][row] for c in _CODE_COLUMNS}
            by_op.setdefault((values["module"][row], values["op"][row]), where)
            by_name.setdefault(values["op"][row], where)
        return cls(passes, by_op, by_name)

    def of_op(self, op: str, module: str) -> dict[str, str]:
        return self.by_op.get((module, op)) or _NOWHERE

    def annotate(self, rec: Recommendation) -> Recommendation:
        """``rec`` with the code of the ops it cites in its evidence (text and ``scopes``)."""
        cited = [
            {"op": op, **where}
            for op in dict.fromkeys(rec.ops)
            if (where := self.by_name.get(op))
            and (where["scope"] or where["primitive"] or where["source"])
        ]
        if not cited:
            return rec
        # Ops made by the same code are named together: "a, b at jit(f)/add (forward, f.py:29)";
        # past EVIDENCE_SCOPES places, the text counts the ops (evidence.scopes has them all).
        places: dict[tuple[str, ...], list[str]] = {}
        for c in cited:
            places.setdefault(tuple(c[k] for k in _CODE_COLUMNS), []).append(c["op"])
        named = list(places.items())[:EVIDENCE_SCOPES]
        text = "; ".join(_where_text(ops, place) for place, ops in named)
        rest = list(places.values())[EVIDENCE_SCOPES:]
        if rest:
            more = sum(len(ops) for ops in rest)
            text += (
                f"; and {more} more op{'s' if more > 1 else ''} in {len(rest)} other "
                f"place{'s' if len(rest) > 1 else ''}"
            )
        return dataclasses.replace(
            rec, evidence=f"{rec.evidence}; in the code: {text}", scopes=cited
        )


def _where_text(ops: list[str], place: tuple[str, ...]) -> str:
    """``fusion.3, fusion.4 at MLP/Dense_0/dot_general (backward, model.py:212)``."""
    scope, primitive, pass_, source = place
    path = "/".join(p for p in (scope, primitive) if p) or "(no scope)"
    details = [d for d in (pass_, source.rsplit("/", 1)[-1]) if d]
    return f"{', '.join(ops)} at {path}" + (f" ({', '.join(details)})" if details else "")


def collective_table(profile: Profile, top: int | None = None) -> Table:
    """One row per collective op over the analysed steps and devices (``tpuperf ops --by
    collective``): the collectives analyzer's table (op, kind, bytes, group_size,
    count_per_step, ms_per_step, wait_ms, transfer_ms, algbw_gbps, busbw_gbps, link_peak_pct,
    arrival_spread_ms, last_arriver, ...), most time first."""
    report = analyze(profile, analyzers=["collectives"], scopes=False)
    result = report.results["collectives"]
    if result.error:
        raise UsageError(f"--by collective: {result.error}")
    table = result.tables.get("collectives")
    if table is None:
        from tpuperf.analyzers.collectives import collective_columns

        table = collective_columns()
    if top is not None:
        table = table.take(np.arange(min(top, table.n)))
    return table


def op_table(tl: Timeline) -> Table:
    """Every op that runs in the selected windows, one row per (module, op) summed over
    devices, in order of first execution (``order``; devices in turn): its attributes as
    recorded on the first device that ran it, ``self_ps`` in all windows, and self time and
    count per step per device."""
    names: dict[tuple[str, str], int] = {}
    attributes: list[list[str]] = [[] for _ in _OP_ATTRIBUTES]
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # per device: rows, sums
    for view in tl.devices:
        ops = view.selected_ops("module", "op", "self_ps")
        if not ops.n:
            continue
        module, op = ops.strings("module"), ops.strings("op")
        index, group, first = index_groups([module, op])
        k = len(first)
        seen = len(names)
        pairs = zip(module.take(first).tolist(), op.take(first).tolist(), strict=True)
        at = np.fromiter((names.setdefault(pair, len(names)) for pair in pairs), np.int64, k)
        # The attributes of each (module, op) as the first device that ran it recorded them,
        # read for the groups new on this device only: the others have theirs.
        rows = view.selected[first[at >= seen]]
        for values, column in zip(attributes, _OP_ATTRIBUTES, strict=True):
            values += view.ops.strings(column).take(rows).tolist()
        # Summed by index value, then by group: integers, exact in any order.
        if index is module.index:  # the device's op index at the selected ops: summed once
            full = view.ops.strings("module").index  # for this and the scopes' tables
            per_index = view.selected_counts(full, len(group))
            per_index_ps = view.selected_sums(full, len(group), "self_ps")
        else:
            per_index = np.bincount(index, minlength=len(group))
            per_index_ps = sum_by(index, len(group), ops.array("self_ps"))
        count = sum_by(group, k, per_index)
        total = sum_by(group, k, per_index_ps)
        parts.append((at, count, total))
    counts = np.zeros(len(names), dtype=np.int64)
    total = np.zeros(len(names), dtype=np.int64)
    for at, count, self_ps in parts:  # a device's groups are distinct: no index repeats
        counts[at] += count
        total[at] += self_ps
    windows = max(tl.n_windows, 1)
    busy_ps = tl.total("busy_ps") if tl.n_windows else 0.0
    keys = list(names)
    columns: dict[str, Any] = {
        "op": Strings.from_list([o for _, o in keys]),
        "module": Strings.from_list([m for m, _ in keys]),
    }
    for name, values in zip(_OP_ATTRIBUTES, attributes, strict=True):
        columns[name] = Strings.from_list(values)
    columns["order"] = np.arange(len(keys), dtype=np.int64)
    columns["self_ps"] = total
    columns["count_per_step"] = counts / windows
    columns["ms_per_step"] = total / windows / 1e9
    columns["pct_of_busy"] = 100.0 * total / busy_ps if busy_ps else np.full(len(keys), np.nan)
    return Table(columns, n=len(keys))


def _top_ops(
    ops: Table, roofline_ops: Table | None, n: int, busy_ps: float, code: _Code | None = None
) -> Table:
    """The ops with the most self time per step per device, with their roofline bound."""
    if not ops.n:
        return Table(
            {
                c: Strings(np.zeros(0, np.int32), ())
                if c in ("op", "module", "kind", "bound", *_CODE_COLUMNS)
                else np.zeros(0)
                for c in _TOP_OP_COLUMNS
            }
        )
    total = ops.array("self_ps")
    # Ops that take next to no time (the copy-start halves of async copies, a few ns) are not
    # top ops, even when fewer than n ops take real time.
    order = np.argsort(-total, kind="stable")
    order = order[total[order] > TOP_OP_MIN_SHARE * busy_ps][:n]
    top = ops.take(order)
    bound: list[str | None] = [None] * len(order)
    efficiency = np.full(len(order), np.nan)
    if roofline_ops is not None and "bound" in roofline_ops:
        lookup = {
            (m, o): (b, e)
            for m, o, b, e in zip(
                roofline_ops.strings("module").tolist(),
                roofline_ops.strings("op").tolist(),
                roofline_ops.strings("bound").tolist(),
                roofline_ops.array("efficiency_pct").tolist(),
                strict=True,
            )
        }
        for i, key in enumerate(
            zip(top.strings("module").tolist(), top.strings("op").tolist(), strict=True)
        ):
            found = lookup.get(key)
            if found is not None:
                bound[i], efficiency[i] = found
    picked = zip(top.strings("module").tolist(), top.strings("op").tolist(), strict=True)
    where = [code.of_op(o, m) if code is not None else _NOWHERE for m, o in picked]
    return Table(
        {
            "op": Strings.from_list(top.strings("op").tolist()),
            "module": Strings.from_list(top.strings("module").tolist()),
            "kind": Strings.from_list(top.strings("kind").tolist()),
            "count_per_step": top.array("count_per_step"),
            "ms_per_step": top.array("ms_per_step"),
            "pct_of_busy": top.array("pct_of_busy"),
            "bound": np.array(bound, dtype=object),
            "efficiency_pct": efficiency,
            **{c: Strings.from_list([w[c] for w in where]) for c in _CODE_COLUMNS},
        }
    )


def _first_rows(ranked: Table, n: int) -> Table:
    """The top ``n`` of :func:`_top_ops`'s table ``ranked``: what it makes for ``n``."""
    rows = min(n, ranked.n)
    return Table(
        {
            name: Strings.from_list(ranked.strings(name).tolist()[:rows])
            if isinstance(ranked[name], Strings)
            else np.asarray(ranked[name])[:rows].copy()
            for name in ranked
        }
    )


def _table(table: Table) -> dict[str, Any]:
    head = table.take(np.arange(min(JSON_TABLE_ROWS, table.n)))
    return {
        "columns": list(head),
        "rows": head.rows(),
        "total_rows": table.n,
    }
