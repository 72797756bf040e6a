"""tpuperf.hostview and the iterations: the real host-bound Flax captures of
fixtures/make_host_fixtures.py against what the script measured with its own clock, and the
V100 TensorFlow profile's input pipeline against XProf's."""

from __future__ import annotations

import json
import re
import statistics

import pytest
from tpuperf.analyzers.base import AnalysisConfig

import tpuperf
from tests.conftest import REPO, shared_profile
from tpuperf import hostview
from tpuperf.analysis import analyze
from tpuperf.cli import main
from tpuperf.timeline import build_timeline

DATA = REPO / "fixtures" / "data"


def _load(name: str) -> tuple[tpuperf.Profile, dict]:  # type: ignore[type-arg]
    truth = json.loads((DATA / f"{name}.truth.json").read_text())
    return tpuperf.load(DATA / f"{name}.xplane.pb"), truth


@pytest.fixture(scope="module")
def markers() -> tuple[tpuperf.Profile, dict]:  # type: ignore[type-arg]
    return _load("host_markers")


@pytest.fixture(scope="module")
def nomarkers() -> tuple[tpuperf.Profile, dict]:  # type: ignore[type-arg]
    return _load("host_nomarkers")


# Warm-up leaves step 0 out; steps 1..n-1 are analysed and step k's iteration runs to step
# k+1's start, so the iterations are those of steps 1..n-2 (the last step has no successor).
# Iteration k holds log_metrics(k) and load_batch(k+1).


def _iterations(truth: dict) -> range:  # type: ignore[type-arg]
    return range(1, truth["steps"] - 1)


def test_iteration_time_is_the_marker_period(markers) -> None:
    profile, truth = markers
    report = analyze(profile)
    periods = [truth["period_ms"][k] for k in _iterations(truth)]
    it = report.summary["iteration_time_ms"]
    assert it["count"] == len(periods)
    assert it["median"] == pytest.approx(statistics.median(periods), rel=0.01)
    assert it["mean"] == pytest.approx(statistics.mean(periods), rel=0.01)
    # The step is the marker's own span; the iteration adds the host's time after it.
    steps = [truth["step_ms"][k] for k in range(1, truth["steps"])]
    assert report.summary["step_time_ms"]["median"] == pytest.approx(
        statistics.median(steps), rel=0.01
    )


def test_outside_steps_is_the_measured_host_gap(markers) -> None:
    profile, truth = markers
    report = analyze(profile)
    gap = statistics.mean(truth["gap_ms"][k] for k in _iterations(truth))
    assert report.summary["outside_steps_ms_per_iteration"] == pytest.approx(gap, rel=0.02)
    parts = report.results["steps"].metrics["breakdown_ms_per_iteration"]
    assert parts["outside_steps"] == pytest.approx(gap, rel=0.02)
    # Nothing runs on the device while the host loads and logs: all of it is idle.
    assert parts["outside_steps_no_op"] == pytest.approx(gap, rel=0.02)
    idle = report.results["idle"].metrics
    assert idle["outside_steps_idle_ms_per_iteration"] == pytest.approx(gap, rel=0.02)


def _named(report) -> dict[str, dict]:  # type: ignore[no-untyped-def,type-arg]
    top = report.recommendations[0]
    assert top.kind == "host_bound"
    return {f["function"]: f for f in top.values["functions"]}


@pytest.mark.parametrize("name", ["host_markers", "host_nomarkers"])
def test_top_recommendation_names_the_loader_and_the_logger(name: str) -> None:
    profile, truth = _load(name)
    report = analyze(profile)
    top = report.recommendations[0]
    named = _named(report)
    assert set(named) >= {"load_batch", "log_metrics"}
    for function in ("load_batch", "log_metrics"):
        where = f"{truth['file']}:{truth['lines'][function]}"
        assert named[function]["where"] == where
        assert where in top.evidence
        assert function in top.title
    iterations = list(_iterations(truth))
    loads = [truth["calls_ms"]["load_batch"][k + 1] for k in iterations]
    logs = [truth["calls_ms"]["log_metrics"][k] for k in iterations]
    # Each function's time per iteration: within 5% of its calls as the script timed them,
    # and of its own events' durations in the profile.
    for function, calls in (("load_batch", loads), ("log_metrics", logs)):
        assert named[function]["ms_per_iteration"] == pytest.approx(
            statistics.mean(calls), rel=0.05
        )
        assert named[function]["ms_per_iteration"] == pytest.approx(
            named[function]["ms_per_call"] * named[function]["calls_per_iteration"], rel=0.05
        )
        assert named[function]["calls_per_iteration"] == 1.0
    # Savings: the idle those functions explain, within 5% of the host gap the script measured.
    gap = statistics.mean(truth["gap_ms"][k] for k in iterations)
    assert top.est_savings_ms == pytest.approx(gap, rel=0.05)
    # The fix of the platform that ran (an XLA:CPU capture: its `cpu` fix) only.
    ((key, text),) = top.fix.items()
    assert key == report.platform.lower() == "cpu"
    assert "prefetch" in text and "asynchronously" in text


