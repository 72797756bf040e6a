"""Collective recognition and arithmetic: opcodes and names, HLO shapes and replica groups in
every printed form, NCCL's bus factors, and `ops --by collective`."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from tpuperf.analyzers.collectives import bus_factor

from tests.conftest import REPO
from tpuperf.cli import main
from tpuperf.hlo_collectives import EVERY_DEVICE, text_collective
from tpuperf.schema import KIND_COLLECTIVE, KIND_COMPUTE
from tpuperf.tables import classify_op

COLL_FSDP = REPO / "fixtures" / "data" / "coll_fsdp.xplane.pb"


@pytest.mark.parametrize(
    ("name", "opcode", "want"),
    [
        ("all-reduce.6", "", ("all-reduce", "")),
        ("all_gather.3", "", ("all-gather", "")),
        ("reduce_scatter.7", "", ("reduce-scatter", "")),
        ("psum_invariant.77", "", ("all-reduce", "")),
        ("psum", "", ("all-reduce", "")),
        ("ppermute.2", "", ("collective-permute", "")),
        ("all-gather-start.1", "", ("all-gather", "start")),
        ("all-gather-done.1", "", ("all-gather", "done")),
        ("collective-permute-done", "", ("collective-permute", "done")),
        # The opcode wins: a renamed instruction is still what its opcode says.
        ("my_sum.1", "all-reduce", ("all-reduce", "")),
        ("x.2", "all-gather-start", ("all-gather", "start")),
    ],
)
def test_collectives_in_every_spelling(name: str, opcode: str, want: tuple[str, str]) -> None:
    kind, collective, role = classify_op(name, opcode)
    assert (kind, collective, role) == (KIND_COLLECTIVE, *want)


@pytest.mark.parametrize("name", ["fusion.3", "dot.1", "all_reduce_fusion_like", "copy.2"])
def test_compute_stays_compute(name: str) -> None:
    assert classify_op(name)[0] == KIND_COMPUTE


@pytest.mark.parametrize(
    ("text", "nbytes", "group"),
    [
        (
            "%all-gather = f32[256,512]{1,0} all-gather(%p), channel_id=1, "
            "replica_groups=mesh['axis_0'=8,'axis_1'=1] {'axis_0'}, dimensions={0}",
            256 * 512 * 4,
            8,
        ),
        (
            "%ar = (f32[512]{0}, bf16[512,256]{1,0}) all-reduce(%a, %b), replica_groups=[2,4]<=[8]",
            512 * 4 + 512 * 256 * 2,
            4,
        ),
        (
            "%ag = (bf16[8]{0}, bf16[32]{0}) all-gather-start(%a), "
            "replica_groups={{0,1,2,3},{4,5,6,7}}",
            32 * 2,
            4,
        ),
        (
            "%cp = f32[8]{0} collective-permute(%a), source_target_pairs={{0,1},{1,2},{2,0}}",
            32,
            3,
        ),
        ("%ar = f32[4]{0} all-reduce(%a), replica_groups={}", 16, EVERY_DEVICE),
        ("%agd = f32[4]{0} all-gather-done(%ags)", 16, None),
    ],
)
def test_bytes_and_group_size_from_hlo_text(text: str, nbytes: int, group: int | None) -> None:
    got_bytes, got_group, _ = text_collective(text)
    assert got_bytes == nbytes
    assert got_group == group


@pytest.mark.parametrize(
    ("kind", "n", "factor"),
    [
        ("all-reduce", 8, 2 * 7 / 8),
        ("all-gather", 8, 7 / 8),
        ("reduce-scatter", 4, 3 / 4),
        ("all-to-all", 2, 1 / 2),
        ("collective-permute", 8, 1.0),
        ("all-reduce", 1, 1.0),
    ],
)
def test_bus_factors_are_nccl_tests(kind: str, n: int, factor: float) -> None:
    assert bus_factor(kind, n) == pytest.approx(factor)


def test_ops_by_collective_json_and_table(capsys, monkeypatch) -> None:
    assert main(["ops", str(COLL_FSDP), "--by", "collective", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    truth = json.loads(COLL_FSDP.with_suffix("").with_suffix(".truth.json").read_text())
    assert {r["op"] for r in rows} == set(truth["collectives"])
    for row in rows:
        assert row["busbw_gbps"] == pytest.approx(
            row["algbw_gbps"] * bus_factor(row["kind"], row["group_size"])
        )
    assert rows == sorted(rows, key=lambda r: -r["ms_per_step"])
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["ops", str(COLL_FSDP), "--by", "collective", "--top", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert sum(1 for line in lines if line.startswith(("all-", "all_"))) == 3


def test_collective_table_is_the_report_layers(capsys) -> None:
    # One row per collective op comes from an analysis: the Report layer's collective_table,
    # which the op-table module (below the analysis) does not call; it points there instead.
    import tpuperf
    from tpuperf.analysis import collective_table
    from tpuperf.errors import UsageError
    from tpuperf.opstats import aggregate_table

    profile = tpuperf.load(COLL_FSDP)
    table = collective_table(profile, top=2)
    truth = json.loads(COLL_FSDP.with_suffix("").with_suffix(".truth.json").read_text())
    assert table.n == 2 and set(table.strings("op").tolist()) <= set(truth["collectives"])
    assert (
        main(["ops", str(COLL_FSDP), "--by", "collective", "--top", "2", "--format", "json"]) == 0
    )
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["op"] for r in rows] == table.strings("op").tolist()
    with pytest.raises(UsageError, match=r"tpuperf\.analysis\.collective_table"):
        aggregate_table(profile, by="collective")


def test_ops_by_collective_refuses_per_device(capsys) -> None:
    assert main(["ops", str(COLL_FSDP), "--by", "collective", "--per-device"]) == 2
    assert "tpuperf: error: --per-device" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("chip", "link", "gbps"),
    [
        ("TPU v5 lite", "ICI", 400.0),
        ("TPU v5", "ICI", 1200.0),
        ("TPU v6 lite", "ICI", 800.0),
        ("NVIDIA H100 80GB HBM3", "NVLink", 900.0),
        ("Tesla V100-SXM2-16GB", "NVLink", 300.0),
        ("AMD MI300 (gfx942)", "xGMI", 896.0),
    ],
)
def test_interconnect_peaks_per_chip(chip: str, link: str, gbps: float) -> None:
    from tpuperf.roofline import chips

    spec = chips.lookup(chip)
    assert spec is not None
    assert (spec.interconnect, spec.interconnect_gbps) == (link, gbps)
    assert spec.interconnect_per_direction_gbps == gbps / 2
    named = {s.name for s in chips.CHIPS}
    assert set(chips._INTERCONNECTS) <= named  # no entry for a chip the table lacks


def test_async_bandwidth_is_bytes_over_the_start_to_done_windows(tmp_path) -> None:
    """On the generated TPU training scenario (async all-gathers of 64 MiB), each -start row's
    algbw is its bytes times its windows over their total length; busbw applies (n-1)/n."""
    import tpuperf
    from fixtures.generate import write_run

    run = write_run("collective_training", tmp_path, seed=3)[0]
    result = tpuperf.analyze(tpuperf.load(run)).results["collectives"]
    windows = result.frame("async_windows")
    table = result.frame("collectives").set_index("op")
    starts = [op for op in table.index if "-start" in op]
    assert starts
    for op in starts:
        row = table.loc[op]
        mine = windows[windows["op"] == op]
        want = row["bytes"] * len(mine) / mine["dur_ps"].sum() * 1000.0
        assert row["algbw_gbps"] == pytest.approx(want)
        assert row["busbw_gbps"] == pytest.approx(
            want * bus_factor(row["kind"], int(row["group_size"]))
        )


def _hlo_proto() -> bytes:
    """A module whose entry all-reduces a gradient and only slices it (in a fusion), and
    all-gathers one parameter twice; f32 = PrimitiveType 11."""
    from tpuperf import _hlo_schema

    proto = _hlo_schema.HloProto()
    module = proto.hlo_module
    fused = module.computations.add(name="fused_slice", id=2)
    fused.instructions.add(name="p0", opcode="parameter", id=20)
    fused.instructions.add(name="ds", opcode="dynamic-slice", id=21, operand_ids=[20])
    entry = module.computations.add(name="main", id=1)

    def add(name: str, opcode: str, id_: int, operands: list[int], dims: list[int]) -> Any:
        instruction = entry.instructions.add(name=name, opcode=opcode, id=id_, operand_ids=operands)
        instruction.shape.element_type = 11
        instruction.shape.dimensions.extend(dims)
        return instruction

    add("param", "parameter", 10, [], [64])
    add("grad", "fusion", 11, [10], [512])
    reduce = add("all-reduce.1", "all-reduce", 12, [11], [512])
    reduce.replica_groups.add(replica_ids=[0, 1, 2, 3])
    user = add("slice_fusion", "fusion", 13, [12], [128])
    user.called_computation_ids.append(2)
    first = add("all-gather.1", "all-gather", 14, [10], [256])
    first.collective_device_list.iota_replica_group_list.num_replica_groups = 2
    first.collective_device_list.iota_replica_group_list.num_devices_per_group = 4
    add("all-gather.2", "all-gather", 15, [10], [256])
    add("all-reduce.2", "all-reduce", 16, [11], [512])
    add("use", "add", 17, [16, 16], [512])
    return proto.SerializeToString()


def test_hlo_proto_facts_slices_and_repeats() -> None:
    from tpuperf.hlo_collectives import hlo_collectives

    facts = hlo_collectives(_hlo_proto())
    assert set(facts) == {"all-reduce.1", "all-gather.1", "all-gather.2", "all-reduce.2"}
    assert facts["all-reduce.1"].sliced and not facts["all-reduce.2"].sliced
    assert facts["all-reduce.1"].bytes == 512 * 4 and facts["all-reduce.1"].dtype == "f32"
    assert facts["all-reduce.1"].group_size == 4
    assert facts["all-gather.1"].group_size == 4  # iota: 2 groups of 4
    assert facts["all-gather.2"].group_size == EVERY_DEVICE  # no groups: every device
    assert facts["all-gather.1"].operand == facts["all-gather.2"].operand == 10


def test_avoidable_collectives_from_the_hlo() -> None:
    """Two devices, three 1 ms steps: an all-reduce whose result is only sliced (a
    reduce-scatter moves half: saves half its 0.3 ms) and a second all-gather of the same
    parameter (saves its 0.1 ms); their bytes, groups and bandwidth come from the HLO proto."""
    from tests.test_analyzers_synth import build, op
    from tpuperf.analysis import analyze

    per_device = {}
    for device in (0, 1):
        ops = []
        for step in range(3):
            t = step * 1000.0
            ops += [
                op("grad", t, 300),
                op("all-gather.1", t + 300, 100, "collective", "all-gather"),
                op("all-gather.2", t + 400, 100, "collective", "all-gather"),
                op("all-reduce.1", t + 500, 300, "collective", "all-reduce"),
                op("slice_fusion", t + 800, 100),
            ]
        per_device[("host-0", device)] = ops
    profile = build(per_device, steps_us=[(s * 1000.0, s * 1000.0 + 1000.0) for s in range(3)])
    profile.hlo_protos = {"host-0": {"jit_step(1)": _hlo_proto()}}
    result = analyze(profile, analyzers=["collectives"], steps=(None, None)).results["collectives"]
    recs = {tuple(r.ops): r for r in result.recommendations if r.kind == "avoidable_collective"}
    assert set(recs) == {("all-reduce.1",), ("all-gather.1", "all-gather.2")}
    assert recs[("all-reduce.1",)].est_savings_ms == pytest.approx(0.15)
    assert recs[("all-gather.1", "all-gather.2")].est_savings_ms == pytest.approx(0.1)
    table = result.frame("collectives").set_index("op")
    assert table.loc["all-reduce.1", "bytes"] == 512 * 4
    assert table.loc["all-reduce.1", "group_size"] == 4
    # 2048 bytes in 0.3 ms: 6.83e-3 GB/s algbw; busbw x 2(4-1)/4; the v6e link is 400 GB/s
    # per direction.
    algbw = 2048 / 0.3e9 * 1000
    assert table.loc["all-reduce.1", "algbw_gbps"] == pytest.approx(algbw)
    assert table.loc["all-reduce.1", "busbw_gbps"] == pytest.approx(algbw * 1.5)
    assert table.loc["all-reduce.1", "link_peak_pct"] == pytest.approx(100 * algbw * 1.5 / 400)


@pytest.mark.parametrize("which", ["coll_fsdp", "v6e"])
def test_rows_of_a_kind_are_the_rows_whose_kind_it_is(which: str) -> None:
    """collectives._of_kind, which answers from the kinds a device's ops can have where that
    is enough, picks the rows that reading every row's kind picks (CPU: a kind per row, every
    kind on a device; TPU: kinds per metadata row)."""
    from tpuperf.analyzers.collectives import _of_kind

    from tests.conftest import shared_profile
    from tpuperf.config import AnalysisConfig
    from tpuperf.profiles import load
    from tpuperf.timeline import build_timeline

    profile = (
        COLL_FSDP if which == "coll_fsdp" else shared_profile("tpu/v6e_4chip_inference.xplane.pb")
    )
    tl = build_timeline(load(str(profile)), AnalysisConfig())
    seen = set()
    for view in tl.devices:
        kinds = view.ops.strings("kind")
        for rows in (view.selected, np.arange(view.ops.n)):
            for kind in (KIND_COLLECTIVE, KIND_COMPUTE, "no such kind"):
                for keep in (True, False):
                    mask = kinds.take(rows).eq(kind)
                    expected = rows[mask if keep else ~mask]
                    assert _of_kind(view, rows, kind, keep).tolist() == expected.tolist()
                    seen.add((keep, 0 < len(expected) < len(rows)))
    assert (True, True) in seen  # some device with ops of the kind and others
