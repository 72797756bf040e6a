"""The table builder (tpuperf/build.py, over the model types of tpuperf/tables.py) through its
public entry points, on generated profiles against the generator's ground truth, and its name
helpers by hand."""

from __future__ import annotations

import pytest

from fixtures.generate import generate
from tpuperf import build, build_tpu, tables, xspace


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
