"""The analyzer plug-in interface and the one registry of analyzers.

An analyzer has a ``name``, a one-line ``summary``, the table columns it
``requires`` and ``analyze(profile, config) -> AnalyzerResult``. It returns
data (metrics, tables, recommendations); it never prints, reads files or
changes the profile. The built-in analyzers are listed in :data:`BUILTIN`;
third parties add theirs through the entry point group ``tpuperf.analyzers``,
each entry pointing at an analyzer class or instance.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from tpuperf.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from tpuperf.profile import Profile

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


@dataclass
class AnalysisConfig:
    """Options every analyzer sees. ``None`` means "not given"."""

    warmup_steps: int = 1  # leading steps left out when no explicit step range is given
    steps: tuple[int | None, int | None] | None = None  # step numbers [A, B)
    host: str | None = None
    peak_tflops: float | None = None  # used only when neither the profile nor the chip table knows
    peak_hbm_gbps: float | None = None
    micro_gap_us: float = 10.0  # in-step gaps shorter than this are launch overhead (micro)
    straggler_z: float = 3.5  # |modified z| above this marks a straggler (XProf's threshold)
    top_ops: int = 10
    # Derived tables shared by the analyzers of one run (see _timeline.timeline); a memo,
    # so the profile is reduced to step windows and busy sets once, not once per analyzer.
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


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
    fix: dict[str, str]  # {"tpu": ..., "gpu": ...}: the code change or XLA flags
    est_savings_ms: float  # per step; an upper bound derived from the evidence
    est_savings_pct: float  # of the mean step window, 0-100 (see savings_pct)
    confidence: str  # one of CONFIDENCE
    ops: list[str] = field(default_factory=list)  # the ops behind the evidence, worst first
    values: dict[str, Any] = field(default_factory=dict)  # the evidence's numbers, by name

    def to_dict(self) -> dict[str, Any]:
        return {
            "analyzer": self.analyzer,
            "kind": self.kind,
            "title": self.title,
            "evidence": {"text": self.evidence, "ops": list(self.ops), "values": dict(self.values)},
            "fix": dict(self.fix),
            "est_savings_ms": self.est_savings_ms,
            "est_savings_pct": self.est_savings_pct,
            "confidence": self.confidence,
        }


@dataclass
class AnalyzerResult:
    """What one analyzer found: metrics (JSON-ready scalars, lists, dicts), tables, advice."""

    name: str
    metrics: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    recommendations: list[Recommendation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # caveats a reader should see
    error: str | None = None  # set when the analyzer failed on this profile


class Analyzer:
    """Base class of analyzers; subclasses set the class attributes and ``analyze``."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    # {table: [columns]} this analyzer reads, checked against tpuperf.schema by tests.
    requires: ClassVar[dict[str, list[str]]] = {}

    def analyze(self, profile: Profile, config: AnalysisConfig) -> AnalyzerResult:
        raise NotImplementedError


# The built-in analyzers, in report order: (name, "module:Class").
BUILTIN: list[tuple[str, str]] = [
    ("steps", "tpuperf.analyzers.steps:StepsAnalyzer"),
    ("idle", "tpuperf.analyzers.idle:IdleAnalyzer"),
    ("collectives", "tpuperf.analyzers.collectives:CollectivesAnalyzer"),
    ("roofline", "tpuperf.analyzers.roofline:RooflineAnalyzer"),
]


def _load(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def _instance(obj: Any) -> Analyzer:
    return obj() if isinstance(obj, type) else obj


def _entry_point_analyzers() -> list[tuple[str, Any]]:
    from importlib.metadata import entry_points

    found = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.append((ep.name, ep))
    return found


def available() -> dict[str, Analyzer]:
    """Every analyzer by name: the built-ins, then those of installed plug-ins.

    A plug-in that fails to load is skipped here and reported by
    :func:`plugin_errors`, so one broken package does not take the tool down.
    """
    analyzers: dict[str, Analyzer] = {}
    for name, target in BUILTIN:
        analyzers[name] = _instance(_load(target))
    _plugin_errors.clear()
    for name, ep in _entry_point_analyzers():
        if name in analyzers:
            continue  # built-ins win; a plug-in cannot shadow them
        try:
            analyzer = _instance(ep.load())
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