def test_without_markers_iterations_are_the_module_periods(nomarkers) -> None:
    profile, truth = nomarkers
    report = analyze(profile)
    assert report.summary["step_source"] == "module_period"
    periods = [truth["period_ms"][k] for k in _iterations(truth)]
    it = report.summary["iteration_time_ms"]
    assert it["count"] == len(periods)
    assert it["median"] == pytest.approx(statistics.median(periods), rel=0.01)
    assert report.summary["step_time_ms"] == it  # periods are their own iterations
    assert report.summary["outside_steps_ms_per_iteration"] == 0.0


def test_host_events_survive_the_cache(markers, tmp_path) -> None:
    from tpuperf import cache

    store = cache.Cache(tmp_path)
    first = cache.load(DATA / "host_markers.xplane.pb", cache=store)
    again = cache.load(DATA / "host_markers.xplane.pb", cache=store)
    profile, _ = markers
    for loaded in (first, again):
        (events,) = loaded.host_events.values()
        (expected,) = profile.host_events.values()
        assert events.n == expected.n
        assert events.array("dur_ps").tolist() == expected.array("dur_ps").tolist()
        assert events.strings("name").tolist() == expected.strings("name").tolist()


def test_python_frames_are_parsed_and_classified() -> None:
    assert hostview.frame_of("$make_host_fixtures.py:67 load_batch") == (
        "make_host_fixtures.py",
        67,
        "load_batch",
    )
    assert hostview.frame_of("$time sleep") is None  # a C function: no file or line
    assert hostview.kind_of("$time sleep") == "python"
    assert hostview.kind_of("PjitFunction(train_step)") == "runtime"
    assert hostview.kind_of("Iterator::Prefetch") == "input"
    assert hostview.kind_of("train") == "traceme"


# The patterns kind_of matched with until it was made ten times faster: what it must still
# decide, name for name.
_INPUT_BEFORE = re.compile(
    r"infeed|HOST_WAIT_INPUT|HostWaitInput|HOST_TO_DEVICE|HostToDevice|Iterator::|"
    r"IteratorGetNext|MultiDeviceIterator|grain|DataLoader|tf\.data",
    re.IGNORECASE,
)
_RUNTIME_BEFORE = re.compile(
    r"^PjitFunction|^ExecuteReplicated|^shard_args|block_until_ready|BlockHostUntilReady|"
    r"BlockUntilReady|Transfer|device_put|BufferFromPyval|CopyToDevice|ToLiteral|Await|"
    r"PjRt|Pjrt|Execute|Thunk|^Wait for|[Dd]ispatch|ThreadpoolListener|[Cc]ompil"
)


def _kind_before(name: str) -> str:
    if name.startswith("$"):
        return "python"
    if _INPUT_BEFORE.search(name):
        return "input"
    return "runtime" if _RUNTIME_BEFORE.search(name) else "traceme"


def test_each_host_event_is_of_the_kind_its_patterns_say() -> None:
    names = [
        "HOST_WAIT_INPUT", "host_wait_input", "HostWAITInput", "INFEED", "GRAIN.batch",
        "my_dataloader", "TF.Data", "multiDeviceIterator", "Iterator::Map", "iterator:map",
        "PjitFunction(f)", "x PjitFunction", "ExecuteReplicated", "shard_args", "a shard_args",
        "Wait for x", "Wait fo", "Waiting for x", "wait for x", "Dispatch", "dispatch", "DISPATCH",
        "Compile", "compile", "COMPILE", "PJRT", "PjRtClient", "thunk", "Thunk", "await",
        "ToLiteral", "toliteral", "$x.py:1 load", "", "train",
    ]  # fmt: skip
    paths = sorted((REPO / "fixtures" / "data").glob("*.xplane.pb"))
    for relative in ["gpu/v100_8gpu_tf_training.xplane.pb", "tpu/v6e_4chip_inference.xplane.pb"]:
        paths.append(shared_profile(relative))
    for path in paths:
        for events in tpuperf.load(path).host_events.values():
            names += events.strings("name").values
    kinds = [hostview.kind_of(name) for name in names]
    assert kinds == [_kind_before(name) for name in names]
    assert set(kinds) == set(hostview.KINDS)  # each kind is decided somewhere


