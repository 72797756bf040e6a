"""Analyzers on small hand-built profiles whose every number is known.

``build`` is also used by the other analyzer and report tests.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from tpuperf.analyzers.base import AnalysisConfig

from tpuperf.analysis import analyze
from tpuperf.errors import UsageError
from tpuperf.profiles import Profile

US = 1_000_000  # ps per microsecond
MS = 1_000 * US


def op(
    name: str,
    start_us: float,
    dur_us: float,
    kind: str = "compute",
    collective: str = "",
    role: str = "",
    flops: float = float("nan"),
    nbytes: float = float("nan"),
    line: str = "XLA Ops",
    hlo: str = "",
) -> dict:
    return {
        "op": name,
        "start_ps": int(start_us * US),
        "dur_ps": int(dur_us * US),
        "self_ps": int(dur_us * US),
        "kind": kind,
        "collective": collective,
        "async_role": role,
        "flops": flops,
        "model_flops": float("nan"),
        "bytes_accessed": nbytes,
        "line": line,
        "hlo_text": hlo or name,
    }


def build(
    per_device: dict[tuple[str, int], list[dict]],
    steps_us: list[tuple[float, float]] | None = None,
    kind: str = "TPU",
    chip: str = "TPU v6 lite",
    peak_tflops: float = 918.0,
    peak_hbm_gbps: float = 1637.99,
    step_source: str = "steps_line",
    per_device_steps: dict[tuple[str, int], list[tuple[float, float]]] | None = None,
    modules: pd.DataFrame | None = None,
) -> Profile:
    """A profile with the given ops per (host, device) and the same step windows on each."""
    rows, step_rows, devices = [], [], []
    for (host, device), ops in per_device.items():
        devices.append(
            {
                "host": host,
                "device": device,
                "plane": f"/device:{kind}:{device}",
                "kind": kind,
                "core": "TensorCore" if kind == "TPU" else kind,
                "chip": chip,
                "peak_tflops": peak_tflops,
                "peak_hbm_gbps": peak_hbm_gbps,
                "memory_bytes": float("nan"),
                "ops": len(ops),
            }
        )
        for o in ops:
            row = {
                "host": host,
                "device": device,
                "module": "jit_step",
                "program_id": "1",
                "category": "",
                "hbm_read_bytes": float("nan"),
                "hbm_write_bytes": float("nan"),
                "vmem_read_bytes": float("nan"),
                "vmem_write_bytes": float("nan"),
                "cmem_read_bytes": float("nan"),
                "cmem_write_bytes": float("nan"),
                "tf_op": "",
                "source": "",
                "step": -1,
            }
            row.update(o)
            rows.append(row)
        windows = (per_device_steps or {}).get((host, device), steps_us or [])
        for i, (s, e) in enumerate(windows):
            step_rows.append(
                {
                    "host": host,
                    "device": device,
                    "step": i,
                    "start_ps": int(s * US),
                    "end_ps": int(e * US),
                    "source": step_source,
                }
            )
    tables = {"devices": pd.DataFrame(devices), "ops": pd.DataFrame(rows)}
    if step_rows:
        tables["steps"] = pd.DataFrame(step_rows)
    if modules is not None:
        tables["modules"] = modules
    return Profile.from_tables(**tables, source="synthetic")


def training_step(t0: float, lead: float = 100.0) -> list[dict]:
    """One 1000 us step: `lead` us idle, async all-gather around 300 us of compute, a loop
    fusion, a 20 us gap, a synchronous all-reduce; idle to the end."""
    t = t0 + lead
    return [
        op("all-gather-start.1", t, 10, "collective", "all-gather", "start"),
        op("fusion.1", t + 10, 300, flops=200e9, nbytes=0.1e9),  # compute-bound
        op("all-gather-done.1", t + 310, 50, "collective", "all-gather", "done"),
        op("loop_fusion.2", t + 360, 200, flops=1e6, nbytes=0.2e9),  # memory-bound
        op("all-reduce.3", t + 580, 100, "collective", "all-reduce",
           hlo="%all-reduce.3 = f32[8] all-reduce(%x), replica_groups={{0,1,2,3}}"),
    ]  # fmt: skip


def four_chip_training(lead: float = 100.0, steps: int = 5) -> Profile:
    per_device = {
        ("h0", d): [o for s in range(steps) for o in training_step(s * 1000.0, lead)]
        for d in range(4)
    }
    return build(per_device, [(s * 1000.0, (s + 1) * 1000.0) for s in range(steps)])


# ---------------------------------------------------------------------------- steps


def test_step_time_and_breakdown_per_device() -> None:
    report = analyze(four_chip_training())
    summary = report.summary
    assert summary["step_time_ms"]["median"] == pytest.approx(1.0)
    assert summary["step_time_ms"]["count"] == 4  # 5 steps, the first left out as warm-up
    assert summary["steps_excluded"] == 1
    # Busy per step: 10 + 300 + 50 + 200 + 100 = 660 us; collectives 160 us.
    assert summary["busy_pct"] == pytest.approx(66.0)
    assert summary["exposed_collective_pct"] == pytest.approx(16.0)
    assert summary["compute_pct"] == pytest.approx(50.0)
    assert summary["idle_pct"] == pytest.approx(34.0)
    breakdown = report.results["steps"].frame("breakdown")
    assert len(breakdown) == 16  # 4 devices x 4 steps
    assert breakdown["exposed_collective_ms"].to_numpy() == pytest.approx([0.16] * 16)


def test_explicit_step_range_replaces_warmup() -> None:
    report = analyze(four_chip_training(), steps="0:2")
    assert report.summary["steps_analyzed"] == 2
    assert report.results["steps"].metrics["steps_analyzed"] == [0, 1]
    warm = analyze(four_chip_training(), config=AnalysisConfig(warmup_steps=3))
    assert warm.results["steps"].metrics["steps_excluded"] == [0, 1, 2]


def test_step_range_that_selects_nothing_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"selects no step; this profile has steps 0\.\.4"):
        analyze(four_chip_training(), steps="7:9")


def test_unknown_host_is_a_usage_error_naming_the_hosts() -> None:
    with pytest.raises(UsageError, match="its hosts: h0"):
        analyze(four_chip_training(), host="h9")


def test_straggler_is_named_with_its_signature() -> None:
    per_device = {}
    steps = [(s * 1000.0, (s + 1) * 1000.0) for s in range(4)]
    for d in range(8):
        host = f"h{d // 4}"
        slow = d == 6
        ops = []
        for s in range(4):
            t = s * 1000.0
            compute = 600 if slow else 400
            ops.append(op("fusion.1", t, compute))
            # Everyone leaves the all-reduce together; the others waited in it for the slow one.
            ops.append(op("all-reduce.1", t + compute, 800 - compute, "collective", "all-reduce"))
        per_device[(host, d % 4)] = ops
    report = analyze(build(per_device, steps), config=AnalysisConfig(warmup_steps=0))
    stragglers = report.results["steps"].metrics["stragglers"]
    assert [(s["host"], s["device"]) for s in stragglers] == [("h1", 2)]
    assert stragglers[0]["shortest_collective"]
    rec = next(r for r in report.recommendations if r.kind == "straggler")
    assert rec.est_savings_ms == pytest.approx(0.2)  # 600 - 400 us of compute per step
    assert rec.est_savings_pct == pytest.approx(20.0)
    assert "h1/device:2" in rec.title
    # The others' all-reduce time beyond the slow chip's own is waiting, not transfer.
    coll = next(r for r in report.recommendations if r.kind == "exposed_collective")
    assert coll.est_savings_ms == pytest.approx(0.2)


def test_no_steps_uses_each_devices_op_span() -> None:
    per_device = {("h0", 0): [op("a", 0, 100), op("b", 300, 100)]}
    report = analyze(build(per_device))
    assert report.summary["step_source"] is None
    assert report.summary["step_time_ms"]["median"] is None
    assert report.summary["idle_pct"] == pytest.approx(50.0)  # 200 of 400 us


def module_calls(n: int, program_id: str) -> pd.DataFrame:
    """``n`` calls of the program ``jit_f`` (``program_id``) on device h0/0, the modules of
    :func:`build`: one every 100 us, each 60 us long."""
    return pd.DataFrame(
        {
            "host": ["h0"] * n,
            "device": np.zeros(n, dtype="int64"),
            "module": ["jit_f"] * n,
            "program_id": [program_id] * n,
            "start_ps": np.arange(n, dtype="int64") * 100 * US,
            "dur_ps": np.full(n, 60 * US, dtype="int64"),
        }
    )


def test_module_periods_stand_in_for_steps() -> None:
    per_device = {("h0", 0): [op("a", s * 100.0, 60) for s in range(5)]}
    profile = build(per_device, modules=module_calls(5, "1"))
    report = analyze(profile, config=AnalysisConfig(warmup_steps=0))
    assert report.summary["step_source"] == "module_period"
    assert report.summary["step_time_ms"]["median"] == pytest.approx(0.1)
    assert report.summary["idle_pct"] == pytest.approx(40.0)


# ---------------------------------------------------------------------------- idle


def test_gaps_before_steps_make_a_host_bound_verdict() -> None:
    report = analyze(four_chip_training(lead=300.0))
    idle = report.results["idle"].metrics
    # Step: 300 us lead, 660 us of ops with a 20 us gap, ends at 980 us: 20 us trailing.
    assert idle["between_steps_idle_pct"] == pytest.approx(32.0)
    assert idle["in_step_idle_pct"] == pytest.approx(2.0)
    assert idle["host_bound"] is True
    assert idle["macro_gaps"] == 16 and idle["micro_gaps"] == 0
    assert idle["equivalent_idle_chips"] == pytest.approx(4 * 0.34)
    top = report.recommendations[0]
    assert top.kind == "host_bound"
    assert top.est_savings_ms == pytest.approx(0.32)


def test_micro_gaps_are_launch_overhead() -> None:
    ops = [op(f"k{i}", i * 12.0, 10) for i in range(50)]  # 2 us gaps
    report = analyze(build({("h0", 0): ops}))
    idle = report.results["idle"].metrics
    assert idle["micro_gaps"] == 49 and idle["macro_gaps"] == 0
    assert idle["micro_idle_pct"] == pytest.approx(100 * 98 / 598)
    assert next(r for r in report.recommendations if r.kind == "idle_gaps").confidence == "medium"


# ---------------------------------------------------------------------------- collectives


def test_async_windows_are_classified_by_overlap() -> None:
    ops = [
        # 100 us window fully covered by compute: hidden.
        op("all-gather-start.1", 0, 1, "collective", "all-gather", "start"),
        op("fusion.1", 1, 98),
        op("all-gather-done.1", 99, 1, "collective", "all-gather", "done"),
        # 100 us window with nothing in it: exposed.
        op("all-gather-start.2", 200, 1, "collective", "all-gather", "start"),
        op("all-gather-done.2", 201, 99, "collective", "all-gather", "done"),
        # Half covered: partial.
        op("reduce-scatter-start.3", 400, 1, "collective", "reduce-scatter", "start"),
        op("fusion.2", 401, 50),
        op("reduce-scatter-done.3", 451, 49, "collective", "reduce-scatter", "done"),
    ]
    report = analyze(build({("h0", 0): ops}))
    a = report.results["collectives"].metrics["async"]
    assert (a["windows"], a["hidden"], a["partial"], a["exposed"]) == (3, 1, 1, 1)
    assert a["by_kind"]["reduce-scatter"]["overlap_pct"] == pytest.approx(50.0)


def test_gpu_collective_hidden_behind_a_compute_stream_is_not_exposed() -> None:
    ops = [
        op("gemm", 0, 100, line="Stream #13(Kernel)"),
        op("ncclAllReduce", 50, 100, "collective", "all-reduce", line="Stream #27(Kernel)"),
    ]
    report = analyze(build({("h0", 0): ops}, kind="GPU", chip="NVIDIA H100 80GB HBM3"))
    s = report.summary
    assert s["exposed_collective_pct"] == pytest.approx(100 * 50 / 150)
    # On GPU, busy is compute kernels only: NCCL-only time counts as idle (DESIGN.md).
    assert s["idle_pct"] == pytest.approx(100 * 50 / 150)
    assert s["no_op_pct"] == pytest.approx(0.0)
    m = report.results["collectives"].metrics
    assert m["collective_overlapped_pct"] == pytest.approx(50.0)


def test_replica_group_size_from_hlo_text() -> None:
    from tpuperf.analyzers.collectives import replica_group_size

    assert replica_group_size("all-reduce(%x), replica_groups={{0,1,2,3},{4,5,6,7}}") == 4
    assert replica_group_size("all-gather(%x), replica_groups=[2,4]<=[8], dimensions={0}") == 4
    assert replica_group_size("fusion(%x)") is None
    report = analyze(four_chip_training())
    by_kind = report.results["collectives"].metrics["by_kind"]
    assert by_kind["all-reduce"]["replica_group_sizes"] == [4]
    assert by_kind["all-reduce"]["async_ops_per_step"] == 0  # synchronous


def test_exposed_collective_estimate_is_the_exposed_time() -> None:
    report = analyze(four_chip_training())
    rec = next(r for r in report.recommendations if r.kind == "exposed_collective")
    assert rec.est_savings_ms == pytest.approx(0.16)
    assert rec.est_savings_pct == pytest.approx(16.0)
    assert rec.ops[0] == "all-reduce.3"
    assert "--xla_tpu_enable_async_collective_fusion" in rec.fix["tpu"]
    assert set(rec.fix) == {"tpu"}  # the fix for the platform that ran, only


# ---------------------------------------------------------------------------- roofline


def test_roofline_per_op_and_estimates() -> None:
    report = analyze(four_chip_training())
    ops = report.results["roofline"].frame("ops").set_index("op")
    # fusion.1: 200 GFLOP in 300 us = 666.7 TFLOP/s; intensity 2000 > ridge 560.4: compute-bound.
    assert ops.loc["fusion.1", "achieved_tflops"] == pytest.approx(200e9 / 300e6)
    assert ops.loc["fusion.1", "bound"] == "compute"
    assert ops.loc["loop_fusion.2", "bound"] == "memory"
    # loop_fusion.2: 0.2 GB in 200 us = 1000 GB/s; at 1637.99 GB/s it would take 122.1 us.
    assert ops.loc["loop_fusion.2", "achieved_gbps"] == pytest.approx(1000.0)
    mem = next(r for r in report.recommendations if r.kind == "memory_bound")
    assert mem.est_savings_ms == pytest.approx((200 - 0.2e9 / 1637.99e3) / 1000, rel=1e-6)
    comp = next(r for r in report.recommendations if r.kind == "low_compute_utilization")
    assert comp.est_savings_ms == pytest.approx((300 - 200e9 / 918e6) / 1000, rel=1e-6)
    peaks = report.results["roofline"].metrics["peaks"]
    assert peaks["tflops_source"] == "profile"
    assert peaks["ridge_flop_per_byte"] == pytest.approx(918e12 / 1637.99e9)
    # FLOP utilization: 200 GFLOP + 1 MFLOP per 1 ms step at 918 TFLOP/s.
    expected = 100 * (200e9 + 1e6) / 1e-3 / 918e12
    assert report.summary["flops_utilization_pct"] == pytest.approx(expected)


def test_peaks_unknown_means_no_roofline_and_says_how_to_pass_them() -> None:
    per_device = {("h0", 0): [op("fusion.1", 0, 100, flops=1e9, nbytes=1e6)]}
    profile = build(per_device, kind="CPU", chip="CPU", peak_tflops=np.nan, peak_hbm_gbps=np.nan)
    report = analyze(profile)
    roofline = report.results["roofline"]
    assert roofline.metrics["peaks"]["peak_tflops"] is None
    assert any("--peak-tflops and --peak-hbm-gbps" in n for n in roofline.notes)
    assert "bound" not in roofline.tables["ops"]
    assert report.summary["flops_utilization_pct"] is None
    assert not [r for r in report.recommendations if r.analyzer == "roofline"]

    flagged = analyze(profile, config=AnalysisConfig(peak_tflops=10.0, peak_hbm_gbps=100.0))
    peaks = flagged.results["roofline"].metrics["peaks"]
    assert (peaks["peak_tflops"], peaks["tflops_source"]) == (10.0, "flags")
    assert flagged.summary["flops_utilization_pct"] == pytest.approx(100 * 1e9 / 100e6 / 10.0)
