"""XProf's GPU input-pipeline breakdown and verdict (tpuperf.xprof_compat, `tpuperf host`'s
`xprof_input_pipeline`): on generated GPU profiles in XProf's grouped form against the
generator's truth, and on those and the V100 profile against XProf 2.24.2 run on the same file
(`xprof get_step_trace` and the `input_pipeline_analyzer` tool) when xprof is installed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tpuperf.analyzers.base import AnalysisConfig

import tpuperf
from fixtures.generate import generate_gpu_input
from tests.conftest import REPO, shared_profile, xprof_tool
from tpuperf import hostview, xprof_compat, xspace

# (generator arguments, XProf's classification): one profile per branch of the verdict.
VARIANTS = {
    "moderately": ({}, "MODERATELY"),
    "highly": ({"input_us": 1500}, "HIGHLY"),
    "not": ({"input_us": 40, "gap_us": 0}, "NOT"),
}
# The generator's categories and the breakdown's names for them.
CATEGORY = {
    "compute": "device_compute_ms",
    "output": "output_ms",
    "collectives": "device_collectives_ms",
    "input": "input_ms",
    "all_others": "all_others_ms",
}


def _write(run, folder: Path) -> Path:  # type: ignore[no-untyped-def]
    """The run's one host file in its own folder (XProf caches its results beside it)."""
    folder.mkdir(parents=True)
    host, data = next(iter(run.xspaces.items()))
    path = folder / f"{host}.xplane.pb"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_breakdown_equals_the_generators_truth(variant: str) -> None:
    kwargs, word = VARIANTS[variant]
    run = generate_gpu_input(**kwargs)
    ours = xprof_compat.input_pipeline(xspace.decode(next(iter(run.xspaces.values()))))
    assert ours is not None
    truth = run.truth.notes["xprof_input"]
    assert [s["step"] for s in ours["steps"]] == [t["group"] for t in truth]
    for step, expected in zip(ours["steps"], truth, strict=True):
        assert step["step_time_ms"] == expected["step_time_ps"] / 1e9
        for kind, name in CATEGORY.items():
            assert step[name] == pytest.approx(expected["ps"][kind] / 1e9, abs=1e-12), name
        # Device events only: nothing on the host's side, no device-to-device copy.
        assert step["host_compute_ms"] == step["kernel_launch_ms"] == step["compile_ms"] == 0
        assert step["device_to_device_ms"] == 0
        assert sum(step[n] for n in CATEGORY.values()) == pytest.approx(step["step_time_ms"])
    total = sum(t["step_time_ps"] for t in truth)
    input_pct = 100 * sum(t["ps"]["input"] for t in truth) / total
    assert ours["input_percent"] == pytest.approx(input_pct)
    assert ours["all_others_percent"] == pytest.approx(
        100 * sum(t["ps"]["all_others"] for t in truth) / total
    )
    assert ours["input_conclusion"].startswith(f"Your program is {word} input-bound")
    assert f"{input_pct:.1f}%" in ours["input_conclusion"]


def test_the_verdicts_thresholds() -> None:
    assert xprof_compat.verdict(20.0, 0.0)[0] == "host"
    assert xprof_compat.verdict(19.99, 0.0)[0] == "both"
    assert xprof_compat.verdict(5.0, 0.0)[0] == "both"
    assert "POTENTIALLY" in xprof_compat.verdict(4.99, 3.0)[1]
    assert xprof_compat.verdict(4.99, 2.99)[0] == "device"


def test_no_step_groups_no_breakdown() -> None:
    # The MI300 JAX captures carry no step groups: XProf finds no steps there either
    # ("No step time measured").
    path = shared_profile("gpu/mi300_jax_gemm.xplane.pb")
    assert xprof_compat.input_pipeline(xspace.decode(path.read_bytes())) is None


def _input_pipeline_tool(path: Path) -> tuple[str, list[list[object]]]:
    """XProf's input_pipeline_analyzer on one file: its verdict and its step table's rows."""
    raw_to_tool_data = pytest.importorskip(
        "xprof.convert.raw_to_tool_data", reason="xprof (the dev extra) is not installed"
    )
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "input_pipeline_analyzer", {})
    table = next(t for t in json.loads(data) if "input_conclusion" in t.get("p", {}))
    ids = [c["id"] for c in table["cols"]]
    rows = [[cell["v"] for cell in row["c"]] for row in table["rows"]]
    keep = [i for i, name in enumerate(ids) if name != "tooltip"]
    return table["p"]["input_conclusion"], [[r[i] for i in keep] for r in rows]


