"""The roofline math (roofline/model.py) by hand, and its per-device peaks on generated profiles
against the generator's (the chip's) peaks."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from tpuperf.roofline import chips
from tpuperf.roofline import model as rl

from fixtures.generate import write_run
from tpuperf.config import AnalysisConfig
from tpuperf.profiles import load
from tpuperf.timeline import build_timeline

# A chip of 100 TFLOP/s and 1,000 GB/s: the roofs meet at 100e12 / 1e12 = 100 FLOP/byte.
PEAK_TFLOPS = 100.0
PEAK_GBPS = 1000.0


def test_ridge_point_and_attainable_by_hand() -> None:
    assert rl.ridge_point(PEAK_TFLOPS, PEAK_GBPS) == 100.0
    # v6e: 918 TFLOP/s over 1,638 GB/s.
    assert rl.ridge_point(918.0, 1637.993152512) == pytest.approx(560.44, abs=0.01)
    # Below the ridge the bandwidth roof (intensity x 1 TB/s), above it the compute roof.
    attainable = rl.attainable_tflops(np.array([1.0, 10.0, 100.0, 2000.0]), PEAK_TFLOPS, PEAK_GBPS)
    assert attainable.tolist() == [1.0, 10.0, 100.0, 100.0]


def test_roofline_columns_by_hand() -> None:
    # Row 0: 2e12 FLOPs and 1e9 bytes in 1 s: 2 TFLOP/s, 1 GB/s, 2,000 FLOP/byte (compute
    # bound, attainable 100 TFLOP/s, 2% efficient). Row 1: 1e9 FLOPs and 1e8 bytes in 100 us:
    # 10 TFLOP/s, 1,000 GB/s, 10 FLOP/byte (memory bound, attainable 10: 100%). Row 2: no costs.
    flops = np.array([2e12, 1e9, 0.0])
    nbytes = np.array([1e9, 1e8, 0.0])
    dur_ps = np.array([10**12, 10**8, 5], dtype=np.int64)
    out = rl.roofline_columns(flops, nbytes, dur_ps, PEAK_TFLOPS, PEAK_GBPS)
    assert out["achieved_tflops"][:2].tolist() == pytest.approx([2.0, 10.0])
    assert out["achieved_gbps"][:2].tolist() == pytest.approx([1.0, 1000.0])
    assert out["intensity_flop_per_byte"][:2].tolist() == pytest.approx([2000.0, 10.0])
    assert out["attainable_tflops"][:2].tolist() == pytest.approx([100.0, 10.0])
    assert out["bound"].tolist() == [rl.BOUND_COMPUTE, rl.BOUND_MEMORY, ""]
    assert out["efficiency_pct"][:2].tolist() == pytest.approx([2.0, 100.0])
    # Without costs: NaN, never zero.
    assert math.isnan(out["achieved_gbps"][2]) and math.isnan(out["intensity_flop_per_byte"][2])
    assert math.isnan(out["efficiency_pct"][2])
    # Without peaks: only what the op itself says.
    assert set(rl.roofline_columns(flops, nbytes, dur_ps, None, PEAK_GBPS)) == {
        "achieved_tflops",
        "achieved_gbps",
        "intensity_flop_per_byte",
    }


def test_ideal_time_by_hand() -> None:
    # 2e12 FLOPs at 100 TFLOP/s: 20 ms; 1e9 bytes at 1 TB/s: 1 ms. The slower roof wins.
    ideal = rl.ideal_time_ps(np.array([2e12, 1e9]), np.array([1e9, 1e11]), PEAK_TFLOPS, PEAK_GBPS)
    assert ideal.tolist() == pytest.approx([2e10, 1e11])


@pytest.fixture(scope="module")
def memory_bound(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, object]:
    run_dir, truth = write_run("memory_bound", Path(tmp_path_factory.mktemp("memory_bound")))
    return build_timeline(load(str(run_dir)), AnalysisConfig(warmup_steps=0)), truth


def test_device_peaks_are_the_profiles(memory_bound) -> None:
    tl, truth = memory_bound
    peaks = tl.peaks
    assert sorted(peaks) == sorted((d.host, d.device) for d in truth.devices)
    for p in peaks.values():
        assert (p.peak_tflops, p.peak_hbm_gbps) == (
            truth.notes["peak_teraflops_per_second"],
            truth.notes["peak_hbm_bw_gigabytes_per_second"],
        )
        assert p.source == chips.SOURCE_PROFILE and p.known and p.missing_flags == []
    assert rl.common_peaks(peaks) == next(iter(peaks.values()))
    assert rl.common_peaks({}) is None


def test_utilization_is_flops_over_window_time_at_peak(memory_bound) -> None:
    tl, truth = memory_bound
    peaks = tl.peaks
    expected = []
    for view in tl.devices:
        # The FLOPs of the leaf ops that start in the windows, over window time at the peak.
        flops = float(np.nansum(view.ops.array("flops")[view.leaves]))
        expected.append(100.0 * flops / view.window_ps() / truth.notes["peak_teraflops_per_second"])
    got = rl.utilization(tl, peaks)
    assert got["flops_utilization_pct"] == pytest.approx(float(np.mean(expected)))
    assert 0 < got["flops_utilization_pct"] < 100
    # Unknown peaks: no utilization.
    unknown = {key: chips.Peaks(None, None, "unknown", "unknown") for key in peaks}
    assert rl.utilization(tl, unknown) == {"flops_utilization_pct": None, "mfu_pct": None}


def test_one_analysis_resolves_its_peaks_once(memory_bound) -> None:
    """The summary and the roofline analyzer read the peaks the timeline resolved: one place."""
    from tpuperf.analysis import analyze

    tl, _ = memory_bound
    report = analyze(tl.profile, config=AnalysisConfig(warmup_steps=0))
    common = rl.common_peaks(tl.peaks)
    assert common is not None and common.known
    assert (report.summary["peak_tflops"], report.summary["peak_hbm_gbps"]) == (
        common.peak_tflops,
        common.peak_hbm_gbps,
    )
    assert (report.roofline_peaks.peak_tflops, report.roofline_peaks.peak_hbm_gbps) == (
        common.peak_tflops,
        common.peak_hbm_gbps,
    )
