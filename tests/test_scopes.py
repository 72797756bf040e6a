"""Scopes: name-scope paths, passes and source lines (tpuperf/scopes.py), against a generated
profile's truth, the real profiles' own metadata, and a real JAX job captured here."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from tpuperf.analyzers.base import AnalysisConfig

from fixtures.generate import generate_scoped
from tests.conftest import CPU_FIXTURE, CPU_TRUTH, Cli, shared_profile
from tpuperf import scopes as sc
from tpuperf._hlo_schema import HloProto
from tpuperf.analysis import analyze
from tpuperf.cli import main
from tpuperf.opstats import aggregate_table
from tpuperf.profiles import Profile, load
from tpuperf.schema import PASSES, SCOPES

# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("path", "levels", "primitive", "transforms"),
    [
        (
            "jit(train_step)/jit(main)/transpose(jvp(MLP))/Dense_0/dot_general",
            ("jit(train_step)", "MLP", "Dense_0"),
            "dot_general",
            ("transpose", "jvp"),
        ),
        ("jit(f)/jit(main)/add", ("jit(f)",), "add", ()),
        ("jit(train_step)/jvp()/neg", ("jit(train_step)",), "neg", ("jvp",)),
        (
            "jit(s)/transpose(jvp(jit(log_softmax)))/div",
            ("jit(s)", "jit(log_softmax)"),
            "div",
            ("transpose", "jvp"),
        ),
        (
            "jit(s)/Block/remat(MLP)/vmap(act)/tanh",
            ("jit(s)", "Block", "MLP", "act"),
            "tanh",
            ("remat", "vmap"),
        ),
        ("jit(s)/loss/jit(log_softmax)", ("jit(s)", "loss", "jit(log_softmax)"), "", ()),
        ("x", (), "x", ()),
        ("", (), "", ()),
        # Slashes inside a wrapper do not split; an unknown call stays a level as it is.
        ("pjit(f)/Layer(a/b)/add", ("pjit(f)", "Layer(a/b)"), "add", ()),
    ],
)
def test_paths_are_split_into_levels_with_wrappers_peeled(
    path: str, levels: tuple[str, ...], primitive: str, transforms: tuple[str, ...]
) -> None:
    parsed = sc.parse_path(path)
    assert (parsed.levels, parsed.primitive, parsed.transforms) == (levels, primitive, transforms)


def test_tf_op_type_and_source_lines_are_split() -> None:
    assert sc.strip_op_type("jit(f)/jit(main)/add:") == "jit(f)/jit(main)/add"
    assert sc.strip_op_type("model/dense/MatMul:MatMul") == "model/dense/MatMul"
    assert sc.strip_op_type("jit(f)/a:b/add") == "jit(f)/a:b/add"  # not a type: a path follows
    assert sc.split_source("dir/host_offload_stress_test.py:29") == (
        "dir/host_offload_stress_test.py",
        29,
    )
    assert sc.split_source("model.py") == ("model.py", 0)


# --------------------------------------------------------------------------- generated truth


@pytest.fixture(scope="module")
def scoped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Profile, dict[str, Any]]:
    run = generate_scoped(steps=4, devices=2)
    path = tmp_path_factory.mktemp("scoped") / "tpu-host-0.xplane.pb"
    path.write_bytes(run.xspaces["tpu-host-0"])
    return load(path), run.truth.notes["scopes"]


def test_every_op_gets_the_scope_pass_and_source_its_path_says(
    scoped: tuple[Profile, dict[str, Any]],
) -> None:
    profile, truth = scoped
    table = profile.scopes
    assert list(table.columns) == list(SCOPES)
    assert {str(c): str(t) for c, t in table.dtypes.items()} == SCOPES
    rows = {r["op"]: r for r in table.to_dict("records")}
    assert set(rows) == set(truth["ops"])
    for name, want in truth["ops"].items():
        got = rows[name]
        assert got["scope"] == "/".join(want["levels"]), name
        assert got["primitive"] == want["primitive"], name
        assert got["pass"] == want["pass"], name
        assert got["source"] == want["source"], name
        assert got["name_scope"] == want["tf_op"].removesuffix(":"), name
        assert got["scope_origin"] == ("op_metadata" if want["tf_op"] else ""), name


def test_every_scope_time_equals_the_truth(scoped: tuple[Profile, dict[str, Any]]) -> None:
    profile, truth = scoped
    nodes = {}

    def walk(node: dict[str, Any]) -> None:
        nodes[(node["kind"], node["path"])] = node
        for child in node["children"]:
            walk(child)

    tree = sc.scope_tree(profile)
    walk(tree)
    scope_nodes = {path: n for (kind, path), n in nodes.items() if kind == "scope"}
    assert {p: n["time_ps"] for p, n in scope_nodes.items()} == truth["scope_time_ps"]
    assert {p: n["self_ps"] for p, n in scope_nodes.items() if n["self_ps"]} == truth[
        "scope_self_ps"
    ]
    total = sum(o["time_ps"] for o in truth["ops"].values())
    assert tree["time_ps"] == total
    assert tree["passes"] == {
        p: truth["pass_time_ps"].get(p, 0) / truth["windows"] / 1e9 for p in PASSES
    }
    # Op leaves: a scope's primitive, summed over the ops of that scope and primitive.
    leaves: dict[str, int] = {}
    for name, o in truth["ops"].items():
        if o["levels"]:
            path = "/".join([*o["levels"], o["primitive"]])
        else:
            path = f"{sc.NO_SCOPE}/{name.split('.')[0]}"
        leaves[path] = leaves.get(path, 0) + o["time_ps"]
    assert {p: n["time_ps"] for (k, p), n in nodes.items() if k == "op"} == leaves


def test_ops_by_scope_source_and_pass_equal_the_truth(
    scoped: tuple[Profile, dict[str, Any]],
) -> None:
    profile, truth = scoped
    windows = truth["windows"]
    by_scope = {r["scope"]: r for r in aggregate_table(profile, by="scope").records()}
    want = {**truth["scope_time_ps"], sc.NO_SCOPE: truth["pass_time_ps"]["other"]}
    assert {s: round(r["total_time_ms"] * 1e9) for s, r in by_scope.items()} == want
    for scope, row in by_scope.items():
        assert row["depth"] == len(sc.split_levels(scope))
        assert row["ms_per_step"] == pytest.approx(want[scope] / windows / 1e9, rel=1e-12)
        self_ps = truth["scope_self_ps"].get(scope, want[scope] if scope == sc.NO_SCOPE else 0)
        assert round(row["self_time_ms"] * 1e9) == self_ps
    # Tree order: every scope right after its parent or a sibling's subtree.
    seen: list[str] = []
    for scope in by_scope:
        parent = "/".join(sc.split_levels(scope)[:-1])
        assert not parent or parent in seen, scope
        seen.append(scope)

    shallow = aggregate_table(profile, by="scope", depth=2).records()
    assert max(r["depth"] for r in shallow) == 2
    assert {r["scope"] for r in shallow} == {s for s in by_scope if len(sc.split_levels(s)) <= 2}

    by_pass = {
        r["pass"]: round(r["total_time_ms"] * 1e9)
        for r in aggregate_table(profile, by="pass").records()
    }
    assert by_pass == truth["pass_time_ps"]
    by_source = aggregate_table(profile, by="source").records()
    want_sources = {s or "(no source)": t for s, t in truth["source_time_ps"].items()}
    assert {r["source"]: round(r["total_time_ms"] * 1e9) for r in by_source} == want_sources
    # A line's scope is the one with most of its time (model.py:45 is both blocks' MLP), and
    # how many more it spans.
    line_45: dict[str, int] = {}
    for o in truth["ops"].values():
        if o["source"] == "model.py:45":
            scope = "/".join(o["levels"])
            line_45[scope] = line_45.get(scope, 0) + o["time_ps"]
    assert len(line_45) == 2
    row = next(r for r in by_source if r["source"] == "model.py:45")
    assert row["scope"] == f"{max(line_45, key=line_45.__getitem__)} +1"

    per_device = aggregate_table(profile, by="pass", per_device=True).records()
    assert sum(round(r["total_time_ms"] * 1e9) for r in per_device) == sum(
        truth["pass_time_ps"].values()
    )
    assert {r["device"] for r in per_device} == {0, 1}


def test_analyze_splits_forward_backward_and_optimizer(
    scoped: tuple[Profile, dict[str, Any]],
) -> None:
    profile, truth = scoped
    report = analyze(profile, config=AnalysisConfig(warmup_steps=0))
    # Every step is analysed; the init call is outside them, so its (forward) time is not.
    init = truth["ops"]["init_broadcast_fusion"]["time_ps"]
    in_steps = {p: truth["pass_time_ps"].get(p, 0) for p in PASSES}
    in_steps["forward"] -= init
    total = sum(in_steps.values())
    passes = report.summary["passes"]
    assert list(passes) == list(PASSES)
    for name in PASSES:
        assert passes[name]["ms_per_step"] == pytest.approx(
            in_steps[name] / truth["windows"] / 1e9, rel=1e-12
        )
        assert passes[name]["pct"] == pytest.approx(100.0 * in_steps[name] / total, rel=1e-12)
    assert passes["backward"]["ms_per_step"] > passes["forward"]["ms_per_step"]

    top = report.top_ops.records()
    assert top, "the scenario has top ops"
    for row in top:
        want = truth["ops"][row["op"]]
        assert row["scope"] == "/".join(want["levels"])
        assert (row["primitive"], row["pass"], row["source"]) == (
            want["primitive"],
            want["pass"],
            want["source"],
        )
    cited = [r for r in report.recommendations if r.ops]
    for rec in cited:
        for where in rec.scopes:
            want = truth["ops"][where["op"]]
            assert where["scope"] == "/".join(want["levels"])
            assert where["source"] == want["source"]
        if rec.scopes:
            first = rec.scopes[0]
            assert f"{first['op']}" in rec.evidence.split("in the code:")[1]


# --------------------------------------------------------------------------- real profiles


def test_v6e_ops_map_to_their_metadata(v6e: Path) -> None:
    profile = load(v6e)
    table = profile.scopes
    rows = {r["op"]: r for r in table.to_dict("records")}
    ops = profile.ops.drop_duplicates(["module", "op"])
    for record in ops.to_dict("records"):
        row = rows[record["op"]]
        # As the op's own metadata says: tf_op (less its ":type") and source.
        assert row["name_scope"] == sc.strip_op_type(str(record["tf_op"]))
        assert row["source"] == record["source"]
    sources = {
        op: (rows[op]["scope"], rows[op]["source"].rsplit("/", 1)[-1], rows[op]["pass"])
        for op in ("broadcast_add_fusion", "broadcast_add_fusion.1", "broadcast_add_fusion.2")
    }
    assert set(sources.values()) == {("jit(f)", "host_offload_stress_test.py:29", "forward")}
    assert rows["all-reduce"]["scope"] == "jit(_psum)"
    assert rows["all-reduce"]["source"].endswith("host_offload_stress_test.py:38")
    assert rows["broadcast.2"]["scope"] == "jit(broadcast_in_dim)"
    assert rows["broadcast.2"]["source"].endswith("host_offload_stress_test.py:37")
    copies = [r for op, r in rows.items() if op.startswith("copy-")]
    assert len(copies) == 12
    assert all(r["scope"] == "" and r["pass"] == "other" for r in copies)
    assert set(table["scope_origin"]) == {"op_metadata", ""}


def test_mi300_conv_hlo_protos_name_the_convolution_kernels() -> None:
    profile = load(shared_profile("gpu/mi300_jax_conv.xplane.pb"))
    host = profile.host_names[0]
    assert sorted(profile.hlo_protos[host]) == sorted(
        f"{name}({pid})"
        for name, pid in [
            ("jit_convert_element_type", 1),
            ("jit__threefry_seed", 3),
            ("jit__threefry_split", 5),
            ("jit__unstack", 7),
            ("jit__normal", 9),
            ("jit__normal", 11),
            ("jit__multi_slice", 13),
            ("jit_forward_3d_conv", 15),
        ]
    )
    rows = {r["op"]: r for r in profile.scopes.to_dict("records")}
    for op in ("cudnn-conv.1", "input_transpose_fusion"):
        row = rows[op]
        assert row["scope_origin"] == "hlo_proto"
        assert row["name_scope"] == "jit(forward_3d_conv)/conv_general_dilated"
        assert (row["scope"], row["primitive"]) == ("jit(forward_3d_conv)", "conv_general_dilated")
        assert row["source"] == "/workspace/traces/generate_conv_trace.py:23"
    # The convolution's kernels (im2col, then Tensile GEMMs) are the op's, so attributed.
    ops = profile.ops
    conv = ops[ops["op"] == "cudnn-conv.1"]
    kernels = set(conv["hlo_text"].astype(str).str.split("_").str[0])
    assert kernels == {"Im3d2Col.kd", "Cijk"}, kernels
    table = aggregate_table(profile, by="source").records()
    line = next(r for r in table if r["source"].endswith("generate_conv_trace.py:23"))
    conv_ps = int(
        ops.loc[ops["op"].isin(["cudnn-conv.1", "input_transpose_fusion"]), "self_ps"].sum()
    )
    assert round(line["total_time_ms"] * 1e9) == conv_ps
    # The layout changes of the arguments are named by the argument alone: no scope, other.
    assert (
        rows["input_transpose_fusion.1"]["primitive"],
        rows["input_transpose_fusion.1"]["pass"],
    ) == ("x", "other")


def test_cpu_capture_sources_come_from_the_stack_frame_index() -> None:
    profile = load(CPU_FIXTURE)
    truth = json.loads(CPU_TRUTH.read_text())
    rows = profile.scopes.to_dict("records")
    assert {r["module"] for r in rows} == set(truth["hlo_modules"])
    executed = set(truth["hlo_entry_ops_executed"])
    assert {r["op"] for r in rows} <= executed
    by_pass = {p: [r for r in rows if r["pass"] == p] for p in PASSES}
    assert by_pass["backward"] and by_pass["forward"] and by_pass["optimizer"]
    # The parameter update of make_cpu_fixtures.py, line 100: `w - 0.01 * gw`.
    assert {r["source"].rsplit("/", 1)[-1] for r in by_pass["optimizer"]} == {
        "make_cpu_fixtures.py:100"
    }
    assert all(r["name_scope"].startswith("jit(train_step)/sub") for r in by_pass["optimizer"])
    assert all("transpose(" in r["name_scope"] for r in by_pass["backward"])
    assert all(r["scope_origin"] == "hlo_proto" for r in rows if r["name_scope"])


# --------------------------------------------------------------------------- HLO protos


def _hlo(instructions: list[dict[str, Any]], fused: list[dict[str, Any]]) -> bytes:
    proto = HloProto()
    module = proto.hlo_module
    module.name = "jit_step"
    entry = module.computations.add(name="main", id=1)
    inner = module.computations.add(name="fused", id=2)
    for target, items in ((entry, instructions), (inner, fused)):
        for item in items:
            instruction = target.instructions.add(name=item["name"], opcode=item["opcode"])
            for key, value in item.get("metadata", {}).items():
                setattr(instruction.metadata, key, value)
            instruction.called_computation_ids.extend(item.get("calls", []))
    frames = module.stack_frame_index
    frames.file_names.extend(["train.py"])
    frames.function_names.extend(["loss"])
    frames.file_locations.add(file_name_id=1, function_name_id=1, line=41)
    frames.stack_frames.add(file_location_id=1, parent_frame_id=0)
    return proto.SerializeToString()


def test_hlo_metadata_falls_back_to_the_fused_root_and_the_stack_frame() -> None:
    data = _hlo(
        [
            {"name": "fusion", "opcode": "fusion", "calls": [2]},
            {
                "name": "dot",
                "opcode": "dot",
                "metadata": {"op_name": "jit(step)/jvp(M)/dot_general", "stack_frame_id": 1},
            },
            {"name": "copy", "opcode": "copy"},
        ],
        [
            {"name": "p", "opcode": "parameter"},
            {
                "name": "exp",
                "opcode": "exponential",
                "metadata": {"op_name": "jit(step)/M/exp", "source_file": "m.py", "source_line": 7},
            },
        ],
    )
    found = sc.hlo_op_metadata(data, {"fusion", "dot", "copy", "absent"})
    assert found["fusion"] == sc._OpMeta("jit(step)/M/exp", "m.py", 7)
    assert found["dot"] == sc._OpMeta("jit(step)/jvp(M)/dot_general", "train.py", 41)
    assert found["copy"] == sc._OpMeta("", "", 0)
    assert "absent" not in found


# --------------------------------------------------------------------------- no scope data


def test_a_profile_without_scope_information_says_so_and_changes_nothing_else(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = shared_profile("gpu/v100_8gpu_tf_training.xplane.pb")
    profile = load(path)
    assert not sc.scopes(profile).has_scopes

    with_scopes = analyze(profile).to_dict()
    without = analyze(load(path), scopes=False).to_dict()
    assert with_scopes["summary"]["passes"] is None
    for top in with_scopes["top_ops"]:
        assert (top["scope"], top["primitive"], top["source"]) == ("", "", "")
    assert with_scopes == without  # no evidence text or anything else moved

    for args in (["tree", str(path)], ["ops", str(path), "--by", "scope"]):
        assert main(args) == 0
        out, err = capsys.readouterr()
        assert out == ""
        said = [line for line in err.splitlines() if "no scope information" in line]
        assert len(said) == 1, err


def test_analyze_without_scopes_leaves_the_scope_fields_empty(
    scoped: tuple[Profile, dict[str, Any]],
) -> None:
    profile, _ = scoped
    report = analyze(profile, scopes=False)
    assert report.summary["passes"] is None
    assert set(report.top_ops.strings("scope").tolist()) <= {""}
    assert all(not r.scopes and "in the code:" not in r.evidence for r in report.recommendations)


# --------------------------------------------------------------------------- commands


@pytest.mark.parametrize("min_pct", ["150", "-1", "nan"])
def test_tree_min_pct_outside_0_to_100_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], min_pct: str
) -> None:
    """A share above 100% hid every node and exited 0 with an empty tree."""
    assert main(["tree", str(CPU_FIXTURE), "--min-pct", min_pct]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"tpuperf: error: --min-pct {min_pct}: a share of op time, from 0 to 100")


def test_tree_command_renders_and_writes_json(
    scoped: tuple[Profile, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile, truth = scoped
    source = profile.source
    assert main(["tree", source, "--format", "json", "--min-pct", "0", "--warmup", "0"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema_version"] == 1
    assert document["scoped"] is True
    assert document["windows"] == truth["windows"]
    # The steps' ops: the init call before the first step is outside every window.
    assert document["tree"]["time_ps"] == sum(
        o["time_ps"] for name, o in truth["ops"].items() if not name.startswith("init_")
    )

    assert main(["tree", source, "--depth", "2", "--min-pct", "0"]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 100 for line in out.splitlines())  # the width COLUMNS pins
    assert "Transformer" in out and "Block_0" not in out  # depth 2: program, then the model
    assert "forward" in out and "backward" in out

    assert main(["tree", source, "--depth", "0"]) == 2


def test_tree_names_are_text_not_markup(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from tpuperf.render.tree import render_tree

    node = {
        "name": "[bold]x[/bold]" + "y" * 100,
        "kind": "scope",
        "path": "p",
        "depth": 1,
        "ms_per_step": 1.0,
        "pct": 100.0,
        "passes": {"forward": 1.0, "backward": 0.0, "optimizer": 0.0, "other": 0.0},
        "source": "",
        "children": [],
        "hidden": 0,
    }
    root = {**node, "name": "(all)", "kind": "root", "children": [node]}
    buffer = io.StringIO()
    render_tree(
        {"source": "s", "windows": 1, "depth": None, "min_pct": 0.0, "tree": root},
        Console(file=buffer, width=80, color_system=None),
    )
    text = buffer.getvalue()
    assert "[bold]x" in text  # printed as it is, not read as markup
    assert all(len(line) <= 80 for line in text.splitlines())


def test_ops_rejects_depth_without_scope_and_unknown_sorts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["ops", str(CPU_FIXTURE), "--depth", "2"]) == 2
    assert main(["ops", str(CPU_FIXTURE), "--by", "scope", "--sort", "flops"]) == 2
    capsys.readouterr()


# --------------------------------------------------------------------------- a real JAX job


@pytest.mark.jax
@pytest.mark.slow
def test_captured_jax_job_shows_its_named_scopes_with_a_backward_pass(tmp_path: Path) -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from tpuperf import _demo_job as job

    key = jax.random.PRNGKey(0)
    params = job._init_params(key)
    zeros = jax.tree.map(jnp.zeros_like, params)
    state = {"params": params, "m": zeros, "v": jax.tree.map(jnp.zeros_like, params), "t": 0}
    tokens = jax.random.randint(key, (job.BATCH, job.SEQ + 1), 0, job.VOCAB)
    step = job._make_train_step()
    state, loss = step(state, tokens[:, :-1], tokens[:, 1:])
    loss.block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                state, loss = step(state, tokens[:, :-1], tokens[:, 1:])
                loss.block_until_ready()
    (path,) = tmp_path.rglob("*.xplane.pb")
    profile = load(path)
    document = sc.tree_report(profile)
    assert document["scoped"]

    def find(node: dict[str, Any], path: str) -> dict[str, Any] | None:
        if node["kind"] == "scope" and node["path"] == path:
            return node
        for child in node["children"]:
            found = find(child, path)
            if found is not None:
                return found
        return None

    train = "jit(train_step)"
    for layer in ("Transformer/Embed", "Transformer/Block_0/Attention", "Transformer/Block_0/MLP"):
        node = find(document["tree"], f"{train}/{layer}")
        assert node is not None, layer
        # value_and_grad: each layer runs forward (jvp) and backward (transpose).
        assert node["passes"]["forward"] > 0 or layer.endswith("Embed"), layer
        assert node["passes"]["backward"] > 0, layer
    adam = find(document["tree"], f"{train}/adam")
    assert adam is not None and adam["passes"]["optimizer"] == pytest.approx(adam["ms_per_step"])
    passes = analyze(profile).summary["passes"]
    assert passes["backward"]["ms_per_step"] > 0 and passes["forward"]["ms_per_step"] > 0
    assert math.isclose(sum(p["pct"] for p in passes.values()), 100.0)

    # The rendered tree names the layers.
    import io

    from rich.console import Console

    from tpuperf.render.tree import render_tree

    buffer = io.StringIO()
    render_tree(
        sc.tree_report(profile, depth=4, min_pct=0.5),
        Console(file=buffer, width=80, color_system=None),
    )
    text = buffer.getvalue()
    for name in ("Transformer", "Block_0", "Attention", "MLP"):
        assert name in text


def test_scope_time_is_per_device_and_window(scoped: tuple[Profile, dict[str, Any]]) -> None:
    profile, truth = scoped
    device = profile.device_tables[0]
    one = sc.scope_time(profile, device)
    both = sc.scope_time(profile)
    assert one.windows * 2 == both.windows == truth["windows"]
    assert int(one.time_ps.sum()) + int(
        sc.scope_time(profile, profile.device_tables[1]).time_ps.sum()
    ) == int(both.time_ps.sum())
    assert dataclasses.is_dataclass(one)


def test_a_damaged_hlo_module_costs_its_scopes_and_is_noted() -> None:
    profile = load(CPU_FIXTURE)
    host = profile.host_names[0]
    (key,) = [k for k in profile.hlo_protos[host] if k.startswith("jit_train_step(")]
    profile.hlo_protos[host][key] = b"\x0a\xff\xff\xff\x0fnot an HloProto"
    data = sc.scopes(profile)
    assert not data.has_scopes
    (note,) = data.notes
    assert note.startswith(f"{host}: HLO module {key} could not be read")
    assert sc.tree_report(profile)["notes"] == list(data.notes)


# --------------------------------------------------------------------------- tpuperf tree

# A row of the rendered tree: the name cell ends in a source line (file:line) right before the
# time per step and the share.
_LEAF_SOURCE = re.compile(r" (\S*):(\d+) +[\d.,]+ +[\d.]+%")


def _tree_cli(cli: Cli, monkeypatch: pytest.MonkeyPatch, width: int, *args: str) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, _ = cli("tree", *args)
    assert code == 0
    return out


def _leaves(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node] if node["kind"] == "op" else []
    for child in node["children"]:
        found += _leaves(child)
    return found


@pytest.mark.parametrize(
    "relative", ["gpu/mi300_jax_te_fused_attn.xplane.pb", "gpu/mi300_jax_conv.xplane.pb", None]
)
@pytest.mark.parametrize("width", [80, 100])
def test_every_leaf_keeps_its_source_line_at_the_terminal_width(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    relative: str | None,
    width: int,
) -> None:
    """A leaf whose name and source do not both fit is shortened, name first: each leaf shows
    the line number of its source (mi300_jax_te_fused_attn at 80 columns lost it on 4 of 7)."""
    path = str(shared_profile(relative) if relative else CPU_FIXTURE)
    document = json.loads(_tree_cli(cli, monkeypatch, width, path, "--format", "json"))
    want = sorted(
        int(leaf["source"].rsplit(":", 1)[1])
        for leaf in _leaves(document["tree"])
        if leaf["source"]
    )
    assert want
    text = _tree_cli(cli, monkeypatch, width, path)
    shown = sorted(int(match.group(2)) for match in _LEAF_SOURCE.finditer(text))
    assert shown == want
    assert all(len(line) <= width for line in text.splitlines())


def test_tree_wide_shows_every_name_whole_and_o_takes_the_format_from_the_suffix(
    capsys: pytest.CaptureFixture[str], cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = str(shared_profile("gpu/mi300_jax_te_fused_attn.xplane.pb"))
    document = json.loads(_tree_cli(cli, monkeypatch, 80, path, "-f", "json", "--min-pct", "0"))
    leaves = _leaves(document["tree"])
    narrow = _tree_cli(cli, monkeypatch, 80, path, "--min-pct", "0")
    wide = _tree_cli(cli, monkeypatch, 80, path, "--min-pct", "0", "--wide")
    for leaf in leaves:
        whole = f"{leaf['name']} {leaf['source'].rsplit('/', 1)[-1]}"
        assert whole in wide, whole
    assert "te_fused_attn_backward_ffi attention.py:1110" not in narrow
    assert "te_fused_attn_backward_ffi attention.py:1110" in wide
    assert max(len(line) for line in wide.splitlines()) > 80
    # -o: JSON for .json, the table for .txt (at the file width), unless --format says.
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["tree", path, "--min-pct", "0", "-o", str(tmp_path / "tree.json")]) == 0
    assert json.loads((tmp_path / "tree.json").read_text())["tree"] == document["tree"]
    assert main(["tree", path, "--min-pct", "0", "-o", str(tmp_path / "tree.txt")]) == 0
    assert (tmp_path / "tree.txt").read_text() == narrow
    assert main(["tree", path, "-f", "table", "-o", str(tmp_path / "table.json")]) == 0
    assert (tmp_path / "table.json").read_text().startswith("Scope tree ")
    capsys.readouterr()


# --------------------------------------------------------------------------- one naming rule


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Profile:
    """One TPU, 10 steps of four ops: two dot_generals of one source line in two scopes, an op
    whose path is its primitive alone (`x`), and one without a path."""
    from fixtures.generate import US, _xspace
    from fixtures.hostile import _tpu_plane

    stats = [
        ("jit(f)/jit(main)/Block_1/MLP/dot_general:", "model.py:45"),
        ("jit(f)/jit(main)/Block_2/MLP/dot_general:", "model.py:45"),
        ("x:", ""),
        ("", ""),
    ]
    durations_us = (20, 10, 5, 7)
    events = []
    start = 0
    for _ in range(10):
        for op, dur in enumerate(durations_us):
            events.append((op, start, dur * US))
            start += (dur + 1) * US

    def op_stats(i: int) -> list[tuple[str, Any]]:
        tf_op, source = stats[i]
        return [("hlo_category", "loop fusion"), ("tf_op", tf_op), ("source", source)]

    plane = _tpu_plane(0, ["fusion.0", "fusion.1", "copy.2", "copy.3"], events, op_stats=op_stats)
    path = tmp_path_factory.mktemp("outside") / "outside.xplane.pb"
    path.write_bytes(_xspace([plane], "host"))
    return load(path)


def test_ops_outside_every_scope_are_named_alike_everywhere(outside: Profile) -> None:
    """`x` (a path of its primitive alone) is in (top level), the op without a path in (no
    scope): in the tree, in ops --by scope and in ops --by source (mi300_jax_conv showed `x`
    and `kernel` as tree nodes, (top level) by scope and (no scope) by source)."""
    us = 10 * 1_000_000  # ps of 1 us per step, over the 10 executions
    tree = sc.scope_tree(outside)
    first = {(n["name"], n["kind"]): n for n in tree["children"]}
    assert set(first) == {("jit(f)", "scope"), ("(top level)", "none"), ("(no scope)", "none")}
    top = first[("(top level)", "none")]
    assert [(c["name"], c["kind"], c["time_ps"]) for c in top["children"]] == [("x", "op", 5 * us)]
    assert [c["name"] for c in first[("(no scope)", "none")]["children"]] == ["copy"]

    by_scope = {r["scope"]: r for r in aggregate_table(outside, by="scope").records()}
    for name, kind in first:
        row = by_scope[name]
        assert row["depth"] == 1, name
        assert round(row["total_time_ms"] * 1e9) == first[(name, kind)]["time_ps"], name
    assert round(by_scope["(top level)"]["self_time_ms"] * 1e9) == 5 * us

    by_source = {r["source"]: r for r in aggregate_table(outside, by="source").records()}
    # One line, two scopes: the one with most time, and how many more.
    assert by_source["model.py:45"]["scope"] == "jit(f)/Block_1/MLP +1"
    assert round(by_source["model.py:45"]["total_time_ms"] * 1e9) == 30 * us
    # x and the op without a path have no source: the line's scopes are named as above.
    assert by_source["(no source)"]["scope"] == "(no scope) +1"
    assert round(by_source["(no source)"]["total_time_ms"] * 1e9) == 12 * us


@pytest.mark.parametrize(
    ("by", "named"), [("scope", "scope"), ("pass", "pass"), ("source", "source line")]
)
def test_without_scope_information_the_line_names_the_grouping_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], by: str, named: str
) -> None:
    from fixtures.generate import _xspace
    from fixtures.hostile import _steady, _tpu_plane

    path = tmp_path / "plain.xplane.pb"
    path.write_bytes(_xspace([_tpu_plane(0, ["fusion.0", "fusion.1"], _steady(ops=2))], "host"))
    assert not sc.scopes(load(path)).has_scopes
    assert main(["ops", str(path), "--by", by]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"tpuperf: note: {path}: no scope information")
    assert line.endswith(f"; nothing to group by {named}")


def _tree_and_analysis(cli: Cli, path: str, *args: str) -> tuple:
    tree = cli.json("tree", path, "--min-pct", "0", "--format", "json", *args)
    return tree, cli.json("analyze", path, "--format", "json", *args)["summary"]


def test_tree_is_over_the_step_windows_analyze_uses_on_v6e(
    cli: Cli,
) -> None:
    """v6e: 100 jit_f calls make 99 steps (the last call ends the last step), the first left
    out as warm-up, on 4 chips: 392 windows, and the tree's op time per step is analyze's pass
    split (784 ms; it was 788 ms over 400 windows, with the ops outside the steps counted in)."""
    path = str(shared_profile("tpu/v6e_4chip_inference.xplane.pb"))
    tree, summary = _tree_and_analysis(cli, path)
    assert (tree["steps_analyzed"], tree["steps_excluded"]) == (98, 1)
    assert tree["windows"] == summary["steps_analyzed"] * summary["devices"] == 392
    assert tree["step_source"] == summary["step_source"] == "module_period"
    root = tree["tree"]
    passes = summary["passes"]
    assert root["ms_per_step"] == pytest.approx(sum(p["ms_per_step"] for p in passes.values()))
    for name, value in passes.items():
        assert root["passes"][name] == pytest.approx(value["ms_per_step"])
    assert root["ms_per_step"] == pytest.approx(784.13, abs=0.01)


def test_a_device_without_steps_adds_no_step_window(tmp_path: Path, cli: Cli) -> None:
    """A device that runs ops but has no steps (an MI300 that only ran memcpys): analyze leaves
    it out, and so does the tree; its op time is in neither."""
    run = generate_scoped(steps=4, devices=2, stepless_device=True)
    path = tmp_path / "stepless.xplane.pb"
    path.write_bytes(next(iter(run.xspaces.values())))
    truth = run.truth.notes["scopes"]
    in_steps_ps = sum(o["time_ps"] for n, o in truth["ops"].items() if not n.startswith("init_"))
    tree, summary = _tree_and_analysis(cli, str(path))  # warm-up left out, as analyze does
    assert tree["windows"] == summary["steps_analyzed"] * summary["devices"] == 6
    for name, value in summary["passes"].items():
        assert tree["tree"]["passes"][name] == pytest.approx(value["ms_per_step"])
    tree, summary = _tree_and_analysis(cli, str(path), "--warmup", "0")
    assert tree["windows"] == truth["windows"] == 8  # 4 steps x 2 devices, none for the third
    assert tree["tree"]["time_ps"] == in_steps_ps
    assert tree["tree"]["ms_per_step"] == pytest.approx(in_steps_ps / 8 / 1e9)
    for name, value in summary["passes"].items():
        assert tree["tree"]["passes"][name] == pytest.approx(value["ms_per_step"])


@pytest.mark.parametrize(
    "profile",
    ["cpu_fixture", "tpu/v6e_4chip_inference.xplane.pb", "gpu/mi300_jax_conv.xplane.pb"],
)
def test_each_node_of_the_scope_tree_sums_the_rows_on_its_path(profile: str) -> None:
    """scope_tree adds each row where it ends and each node its children's sums: every node
    has the time, occurrences, passes and heaviest source line of the rows whose path
    (tree_path) runs through it, summed here one row and one node at a time."""
    path = CPU_FIXTURE if profile == "cpu_fixture" else shared_profile(profile)
    loaded = load(path)
    data = sc.scopes(loaded)
    times = sc.scope_time(loaded)
    passes = data.table.strings("pass").tolist()
    sources = data.table.strings("source").tolist()
    expected: dict[tuple[str, ...], dict[str, Any]] = {}
    for row in range(data.n):
        if not times.occurrences[row]:
            continue
        levels, leaf = sc.tree_path(data, row)
        keys = [levels[:depth] for depth in range(len(levels) + 1)]
        keys += [(*levels, leaf)] if leaf else []
        for key in keys:
            node = expected.setdefault(key, {"ps": 0, "count": 0, "passes": {}, "sources": {}})
            node["ps"] += int(times.time_ps[row])
            node["count"] += int(times.occurrences[row])
            node["passes"][passes[row]] = node["passes"].get(passes[row], 0) + times.time_ps[row]
            if sources[row]:
                node["sources"][sources[row]] = node["sources"].get(sources[row], 0)
                node["sources"][sources[row]] += int(times.time_ps[row])
    seen = 0

    def check(node: dict[str, Any], key: tuple[str, ...]) -> None:
        nonlocal seen
        seen += 1
        want = expected[key]
        assert (node["time_ps"], node["occurrences"]) == (want["ps"], want["count"]), key
        for name, ps in want["passes"].items():
            assert node["passes"][name] == pytest.approx(ps / times.windows / 1e9), key
        heaviest = max(want["sources"].items(), key=lambda kv: (kv[1], kv[0]), default=("",))
        assert node["source"] == heaviest[0], key
        for child in node["children"]:
            check(child, (*key, child["name"]))

    check(sc.scope_tree(loaded), ())
    assert seen == len(expected) > 1
