"""XProf's `check_host_boundness` quantities (tpuperf.hostview.xprof_host_boundness) on the
generated host-bound TPU run: against the generator's truth, and number by number against
`xprof check_host_boundness` (XProf 2.24.2) run on the same file when xprof is installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tpuperf.analyzers.base import AnalysisConfig

import tpuperf
from fixtures.generate import generate_tpu_counters, write_run
from tests.conftest import shared_profile, xprof_tool
from tpuperf import hostview, xprof_compat, xspace


@pytest.fixture(scope="module")
def run(tmp_path_factory):  # type: ignore[no-untyped-def]
    logdir = tmp_path_factory.mktemp("boundness")
    run_dir, truth = write_run("host_bound", logdir, run_name="hb")
    return run_dir, truth


def test_quantities_equal_the_generators_truth(run) -> None:  # type: ignore[no-untyped-def]
    run_dir, truth = run
    ours = hostview.xprof_host_boundness(tpuperf.load(run_dir))
    assert ours is not None
    n = len(truth.step_time_ps)
    average_ms = round(sum(truth.step_time_ps) / n / 1e9, 2)
    busy_ms = sum(d.busy_ps for d in truth.devices) / len(truth.devices) / 1e9
    collective_ms = sum(d.collective_ps for d in truth.devices) / len(truth.devices) / 1e9
    assert ours["number_of_steps"] == n
    assert ours["core_count"] == len(truth.devices)
    assert ours["steptime_ms_average"] == average_ms
    assert ours["total_duration_ms"] == pytest.approx(average_ms * n)
    # The generated ops do not nest: their total is the busy time; collectives are ICI.
    assert ours["scaled_ici_time_ms"] == pytest.approx(collective_ms, rel=1e-9)
    assert ours["scaled_compute_time_ms"] == pytest.approx(busy_ms - collective_ms, rel=1e-9)
    assert ours["scaled_hbm_time_ms"] == 0.0
    idle_ms = average_ms * n - busy_ms
    assert ours["pure_idle_time_ms"] == pytest.approx(idle_ms, rel=1e-9)
    assert ours["xprof_idle_time_ratio_pct"] == pytest.approx(100 * idle_ms / (average_ms * n))
    # XProf's ratio is over its rounded step average; the truth's idle share, 57.25%, is near.
    assert ours["xprof_idle_time_ratio_pct"] == pytest.approx(truth.idle_pct, abs=0.05)
    assert ours["idle_above_threshold"] is True


def test_quantities_equal_xprof_check_host_boundness(run) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = run
    xprof = xprof_tool("check_host_boundness", run_dir)
    ours = hostview.xprof_host_boundness(tpuperf.load(run_dir))
    assert ours is not None
    metrics = xprof["metrics"]
    assert metrics["number_of_steps"] == ours["number_of_steps"]
    assert metrics["core_count"] == ours["core_count"]
    # XProf rounds its output to 2 decimals (the ratio of idle to active time to 4).
    for field in (
        "total_duration_ms",
        "scaled_compute_time_ms",
        "scaled_hbm_time_ms",
        "scaled_ici_time_ms",
        "pure_idle_time_ms",
        "equivalent_idle_chips",
    ):
        assert metrics[field] == round(ours[field], 2), field
    assert metrics["idle_time_ratio_percent"] == round(ours["xprof_idle_time_ratio_pct"], 2)
    assert metrics["idle_to_active_compute_ratio"] == round(ours["idle_to_active_compute_ratio"], 4)
    assert metrics["scaled_barrier_time_ms"] == 0.0
    # XProf's tool reads the overview's duty cycle as printed, to one decimal.
    assert metrics["tpu_duty_cycle_percent"] == round(ours["tpu_duty_cycle_percent"], 1)
    # Idle is over XProf's 10%, but HOST_BOUND also needs MXU idleness over 70% from TPU
    # hardware counters, which a profile without them reads as 0%.
    assert ours["idle_above_threshold"]
    assert metrics["mxu_idleness_percent"] == 0.0
    assert ours["mxu_idleness_percent"] is None
    assert xprof["status"] == ours["status"] == "NOT_HOST_BOUND"


def test_the_host_document_carries_them(run) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = run
    profile = tpuperf.load(run_dir)
    document = hostview.report(profile, AnalysisConfig(warmup_steps=0))
    assert document["xprof_host_boundness"] == pytest.approx(hostview.xprof_host_boundness(profile))


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        value |= (data[pos] & 0x7F) << shift
        shift += 7
        pos += 1
        if data[pos - 1] < 0x80:
            return value, pos


def _fields(data: bytes) -> dict[int, list[int | bytes]]:
    """A protobuf message's varint and length-delimited fields by number."""
    found: dict[int, list[int | bytes]] = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        if key & 7 == 0:
            value, pos = _varint(data, pos)
            found.setdefault(key >> 3, []).append(value)
        elif key & 7 == 2:
            length, pos = _varint(data, pos)
            found.setdefault(key >> 3, []).append(data[pos : pos + length])
            pos += length
        else:
            pos += 8 if key & 7 == 1 else 4
    return found


