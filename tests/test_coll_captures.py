"""The coll_* captures (real 8-device JAX jobs, fixtures/make_coll_fixtures.py) against a
per-device recomputation from their raw events (tests/_coll_truth.py)."""

from __future__ import annotations

import functools
from typing import Any

import pytest

import tpuperf
from tests._coll_truth import DATA, load

CAPTURES = ("coll_dp", "coll_fsdp", "coll_zero3", "coll_straggler", "coll_heavy", "coll_compute")


@functools.cache
def _report(name: str) -> dict[str, Any]:
    report = tpuperf.analyze(tpuperf.load(str(DATA / f"{name}.xplane.pb")))
    return report.to_dict()


@pytest.mark.parametrize("name", CAPTURES)
def test_one_timeline_per_device(name: str) -> None:
    truth = load(name)
    profile = tpuperf.load(str(DATA / f"{name}.xplane.pb"))
    assert len(profile.device_tables) == len(truth.devices) == truth.truth["devices"]
    for device in profile.device_tables:
        assert device.ops.n == len(truth.devices[device.device].ops)
    assert _report(name)["summary"]["devices"] == len(truth.devices)


@pytest.mark.parametrize("name", CAPTURES)
def test_time_shares_match_a_per_device_recomputation(name: str) -> None:
    shares = load(name).shares()
    summary = _report(name)["summary"]
    assert summary["compute_pct"] == pytest.approx(shares["compute"], abs=2.0)
    assert summary["exposed_collective_pct"] == pytest.approx(shares["exposed_collective"], abs=2.0)
    assert summary["idle_pct"] == pytest.approx(shares["idle"], abs=2.0)


def _collective_rows(name: str) -> dict[str, dict[str, Any]]:
    table = _report(name)["analyzers"]["collectives"]["tables"]["collectives"]
    return {row[0]: dict(zip(table["columns"], row, strict=True)) for row in table["rows"]}


@pytest.mark.parametrize("name", CAPTURES)
def test_every_compiled_collective_is_found_with_bytes_and_group(name: str) -> None:
    """Each collective of the compiled HLO (.lower().compile().as_text(), parsed by the
    capture script) is a row, with the HLO's result bytes and replica-group size, run once
    per step on every device as the raw events show."""
    truth = load(name)
    rows = _collective_rows(name)
    assert set(rows) == set(truth.truth["collectives"])
    for op, fact in truth.truth["collectives"].items():
        row = rows[op]
        assert row["kind"] == fact["opcode"].removesuffix("-start")
        assert row["bytes"] == fact["bytes"]
        assert row["group_size"] == fact["group_size"]
        runs = sum(
            1
            for device in truth.devices.values()
            for start, _, hlo in device.ops
            if hlo == op
            and any(truth.steps[s][0] <= start < truth.steps[s][1] for s in truth.selected)
        )
        assert row["count_per_step"] == pytest.approx(
            runs / (len(truth.selected) * len(truth.devices))
        )


@pytest.mark.parametrize("name", CAPTURES)
def test_waiting_is_the_rendezvous_time_inside_each_collective(name: str) -> None:
    truth = load(name)
    windows = len(truth.selected) * len(truth.devices)
    waited = 0
    for device in truth.devices.values():
        for start, end in device.waits:
            if any(truth.steps[s][0] <= start < truth.steps[s][1] for s in truth.selected):
                # Only the waits of ops that start in a selected step count; a wait inside
                # an op that starts before the step is the op's, not the step's.
                owner = next(s for s, e, _ in device.ops if s <= start and end <= e)
                if any(truth.steps[s][0] <= owner < truth.steps[s][1] for s in truth.selected):
                    waited += end - start
    metrics = _report(name)["analyzers"]["collectives"]["metrics"]
    assert metrics["wait_source"] == "rendezvous"
    assert metrics["wait_ms_per_step"] == pytest.approx(waited / windows / 1e9, rel=1e-6)
    rows = _collective_rows(name)
    for row in rows.values():
        assert row["wait_ms"] + row["transfer_ms"] == pytest.approx(row["ms_per_step"])


def test_the_slow_device_is_named_straggler_first() -> None:
    truth = load("coll_straggler")
    slow = truth.truth["slow_device"]
    counts = truth.last_arrivals("all-reduce")
    assert max(counts, key=lambda d: counts[d]) == slow  # the raw events agree
    report = _report("coll_straggler")
    top = report["recommendations"][0]
    assert top["kind"] in ("straggler", "collective_wait")
    assert f"device:{slow} " in top["title"]
    waits = next(r for r in report["recommendations"] if r["kind"] == "collective_wait")
    assert waits["title"].startswith("Straggler at collectives")
    assert waits["evidence"]["values"]["last_arriver"].endswith(f"device:{slow}")
    last = report["analyzers"]["collectives"]["metrics"]["last_arriver"]
    assert last["device"].endswith(f"device:{slow}")
    assert last["count"] == counts[slow] and last["of"] == sum(counts.values())
    # What it runs more of: its extra matmuls (the cond branch), by name.
    assert "runs more of" in waits["evidence"]["text"]


