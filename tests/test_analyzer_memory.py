"""The memory analyzer (analyzers/memory.py) on generated profiles with a known buffer
assignment and known rematerialization (fixtures/memory_scenarios.py), and on the real v6e
profile's host offload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tpuperf
from fixtures.memory_scenarios import generate_memory
from tpuperf.memory_plan import GIB, memory_report


def _profile(scenario: str, tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    data, truth = generate_memory(scenario)
    path = tmp_path / f"{scenario}.xplane.pb"
    path.write_bytes(data)
    return tpuperf.load(path), truth


@pytest.mark.parametrize("scenario", ["remat_headroom", "near_oom"])
def test_generated_buffer_assignment_reads_as_its_truth(scenario: str, tmp_path: Path) -> None:
    profile, truth = _profile(scenario, tmp_path)
    report = memory_report(profile, allocators=False)
    [program] = report.programs
    assert (program.module, program.program_id) == (truth["module"], truth["program_id"])
    assert program.peak_bytes == truth["peak_bytes"]
    assert program.split == truth["split_bytes"]
    assert program.live_peak_bytes == truth["live_peak_bytes"]
    assert sorted(b.op for b in program.buffers) == truth["peak_buffers"]
    assert program.remat_bytes == truth["remat_bytes"]
    assert report.capacity_bytes == {program.device_kind: truth["capacity_bytes"]}
    assert report.capacity_source[program.device_kind] == "device"
    assert report.headroom(program.device_kind) == truth["headroom_bytes"]
    [remat] = [b for b in program.buffers if b.op == "fusion.2"]
    assert (remat.pass_, remat.scope) == (
        "backward",
        "jit(train_step)/Model/Model/checkpoint/rematted_computation/Dense_1",
    )


def test_remat_advice_has_the_exact_bytes_and_time(tmp_path: Path) -> None:
    profile, truth = _profile("remat_headroom", tmp_path)
    report = tpuperf.analyze(profile)
    top = report.recommendations[0]
    assert top.kind == truth["expected_top_recommendation"] == "remat_headroom"
    assert top.est_savings_ms == pytest.approx(truth["expected_savings_ms"], rel=1e-9)
    assert top.est_savings_pct == pytest.approx(
        100 * truth["expected_savings_ms"] / truth["step_ms"], rel=1e-6
    )
    values = top.values
    assert values["remat_ms_per_step"] == pytest.approx(truth["remat_ms_per_step"], rel=1e-9)
    assert values["remat_bytes"] == truth["remat_bytes"]
    assert values["headroom_bytes"] == truth["headroom_bytes"]
    # 2 of the 3 GiB the recomputed op defines fit: two thirds of its time.
    assert values["bytes_to_keep"] == truth["headroom_bytes"] == 2 * GIB
    # README's figures: 3 GiB recomputed in 1.5 ms a step, 2 GiB of headroom, 1.0 ms saved.
    assert (truth["remat_bytes"], truth["remat_ms_per_step"]) == (3 * GIB, 1.5)
    assert top.est_savings_ms == pytest.approx(1.0, rel=1e-9)
    assert "jax.checkpoint" in top.fix["tpu"]
    metrics = report.results["memory"].metrics
    assert metrics["peak_bytes"] == truth["peak_bytes"]
    assert metrics["headroom_bytes"] == truth["headroom_bytes"]


def test_near_capacity_gives_the_near_oom_advice_first(tmp_path: Path) -> None:
    profile, truth = _profile("near_oom", tmp_path)
    report = tpuperf.analyze(profile)
    top = report.recommendations[0]
    assert top.kind == truth["expected_top_recommendation"] == "near_oom"
    assert top.values["headroom_bytes"] == truth["headroom_bytes"]
    assert top.values["headroom_pct"] == pytest.approx(5.0, abs=1e-6)
    # The largest buffers live at the peak, with their source lines.
    assert top.ops == ["fusion.4", "params", "fusion.2"]
    assert "model.py:" in top.evidence
    # Near out-of-memory, the headroom buys nothing back: no remat advice.
    assert "remat_headroom" not in {r.kind for r in report.recommendations}


def test_v6e_offload_advice_keeps_the_buffers_that_fit(v6e: Path) -> None:
    profile = tpuperf.load(v6e)
    report = tpuperf.analyze(profile, analyzers=["memory"])
    [advice] = [r for r in report.recommendations if r.kind == "offload_headroom"]
    values = advice.values
    assert values["program"] == "jit_f"
    assert values["offloaded_buffers"] == 3 and values["offloaded_bytes"] == 15 * GIB
    # 32 GiB (chip table) - 20,480.09 MiB (the peak) leaves room for 2 of the 5 GiB buffers.
    assert values["headroom_bytes"] == 32 * GIB - 21474934816
    assert values["buffers_to_keep"] == 2 and values["bytes_to_keep"] == 10 * GIB
    # The copy time: copy-start/copy-done self time of jit_f per step per device, over the
    # step windows analyze counts (the wait reduce_copies quotes is over the same windows).
    import re

    import numpy as np

    from tpuperf.config import AnalysisConfig
    from tpuperf.timeline import build_timeline

    copy_ps = windows = 0
    for view in build_timeline(profile, AnalysisConfig()).devices:
        module = np.asarray(view.ops.strings("module").tolist(), dtype=object)[view.selected]
        op = np.asarray(view.ops.strings("op").tolist(), dtype=object)[view.selected]
        copy = [
            m == "jit_f" and bool(re.match(r"copy-(start|done)(\.\d+)?$", o))
            for m, o in zip(module, op, strict=True)
        ]
        copy_ps += int(view.ops.array_at("self_ps", view.selected)[np.array(copy, bool)].sum())
        windows += len(view.windows)
    copy_ms = copy_ps / windows / 1e9
    assert values["copy_ms_per_step"] == pytest.approx(copy_ms, rel=1e-9)
    assert advice.est_savings_ms == pytest.approx(copy_ms * 2 / 3, rel=1e-9)
