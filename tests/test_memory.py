"""The memory view (tpuperf/memory_plan.py, `tpuperf memory`) against XProf and the compiler.

- Peaks and the buffers live at the peak against XProf's own `get_peak_allocations` and
  `get_memory_profile`, run on the same file (skipped without the xprof package), and
  against the figures XProf 2.24.2 gave on the v6e profile (always, with the real profiles).
- Real JAX jobs captured by fixtures/make_memory_fixtures.py against what the compiler said
  of the same programs: `compile().memory_analysis()` and the compiled HLO text.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import tpuperf
from tests.conftest import REPO, shared_profile
from tpuperf.cli import main
from tpuperf.memory_plan import GIB, MIB, memory_report, program_memory, to_document

DATA = REPO / "fixtures" / "data"
CAPTURES = ["memory_demo", "memory_cnn"]
WITH_HLO = [
    "tpu/v6e_4chip_inference.xplane.pb",
    "gpu/mi300_jax_conv.xplane.pb",
    "gpu/mi300_jax_gemm.xplane.pb",
    "gpu/mi300_jax_elementwise.xplane.pb",
    "gpu/mi300_jax_te_fused_attn.xplane.pb",
]

# XProf 2.24.2, `xprof get_peak_allocations` on tpu/v6e_4chip_inference.xplane.pb.
V6E_XPROF_PEAK_MIB = {
    "jit_f": 20480.093780517578,
    "jit__psum": 10240.0,
    "jit_broadcast_in_dim": 5120.00048828125,
    "jit_convert_element_type": 0.0009765625,
}
V6E_XPROF_TOP_JIT_F = {
    "copy-start{0}",
    "copy-start.2{0}",
    "copy-start.4{0}",
    "broadcast_add_fusion.2",
}


def _path(name: str) -> Path:
    return DATA / f"{name}.xplane.pb" if name in CAPTURES else shared_profile(name)


def _xprof(tool: str, path: Path, tmp: Path, *flags: str) -> dict[str, Any]:
    """Run an `xprof` CLI tool on a copy of ``path`` (XProf writes its cache beside it)."""
    pytest.importorskip("xprof.cli.xprof_cli")
    session = tmp / "logdir" / "plugins" / "profile" / "run"
    session.mkdir(parents=True, exist_ok=True)
    target = session / "host.xplane.pb"
    if not target.exists():
        target.write_bytes(path.read_bytes())
    code = "import sys; from xprof.cli.xprof_cli import main; sys.argv[0] = 'xprof'; main()"
    argv = [sys.executable, "-c", code, tool, "--session_id=run", f"--logdir={tmp / 'logdir'}"]
    done = subprocess.run([*argv, *flags], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# --------------------------------------------------------------------------- against XProf


def test_v6e_peaks_and_top_buffers_equal_the_recorded_xprof_figures(v6e: Path) -> None:
    report = memory_report(tpuperf.load(v6e))
    peaks = {p.module: p.peak_bytes for p in report.programs}
    assert peaks == {m: round(mib * MIB) for m, mib in V6E_XPROF_PEAK_MIB.items()}
    jit_f = report.programs[0]
    assert jit_f.module == "jit_f"
    assert {b.op for b in jit_f.buffers if b.size_bytes == 5120 * MIB} == V6E_XPROF_TOP_JIT_F
    # The split adds up to the peak; the offloaded parameters (host memory) are not HBM.
    assert sum(jit_f.split.values()) == jit_f.peak_bytes
    assert jit_f.split == {"parameter": 0, "output": 32, "temporary": 21474934784, "constant": 0}
    psum = next(p for p in report.programs if p.module == "jit__psum")
    assert {(b.op, b.kind) for b in psum.buffers} == {
        ("all-reduce", "output"),
        ("param", "parameter"),
    }


def test_v6e_capacity_peak_and_fragmentation_equal_the_recorded_memory_profile(v6e: Path) -> None:
    # XProf 2.24.2 get_memory_profile: capacity 31.25 GiB, peak 20.02 GiB, fragmentation 10.96%.
    report = memory_report(tpuperf.load(v6e))
    top = max(report.allocators, key=lambda a: a.peak_bytes)
    assert round(top.capacity_bytes / GIB, 2) == 31.25
    assert round(top.peak_bytes / GIB, 2) == 20.02
    assert round(100 * top.fragmentation, 2) == 10.96
    # The chip's capacity (the plane states none): 32 GiB, the chip table's v6e.
    assert report.capacity_source == {"TPU v6 Lite": "chip_table"}
    assert report.capacity_bytes == {"TPU v6 Lite": 32 * GIB}
    assert report.headroom("TPU v6 Lite") == 32 * GIB - round(V6E_XPROF_PEAK_MIB["jit_f"] * MIB)


@pytest.mark.parametrize("name", CAPTURES + WITH_HLO)
def test_every_program_and_its_buffers_equal_xprof_peak_allocations(
    name: str, tmp_path: Path
) -> None:
    path = _path(name)
    xprof = _xprof(
        "get_peak_allocations",
        path,
        tmp_path,
        "--limit=0",
        "--aggregate_instructions=False",
        "--min_size_mib=0",
    )
    report = memory_report(tpuperf.load(path), allocators=False)
    ours = {f"{p.module}({p.program_id})": p for p in report.programs}
    theirs = {m["module_name"]: m for m in xprof["modules"]}
    assert set(ours) == set(theirs)
    for key, module in theirs.items():
        program = ours[key]
        assert program.peak_bytes == pytest.approx(module["total_hbm_mib"] * MIB, rel=1e-3), key
        assert program.peak_bytes == round(module["total_hbm_mib"] * MIB), key
        # The same buffers: XProf names each above its small-buffer size and lumps the rest
        # into one "unknown" entry, whose size is what ours leave over.
        named = Counter(
            (b["instruction"], round(b["size_mib"] * MIB))
            for b in module["top_buffers"]
            if b["instruction"] != "unknown"
        )
        lumped = sum(
            round(b["size_mib"] * MIB)
            for b in module["top_buffers"]
            if b["instruction"] == "unknown"
        )
        mine = Counter((b.op, b.size_bytes) for b in program.buffers)
        assert not named - mine, key
        assert sum(size * n for (_, size), n in (mine - named).items()) == lumped, key


@pytest.mark.parametrize(
    "name", ["tpu/v6e_4chip_inference.xplane.pb", "gpu/v100_8gpu_tf_training.xplane.pb"]
)
def test_allocator_peak_capacity_and_fragmentation_equal_xprof_memory_profile(
    name: str, tmp_path: Path
) -> None:
    path = shared_profile(name)
    xprof = _xprof("get_memory_profile", path, tmp_path)
    report = memory_report(tpuperf.load(path))
    top = max(report.allocators, key=lambda a: a.peak_bytes)
    # XProf's capacity is the largest of its allocators' (a host allocator's, on the V100).
    capacity = max(a.capacity_bytes for a in report.allocators)
    assert round(capacity / GIB, 2) == xprof["memory_capacity_gib"]
    assert round(top.peak_bytes / GIB, 2) == xprof["peak_memory_usage_gib"]
    details = xprof["peak_usage_details"]
    assert round(top.reserved_bytes_at_peak / GIB, 2) == details["stack_reservation_gib"]
    assert round(top.allocated_bytes_at_peak / GIB, 2) == details["heap_allocation_gib"]
    assert round(100 * top.fragmentation, 2) == details["fragmentation_percent"]


# --------------------------------------------------------------------------- against the compiler


def _compiled_programs(name: str) -> list[tuple[dict[str, Any], Any]]:
    """Each program the capture ``name`` compiled (its truth file: what the compiler said),
    with the memory report's program of that module."""
    truth = json.loads((DATA / f"{name}.truth.json").read_text())
    report = memory_report(tpuperf.load(DATA / f"{name}.xplane.pb"), allocators=False)
    pairs = []
    for compiled in truth["programs"]:
        [program] = [p for p in report.programs if p.module == compiled["module"]]  # one each
        pairs.append((compiled, program))
    return pairs


