"""TPU devices in `tpuperf host`: host events placed on each TPU device's clock
(tpuperf.hostview.tpu_clocks), on a generated TPU run whose device clocks drift from the host's
(fixtures.generate.generate_tpu_host_gaps), against the generator's truth."""

from __future__ import annotations

from pathlib import Path

import pytest
from tpuperf.analyzers.base import AnalysisConfig

import tpuperf
from fixtures.generate import TPU_HOST_GAP_DRIFT_PS, generate_tpu_host_gaps
from tpuperf import hostview
from tpuperf.tables import IDENTITY_CLOCK
from tpuperf.timeline import build_timeline


@pytest.fixture(scope="module")
def gap_file(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The generated TPU run's file, and its truth."""
    generated = generate_tpu_host_gaps()
    host, data = next(iter(generated.xspaces.items()))
    path = Path(tmp_path_factory.mktemp("tpu_host_gaps")) / f"{host}.xplane.pb"
    path.write_bytes(data)
    return path, generated.truth.notes["host_gap"]


@pytest.fixture(scope="module")
def run(gap_file):  # type: ignore[no-untyped-def]
    path, truth = gap_file
    return tpuperf.load(path), truth


def test_host_events_meet_the_tpu_devices_idle(run) -> None:  # type: ignore[no-untyped-def]
    profile, truth = run
    document = hostview.report(profile, AnalysisConfig(warmup_steps=0))
    assert document["devices"] == 2
    assert hostview.TPU_NOT_COMPARED not in document["notes"]
    assert document["outside_steps_idle_ms_per_iteration"] == pytest.approx(
        truth["outside_ps"] / 1e9
    )
    # The host's work lies wholly in the devices' idle after each step.
    assert document["explained_ms_per_iteration"] == pytest.approx(truth["gap_ps"] / 1e9)
    rows = {r["name"]: r for r in document["events"] if r["kind"] == "python"}
    assert set(rows) == set(truth["self_ps"])
    for function, self_ps in truth["self_ps"].items():
        assert rows[function]["outside_steps_ms_per_iteration"] == pytest.approx(self_ps / 1e9)
        assert rows[function]["idle_ms_per_iteration"] == pytest.approx(self_ps / 1e9)
        assert rows[function]["where"] == truth["where"][function]
        assert rows[function]["calls_per_iteration"] == 1.0


def test_host_clock_times_alone_would_miss(run) -> None:  # type: ignore[no-untyped-def]
    # The device clocks fall 7 ms further behind the host's every step: laid over the
    # placed ops with their host-clock times, the host's work misses the devices' idle.
    profile, truth = run
    assert truth["outside_ps"] < TPU_HOST_GAP_DRIFT_PS
    tl = build_timeline(profile, AnalysisConfig(warmup_steps=0))
    clocks = {(v.host, v.device): IDENTITY_CLOCK for v in tl.devices}
    found = hostview.activity(tl, clocks)
    assert found is not None
    assert found.explained_ms_per_iteration < 0.5 * truth["gap_ps"] / 1e9


def test_without_clocks_tpu_devices_are_left_out(run) -> None:  # type: ignore[no-untyped-def]
    profile, _ = run
    tl = build_timeline(profile, AnalysisConfig(warmup_steps=0))
    assert hostview.activity(tl) is None


def test_readme_states_the_drift() -> None:
    from tests.conftest import REPO

    readme = " ".join((REPO / "README.md").read_text().split())
    section = readme[readme.index("## Host: `tpuperf host`") :]
    assert f"fall {TPU_HOST_GAP_DRIFT_PS / 1e9:.0f} ms further behind the host's" in section


def test_tpu_clocks_read_no_pandas(gap_file) -> None:  # type: ignore[no-untyped-def]
    """The clocks come from the device tables and the file, not from the pandas frames (which
    the commands never build: building them imports pandas)."""
    import subprocess
    import sys

    path, _ = gap_file
    code = (
        "import sys, tpuperf\n"
        "from tpuperf import hostview\n"
        f"clocks = hostview.tpu_clocks(tpuperf.load({str(path)!r}))\n"
        "print(len(clocks), 'pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", "False"]


def test_the_host_command_reads_no_pandas(gap_file) -> None:  # type: ignore[no-untyped-def]
    """`tpuperf host` on a TPU profile with steps, where it computes XProf's host boundness
    (from the first device's steps) and duty cycle: from the column tables, without pandas
    (which took most of the command's time)."""
    import json

    from tests.conftest import command_imports

    path, _ = gap_file
    code, out, modules = command_imports("host", str(path), "-f", "json", "--no-cache")
    assert code == 0
    boundness = json.loads(out)["xprof_host_boundness"]
    assert boundness["number_of_steps"] > 0 and boundness["tpu_duty_cycle_percent"] > 0
    assert "pandas" not in modules
