"""Megascale (DCN) collectives against the generator's truth and XProf's definitions
(openxla/xprof xprof/convert/xspace_to_dcn_slack_analysis.cc, process_megascale_dcn.cc)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import tpuperf
from fixtures.generate import generate_megascale

MI300 = (
    Path(__file__).parent.parent.parent / "shared/profiles/gpu/mi300_jax_te_fused_attn.xplane.pb"
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    data, truth = generate_megascale(steps=6, devices=2)
    path = tmp_path_factory.mktemp("mega") / "megascale.xplane.pb"
    path.write_bytes(data)
    report = tpuperf.analyze(str(path), warmup=0, analyzers=["collectives"])
    return report, truth


def _result(report):
    return report.results["collectives"]


def test_table_matches_the_generated_truth(run) -> None:
    report, truth = run
    table = _result(report).frame("megascale").set_index("rendezvous")
    assert sorted(table.index) == sorted(truth.occurrences)
    for rdv, n in truth.occurrences.items():
        row = table.loc[rdv]
        slack = sum(truth.slack_ps[rdv]) / n
        assert row["occurrences"] == n
        assert row["transfer_type"] == truth.transfer_type[rdv]
        assert row["slack_ms"] == pytest.approx(slack / 1e9)
        assert row["observed_ms"] == pytest.approx(sum(truth.observed_ps[rdv]) / n / 1e9)
        assert row["stall_ms"] == pytest.approx(sum(truth.stall_ps[rdv]) / n / 1e9)
        assert row["total_stall_ms"] == pytest.approx(sum(truth.stall_ps[rdv]) / 1e9)
        assert row["bytes"] == pytest.approx(truth.network_bytes[rdv])
        # XProf: bytes / slack_us * 8e-9 / 1e-6, Gbit/s.
        assert row["required_gbps"] == pytest.approx(
            truth.network_bytes[rdv] / (slack / 1e6) * 8e-9 / 1e-6
        )


def test_slack_excludes_the_other_collectives_ops(run) -> None:
    """XProf's slack subtracts every DCN op that runs between a send and its recv-done, of
    any rendezvous: the ppermute's slack also loses the all-reduce's send-done/recv-done."""
    report, truth = run
    row = _result(report).frame("megascale").set_index("rendezvous").loc["dcn_ppermute"]
    n = truth.occurrences["dcn_ppermute"]
    # Own ops only: observed less send.2 (8), recv.2 (4), send-done.2 (6), recv-done.2 (12 us).
    own_only_ps = sum(truth.observed_ps["dcn_ppermute"]) / n - 30 * 10**6
    # The all-reduce's dones between them: send-done.1 (20 us) and recv-done.1 (150 - 30d us).
    others_ps = (20 + (150 + 120) / 2) * 10**6
    assert row["slack_ms"] == pytest.approx((own_only_ps - others_ps) / 1e9)
    assert row["slack_ms"] == pytest.approx(0.42)  # fusion.2 (300 + 40d us) and fusion.3 (100)


def test_stall_advice_when_dcn_stalls_dominate(run) -> None:
    report, truth = run
    result = _result(report)
    metrics = result.metrics["megascale"]
    per_step = sum(sum(v) for v in truth.stall_ps.values()) / (6 * 2) / 1e9
    assert metrics["stall_ms_per_step"] == pytest.approx(per_step)
    assert metrics["stall_pct"] == pytest.approx(100 * per_step * 1e9 / truth.step_ps)
    rec = next(r for r in report.recommendations if r.kind == "dcn_stall")
    assert rec.values["rendezvous"] == "dcn_all_reduce"  # the most total stall
    # The saving claimed is the send-done/recv-done part of the stall: (20 + 12 + 6) us + the
    # all-reduce's recv-done, 150 us on device 0 and 120 us on device 1.
    assert rec.est_savings_ms == pytest.approx((20 + 6 + 12 + 135) / 1000)


def _xprof_megascale(path: Path) -> list[dict[str, object]]:
    """XProf's Megascale Stats rows for one XSpace (its ``megascale_stats`` converter; the
    xprof CLI has no command for it). It writes its cache beside the file: pass a copy."""
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:
        pytest.skip("xprof is not installed")
    data, _ = raw_to_tool_data.xspace_to_tool_data(
        [str(path)], "megascale_stats", {"host": path.name.split(".")[0]}
    )
    if not data:
        pytest.skip("xprof's megascale_stats converter did not answer")
    table = json.loads(data)[0]
    ids = [c["id"] for c in table["cols"]]
    return [dict(zip(ids, [c["v"] for c in row["c"]], strict=True)) for row in table["rows"]]


def test_no_megascale_table_without_dcn_transfers(tmp_path: Path) -> None:
    """mi300_jax_te_fused_attn has a '/device:CUSTOM:Megascale Trace' plane with no events:
    no table, no metrics, and XProf has no rows for it either."""
    if not MI300.exists():
        pytest.skip("real profiles not present")
    result = _result(tpuperf.analyze(str(MI300), analyzers=["collectives"]))
    assert "megascale" not in result.tables
    assert "megascale" not in result.metrics
    copy = tmp_path / MI300.name
    shutil.copyfile(MI300, copy)
    assert _xprof_megascale(copy) == []


def test_matches_xprof_megascale_stats_number_by_number(tmp_path: Path) -> None:
    """XProf's Megascale Stats on the same generated file (one device: XProf reads TPU 0)."""
    data, truth = generate_megascale(steps=6, devices=1)
    path = tmp_path / "megascale-host.xplane.pb"
    path.write_bytes(data)
    xprof = {r["rendezvous_name"]: r for r in _xprof_megascale(path)}
    assert sorted(xprof) == sorted(truth.occurrences)
    report = tpuperf.analyze(str(path), warmup=0, analyzers=["collectives"])
    ours = _result(report).frame("megascale").set_index("rendezvous")
    for rdv, x in xprof.items():
        row = ours.loc[rdv]
        assert row["send_op"] == x["send_op_name"]
        assert row["recv_op"] == x["recv_op_name"]
        assert row["transfer_type"] == x["transfer_type"]
        assert row["occurrences"] == x["occurrences"]
        assert row["slack_ms"] == pytest.approx(x["slack_time"])
        assert row["observed_ms"] == pytest.approx(x["observed_duration"])
        assert row["stall_ms"] == pytest.approx(x["stall_duration"])
        assert row["total_stall_ms"] == pytest.approx(x["total_stall"])
        assert row["bytes"] == pytest.approx(x["net_tx_bytes"])
        assert row["required_gbps"] == pytest.approx(x["required_bandwidth"])