@pytest.mark.parametrize("name", CAPTURES)
def test_captured_programs_equal_their_memory_analysis(name: str) -> None:
    for compiled, program in _compiled_programs(name):
        split = program.split
        assert split["parameter"] == compiled["argument_size_in_bytes"]
        assert split["temporary"] == compiled["temp_size_in_bytes"]
        # Outputs aliased to (donated) parameters are the parameters' allocations: once.
        assert split["output"] == compiled["output_size_in_bytes"] - compiled["alias_size_in_bytes"]
        assert compiled["alias_size_in_bytes"] > 0  # the state is donated


_TYPE = re.compile(r"^([a-z0-9]+)\[([\d,]*)\]")


def _element_types(text: str) -> list[str]:
    """``(f32[2]{0}, s32[])`` -> [``f32[2]``, ``s32[]``]; ``f32[2,3]{1,0}`` -> [``f32[2,3]``]."""
    return [f"{m.group(1)}[{m.group(2)}]" for m in re.finditer(r"([a-z0-9]+)\[([\d,]*)\]", text)]


@pytest.mark.parametrize("name", CAPTURES)
def test_buffers_live_at_the_peak_are_the_compiled_programs_values(name: str) -> None:
    for compiled, program in _compiled_programs(name):
        types = compiled["hlo_types"]
        assert program.buffers
        for buffer in program.buffers:
            op, _, index = buffer.op.partition("{")
            assert op in types, buffer.op
            declared = _element_types(types[op])
            if buffer.dtype == "tuple":
                assert "(" + ", ".join(declared) + ")" == buffer.shape, buffer.op
            elif index:  # a tuple element: its type is the element at that index
                assert declared[int(index.rstrip("}").split(",")[-1])] == buffer.shape, buffer.op
            else:
                assert declared == [buffer.shape], buffer.op
        # What is live at the peak fits in what the program holds.
        assert sum(b.size_bytes for b in program.buffers) == program.live_peak_bytes
        assert program.live_peak_bytes <= program.peak_bytes


