"""The table builder (tpuperf/build.py, over the model types of tpuperf/tables.py) through its
public entry points, on generated profiles against the generator's ground truth, and its name
helpers by hand."""

from __future__ import annotations

import copy
import random
from typing import Any

import numpy as np
import pytest

from fixtures.generate import generate
from tpuperf import build, build_tpu, tables, xspace
from tpuperf.columns import Strings, Table, factorize


@pytest.mark.parametrize("scenario", ["collective_training", "clock_drift", "straggler"])
def test_tpu_devices_ops_and_steps_are_the_truths(scenario: str) -> None:
    run = generate(scenario)
    for host, data in run.xspaces.items():
        built = build.build_host(host, xspace.decode(data))
        assert sorted(d.device for d in built.devices) == sorted(
            d.device for d in run.truth.devices if d.host == host
        )
        for device in built.devices:
            truth = run.truth.device(host, device.device)
            assert device.host == host
            assert device.row["kind"] == "TPU"
            assert device.row["chip"] == run.truth.notes["chip"]
            assert device.row["peak_tflops"] == run.truth.notes["peak_teraflops_per_second"]
            assert device.ops.n == truth.ops
            steps = device.steps
            assert steps is not None
            assert steps.array("step").tolist() == [n for n, _, _ in truth.steps]
            lengths = steps.array("end_ps") - steps.array("start_ps")
            assert lengths.tolist() == [end - start for _, start, end in truth.steps]
            # On the device clock: one offset from the truth's times for every step.
            offsets = {
                int(got) - start
                for got, (_, start, _) in zip(steps.array("start_ps"), truth.steps, strict=True)
            }
            assert len(offsets) == 1


def test_gpu_devices_and_steps_are_the_truths() -> None:
    run = generate("gpu_training")
    ((host, data),) = run.xspaces.items()
    built = build.build_host(host, xspace.decode(data))
    assert len(built.devices) == len(run.truth.devices)
    for device in built.devices:
        truth = run.truth.device(host, device.device)
        assert device.row["kind"] == "GPU"
        assert device.steps is not None
        assert device.steps.array("step").tolist() == [n for n, _, _ in truth.steps]
        assert device.steps.array("start_ps").tolist() == [s for _, s, _ in truth.steps]
        assert device.steps.array("end_ps").tolist() == [e for _, _, e in truth.steps]


def _columns(table: Table) -> dict[str, Any]:
    """A table's columns as plain values (strings read out), to compare two tables."""
    return {
        name: column.tolist() if isinstance(column, Strings) else table.array(name).tolist()
        for name, column in table.items()
    }


@pytest.mark.parametrize("scenario", ["collective_training", "clock_drift"])
def test_chips_sharing_metadata_get_the_tables_they_get_alone(scenario: str) -> None:
    """The chips of one program share one decoded metadata, and build_tpu makes its columns
    once for them: each chip's tables are those it gets with a metadata of its own."""
    data = next(iter(generate(scenario).xspaces.values()))
    shared = xspace.decode(data)
    alone = xspace.decode(data)
    for plane in alone.planes:
        plane.metadata = copy.deepcopy(plane.metadata)  # every plane its own
    metadata = [id(p.metadata) for p in shared.planes if "TPU" in p.name]
    assert len(set(metadata)) < len(metadata)
    built, expected = build.build_host("h", shared), build.build_host("h", alone)
    assert len(built.devices) == len(expected.devices) == len(metadata)
    for device, want in zip(built.devices, expected.devices, strict=True):
        for name in ("ops", "modules", "async_ops"):
            got_table, want_table = getattr(device, name), getattr(want, name)
            assert list(got_table) == list(want_table)
            assert _columns(got_table) == _columns(want_table)
            for column in got_table:  # string columns: values in the same order too
                if isinstance(got_table[column], Strings):
                    assert got_table.strings(column).values == want_table.strings(column).values


def test_factors_at_rows_are_the_factors_of_the_values_there() -> None:
    """_Factors.at(rows) against factorizing the values at ``rows`` themselves: the same codes
    (in order of first appearance among them) and the same values, for random rows (repeats,
    out of order, none) of random values (repeats, one value, all distinct)."""
    rng = random.Random("factors at rows")
    for _ in range(300):
        pool = [f"v{i}" for i in range(rng.choice([1, 3, 40]))]
        values = [rng.choice(pool) for _ in range(rng.randrange(1, 40))]
        rows = np.array([rng.randrange(len(values)) for _ in range(rng.randrange(30))], np.int64)
        if rng.random() < 0.5:
            rows = np.unique(rows)
        got = build_tpu._Factors.of(values).at(rows)
        codes, unique = factorize([values[r] for r in rows.tolist()])
        assert got.codes.dtype == np.int32
        assert got.codes.tolist() == codes.tolist() and got.unique == unique


