"""Analyzers on generated TPU/GPU profiles, against the generator's ground truth.

The truth (fixtures/generate.py) covers every step, so these analyses keep the
warm-up step (warmup_steps=0); one test checks the default leaves it out.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
from tpuperf.analyzers.base import AnalysisConfig

from fixtures.generate import write_run
from tpuperf.analysis import Report, analyze
from tpuperf.profiles import load

REL = 0.01  # the bar: within 1% (relative) of the truth

SCENARIOS = ["collective_training", "host_bound", "memory_bound", "straggler", "no_steps"]
ALL = [*SCENARIOS, "gpu_training"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Report, Any]]:
    out = {}
    for scenario in ALL:
        run_dir, truth = write_run(scenario, tmp_path_factory.mktemp(scenario))
        report = analyze(load(str(run_dir)), config=AnalysisConfig(warmup_steps=0))
        out[scenario] = (report, truth)
    return out


@pytest.mark.parametrize("scenario", ALL)
def test_step_time_matches_truth(runs: dict, scenario: str) -> None:
    report, truth = runs[scenario]
    step = report.summary["step_time_ms"]
    assert step["count"] == len(truth.step_time_ps)
    assert step["median"] == pytest.approx(statistics.median(truth.step_time_ps) / 1e9, rel=REL)
    assert step["mean"] == pytest.approx(statistics.mean(truth.step_time_ps) / 1e9, rel=REL)


@pytest.mark.parametrize("scenario", ALL)
def test_idle_pct_matches_truth(runs: dict, scenario: str) -> None:
    report, truth = runs[scenario]
    assert report.summary["idle_pct"] == pytest.approx(truth.idle_pct, rel=REL)


@pytest.mark.parametrize("scenario", ALL)
def test_exposed_collective_pct_matches_truth(runs: dict, scenario: str) -> None:
    report, truth = runs[scenario]
    assert report.summary["exposed_collective_pct"] == pytest.approx(
        truth.exposed_collective_pct, rel=REL
    )


@pytest.mark.parametrize("scenario", ALL)
def test_per_device_busy_and_collective_time_match_truth(runs: dict, scenario: str) -> None:
    report, truth = runs[scenario]
    table = report.results["steps"].frame("breakdown")
    per_device = table.groupby(["host", "device"])[
        ["step_ms", "compute_ms", "exposed_collective_ms", "idle_ms"]
    ].sum()
    assert len(per_device) == len(truth.devices)
    for dev in truth.devices:
        row = per_device.loc[(dev.host, dev.device)]
        assert row["step_ms"] == pytest.approx(dev.window_ps / 1e9, rel=REL)
        assert row["exposed_collective_ms"] == pytest.approx(dev.collective_ps / 1e9, rel=REL)
        assert row["idle_ms"] == pytest.approx(dev.idle_ps / 1e9, rel=REL, abs=1e-6)


@pytest.mark.parametrize(
    "scenario",
    [
        "collective_training",
        "host_bound",
        "memory_bound",
        "no_steps",
        "gpu_training",
        "straggler",
    ],
)
def test_top_recommendation_is_the_expected_kind(runs: dict, scenario: str) -> None:
    report, truth = runs[scenario]
    assert report.recommendations[0].kind == truth.expected_top_recommendation


def test_the_slow_chip_is_named(runs: dict) -> None:
    report, truth = runs["straggler"]
    stragglers = report.results["steps"].metrics["stragglers"]
    assert [(s["host"], s["device"]) for s in stragglers] == [truth.straggler]
    assert stragglers[0]["shortest_collective"]  # the others wait for it inside theirs
    rec = next(r for r in report.recommendations if r.kind == "straggler")
    host, device = truth.straggler
    assert f"{host}/device:{device}" in rec.title
    assert rec.confidence == "high"
    # Its estimate is the slow chip's extra compute per step over the median chip's.
    compute = {(d.host, d.device): d.compute_ps for d in truth.devices}
    slow = compute.pop(truth.straggler)
    excess_ms = (slow - statistics.median(compute.values())) / len(truth.step_time_ps) / 1e9
    assert rec.est_savings_ms == pytest.approx(excess_ms, rel=0.02)


def test_no_straggler_is_named_where_there_is_none(runs: dict) -> None:
    for scenario in ("collective_training", "host_bound", "memory_bound", "gpu_training"):
        report, _ = runs[scenario]
        assert report.results["steps"].metrics["stragglers"] == [], scenario


def test_host_bound_verdict_and_estimate(runs: dict) -> None:
    report, truth = runs["host_bound"]
    idle = report.results["idle"].metrics
    assert idle["host_bound"] is True
    rec = report.recommendations[0]
    # Its estimate is the gap before steps, which is nearly all of the idle time.
    assert rec.est_savings_pct == pytest.approx(idle["between_steps_idle_pct"], rel=1e-6)
    assert 0.9 * truth.idle_pct < rec.est_savings_pct <= truth.idle_pct
    for scenario in ("collective_training", "memory_bound"):
        assert runs[scenario][0].results["idle"].metrics["host_bound"] is False


def test_memory_bound_loop_fusions(runs: dict) -> None:
    report, _ = runs["memory_bound"]
    rec = report.recommendations[0]
    assert rec.kind == "memory_bound"
    assert all("fusion" in op for op in rec.ops)
    ops = report.results["roofline"].frame("ops")
    loops = ops[ops["op"].str.startswith("loop")]
    assert (loops["bound"] == "memory").all()
    assert loops["intensity_flop_per_byte"].to_numpy() == pytest.approx(1.5, rel=0.05)


def test_async_all_gathers_are_partly_hidden(runs: dict) -> None:
    report, truth = runs["collective_training"]
    a = report.results["collectives"].metrics["async"]
    assert a["windows"] == truth.notes["async_windows"]
    assert a["by_kind"]["all-gather"]["windows"] == a["windows"]
    assert a["mean_window_overlap_pct"] == pytest.approx(
        100 * truth.notes["async_overlap_mean"], rel=REL
    )
    assert a["hidden"] + a["partial"] + a["exposed"] == a["windows"]
    by_kind = report.results["collectives"].metrics["by_kind"]
    assert by_kind["all-reduce"]["async_ops_per_step"] == 0  # synchronous
    assert by_kind["all-gather"]["async_ops_per_step"] > 0


def test_no_steps_line_uses_module_periods(runs: dict) -> None:
    report, truth = runs["no_steps"]
    assert report.summary["step_source"] == "module_period"
    assert report.summary["steps_analyzed"] == len(truth.step_time_ps)


def test_gpu_nccl_time_not_hidden_by_compute(runs: dict) -> None:
    report, _ = runs["gpu_training"]
    m = report.results["collectives"].metrics
    assert set(m["by_kind"]) == {"all-gather", "all-reduce"}
    assert 0.0 < m["collective_overlapped_pct"] < 100.0
    assert report.summary["platform"] == "GPU"


def test_default_leaves_out_the_warmup_step(tmp_path: Path) -> None:
    run_dir, truth = write_run("collective_training", tmp_path)
    report = analyze(load(str(run_dir)))
    assert report.summary["steps_excluded"] == 1
    assert report.summary["step_time_ms"]["count"] == len(truth.step_time_ps) - 1
    expected = statistics.median(truth.step_time_ps[1:]) / 1e9
    assert report.summary["step_time_ms"]["median"] == pytest.approx(expected, rel=REL)
