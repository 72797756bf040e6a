"""roofline: achieved FLOP/s and GB/s per op and per program against the chip's roofs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd
from tpuperf.analyzers import _timeline
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

from tpuperf import schema

if TYPE_CHECKING:
    from tpuperf.profile import Profile


def device_peaks(
    tl: _timeline.Timeline, config: AnalysisConfig
) -> dict[tuple[str, int], chips.Peaks]:
    """Each analysed device's peaks, by DESIGN.md's order: profile, chip table, flags."""
    out = {}
    for row in tl.devices.itertuples():
        out[(str(row.host), int(row.device))] = chips.resolve_peaks(
            str(row.chip) if isinstance(row.chip, str) else None,
            row.peak_tflops,
            row.peak_hbm_gbps,
            config.peak_tflops,
            config.peak_hbm_gbps,
        )
    return out


def leaf_costs(ops: pd.DataFrame) -> pd.DataFrame:
    """Compute ops whose costs count toward totals.

    An op with nested ops inside it (``self_ps < dur_ps``: a while loop, a call)
    is left out, so its body's FLOPs and bytes are not counted twice.
    """
    compute = ops[(ops["kind"] == schema.KIND_COMPUTE).to_numpy()]
    return compute[compute["self_ps"] >= compute["dur_ps"]]


def utilization(
    tl: _timeline.Timeline,
    leaves: pd.DataFrame,
    peaks_by_device: dict[tuple[str, int], chips.Peaks],
) -> dict[str, float | None]:
    """FLOP utilization and MFU in percent: the FLOPs (model FLOPs) of the analysed windows
    over window time at peak, averaged over devices; None when FLOPs or peaks are unknown."""
    windows = (
        tl.breakdown.groupby(["host", "device"])["step_ps"].sum() if not tl.breakdown.empty else {}
    )
    util, mfu = [], []
    for key, group in leaves.groupby(["host", "device"], observed=True):
        peak = peaks_by_device.get(_timeline.device_key(key))
        window_ps = float(windows.get(_timeline.device_key(key), 0))
        if peak is None or peak.peak_tflops is None or window_ps <= 0:
            continue
        # FLOPs per picosecond is TFLOP/s.
        if group["flops"].notna().any():
            util.append(100.0 * float(group["flops"].sum()) / window_ps / peak.peak_tflops)
        if group["model_flops"].notna().any():
            mfu.append(100.0 * float(group["model_flops"].sum()) / window_ps / peak.peak_tflops)
    return {
        "flops_utilization_pct": float(np.mean(util)) if util else None,
        "mfu_pct": float(np.mean(mfu)) if mfu else None,
    }


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

    def analyze(self, profile: Profile, config: AnalysisConfig) -> AnalyzerResult:
        tl = _timeline.timeline(profile, config)
        result = AnalyzerResult(self.name, notes=list(tl.notes))
        peaks_by_device = device_peaks(tl, config)
        if not peaks_by_device:
            result.metrics = {"peaks": None}
            result.notes.append("no device ran ops: nothing to put on a roofline")
            return result
        # Report the peaks most devices use; mixed-chip profiles are rare and still use their own.
        all_peaks = list(peaks_by_device.values())
        peaks = max(set(all_peaks), key=all_peaks.count)
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
        if not peaks.known:
            missing = [
                flag
                for flag, value in (
                    ("--peak-tflops", peaks.peak_tflops),
                    ("--peak-hbm-gbps", peaks.peak_hbm_gbps),
                )
                if value is None
            ]
            result.notes.append(
                f"peaks unknown for chip {peaks.chip or 'unknown'!r}: the profile records no peak "
                "FLOP/s or HBM bandwidth and the chip table has no entry for it, so there is no "
                f"roofline, bound or utilization. Pass {' and '.join(missing)} "
                "(dense bf16 TFLOP/s, HBM GB/s) to get one."
            )

        leaves = leaf_costs(tl.ops)
        costed = leaves[leaves["flops"].notna() | leaves["bytes_accessed"].notna()]
        metrics["ops_with_costs_pct"] = 100.0 * len(costed) / len(leaves) if len(leaves) else None
        if costed.empty:
            result.notes.append(
                "this profile records no per-op FLOPs or bytes (GPU and CPU profiles usually do "
                "not): no per-op roofline"
            )
        metrics.update(utilization(tl, leaves, peaks_by_device))
        if costed.empty:
            return result

        per_op = self._per_op(costed, tl, peaks_by_device)
        result.tables["ops"] = per_op
        result.tables["programs"] = self._per_program(profile, tl, costed, peaks)
        if not peaks.known or "bound" not in per_op:
            return result
        for bound in (rl.BOUND_MEMORY, rl.BOUND_COMPUTE):
            rows = per_op[per_op["bound"] == bound]
            metrics[f"{bound}_bound_ms_per_step"] = float(rows["ms_per_step"].sum())
            metrics[f"{bound}_bound_lost_ms_per_step"] = float(rows["lost_ms_per_step"].sum())
        step_ms = tl.mean_window_ps / 1e9
        mem = per_op[per_op["bound"] == rl.BOUND_MEMORY]
        if mem["lost_ms_per_step"].sum() > 0:
            result.recommendations.append(self._memory_rec(mem, peaks, step_ms))
        comp = per_op[per_op["bound"] == rl.BOUND_COMPUTE]
        if comp["lost_ms_per_step"].sum() > 0:
            result.recommendations.append(self._compute_rec(comp, peaks, step_ms, metrics))
        return result

    def _per_op(
        self,
        costed: pd.DataFrame,
        tl: _timeline.Timeline,
        peaks_by_device: dict[tuple[str, int], chips.Peaks],
    ) -> pd.DataFrame:
        """One row per (module, op): totals over selected steps and devices, on the roofline."""
        frame = costed.copy()
        ideal = np.full(len(frame), np.nan)
        for key, peak in peaks_by_device.items():
            if not peak.known:
                continue
            on = (frame["host"] == key[0]).to_numpy() & (frame["device"] == key[1]).to_numpy()
            ideal[on] = rl.ideal_time_ps(
                frame["flops"].to_numpy()[on].astype("float64"),
                frame["bytes_accessed"].to_numpy()[on].astype("float64"),
                peak.peak_tflops,  # type: ignore[arg-type]
                peak.peak_hbm_gbps,  # type: ignore[arg-type]
            )
        # Time the op loses against the roofline; never negative (costs are estimates).
        frame["lost_ps"] = np.clip(frame["dur_ps"].to_numpy(dtype="float64") - ideal, 0, None)
        grouped = frame.groupby(["module", "op"], observed=True, sort=False).agg(
            count=("dur_ps", "size"),
            dur_ps=("dur_ps", "sum"),
            flops=("flops", "sum"),
            bytes_accessed=("bytes_accessed", "sum"),
            lost_ps=("lost_ps", "sum"),
        )
        grouped = grouped.reset_index()
        grouped["module"] = grouped["module"].astype(str)
        grouped["op"] = grouped["op"].astype(str)
        all_peaks = list(peaks_by_device.values())
        peaks = max(set(all_peaks), key=all_peaks.count)
        table = rl.roofline_table(grouped, peaks.peak_tflops, peaks.peak_hbm_gbps)
        n = max(len(tl.windows), 1)
        table["ms_per_step"] = table["dur_ps"] / n / 1e9
        table["lost_ms_per_step"] = table.pop("lost_ps") / n / 1e9
        table["count_per_step"] = table.pop("count") / n
        return table.sort_values("ms_per_step", ascending=False, ignore_index=True)

    def _per_program(
        self, profile: Profile, tl: _timeline.Timeline, costed: pd.DataFrame, peaks: chips.Peaks
    ) -> pd.DataFrame:
        """One row per module: its FLOPs and bytes over the time its executions took."""
        sums = costed.groupby("module", observed=True).agg(
            flops=("flops", "sum"),
            bytes_accessed=("bytes_accessed", "sum"),
            op_ps=("dur_ps", "sum"),
        )
        modules = profile.modules.copy()
        modules["host"] = modules["host"].astype(str)
        keep = []
        for (host, device), win in tl.windows.groupby(["host", "device"]):
            mods = modules[(modules["host"] == host) & (modules["device"] == device)]
            s = mods["start_ps"].to_numpy(dtype="int64")
            ws = win["start_ps"].to_numpy(dtype="int64")
            we = win["end_ps"].to_numpy(dtype="int64")
            idx = np.searchsorted(ws, s, side="right") - 1
            inside = idx >= 0
            inside[inside] = s[inside] < we[idx[inside]]
            keep.append(mods[inside])
        runs = pd.concat(keep) if keep else modules.iloc[0:0]
        run_ps = runs.groupby("module", observed=True)["dur_ps"].agg(["sum", "size"])
        table = sums.join(run_ps, how="left").reset_index()
        # Without module executions (some GPU/CPU profiles) the ops' own time stands in.
        table["dur_ps"] = table["sum"].fillna(table["op_ps"])
        table["executions"] = table.pop("size").fillna(0).astype("int64")
        table = table.drop(columns=["sum", "op_ps"])
        table["module"] = table["module"].astype(str)
        table = rl.roofline_table(table, peaks.peak_tflops, peaks.peak_hbm_gbps)
        if peaks.peak_tflops is not None:
            table["flops_utilization_pct"] = 100.0 * table["achieved_tflops"] / peaks.peak_tflops
        return table.sort_values("dur_ps", ascending=False, ignore_index=True)

    def _memory_rec(self, mem: pd.DataFrame, peaks: chips.Peaks, step_ms: float) -> Recommendation:
        lost_ms = float(mem["lost_ms_per_step"].sum())
        time_ms = float(mem["ms_per_step"].sum())
        top = mem.sort_values("lost_ms_per_step", ascending=False).head(5)
        gbps = float(mem["bytes_accessed"].sum() / mem["dur_ps"].sum() * 1000.0)
        ops_text = ", ".join(
            f"{r.op} {r.ms_per_step:.3f} ms at {r.achieved_gbps:.0f} GB/s" for r in top.itertuples()
        )
        return Recommendation(
            analyzer=self.name,
            kind=KIND_MEMORY_BOUND,
            title="Memory-bound ops run below HBM bandwidth",
            evidence=(
                f"{len(mem)} memory-bound ops take {time_ms:.3f} ms per step at {gbps:.0f} GB/s "
                f"({100 * gbps / peaks.peak_hbm_gbps:.0f}% of {peaks.peak_hbm_gbps:.0f} GB/s); at "  # type: ignore[operator]
                f"full bandwidth they would take {time_ms - lost_ms:.3f} ms. Top: {ops_text}"
            ),
            fix={
                "tpu": (
                    "Move fewer bytes: keep activations in bf16, fuse elementwise chains into "
                    "their producers (check the HLO for un-fused converts, transposes and "
                    "broadcasts), "
                    "use layouts with a minor dimension that is a multiple of 128, and raise "
                    "intensity with a larger per-chip batch; write hot loops as Pallas kernels."
                ),
                "gpu": (
                    "Move fewer bytes: bf16 activations, fuse elementwise chains (Triton/Pallas "
                    "kernels for hot ones, `--xla_gpu_enable_triton_gemm=true` for GEMM epilogue "
                    "fusion), avoid layout-changing transposes, larger batch to raise intensity."
                ),
            },
            est_savings_ms=lost_ms,
            est_savings_pct=savings_pct(lost_ms, step_ms),
            confidence="medium",
            ops=[str(o) for o in top["op"]],
            values={
                "memory_bound_ms_per_step": time_ms,
                "achieved_gbps": gbps,
                "peak_hbm_gbps": peaks.peak_hbm_gbps,
            },
        )

    def _compute_rec(
        self, comp: pd.DataFrame, peaks: chips.Peaks, step_ms: float, metrics: dict[str, Any]
    ) -> Recommendation:
        lost_ms = float(comp["lost_ms_per_step"].sum())
        time_ms = float(comp["ms_per_step"].sum())
        top = comp.sort_values("lost_ms_per_step", ascending=False).head(5)
        tflops = float(comp["flops"].sum() / comp["dur_ps"].sum())
        ops_text = ", ".join(
            f"{r.op} {r.ms_per_step:.3f} ms at {r.achieved_tflops:.0f} TFLOP/s"
            for r in top.itertuples()
        )
        util = metrics.get("flops_utilization_pct")
        return Recommendation(
            analyzer=self.name,
            kind=KIND_LOW_COMPUTE_UTILIZATION,
            title="Compute-bound ops run below peak FLOP/s",
            evidence=(
                f"{len(comp)} compute-bound ops take {time_ms:.3f} ms per step at {tflops:.0f} "
                f"TFLOP/s ({100 * tflops / peaks.peak_tflops:.0f}% of {peaks.peak_tflops:.0f}); "  # type: ignore[operator]
                f"at peak they would take {time_ms - lost_ms:.3f} ms"
                + (f"; program FLOP utilization {util:.1f}%" if util is not None else "")
                + f". Top: {ops_text}"
            ),
            fix={
                "tpu": (
                    "Feed the MXU: matmul dimensions that are multiples of 128 (256 on v6e and "
                    "later), bf16 inputs (`jnp.bfloat16`, not `precision=HIGHEST`), a larger "
                    "per-chip batch, and fewer tiny matmuls (batch them with `vmap`/`einsum`)."
                ),
                "gpu": (
                    "Feed the tensor cores: bf16/fp16 inputs, GEMM dimensions that are multiples "
                    "of 16 (64 is better), a larger batch, and "
                    "`--xla_gpu_enable_triton_gemm=true` or "
                    "cuBLASLt autotuning (`--xla_gpu_autotune_level=4`)."
                ),
            },
            est_savings_ms=lost_ms,
            est_savings_pct=savings_pct(lost_ms, step_ms),
            # FLOP counts are XLA's estimates and peaks are rarely reachable: a loose bound.
            confidence="low",
            ops=[str(o) for o in top["op"]],
            values={"compute_bound_ms_per_step": time_ms, "achieved_tflops": tflops},
        )
