"""roofline: achieved FLOP/s and GB/s per op and per program against the chip's roofs."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from tpuperf.analyzers import fixes
from tpuperf.analyzers.base import (
    KIND_LOW_COMPUTE_UTILIZATION,
    KIND_MEMORY_BOUND,
    AnalysisConfig,
    Analyzer,
    AnalyzerResult,
    Recommendation,
    savings_pct,
)
from tpuperf.roofline import chips
from tpuperf.roofline import model as rl

from tpuperf.columns import Strings, Table, group_index, sum_by
from tpuperf.timeline import Timeline, window_of
from tpuperf.workload import Workload


class RooflineAnalyzer(Analyzer):
    name = "roofline"
    summary = "Per-op and per-program FLOP/s, GB/s, intensity, bound and roofline efficiency; MFU."
    requires: ClassVar[dict[str, list[str]]] = {
        "devices": ["host", "device", "chip", "peak_tflops", "peak_hbm_gbps"],
        "ops": [
            "host",
            "device",
            "module",
            "op",
            "kind",
            "start_ps",
            "dur_ps",
            "self_ps",
            "flops",
            "model_flops",
            "bytes_accessed",
        ],
        "modules": ["host", "device", "module", "start_ps", "dur_ps"],
    }

    def analyze(self, timeline: Timeline, config: AnalysisConfig) -> AnalyzerResult:
        tl = timeline
        result = AnalyzerResult(self.name, notes=list(tl.notes))
        peaks_by_device = tl.peaks
        peaks = rl.common_peaks(peaks_by_device)
        if peaks is None:
            result.metrics = {"peaks": None}
            result.notes.append("no device ran ops: nothing to put on a roofline")
            return result
        metrics: dict[str, Any] = {
            "peaks": {
                "chip": peaks.chip or None,
                "peak_tflops": peaks.peak_tflops,
                "peak_hbm_gbps": peaks.peak_hbm_gbps,
                "tflops_source": peaks.tflops_source,
                "hbm_source": peaks.hbm_source,
                "ridge_flop_per_byte": (
                    rl.ridge_point(peaks.peak_tflops, peaks.peak_hbm_gbps)  # type: ignore[arg-type]
                    if peaks.known
                    else None
                ),
            }
        }
        result.metrics = metrics
        costed, leaves = _costed(tl, peaks_by_device)
        counted = int(costed.array("count").sum()) if costed.n else 0
        metrics["ops_with_costs_pct"] = 100.0 * counted / leaves if leaves else None
        # One reason, the one that applies: without per-op costs, peaks would not help.
        if not costed.n:
            result.notes.append(
                "this profile records no per-op FLOPs or bytes (GPU and CPU profiles usually do "
                "not): no per-op roofline"
            )
        elif not peaks.known:
            missing = peaks.missing_flags
            result.notes.append(
                f"peaks unknown for chip {peaks.chip or 'unknown'!r}: the profile records no peak "
                "FLOP/s or HBM bandwidth and the chip table has no entry for it, so there is no "
                f"roofline, bound or utilization. Pass {' and '.join(missing)} "
                "(dense bf16 TFLOP/s, HBM GB/s) to get one."
            )
        metrics.update(rl.utilization(tl, peaks_by_device))
        if not costed.n:
            return result

        per_op = self._per_op(costed, tl, peaks)
        result.tables["ops"] = per_op
        result.tables["programs"] = self._per_program(tl, costed, peaks)
        if not peaks.known or "bound" not in per_op:
            return result
        bound = per_op.strings("bound")
        for kind in (rl.BOUND_MEMORY, rl.BOUND_COMPUTE):
            rows = bound.eq(kind)
            metrics[f"{kind}_bound_ms_per_step"] = float(per_op.array_at("ms_per_step", rows).sum())
            metrics[f"{kind}_bound_lost_ms_per_step"] = float(
                per_op.array_at("lost_ms_per_step", rows).sum()
            )
        step_ms = tl.mean_window_ps / 1e9
        mem = per_op.take(bound.eq(rl.BOUND_MEMORY))
        if mem.array("lost_ms_per_step").sum() > 0:
            result.recommendations.append(
                self._memory_rec(mem, peaks, step_ms, fixes.workload_of(tl))
            )
        comp = per_op.take(bound.eq(rl.BOUND_COMPUTE))
        if comp.array("lost_ms_per_step").sum() > 0:
            result.recommendations.append(
                self._compute_rec(comp, peaks, step_ms, metrics, fixes.workload_of(tl))
            )
        return result

    def _per_op(self, costed: Table, tl: Timeline, peaks: chips.Peaks) -> Table:
        """One row per (module, op): totals over selected steps and devices, on the roofline."""
        n = max(tl.n_windows, 1)
        dur = costed.array("dur_ps")
        flops, nbytes = costed.array("flops"), costed.array("bytes_accessed")
        table = Table(
            {
                "module": costed["module"],
                "op": costed["op"],
                "dur_ps": dur,
                "flops": flops,
                "bytes_accessed": nbytes,
                **rl.roofline_columns(flops, nbytes, dur, peaks.peak_tflops, peaks.peak_hbm_gbps),
                "ms_per_step": dur / n / 1e9,
                "lost_ms_per_step": costed.array("lost_ps") / n / 1e9,
                "count_per_step": costed.array("count") / n,
            }
        )
        return table.take(np.argsort(-table.array("ms_per_step"), kind="stable"))

    def _per_program(self, tl: Timeline, costed: Table, peaks: chips.Peaks) -> Table:
        """One row per module: its FLOPs and bytes over the time its executions took."""
        module = costed.strings("module")
        names = sorted(set(module.tolist()))
        index = {name: i for i, name in enumerate(names)}
        of_row = np.array([index[m] for m in module.tolist()], dtype=np.int64)
        k = len(names)
        flops_a = np.bincount(of_row, weights=costed.array("flops"), minlength=k)
        bytes_a = np.bincount(of_row, weights=costed.array("bytes_accessed"), minlength=k)
        op_ps = sum_by(of_row, k, costed.array("dur_ps"))
        # The executions of each module that start in a selected window, over all devices.
        run_ps = np.zeros(k, dtype=np.int64)
        runs = np.zeros(k, dtype=np.int64)
        seen = np.zeros(k, dtype=bool)
        for view in tl.devices:
            modules = view.tables.modules
            if not modules.n:
                continue
            inside = window_of(
                modules.array("start_ps"), view.windows.start_ps, view.windows.end_ps
            )
            rows = np.flatnonzero(inside >= 0)
            name = modules.strings("module").take(rows)
            of_value = np.array([index.get(v, -1) for v in name.values] + [-1], dtype=np.int64)
            which = of_value[name.codes] if len(rows) else np.zeros(0, dtype=np.int64)
            known = which >= 0
            run_ps += sum_by(which[known], k, modules.array_at("dur_ps", rows)[known])
            counts = np.bincount(which[known], minlength=k)
            runs += counts
            seen |= counts > 0
        # Without module executions (some GPU/CPU profiles) the ops' own time stands in.
        dur_ps = np.where(seen, run_ps, op_ps)
        columns: dict[str, Any] = {
            "module": Strings.from_list(names),
            "flops": flops_a,
            "bytes_accessed": bytes_a,
            "dur_ps": dur_ps,
            "executions": runs,
            **rl.roofline_columns(flops_a, bytes_a, dur_ps, peaks.peak_tflops, peaks.peak_hbm_gbps),
        }
        if peaks.peak_tflops is not None:
            columns["flops_utilization_pct"] = (
                100.0 * columns["achieved_tflops"] / peaks.peak_tflops
            )
        table = Table(columns)
        return table.take(np.argsort(-dur_ps, kind="stable"))

    def _memory_rec(
        self, mem: Table, peaks: chips.Peaks, step_ms: float, workload: Workload
    ) -> Recommendation:
        lost_ms = float(mem.array("lost_ms_per_step").sum())
        time_ms = float(mem.array("ms_per_step").sum())
        top = _top(mem, "lost_ms_per_step", 5)
        gbps = float(mem.array("bytes_accessed").sum() / mem.array("dur_ps").sum() * 1000.0)
        ops_text = ", ".join(
            f"{r['op']} {r['ms_per_step']:.3f} ms at {r['achieved_gbps']:.0f} GB/s"
            for r in top.records()
        )
        return Recommendation(
            analyzer=self.name,
            kind=KIND_MEMORY_BOUND,
            title="Memory-bound ops run below HBM bandwidth",
            evidence=(
                f"{mem.n} memory-bound ops take {time_ms:.3f} ms per step at {gbps:.0f} GB/s "
                f"({100 * gbps / peaks.peak_hbm_gbps:.0f}% of {peaks.peak_hbm_gbps:.0f} GB/s); at "  # type: ignore[operator]
                f"full bandwidth they would take {time_ms - lost_ms:.3f} ms. Top: {ops_text}"
            ),
            fix=fixes.memory_bound(workload),
            est_savings_ms=lost_ms,
            est_savings_pct=savings_pct(lost_ms, step_ms),
            confidence="medium",
            ops=top.strings("op").tolist(),
            values={
                "memory_bound_ms_per_step": time_ms,
                "achieved_gbps": gbps,
                "peak_hbm_gbps": peaks.peak_hbm_gbps,
            },
        )

    def _compute_rec(
        self,
        comp: Table,
        peaks: chips.Peaks,
        step_ms: float,
        metrics: dict[str, Any],
        workload: Workload,
    ) -> Recommendation:
        lost_ms = float(comp.array("lost_ms_per_step").sum())
        time_ms = float(comp.array("ms_per_step").sum())
        top = _top(comp, "lost_ms_per_step", 5)
        tflops = float(comp.array("flops").sum() / comp.array("dur_ps").sum())
        ops_text = ", ".join(
            f"{r['op']} {r['ms_per_step']:.3f} ms at {r['achieved_tflops']:.0f} TFLOP/s"
            for r in top.records()
        )
        util = metrics.get("flops_utilization_pct")
        return Recommendation(
            analyzer=self.name,
            kind=KIND_LOW_COMPUTE_UTILIZATION,
            title="Compute-bound ops run below peak FLOP/s",
            evidence=(
                f"{comp.n} compute-bound ops take {time_ms:.3f} ms per step at {tflops:.0f} "
                f"TFLOP/s ({100 * tflops / peaks.peak_tflops:.0f}% of {peaks.peak_tflops:.0f}); "  # type: ignore[operator]
                f"at peak they would take {time_ms - lost_ms:.3f} ms"
                + (f"; program FLOP utilization {util:.1f}%" if util is not None else "")
                + f". Top: {ops_text}"
            ),
            fix=fixes.compute_bound(workload),
            est_savings_ms=lost_ms,
            est_savings_pct=savings_pct(lost_ms, step_ms),
            # FLOP counts are XLA's estimates and peaks are rarely reachable: a loose bound.
            confidence="low",
            ops=top.strings("op").tolist(),
            values={"compute_bound_ms_per_step": time_ms, "achieved_tflops": tflops},
        )


def _top(table: Table, column: str, n: int) -> Table:
    """The ``n`` rows with the largest ``column``, largest first."""
    order = np.argsort(-table.array(column), kind="stable")
    return table.take(order[:n])


def _costed(tl: Timeline, peaks_by_device: dict[tuple[str, int], chips.Peaks]) -> tuple[Table, int]:
    """The leaf compute ops of the selected windows that record FLOPs or bytes, summed per
    (module, op) over all devices (in order of first appearance): count, dur_ps, flops,
    bytes_accessed, and lost_ps, the time they lose against the roofline of their device's
    peaks (never negative, costs being estimates); and how many leaf ops there were."""
    groups: dict[tuple[str, str], int] = {}
    parts: list[tuple[np.ndarray, tuple[np.ndarray, ...]]] = []  # (group ids, sums) per device
    leaves = 0
    for view in tl.devices:
        rows = view.leaves
        leaves += len(rows)
        ops = view.ops
        flops = ops.array_at("flops", rows).astype("float64", copy=False)
        nbytes = ops.array_at("bytes_accessed", rows).astype("float64", copy=False)
        costed = ~np.isnan(flops) | ~np.isnan(nbytes)
        if not costed.all():  # (on TPU every op is costed, as a rule: no copies then)
            rows, flops, nbytes = rows[costed], flops[costed], nbytes[costed]
        if not len(rows):
            continue
        dur = ops.array_at("dur_ps", rows)
        peak = peaks_by_device.get(view.key)
        ideal = (
            rl.ideal_time_ps(flops, nbytes, peak.peak_tflops, peak.peak_hbm_gbps)  # type: ignore[arg-type]
            if peak is not None and peak.known
            else np.full(len(rows), np.nan)
        )
        lost = np.clip(dur.astype("float64") - ideal, 0, None)
        named = ops.select(("module", "op")).take(rows)  # their shared index stays shared
        module, op = named.strings("module"), named.strings("op")
        group, first = group_index([module, op])
        k = len(first)
        keys = zip(module.take(first).tolist(), op.take(first).tolist(), strict=True)
        at = np.fromiter((groups.setdefault(key, len(groups)) for key in keys), np.int64, k)
        parts.append(
            (
                at,
                (
                    np.bincount(group, minlength=k),
                    sum_by(group, k, dur),
                    # (the arrays are this loop's own copies: zeroed in place)
                    np.bincount(group, weights=np.nan_to_num(flops, copy=False), minlength=k),
                    np.bincount(group, weights=np.nan_to_num(nbytes, copy=False), minlength=k),
                    np.bincount(group, weights=np.nan_to_num(lost, copy=False), minlength=k),
                ),
            )
        )
    n = len(groups)
    totals = (
        np.zeros(n, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
        np.zeros(n),
        np.zeros(n),
        np.zeros(n),
    )
    for at, device_sums in parts:  # device by device, as the sums were always added
        for total, column in zip(totals, device_sums, strict=True):
            total[at] += column  # a device's groups are distinct: no index repeats
    count, dur_ps, flops_sum, bytes_sum, lost_sum = totals
    names = list(groups)
    return (
        Table(
            {
                "module": Strings.from_list([m for m, _ in names]),
                "op": Strings.from_list([o for _, o in names]),
                "count": count,
                "dur_ps": dur_ps,
                "flops": flops_sum,
                "bytes_accessed": bytes_sum,
                "lost_ps": lost_sum,
            }
        ),
        leaves,
    )
