"""The timeline (tpuperf/timeline.py) on generated profiles, against the generator's ground truth:
the step windows each device is analysed over, their breakdown, and the step selection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.generate import write_run
from tpuperf.config import AnalysisConfig
from tpuperf.profiles import Profile, load
from tpuperf.timeline import DeviceView, build_timeline, select_steps, stats_ms

SCENARIOS = ("collective_training", "gpu_training", "straggler", "host_bound")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Profile, Any]]:
    out = {}
    for scenario in SCENARIOS:
        run_dir, truth = write_run(scenario, tmp_path_factory.mktemp(scenario))
        out[scenario] = (load(str(run_dir)), truth)
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_windows_are_the_truths_steps(runs: dict, scenario: str) -> None:
    profile, truth = runs[scenario]
    tl = build_timeline(profile, AnalysisConfig(warmup_steps=0))
    assert tl.has_steps
    assert tl.platform == truth.platform
    assert sorted(v.key for v in tl.devices) == sorted((d.host, d.device) for d in truth.devices)
    assert tl.n_windows == sum(len(d.steps) for d in truth.devices)
    for view in tl.devices:
        steps = truth.device(view.host, view.device).steps
        assert view.windows.step.tolist() == [n for n, _, _ in steps]
        # Each window as long as the truth's step (the truth is on the device clock too).
        lengths = view.windows.end_ps - view.windows.start_ps
        assert lengths.tolist() == [end - start for _, start, end in steps]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_breakdown_sums_to_the_truth(runs: dict, scenario: str) -> None:
    profile, truth = runs[scenario]
    tl = build_timeline(profile, AnalysisConfig(warmup_steps=0))
    for view in tl.devices:
        dev = truth.device(view.host, view.device)
        b = {column: int(values.sum()) for column, values in view.breakdown.items()}
        assert view.window_ps() == b["step_ps"] == dev.window_ps
        assert b["busy_ps"] == pytest.approx(dev.busy_ps, rel=1e-9)
        assert b["idle_ps"] == pytest.approx(dev.idle_ps, rel=1e-9, abs=1)
        assert b["compute_ps"] == pytest.approx(dev.compute_ps, rel=1e-9)
        assert b["exposed_collective_ps"] == pytest.approx(dev.collective_ps, rel=1e-9, abs=1)
        # Busy and idle partition every window; on a TPU (one op line) busy is compute,
        # exposed collective and other.
        assert b["busy_ps"] + b["idle_ps"] == b["step_ps"]
        if truth.platform == "TPU":
            assert b["compute_ps"] + b["exposed_collective_ps"] + b["other_ps"] == b["busy_ps"]


def test_warmup_and_steps_select_windows(runs: dict) -> None:
    profile, truth = runs["collective_training"]
    numbers = [n for n, _, _ in truth.devices[0].steps]
    tl = build_timeline(profile, AnalysisConfig(warmup_steps=2))
    assert tl.steps_selected == tuple(numbers[2:])
    assert tl.steps_excluded == tuple(numbers[:2])
    assert all(view.windows.step.tolist() == numbers[2:] for view in tl.devices)
    tl = build_timeline(profile, AnalysisConfig(steps=(3, 6)))  # A <= n < B; warm-up ignored
    assert tl.steps_selected == (3, 4, 5)
    assert tl.steps_excluded == tuple(n for n in numbers if not 3 <= n < 6)
    for view in tl.devices:
        steps = {n: (s, e) for n, s, e in truth.device(view.host, view.device).steps}
        assert view.windows.start_ps.tolist()[0] - view.all_windows.start_ps.tolist()[0] == (
            steps[3][0] - steps[numbers[0]][0]
        )


def test_the_timeline_is_built_once_per_profile_and_config(runs: dict) -> None:
    profile, _ = runs["host_bound"]
    config = AnalysisConfig(warmup_steps=0)
    assert build_timeline(profile, config) is build_timeline(
        profile, AnalysisConfig(warmup_steps=0)
    )
    assert build_timeline(profile, config) is not build_timeline(profile, AnalysisConfig())


@pytest.mark.parametrize("scenario", [*SCENARIOS, "no_steps"])
@pytest.mark.parametrize("config", [AnalysisConfig(), AnalysisConfig(steps=(3, 6))])
def test_the_selection_is_the_timelines_without_its_time_sets(
    tmp_path: Path, scenario: str, config: AnalysisConfig
) -> None:
    """select_steps (what `tpuperf tree` reads) chooses the devices, windows and ops that the
    timeline chooses, and sums the same selected ops; where the timeline is built, it is
    the timeline itself."""
    run_dir, _ = write_run(scenario, tmp_path)
    timeline = build_timeline(load(str(run_dir)), config)
    selection = select_steps(load(str(run_dir)), config)  # another load: built anew
    assert selection is not timeline
    assert not any(isinstance(view, DeviceView) for view in selection.devices)
    for name in ("step_source", "steps_selected", "steps_excluded", "notes", "platform"):
        assert getattr(selection, name) == getattr(timeline, name)
    assert [v.key for v in selection.devices] == [v.key for v in timeline.devices]
    assert selection.devices, "a scenario whose devices have selected windows"
    for chosen, view in zip(selection.devices, timeline.devices, strict=True):
        for name in ("windows", "all_windows", "span"):
            a, b = getattr(chosen, name), getattr(view, name)
            assert (a.step.tolist(), a.start_ps.tolist(), a.end_ps.tolist()) == (
                b.step.tolist(),
                b.start_ps.tolist(),
                b.end_ps.tolist(),
            )
        assert chosen.selected.tolist() == view.selected.tolist()
        index = np.arange(chosen.ops.n) % 7  # any index: seven groups of ops
        assert chosen.selected_sums(index, 7, "self_ps").tolist() == (
            view.selected_sums(index, 7, "self_ps").tolist()
        )
        assert chosen.selected_counts(index, 7).tolist() == view.selected_counts(index, 7).tolist()
    assert select_steps(timeline.profile, config) is timeline


def test_stats_ms_by_hand() -> None:
    # 1, 2, 3, 4 and 10 ms: median 3, mean 4, p90 by linear interpolation 4 + 0.6 * 6 = 7.6.
    stats = stats_ms(np.array([2, 1, 10, 4, 3]) * 1_000_000_000)
    assert stats == {
        "median": 3.0,
        "mean": 4.0,
        "p90": pytest.approx(7.6),
        "min": 1.0,
        "max": 10.0,
        "count": 5,
    }
    assert stats_ms(np.array([], dtype=np.int64))["count"] == 0
    assert stats_ms(np.array([], dtype=np.int64))["median"] is None


def test_a_profile_without_steps_takes_its_dominant_modules_periods(tmp_path: Path) -> None:
    # No Steps line and no step markers: a step is a period of the dominant module.
    run_dir, truth = write_run("no_steps", tmp_path)
    tl = build_timeline(load(str(run_dir)), AnalysisConfig(warmup_steps=0))
    assert tl.step_source == "module_period"
    for view in tl.devices:
        steps = truth.device(view.host, view.device).steps
        assert view.windows.step.tolist() == [n for n, _, _ in steps]
        lengths = view.windows.end_ps - view.windows.start_ps
        assert lengths.tolist() == [end - start for _, start, end in steps]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 60), max_size=40),
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 15)), max_size=6),
    st.booleans(),
)
def test_ops_starting_in_windows_are_the_ops_a_window_holds(
    times: list[int], windows: list[tuple[int, int]], in_order: bool
) -> None:
    """timeline._starting_in (runs of rows where ops are in order and windows apart) picks the
    rows that window_of places in a window, and where windows are apart, the ops whose start
    lies in one, counted one by one, in row order."""
    from tpuperf.step_windows import window_of
    from tpuperf.timeline import Windows, _starting_in

    start = np.array(sorted(times) if in_order else times, dtype=np.int64)
    win = Windows.of(
        [i for i, _ in enumerate(windows)], [s for s, _ in windows], [s + n for s, n in windows]
    )
    got = _starting_in(start, win)
    assert got.dtype == np.int32
    if in_order:  # told so, the same rows without checking the order
        assert _starting_in(start, win, in_order=True).tolist() == got.tolist()
    placed = window_of(start, win.start_ps, win.end_ps)
    assert got.tolist() == np.flatnonzero(placed >= 0).tolist()
    if all(win.start_ps[1:] >= win.end_ps[:-1]):  # apart
        bounds = list(zip(win.start_ps.tolist(), win.end_ps.tolist(), strict=True))
        expected = [r for r, t in enumerate(start.tolist()) if any(s <= t < e for s, e in bounds)]
        assert got.tolist() == expected


def test_a_tpu_op_lines_compute_set_is_its_ops_without_a_copy(tmp_path: Path) -> None:
    """On a TPU op line of compute ops that neither touch nor overlap, the compute set is the
    ops themselves: the ops' start and duration columns (timeline.OpSpans), not a copy."""
    from fixtures.generate import generate_large

    path = tmp_path / "large.xplane.pb"
    generate_large(path, devices=2, events=20_000)
    tl = build_timeline(load(str(path)), AnalysisConfig(warmup_steps=0))
    assert len(tl.devices) == 2
    for view in tl.devices:
        start, dur = view.ops.array("start_ps"), view.ops.array("dur_ps")
        compute = view.sets.compute
        assert len(compute) == view.ops.n == 10_000
        # Nothing as long as the ops is kept for it: its ends are made when read.
        assert compute.starts is start and compute.durations is dur
        assert compute.ends.tolist() == (start + dur).tolist()
        # Every op is a compute op on one line: busy is its ops' time, inside the windows.
        assert int(view.breakdown["compute_ps"].sum()) == int(view.breakdown["busy_ps"].sum())
        inside = view.selected
        assert int(view.breakdown["compute_ps"].sum()) == int(dur[inside].sum())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 5), st.integers(0, 2)), max_size=30),
)
def test_a_compute_set_of_one_op_an_interval_is_kept_as_rows_with_the_same_times(
    ops: list[tuple[int, int, int]],
) -> None:
    """timeline.OpSpans.of: a set whose intervals are the compute ops that last, one each,
    becomes their rows and reads back the same starts and ends; any other set (ops joined
    where they touch) stays as it is."""
    from tpuperf.columns import Table
    from tpuperf.intervals import union
    from tpuperf.timeline import OpSpans

    # One line of ops in order that do not overlap: a gap, a duration (0: empty) and a kind.
    start, t = [], 0
    for gap, dur, _ in ops:
        start.append(t + gap)
        t = start[-1] + dur
    starts = np.array(start, dtype=np.int64)
    durs = np.array([d for _, d, _ in ops], dtype=np.int64)
    kind = np.array([k for _, _, k in ops], dtype=np.int8)
    compute = kind == 0
    times = union(starts[compute], starts[compute] + durs[compute])
    table = Table({"start_ps": starts, "dur_ps": durs})
    got = OpSpans.of(times, table, kind, 0)
    assert got.starts.tolist() == times.starts.tolist()
    assert got.ends.tolist() == times.ends.tolist()
    assert len(got) == len(times)
    lasting = [i for i, (_, d, k) in enumerate(ops) if k == 0 and d > 0]
    one_each = len(lasting) == len(times)
    assert isinstance(got, OpSpans) == (one_each and len(times) > 0)
    if isinstance(got, OpSpans):
        assert got.rows is not None and got.rows.tolist() == lasting


