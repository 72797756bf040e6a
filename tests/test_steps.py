"""tpuperf.step_windows: steps from module periods (issue 22's two defects), on hand-built
tables."""

from __future__ import annotations

import numpy as np
import pytest
from test_analyzers_synth import US, build, module_calls, op
from tpuperf.analyzers.base import AnalysisConfig

from tpuperf.analysis import analyze
from tpuperf.columns import Strings, Table
from tpuperf.step_windows import dominant_module_steps, program_label


def modules(rows: list[tuple[str, str, float, float]]) -> Table:
    """A modules table from (module, program_id, start_us, dur_us) rows."""
    return Table(
        {
            "module": Strings.from_list([r[0] for r in rows]),
            "program_id": Strings.from_list([r[1] for r in rows]),
            "start_ps": np.array([int(r[2] * US) for r in rows], dtype=np.int64),
            "dur_ps": np.array([int(r[3] * US) for r in rows], dtype=np.int64),
        }
    )


def test_the_last_execution_only_ends_the_last_step() -> None:
    # Five calls 100 us apart: four steps, each from one call's start to the next one's. The
    # fifth call has no successor, so no step of a made-up length starts there.
    steps = dominant_module_steps(modules([("jit_f", "1", 100.0 * i, 60.0) for i in range(5)]))
    assert steps is not None
    assert steps.array("start_ps").tolist() == [0, 100 * US, 200 * US, 300 * US]
    assert steps.array("end_ps").tolist() == [100 * US, 200 * US, 300 * US, 400 * US]


def test_a_single_execution_is_bounded_by_its_duration() -> None:
    steps = dominant_module_steps(modules([("jit_f", "1", 10.0, 60.0)]))
    assert steps is not None
    assert (steps.array("start_ps").tolist(), steps.array("end_ps").tolist()) == (
        [10 * US],
        [70 * US],
    )


def test_steps_come_from_one_program_not_one_module_name() -> None:
    # jit_matmul is two programs (two shapes): program 1 every 100 us (50 us a call, the most
    # time), program 2 twice in between. Only program 1's calls make steps.
    rows = [("jit_matmul", "1", 100.0 * i, 50.0) for i in range(4)]
    rows += [("jit_matmul", "2", 60.0, 10.0), ("jit_matmul", "2", 260.0, 10.0)]
    table = modules(rows)
    steps = dominant_module_steps(table)
    assert steps is not None
    assert steps.array("start_ps").tolist() == [0, 100 * US, 200 * US]
    assert np.diff(steps.array("start_ps")).tolist() == [100 * US, 100 * US]
    assert program_label(table) == "jit_matmul(1)"


def test_idle_after_the_final_call_is_no_step_gap() -> None:
    # Four calls 100 us apart, then 400 us of idle after the last call's 60 us: before the fix
    # the last call was a step of the median period (100 us), so its 40 us idle tail counted
    # as between-steps idle; now only the three full periods are steps.
    per_device = {("h0", 0): [op("a", s * 100.0, 60) for s in range(4)] + [op("b", 800.0, 1)]}
    modules = module_calls(4, "7")
    report = analyze(build(per_device, modules=modules), config=AnalysisConfig(warmup_steps=0))
    assert report.summary["steps_analyzed"] == 3
    assert report.summary["step_time_ms"]["median"] == pytest.approx(0.1)
    assert report.summary["step_time_ms"]["max"] == pytest.approx(0.1)
    assert any("jit_f(7)" in note for note in report.notes)
