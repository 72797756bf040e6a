"""The analyzer plug-in interface and the one registry of analyzers.

An analyzer has a ``name``, a one-line ``summary``, the table columns it
``requires`` (checked against :mod:`tpuperf.schema` when it is loaded) and
``analyze(timeline, config) -> AnalyzerResult``: it reads the frozen
:class:`~tpuperf.timeline.Timeline` every analyzer shares. It returns data
(metrics, tables, recommendations); it never prints, reads files or changes
its input. The built-in analyzers are listed in :data:`BUILTIN`; third parties
add theirs through the entry point group ``tpuperf.analyzers``, each entry
pointing at an analyzer class or instance. A plug-in written for the first
interface, ``analyze(profile, config)``, still works: it gets the profile.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import field
from typing import TYPE_CHECKING, Any, ClassVar

from tpuperf import schema
from tpuperf._dataclasses import dataclass
from tpuperf.config import AnalysisConfig
from tpuperf.errors import UsageError

if TYPE_CHECKING:
    from tpuperf.columns import Table
    from tpuperf.timeline import Timeline

__all__ = ["AnalysisConfig", "Analyzer", "AnalyzerResult", "Recommendation"]

ENTRY_POINT_GROUP = "tpuperf.analyzers"

# Values of Recommendation.confidence.
CONFIDENCE = ("high", "medium", "low")

# Recommendation kinds the built-in analyzers emit.
KIND_HOST_BOUND = "host_bound"
KIND_IDLE_GAPS = "idle_gaps"
KIND_EXPOSED_COLLECTIVE = "exposed_collective"
KIND_EXPOSED_ASYNC_COPY = "exposed_async_copy"  # hide the copies behind compute
KIND_REDUCE_COPIES = "reduce_copies"  # move fewer bytes: removes the wait itself
KIND_MEMORY_BOUND = "memory_bound"
KIND_LOW_COMPUTE_UTILIZATION = "low_compute_utilization"
KIND_STRAGGLER = "straggler"
KIND_COLLECTIVE_WAIT = "collective_wait"  # peers wait at collectives for a late device
KIND_COLLECTIVE_BYTES = "collective_bytes"  # collectives move data slowly: fewer bytes
KIND_AVOIDABLE_COLLECTIVE = "avoidable_collective"  # collective work the program need not do
KIND_DCN_STALL = "dcn_stall"  # megascale (DCN) collectives stall the devices: more slack
KIND_NEAR_OOM = "near_oom"  # ranked first whatever the others save (see URGENT_KINDS)
KIND_REMAT_HEADROOM = "remat_headroom"
KIND_OFFLOAD_HEADROOM = "offload_headroom"

# Kinds the report lists first, though they save no time: a program about to run out of memory.
URGENT_KINDS = frozenset({KIND_NEAR_OOM})


def savings_pct(savings_ms: float, step_ms: float) -> float:
    """A per-step saving as a share of the mean step window, in percent (0 without steps)."""
    return 100.0 * savings_ms / step_ms if step_ms > 0 else 0.0


@dataclass
class Recommendation:
    """One piece of ranked advice (DESIGN.md, Recommendation)."""

    analyzer: str
    kind: str
    title: str
    evidence: str  # the numbers behind it, in a sentence
    # {platform: text} (tpu, gpu or cpu): the code change or XLA flags for the workload that ran,
    # chosen by tpuperf/analyzers/fixes.py (a plug-in may give one per platform)
    fix: dict[str, str]
    est_savings_ms: float  # per step; an upper bound derived from the evidence
    est_savings_pct: float  # of the mean step window, 0-100 (see savings_pct)
    confidence: str  # one of CONFIDENCE
    ops: list[str] = field(default_factory=list)  # the ops behind the evidence, worst first
    values: dict[str, Any] = field(default_factory=dict)  # the evidence's numbers, by name
    # Where the model's code made the ops cited (op, scope, primitive, pass, source), added by
    # the report from the profile's scope table (tpuperf/scopes.py).
    scopes: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "analyzer": self.analyzer,
            "kind": self.kind,
            "title": self.title,
            "evidence": {
                "text": self.evidence,
                "ops": list(self.ops),
                "values": dict(self.values),
                "scopes": [dict(s) for s in self.scopes],
            },
            "fix": dict(self.fix),
            "est_savings_ms": self.est_savings_ms,
            "est_savings_pct": self.est_savings_pct,
            "confidence": self.confidence,
        }


@dataclass
class Advice:
    """What a recommendation says and the saving behind it, before :meth:`recommendation`
    adds the analyzer, the saving as a share of the step and the confidence: for an analyzer
    that builds several recommendations the same way."""

    kind: str
    title: str
    evidence: str
    fix: dict[str, str]
    savings_ms: float  # per step
    ops: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)

    def recommendation(self, analyzer: str, step_ms: float, confidence: str) -> Recommendation:
        return Recommendation(
            analyzer=analyzer,
            kind=self.kind,
            title=self.title,
            evidence=self.evidence,
            fix=self.fix,
            est_savings_ms=self.savings_ms,
            est_savings_pct=savings_pct(self.savings_ms, step_ms),
            confidence=confidence,
            ops=self.ops,
            values=self.values,
        )


@dataclass
class AnalyzerResult:
    """What one analyzer found: metrics (JSON-ready scalars, lists, dicts), tables (columnar:
    ``frame(name)`` gives one as a pandas DataFrame), advice."""

    name: str
    metrics: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    recommendations: list[Recommendation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # caveats a reader should see
    error: str | None = None  # set when the analyzer failed on this profile

    def frame(self, name: str) -> Any:
        """Table ``name`` as a pandas DataFrame."""
        return self.tables[name].to_pandas()


class Analyzer:
    """Base class of analyzers; subclasses set the class attributes and ``analyze``."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    # {table: [columns]} this analyzer reads from the timeline's tables; checked against
    # tpuperf.schema when the analyzer is loaded (see check_requires).
    requires: ClassVar[dict[str, list[str]]] = {}

    def analyze(self, timeline: Timeline, config: AnalysisConfig) -> AnalyzerResult:
        raise NotImplementedError


