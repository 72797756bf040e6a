"""idle: how much of each iteration the devices sit idle, and whether the host is to blame.

An iteration runs from one step's start to the next step's start (the timeline's iteration
windows), so the host's time between steps counts. Gaps are classified by where they fall:
before a step's first op, after its last or outside the step (between steps: the device waits
for the host or its input), or inside the step (dependency waits and launch gaps; micro when
shorter than ``micro_gap_us``, else macro). Where the profile holds host events
(:mod:`tpuperf.hostview`), the host-bound advice names the functions the devices waited for.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from tpuperf.analyzers import fixes
from tpuperf.analyzers.base import (
    KIND_HOST_BOUND,
    KIND_IDLE_GAPS,
    Advice,
    AnalysisConfig,
    Analyzer,
    AnalyzerResult,
    Recommendation,
    savings_pct,
)

from tpuperf import hostview
from tpuperf.columns import Strings, Table
from tpuperf.timeline import BREAKDOWN_COLUMNS, Timeline
from tpuperf.workload import Workload

# A host-bound verdict needs between-step gaps to be most of the time no op runs, and a
# visible part of the step (not 0.03% of it, as on a saturated inference loop).
_HOST_BOUND_SHARE = 0.5
_HOST_BOUND_MIN_PCT = 5.0


def _span_metrics(tl: Timeline) -> dict[str, Any]:
    """Idle over each device's first to last op (XProf's device idle) and outside the steps."""
    views = tl.devices
    if not views:
        return {"span_idle_pct": None, "outside_steps_ms": None, "outside_steps_idle_ms": None}
    span_idle = [
        100.0 * float(v.span_breakdown["idle_ps"][0]) / float(v.span_breakdown["step_ps"][0])
        for v in views
    ]
    outside = np.array([v.outside["outside_ps"] for v in views], dtype=np.float64)
    busy = np.array([v.outside["busy_ps"] for v in views], dtype=np.float64)
    return {
        "span_idle_pct": float(np.mean(span_idle)),
        # Per device, mean: time between the first and last op that no step covers.
        "outside_steps_ms": float(outside.mean() / 1e9) if tl.has_steps else 0.0,
        "outside_steps_idle_ms": (
            float(np.clip(outside - busy, 0, None).mean() / 1e9) if tl.has_steps else 0.0
        ),
    }


def _device_mean_pct(part_ps: np.ndarray, window_ps: np.ndarray) -> float:
    """``part`` over the window per device, in percent, averaged over devices (0 without)."""
    keep = window_ps > 0
    return float((100.0 * part_ps[keep] / window_ps[keep]).mean()) if keep.any() else 0.0


# A function is named as one the devices waited for when it explains this share of the mean
# iteration (at most _NAMED of them).
_NAMED_MIN_SHARE = 0.01
_NAMED = 5

_LOADING_FIX = (
    "Overlap loading with compute: load the next batch in a background thread (or grain "
    "workers, tf.data `.prefetch`) and `jax.device_put` it to the devices ahead of the step "
    "(`flax.jax_utils.prefetch_to_device`)."
)
_LOGGING_FIX = (
    "Log and checkpoint asynchronously or every N steps (a background thread, Orbax's async "
    "checkpointing), and keep `float(loss)` / `jax.device_get` off the hot path: fetch "
    "metrics a step late."
)
_SYNC_FIX = (
    "Avoid `block_until_ready()` and `float(loss)` on the hot path: let dispatch run ahead "
    "and read values a step late."
)
_OTHER_FIX = (
    "Move Python work between steps off the hot path, or fold Python loops into the jitted "
    "step (`jax.lax.scan` / `jax.lax.fori_loop`)."
)


def _fix_for(function: str) -> str:
    name = function.lower()
    if any(w in name for w in ("block", "__float__", "device_get", "item", "sync")):
        return _SYNC_FIX
    if any(w in name for w in ("log", "metric", "checkpoint", "save", "summary", "print")):
        return _LOGGING_FIX
    if hostview.is_loading(function):
        return _LOADING_FIX
    return _OTHER_FIX


def _waited_for(host: hostview.HostActivity, iteration_ms: float) -> list[dict[str, Any]]:
    """The user functions the devices waited for between steps, most idle first: by their
    idle outside the step windows when the steps leave time outside them (step markers),
    else by their idle at the steps' edges (module periods)."""
    table = host.table
    if not table.n or not host.has_python:
        return []
    column = (
        "outside_steps_ms_per_iteration"
        if host.outside_steps_ms_per_iteration > 0
        else "between_ms_per_iteration"
    )
    kind = table.strings("kind").tolist()
    ms = table.array(column)
    rows = [i for i in range(table.n) if kind[i] == hostview.KIND_PYTHON]
    rows = sorted(rows, key=lambda i: -ms[i])
    rows = [i for i in rows if ms[i] >= _NAMED_MIN_SHARE * iteration_ms][:_NAMED]
    names, where = table.strings("name").tolist(), table.strings("where").tolist()
    return [
        {
            "function": names[i],
            "where": where[i],
            "ms_per_iteration": float(ms[i]),
            "calls_per_iteration": float(table.array("calls_per_iteration")[i]),
            "ms_per_call": float(table.array("ms_per_call")[i]),
        }
        for i in rows
    ]