def _our_rows(ours: dict) -> list[list[object]]:  # type: ignore[type-arg]
    # XProf's column order: step, device compute, device to device, collectives, host compute,
    # kernel launch, input, output, compilation, all others, step time.
    names = (
        "device_compute_ms",
        "device_to_device_ms",
        "device_collectives_ms",
        "host_compute_ms",
        "kernel_launch_ms",
        "input_ms",
        "output_ms",
        "compile_ms",
        "all_others_ms",
        "step_time_ms",
    )
    return [[str(s["step"]), *(s[n] for n in names)] for s in ours["steps"]]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_equal_to_xprofs_input_pipeline_analyzer(tmp_path: Path, variant: str) -> None:
    path = _write(generate_gpu_input(**VARIANTS[variant][0]), tmp_path / "run")
    conclusion, rows = _input_pipeline_tool(path)
    ours = xprof_compat.input_pipeline(xspace.decode(path.read_bytes()))
    assert ours is not None
    assert ours["input_conclusion"] == conclusion
    assert len(rows) == len(ours["steps"])
    for mine, theirs in zip(_our_rows(ours), rows, strict=True):
        assert mine[0] == theirs[0]
        assert mine[1:] == pytest.approx(theirs[1:], abs=1e-9)


def test_v100_equals_xprof_and_differs_from_tpuperfs_own_verdict(tmp_path: Path) -> None:
    source = shared_profile("gpu/v100_8gpu_tf_training.xplane.pb")
    document = hostview.report(tpuperf.load(source), AnalysisConfig(warmup_steps=0))
    ours = document["xprof_input_pipeline"]
    # Recorded from XProf 2.24.2's input_pipeline_analyzer on this file.
    assert ours["number_of_steps"] == 1
    assert ours["average_ms"]["device_compute_ms"] == pytest.approx(14.875539)
    assert ours["average_ms"]["all_others_ms"] == pytest.approx(6.434813)
    assert ours["input_percent"] == 0
    assert ours["input_conclusion"].startswith(
        "Your program is POTENTIALLY input-bound because 30.2%"
    )
    # tpuperf's own verdict reads the host's tf.data events, which XProf's GPU path leaves out.
    assert document["input"]["classification"] == "moderately input-bound"
    copy = tmp_path / "run" / source.name
    copy.parent.mkdir()
    copy.write_bytes(source.read_bytes())
    conclusion, rows = _input_pipeline_tool(copy)
    assert ours["input_conclusion"] == conclusion
    mine = _our_rows(ours)
    assert [r[0] for r in mine] == [r[0] for r in rows]
    assert [r[1:] for r in mine] == [pytest.approx(r[1:], abs=1e-9) for r in rows]


@pytest.mark.parametrize("which", ["generated", "v100"])
def test_equal_to_xprof_get_step_trace(tmp_path: Path, which: str) -> None:
    if which == "v100":
        source = shared_profile("gpu/v100_8gpu_tf_training.xplane.pb")
        path = tmp_path / "v100" / source.name
        path.parent.mkdir()
        path.write_bytes(source.read_bytes())
    else:
        path = _write(generate_gpu_input(), tmp_path / "generated")
    ours = xprof_compat.input_pipeline(xspace.decode(path.read_bytes()))
    assert ours is not None
    steps = xprof_tool("get_step_trace", path.parent)["step_breakdown"]
    assert [s["step_num"] for s in steps] == [s["step"] for s in ours["steps"]]
    # The CLI groups XProf's categories and rounds to 4 decimals; its idle is the larger of
    # the other categories and the rounded step time less the four grouped ones.
    for theirs, mine in zip(steps, ours["steps"], strict=True):
        other = ("all_others_ms", "host_compute_ms", "kernel_launch_ms", "compile_ms")
        grouped = {
            "step_time_ms": mine["step_time_ms"],
            "compute_time_ms": mine["device_compute_ms"],
            "communication_time_ms": mine["device_collectives_ms"] + mine["device_to_device_ms"],
            "infeed_time_ms": mine["input_ms"],
            "outfeed_time_ms": mine["output_ms"],
        }
        grouped["idle_time_ms"] = max(
            sum(mine[n] for n in other),
            round(mine["step_time_ms"], 4) - sum(list(grouped.values())[1:]),
        )
        for field, value in grouped.items():
            assert theirs[field] == pytest.approx(round(value, 4), abs=1e-9), field


def test_host_document_and_readme() -> None:
    source = shared_profile("gpu/v100_8gpu_tf_training.xplane.pb")
    document = hostview.report(tpuperf.load(source), AnalysisConfig(warmup_steps=0))
    block = document["xprof_input_pipeline"]
    readme = (REPO / "README.md").read_text()
    fields = set(block) | set(block["average_ms"]) | {k for s in block["steps"] for k in s}
    missing = sorted(f for f in fields if not re.search(rf"`{re.escape(f)}[` ]", readme))
    assert not missing, f"README does not document {missing}"
    # The README's figures for this profile.
    section = " ".join(readme[readme.index("## Host: `tpuperf host`") :].split())
    assert f"{block['all_others_percent']:.1f}% All Others" in section
    assert f"{document['input']['input_pct_of_iteration']:.1f}% of the iteration" in section
