"""Numbers pinned against a reference: XProf run on the same file, or the profile's own data
read here straight from the protobuf, independently of tpuperf's tables (issue: numbers you
can defend against XProf).

XProf runs when the `xprof` package is installed (the `dev` extra); its figures for these
files are also recorded below, so the reference holds where it is not.
"""

from __future__ import annotations

import itertools
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tpuperf.analyzers.base import AnalysisConfig

import tpuperf
from fixtures.generate import CLOCK_DRIFT_PS, generate
from tests.conftest import shared_profile
from tpuperf import _xspace_schema as pb
from tpuperf.analysis import analyze
from tpuperf.opstats import aggregate
from tpuperf.profiles import assemble, read_host

V6E = "tpu/v6e_4chip_inference.xplane.pb"
MI300_CONV = "gpu/mi300_jax_conv.xplane.pb"
MI300_ELEMENTWISE = "gpu/mi300_jax_elementwise.xplane.pb"

# XProf 2.24.2 on the v6e profile, `xprof analyze_async_overlap`: by_plane counts and the
# overall covered fraction. It pairs start/done ops on the host clock, where 10 ops of
# TPU:1-3 cross their partner and stay unpaired; TPU:0 reads its `Async XLA Ops` line.
XPROF_V6E_ASYNC = {"/device:TPU:0": 600, "total": 2395, "overlap_ratio": 0.025544563557167388}
# XProf 2.24.2 hlo_stats on mi300_jax_elementwise: loop_convert_fusion is 9 rows (one per
# program), each with 5 occurrences.
XPROF_MI300_LOOP_CONVERT_ROWS = {
    "11": 5,
    "13": 5,
    "15": 5,
    "17": 5,
    "19": 5,
    "21": 5,
    "26": 5,
    "28": 5,
    "30": 5,
}


# --------------------------------------------------------------------------- raw reading


def _space(relative: str) -> Any:
    space = pb.XSpace()
    space.ParseFromString(shared_profile(relative).read_bytes())
    return space


def _stat_values(plane: Any, stats: Any) -> dict[str, Any]:
    names = {k: m.name for k, m in plane.stat_metadata.items()}
    out = {}
    for stat in stats:
        kind = stat.WhichOneof("value")
        if kind is not None:
            value = getattr(stat, kind)
            out[names.get(stat.metadata_id, "")] = (
                names.get(value, "") if kind == "ref_value" else value
            )
    return out


def _line(plane: Any, name: str) -> Any:
    return next(line for line in plane.lines if line.name == name)


def _device_clock_periods(plane: Any, module: str) -> list[int]:
    """Device-clock start-to-start periods of ``module``'s executions, from the raw file: an
    execution starts at its first op's ``device_offset_ps``; the ops of an execution are those
    whose host-clock start lies in its `XLA Modules` event (both are host-clock times)."""
    modules = _line(plane, "XLA Modules")
    ops = _line(plane, "XLA Ops")
    op_host = [ops.timestamp_ns * 1000 + e.offset_ps for e in ops.events]
    op_device = [_stat_values(plane, e.stats)["device_offset_ps"] for e in ops.events]
    starts = []
    for event in modules.events:
        if not plane.event_metadata[event.metadata_id].name.startswith(module + "("):
            continue
        begin = modules.timestamp_ns * 1000 + event.offset_ps
        inside = [
            d
            for h, d in zip(op_host, op_device, strict=True)
            if begin <= h < begin + event.duration_ps
        ]
        if inside:
            starts.append(min(inside))
    return [b - a for a, b in itertools.pairwise(starts)]


# --------------------------------------------------------------------------- 1. op counts


def test_info_counts_every_op_event_of_each_chip() -> None:
    space = _space(V6E)
    expected = {
        plane.name: len(_line(plane, "XLA Ops").events)
        for plane in space.planes
        if plane.name.startswith("/device:TPU:")
    }
    assert sorted(expected.values()) == [1503, 1503, 1503, 1504]
    devices = tpuperf.load(shared_profile(V6E)).devices
    assert dict(zip(devices["plane"], devices["ops"].tolist(), strict=True)) == expected


# --------------------------------------------------------------------------- 2, 3. one clock


@pytest.fixture(scope="module")
def v6e_report() -> Any:
    return analyze(tpuperf.load(shared_profile(V6E)), config=AnalysisConfig(warmup_steps=0))