def test_self_time_goes_to_the_innermost_user_frame() -> None:
    import numpy as np

    # outer (user) 0-100 calls inner (user) 10-40 and lib (library) 50-90.
    names = ["$u.py:1 outer", "$u.py:5 inner", "$lib.py:9 helper"]
    start = np.array([0, 10, 50])
    end = np.array([100, 40, 90])
    owner, s, e = hostview._python_segments(names, start, end, {"u.py"})
    spans = sorted(zip(owner, s.tolist(), e.tolist(), strict=True), key=lambda x: x[1])
    assert spans == [(0, 0, 10), (1, 10, 40), (0, 40, 100)]


def test_host_command_json(capsys) -> None:
    assert main(["host", str(DATA / "host_markers.xplane.pb"), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema_version"] == 1
    assert document["events"][0]["name"] == "load_batch"
    assert document["events"][0]["where"] == "make_host_fixtures.py:67"
    tl = build_timeline(tpuperf.load(DATA / "host_markers.xplane.pb"), AnalysisConfig())
    found = hostview.activity(tl)
    assert found is not None
    assert document["idle_ms_per_iteration"] == pytest.approx(found.idle_ms_per_iteration)
    # Idle in the iterations: the idle analyzer's and the host view's are one number.
    idle = analyze(tl.profile).results["idle"].metrics
    assert idle["idle_ms_per_step"] == pytest.approx(document["idle_ms_per_iteration"])
    assert document["input"]["source"] == "loading_code"
    assert document["input"]["classification"] == "highly input-bound"


def test_v100_input_ops_equal_xprof_input_pipeline(tmp_path) -> None:
    path = shared_profile("gpu/v100_8gpu_tf_training.xplane.pb")
    document = hostview.report(tpuperf.load(path), AnalysisConfig(warmup_steps=0))
    ours = {r["op"]: (r["count"], r["total_ms"]) for r in document["input"]["input_ops"]}
    # Recorded from XProf 2.24.2's input_pipeline_analyzer on this file ("Input Op" table).
    assert ours == {
        "Iterator::Prefetch": (2, pytest.approx(13.601878)),
        "Iterator::Prefetch::Generator": (2, pytest.approx(12.977076)),
    }
    assert document["step_time_ms"]["median"] == pytest.approx(21.310352)
    raw_to_tool_data = pytest.importorskip("xprof.convert.raw_to_tool_data")
    copy = tmp_path / path.name
    copy.write_bytes(path.read_bytes())
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], "input_pipeline_analyzer", {})
    tables = json.loads(data)
    ops = next(t for t in tables if any(c.get("id") == "opName" for c in t.get("cols", [])))
    xprof = {row["c"][0]["v"]: (int(row["c"][1]["v"]), row["c"][2]["v"]) for row in ops["rows"]}
    assert set(ours) == set(xprof)
    for op, (count, total_ms) in xprof.items():
        assert ours[op][0] == count
        assert ours[op][1] == pytest.approx(total_ms, rel=1e-6)
    steps = next(t for t in tables if any(c.get("id") == "stepTimeMs" for c in t.get("cols", [])))
    assert float(steps["p"]["steptime_ms_average"]) == pytest.approx(
        document["step_time_ms"]["mean"], abs=0.05
    )


def test_readme_numbers_of_the_flax_capture(markers) -> None:
    # README, Host: "step median 27.4 ms, iteration median 65.5 ms, 37.9 ms outside the steps
    # per iteration, ... load_batch (25.8 ms) and log_metrics (11.9 ms), saving 37.8 ms".
    profile, _ = markers
    report = analyze(profile)
    s = report.summary
    assert round(s["step_time_ms"]["median"], 1) == 27.4
    assert round(s["iteration_time_ms"]["median"], 1) == 65.5
    assert round(s["outside_steps_ms_per_iteration"], 1) == 37.9
    named = _named(report)
    assert round(named["load_batch"]["ms_per_iteration"], 1) == 25.8
    assert round(named["log_metrics"]["ms_per_iteration"], 1) == 11.9
    assert round(report.recommendations[0].est_savings_ms, 1) == 37.8


