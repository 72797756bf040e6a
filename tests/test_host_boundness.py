"""XProf's `check_host_boundness` quantities (tpuperf.hostview.xprof_host_boundness) on the
generated host-bound TPU run: against the generator's truth, and number by number against
`xprof check_host_boundness` (XProf 2.24.2) run on the same file when xprof is installed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tpuperf.analyzers.base import AnalysisConfig

import tpuperf
from fixtures.generate import write_run
from tpuperf import hostview


@pytest.fixture(scope="module")
def run(tmp_path_factory):  # type: ignore[no-untyped-def]
    logdir = tmp_path_factory.mktemp("boundness")
    run_dir, truth = write_run("host_bound", logdir, run_name="hb")
    return run_dir, truth


def test_quantities_equal_the_generators_truth(run) -> None:  # type: ignore[no-untyped-def]
    run_dir, truth = run
    ours = hostview.xprof_host_boundness(tpuperf.load(run_dir))
    assert ours is not None
    n = len(truth.step_time_ps)
    average_ms = round(sum(truth.step_time_ps) / n / 1e9, 2)
    busy_ms = sum(d.busy_ps for d in truth.devices) / len(truth.devices) / 1e9
    collective_ms = sum(d.collective_ps for d in truth.devices) / len(truth.devices) / 1e9
    assert ours["number_of_steps"] == n
    assert ours["core_count"] == len(truth.devices)
    assert ours["steptime_ms_average"] == average_ms
    assert ours["total_duration_ms"] == pytest.approx(average_ms * n)
    # The generated ops do not nest: their total is the busy time; collectives are ICI.
    assert ours["scaled_ici_time_ms"] == pytest.approx(collective_ms, rel=1e-9)
    assert ours["scaled_compute_time_ms"] == pytest.approx(busy_ms - collective_ms, rel=1e-9)
    assert ours["scaled_hbm_time_ms"] == 0.0
    idle_ms = average_ms * n - busy_ms
    assert ours["pure_idle_time_ms"] == pytest.approx(idle_ms, rel=1e-9)
    assert ours["xprof_idle_time_ratio_pct"] == pytest.approx(100 * idle_ms / (average_ms * n))
    # XProf's ratio is over its rounded step average; the truth's idle share, 57.25%, is near.
    assert ours["xprof_idle_time_ratio_pct"] == pytest.approx(truth.idle_pct, abs=0.05)
    assert ours["idle_above_threshold"] is True


def _xprof_check_host_boundness(run_dir) -> dict:  # type: ignore[no-untyped-def]
    pytest.importorskip("xprof.cli.xprof_cli", reason="xprof (the dev extra) is not installed")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "xprof.cli.xprof_cli",
            "check_host_boundness",
            f"--session_id={run_dir.name}",
            f"--logdir={run_dir.parent}",
            "--bypass_cache=True",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout[done.stdout.index("{") :])


def test_quantities_equal_xprof_check_host_boundness(run) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = run
    xprof = _xprof_check_host_boundness(run_dir)
    ours = hostview.xprof_host_boundness(tpuperf.load(run_dir))
    assert ours is not None
    metrics = xprof["metrics"]
    assert metrics["number_of_steps"] == ours["number_of_steps"]
    assert metrics["core_count"] == ours["core_count"]
    # XProf rounds its output to 2 decimals (the ratio of idle to active time to 4).
    for field in (
        "total_duration_ms",
        "scaled_compute_time_ms",
        "scaled_hbm_time_ms",
        "scaled_ici_time_ms",
        "pure_idle_time_ms",
        "equivalent_idle_chips",
    ):
        assert metrics[field] == round(ours[field], 2), field
    assert metrics["idle_time_ratio_percent"] == round(ours["xprof_idle_time_ratio_pct"], 2)
    assert metrics["idle_to_active_compute_ratio"] == round(ours["idle_to_active_compute_ratio"], 4)
    assert metrics["scaled_barrier_time_ms"] == 0.0
    # Idle is over XProf's 10%, but HOST_BOUND also needs MXU idleness over 70% from TPU
    # hardware counters, which a profile without them reads as 0%.
    assert ours["idle_above_threshold"]
    assert metrics["mxu_idleness_percent"] == 0.0
    assert xprof["status"] == "NOT_HOST_BOUND"


def test_the_host_document_carries_them(run) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = run
    profile = tpuperf.load(run_dir)
    document = hostview.report(profile, AnalysisConfig(warmup_steps=0))
    assert document["xprof_host_boundness"] == pytest.approx(hostview.xprof_host_boundness(profile))