def test_v6e_step_time_is_the_device_clock_period(v6e_report: Any) -> None:
    # The reference: jit_f's period on each chip's device clock, read from the raw file.
    space = _space(V6E)
    periods = [
        p
        for plane in space.planes
        if plane.name.startswith("/device:TPU:")
        for p in _device_clock_periods(plane, "jit_f")
    ]
    assert min(periods) > 783.7e9 and max(periods) < 784.5e9
    reference = statistics.median(periods) / 1e9
    assert reference == pytest.approx(784.1, abs=0.3)
    step = v6e_report.summary["step_time_ms"]
    for stat in ("median", "mean", "p90"):
        assert step[stat] == pytest.approx(reference, rel=0.01), stat
    # Every chip's own steps have that period (host-clock periods jitter from 551 to 982 ms).
    steps = tpuperf.load(shared_profile(V6E)).steps
    durations = (steps["end_ps"] - steps["start_ps"]).iloc[:-1] / 1e9
    assert durations.between(783.7, 784.5).mean() > 0.95


def test_v6e_async_windows_hold_their_start_and_done_ops() -> None:
    # On one clock, each `Async XLA Ops` window of TPU:0 spans its start op's start to its done
    # op's end; mixing clocks put ops up to 198 ms away from their windows.
    profile = tpuperf.load(shared_profile(V6E))
    ops = profile.ops[(profile.ops["device"] == 0).to_numpy()]
    windows = profile.async_ops[(profile.async_ops["device"] == 0).to_numpy()]
    assert len(windows) == 600
    by_op = {
        name: group["start_ps"].to_numpy()
        for name, group in ops.groupby(ops["op"].astype(str), observed=True)
    }
    end_by_op = {
        name: (group["start_ps"] + group["dur_ps"]).to_numpy()
        for name, group in ops.groupby(ops["op"].astype(str), observed=True)
    }
    us = 1_000_000
    for row in windows.itertuples():
        start_gap = np.abs(by_op[str(row.op)] - row.start_ps).min()
        end_gap = np.abs(end_by_op[str(row.done_op)] - (row.start_ps + row.dur_ps)).min()
        assert start_gap < us and end_gap < us, (row.op, start_gap, end_gap)


def test_generated_clock_drift_is_undone() -> None:
    # Device 1's host clock drifts 200 ms from its device clock over the capture; steps,
    # windows and shares still equal the truth, which is on the device clock.
    run = generate("clock_drift", seed=1, steps=8)
    space = pb.XSpace()
    space.ParseFromString(run.xspaces["tpu-host-0"])
    plane = next(p for p in space.planes if p.name == "/device:TPU:1")
    steps_line = _line(plane, "Steps")
    host_durations = [e.duration_ps for e in steps_line.events]
    truth = run.truth
    # The host clock really is off: each step looks 25 ms longer than it is.
    assert min(host_durations) > max(truth.step_time_ps) + CLOCK_DRIFT_PS // 8 // 2
    profile = assemble([read_host(h, h, d) for h, d in run.xspaces.items()], "clock_drift")
    steps = profile.steps[(profile.steps["device"] == 1).to_numpy()]
    durations = (steps["end_ps"] - steps["start_ps"]).to_numpy()
    np.testing.assert_allclose(
        durations, [e - s for _, s, e in truth.device("tpu-host-0", 1).steps]
    )
    report = analyze(profile)
    assert report.summary["step_time_ms"]["median"] == pytest.approx(
        statistics.median(truth.step_time_ps[1:]) / 1e9, rel=1e-3
    )
    assert report.summary["idle_pct"] == pytest.approx(truth.idle_pct, abs=0.05)
    assert report.summary["exposed_collective_pct"] == pytest.approx(
        truth.exposed_collective_pct, abs=0.05
    )


# --------------------------------------------------------------------------- 4. async windows


def _xprof_async_overlap(path: Path, scratch: Path) -> dict[str, Any]:
    tools = pytest.importorskip("xprof.cli.internal.oss.xplane_tools")
    overlap = pytest.importorskip("xprof.cli.internal.async_overlap")
    copy = scratch / path.name
    copy.write_bytes(path.read_bytes())
    events = tools.iter_timeline_events(str(copy), host="", bypass_cache=True)
    return overlap.analyze(events, top_k=0)


