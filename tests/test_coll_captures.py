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
