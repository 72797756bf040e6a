"""Profiles load into tables whose numbers match XProf, the fixtures' truth and the generator's."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import tpuperf
from fixtures.generate import SCENARIOS, write_run
from tests.conftest import CPU_FIXTURE, CPU_TRUTH, shared_profile
from tpuperf import schema
from tpuperf.errors import BadProfile
from tpuperf.opstats import aggregate

# XProf 2.24.2, hlo_stats tool on tpu/v6e_4chip_inference.xplane.pb, all chips together
# (see ../shared/profiles/README.md): op -> (occurrences, total time in us).
XPROF_V6E_HLO_STATS = {
    "copy-done.4": (400, 77_773_215.7),
    "all-reduce": (12, 1_460_345.3),
}


def test_v6e_devices_and_peaks(v6e) -> None:
    profile = tpuperf.load(v6e)
    devices = profile.devices
    assert devices["kind"].astype(str).tolist() == ["TPU"] * 4
    assert devices["chip"].tolist() == ["TPU v6 Lite"] * 4
    assert devices["peak_tflops"].tolist() == [918.0] * 4
    assert np.allclose(devices["peak_hbm_gbps"], 1637.99, atol=0.005)
    assert profile.platform == "TPU"
    for table in schema.TABLES:
        schema.validate(table, getattr(profile, table))


def test_v6e_ops_agree_with_xprof_hlo_stats(v6e) -> None:
    ops = aggregate(tpuperf.load(v6e), by="op")
    assert len(ops) == 17
    by_op = ops.set_index("op")
    for op, (occurrences, total_us) in XPROF_V6E_HLO_STATS.items():
        assert by_op.loc[op, "occurrences"] == occurrences
        assert by_op.loc[op, "total_time_ms"] == pytest.approx(total_us / 1e3, rel=1e-3)
    # Every copy-done, copy-start and the broadcast fusions ran once per chip per step.
    assert (by_op["occurrences"] == 400).sum() == 15


def test_v6e_op_classification(v6e) -> None:
    ops = tpuperf.load(v6e).ops
    all_reduce = ops[ops["op"] == "all-reduce"]
    assert set(all_reduce["kind"].astype(str)) == {"collective"}
    assert set(all_reduce["collective"].astype(str)) == {"all-reduce"}
    copies = ops[ops["op"].astype(str).str.startswith("copy-")]
    assert set(copies["kind"].astype(str)) == {"async_copy"}
    assert set(copies["async_role"].astype(str)) == {"start", "done"}
    # Costs come from the event metadata: the all-reduce reads and writes 5 GiB of HBM each.
    first = all_reduce.iloc[0]
    assert first["flops"] == 1342177280
    assert first["hbm_read_bytes"] == first["hbm_write_bytes"] == 5 * 2**30
    assert set(ops["module"].astype(str)) >= {"jit_f", "jit__psum"}


def test_v6e_steps_come_from_module_periods(v6e) -> None:
    profile = tpuperf.load(v6e)
    steps = profile.steps
    assert set(steps["source"].astype(str)) == {"module_period"}
    # 100 executions of jit_f: the last only ends step 98 (issue 22: it is no step itself).
    assert steps.groupby("device").size().tolist() == [99, 99, 99, 99]


@pytest.mark.parametrize(
    ("relative", "chip", "planes"),
    [
        ("gpu/v100_8gpu_tf_training.xplane.pb", "NVIDIA V100", 8),
        ("gpu/mi300_jax_gemm.xplane.pb", "AMD MI300 (gfx942)", 8),
        ("gpu/mi300_jax_elementwise.xplane.pb", "AMD MI300 (gfx942)", 8),
        ("gpu/mi300_jax_conv.xplane.pb", "AMD MI300 (gfx942)", 8),
        ("gpu/mi300_jax_te_fused_attn.xplane.pb", "AMD MI355 (gfx950)", 8),
    ],
)
def test_gpu_profiles_load(relative: str, chip: str, planes: int) -> None:
    profile = tpuperf.load(shared_profile(relative))
    devices = profile.devices
    assert len(devices) == planes
    assert set(devices["kind"].astype(str)) == {"GPU"}
    assert devices["chip"].iat[0] == chip
    assert len(profile.ops) > 0
    assert (profile.ops["dur_ps"] >= 0).all()
    assert (profile.ops["self_ps"] <= profile.ops["dur_ps"]).all()


def test_mi300_kernels_map_to_hlo_ops() -> None:
    profile = tpuperf.load(shared_profile("gpu/mi300_jax_gemm.xplane.pb"))
    ops = profile.ops
    assert {"copy.1", "wrapped_broadcast"} <= set(ops["op"].astype(str))
    assert "jit_dot" in set(ops["module"].astype(str))
    kernels = ops[ops["op"] == "wrapped_broadcast"]["hlo_text"].astype(str)
    assert set(kernels) == {"wrapped_broadcast.kd"}
    assert profile.devices["peak_hbm_gbps"].iat[0] == pytest.approx(2662.4)


def test_v100_memcpy_and_kernels_told_apart() -> None:
    ops = tpuperf.load(shared_profile("gpu/v100_8gpu_tf_training.xplane.pb")).ops
    kinds = ops.groupby("kind", observed=True).size()
    assert kinds["memcpy"] > 0 and kinds["compute"] > 0
    memcpy = ops[ops["kind"] == "memcpy"]
    assert memcpy["line"].astype(str).str.contains("Memcpy").all()


def test_cpu_fixture_ops_and_steps() -> None:
    truth = json.loads(CPU_TRUTH.read_text())
    profile = tpuperf.load(CPU_FIXTURE)
    assert profile.devices["kind"].astype(str).tolist() == ["CPU"]
    ops = profile.ops
    assert set(ops["module"].astype(str)) == set(truth["hlo_modules"])
    assert set(ops["op"].astype(str)) == set(truth["hlo_entry_ops_executed"])
    steps = profile.steps
    assert steps["step"].tolist() == truth["steps"]
    assert set(steps["source"].astype(str)) == {"step_marker"}
    # Every op runs inside a step, each step runs every executed entry op once.
    per_step = ops.groupby("step").size()
    assert per_step.index.tolist() == truth["steps"]
    assert (per_step == len(truth["hlo_entry_ops_executed"])).all()
    assert len(profile.modules) == len(truth["steps"])
    assert profile.hosts[0].versions["jax_version"] == truth["jax_version"]


def _busy_ps(frame: pd.DataFrame, windows: list[tuple[int, int, int]]) -> int:
    """Union of op intervals clipped to the step windows (the truth's busy definition)."""
    start = frame["start_ps"].to_numpy()
    end = start + frame["dur_ps"].to_numpy()
    total = 0
    for _, lo, hi in windows:
        s, e = np.clip(start, lo, hi), np.clip(end, lo, hi)
        order = np.argsort(s)
        cursor = lo
        for a, b in zip(s[order].tolist(), e[order].tolist(), strict=True):
            a = max(a, cursor)
            if b > a:
                total += b - a
                cursor = b
    return total


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_generated_profiles_match_truth(scenario: str, tmp_path) -> None:
    run_dir, truth = write_run(scenario, tmp_path)
    profile = tpuperf.load(run_dir)
    assert sorted(profile.host_names) == sorted(truth.hosts)
    assert len(profile.devices) == len(truth.devices)
    for device_truth in truth.devices:
        mask = (profile.ops["host"] == device_truth.host) & (
            profile.ops["device"] == device_truth.device
        )
        device_ops = profile.ops[mask]
        counted = device_ops[device_ops["kind"] != "memcpy"]
        assert len(counted) == device_truth.ops
        steps = profile.steps[
            (profile.steps["host"] == device_truth.host)
            & (profile.steps["device"] == device_truth.device)
        ].sort_values("step")
        got = list(zip(steps["step"], steps["start_ps"], steps["end_ps"], strict=True))
        expected = [tuple(s) for s in device_truth.steps]
        if device_truth.host_clock_drift_ps:
            # On its own device clock, placed by the median offset of its ops: the same steps,
            # moved as a whole.
            moved = got[0][1] - expected[0][1]
            expected = [(n, s + moved, e + moved) for n, s, e in expected]
        assert got == expected
        busy_ops = counted[counted["kind"] == "compute"] if truth.platform == "GPU" else counted
        assert _busy_ps(busy_ops, got) == device_truth.busy_ps


def test_sparse_core_planes_are_kept_apart(tmp_path) -> None:
    from fixtures.generate import generate
    from tpuperf import _xspace_schema as pb

    host, data = next(iter(generate("collective_training").xspaces.items()))
    space = pb.XSpace()
    space.ParseFromString(data)
    tensor_core = next(p for p in space.planes if p.name == "/device:TPU:0")
    sparse = space.planes.add()
    sparse.CopyFrom(tensor_core)
    sparse.name = "/device:TPU:0 SparseCore 0"
    renames = {
        "XLA Ops": "Sparse Core Ops",
        "XLA Modules": "Sparse Core Modules",
        "Steps": "Sparse Core Steps",
    }
    for line in sparse.lines:
        line.name = renames.get(line.name, line.name)
    path = tmp_path / f"{host}.xplane.pb"
    path.write_bytes(space.SerializeToString())

    plain = tpuperf.load(tmp_path)
    devices = plain.devices.set_index("device")
    assert devices.loc[1000, "core"] == "SparseCore"
    assert devices.loc[1000, "plane"] == "/device:TPU:0 SparseCore 0"
    assert devices.loc[0, "core"] == "TensorCore"
    ops = plain.ops
    # The SparseCore's ops are its own rows, as many as the TensorCore it copies.
    assert (ops["device"] == 1000).sum() == (ops["device"] == 0).sum() > 0
    assert set(plain.steps.loc[plain.steps["device"] == 1000, "source"].astype(str)) == {
        "steps_line"
    }
    # Analysis leaves SparseCores out of the chip's idle and step figures.
    report = tpuperf.analyze(plain).to_dict()
    assert report["summary"]["devices"] == 4


def test_read_space_decodes_the_host_file_again(tmp_path) -> None:
    # The raw XSpace the Perfetto export reads the lines the tables do not hold from: the same
    # planes and lines, with the same event counts, as the profile's line table.
    profile = tpuperf.load(CPU_FIXTURE)
    (host,) = profile.host_names
    space = profile.read_space(host)
    assert space is not None
    counted = {(plane.name, line.name): len(line) for plane in space.planes for line in plane.lines}
    table = profile.line_table
    expected = dict(
        zip(
            zip(table.strings("plane").tolist(), table.strings("line").tolist(), strict=True),
            table.array("events").tolist(),
            strict=True,
        )
    )
    assert {key: n for key, n in counted.items() if n} == expected
    # A file that changed into something else since it was loaded is bad input, named.
    copy = tmp_path / "copy.xplane.pb"
    copy.write_bytes(CPU_FIXTURE.read_bytes())
    again = tpuperf.load(copy)
    copy.write_bytes(b"\xff\xff\xff")
    with pytest.raises(BadProfile, match=r"copy\.xplane\.pb: not a readable"):
        again.read_space(again.host_names[0])
    # Tables not read from a file: nothing to read again.
    assert (
        tpuperf.Profile.from_tables(ops=profile.ops, devices=profile.devices).read_space(host)
        is None
    )