def test_selected_sums_are_the_selected_ops_sums_per_index_at_any_size(tmp_path: Path) -> None:
    """A device's self time per op index over its selected ops (read by the op table and the
    scopes' tables, summed once): np.bincount of the selected ops' values, padded with zeros
    to a larger size, cut to a smaller one that still holds every selected op's value; the
    shared array cannot be written to."""
    from fixtures.generate import generate_large

    path = tmp_path / "large.xplane.pb"
    generate_large(path, devices=2, events=20_000)
    tl = build_timeline(load(str(path)), AnalysisConfig(warmup_steps=1))
    for view in tl.devices:
        index = view.ops.strings("op").index
        selected = view.selected
        assert 0 < len(selected) < view.ops.n  # the warm-up step is left out
        used = int(index[selected].max()) + 1
        expected = np.bincount(
            index[selected], weights=view.ops.array("self_ps")[selected], minlength=used
        ).astype(np.int64)
        for size in (used + 5, used, used + 1):  # the first computes, the others read it
            sums = view.selected_sums(index, size, "self_ps")
            assert sums.dtype == np.int64
            assert sums.tolist() == expected.tolist() + [0] * (size - used)
        with pytest.raises(ValueError):
            view.selected_sums(index, used, "self_ps")[0] = 1


@pytest.mark.parametrize(
    "source",
    [
        "generated",  # one op line a chip, in time order: each window's ops one run of rows
        "fixtures/data/coll_fsdp.xplane.pb",
        "fixtures/data/cpu_train_steps.xplane.pb",
        "fixtures/data/host_markers.xplane.pb",
        "gpu/v100_8gpu_tf_training.xplane.pb",
        "gpu/mi300_jax_te_fused_attn.xplane.pb",
        "tpu/v6e_4chip_inference.xplane.pb",
    ],
)
def test_each_selected_op_knows_its_window(source: str, tmp_path: Path) -> None:
    # Each selected op's window: from the runs of rows of ops in time order, or else searched
    # for by its start; the same windows either way.
    from conftest import REPO, shared_profile

    from fixtures.generate import generate_large
    from tpuperf.step_windows import window_of

    if source == "generated":
        path = tmp_path / "large.xplane.pb"
        generate_large(path, events=20_000)
    elif source.startswith("fixtures/"):
        path = REPO / source
    else:
        path = shared_profile(source)
    views = build_timeline(load(path), AnalysisConfig()).devices
    in_order = 0
    for view in views:
        starts = view.ops.array_at("start_ps", view.selected)
        searched = window_of(starts, view.windows.start_ps, view.windows.end_ps)
        assert view.of_selected(np.arange(len(view.windows))).tolist() == searched.tolist()
        assert view.of_selected(view.windows.step).tolist() == view.windows.step[searched].tolist()
        assert (searched >= 0).all()
        in_order += bool(np.all(np.diff(view.ops.array("start_ps")) >= 0))
    assert views
    if source == "generated":
        assert in_order == len(views) and max(len(v.windows) for v in views) > 1