def test_megascale_fields_are_documented(run) -> None:
    report, _ = run
    result = _result(report)
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    section = readme[readme.index("## Collectives") : readme.index("## Host")]
    for name in list(result.frame("megascale").columns) + list(result.metrics["megascale"]):
        assert f"`{name}`" in section, name
    assert "`dcn_stall`" in section


def test_ops_by_collective_names_the_dcn_collectives(tmp_path: Path, capsys) -> None:
    from tpuperf.cli import main

    data, truth = generate_megascale(steps=3, devices=1)
    path = tmp_path / "megascale.xplane.pb"
    path.write_bytes(data)
    assert main(["ops", str(path), "--by", "collective"]) == 0
    err = capsys.readouterr().err
    assert f"{len(truth.occurrences)} megascale (DCN) collective(s)" in err
    assert all(name in err for name in truth.occurrences)
    if MI300.exists():
        assert main(["ops", str(MI300), "--by", "collective"]) == 0
        assert "megascale" not in capsys.readouterr().err


def test_an_fp8_buffer_has_one_byte_an_element_as_collectives_size_it() -> None:
    """The recv-done buffer of an fp8 transfer: 1 byte an element, as the collectives' sizes
    (tpuperf.hlo_collectives) count it; it read as 0 bytes, so its bandwidth was 0."""
    from tpuperf import megascale
    from tpuperf.hlo_collectives import text_collective

    text = "%recv-done.1 = (f8e4m3fn[1024,8]{1,0}, token[]) recv-done(%recv.1), channel_id=3"
    assert megascale.result_bytes(text) == 1024 * 8
    mixed = "%recv-done.2 = (f8e5m2[16]{0}, bf16[16]{0}, token[]) recv-done(%recv.2)"
    assert megascale.result_bytes(mixed) == 16 + 16 * 2
    gathered = "%all-gather.1 = f8e4m3fn[1024,8]{1,0} all-gather(f8e4m3fn[128,8]{1,0} %p)"
    assert text_collective(gathered)[0] == megascale.result_bytes(
        "%recv-done.3 = (f8e4m3fn[1024,8]{1,0}, token[]) recv-done(%recv.3)"
    )
