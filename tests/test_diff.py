"""`tpuperf diff`: generated pairs with known truth, identical inputs, real profiles of two
chips, gates, matching rules, rendering at 80 columns."""

from __future__ import annotations

import io
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import CPU_FIXTURE, REPO, shared_profile
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

import tpuperf
from fixtures.generate import PAIRS, PairTruth, write_pair, write_run
from tests._tables import check_table, tables
from tpuperf import diffing
from tpuperf.cli import main
from tpuperf.render.diff import render_diff_markdown, render_diff_table, signed_ms
from tpuperf.render.fit import display_name, shorten


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, PairTruth]]:
    root = tmp_path_factory.mktemp("pairs")
    return {kind: write_pair(kind, root / kind) for kind in PAIRS}


@pytest.fixture(scope="module")
def diffs(pairs: dict[str, tuple[Path, Path, PairTruth]]) -> dict[str, diffing.DiffReport]:
    return {kind: tpuperf.diff(base, new) for kind, (base, new, _) in pairs.items()}


# --------------------------------------------------------------------------- known truth


@pytest.mark.parametrize("kind", PAIRS)
def test_step_time_delta_within_one_percent_of_the_truth(kind, pairs, diffs) -> None:
    truth = pairs[kind][2]
    step = diffs[kind].summary["step_time_ms"]
    for stat in ("median", "mean"):
        expected = truth.step_time_delta_ms(stat)  # over the steps after the 1 warm-up step
        assert expected != 0
        assert step[stat]["delta"] == pytest.approx(expected, rel=0.01), stat
        assert step[stat]["after"] - step[stat]["before"] == pytest.approx(step[stat]["delta"])


@pytest.mark.parametrize("kind", PAIRS)
def test_the_changed_op_is_the_top_row_with_the_right_sign(kind, pairs, diffs) -> None:
    truth = pairs[kind][2]
    top = diffs[kind].ops.records()[0]
    assert (top["op"], top["base_op"]) == (truth.changed_op, truth.changed_op_base)
    assert top["status"] == "changed"
    expected = truth.op_delta_ms()
    assert math.copysign(1, top["delta_ms"]) == math.copysign(1, expected)
    assert top["delta_ms"] == pytest.approx(expected, rel=0.01)
    # Every other op is unchanged (both runs draw the same jitter) and found on both sides.
    rest = diffs[kind].ops.records()[1:]
    assert {r["status"] for r in rest} == {"same"}
    assert diffs[kind].summary["ops"] == {
        "changed": 1,
        "same": len(rest),
        "added": 0,
        "removed": 0,
    }
    assert diffs[kind].warnings == []


def test_allgather_wait_pair_numbers(pairs, diffs) -> None:
    truth = pairs["allgather_wait"][2]
    top = diffs["allgather_wait"].ops.records()[0]
    assert truth.op_delta_ms() == pytest.approx(-2.5)
    assert top["ms_per_step_before"] == pytest.approx(3.0, rel=1e-6)
    assert top["ms_per_step_after"] == pytest.approx(0.5, rel=1e-6)
    assert top["delta_pct"] == pytest.approx(-250 / 3, rel=1e-6)
    assert top["match"] == "name"
    # The exposed collective time per step falls by the same 2.5 ms.
    summary = diffs["allgather_wait"].summary
    assert summary["exposed_collective_ms"]["delta"] == pytest.approx(-2.5, rel=0.01)
    assert summary["exposed_collective_pct"]["delta"] < 0


def test_slower_fusion_pair_doubles_the_op(pairs, diffs) -> None:
    top = diffs["slower_fusion"].ops.records()[0]
    assert top["delta_pct"] == pytest.approx(100.0, abs=0.01)
    assert top["match"] == "name"
    category = diffs["slower_fusion"].categories.records()[0]
    assert category["category"] == "convolution fusion"
    assert category["delta_ms"] == pytest.approx(top["delta_ms"])


def test_recompiled_pair_matches_every_renumbered_op(pairs, diffs) -> None:
    truth = pairs["recompiled"][2]
    # Renumbering gives many NEW ops the name of another BASE op: matching by name alone
    # would pair them wrongly.
    reused = set(truth.renamed.values()) & set(truth.renamed)
    assert len(reused) >= 10
    rows = {r["base_op"]: r for r in diffs["recompiled"].ops.records()}
    for base_name, new_name in truth.renamed.items():
        assert rows[base_name]["op"] == new_name
        expected = "source" if base_name == truth.changed_op_base else "scope_shape"
        assert rows[base_name]["match"] == expected, base_name
    for base_name, row in rows.items():
        if base_name not in truth.renamed:  # the collectives keep their names
            assert (row["op"], row["match"]) == (base_name, "name")


# --------------------------------------------------------------------------- identical inputs