def _xprof_overview(path: Path) -> tuple[str, int, int]:
    """XProf's overview duty cycle as printed and its op stats' device busy and idle time
    (OpStats.device_op_metrics_db = 2: OpMetricsDb.busy_time_ps = 15, idle_time_ps = 14, from
    the op stats XProf caches beside the file)."""
    raw_to_tool_data = pytest.importorskip(
        "xprof.convert.raw_to_tool_data", reason="xprof (the dev extra) is not installed"
    )
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "overview_page", {})
    printed = next(
        t["p"]["device_duty_cycle_percent"]
        for t in json.loads(data)
        if isinstance(t, dict) and "device_duty_cycle_percent" in t.get("p", {})
    )
    (cache,) = path.parent.glob("*.op_stats*")
    device = _fields(_fields(cache.read_bytes())[2][0])  # type: ignore[arg-type]
    return printed, device[15][0], device[14][0]  # type: ignore[return-value]


def test_duty_cycle_equals_xprof(run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = run
    (source,) = run_dir.glob("*.xplane.pb")
    space = xspace.decode(source.read_bytes())
    duty = xprof_compat.duty_cycle(space)
    assert duty is not None
    # Recorded from XProf 2.24.2 on this file: busy and idle of its op stats, 46.2% printed.
    # The generator's core details are empty, which XProf reads as chip 0 for all four cores:
    # their busy time is one union (14.776 ms; each core alone is busy 14.488 ms, which over
    # the span, 31.978 ms, would be 45.31%).
    assert (duty["busy_time_ps"], duty["idle_time_ps"]) == (14776267761, 17201736862)
    assert f"{duty['duty_cycle_percent']:.1f}%" == "46.2%"
    ours = hostview.xprof_host_boundness(tpuperf.load(run_dir))
    assert ours is not None and ours["tpu_duty_cycle_percent"] == duty["duty_cycle_percent"]
    copy = tmp_path / "hb" / source.name
    copy.parent.mkdir()
    copy.write_bytes(source.read_bytes())
    printed, busy, idle = _xprof_overview(copy)
    assert (busy, idle) == (duty["busy_time_ps"], duty["idle_time_ps"])
    assert printed == f"{duty['duty_cycle_percent']:.1f}%"


def test_v6e_duty_cycle_equals_xprof(tmp_path) -> None:  # type: ignore[no-untyped-def]
    source = shared_profile("tpu/v6e_4chip_inference.xplane.pb")
    duty = xprof_compat.duty_cycle(xspace.decode(source.read_bytes()))
    assert duty is not None
    # shared/profiles/README.md: XProf 2.24.2's overview reports a duty cycle of 86.5%.
    assert f"{duty['duty_cycle_percent']:.1f}%" == "86.5%"
    copy = tmp_path / "v6e" / source.name
    copy.parent.mkdir()
    copy.write_bytes(source.read_bytes())
    printed, busy, idle = _xprof_overview(copy)
    assert (busy, idle) == (duty["busy_time_ps"], duty["idle_time_ps"])
    assert printed == "86.5%"


def test_readme_states_the_duty_cycles(run) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import REPO

    run_dir, _ = run
    (source,) = run_dir.glob("*.xplane.pb")
    duty = xprof_compat.duty_cycle(xspace.decode(source.read_bytes()))
    v6e = xprof_compat.duty_cycle(
        xspace.decode(shared_profile("tpu/v6e_4chip_inference.xplane.pb").read_bytes())
    )
    assert duty is not None and v6e is not None
    readme = " ".join((REPO / "README.md").read_text().split())
    section = readme[readme.index("## Host: `tpuperf host`") :]
    assert f"generated run ({duty['duty_cycle_percent']:.1f}%;" in section
    assert f"v6e profile ({v6e['duty_cycle_percent']:.1f}%)" in section


_COUNTER_FIELDS = (
    "mxu_idleness_percent",
    "hbm_bandwidth_utilization_percent",
    "ici_read_utilization_percent",
    "ici_write_utilization_percent",
)


@pytest.fixture(scope="module")
def counters_run(tmp_path_factory):  # type: ignore[no-untyped-def]
    generated = generate_tpu_counters()
    host, data = next(iter(generated.xspaces.items()))
    run_dir = tmp_path_factory.mktemp("counters") / "counters"
    run_dir.mkdir()
    (run_dir / f"{host}.xplane.pb").write_bytes(data)
    return run_dir, generated.truth.notes["counters"]


def test_counters_against_the_generators_samples(counters_run) -> None:  # type: ignore[no-untyped-def]
    run_dir, samples = counters_run
    ours = hostview.xprof_host_boundness(tpuperf.load(run_dir))
    assert ours is not None
    # Cycle-weighted over the samples: cycles with no MXU busy over all cycles.
    idle = sum(s["mxu_busy_0"] for s in samples) / sum(s["cycles"] for s in samples)
    assert ours["mxu_idleness_percent"] == pytest.approx(100 * idle)
    # ICI read over write: flits in the same ratio (same bytes per flit and peak).
    ratio = sum(s["ici_read_flits"] for s in samples) / sum(s["ici_write_flits"] for s in samples)
    assert ours["ici_read_utilization_percent"] == pytest.approx(
        ratio * ours["ici_write_utilization_percent"]
    )
    assert ours["status"] == "HOST_BOUND"


def test_host_bound_equals_xprof_check_host_boundness(counters_run) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = counters_run
    xprof = xprof_tool("check_host_boundness", run_dir)
    ours = hostview.xprof_host_boundness(tpuperf.load(run_dir))
    assert ours is not None
    assert xprof["status"] == ours["status"] == "HOST_BOUND"
    for field in _COUNTER_FIELDS:
        assert xprof["metrics"][field] == round(ours[field], 2), field
    assert xprof["metrics"]["idle_time_ratio_percent"] == round(
        ours["xprof_idle_time_ratio_pct"], 2
    )


def test_readme_states_the_counters(counters_run) -> None:  # type: ignore[no-untyped-def]
    import re

    from tests.conftest import REPO

    run_dir, _ = counters_run
    ours = hostview.xprof_host_boundness(tpuperf.load(run_dir))
    assert ours is not None
    text = (REPO / "README.md").read_text()
    missing = [f for f in ours if not re.search(rf"`{re.escape(f)}[` ]", text)]
    assert not missing, f"README does not document {missing}"
    readme = " ".join(text.split())
    section = readme[readme.index("## Host: `tpuperf host`") :]
    assert (
        f"MXU idleness {ours['mxu_idleness_percent']:.2f}%, "
        f"HBM {ours['hbm_bandwidth_utilization_percent']:.2f}%, "
        f"ICI read {ours['ici_read_utilization_percent']:.2f}% and "
        f"write {ours['ici_write_utilization_percent']:.2f}%"
    ) in section


def test_duty_cycle_leaves_out_host_transfers_as_xprof_does(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """DCN host transfers ("host send", "host recv" and their dones) are off duty: the
    generated multislice run's busy and idle time equal XProf's op stats, and its busy time is
    less than with every category on duty."""
    from fixtures.generate import generate_megascale

    data, _ = generate_megascale(steps=3, devices=2)
    duty = xprof_compat.duty_cycle(xspace.decode(data))
    assert duty is not None
    monkeypatch.setattr(xprof_compat, "_OFF_DUTY", frozenset())
    every_op = xprof_compat.duty_cycle(xspace.decode(data))
    assert every_op is not None and 0 < duty["busy_time_ps"] < every_op["busy_time_ps"]
    path = tmp_path / "dcn" / "host.xplane.pb"
    path.parent.mkdir()
    path.write_bytes(data)
    _, busy, idle = _xprof_overview(path)
    assert (busy, idle) == (duty["busy_time_ps"], duty["idle_time_ps"])