def test_cnn_buffers_carry_their_layer_pass_and_source() -> None:
    report = memory_report(tpuperf.load(DATA / "memory_cnn.xplane.pb"), allocators=False)
    [step] = [p for p in report.programs if p.module == "jit_train_step"]
    assert step.has_backward
    passes = {b.pass_ for b in step.buffers}
    assert "backward" in passes
    scoped = [b for b in step.buffers if b.scope.startswith("jit(train_step)/CNN")]
    assert scoped and all(re.fullmatch(r".+\.py:\d+", b.source) for b in scoped)
    assert any("make_memory_fixtures.py:" in b.source for b in step.buffers)
    # The remat block's recomputation is counted where nn.remat put it.
    assert step.remat_bytes > 0


# --------------------------------------------------------------------------- the command


def test_memory_command_writes_the_documented_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = DATA / "memory_cnn.xplane.pb"
    assert main(["memory", str(path), "--format", "json", "--top", "3"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema_version"] == 1
    assert document["capacity_bytes"] == {"CPU": None}  # a CPU has no HBM the profile states
    first = document["programs"][0]
    assert first["module"] == "jit_train_step"
    assert first["peak_bytes"] == max(p["peak_bytes"] for p in document["programs"])
    assert len(first["buffers"]) == 3 and first["buffer_count"] > 3
    assert set(first["buffers"][0]) >= {
        "op",
        "size_bytes",
        "shape",
        "dtype",
        "kind",
        "scope",
        "pass",
        "source",
    }
    assert any("no allocator events" in note for note in document["notes"])

    assert (
        main(
            [
                "memory",
                str(path),
                "--hbm-gib",
                "0.0078125",
                "--program",
                "jit_train_step",
                "-f",
                "json",
            ]
        )
        == 0
    )
    document = json.loads(capsys.readouterr().out)
    [only] = document["programs"]
    assert document["capacity_bytes"] == {"CPU": 8 * MIB}
    assert only["headroom_bytes"] == 8 * MIB - only["peak_bytes"]

    assert main(["memory", str(path), "--program", "nothing"]) == 2
    assert main(["memory", str(path), "--top", "-1"]) == 2


def test_memory_command_table_and_markdown_fit(
    v6e: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", str(v6e), "--top", "4"]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 100 for line in out.splitlines())
    assert "32.00 GiB" in out and "31.25 GiB" in out and "20.00 GiB" in out
    assert "copy-start" in out
    assert main(["memory", str(v6e), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "| `jit_f(12190760917235803885)` | 20.00 GiB |" in md


def test_a_profile_without_hlo_modules_says_why_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = shared_profile("gpu/v100_8gpu_tf_training.xplane.pb")
    assert main(["memory", str(path)]) == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if "no HLO modules" in line]
    assert len(lines) == 1
    # Its allocator events still give memory over time (a TensorFlow GPU allocator).
    assert "GPU_1_bfc" in captured.out


def test_a_module_without_buffer_assignment_has_no_memory_plan() -> None:
    from tpuperf import _hlo_schema

    proto = _hlo_schema.HloBufferProto()
    proto.hlo_module.name = "jit_f"
    assert program_memory(proto.SerializeToString(), "jit_f(1)") is None


def test_document_sizes_add_up(v6e: Path) -> None:
    document = to_document(memory_report(tpuperf.load(v6e)))
    for program in document["programs"]:
        assert sum(program["split_bytes"].values()) == program["peak_bytes"]
        assert sum(r["bytes"] for r in program["by_scope"]) == program["live_peak_bytes"]
        assert sum(program["by_pass_bytes"].values()) == program["live_peak_bytes"]


# --------------------------------------------------------------------------- everywhere else


def test_analyze_summary_carries_peak_capacity_and_headroom(v6e: Path) -> None:
    summary = tpuperf.analyze(tpuperf.load(v6e), analyzers=["steps"]).summary
    peak = round(V6E_XPROF_PEAK_MIB["jit_f"] * MIB)
    assert summary["peak_hbm_gib"] == peak / GIB
    assert summary["peak_program"] == "jit_f"
    assert summary["hbm_capacity_gib"] == 32.0
    assert summary["headroom_pct"] == pytest.approx(100 * (32 * GIB - peak) / (32 * GIB))
    assert summary["program_peak_gib"]["jit__psum"] == 10240 / 1024


def test_scan_rows_have_peak_and_headroom(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fixtures.memory_scenarios import generate_memory

    data, truth = generate_memory("remat_headroom")
    (tmp_path / "remat.xplane.pb").write_bytes(data)
    (tmp_path / "cnn.xplane.pb").write_bytes((DATA / "memory_cnn.xplane.pb").read_bytes())
    assert main(["scan", str(tmp_path), "--format", "ndjson", "--no-cache"]) == 0
    rows = {Path(r["path"]).name: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    remat = rows["remat.xplane.pb"]
    assert remat["peak_hbm_gib"] == truth["peak_bytes"] / GIB
    assert remat["headroom_pct"] == pytest.approx(
        100 * truth["headroom_bytes"] / truth["capacity_bytes"]
    )
    cnn = rows["cnn.xplane.pb"]
    truth_cnn = json.loads((DATA / "memory_cnn.truth.json").read_text())["programs"][0]
    peak = (
        sum(
            truth_cnn[k]
            for k in ("argument_size_in_bytes", "temp_size_in_bytes", "output_size_in_bytes")
        )
        - truth_cnn["alias_size_in_bytes"]
    )
    # The compiler's figures leave out the constants (12 bytes here): within 0.1%.
    assert cnn["peak_hbm_gib"] == pytest.approx(peak / GIB, rel=1e-3)
    assert cnn["headroom_pct"] is None  # a CPU: no capacity


def test_diff_compares_each_programs_peak_and_gates_on_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base, new = DATA / "memory_cnn.xplane.pb", DATA / "memory_demo.xplane.pb"
    peaks = {
        name: max(
            p.peak_bytes
            for p in memory_report(
                tpuperf.load(DATA / f"{name}.xplane.pb"), allocators=False
            ).programs
            if p.module == "jit_train_step"
        )
        for name in CAPTURES
    }
    assert main(["diff", str(base), str(new), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    step = next(r for r in document["memory"] if r["module"] == "jit_train_step")
    assert step["peak_gib_before"] == peaks["memory_cnn"] / GIB
    assert step["peak_gib_after"] == peaks["memory_demo"] / GIB
    growth = (peaks["memory_demo"] - peaks["memory_cnn"]) / GIB
    assert step["delta"] == pytest.approx(growth)
    assert document["summary"]["peak_hbm_gib"]["delta"] == pytest.approx(growth)
    assert main(["diff", str(base), str(new), "--fail-on", "peak_hbm_gib.delta>0.01"]) == 3
    assert main(["diff", str(base), str(new), "--fail-on", "peak_hbm_gib.delta>1"]) == 0


def test_html_report_has_the_memory_section(tmp_path: Path) -> None:
    from fixtures.memory_scenarios import generate_memory

    data, truth = generate_memory("remat_headroom")
    path = tmp_path / "remat.xplane.pb"
    path.write_bytes(data)
    report = tpuperf.analyze(tpuperf.load(path))
    metrics = report.results["memory"].metrics
    # The in-use curve along the schedule keeps its peak: the buffers live at it.
    assert max(metrics["curve_bytes"]) == truth["live_peak_bytes"]
    assert metrics["split_bytes"] == truth["split_bytes"]
    out = tmp_path / "report.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    html = out.read_text()
    assert '<section id="memory">' in html and "memory-chart" in html
    assert "jit_train_step: peak 13.00 GiB of 15.00 GiB (device), headroom 13.3%" in html


def test_memory_report_takes_a_path_or_a_profile() -> None:
    """``tpuperf.memory_report`` owns its request as ``tpuperf.analyze`` does: a path and a
    loaded profile give one view."""
    import tpuperf
    from tpuperf.memory_plan import to_document

    path = REPO / "fixtures" / "data" / "memory_cnn.xplane.pb"
    by_path = to_document(tpuperf.memory_report(str(path)))
    by_profile = to_document(tpuperf.memory_report(tpuperf.load(path)))
    assert by_path == by_profile
    assert by_path["programs"] and by_path["programs"][0]["peak_bytes"] > 0