def test_async_windows_on_every_chip(v6e_report: Any, tmp_path: Path) -> None:
    windows = v6e_report.results["collectives"].frame("async_windows")
    per_device = windows.groupby("device").size().to_dict()
    # The profile's own count: one window per copy-start op on every chip (6 per execution),
    # in the 99 steps: the last of the 100 executions only ends the last step (issue 22).
    ops = tpuperf.load(shared_profile(V6E)).ops
    in_steps = (ops["async_role"] == "start").to_numpy() & (ops["step"] >= 0).to_numpy()
    starts = ops[in_steps].groupby("device").size().to_dict()
    assert per_device == starts == {0: 594, 1: 594, 2: 594, 3: 594}
    async_ = v6e_report.results["collectives"].metrics["async"]
    try:
        xprof = _xprof_async_overlap(shared_profile(V6E), tmp_path)
        reference = {
            "/device:TPU:0": xprof["by_plane"]["/device:TPU:0"]["count"],
            "total": xprof["summary"]["count"],
            "overlap_ratio": xprof["summary"]["overlap_ratio"],
        }
        assert reference["/device:TPU:0"] == XPROF_V6E_ASYNC["/device:TPU:0"]
        assert reference["total"] == XPROF_V6E_ASYNC["total"]
    except pytest.skip.Exception:
        reference = XPROF_V6E_ASYNC
    # XProf counts the whole capture; the 6 windows of the last execution fall after the last
    # step (that execution only ends it), on each of the 4 chips.
    assert per_device[0] + 6 == reference["/device:TPU:0"]
    # XProf pairs on the host clock, where 10 of the 1,800 pairs of TPU:1-3 cross over.
    assert async_["windows"] + 4 * 6 - reference["total"] == 5
    # Covered fraction: 2.46% on the device clock against XProf's 2.55% on the host clock.
    assert async_["overlap_pct"] == pytest.approx(100 * reference["overlap_ratio"], abs=0.15)


# --------------------------------------------------------------------------- 5. GPU executions


def test_gpu_calls_of_one_jitted_function_are_separate_executions() -> None:
    # The reference: the host's `jit_forward_3d_conv:XLA GPU module` events, one per call and
    # device (8 execute threads x 5 calls).
    space = _space(MI300_CONV)
    host = next(p for p in space.planes if p.name == "/host:CPU")
    calls = Counter(
        line.name
        for line in host.lines
        for e in line.events
        if host.event_metadata[e.metadata_id].name == "jit_forward_3d_conv:XLA GPU module"
    )
    assert sorted(calls.values()) == [5] * 8
    profile = tpuperf.load(shared_profile(MI300_CONV))
    per_device = profile.modules.groupby("device").size()
    assert per_device.tolist() == [5] * 8
    report = analyze(profile)
    # 5 executions: 4 steps (the last execution only ends the last), the first left out as
    # warm-up.
    assert report.summary["steps_analyzed"] == 3
    # The gaps between calls are host time between jit calls, not idle inside a step: the
    # Python tracer shows the host in block_until_ready (try_to_block) while the GPUs wait.
    top = report.recommendations[0]
    assert top.kind == "host_bound" and "try_to_block" in top.title
    assert "block_until_ready" in top.fix["gpu"]
    assert "CUDA graphs" not in top.fix["gpu"]


# --------------------------------------------------------------------------- 6. op identity


def _xprof_hlo_stats_rows(path: Path, scratch: Path) -> list[dict[str, Any]]:
    raw_to_tool_data = pytest.importorskip("xprof.convert.raw_to_tool_data")
    copy = scratch / path.name
    copy.write_bytes(path.read_bytes())
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], "hlo_stats", {})
    table = json.loads(data)
    columns = [c["id"] for c in table["cols"]]
    return [
        dict(zip(columns, (c["v"] if c else None for c in row["c"]), strict=True))
        for row in table["rows"]
    ]


def test_ops_are_per_program_as_xprof_hlo_stats(tmp_path: Path) -> None:
    path = shared_profile(MI300_ELEMENTWISE)
    try:
        rows = _xprof_hlo_stats_rows(path, tmp_path)
        reference = {
            str(int(r["program_id"])): int(r["occurrences"])
            for r in rows
            if r["hlo_op_name"] == "loop_convert_fusion"
        }
        assert reference == XPROF_MI300_LOOP_CONVERT_ROWS
    except pytest.skip.Exception:
        reference = XPROF_MI300_LOOP_CONVERT_ROWS
    profile = tpuperf.load(path)
    table = aggregate(profile)  # the default grouping: per program and op
    rows_ = table[table["op"] == "loop_convert_fusion"]
    assert dict(zip(rows_["program_id"], rows_["occurrences"], strict=True)) == reference
    merged = aggregate(profile, by="op").set_index("op")
    assert merged.loc["loop_convert_fusion", "occurrences"] == 45
    assert merged.loc["loop_convert_fusion", "programs"] == 9


