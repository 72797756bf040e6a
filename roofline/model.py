"""Roofline math (DESIGN.md, Roofline), vectorised over numpy columns, and the per-device
peaks, costed ops and FLOP utilization that the roofline analyzer and the report share.

Units: FLOPs and bytes are counts, durations picoseconds, peaks TFLOP/s and
GB/s (1e9 bytes/s). Two identities keep the code short: FLOPs per picosecond
*is* TFLOP/s, and bytes per picosecond times 1000 is GB/s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from tpuperf.roofline import chips

from tpuperf.columns import Lookup, Strings

if TYPE_CHECKING:
    from tpuperf.timeline import DeviceView, Timeline

BOUND_COMPUTE = "compute"
BOUND_MEMORY = "memory"


def ridge_point(peak_tflops: float, peak_hbm_gbps: float) -> float:
    """Operational intensity (FLOP/byte) where the two roofs meet."""
    return peak_tflops * 1e12 / (peak_hbm_gbps * 1e9)


def attainable_tflops(intensity: np.ndarray | float, peak_tflops: float, peak_hbm_gbps: float):
    """min(peak compute, intensity x peak bandwidth), in TFLOP/s."""
    return np.minimum(peak_tflops, np.asarray(intensity, dtype="float64") * peak_hbm_gbps / 1000.0)


def roofline_columns(
    flops: np.ndarray,
    nbytes: np.ndarray,
    dur_ps: np.ndarray,
    peak_tflops: float | None,
    peak_hbm_gbps: float | None,
) -> dict[str, Any]:
    """The roofline columns of rows with ``flops``, ``bytes_accessed`` and ``dur_ps``.

    ``achieved_tflops``, ``achieved_gbps``, ``intensity_flop_per_byte`` and, when both
    peaks are known, ``attainable_tflops``, ``bound`` (compute or memory; "" without
    costs) and ``efficiency_pct`` (achieved / attainable). Rows without costs get NaN,
    never zero.
    """
    dur = np.where(dur_ps > 0, dur_ps.astype("float64"), np.nan)
    flops = np.asarray(flops, dtype="float64")
    nbytes = np.asarray(nbytes, dtype="float64")
    positive_bytes = np.where(nbytes > 0, nbytes, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: dict[str, Any] = {
            "achieved_tflops": flops / dur,
            "achieved_gbps": positive_bytes / dur * 1000.0,
            "intensity_flop_per_byte": flops / positive_bytes,
        }
    if peak_tflops is None or peak_hbm_gbps is None:
        return out
    ridge = ridge_point(peak_tflops, peak_hbm_gbps)
    intensity = out["intensity_flop_per_byte"]
    out["attainable_tflops"] = attainable_tflops(intensity, peak_tflops, peak_hbm_gbps)
    bound = np.where(intensity >= ridge, BOUND_COMPUTE, BOUND_MEMORY)
    out["bound"] = Strings.from_list(np.where(np.isnan(intensity), "", bound).tolist())
    with np.errstate(divide="ignore", invalid="ignore"):
        out["efficiency_pct"] = 100.0 * out["achieved_tflops"] / out["attainable_tflops"]
    return out


def ideal_time_ps(
    flops: np.ndarray, nbytes: np.ndarray, peak_tflops: float, peak_hbm_gbps: float
) -> np.ndarray:
    """The time an op would take on the roofline: max(flops / peak, bytes / bandwidth)."""
    compute_ps = np.asarray(flops, dtype="float64") / peak_tflops
    memory_ps = np.asarray(nbytes, dtype="float64") / (peak_hbm_gbps / 1000.0)
    return np.fmax(compute_ps, memory_ps)


# --------------------------------------------------------------------------- per device


def common_peaks(peaks_by_device: dict[tuple[str, int], chips.Peaks]) -> chips.Peaks | None:
    """The peaks most devices use (mixed-chip profiles are rare and still use their own)."""
    peaks = list(peaks_by_device.values())
    if not peaks:
        return None
    return max(dict.fromkeys(peaks), key=peaks.count)


def utilization(
    tl: Timeline, peaks_by_device: dict[tuple[str, int], chips.Peaks]
) -> dict[str, float | None]:
    """FLOP utilization and MFU in percent: the FLOPs (model FLOPs) of the analysed windows
    over window time at peak, averaged over devices; None when FLOPs or peaks are unknown."""
    util, mfu = [], []
    for view in tl.devices:
        rows = view.leaves
        peak = peaks_by_device.get(view.key)
        window_ps = float(view.window_ps())
        if not len(rows) or peak is None or peak.peak_tflops is None or window_ps <= 0:
            continue
        # FLOPs per picosecond is TFLOP/s.
        flops, model = (_nansum(view, name) for name in ("flops", "model_flops"))
        if flops is not None:
            util.append(100.0 * flops / window_ps / peak.peak_tflops)
        if model is not None:
            mfu.append(100.0 * model / window_ps / peak.peak_tflops)
    return {
        "flops_utilization_pct": float(np.mean(util)) if util else None,
        "mfu_pct": float(np.mean(mfu)) if mfu else None,
    }


def _nansum(view: DeviceView, name: str) -> float | None:
    """The sum of the ops' column ``name`` over the view's leaves, NaN skipped; None when every
    value is NaN. A column stored once per shared index value (a TPU op's costs, per metadata
    row) counts the leaves of each value once (DeviceView.leaf_counts)."""
    column = view.ops[name]
    if not isinstance(column, Lookup):
        return view.ops.nansum_at(name, view.leaves)
    count = view.leaf_counts(column.index, len(column.values))
    values = column.values.astype(np.float64, copy=False)
    known = ~np.isnan(values) & (count > 0)
    return float(np.dot(count[known], values[known])) if known.any() else None