def _zero_everywhere(result: diffing.DiffReport) -> None:
    for name, value in result.gate_row().items():
        if name.endswith(".delta"):
            assert value in (0.0, None), name
        if name.endswith(".delta_pct"):
            assert value in (0.0, None), name
    assert all(r["status"] == "same" and r["match"] == "name" for r in result.ops.records())
    assert all(r["delta_ms"] == 0.0 for r in result.ops.records())
    assert all(r["delta_ms"] == 0.0 for r in result.categories.records())
    assert all(r["status"] == "same" for r in result.recommendations.records())
    assert all(r["delta_ms"] == 0.0 for r in result.recommendations.records())
    summary = result.summary
    assert summary["ops"]["same"] == result.ops.n > 0
    assert summary["warnings"] == 0 and result.warnings == []


def test_identical_inputs_diff_to_exactly_zero(pairs) -> None:
    base = pairs["allgather_wait"][0]
    result = tpuperf.diff(base, base)
    _zero_everywhere(result)
    assert result.summary["step_time_ms"]["median"]["delta"] == 0.0
    assert result.summary["step_time_ms"]["median"]["delta_pct"] == 0.0


def test_identical_real_capture_diffs_to_zero_and_records_versions() -> None:
    profile = tpuperf.load(CPU_FIXTURE)
    result = tpuperf.diff(profile, profile)  # Profile objects work as well as paths
    _zero_everywhere(result)
    data = result.to_dict()
    assert data["base"]["jax_version"] == data["new"]["jax_version"] == "0.10.2"
    assert data["base"]["jaxlib_version"] == "0.10.2"


# --------------------------------------------------------------------------- real profiles


