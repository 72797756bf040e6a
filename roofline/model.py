"""Roofline math (DESIGN.md, Roofline), vectorised over pandas/numpy columns.

Units: FLOPs and bytes are counts, durations picoseconds, peaks TFLOP/s and
GB/s (1e9 bytes/s). Two identities keep the code short: FLOPs per picosecond
*is* TFLOP/s, and bytes per picosecond times 1000 is GB/s.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

BOUND_COMPUTE = "compute"
BOUND_MEMORY = "memory"


def ridge_point(peak_tflops: float, peak_hbm_gbps: float) -> float:
    """Operational intensity (FLOP/byte) where the two roofs meet."""
    return peak_tflops * 1e12 / (peak_hbm_gbps * 1e9)


def attainable_tflops(intensity: np.ndarray | float, peak_tflops: float, peak_hbm_gbps: float):
    """min(peak compute, intensity x peak bandwidth), in TFLOP/s."""
    return np.minimum(peak_tflops, np.asarray(intensity, dtype="float64") * peak_hbm_gbps / 1000.0)


def roofline_table(
    frame: pd.DataFrame, peak_tflops: float | None, peak_hbm_gbps: float | None
) -> pd.DataFrame:
    """Add roofline columns to a frame with ``flops``, ``bytes_accessed`` and ``dur_ps``.

    Adds ``achieved_tflops``, ``achieved_gbps``, ``intensity_flop_per_byte`` and,
    when both peaks are known, ``attainable_tflops``, ``bound`` (compute or
    memory) and ``efficiency_pct`` (achieved / attainable). Rows without costs
    get NaN, never zero.
    """
    out = frame.copy()
    dur = out["dur_ps"].astype("float64").where(out["dur_ps"] > 0)
    flops = out["flops"].astype("float64")
    nbytes = out["bytes_accessed"].astype("float64").where(out["bytes_accessed"] > 0)
    out["achieved_tflops"] = flops / dur
    out["achieved_gbps"] = nbytes / dur * 1000.0
    out["intensity_flop_per_byte"] = flops / nbytes
    if peak_tflops is None or peak_hbm_gbps is None:
        return out
    ridge = ridge_point(peak_tflops, peak_hbm_gbps)
    intensity = out["intensity_flop_per_byte"]
    out["attainable_tflops"] = attainable_tflops(intensity.to_numpy(), peak_tflops, peak_hbm_gbps)
    bound = np.where(intensity >= ridge, BOUND_COMPUTE, BOUND_MEMORY)
    out["bound"] = pd.Series(bound, index=out.index).where(intensity.notna(), "")
    out["efficiency_pct"] = 100.0 * out["achieved_tflops"] / out["attainable_tflops"]
    return out


def ideal_time_ps(
    flops: np.ndarray, nbytes: np.ndarray, peak_tflops: float, peak_hbm_gbps: float
) -> np.ndarray:
    """The time an op would take on the roofline: max(flops / peak, bytes / bandwidth)."""
    compute_ps = np.asarray(flops, dtype="float64") / peak_tflops
    memory_ps = np.asarray(nbytes, dtype="float64") / (peak_hbm_gbps / 1000.0)
    return np.fmax(compute_ps, memory_ps)
