"""steps: step time, its per-device breakdown, and stragglers across devices and hosts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd
from tpuperf.analyzers import _timeline
from tpuperf.analyzers.base import (
    KIND_STRAGGLER,
    AnalysisConfig,
    Analyzer,
    AnalyzerResult,
    Recommendation,
    savings_pct,
)

if TYPE_CHECKING:
    from tpuperf.profile import Profile

# The constant that makes the MAD of a normal sample estimate its standard deviation
# (Iglewicz and Hoaglin); with it |z| > 3.5 is the usual outlier rule, as in XProf.
_MAD_SCALE = 0.6745
# When more than half the devices share one value the MAD is 0; the mean absolute
# deviation, scaled to match (1.253314 = sqrt(pi/2)), takes over (IBM's convention).
_MEANAD_SCALE = 1.253314


def _work_by_device(
    tl: _timeline.Timeline,
) -> dict[tuple[str, int], tuple[float, frozenset[tuple[str, str]]]]:
    """Per device: ops per step, and the distinct (module, op) pairs it ran in the windows."""
    out = {}
    steps = max(len(tl.steps_selected), 1)
    for key, group in tl.ops.groupby(["host", "device"], observed=True, sort=True):
        pairs = frozenset(zip(group["module"].astype(str), group["op"].astype(str), strict=True))
        out[_timeline.device_key(key)] = (len(group) / steps, pairs)
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
    median_count = float(np.median([c for c, _ in others]))
    shared = [len(pairs & p) / max(len(pairs | p), 1) for _, p in others]
    similar = float(np.median(shared)) >= 0.9
    close = median_count > 0 and abs(count - median_count) <= 0.1 * median_count
    if similar and close:
        return True, ""
    return False, (
        f"it runs {count:g} ops per step against a median of {median_count:g} on the others"
        + ("" if similar else ", and not the same ones")
    )


def modified_z(values: np.ndarray) -> np.ndarray:
    """Modified z-scores (Iglewicz and Hoaglin); zeros when the values do not vary."""
    x = np.asarray(values, dtype="float64")
    if len(x) < 3:
        return np.zeros(len(x))
    med = np.median(x)
    mad = np.median(np.abs(x - med))
    if mad > 0:
        return _MAD_SCALE * (x - med) / mad
    meanad = np.mean(np.abs(x - med))
    if meanad > 0:
        return (x - med) / (_MEANAD_SCALE * meanad)
    return np.zeros(len(x))


class StepsAnalyzer(Analyzer):
    name = "steps"
    summary = "Step time (median, mean, p90), per-device breakdown, stragglers by modified z-score."
    requires: ClassVar[dict[str, list[str]]] = {
        "ops": ["host", "device", "line", "kind", "start_ps", "dur_ps"],
        "steps": ["host", "device", "step", "start_ps", "end_ps", "source"],
        "modules": ["host", "device", "module", "start_ps", "dur_ps"],
    }

    def analyze(self, profile: Profile, config: AnalysisConfig) -> AnalyzerResult:
        tl = _timeline.timeline(profile, config)
        result = AnalyzerResult(self.name, notes=list(tl.notes))
        bd = tl.breakdown
        metrics: dict[str, Any] = {
            "step_source": tl.step_source,
            "steps_analyzed": tl.steps_selected,
            "steps_excluded": tl.steps_excluded,
            "step_time_ms": _timeline.stats_ms(tl.step_time_ps) if tl.has_steps else None,
            "devices": tl.n_devices,
            "hosts": len(set(tl.devices["host"])),
        }
        if bd.empty:
            result.metrics = metrics
            result.notes.append("no ops in the analysed windows")
            return result

        # no_op: nothing ran; idle (DESIGN.md) also counts NCCL/memcpy-only time on GPU.
        parts = ["compute_ps", "exposed_collective_ps", "other_ps", "no_op_ps", "idle_ps"]
        per_device = bd.groupby(["host", "device"], sort=True)[["step_ps", *parts]].mean()
        per_device["steps"] = bd.groupby(["host", "device"], sort=True).size()
        metrics["breakdown_ms_per_step"] = {
            p.removesuffix("_ps"): float(bd[p].mean() / 1e9) for p in parts
        }
        stragglers, z = self._stragglers(per_device, config)
        per_device["compute_z"] = z
        metrics["stragglers"] = stragglers
        metrics["straggler_hosts"] = self._host_stragglers(per_device, config)
        result.metrics = metrics
        table = bd[["host", "device", "step", "step_ps", *parts]].copy()
        for col in ["step_ps", *parts]:
            table[col.replace("_ps", "_ms")] = table.pop(col) / 1e9
        result.tables["breakdown"] = table
        dev_table = per_device.reset_index()
        for col in ["step_ps", *parts]:
            dev_table[col.replace("_ps", "_ms_per_step")] = dev_table.pop(col) / 1e9
        result.tables["devices"] = dev_table
        if stragglers:
            result.recommendations.append(self._recommend(stragglers, tl, _work_by_device(tl)))
        return result

    def _stragglers(
        self, per_device: pd.DataFrame, config: AnalysisConfig
    ) -> tuple[list[dict[str, Any]], np.ndarray]:
        compute = per_device["compute_ps"].to_numpy(dtype="float64")
        z = modified_z(compute)
        median_compute = float(np.median(compute)) if len(compute) else 0.0
        collective = per_device["exposed_collective_ps"].to_numpy(dtype="float64")
        median_collective = float(np.median(collective)) if len(collective) else 0.0
        found = []
        for i, (key, row) in enumerate(per_device.iterrows()):
            host, device = _timeline.device_key(key)
            # Only slow chips: a chip with unusually little compute is not what holds a step back.
            if z[i] <= config.straggler_z:
                continue
            found.append(
                {
                    "host": host,
                    "device": device,
                    "z": float(z[i]),
                    "compute_ms_per_step": float(row["compute_ps"] / 1e9),
                    "median_compute_ms_per_step": median_compute / 1e9,
                    "exposed_collective_ms_per_step": float(row["exposed_collective_ps"] / 1e9),
                    "median_exposed_collective_ms_per_step": median_collective / 1e9,
                    # The signature: the others wait for it inside their synchronous collectives.
                    "shortest_collective": bool(
                        collective.max() > 0 and collective[i] <= collective.min()
                    ),
                }
            )
        found.sort(key=lambda s: -float(s["z"]))
        return found, z

    def _host_stragglers(
        self, per_device: pd.DataFrame, config: AnalysisConfig
    ) -> list[dict[str, Any]]:
        """Hosts whose devices, taken together, compute slowest (needs three hosts or more)."""
        per_host = per_device.groupby(level="host")["compute_ps"].median()
        z = modified_z(per_host.to_numpy(dtype="float64"))
        median = float(per_host.median()) if len(per_host) else 0.0
        return [
            {
                "host": str(host),
                "z": float(z[i]),
                "compute_ms_per_step": float(value) / 1e9,
                "median_compute_ms_per_step": median / 1e9,
            }
            for i, (host, value) in enumerate(per_host.items())
            if z[i] > config.straggler_z
        ]

    def _recommend(
        self,
        stragglers: list[dict[str, Any]],
        tl: _timeline.Timeline,
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
            fix={
                "tpu": (
                    f"Check {names[0]}'s chip and host: `tpu-info` for the chip's state, host CPU "
                    "contention (other processes, data loading pinned to that host), and uneven "
                    "shards (a batch or sequence split that gives that device more work); "
                    "replace the VM if the chip itself is slow."
                ),
                "gpu": (
                    f"Check {names[0]}: `nvidia-smi -q -d PERFORMANCE,CLOCK` (or `rocm-smi`) for "
                    "thermal or power throttling, other processes on the GPU, NUMA/PCIe placement "
                    "of its host threads, and uneven shards of the batch."
                ),
            },
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