def test_real_gpu_profiles_in_the_readme() -> None:
    # README, Analyze: the MI300 conv profile's host-bound advice names try_to_block.
    conv = analyze(tpuperf.load(shared_profile("gpu/mi300_jax_conv.xplane.pb")))
    assert conv.summary["steps_analyzed"] == 3
    assert round(conv.summary["iteration_time_ms"]["median"], 2) == 26.76
    host = next(r for r in conv.recommendations if r.kind == "host_bound")
    (first, *_) = host.values["functions"]
    assert (first["function"], first["where"]) == ("try_to_block", "api.py:3165")
    assert round(first["ms_per_iteration"], 1) == 19.7
    assert round(host.values["between_steps_idle_ms_per_iteration"], 1) == 21.2
    gemm = analyze(tpuperf.load(shared_profile("gpu/mi300_jax_gemm.xplane.pb")))
    assert gemm.summary["steps_analyzed"] == 1
    assert round(gemm.summary["step_time_ms"]["median"], 2) == 0.70


def test_generated_host_gaps_against_their_truth(tmp_path) -> None:
    from fixtures.generate import generate_host_gaps

    run = generate_host_gaps(steps=6, devices=2)
    ((host, data),) = run.xspaces.items()
    path = tmp_path / f"{host}.xplane.pb"
    path.write_bytes(data)
    truth = run.truth
    gap = truth.notes["host_gap"]
    report = analyze(tpuperf.load(path))
    # Steps 1..5 analysed (warm-up 1); the last has no successor: iterations of steps 1..4.
    steps_ps = truth.step_time_ps[1:-1]
    it = report.summary["iteration_time_ms"]
    assert it["count"] == len(steps_ps)
    assert it["max"] == pytest.approx((max(steps_ps) + gap["gap_ps"]) / 1e9, abs=1e-9)
    assert it["min"] == pytest.approx((min(steps_ps) + gap["gap_ps"]) / 1e9, abs=1e-9)
    assert report.summary["outside_steps_ms_per_iteration"] == pytest.approx(
        gap["gap_ps"] / 1e9, abs=1e-9
    )
    named = _named(report)
    # Self time of the innermost user frame: decode's time is its own, not load_batch's; the
    # time in time.sleep and NumPy (C functions) is their caller's.
    for function, self_ps in gap["self_ps"].items():
        assert named[function]["ms_per_iteration"] == pytest.approx(self_ps / 1e9, abs=1e-9)
        assert named[function]["where"] == gap["where"][function]
    assert list(named)[:2] == ["load_batch", "log_metrics"]  # most idle first
    top = report.recommendations[0]
    assert top.est_savings_ms == pytest.approx(gap["gap_ps"] / 1e9, abs=1e-9)
    document = hostview.report(tpuperf.load(path), AnalysisConfig())
    assert document["explained_ms_per_iteration"] == pytest.approx(gap["gap_ps"] / 1e9, abs=1e-9)
    runtime = {r["name"]: r for r in document["events"] if r["kind"] == "runtime"}
    # The dispatch runs inside the step, while the GPU is still idle before its first kernel.
    assert "PjitFunction(train_step)" in runtime


def test_report_page_has_the_host_section(markers) -> None:
    from tpuperf.render.html_page import render_html

    profile, truth = markers
    page = render_html(analyze(profile))
    section = page.split('<section id="host">', 1)[1].split("</section>", 1)[0]
    # Ranked as `tpuperf host` ranks them: the loader first, with its file:line.
    first_row = section.split("<tbody>", 1)[1].split("</tr>", 1)[0]
    assert "load_batch" in first_row
    assert f"{truth['file']}:{truth['lines']['load_batch']}" in first_row


def test_diff_summary_uses_the_iteration(markers) -> None:
    path = DATA / "host_markers.xplane.pb"
    summary = tpuperf.diff(str(path), str(path)).to_dict()["summary"]
    idle = analyze(markers[0]).results["idle"].metrics
    # idle_ms is per step per device: the idle share times the mean iteration.
    assert summary["idle_ms"]["before"] == pytest.approx(idle["idle_ms_per_step"], rel=1e-6)