def test_device_clock_moves_windows_as_the_ops_in_them_move() -> None:
    """device_clock and DeviceClock.place against the rule written out op by op: placed
    start = device offset + shift (the median of host start less device offset over the ops
    with device times), others keep their host times; a window's start moves as the first op
    starting in it, its end as the last one (its host end less its placed end), a window with
    none as the next op (else the last). Ops in and out of host order, with and without
    device times."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        host = rng.integers(0, 10**6, n)
        if rng.random() < 0.7:
            host.sort()
        host_dur = rng.integers(0, 5000, n)
        dev = host - rng.integers(0, 300, n)
        dev_dur = host_dur + rng.integers(-50, 50, n).clip(-host_dur)
        if rng.random() < 0.5:  # some without device times (MISSING), one out of range
            dev[rng.random(n) < 0.3] = xspace.MISSING
            dev_dur[rng.random(n) < 0.1] = 2**62
        events = xspace.IntEvents(
            np.zeros(n, np.int64),
            host.copy(),
            host_dur.copy(),
            {"device_offset_ps": dev.copy(), "device_duration_ps": dev_dur.copy()},
        )
        start, dur, clock = tables.device_clock(events, 0)
        use = [0 <= d < 2**62 and 0 <= e < 2**62 for d, e in zip(dev, dev_dur, strict=True)]
        if not any(use):
            assert start.tolist() == host.tolist() and dur.tolist() == host_dur.tolist()
            continue
        shift = int(np.median([h - d for h, d, u in zip(host, dev, use, strict=True) if u]))
        placed = [
            (int(d) + shift, int(e)) if u else (int(h), int(hd))
            for h, hd, d, e, u in zip(host, host_dur, dev, dev_dur, use, strict=True)
        ]
        assert start.tolist() == [p[0] for p in placed] and dur.tolist() == [p[1] for p in placed]
        ops = sorted(  # by host start, in line order where two start together
            [
                (int(h), int(h) - s, int(h) + int(hd) - s - d)  # host start, moves: start, end
                for h, hd, (s, d), u in zip(host, host_dur, placed, use, strict=True)
                if u
            ],
            key=lambda op: op[0],
        )
        lo = rng.integers(-1000, 10**6 + 1000, 30)
        hi = lo + rng.integers(0, 20000, 30)
        got_start, got_end = clock.place(lo, hi)
        for a, b, got_a, got_b in zip(lo.tolist(), hi.tolist(), got_start, got_end, strict=True):
            inside = [op for op in ops if a <= op[0] < b]
            after = [op for op in ops if op[0] >= a]
            moved = (inside or after or [ops[-1]])[0][1]
            end_moved = inside[-1][2] if inside else moved
            assert (int(got_a), int(got_b)) == (a - moved, max(b - end_moved, a - moved))


def test_plane_clock_only_for_tpu_planes() -> None:
    # The clock a TPU plane's tables are built on (read again by the Perfetto export).
    tpu = xspace.decode(next(iter(generate("collective_training").xspaces.values())))
    gpu = xspace.decode(next(iter(generate("gpu_training").xspaces.values())))
    assert all(build_tpu.plane_clock(p) is not None for p in tpu.planes if "TPU" in p.name)
    assert all(build_tpu.plane_clock(p) is None for p in gpu.planes)


@pytest.mark.parametrize(
    ("name", "category", "expected"),
    [
        ("all-gather-start.3", "", ("collective", "all-gather", "start")),
        ("all-reduce-done.1", "", ("collective", "all-reduce", "done")),
        ("fusion.12", "", ("compute", "", "")),
        # The opcode (hlo_category) wins where it names a collective.
        ("fusion.1", "all-reduce", ("collective", "all-reduce", "")),
    ],
)
def test_classify_op_by_hand(name: str, category: str, expected: tuple[str, str, str]) -> None:
    assert tables.classify_op(name, category) == expected


def test_name_helpers_by_hand() -> None:
    assert tables.op_base("%fusion.12") == "fusion"
    assert tables.op_base("all-gather-start.3") == "all-gather-start"
    # Only the last numbered suffix; a number of any Unicode decimal digits; before a final
    # newline too (as the regex \.\d+$ reads it); not a dot alone or a name that is one
    assert tables.op_base("a.1.2") == "a.1"
    assert tables.op_base("%%x.\u0663") == "x"
    assert tables.op_base("fusion.12\n") == "fusion\n"
    assert tables.op_base("fusion.") == "fusion."
    assert tables.op_base("fusion.1b") == "fusion.1b"
    assert tables.op_base(".5") == ""
    assert tables.instruction_name("%copy-start.4 = (f32[2]) copy-start(x)") == "copy-start.4"
    assert tables.instruction_name("not hlo") == "not hlo"
    assert tables.split_module_name("jit_train_step(16)") == ("jit_train_step", "16")
    assert tables.split_module_name("jit_train_step") is None
    assert tables.split_module_name("f(x)") is None