def test_real_profiles_of_two_chips_warn_and_exit_0(capsys) -> None:
    v6e = shared_profile("tpu/v6e_4chip_inference.xplane.pb")
    mi300 = shared_profile("gpu/mi300_jax_conv.xplane.pb")
    assert main(["diff", str(v6e), str(mi300), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert (
        "tpuperf: warning: chip differs: BASE ran on TPU v6 Lite (TPU), NEW AMD MI300 (gfx942) "
        "(GPU)" in err
    )
    assert (
        "tpuperf: warning: device count differs: BASE analysed 4 device(s), NEW 8 device(s)" in err
    )
    assert data["warnings"] == [
        line.removeprefix("tpuperf: warning: ") for line in err.splitlines()
    ]
    assert data["summary"]["warnings"] == 2
    # No op of one is an op of the other: every one of them is added or removed.
    assert {r["status"] for r in data["ops"]} == {"added", "removed"}
    base = tpuperf.analyze(tpuperf.load(v6e))
    assert data["summary"]["step_time_ms"]["median"]["before"] == pytest.approx(
        base.summary["step_time_ms"]["median"]
    )
    removed = sum(r["ms_per_step_before"] for r in data["ops"] if r["status"] == "removed")
    assert removed == pytest.approx(float(base.ops.array("ms_per_step").sum()))


def test_long_names_read_at_80_columns() -> None:
    v100 = shared_profile("gpu/v100_8gpu_tf_training.xplane.pb")
    v6e = shared_profile("tpu/v6e_4chip_inference.xplane.pb")
    result = tpuperf.diff(v100, v6e)
    names = result.ops.strings("op").tolist()
    assert max(len(n) for n in names) > 500  # TensorFlow's Eigen kernel names
    buffer = io.StringIO()
    render_diff_table(result, Console(file=buffer, width=80, color_system=None), top=30)
    lines = buffer.getvalue().splitlines()
    # One row per op, each on one line, its name shown (whole, compact or shortened as every
    # table does: tpuperf.render.fit) and its change whole.
    records = result.ops.records()[:30]
    (ops,) = [t for t in tables(lines, "op") if t.key_at == 0]
    check_table(
        lines, ops, [r["op"] for r in records], [[signed_ms(r["delta_ms"])] for r in records], 80
    )


def test_command_does_not_import_pandas() -> None:
    code = (
        "import sys\n"
        "from tpuperf.cli import main\n"
        f"rc = main(['diff', {str(CPU_FIXTURE)!r}, {str(CPU_FIXTURE)!r}, '-f', 'json'])\n"
        "print('RC', rc, [m for m in ('pandas', 'jax') if m in sys.modules])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert "RC 0 []" in result.stdout


# --------------------------------------------------------------------------- gates


def test_gates_trip_and_do_not_trip(pairs, capsys) -> None:
    base, new, truth = pairs["slower_fusion"]
    before_ms = statistics.median(truth.base.step_time_ps[1:]) / 1e9
    assert 1 < 100 * truth.step_time_delta_ms() / before_ms < 5  # about 3.3% slower
    args = ["diff", str(base), str(new), "-f", "json"]
    assert main([*args, "--fail-on", "step_time_ms.median.delta_pct>5"]) == 0
    capsys.readouterr()
    code = main(
        [
            *args,
            "--fail-on",
            "step_time_ms.median.delta_pct>1",
            "--fail-on",
            "step_time_ms.p90.delta_pct>10",
            "--fail-on",
            "compute_ms.delta>=0.05",
        ]
    )
    assert code == 3
    out, err = capsys.readouterr()
    json.loads(out)  # the output is written before the gates are reported
    lines = [line for line in err.splitlines() if line.startswith("tpuperf: gate ")]
    assert len(lines) == 2
    row = diffs_of(base, new).gate_row()
    assert lines == [
        "tpuperf: gate step_time_ms.median.delta_pct>1: tripped "
        f"(step_time_ms.median.delta_pct = {row['step_time_ms.median.delta_pct']:.6g})",
        f"tpuperf: gate compute_ms.delta>=0.05: tripped (compute_ms.delta = "
        f"{row['compute_ms.delta']:.6g})",
    ]
    assert "2 of 3 --fail-on gates tripped" in err


def test_exposed_collective_gate(pairs, capsys) -> None:
    base, new, _ = pairs["allgather_wait"]
    # NEW improved: its exposed collective share fell, so a regression gate does not trip...
    assert main(["diff", str(base), str(new), "--fail-on", "exposed_collective_pct.delta>3"]) == 0
    # ...and swapping the runs makes the same change a regression.
    assert main(["diff", str(new), str(base), "--fail-on", "exposed_collective_pct.delta>3"]) == 3
    assert "tpuperf: gate exposed_collective_pct.delta>3: tripped" in capsys.readouterr().err


def diffs_of(base: Path, new: Path) -> diffing.DiffReport:
    return tpuperf.diff(base, new)


def test_a_gate_on_an_unknown_value_passes_with_a_note(capsys) -> None:
    # The CPU capture has no model FLOPs: its MFU is unknown on both sides.
    row = diffs_of(CPU_FIXTURE, CPU_FIXTURE).gate_row()
    assert row["mfu_pct.delta"] is None and row["step_time_ms.median.delta_pct"] == 0.0
    # A change of 0 is not significant: --no-significance lets the gate trip all the same
    # (issue 19: step-time gates trip only on significant changes unless told otherwise).
    code = main(
        [
            "diff",
            str(CPU_FIXTURE),
            str(CPU_FIXTURE),
            "-f",
            "json",
            "--no-significance",
            "--fail-on",
            "mfu_pct.delta>1",
            "--fail-on",
            "step_time_ms.median.delta_pct>=0",
        ]
    )
    assert code == 3  # the known gate still trips
    err = capsys.readouterr().err.splitlines()
    assert "tpuperf: note: gate mfu_pct.delta>1 not evaluated: mfu_pct.delta is unknown" in err
    assert not any(line.startswith("tpuperf: gate mfu_pct") for line in err)
    assert main(["diff", str(CPU_FIXTURE), str(CPU_FIXTURE), "--fail-on", "mfu_pct.delta>1"]) == 0


def test_every_stderr_line_says_tpuperf(capsys) -> None:
    v6e = shared_profile("tpu/v6e_4chip_inference.xplane.pb")
    gates = ["--fail-on", "step_time_ms.p90.delta>0", "--fail-on", "mfu_pct.delta>0"]
    code = main(["diff", str(CPU_FIXTURE), str(v6e), "-f", "json", *gates])
    assert code == 3
    err = capsys.readouterr().err.splitlines()
    assert any("warning: chip differs" in line for line in err)
    assert any("gate step_time_ms.p90.delta>0: tripped" in line for line in err)
    assert all(line.startswith("tpuperf: ") for line in err), err


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("step_time_ms.median>5", "no field 'step_time_ms.median'"),
        ("step_time_ms.median.delta_pct>>5", "not a number"),
        ("exposed_collective_pct", "expected FIELD OP VALUE"),
    ],
)
def test_malformed_gate_exits_2_listing_the_fields(expression, message, capsys) -> None:
    # Refused before any profile is read: the paths do not even exist.
    assert main(["diff", "missing-a", "missing-b", "--fail-on", expression]) == 2
    err = capsys.readouterr().err
    assert message in err
    for name in ("step_time_ms.median.delta_pct", "step_time_ms.p90.delta_pct"):
        assert name in err
    assert "exposed_collective_pct.delta" in err and "ops.added" in err


def test_gate_fields_are_the_summary_numbers(diffs) -> None:
    row = diffs["allgather_wait"].gate_row()
    assert tuple(row) == diffing.GATE_FIELDS + diffing.GATE_TEXT_FIELDS
    assert all(
        v is None or isinstance(v, (int, float)) for k, v in row.items() if k in diffing.GATE_FIELDS
    )
    # The words: the verdict, the attribution, and each step time's significance.
    assert row["verdict"] in diffing.VERDICTS and row["attribution"] in diffing.ATTRIBUTIONS
    assert {row[f"step_time_ms.{s}.significant"] for s in diffing.STEP_STATS} <= {"true", "false"}


def test_scan_and_diff_share_one_gate_parser() -> None:
    from tpuperf import gates, scanning

    gate = scanning.parse_gate("idle_pct>20")
    assert isinstance(gate, gates.Gate)
    assert gates.parse_gate("ops.added>0", diffing.GATE_FIELDS).trips({"ops.added": 1})


# --------------------------------------------------------------------------- JSON and output


def test_json_layout(diffs) -> None:
    data = json.loads(diffs["recompiled"].to_json())
    assert tuple(data) == diffing.TOP_LEVEL_FIELDS
    assert data["schema_version"] == 1
    assert tuple(data["base"]) == tuple(data["new"]) == diffing.RUN_FIELDS
    assert all(tuple(r) == diffing.OP_COLUMNS for r in data["ops"])
    assert all(tuple(r) == diffing.CATEGORY_COLUMNS for r in data["categories"])
    assert all(tuple(r) == diffing.RECOMMENDATION_COLUMNS for r in data["recommendations"])
    assert len(data["ops"]) == diffs["recompiled"].ops.n  # JSON lists every op
    frame = diffs["recompiled"].ops.to_pandas()
    assert list(frame.columns) == list(diffing.OP_COLUMNS)


def test_added_and_removed_rows_in_json(tmp_path: Path, capsys) -> None:
    base, _ = write_run("collective_training", tmp_path / "a")
    new, _ = write_run("memory_bound", tmp_path / "b")
    assert main(["diff", str(base), str(new), "-f", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    added = [r for r in data["ops"] if r["status"] == "added"]
    removed = [r for r in data["ops"] if r["status"] == "removed"]
    assert added and removed
    assert all(r["base_op"] is None and r["match"] is None for r in added)
    assert all(r["ms_per_step_before"] == 0.0 and r["delta_pct"] is None for r in added)
    assert all(r["ms_per_step_after"] == 0.0 for r in removed)
    assert [r["delta_pct"] for r in removed] == pytest.approx([-100.0] * len(removed))
    # Rows come largest absolute change first.
    changes = [abs(r["delta_ms"]) for r in data["ops"]]
    assert changes == sorted(changes, reverse=True)
    counts = data["summary"]["ops"]
    assert counts["added"] == len(added) and counts["removed"] == len(removed)
    assert sum(counts.values()) == len(data["ops"])


def test_table_and_markdown_outputs(pairs, tmp_path: Path, capsys, monkeypatch) -> None:
    base, new, truth = pairs["recompiled"]
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["diff", str(base), str(new), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    assert "1 changed, 0 added, 0 removed, 34 same" in " ".join(out.split())
    assert truth.changed_op in out and "(--wide shows 95% CI, was, match)" in out
    assert main(["diff", str(base), str(new), "--top", "3", "--wide"]) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(truth.changed_op))
    assert row.split()[-2:] == [truth.changed_op_base, "source"]
    target = tmp_path / "diff.md"
    assert main(["diff", str(base), str(new), "-f", "md", "-o", str(target)]) == 0
    assert f"wrote {target}" in capsys.readouterr().err
    md = target.read_text()
    # The program column (added with issue 19) tells same-named ops of two programs apart.
    assert (
        f"| `{truth.changed_op}` | `{truth.changed_op_base}` | source | `jit_train_step` | "
        "changed |" in md
    )
    assert "## Warnings" not in md


def test_markdown_escapes_and_lists_warnings(pairs) -> None:
    v6e = shared_profile("tpu/v6e_4chip_inference.xplane.pb")
    base = pairs["allgather_wait"][0]
    result = tpuperf.diff(base, v6e)
    md = render_diff_markdown(result)
    assert "## Warnings" in md and "step source differs" in md
    assert all(line.count("`") % 2 == 0 for line in md.splitlines())


def test_usage_errors(capsys) -> None:
    assert main(["diff", "a", "b", "--format", "csv"]) == 2
    assert main(["diff", "a", "b", "--top", "-1"]) == 2
    assert main(["diff", str(CPU_FIXTURE), "missing.xplane.pb"]) == 4


# --------------------------------------------------------------------------- matching


def test_shape_key_drops_names_a_recompilation_changes() -> None:
    a = (
        "%fusion.3 = bf16[8,1024]{1,0} fusion(bf16[8,512]{1,0} %param.3, "
        "f32[] %get-tuple-element.10), kind=kLoop, calls=%fused_computation.3"
    )
    b = a.replace(".3", ".17").replace(".10", ".2")
    assert diffing.shape_key(a) == diffing.shape_key(b)
    assert diffing.shape_key(a).startswith("bf16[8,1024]{1,0} fusion(bf16[8,512]{1,0} %")
    assert diffing.shape_key(a) != diffing.shape_key(a.replace("bf16[8,1024]", "bf16[16,512]"))
    ar = "%all-reduce.1 = f32[4]{0} all-reduce(f32[4]{0} %x), channel_id=7, to_apply=%add"
    assert diffing.shape_key(ar) == diffing.shape_key(ar.replace("channel_id=7", "channel_id=9"))
    assert diffing.shape_key("ampere_sgemm_128x64_nn") == "ampere_sgemm_128x64_nn"


def _op(index: int, name: str, **kw: str) -> diffing._Op:
    fields = {"module": "m", "category": "loop fusion", "tf_op": "", "shape": "", "source": ""}
    fields.update(kw)
    return diffing._Op(
        index,
        fields["module"],
        name,
        fields["category"],
        fields["tf_op"],
        fields["shape"],
        fields["source"],
        index,
    )


def test_match_rules_in_order() -> None:
    base = [
        _op(0, "fusion.1", source="a.py:1", shape="s1"),  # renamed: same scope and shape
        _op(1, "fusion.2", source="a.py:2", shape="s2"),  # name reused in NEW for another op
        _op(2, "fusion.3", source="a.py:3", shape="s3"),  # reshaped: same source line
        _op(3, "fusion.9", source="a.py:9", shape="s9"),  # gone
        _op(4, "copy.1", category="copy"),  # unchanged, nothing recorded but the name
    ]
    new = [
        _op(0, "fusion.2", source="a.py:1", shape="s1"),
        _op(1, "fusion.5", source="a.py:2", shape="s2"),
        _op(2, "fusion.6", source="a.py:3", shape="s3-bigger"),
        _op(3, "fusion.7", source="a.py:7", shape="s7"),
        _op(4, "copy.1", category="copy"),
    ]
    pairs = {
        (b.name if b else None, n.name if n else None): rule
        for b, n, rule in diffing.match_ops(base, new)
    }
    assert pairs == {
        ("fusion.1", "fusion.2"): "scope_shape",
        ("fusion.2", "fusion.5"): "scope_shape",
        ("fusion.3", "fusion.6"): "source",
        ("copy.1", "copy.1"): "name",
        ("fusion.9", None): "",
        (None, "fusion.7"): "",
    }


def test_ops_sharing_a_key_pair_in_order_of_execution() -> None:
    base = [_op(i, f"fusion.{i}", source="model.py:5", shape="s") for i in range(3)]
    new = [_op(i, f"fusion.{10 + i}", source="model.py:5", shape="s") for i in range(3)]
    pairs = [(b.name, n.name) for b, n, _ in diffing.match_ops(base, new) if b and n]
    assert pairs == [
        ("fusion.0", "fusion.10"),
        ("fusion.1", "fusion.11"),
        ("fusion.2", "fusion.12"),
    ]


def test_status_threshold() -> None:
    assert diffing.status(1.0, 1.0) == "same"
    assert diffing.status(1.0, 1.009) == "same"  # under 1%
    assert diffing.status(1.0, 1.02) == "changed"
    assert diffing.status(0.0, 0.00005) == "same"  # under 0.1 us per step
    assert diffing.status(0.0, 0.001) == "changed"


def test_shorten_keeps_both_ends() -> None:
    assert shorten("convolution_fusion.24", 12) == "con…usion.24"
    assert len(shorten("x" * 900, 30)) == 30
    assert shorten("short", 30) == "short"


# --------------------------------------------------------------------------- --run, --wide


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A logdir of two runs: `a_cpu` (the CPU capture) and `b_tpu` (the latest, generated)."""
    logdir = tmp_path_factory.mktemp("two_runs")
    cpu = logdir / "plugins" / "profile" / "a_cpu"
    cpu.mkdir(parents=True)
    (cpu / "host.xplane.pb").write_bytes(CPU_FIXTURE.read_bytes())
    write_run("collective_training", logdir, run_name="b_tpu", seed=0, steps=4)
    return logdir


def test_analyze_run_picks_a_run_of_a_logdir(two_runs: Path, capsys) -> None:
    assert main(["analyze", str(two_runs), "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["platform"] == "TPU"  # the latest
    assert main(["analyze", str(two_runs), "--run", "a_cpu", "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["platform"] == "CPU"
    assert main(["analyze", str(two_runs), "--run", "c"]) == 2
    assert "--run c: no such run" in capsys.readouterr().err


def test_diff_picks_each_side_s_run(two_runs: Path, capsys) -> None:
    logdir = str(two_runs)
    assert main(["diff", logdir, logdir, "--base-run", "a_cpu", "-f", "json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert (data["base"]["platform"], data["new"]["platform"]) == ("CPU", "TPU")
    # Only NEW was left to the default, and the hint names the option that picks it.
    assert err.splitlines()[0] == (
        f"tpuperf: note: {logdir}: reading the latest of 2 runs, b_tpu (pick another with "
        "--new-run)"
    )
    assert main(["diff", logdir, logdir, "--base-run", "b_tpu", "--new-run", "a_cpu"]) == 0
    assert "pick another" not in capsys.readouterr().err
    assert main(["diff", logdir, logdir, "--new-run", "nope"]) == 2
    assert "--new-run nope: no such run" in capsys.readouterr().err


def _diff_text(base: Path, new: Path, *args: str, width: int = 80) -> list[str]:
    result = tpuperf.diff(base, new)
    buffer = io.StringIO()
    render_diff_table(
        result, Console(file=buffer, width=width, color_system=None), top=40, wide="--wide" in args
    )
    return buffer.getvalue().splitlines()


def test_a_renamed_op_is_one_row_and_wide_says_what_it_was(pairs) -> None:
    base, new, truth = pairs["recompiled"]
    for args in ((), ("--wide",)):
        lines = _diff_text(base, new, *args)
        rows = [line for line in lines if line.startswith(truth.changed_op + " ")]
        assert len(rows) == 1
        index = lines.index(rows[0])
        assert lines[index + 1].split()[0] != "was"  # no second line under the row
    wide = _diff_text(base, new, "--wide")
    header = next(line for line in wide if line.startswith("op "))
    # The interval of each change (95% CI) comes before the renamed op's columns.
    assert header.split() == [
        *("op", "status", "before", "after", "change", "%", "95%", "CI", "was", "match")
    ]
    row = next(line for line in wide if line.startswith(truth.changed_op + " "))
    assert row.split()[-2:] == [truth.changed_op_base, "source"]
    renamed = {new: old for new, old in truth.renamed.items() if new != old}
    assert len(renamed) > 20
    for was, name in renamed.items():  # every renumbered op (BASE name -> NEW name)
        cells = next(x for x in wide if x.startswith(name + " ")).split()
        assert cells[-2] == was and cells[-1] in ("scope_shape", "source")


def test_diff_wide_shows_whole_names(pairs) -> None:
    v100 = shared_profile("gpu/v100_8gpu_tf_training.xplane.pb")
    result = tpuperf.diff(v100, v100)
    buffer = io.StringIO()
    render_diff_table(result, Console(file=buffer, width=80, color_system=None), 30, wide=True)
    text = buffer.getvalue()
    assert "…" not in text
    for name in result.ops.strings("op").tolist()[:30]:
        assert display_name(name) in text


def test_no_minus_zero_from_floating_noise() -> None:
    assert signed_ms(-1e-13) == "0" and signed_ms(1e-12) == "0"
    assert signed_ms(-2e-3) == "-2.0 us"
    from tpuperf.render.diff import signed_pct

    assert signed_pct(-1e-12) == "+0.0%" and signed_pct(-1e-12, " pt") == "+0.0 pt"


@pytest.mark.parametrize("width", [80, 100])
def test_headings_and_run_lines_break_at_natural_points(pairs, width: int) -> None:
    v100 = shared_profile("gpu/v100_8gpu_tf_training.xplane.pb")
    lines = _diff_text(v100, v100, width=width)
    counts = "0 changed, 0 added, 0 removed, 13 same"
    head = "Ops by change (self time per step per device)"
    if len(head) + 2 + len(counts) <= width:
        assert f"{head}: {counts}" in lines
    else:
        assert lines[lines.index(head) + 1] == counts
    source = str(v100)
    details = "NVIDIA V100, 2 device(s), 1 steps from steps_line"
    base = lines[1]
    if len(f"BASE {source}  {details}") <= width:
        assert base == f"BASE {source}  {details}"
    else:
        assert (base, lines[2]) == (f"BASE {source}", f"     {details}")


def test_op_rows_from_a_shared_index_are_those_of_grouping_every_op(tmp_path: Path) -> None:
    """A TPU op's names share one index (its metadata row): the rows and (module, program)
    pairs read from the index values in use equal those of grouping the ops by their values."""
    from tpuperf.columns import Strings

    run, _ = write_run("collective_training", tmp_path / "run", seed=1, steps=4)
    profile = tpuperf.load(run)
    report = tpuperf.analyze(profile)
    keys = list(zip(report.ops.strings("module"), report.ops.strings("op"), strict=True))
    index = {key: i for i, key in enumerate(keys[1:])}  # one (module, op) has no row: -1
    checked, missing = 0, False
    for device in profile.device_tables:
        ops = device.ops
        module, op, program = (ops.strings(c) for c in ("module", "op", "program_id"))
        if not ops.n or op.index is not module.index or program.index is not module.index:
            continue
        codes, row_of, shared = diffing._rows_and_programs(module, op, program, index)
        assert codes is module.index
        apart = [Strings.from_list(s.tolist()) for s in (module, op, program)]
        group, group_rows, grouped = diffing._rows_and_programs(*apart, index)
        rows = row_of[codes]
        assert rows.tolist() == group_rows[group].tolist()
        assert set(shared) == set(grouped) and len(shared) == len(set(shared))
        checked, missing = checked + 1, missing or bool((rows == -1).any())
    assert checked and missing


def test_an_interval_is_numpys_percentile_interval() -> None:
    # interval sorts the replicates and reads the percentiles off at their ranks, where
    # numpy's percentile partitions each row about four ranks more slowly: the same numbers,
    # bit for bit, with ties and infinities, along either axis, of one row or many;
    # nanpercentile's with a NaN.
    tail = 100.0 * (1.0 - diffing.CONFIDENCE) / 2.0
    tails = [tail, 100.0 - tail]
    rng = np.random.default_rng(11)
    replicates = rng.normal(size=(50, 1000))
    replicates[3] = 2.0
    replicates[4, ::7] = np.inf
    replicates[6, ::3] = -np.inf
    for values, axis in ((replicates, -1), (replicates, 0), (replicates[9], -1)):
        with np.errstate(invalid="ignore"):  # numpy's interpolation of inf and -inf: NaN
            low, high = diffing.interval(values, axis)
            want = np.percentile(values, tails, axis=axis)
        assert np.array_equal(low, want[0], equal_nan=True)
        assert np.array_equal(high, want[1], equal_nan=True)
    # In place: the same interval, the caller's replicates left sorted along the axis.
    for axis in (-1, 0):
        own = replicates.copy()
        with np.errstate(invalid="ignore"):
            got = diffing.interval(own, axis, in_place=True)
            want = diffing.interval(replicates, axis)
        assert all(np.array_equal(g, w, equal_nan=True) for g, w in zip(got, want, strict=True))
        assert np.array_equal(own, np.sort(replicates, axis=axis))
    replicates[5, 10] = np.nan
    with np.errstate(invalid="ignore"):
        low, high = diffing.interval(replicates)
        want = np.nanpercentile(replicates, tails, axis=-1)
    assert np.array_equal(low, want[0], equal_nan=True)
    assert np.array_equal(high, want[1], equal_nan=True)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.lists(
            st.one_of(
                st.floats(-1e6, 1e6, allow_nan=False),
                st.sampled_from([0.0, -0.0, 1.5, np.inf, -np.inf]),
            ),
            min_size=1,
            max_size=12,
        ),
        min_size=1,
        max_size=3,
    ),
    q=st.one_of(st.floats(0.0, 100.0), st.sampled_from([0.0, 2.5, 50.0, 97.5, 100.0])),
    axis=st.sampled_from([0, -1]),
)
def test_a_percentile_of_sorted_values_is_numpys_to_the_last_bit(
    rows: list[list[float]], q: float, axis: int
) -> None:
    # Every rank and weight: below a half and from it (numpy's two forms of the same line),
    # the last value (where numpy's weight runs past the end), ties, signed zeros, infinities.
    width = min(len(r) for r in rows)
    values = np.array([r[:width] for r in rows])
    ordered = np.sort(values, axis=axis)
    with np.errstate(invalid="ignore"):  # numpy's interpolation of inf and -inf: NaN
        want = np.percentile(ordered, q, axis=axis)
        got = diffing.sorted_percentile(ordered, q, axis)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("no_cache", [False, True])
def test_large_sides_pooled_side_by_side_give_the_diff_pooled_one_after_the_other(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    no_cache: bool,
) -> None:
    # A large diff pools its two sides in two threads (after reading and analysing the runs
    # side after side): the same JSON, and the same notes in the same order, as pooling them
    # in turn; here with two runs on one side and the analyses read back or made in the
    # threads (--no-cache). The fixtures are small: the threshold is lowered to take them.
    import threading

    from tpuperf import _threads

    data = REPO / "fixtures" / "data"
    base = f"{data / 'diff_cnn_b16.xplane.pb'},{data / 'diff_cnn_b16_rerun.xplane.pb'}"
    new = str(data / "diff_cnn_b64.xplane.pb")
    args = ["diff", base, new, "-f", "json", *(["--no-cache"] if no_cache else [])]
    pooled_in: list[str] = []
    original = diffing.side

    def side(*args: object, **kwargs: object) -> diffing.Side:
        pooled_in.append(threading.current_thread().name)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(diffing, "side", side)
    outputs = []
    for threshold in (_threads.PARALLEL_OPS, 0):
        monkeypatch.setattr(_threads, "PARALLEL_OPS", threshold)
        monkeypatch.setenv("TPUPERF_CACHE_DIR", str(tmp_path / f"cache-{threshold}"))
        assert main(args) == 0
        outputs.append(capsys.readouterr())
    assert pooled_in[:2] == ["MainThread", "MainThread"]
    assert all(name.startswith("tpuperf-side") for name in pooled_in[2:])
    assert len(pooled_in) == 4
    assert outputs[1].out == outputs[0].out and outputs[1].err == outputs[0].err
    assert json.loads(outputs[0].out)["summary"]["ops"]


@pytest.mark.parametrize("n", [2, 3, 4, 7, 150, 233])
def test_a_step_statistics_replicates_are_numpys_statistic_of_the_draws(n: int) -> None:
    # The median and the 90th percentile of each replicate come from the values sorted once
    # and the replicate's counts of draws, the mean from the draws: each is numpy's statistic
    # of the values the replicate draws, bit for bit, with ties, signed zeros and
    # infinities; with a NaN among the values, numpy's own (NaN where one is drawn).
    rng = np.random.default_rng(n)
    boot = diffing._Bootstrap(n, n + 1)
    for kind in ("spread", "ties", "inf", "nan"):
        values = rng.lognormal(3.0, 0.3, n + 1)
        if kind == "ties":
            values = np.round(values[: n + 1], 0)
            values[::3] = -0.0
        elif kind == "inf":
            values[1] = np.inf
        elif kind == "nan":
            values[0] = np.nan
        for which, side in ((0, values[:n]), (1, values)):
            for stat, numpys in diffing._STATISTICS.items():
                with np.errstate(invalid="ignore"):
                    want = numpys(side[boot.index[which]])
                    got = diffing._replicates(stat, side, boot, which)
                assert got.shape == (diffing.BOOTSTRAP_REPLICATES,)
                assert np.array_equal(got, want, equal_nan=True), (kind, which, stat)
                assert np.array_equal(np.signbit(got), np.signbit(want)), (kind, which, stat)


def test_step_intervals_take_the_ops_bootstrap_where_it_draws_as_many_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The step statistics' intervals come from the bootstrap the ops' took where it draws as
    # many steps a side as there are step times (the same seed: the same draws), and from a
    # bootstrap of their own where it does not: the same intervals either way.
    rng = np.random.default_rng(5)
    base_ms, new_ms = rng.lognormal(3.0, 0.1, 40), rng.lognormal(3.05, 0.1, 33)

    def intervals(boot: diffing._Bootstrap | None) -> dict[str, dict[str, object]]:
        out: dict[str, dict[str, object]] = {
            stat: {"delta": 1.0} for stat in ("median", "mean", "p90")
        }
        diffing._step_intervals(out, base_ms, new_ms, boot)
        return out

    fresh = intervals(None)
    assert fresh["median"]["ci_low"] is not None
    made: list[tuple[int, int]] = []
    original = diffing._Bootstrap.__init__

    def counted(self: diffing._Bootstrap, n_base: int, n_new: int) -> None:
        made.append((n_base, n_new))
        original(self, n_base, n_new)

    ops_boot = diffing._Bootstrap(40, 33)
    other = diffing._Bootstrap(40, 34)
    monkeypatch.setattr(diffing._Bootstrap, "__init__", counted)
    assert intervals(ops_boot) == fresh and made == []
    assert intervals(other) == fresh and made == [(40, 33)]


@pytest.mark.parametrize("rows", [1, 2, 7, 300])
def test_each_ops_typical_time_is_numpys_median_of_its_row(
    monkeypatch: pytest.MonkeyPatch, rows: int
) -> None:
    # A large side's rows go to threads in blocks: each row's median is numpy's, in order
    # (the threshold lowered to send these small ones there too).
    import threading

    rng = np.random.default_rng(rows)
    samples = np.round(rng.lognormal(0.0, 0.5, (rows, 9)), 1)
    samples[0, :4] = np.inf
    if rows > 1:
        samples[1, 2] = np.nan
    threads: set[str] = set()
    original = np.median

    def median(*args: object, **kwargs: object) -> object:
        threads.add(threading.current_thread().name)
        return original(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(diffing, "_PARALLEL_ROWS", 0)
    monkeypatch.setattr(diffing.np, "median", median)
    got = diffing._row_medians(samples)
    want = original(samples, axis=1)
    assert np.array_equal(got, want, equal_nan=True)
    assert got.shape == (rows,)
    parallel = rows > 1 and (diffing.os.cpu_count() or 1) > 1
    assert all(t.startswith("tpuperf-median") for t in threads) == parallel


def test_a_bootstraps_counts_are_each_replicates_draws() -> None:
    boot = diffing._Bootstrap(5, 233)
    for which, n in enumerate((5, 233)):
        want = np.stack([np.bincount(row, minlength=n) for row in boot.index[which]])
        assert boot.counts[which].dtype == np.int64
        assert np.array_equal(boot.counts[which], want)
        assert (boot.counts[which].sum(axis=1) == n).all()


def test_each_rows_bootstrap_medians_are_made_once_and_are_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The common factor's ops are among the paired ops the op diff takes: their medians are
    # made once, and a row's are the same whatever rows are made beside it.
    rng = np.random.default_rng(5)
    samples = rng.gamma(2.0, 1.0, (40, 25))
    samples[7] = 1.0  # ties
    fresh = diffing._Bootstrap(25, 25)
    boot = diffing._Bootstrap(25, 25)
    made: list[int] = []
    medians = boot.medians

    def counted(rows: np.ndarray, which: int) -> np.ndarray:
        made.append(len(rows))
        return medians(rows, which)

    monkeypatch.setattr(boot, "medians", counted)
    first = np.array([7, 3, 7, 30])
    kept = boot.medians_at(samples, first, 1, keep=True)
    assert np.array_equal(kept, fresh.medians(samples[first], 1))
    every = np.arange(40)[::-1]
    assert np.array_equal(boot.medians_at(samples, every, 1), fresh.medians(samples[every], 1))
    assert made == [3, 37]
    # Taken once: asked again, they are made again. The other side's rows are its own.
    assert np.array_equal(boot.medians_at(samples, first, 1), kept)
    assert np.array_equal(boot.medians_at(samples, first, 0), fresh.medians(samples[first], 0))
    assert made == [3, 37, 3, 3]
    assert boot.medians_at(samples, np.array([], dtype=np.int64), 0).shape == (0, 1000)
    in_order = np.arange(5, 9)
    assert np.array_equal(boot.medians_at(samples, in_order, 0), fresh.medians(samples[5:9], 0))
    # Without keep, the array given is the caller's to change in place (the op diff scales
    # and subtracts in it): kept rows given out with new ones are copies; kept ones read-only.
    some = np.array([2, 11])
    kept = boot.medians_at(samples, some, 0, keep=True)
    mixed = boot.medians_at(samples, every, 0)
    mixed *= -1.0
    assert np.array_equal(kept, fresh.medians(samples[some], 0))
    assert np.array_equal(mixed, -fresh.medians(samples[every], 0))
