"""Run analyzers on a profile and gather their findings into one ranked :class:`Report`.

``analyze(profile)`` is the library's entry point; renderers (terminal,
markdown, JSON via :meth:`Report.to_dict`) only format what it returns.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tpuperf import jsonout
from tpuperf.analyzers import _timeline, base
from tpuperf.analyzers.base import AnalysisConfig, AnalyzerResult, Recommendation
from tpuperf.errors import UsageError

if TYPE_CHECKING:
    from tpuperf.profile import Profile

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
    "top_recommendation": ["object", None],  # kind, est_savings_pct, est_savings_ms
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
    "evidence": "object",  # text, ops, values
    "fix": "object",  # tpu, gpu
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

# Tables in JSON are cut to this many rows (total_rows says how many there were).
JSON_TABLE_ROWS = 50


@dataclass
class Report:
    """A profile's summary, every analyzer's result and the recommendations, ranked."""

    source: str
    platform: str
    summary: dict[str, Any]
    results: dict[str, AnalyzerResult]
    recommendations: list[Recommendation]  # highest est_savings_pct first
    top_ops: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    summaries: dict[str, str] = field(default_factory=dict)  # analyzer name -> one-line summary

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
            "top_ops": _records(self.top_ops),
            "recommendations": [
                {"rank": i + 1, **r.to_dict()} for i, r in enumerate(self.recommendations)
            ],
            "analyzers": {
                name: {
                    "summary": self.summaries.get(name, ""),
                    "error": r.error,
                    "metrics": r.metrics,
                    "notes": r.notes,
                    "tables": {t: _table(df) for t, df in r.tables.items()},
                }
                for name, r in self.results.items()
            },
            "notes": self.notes,
        }
        return jsonout.clean(out)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


def parse_steps(text: str) -> tuple[int | None, int | None]:
    """``A:B`` (either side may be empty) -> step numbers [A, B); ``N`` alone is step N."""
    try:
        if ":" not in text:
            n = int(text)
            return n, n + 1
        lo, hi = text.split(":", 1)
        bounds = (int(lo) if lo.strip() else None, int(hi) if hi.strip() else None)
    except ValueError:
        raise UsageError(
            f"--steps {text!r}: expected A:B with integer step numbers, e.g. 2:10"
        ) from None
    if bounds[0] is not None and bounds[1] is not None and bounds[1] <= bounds[0]:
        raise UsageError(f"--steps {text!r}: B must be greater than A")
    return bounds


def analyze(
    profile: Profile,
    config: AnalysisConfig | None = None,
    analyzers: list[str] | None = None,
    steps: str | tuple[int | None, int | None] | None = None,
    host: str | None = None,
) -> Report:
    """Run the analyzers (all by default) on ``profile`` and rank their recommendations.

    ``steps`` ("A:B" or (A, B)) keeps step numbers A <= n < B instead of leaving
    out warm-up steps; ``host`` analyses one host of a multi-host profile. An
    analyzer that fails is recorded in the report (``Report.errors``); the
    others still run.
    """
    config = config if config is not None else AnalysisConfig()
    if steps is not None:
        config.steps = parse_steps(steps) if isinstance(steps, str) else steps
    if host is not None:
        config.host = host
    chosen = base.select(analyzers)
    tl = _timeline.timeline(profile, config)  # bad --steps/--host fail here, before analyzers

    results: dict[str, AnalyzerResult] = {}
    summaries: dict[str, str] = {}
    for analyzer in chosen:
        summaries[analyzer.name] = analyzer.summary
        missing = _missing_columns(profile, analyzer)
        if missing:
            results[analyzer.name] = AnalyzerResult(
                analyzer.name, error=f"needs columns the profile lacks: {', '.join(missing)}"
            )
            continue
        try:
            results[analyzer.name] = analyzer.analyze(profile, config)
        except Exception as exc:  # one analyzer's bug must not hide the others' findings
            results[analyzer.name] = AnalyzerResult(
                analyzer.name, error=f"{type(exc).__name__}: {exc}"
            )
    recommendations = sorted(
        (
            rec
            for r in results.values()
            for rec in r.recommendations
            if _finite(rec.est_savings_pct) >= MIN_SAVINGS_PCT
        ),
        key=lambda r: (-_finite(r.est_savings_pct), -_finite(r.est_savings_ms)),
    )
    roofline = results.get("roofline")
    summary = _summary(profile, tl, config, recommendations)
    notes = list(profile.warnings) + list(tl.notes)
    top = _top_ops(tl, roofline.tables.get("ops") if roofline else None, config.top_ops)
    return Report(
        source=profile.source,
        platform=profile.platform,
        summary=summary,
        results=results,
        recommendations=recommendations,
        top_ops=top,
        notes=notes,
        summaries=summaries,
    )


def _missing_columns(profile: Profile, analyzer: base.Analyzer) -> list[str]:
    missing = []
    for table, columns in analyzer.requires.items():
        frame = getattr(profile, table, None)
        if frame is None:
            missing.append(f"{table}.*")
            continue
        missing.extend(f"{table}.{c}" for c in columns if c not in frame.columns)
    return missing


def _finite(value: float) -> float:
    return value if isinstance(value, (int, float)) and math.isfinite(value) else 0.0


def _summary(
    profile: Profile,
    tl: _timeline.Timeline,
    config: AnalysisConfig,
    recommendations: list[Recommendation],
) -> dict[str, Any]:
    # Computed here from the shared timeline, not read from analyzers, so the summary is the
    # same whichever analyzers were selected (fleet scans flatten it).
    from tpuperf.analyzers import roofline as roofline_analyzer

    bd = tl.breakdown
    peaks_by_device = roofline_analyzer.device_peaks(tl, config)
    pct: dict[str, float | None] = dict.fromkeys(
        (
            "busy_pct",
            "compute_pct",
            "exposed_collective_pct",
            "exposed_copy_pct",
            "idle_pct",
            "no_op_pct",
        )
    )
    if not bd.empty:
        dev = bd.groupby(["host", "device"]).sum(numeric_only=True)
        for name, col in (
            ("busy_pct", "busy_ps"),
            ("compute_pct", "compute_ps"),
            ("exposed_collective_pct", "exposed_collective_ps"),
            ("exposed_copy_pct", "other_ps"),
            ("idle_pct", "idle_ps"),
            ("no_op_pct", "no_op_ps"),
        ):
            pct[name] = float((100.0 * dev[col] / dev["step_ps"]).mean())
    span_idle = (
        float((100.0 * tl.span["idle_ps"] / tl.span["step_ps"]).mean())
        if not tl.span.empty
        else None
    )
    util = roofline_analyzer.utilization(tl, roofline_analyzer.leaf_costs(tl.ops), peaks_by_device)
    peaks = list(peaks_by_device.values())
    common = max(set(peaks), key=peaks.count) if peaks else None
    chips_seen = sorted({str(c) for c in tl.devices["chip"] if str(c)})
    top = recommendations[0] if recommendations else None
    return {
        "platform": profile.platform,
        "chip": chips_seen[0] if len(chips_seen) == 1 else (", ".join(chips_seen) or None),
        "hosts": len(set(tl.devices["host"])),
        "devices": tl.n_devices,
        "step_source": tl.step_source if tl.has_steps else None,
        "steps_analyzed": len(tl.steps_selected),
        "steps_excluded": len(tl.steps_excluded),
        "step_time_ms": _timeline.stats_ms(tl.step_time_ps)
        if tl.has_steps
        else dict.fromkeys(("median", "mean", "p90", "min", "max")) | {"count": 0},
        "window_ms": float(bd["step_ps"].sum() / max(tl.n_devices, 1) / 1e9)
        if not bd.empty
        else 0.0,
        **pct,
        "span_idle_pct": span_idle,
        "equivalent_idle_chips": (
            float(
                bd.groupby(["host", "device"])[["idle_ps", "step_ps"]]
                .sum()
                .eval("idle_ps / step_ps")
                .sum()
            )
            if not bd.empty
            else None
        ),
        "flops_utilization_pct": util["flops_utilization_pct"],
        "mfu_pct": util["mfu_pct"],
        "peak_tflops": common.peak_tflops if common else None,
        "peak_hbm_gbps": common.peak_hbm_gbps if common else None,
        "peaks_source": common.source if common else None,
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


def _top_ops(tl: _timeline.Timeline, roofline_ops: pd.DataFrame | None, n: int) -> pd.DataFrame:
    """The ops with the most self time per step per device, with their roofline bound."""
    ops = tl.ops
    columns = [
        "op",
        "module",
        "kind",
        "count_per_step",
        "ms_per_step",
        "pct_of_busy",
        "bound",
        "efficiency_pct",
    ]
    if ops.empty:
        return pd.DataFrame(columns=columns)
    windows = max(len(tl.windows), 1)
    busy_ps = float(tl.breakdown["busy_ps"].sum()) if not tl.breakdown.empty else 0.0
    grouped = (
        ops.groupby(["module", "op"], observed=True, sort=False)
        .agg(kind=("kind", "first"), count=("self_ps", "size"), self_ps=("self_ps", "sum"))
        .reset_index()
    )
    # Ops that take next to no time (the copy-start halves of async copies, a few ns) are not
    # top ops, even when fewer than n ops take real time.
    grouped = grouped[grouped["self_ps"] > TOP_OP_MIN_SHARE * busy_ps]
    grouped = grouped.sort_values("self_ps", ascending=False).head(n)
    grouped["module"] = grouped["module"].astype(str)
    grouped["op"] = grouped["op"].astype(str)
    grouped["kind"] = grouped["kind"].astype(str)
    grouped["count_per_step"] = grouped.pop("count") / windows
    grouped["pct_of_busy"] = 100.0 * grouped["self_ps"] / busy_ps if busy_ps else np.nan
    grouped["ms_per_step"] = grouped.pop("self_ps") / windows / 1e9
    if roofline_ops is not None and "bound" in roofline_ops:
        grouped = grouped.merge(
            roofline_ops[["module", "op", "bound", "efficiency_pct"]],
            on=["module", "op"],
            how="left",
        )
    else:
        grouped["bound"] = None
        grouped["efficiency_pct"] = np.nan
    grouped["bound"] = grouped["bound"].astype(object).where(grouped["bound"].notna(), None)
    return grouped[columns].reset_index(drop=True)


def _table(frame: pd.DataFrame) -> dict[str, Any]:
    head = frame.head(JSON_TABLE_ROWS)
    return {
        "columns": [str(c) for c in head.columns],
        "rows": head.astype(object).values.tolist(),
        "total_rows": len(frame),
    }


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    rows = frame.astype(object).values.tolist()
    return [dict(zip(frame.columns, row, strict=True)) for row in rows]
