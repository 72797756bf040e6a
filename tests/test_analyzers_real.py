"""Analyzers on real profiles: ../shared/profiles (skipped when absent) and the CPU fixture.

Numbers checked against XProf 2.24.2 come from ../shared/profiles/README.md.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import CPU_FIXTURE, CPU_TRUTH, shared_profile
from tpuperf.analyzers.base import AnalysisConfig

from tpuperf.analysis import Report, analyze
from tpuperf.profiles import load

GPU_PROFILES = [
    "gpu/v100_8gpu_tf_training.xplane.pb",
    "gpu/mi300_jax_gemm.xplane.pb",
    "gpu/mi300_jax_elementwise.xplane.pb",
    "gpu/mi300_jax_conv.xplane.pb",
    "gpu/mi300_jax_te_fused_attn.xplane.pb",
]


@pytest.fixture(scope="module")
def v6e_report() -> Report:
    path = shared_profile("tpu/v6e_4chip_inference.xplane.pb")
    return analyze(load(str(path)), config=AnalysisConfig(warmup_steps=0))


def test_v6e_summary_and_peaks(v6e_report: Report) -> None:
    s = v6e_report.summary
    assert (s["platform"], s["chip"], s["devices"], s["hosts"]) == ("TPU", "TPU v6 Lite", 4, 1)
    # No Steps line (inference): steps are the periods between the 100 executions of the
    # dominant program, jit_f; the last execution only ends the 99th step.
    assert s["step_source"] == "module_period"
    assert s["steps_analyzed"] == 99
    assert (s["peak_tflops"], s["peaks_source"]) == (918.0, "profile")
    assert s["peak_hbm_gbps"] == pytest.approx(1637.99, abs=0.01)
    peaks = v6e_report.results["roofline"].metrics["peaks"]
    assert peaks["ridge_flop_per_byte"] == pytest.approx(560.44, abs=0.01)


def test_v6e_span_idle_is_xprofs_device_idle(v6e_report: Report) -> None:
    # XProf: device idle 13.4% (over each chip's first to last op). Inside the jit_f steps
    # the chips are almost never idle: they wait on host-offload copies instead.
    assert round(v6e_report.summary["span_idle_pct"], 1) == 13.4
    assert v6e_report.summary["idle_pct"] < 0.1
    assert v6e_report.summary["exposed_copy_pct"] == pytest.approx(96.9, abs=0.05)
    idle = v6e_report.results["idle"].metrics
    assert idle["outside_steps_idle_ms"] > 0.9 * idle["outside_steps_ms"]


def test_v6e_recommendations_name_the_copies_and_the_all_reduce(v6e_report: Report) -> None:
    recs = {r.kind: r for r in v6e_report.recommendations}
    # Moving fewer bytes removes the wait; hiding it is bounded by the compute (test_accuracy).
    # Keeping offloaded buffers in the HBM headroom (the memory analyzer) ranks between them.
    assert [r.kind for r in v6e_report.recommendations[:3]] == [
        "reduce_copies",
        "offload_headroom",
        "exposed_async_copy",
    ]
    for kind in ("reduce_copies", "exposed_async_copy"):
        copies = recs[kind]
        assert copies.ops[:4] == ["copy-done.4", "copy-done.2", "copy-done", "copy-done.5"]
        assert "host-offload" in copies.title
    coll = recs["exposed_collective"]
    assert coll.ops == ["all-reduce"]
    assert "synchronous" in coll.title and "all-reduce" in coll.evidence
    # XProf hlo_stats: all-reduce, 12 occurrences on 4 chips, 1,460,345.3 us in all.
    outside = v6e_report.results["collectives"].metrics["outside_steps"]
    assert outside["ops"][0]["count_per_device"] == 3
    assert outside["exposed_ms_per_device"] * 4 == pytest.approx(1_460_345.3 / 1000, rel=1e-5)
    # Amortized over the 99 steps (the last of the 100 executions ends the last step).
    assert coll.est_savings_ms == pytest.approx(outside["exposed_ms_per_device"] / 99)


def test_v6e_copy_time_matches_xprof(v6e_report: Report) -> None:
    # XProf hlo_stats: copy-done.4, 400 occurrences, 77,773,215.7 us on all 4 chips.
    table = v6e_report.results["collectives"].frame("copy_ops").set_index("op")
    row = table.loc["copy-done.4"]
    assert row["count_per_step"] * 100 * 4 == pytest.approx(400)
    assert row["ms_per_step"] * 100 * 4 * 1000 == pytest.approx(77_773_215.7, rel=1e-6)
    async_ = v6e_report.results["collectives"].metrics["async"]
    assert async_["by_kind"]["copy"]["exposed"] == async_["windows"]


@pytest.mark.parametrize("relative", GPU_PROFILES)
def test_gpu_profiles_give_sensible_numbers(relative: str) -> None:
    report = analyze(load(str(shared_profile(relative))))
    s = report.summary
    assert report.errors == {}
    assert s["platform"] == "GPU" and s["devices"] >= 1 and s["steps_analyzed"] >= 1
    for key in ("busy_pct", "compute_pct", "exposed_collective_pct", "idle_pct", "no_op_pct"):
        assert 0.0 <= s[key] <= 100.0, key
    parts = s["compute_pct"] + s["exposed_collective_pct"] + s["exposed_copy_pct"] + s["no_op_pct"]
    assert parts == pytest.approx(100.0)
    assert s["idle_pct"] == pytest.approx(100.0 - s["busy_pct"])
    assert s["step_time_ms"]["median"] > 0
    assert s["flops_utilization_pct"] is None  # GPU profiles record no per-op FLOPs
    for rec in report.recommendations:
        assert 0 < rec.est_savings_pct <= 100.0
        assert math.isfinite(rec.est_savings_ms)
    json.dumps(report.to_dict(), allow_nan=False)


def test_v100_peaks_from_the_chip_table_and_the_plane() -> None:
    report = analyze(load(str(shared_profile("gpu/v100_8gpu_tf_training.xplane.pb"))))
    s = report.summary
    assert (s["peak_tflops"], s["peaks_source"]) == (125.0, "chip_table+profile")
    # GPU:1 ran only memcpys and has no step: left out rather than counted 100% idle.
    assert s["devices"] == 2
    assert any("no steps" in n for n in report.notes)


def test_cpu_fixture_runs_and_explains_why_there_is_no_roofline() -> None:
    truth = json.loads(Path(CPU_TRUTH).read_text())
    report = analyze(load(str(CPU_FIXTURE)))
    s = report.summary
    assert (s["platform"], s["step_source"]) == ("CPU", "step_marker")
    assert s["steps_analyzed"] + s["steps_excluded"] == len(truth["steps"])
    assert s["steps_excluded"] == 1
    roofline = report.results["roofline"]
    assert roofline.metrics["peaks"]["peak_tflops"] is None
    # No per-op FLOPs: that is the reason; peak flags would not help, so none is asked for.
    assert any("records no per-op FLOPs or bytes" in n for n in roofline.notes)
    assert not any("--peak-tflops" in n for n in roofline.notes)
    assert s["flops_utilization_pct"] is None and s["peak_tflops"] is None
    assert 0 < s["idle_pct"] < 100
    assert report.errors == {}


def test_v6e_copy_wait_is_one_number_in_every_recommendation(v6e_report: Report) -> None:
    """The memory analyzer's offload advice and reduce_copies quote the same wait on copies
    per step: both over the analysed step windows (it once counted every window of the
    capture, 767.8 ms against 760.1 ms)."""
    recs = {r.kind: r for r in v6e_report.recommendations}
    copies = recs["reduce_copies"].values["exposed_copy_ms_per_step"]
    offload = recs["offload_headroom"].values["copy_ms_per_step"]
    assert offload == pytest.approx(copies, rel=1e-9)
    assert f"waits {offload:.3f} ms a step" in recs["offload_headroom"].title
