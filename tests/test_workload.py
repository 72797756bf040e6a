"""The workload descriptor (tpuperf/workload.py) and the fixes chosen from it
(analyzers/fixes.py): on the real profiles, the CPU capture and generated runs, each gets only
fixes that apply to its framework, platform and pass."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tpuperf.analyzers import fixes

from fixtures.generate import generate_scoped, write_run
from tests.conftest import CPU_FIXTURE, Cli, shared_profile
from tpuperf import scopes as sc
from tpuperf.cli import main
from tpuperf.profiles import load
from tpuperf.workload import Workload, detect

# What only a JAX/XLA user can act on: JAX APIs, XLA flags, Flax, Pallas.
JAX_ONLY = re.compile(r"jax|--xla_|flax|pallas|LIBTPU", re.I)
TRAINING_ONLY = re.compile(r"jax\.checkpoint|checkpoint_policies|FSDP|ZeRO|gradient", re.I)
GPU_ONLY = re.compile(r"CUDA|HIP graph|command_buffer|callback|nvidia-smi|rocm-smi", re.I)


def _analyze(cli: Cli, path: Path | str) -> dict[str, Any]:
    return cli.json("analyze", path, "--format", "json")


@pytest.mark.parametrize(
    ("relative", "framework", "platform", "vendor", "training"),
    [
        ("gpu/v100_8gpu_tf_training.xplane.pb", "tensorflow", "GPU", "nvidia", None),
        ("tpu/v6e_4chip_inference.xplane.pb", "jax", "TPU", None, False),
        ("gpu/mi300_jax_conv.xplane.pb", "jax", "GPU", "amd", False),
        ("gpu/mi300_jax_te_fused_attn.xplane.pb", "jax", "GPU", "amd", True),
    ],
)
def test_the_real_profiles_say_what_ran(
    cli: Cli,
    relative: str,
    framework: str,
    platform: str,
    vendor: str | None,
    training: bool | None,
) -> None:
    """TensorFlow by its executor's lines (V100: no scope data, so training is not known);
    JAX by its jit_ programs; inference where ops have scopes and none is under transpose()."""
    data = _analyze(cli, shared_profile(relative))
    assert data["summary"]["workload"] == {
        "framework": framework,
        "platform": platform,
        "vendor": vendor,
        "training": training,
    }


def test_tensorflow_gpu_profile_gets_no_jax_or_xla_fix(
    capsys: pytest.CaptureFixture[str], cli: Cli
) -> None:
    data = _analyze(cli, shared_profile("gpu/v100_8gpu_tf_training.xplane.pb"))
    assert data["recommendations"]
    for rec in data["recommendations"]:
        assert set(rec["fix"]) == {"gpu"}
        assert not JAX_ONLY.search(rec["fix"]["gpu"]), (rec["kind"], rec["fix"]["gpu"])
    gaps = next(r for r in data["recommendations"] if r["kind"] == "idle_gaps")
    assert "jit_compile=True" in gaps["fix"]["gpu"]  # TensorFlow's own way to fuse kernels
    assert "TF_GPU_THREAD_MODE=gpu_private" in gaps["fix"]["gpu"]
    assert main(["analyze", str(shared_profile("gpu/v100_8gpu_tf_training.xplane.pb"))]) == 0
    assert "Workload TensorFlow on GPU" in capsys.readouterr().out


def test_inference_gets_no_training_fix(cli: Cli) -> None:
    """v6e, inference: no jax.checkpoint policy, FSDP or gradient accumulation; the host-offload
    copies are told to stay in HBM instead."""
    data = _analyze(cli, shared_profile("tpu/v6e_4chip_inference.xplane.pb"))
    kinds = {r["kind"] for r in data["recommendations"]}
    assert {"reduce_copies", "exposed_async_copy", "exposed_collective"} <= kinds
    for rec in data["recommendations"]:
        assert set(rec["fix"]) == {"tpu"}
        assert not TRAINING_ONLY.search(rec["fix"]["tpu"]), (rec["kind"], rec["fix"]["tpu"])
    remove = next(r for r in data["recommendations"] if r["kind"] == "reduce_copies")
    assert "memory_kind='device'" in remove["fix"]["tpu"]


def test_xla_cpu_gets_no_gpu_fix_and_says_what_to_look_at(
    cli: Cli,
) -> None:
    data = _analyze(cli, CPU_FIXTURE)
    assert data["summary"]["workload"]["platform"] == "CPU"
    assert data["recommendations"]
    for rec in data["recommendations"]:
        assert set(rec["fix"]) == {"cpu"}
        assert not GPU_ONLY.search(rec["fix"]["cpu"]), (rec["kind"], rec["fix"]["cpu"])
    gaps = next(r for r in data["recommendations"] if r["kind"] == "idle_gaps")
    assert "no fix" in gaps["fix"]["cpu"] and "Look at" in gaps["fix"]["cpu"]


def test_training_gets_the_training_fixes() -> None:
    """The same choice the other way: a training run with a synchronous all-reduce is told to
    shard it (FSDP, gradient accumulation); its offload copies, the checkpoint policy."""
    profile = load_scoped()
    workload = detect(profile, sc.scopes(profile))
    assert (workload.framework, workload.platform, workload.training) == ("jax", "TPU", True)
    sync = fixes.collectives(workload, "", "", ["all-reduce"])["tpu"]
    assert "FSDP" in sync and "gradient accumulation" in sync
    assert "jax.checkpoint" in fixes.hide_copies(workload)["tpu"]
    inference = Workload("TPU", "jax", training=False)
    assert not TRAINING_ONLY.search(fixes.collectives(inference, "", "", ["all-reduce"])["tpu"])
    unknown = Workload("TPU", "jax", training=None)  # both, each said for when it applies
    assert "in training" in fixes.reduce_copies(unknown)["tpu"]
    assert "in inference" in fixes.reduce_copies(unknown)["tpu"]


def load_scoped() -> Any:
    import tempfile

    run = generate_scoped(steps=3, devices=1)
    path = Path(tempfile.mkdtemp()) / "scoped.xplane.pb"
    path.write_bytes(next(iter(run.xspaces.values())))
    return load(path)


def test_without_scopes_training_is_unknown_and_every_fix_names_one_platform(
    tmp_path: Path,
) -> None:
    """A generated GPU run: JAX by its jit_ program, NVIDIA by its chip; no fix for the other
    platform; the scan path (no scope table) leaves training unknown."""
    from tpuperf.analysis import analyze

    run_dir, _ = write_run("gpu_training", tmp_path / "run", steps=4)
    profile = load(run_dir)
    assert detect(profile) == Workload("GPU", "jax", None, "nvidia")
    report = analyze(profile, scopes=False)
    assert report.summary["workload"]["training"] is None
    for rec in report.recommendations:
        assert set(rec.fix) == {"gpu"}
        assert "HIP" not in rec.fix["gpu"]