@pytest.mark.parametrize("name", CAPTURES)
def test_collective_advice_first_only_where_collectives_dominate(name: str) -> None:
    shares = load(name).shares()
    report = _report(name)
    top = report["recommendations"][0]
    if top["analyzer"] == "collectives" and top["kind"] != "collective_wait":
        assert shares["exposed_collective"] > max(shares["compute"], shares["idle"])
    if top["kind"] == "collective_wait":  # a straggler: the named device is late every time
        assert top["title"].startswith("Straggler")
    if name == "coll_compute":
        assert shares["compute"] > shares["exposed_collective"]
        assert top["analyzer"] != "collectives"


@pytest.mark.parametrize("name", CAPTURES)
def test_overlap_advice_only_with_compute_to_hide_behind(name: str) -> None:
    shares = load(name).shares()
    report = _report(name)
    step_ms = report["summary"]["step_time_ms"]["mean"]
    for rec in report["recommendations"]:
        if rec["kind"] == "exposed_collective":
            hideable = rec["evidence"]["values"]["hideable_ms_per_step"]
            assert hideable <= shares["compute"] / 100 * step_ms * 1.05 + 1e-9


def test_fsdp_all_reduce_then_slice_asks_for_a_reduce_scatter() -> None:
    report = _report("coll_fsdp")
    avoidable = [r for r in report["recommendations"] if r["kind"] == "avoidable_collective"]
    assert [r["evidence"]["ops"] for r in avoidable] == [["all-reduce.6"]]
    row = _collective_rows("coll_fsdp")["all-reduce.6"]
    assert avoidable[0]["est_savings_ms"] <= row["ms_per_step"] / 2


def test_zero3_shard_map_collectives_are_collectives() -> None:
    """shard_map's all_gather.N / reduce_scatter.N are collectives, not compute."""
    shares = load("coll_zero3").shares()
    summary = _report("coll_zero3")["summary"]
    assert shares["exposed_collective"] > 40
    assert summary["exposed_collective_pct"] == pytest.approx(shares["exposed_collective"], abs=2)


@pytest.mark.parametrize(
    ("name", "op"), [("coll_dp", "all-reduce.6"), ("coll_straggler", "all-reduce")]
)
def test_gradient_all_reduce_is_backward(name: str, op: str) -> None:
    """The gradient all-reduce of a backward pass is filed under backward: XLA's combined one
    (under transpose) and a pmean written after jax.grad in shard_map (no transpose in its
    scope, the optimizer after it)."""
    profile = tpuperf.load(str(DATA / f"{name}.xplane.pb"))
    scopes = profile.scopes
    row = scopes[scopes["op"] == op].iloc[0]
    assert row["pass"] == "backward"


def test_devices_that_cannot_be_told_apart_are_one_timeline_with_a_warning(tmp_path) -> None:
    """Without device_ordinal stats the ops of the 8 devices stay one device 0, and the
    profile says so."""
    from tpuperf._xspace_schema import XSpace

    space = XSpace.FromString((DATA / "coll_dp.xplane.pb").read_bytes())
    for plane in space.planes:
        ids = [k for k, v in plane.stat_metadata.items() if v.name == "device_ordinal"]
        for line in plane.lines:
            for event in line.events:
                keep = [s for s in event.stats if s.metadata_id not in ids]
                del event.stats[:]
                event.stats.extend(keep)
    path = tmp_path / "merged.xplane.pb"
    path.write_bytes(space.SerializeToString())
    profile = tpuperf.load(str(path))
    assert [d.device for d in profile.device_tables] == [0]
    assert any("carry no device_ordinal" in w and "8 CPU devices" in w for w in profile.warnings)


def test_waits_and_devices_survive_the_cache(tmp_path) -> None:
    """A cached profile (Parquet) gives the same devices, waits and collective table."""
    from tests.test_cache import assert_same_profile
    from tpuperf import cache as cache_mod
    from tpuperf.cache import Cache

    path = DATA / "coll_straggler.xplane.pb"
    cache = Cache(tmp_path)
    expected = tpuperf.load(str(path))
    cache_mod.load(str(path), cache=cache)
    warm = cache_mod.load(str(path), cache=cache)
    assert len(expected.waits) > 0
    assert_same_profile(warm, expected)
    assert warm.hlo_protos == expected.hlo_protos and expected.hlo_protos
    table = tpuperf.analyze(warm).to_dict()["analyzers"]["collectives"]["tables"]
    assert (
        table["collectives"]
        == _report("coll_straggler")["analyzers"]["collectives"]["tables"]["collectives"]
    )
