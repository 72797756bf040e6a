"""steps: step time, its per-device breakdown, and stragglers across devices and hosts."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from tpuperf.analyzers import fixes
from tpuperf.analyzers.base import (
    KIND_STRAGGLER,
    AnalysisConfig,
    Analyzer,
    AnalyzerResult,
    Recommendation,
    savings_pct,
)
from tpuperf.analyzers.outliers import modified_z

from tpuperf.columns import Strings, Table, index_groups, median
from tpuperf.timeline import DeviceView, Timeline, stats_ms

# The parts of a step the breakdown reports, in order.
PARTS = ("compute_ps", "exposed_collective_ps", "other_ps", "no_op_ps", "idle_ps")


def _work_by_device(
    tl: Timeline,
) -> dict[tuple[str, int], tuple[float, frozenset[tuple[str, str]]]]:
    """Per device: ops per step, and the distinct (module, op) pairs it ran in the windows."""
    out = {}
    steps = max(len(tl.steps_selected), 1)
    for view in tl.devices:
        ops = view.selected_ops("module", "op")
        module, op = ops.strings("module"), ops.strings("op")
        _, _, first = index_groups([module, op])  # (by metadata row on TPU: one pass)
        pairs = frozenset(zip(module.take(first).tolist(), op.take(first).tolist(), strict=True))
        out[view.key] = (ops.n / steps, pairs)
    return out


def _same_work(
    work: dict[tuple[str, int], tuple[float, frozenset[tuple[str, str]]]], key: tuple[str, int]
) -> tuple[bool, str]:
    """Whether device ``key`` runs the same program as the others (the same ops, about as many
    per step), and if not, a phrase that says how it differs."""
    if key not in work or len(work) < 2:
        return True, ""
    count, pairs = work[key]
    others = [v for k, v in work.items() if k != key]
    median_count = median([c for c, _ in others])
    shared = [len(pairs & p) / max(len(pairs | p), 1) for _, p in others]
    similar = median(shared) >= 0.9
    close = median_count > 0 and abs(count - median_count) <= 0.1 * median_count
    if similar and close:
        return True, ""
    return False, (
        f"it runs {count:g} ops per step against a median of {median_count:g} on the others"
        + ("" if similar else ", and not the same ones")
    )


class StepsAnalyzer(Analyzer):
    name = "steps"
    summary = "Step time (median, mean, p90), per-device breakdown, stragglers by modified z-score."
    requires: ClassVar[dict[str, list[str]]] = {
        "ops": ["host", "device", "line", "module", "op", "kind", "start_ps", "dur_ps"],
        "steps": ["host", "device", "step", "start_ps", "end_ps", "source"],
        "modules": ["host", "device", "module", "start_ps", "dur_ps"],
    }

    def analyze(self, timeline: Timeline, config: AnalysisConfig) -> AnalyzerResult:
        tl = timeline
        result = AnalyzerResult(self.name, notes=list(tl.notes))
        metrics: dict[str, Any] = {
            "step_source": tl.step_source,
            "steps_analyzed": list(tl.steps_selected),
            "steps_excluded": list(tl.steps_excluded),
            "step_time_ms": stats_ms(tl.step_time_ps) if tl.has_steps else None,
            # A step's start to the next step's start: the step and the host time after it.
            "iteration_time_ms": stats_ms(tl.iteration_time_ps) if tl.has_steps else None,
            "devices": tl.n_devices,
            "hosts": len(tl.hosts),
        }
        if not tl.n_windows:
            result.metrics = metrics
            result.notes.append("no ops in the analysed windows")
            return result

        # no_op: nothing ran; idle (DESIGN.md) also counts NCCL/memcpy-only time on GPU.
        n = tl.n_windows
        metrics["breakdown_ms_per_step"] = {
            p.removesuffix("_ps"): tl.total(p) / n / 1e9 for p in PARTS
        }
        # The iteration: the step's own parts plus the time outside the step (after it ends,
        # before the next begins), and the part of that no op ran in.
        outside = sum(int(v.outside_steps["outside_ps"].sum()) for v in tl.devices)
        outside_no_op = sum(int(v.outside_steps["outside_no_op_ps"].sum()) for v in tl.devices)
        metrics["breakdown_ms_per_iteration"] = {
            **{p.removesuffix("_ps"): tl.per_iteration(tl.iteration_total(p)) / 1e9 for p in PARTS},
            "outside_steps": tl.per_iteration(outside) / 1e9 if tl.has_steps else 0.0,
            "outside_steps_no_op": tl.per_iteration(outside_no_op) / 1e9 if tl.has_steps else 0.0,
        }
        views = tl.devices
        means = {c: np.array([v.mean(c) for v in views]) for c in ("step_ps", *PARTS)}
        stragglers, z = self._stragglers(views, means, config)
        metrics["stragglers"] = stragglers
        metrics["straggler_hosts"] = self._host_stragglers(views, means["compute_ps"], config)
        result.metrics = metrics
        breakdown = tl.breakdown_table()
        result.tables["breakdown"] = Table(
            {
                "host": breakdown["host"],
                "device": breakdown["device"],
                "step": breakdown["step"],
                **{c.replace("_ps", "_ms"): breakdown.array(c) / 1e9 for c in ("step_ps", *PARTS)},
            }
        )
        result.tables["devices"] = Table(
            {
                "host": Strings.from_list([v.host for v in views]),
                "device": np.array([v.device for v in views], dtype=np.int64),
                "steps": np.array([len(v.windows) for v in views], dtype=np.int64),
                "compute_z": z,
                **{c.replace("_ps", "_ms_per_step"): means[c] / 1e9 for c in ("step_ps", *PARTS)},
            }
        )
        if stragglers:
            result.recommendations.append(self._recommend(stragglers, tl, _work_by_device(tl)))
        return result

    def _stragglers(
        self, views: tuple[DeviceView, ...], means: dict[str, np.ndarray], config: AnalysisConfig
    ) -> tuple[list[dict[str, Any]], np.ndarray]:
        compute = means["compute_ps"]
        z = modified_z(compute)
        median_compute = median(compute) if len(compute) else 0.0
        collective = means["exposed_collective_ps"]
        median_collective = median(collective) if len(collective) else 0.0
        found = []
        for i, view in enumerate(views):
            # Only slow chips: a chip with unusually little compute is not what holds a step back.
            if z[i] <= config.straggler_z:
                continue
            found.append(
                {
                    "host": view.host,
                    "device": view.device,
                    "z": float(z[i]),
                    "compute_ms_per_step": float(compute[i] / 1e9),
                    "median_compute_ms_per_step": median_compute / 1e9,
                    "exposed_collective_ms_per_step": float(collective[i] / 1e9),
                    "median_exposed_collective_ms_per_step": median_collective / 1e9,
                    # The signature: the others wait for it inside their synchronous collectives.
                    "shortest_collective": bool(
                        collective.max() > 0 and collective[i] <= collective.min()
                    ),
                }
            )
        found.sort(key=lambda s: -s["z"])  # type: ignore[operator]
        return found, z

    def _host_stragglers(
        self, views: tuple[DeviceView, ...], compute: np.ndarray, config: AnalysisConfig
    ) -> list[dict[str, Any]]:
        """Hosts whose devices, taken together, compute slowest (needs three hosts or more)."""
        hosts = sorted({v.host for v in views})
        per_host = np.array(
            [median([c for v, c in zip(views, compute, strict=True) if v.host == h]) for h in hosts]
        )
        z = modified_z(per_host)
        middle = median(per_host) if len(per_host) else 0.0
        return [
            {
                "host": host,
                "z": float(z[i]),
                "compute_ms_per_step": float(value) / 1e9,
                "median_compute_ms_per_step": middle / 1e9,
            }
            for i, (host, value) in enumerate(zip(hosts, per_host, strict=True))
            if z[i] > config.straggler_z
        ]

    def _recommend(
        self,
        stragglers: list[dict[str, Any]],
        tl: Timeline,
        work: dict[tuple[str, int], tuple[float, frozenset[tuple[str, str]]]],
    ) -> Recommendation:
        worst = stragglers[0]
        excess_ms = worst["compute_ms_per_step"] - worst["median_compute_ms_per_step"]
        step_ms = tl.mean_window_ps / 1e9
        names = [f"{s['host']}/device:{s['device']}" for s in stragglers]
        steps = len(tl.steps_selected)
        same_work, work_text = _same_work(work, (worst["host"], worst["device"]))
        evidence = (
            f"{names[0]} computes {worst['compute_ms_per_step']:.3f} ms per step against a median "
            f"of {worst['median_compute_ms_per_step']:.3f} ms (modified z = {worst['z']:.1f}); "
            f"its exposed collective time is {worst['exposed_collective_ms_per_step']:.3f} ms "
            f"vs a median of {worst['median_exposed_collective_ms_per_step']:.3f} ms"
            + (" — the shortest, as the others wait for it" if worst["shortest_collective"] else "")
        )
        if len(names) > 1:
            evidence += f"; {len(names)} stragglers: {', '.join(names)}"
        evidence += f"; {steps} step(s) measured"
        if not same_work:
            evidence += f"; but {work_text}, so the difference may be its work, not the chip"
        # Confidence follows the evidence: enough steps, the same program on every device, and
        # the others waiting for this one inside their collectives.
        if not same_work or steps < 3:
            confidence = "low"
        elif worst["shortest_collective"] and steps >= 10:
            confidence = "high"
        else:
            confidence = "medium"
        return Recommendation(
            analyzer=self.name,
            kind=KIND_STRAGGLER,
            title=f"Straggler: {names[0]} holds every step back by {excess_ms:.3f} ms",
            evidence=evidence,
            fix=fixes.straggler(fixes.workload_of(tl), names[0]),
            est_savings_ms=excess_ms,
            est_savings_pct=savings_pct(excess_ms, step_ms),
            confidence=confidence,
            ops=[],
            values={
                "straggler": names[0],
                "modified_z": worst["z"],
                "compute_ms_per_step": worst["compute_ms_per_step"],
                "median_compute_ms_per_step": worst["median_compute_ms_per_step"],
            },
        )
