"""The roofline analyzer's per-(module, op) sums (analyzers/roofline.py, ``_costed``) against
the same sums made op by op in plain Python, on a generated TPU profile (names and costs stored
per metadata row) and on variants of it that take the analyzer's other ways: two metadata rows
of one (module, op), costs that are not whole numbers, unknown peaks, and a table without a
shared index."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from tpuperf.analyzers import roofline
from tpuperf.roofline import chips

from fixtures.generate import write_run
from tpuperf.columns import Lookup, Strings, Table
from tpuperf.config import AnalysisConfig
from tpuperf.profiles import load
from tpuperf.timeline import Timeline, build_timeline


@pytest.fixture(scope="module")
def timeline(tmp_path_factory: pytest.TempPathFactory) -> Timeline:
    run_dir, _ = write_run("memory_bound", Path(tmp_path_factory.mktemp("roofline")))
    return build_timeline(load(str(run_dir)), AnalysisConfig(warmup_steps=0))


def _op_by_op(tl: Timeline, peaks: dict) -> dict[tuple[str, str], list]:
    """Per (module, op), in order of first appearance: count, dur_ps, flops, bytes_accessed
    and lost_ps, each op's values added one by one (device by device, ops in row order)."""
    totals: dict[tuple[str, str], list] = {}
    for view in tl.devices:
        ops, rows = view.ops, view.leaves.tolist()
        module, op = ops.strings("module").tolist(), ops.strings("op").tolist()
        flops, nbytes = ops.array("flops").tolist(), ops.array("bytes_accessed").tolist()
        dur = ops.array("dur_ps").tolist()
        peak = peaks.get(view.key)
        device: dict[tuple[str, str], list] = {}
        for row in rows:
            if math.isnan(flops[row]) and math.isnan(nbytes[row]):
                continue
            lost = 0.0
            if peak is not None and peak.known:
                times = (
                    flops[row] / peak.peak_tflops,  # FLOPs per ps is TFLOP/s
                    nbytes[row] / (peak.peak_hbm_gbps / 1000.0),  # bytes per ps is GB/s / 1000
                )
                ideal = max((t for t in times if not math.isnan(t)), default=math.nan)
                lost = 0.0 if math.isnan(ideal) else max(dur[row] - ideal, 0.0)
            sums = device.setdefault((module[row], op[row]), [0, 0, 0.0, 0.0, 0.0])
            sums[0] += 1
            sums[1] += dur[row]
            sums[2] += 0.0 if math.isnan(flops[row]) else flops[row]
            sums[3] += 0.0 if math.isnan(nbytes[row]) else nbytes[row]
            sums[4] += lost
        for key, sums in device.items():
            total = totals.setdefault(key, [0, 0, 0.0, 0.0, 0.0])
            for i, value in enumerate(sums):
                total[i] += value
    return totals


def _check(tl: Timeline, peaks: dict) -> None:
    table, leaves = roofline._costed(tl, peaks)
    expected = _op_by_op(tl, peaks)
    assert leaves == sum(len(v.leaves) for v in tl.devices)
    got = list(
        zip(
            table.strings("module").tolist(),
            table.strings("op").tolist(),
            *(table.array(c).tolist() for c in roofline_columns),
            strict=True,
        )
    )
    # Exact: the same numbers to the last bit, groups in the same order.
    assert got == [(m, o, *sums) for (m, o), sums in expected.items()]


roofline_columns = ("count", "dur_ps", "flops", "bytes_accessed", "lost_ps")


def _with_ops(tl: Timeline, change) -> Timeline:
    """``tl`` with each device's ops table changed by ``change(ops) -> ops``."""
    views = tuple(dataclasses.replace(v, ops=change(v.ops)) for v in tl.devices)
    return dataclasses.replace(tl, devices=views)


def _replaced(ops: Table, **columns) -> Table:
    return Table({name: columns.get(name, ops[name]) for name in ops})


def test_sums_per_metadata_row_are_the_op_by_op_sums(timeline: Timeline) -> None:
    assert isinstance(timeline.devices[0].ops["flops"], Lookup)  # the per-metadata-row way
    assert roofline._by_metadata_row(timeline.devices[0].ops) is not None
    _check(timeline, timeline.peaks)


def test_two_metadata_rows_of_one_op_are_summed_op_by_op(timeline: Timeline) -> None:
    def merge_names(ops: Table) -> Table:
        # Every op name of the device becomes its first letter: many metadata rows share a
        # (module, op).
        op = ops.strings("op")
        short = [v[:1] for v in op.values]
        values = tuple(dict.fromkeys(short))
        mapping = np.array([values.index(s) for s in short])[op.mapping]
        return _replaced(ops, op=Strings(op.index, values, mapping))

    merged = _with_ops(timeline, merge_names)
    table, _ = roofline._costed(merged, merged.peaks)
    assert table.n < roofline._costed(timeline, timeline.peaks)[0].n
    _check(merged, merged.peaks)


def test_costs_that_are_not_whole_numbers_are_added_op_by_op(timeline: Timeline) -> None:
    def fractional(ops: Table) -> Table:
        flops, nbytes = ops["flops"], ops["bytes_accessed"]
        return _replaced(
            ops,
            flops=Lookup(flops.index, flops.values * 1.1 + 0.3),
            bytes_accessed=Lookup(nbytes.index, nbytes.values / 3.0),
        )

    _check(_with_ops(timeline, fractional), timeline.peaks)


def test_unknown_peaks_lose_nothing(timeline: Timeline) -> None:
    unknown = {key: chips.Peaks(None, None, "unknown", "unknown") for key in timeline.peaks}
    table, _ = roofline._costed(timeline, unknown)
    assert table.n and not table.array("lost_ps").any()
    _check(timeline, unknown)


def test_a_table_without_a_shared_index_gives_the_same_sums(timeline: Timeline) -> None:
    def plain(ops: Table) -> Table:
        return Table(
            {
                name: (
                    Strings.from_list(ops.strings(name).tolist())
                    if isinstance(ops[name], Strings)
                    else ops.array(name)
                )
                for name in ops
            }
        )

    flat = _with_ops(timeline, plain)
    assert roofline._by_metadata_row(flat.devices[0].ops) is None
    _check(flat, flat.peaks)
    assert roofline._costed(flat, flat.peaks)[0].array("lost_ps").tolist() == (
        roofline._costed(timeline, timeline.peaks)[0].array("lost_ps").tolist()
    )
