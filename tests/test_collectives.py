"""Collective recognition and arithmetic: opcodes and names, HLO shapes and replica groups in
every printed form, NCCL's bus factors, and `ops --by collective`."""

from __future__ import annotations

import json

import pytest
from tpuperf.analyzers.collectives import bus_factor

from tests.conftest import REPO
from tpuperf.cli import main
from tpuperf.schema import KIND_COLLECTIVE, KIND_COMPUTE
from tpuperf.tables import EVERY_DEVICE, classify_op, text_collective

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