def check_requires(analyzer: Analyzer) -> None:
    """Raise when an analyzer declares a table or column the schema does not have."""
    for table, columns in analyzer.requires.items():
        known = schema.TABLES.get(table)
        if known is None:
            raise UsageError(f"analyzer {analyzer.name!r} requires unknown table {table!r}")
        unknown = [c for c in columns if c not in known]
        if unknown:
            raise UsageError(
                f"analyzer {analyzer.name!r} requires columns {table}.{', '.join(unknown)}, "
                "which no profile has"
            )


def run(analyzer: Analyzer, timeline: Timeline, config: AnalysisConfig) -> AnalyzerResult:
    """Run one analyzer: with the timeline, or, for a plug-in written for the first interface
    (``analyze(profile, config)``), with the profile."""
    parameters = list(inspect.signature(analyzer.analyze).parameters)
    if parameters and parameters[0] == "profile":
        return analyzer.analyze(timeline.profile, config)  # type: ignore[arg-type]
    return analyzer.analyze(timeline, config)


# The built-in analyzers, in report order: (name, "module:Class").
BUILTIN: list[tuple[str, str]] = [
    ("steps", "tpuperf.analyzers.steps:StepsAnalyzer"),
    ("idle", "tpuperf.analyzers.idle:IdleAnalyzer"),
    ("collectives", "tpuperf.analyzers.collectives:CollectivesAnalyzer"),
    ("roofline", "tpuperf.analyzers.roofline:RooflineAnalyzer"),
    ("memory", "tpuperf.analyzers.memory:MemoryAnalyzer"),
]


def _load(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def _instance(obj: Any) -> Analyzer:
    return obj() if isinstance(obj, type) else obj


def _entry_point_analyzers() -> list[tuple[str, Any]]:
    from tpuperf._entry_points import entry_points

    return [(ep.name, ep) for ep in entry_points(ENTRY_POINT_GROUP)]


def entry_point_names() -> list[str]:
    """The names of the plug-in analyzers installed (none of them loaded)."""
    return [name for name, _ in _entry_point_analyzers()]


def available() -> dict[str, Analyzer]:
    """Every analyzer by name: the built-ins, then those of installed plug-ins.

    A plug-in that fails to load is skipped here and reported by
    :func:`plugin_errors`, so one broken package does not take the tool down.
    """
    analyzers: dict[str, Analyzer] = {}
    for name, target in BUILTIN:
        analyzers[name] = _instance(_load(target))
        check_requires(analyzers[name])
    _plugin_errors.clear()
    for name, ep in _entry_point_analyzers():
        if name in analyzers:
            continue  # built-ins win; a plug-in cannot shadow them
        try:
            analyzer = _instance(ep.load())
            check_requires(analyzer)
        except Exception as exc:  # a third party's import error is theirs to fix
            _plugin_errors[name] = f"{type(exc).__name__}: {exc}"
            continue
        analyzers[name] = analyzer
    return analyzers


_plugin_errors: dict[str, str] = {}


def plugin_errors() -> dict[str, str]:
    """Plug-ins the last :func:`available` call could not load: name -> error."""
    return dict(_plugin_errors)


def select(names: list[str] | None) -> list[Analyzer]:
    """The analyzers to run, in registry order.

    An unknown name is a UsageError that lists the valid ones.
    """
    registry = available()
    if not names:
        return list(registry.values())
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise UsageError(
            f"unknown analyzer {', '.join(repr(n) for n in unknown)}; "
            f"valid: {', '.join(registry)} (see `tpuperf analyzers`)"
        )
    wanted = set(names)
    return [a for n, a in registry.items() if n in wanted]