def test_module_rows_are_labelled_by_where_their_time_goes(v6e: Path) -> None:
    table = aggregate(tpuperf.load(v6e), by="module").set_index("module")
    # 96% of jit_f's time is copy-done; copy-start is its most frequent category, not its time.
    assert table.loc["jit_f", "category"] == "copy-done"


# --------------------------------------------------------------------------- 7. AMD peaks


@pytest.mark.parametrize(
    ("relative", "tflops"),
    [
        # XProf: xprof/utils/hardware_type_utils_test.cc expects 1307.4 for an MI300X
        # (gfx942, 304 CUs at 2.1 GHz) and 2516.6 for an MI355X (gfx950, 256 CUs at 2.4 GHz).
        (MI300_CONV, 1307.4),
        ("gpu/mi300_jax_te_fused_attn.xplane.pb", 2516.6),
    ],
)
def test_amd_peaks_by_gfx_architecture(relative: str, tflops: float) -> None:
    report = analyze(tpuperf.load(shared_profile(relative)))
    s = report.summary
    assert s["peak_tflops"] == tflops
    # Bandwidth from the plane's own memory_bandwidth stat, which the profile records.
    plane = next(p for p in _space(relative).planes if p.name == "/device:GPU:0")
    assert s["peak_hbm_gbps"] == _stat_values(plane, plane.stats)["memory_bandwidth"] / 1e9
    assert s["peaks_source"] == "chip_table+profile"


# --------------------------------------------------------------------------- 8. savings


def test_savings_are_what_the_fix_can_reach(v6e_report: Any) -> None:
    recs = {r.kind: r for r in v6e_report.recommendations}
    # The profile's own compute per step: the three broadcast fusions of jit_f.
    ops = tpuperf.load(shared_profile(V6E)).ops
    fusions = ops[ops["op"].astype(str).str.startswith("broadcast_add_fusion").to_numpy()]
    compute_ms = float(fusions["dur_ps"].sum()) / 400 / 1e9
    hide = recs["exposed_async_copy"]
    assert hide.est_savings_ms == pytest.approx(compute_ms, rel=1e-6)
    assert hide.est_savings_pct == pytest.approx(3.07, abs=0.01)
    remove = recs["reduce_copies"]
    assert remove.est_savings_pct == pytest.approx(96.9, abs=0.05)
    assert "Offload less" in remove.fix["tpu"] and "Transfer less" in remove.title
    assert remove.values["gb_per_copy"] == pytest.approx(5.37, abs=0.01)


# --------------------------------------------------------------------------- 9. details


def test_work_outside_the_steps_is_amortized_over_all_steps() -> None:
    profile = tpuperf.load(shared_profile(V6E))
    whole = {r.kind: r for r in analyze(profile).recommendations}
    part = {r.kind: r for r in analyze(profile, steps="5:20").recommendations}
    # 3 all-reduces per chip before the first step, 365.1 ms, over the 99 steps of the capture
    # (100 executions: the last only ends the last step).
    assert part["exposed_collective"].est_savings_ms == pytest.approx(365.09 / 99, abs=0.001)
    assert whole["exposed_collective"].est_savings_ms == pytest.approx(
        part["exposed_collective"].est_savings_ms
    )


def test_straggler_confidence_follows_the_evidence() -> None:
    report = analyze(tpuperf.load(shared_profile(MI300_CONV)))
    straggler = next(r for r in report.recommendations if r.kind == "straggler")
    # Device 0 runs other kernels than the rest, over 4 steps: not a slow chip for sure.
    assert straggler.confidence == "low"
    assert "not the same ones" in straggler.evidence


def test_top_ops_name_their_program_and_skip_empty_ops() -> None:
    report = analyze(tpuperf.load(shared_profile(MI300_ELEMENTWISE)))
    top = report.top_ops.to_pandas()
    assert (top["ms_per_step"] > 0).all()
    assert not top.duplicated(["module", "op"]).any()
    v6e = analyze(tpuperf.load(shared_profile(V6E)))
    assert not any(op.startswith("copy-start") for op in v6e.top_ops.strings("op").tolist())
    for rec in v6e.recommendations:
        assert " 0.000 ms" not in rec.evidence, rec.kind