def _host_metrics(host: hostview.HostActivity) -> dict[str, Any]:
    return {
        "iterations": host.iterations,
        "idle_ms_per_iteration": host.idle_ms_per_iteration,
        "between_steps_idle_ms_per_iteration": host.between_ms_per_iteration,
        "outside_steps_idle_ms_per_iteration": host.outside_steps_ms_per_iteration,
        "explained_ms_per_iteration": host.explained_ms_per_iteration,
        "explained_between_steps_ms_per_iteration": host.explained_between_ms_per_iteration,
        "input": dict(host.input),
    }


# The breakdown columns summed per device, in the devices table's order: all but the split of
# busy time.
_SUMMED = tuple(
    c for c in BREAKDOWN_COLUMNS if c not in ("compute_ps", "exposed_collective_ps", "other_ps")
)


class IdleAnalyzer(Analyzer):
    name = "idle"
    summary = "Idle time per step: gaps between steps (host/input bound) vs inside steps."
    requires: ClassVar[dict[str, list[str]]] = {
        "ops": ["host", "device", "line", "kind", "start_ps", "dur_ps"],
        "steps": ["host", "device", "step", "start_ps", "end_ps", "source"],
    }

    def analyze(self, timeline: Timeline, config: AnalysisConfig) -> AnalyzerResult:
        tl = timeline
        result = AnalyzerResult(self.name, notes=list(tl.notes))
        views = tl.devices
        if not tl.n_windows:
            result.metrics = {"idle_pct": None}
            result.notes.append("no ops in the analysed windows")
            return result

        # Iterations, not only steps: the host's time between one step and the next is idle
        # the device waits through, as much as a gap inside a step.
        dev = {c: np.array([int(v.iteration_breakdown[c].sum()) for v in views]) for c in _SUMMED}
        outside_idle = float(sum(int(v.outside_steps["outside_no_op_ps"].sum()) for v in views))
        dev_idle_pct = 100.0 * dev["idle_ps"] / dev["step_ps"]
        dev_between = dev["leading_idle_ps"] + dev["trailing_idle_ps"]
        idle_pct = float(dev_idle_pct.mean())  # DESIGN.md: averaged over devices
        total_idle = float(dev["idle_ps"].sum())
        no_op = float(dev["no_op_ps"].sum())  # gaps: time no op at all ran
        between = float(dev_between.sum())
        interior = float(dev["interior_idle_ps"].sum())
        window = float(dev["step_ps"].sum())
        between_share = between / no_op if no_op > 0 else 0.0
        host_bound = (
            tl.has_steps
            and between_share > _HOST_BOUND_SHARE
            and window > 0
            and 100.0 * between / window >= _HOST_BOUND_MIN_PCT
        )
        metrics: dict[str, Any] = {
            "idle_pct": idle_pct,
            "busy_pct": 100.0 - idle_pct,
            "idle_ms_per_step": tl.per_iteration(total_idle) / 1e9,
            # Idle after a step's end and before the next step's start, per iteration.
            "outside_steps_idle_ms_per_iteration": tl.per_iteration(outside_idle) / 1e9,
            # GPU only: idle (no compute kernel) while NCCL kernels or memcpys run.
            "collective_or_copy_only_pct": 100.0 * (total_idle - no_op) / window if window else 0.0,
            "no_op_pct": float((100.0 * dev["no_op_ps"] / dev["step_ps"]).mean()),
            # The no-op time split by where it falls, averaged over devices as no_op_pct is:
            # the parts add up to it.
            "between_steps_idle_pct": _device_mean_pct(dev_between, dev["step_ps"]),
            "in_step_idle_pct": _device_mean_pct(dev["interior_idle_ps"], dev["step_ps"]),
            "micro_idle_pct": _device_mean_pct(dev["micro_idle_ps"], dev["step_ps"]),
            "macro_idle_pct": _device_mean_pct(
                dev["interior_idle_ps"] - dev["micro_idle_ps"], dev["step_ps"]
            ),
            "micro_gap_us": config.micro_gap_us,
            "micro_gaps": int(dev["micro_gaps"].sum()),
            "macro_gaps": int(dev["macro_gaps"].sum()),
            "between_steps_share_of_gaps_pct": 100.0 * between_share,
            "host_bound": bool(host_bound),
            # Idle fraction times device count: how many whole chips the idle time adds up to.
            "equivalent_idle_chips": float(dev_idle_pct.sum() / 100.0),
            "devices": len(views),
            **_span_metrics(tl),
        }
        result.metrics = metrics
        result.tables["devices"] = Table(
            {
                "host": Strings.from_list([v.host for v in views]),
                "device": np.array([v.device for v in views], dtype=np.int64),
                "micro_gaps": dev["micro_gaps"],
                "macro_gaps": dev["macro_gaps"],
                "idle_pct": dev_idle_pct,
                **{c.replace("_ps", "_ms"): dev[c] / 1e9 for c in _SUMMED if c.endswith("_ps")},
                "between_steps_idle_ms": dev_between / 1e9,
            }
        )

        step_ms = tl.mean_window_ps / 1e9
        between_ms = tl.per_iteration(between) / 1e9
        interior_ms = tl.per_iteration(interior) / 1e9
        host = hostview.activity(tl) if tl.has_steps else None
        if host is not None:
            metrics["host"] = _host_metrics(host)
            result.tables["host_events"] = host.table
            result.notes.extend(n for n in host.notes if n not in result.notes)
        named = _waited_for(host, step_ms) if host is not None else []
        if named:
            result.recommendations.append(
                self._host_code(
                    named, between_ms, step_ms, metrics, host_bound, fixes.workload_of(tl)
                )
            )
        elif between_ms > 0 and tl.has_steps:
            result.recommendations.append(
                self._host_bound(
                    between_ms,
                    step_ms,
                    between_share,
                    metrics,
                    host_bound,
                    between_calls=tl.step_source == "module_period",
                    workload=fixes.workload_of(tl),
                )
            )
        if interior_ms > 0:
            result.recommendations.append(self._gaps(interior_ms, step_ms, metrics, tl))
        return result

    def _host_bound(
        self,
        between_ms: float,
        step_ms: float,
        share: float,
        metrics: dict[str, Any],
        verdict: bool,
        between_calls: bool,
        workload: Workload,
    ) -> Recommendation:
        if between_calls:
            # Steps are the executions of one jitted function: the gaps are the host's time
            # between calls (dispatch, Python, host syncs), not a step's input pipeline.
            title = "Host time between jit calls: devices wait for the next call"
            evidence = (
                f"{between_ms:.3f} ms per execution of idle between one call of the dominant "
                f"jitted function and the next ({metrics['between_steps_idle_pct']:.1f}% of the "
                f"time from one call to the next, {100 * share:.0f}% of the time no op runs); "
                "no Steps line or step markers, so each call counts as a step"
            )
            fix = fixes.fewer_calls(workload)
        else:
            title = (
                "Host-bound: devices wait for input before each step"
                if verdict
                else "Devices wait between steps"
            )
            evidence = (
                f"{between_ms:.3f} ms per iteration of idle before the first op or after the "
                "last op of each step, or between steps "
                f"({metrics['between_steps_idle_pct']:.1f}% of the iteration, "
                f"{100 * share:.0f}% of the time no op runs)"
            )
            fix = fixes.input_pipeline(workload)
        values = {
            "between_steps_idle_ms_per_step": between_ms,
            "between_steps_share_of_gaps_pct": 100.0 * share,
        }
        advice = Advice(KIND_HOST_BOUND, title, evidence, fix, savings_ms=between_ms, values=values)
        return self._host_bound_rec(advice, step_ms, verdict)

    def _host_bound_rec(self, advice: Advice, step_ms: float, verdict: bool) -> Recommendation:
        """Host-bound advice: high confidence where the host-boundness verdict says so."""
        return advice.recommendation(self.name, step_ms, "high" if verdict else "medium")

    def _host_code(
        self,
        named: list[dict[str, Any]],
        between_ms: float,
        step_ms: float,
        metrics: dict[str, Any],
        verdict: bool,
        workload: Workload,
    ) -> Recommendation:
        """Host-bound, naming the code the devices waited for: each function's device-idle
        time per iteration (its self time as the innermost user frame, between steps), and
        the fix that fits it. Savings: the idle those functions explain, at most the
        between-steps idle."""
        explained = sum(f["ms_per_iteration"] for f in named)
        savings = min(explained, between_ms)
        listed = ", ".join(
            f"{f['function']} ({f['where']}, {f['ms_per_iteration']:.2f} ms)" for f in named
        )
        title = (
            "Host-bound: devices wait for "
            + " and ".join(f"{f['function']} ({f['ms_per_iteration']:.1f} ms)" for f in named[:2])
            + (f" and {len(named) - 2} more" if len(named) > 2 else "")
            + " every iteration"
        )
        evidence = (
            f"{between_ms:.3f} ms per iteration of device idle between steps "
            f"({metrics['between_steps_idle_pct']:.1f}% of the iteration); the host ran "
            f"{listed} per iteration while the devices waited (Python tracer, self time of "
            "the innermost user frame)"
        )
        chosen: list[str] = []
        for f in named:
            text = _fix_for(f["function"])
            if text not in chosen:
                chosen.append(text)
        fix = fixes.for_platform(workload, " ".join(chosen))
        values = {
            "between_steps_idle_ms_per_iteration": between_ms,
            "explained_ms_per_iteration": explained,
            "functions": named,
        }
        advice = Advice(KIND_HOST_BOUND, title, evidence, fix, savings_ms=savings, values=values)
        return self._host_bound_rec(advice, step_ms, verdict)

    def _gaps(
        self, interior_ms: float, step_ms: float, metrics: dict[str, Any], tl: Timeline
    ) -> Recommendation:
        micro_share = (
            metrics["micro_idle_pct"] / metrics["in_step_idle_pct"]
            if metrics["in_step_idle_pct"]
            else 0
        )
        mostly_micro = micro_share > 0.5
        return Recommendation(
            analyzer=self.name,
            kind=KIND_IDLE_GAPS,
            title=(
                "Launch gaps between ops inside each step"
                if mostly_micro
                else "Devices stall inside each step"
            ),
            evidence=(
                f"{interior_ms:.3f} ms per step idle between ops inside steps "
                f"({metrics['in_step_idle_pct']:.1f}% of the iteration): "
                f"{metrics['micro_gaps']} gaps "
                f"under {metrics['micro_gap_us']:g} us ({metrics['micro_idle_pct']:.1f}%), "
                f"{metrics['macro_gaps']} longer ({metrics['macro_idle_pct']:.1f}%)"
            ),
            fix=fixes.in_step_gaps(fixes.workload_of(tl)),
            est_savings_ms=interior_ms,
            est_savings_pct=savings_pct(interior_ms, step_ms),
            # Dependency waits cannot all be removed; the estimate is a loose upper bound.
            confidence="medium" if mostly_micro else "low",
            values={
                "in_step_idle_ms_per_step": interior_ms,
                "micro_idle_pct": metrics["micro_idle_pct"],
                "macro_idle_pct": metrics["macro_idle_pct"],
            },
        )
