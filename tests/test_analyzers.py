"""The analyzer plug-in registry, interval algebra, the chip table and the roofline math."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_analyzers_synth import four_chip_training
from tpuperf.analyzers import base
from tpuperf.analyzers.base import AnalysisConfig, Analyzer, AnalyzerResult
from tpuperf.analyzers.outliers import modified_z
from tpuperf.roofline import chips
from tpuperf.roofline import model as rl

from tpuperf import schema
from tpuperf import timeline as iv
from tpuperf.analysis import analyze
from tpuperf.errors import UsageError

# ---------------------------------------------------------------------------- registry


def test_builtin_analyzers_are_registered_in_order() -> None:
    registry = base.available()
    assert list(registry)[:4] == ["steps", "idle", "collectives", "roofline"]
    for analyzer in registry.values():
        assert analyzer.summary and "\n" not in analyzer.summary


@pytest.mark.parametrize("name", ["steps", "idle", "collectives", "roofline"])
def test_required_columns_exist_in_the_schema(name: str) -> None:
    analyzer = base.available()[name]
    for table, columns in analyzer.requires.items():
        assert set(columns) <= set(schema.TABLES[table]), (table, columns)


def test_unknown_analyzer_is_a_usage_error_listing_the_valid_ones() -> None:
    with pytest.raises(UsageError, match="valid: steps, idle, collectives, roofline"):
        base.select(["idel"])


class _ReadsOps(Analyzer):
    """The column the test plug-ins below read (_NeedsMissing declares its own)."""

    requires: ClassVar[dict[str, list[str]]] = {"ops": ["op"]}


class _Broken(_ReadsOps):
    name = "broken"
    summary = "Always fails."

    def analyze(self, profile, config):  # type: ignore[no-untyped-def]
        raise ZeroDivisionError("on purpose")


class _Counts(_ReadsOps):
    name = "counts"
    summary = "Counts ops."

    def analyze(self, profile, config):  # type: ignore[no-untyped-def]
        return AnalyzerResult(self.name, metrics={"ops": len(profile.ops)})


class _PerDevice(_ReadsOps):
    """A plug-in written for the timeline interface."""

    name = "per_device"
    summary = "Ops per analysed device."

    def analyze(self, timeline, config):  # type: ignore[no-untyped-def]
        return AnalyzerResult(
            self.name, metrics={v.name: len(v.selected) for v in timeline.devices}
        )


class _NeedsMissing(Analyzer):
    name = "needs_missing"
    summary = "Reads a column no profile has."
    requires: ClassVar[dict[str, list[str]]] = {"ops": ["no_such_column"]}

    def analyze(self, profile, config):  # type: ignore[no-untyped-def]
        raise AssertionError("must not run")


class _EntryPoint:
    def __init__(self, name: str, target: object) -> None:
        self.name = name
        self._target = target

    def load(self) -> object:
        if isinstance(self._target, Exception):
            raise self._target
        return self._target


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    found = [
        ("broken", _EntryPoint("broken", _Broken)),
        ("counts", _EntryPoint("counts", _Counts())),
        ("per_device", _EntryPoint("per_device", _PerDevice)),
        ("needs_missing", _EntryPoint("needs_missing", _NeedsMissing)),
        ("unloadable", _EntryPoint("unloadable", ImportError("no module named x"))),
        ("steps", _EntryPoint("steps", _Counts)),  # cannot shadow a built-in
    ]
    monkeypatch.setattr(base, "_entry_point_analyzers", lambda: found)


@pytest.mark.usefixtures("plugins")
def test_entry_point_plugins_join_the_registry() -> None:
    registry = base.available()
    assert list(registry) == [
        "steps",
        "idle",
        "collectives",
        "roofline",
        "memory",
        "broken",
        "counts",
        "per_device",
    ]
    assert type(registry["steps"]).__name__ == "StepsAnalyzer"
    # A plug-in that declares a column no profile has is refused when it loads.
    assert base.plugin_errors() == {
        "needs_missing": "UsageError: analyzer 'needs_missing' requires columns "
        "ops.no_such_column, which no profile has",
        "unloadable": "ImportError: no module named x",
    }


@pytest.mark.usefixtures("plugins")
def test_a_failing_analyzer_is_reported_and_the_others_still_run() -> None:
    profile = four_chip_training()
    report = analyze(profile)
    assert report.errors["broken"] == "ZeroDivisionError: on purpose"
    # Written for the first interface, analyze(profile, config): it gets the profile.
    assert report.results["counts"].metrics == {"ops": len(profile.ops)}
    # Written for the timeline: it gets the timeline every analyzer shares.
    per_device = report.results["per_device"].metrics
    assert len(per_device) == 4 and sum(per_device.values()) > 0
    assert report.results["steps"].error is None
    assert report.recommendations  # the built-ins' advice is still there
    assert report.to_dict()["analyzers"]["broken"]["error"] == "ZeroDivisionError: on purpose"


# ---------------------------------------------------------------------------- device sets

_KINDS = (schema.KIND_COMPUTE, schema.KIND_COLLECTIVE, schema.KIND_ASYNC_COPY, "other")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.integers(0, 20), st.sampled_from(_KINDS)), max_size=40
    ),
    st.booleans(),
    st.booleans(),
)
def test_device_sets_in_one_pass_equal_the_set_algebra(
    ops: list[tuple[int, int, str]], in_order: bool, gpu: bool
) -> None:
    """One line of ops (in order and apart, touching, empty, or overlapping: then the set
    algebra does it all): the one pass of kernels.kind_runs gives the sets that unions and
    differences of the ops' intervals give (kind_runs in C and numpy: tests/test_kernels)."""
    from unittest import mock

    from tpuperf import kernels
    from tpuperf.columns import Strings, Table

    placed, at = [], 0
    for gap, duration, _ in ops:
        # In order: gaps as given, ops one after another (the TPU shape the one pass takes).
        placed.append(at + gap if in_order else gap * 7)
        at = placed[-1] + duration
    starts = np.array(placed, dtype=np.int64)
    durations = np.array([d for _, d, _ in ops], dtype=np.int64)
    table = Table(
        {
            "kind": Strings.from_list([k for _, _, k in ops]),
            "line": Strings.constant("XLA Ops", len(ops)),
        }
    )
    end = starts + durations
    kind = iv._set_codes(table.strings("kind"))
    in_one_pass = iv._device_sets(table, starts, end, kind, gpu, kernels.apart(starts, end))
    with mock.patch.object(kernels, "kind_runs", lambda *args: None):  # the general way
        by_algebra = iv._device_sets(table, starts, end, kind, gpu, apart=False)
    for name in ("compute", "collective", "other"):
        got, expected = getattr(in_one_pass, name), getattr(by_algebra, name)
        assert got.starts.tolist() == expected.starts.tolist(), name
        assert got.ends.tolist() == expected.ends.tolist(), name
    # Occupied: in one pass, every op whatever its kind. (The algebra's way builds it from the
    # three sets, which leaves out an op of none of them, such as "other": compared with it
    # where there is none.)
    taken = end > starts
    if bool(np.all(starts[taken][1:] >= end[taken][:-1])):  # in order: the one pass ran
        every_op = iv.union(starts, end)
        assert in_one_pass.occupied.starts.tolist() == every_op.starts.tolist()
        assert in_one_pass.occupied.ends.tolist() == every_op.ends.tolist()
    busy = in_one_pass.compute if gpu else in_one_pass.occupied
    assert in_one_pass.busy.starts.tolist() == busy.starts.tolist()
    if all(k != "other" for _, _, k in ops):
        for name in ("busy", "occupied"):
            got, expected = getattr(in_one_pass, name), getattr(by_algebra, name)
            assert got.starts.tolist() == expected.starts.tolist(), name
            assert got.ends.tolist() == expected.ends.tolist(), name


# ---------------------------------------------------------------------------- chips, roofline


@pytest.mark.parametrize(
    ("name", "chip", "tflops", "gbps"),
    [
        ("TPU v4", "TPU v4", 275.0, 1200.0),
        ("TPU v5 lite", "TPU v5e", 197.0, 819.0),
        ("TPU v5", "TPU v5p", 459.0, 2765.0),
        ("TPU v6 Lite", "TPU v6e", 918.0, 1640.0),
        ("TPU7x", "TPU7x", 2307.0, 7380.0),
        ("Tesla V100-SXM2-16GB", "V100", 125.0, 900.0),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB", 312.0, 1555.0),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB", 312.0, 2039.0),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.0, 3350.0),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756.0, 2000.0),
        ("NVIDIA H200", "H200 SXM", 989.0, 4800.0),
        ("NVIDIA B200", "B200", 2250.0, 8000.0),
        ("AMD Instinct MI300X", "MI300X (gfx942)", 1307.4, 5300.0),
        # Profiles name AMD GPUs by gfx architecture; XProf's peaks for them.
        ("AMD MI300 (gfx942)", "MI300X (gfx942)", 1307.4, 5300.0),
        ("AMD MI355 (gfx950)", "MI355X (gfx950)", 2516.6, 8000.0),
    ],
)
def test_chip_table_lookup(name: str, chip: str, tflops: float, gbps: float) -> None:
    spec = chips.lookup(name)
    assert spec is not None
    assert (spec.name, spec.peak_tflops, spec.peak_hbm_gbps) == (chip, tflops, gbps)


@pytest.mark.parametrize("name", ["AMD GPU (gfx1100)", "CPU", "", None, "NVIDIA GeForce RTX 4090"])
def test_unknown_chips_are_not_guessed(name: str | None) -> None:
    assert chips.lookup(name) is None


def test_every_chip_number_cites_a_public_source() -> None:
    import inspect

    source = inspect.getsource(chips)
    for spec in chips.CHIPS:
        line = next(i for i, text in enumerate(source.splitlines()) if f'"{spec.name}"' in text)
        above = "\n".join(source.splitlines()[max(0, line - 4) : line])
        assert "https://" in above, spec.name


def test_peaks_come_from_the_profile_then_the_table_then_flags() -> None:
    from_profile = chips.resolve_peaks("TPU v6 Lite", 918.0, 1637.99, 1.0, 1.0)
    assert (from_profile.peak_hbm_gbps, from_profile.source) == (1637.99, "profile")
    from_table = chips.resolve_peaks("TPU v6 Lite", float("nan"), None, 1.0, 1.0)
    assert (from_table.peak_tflops, from_table.source) == (918.0, "chip_table")
    from_flags = chips.resolve_peaks("AMD GPU (gfx1100)", None, 4096.0, 2300.0, 1.0)
    assert (from_flags.peak_tflops, from_flags.tflops_source) == (2300.0, "flags")
    assert (from_flags.peak_hbm_gbps, from_flags.hbm_source) == (4096.0, "profile")
    unknown = chips.resolve_peaks("CPU")
    assert not unknown.known and unknown.source == "unknown"


def test_ridge_point_of_the_v6e_matches_xprof() -> None:
    # XProf 2.24.2 on the real v6e profile: 918 TFLOP/s, 1637.99 GB/s, ridge 560.44 FLOP/byte.
    assert rl.ridge_point(918.0, 1637.99) == pytest.approx(560.44, abs=0.01)


@settings(max_examples=300, deadline=None)
@given(
    st.floats(1e-3, 1e5),
    st.floats(1.0, 5000.0),
    st.floats(10.0, 10000.0),
)
def test_attainable_is_under_both_roofs(intensity: float, peak: float, gbps: float) -> None:
    attainable = float(rl.attainable_tflops(intensity, peak, gbps))
    assert attainable <= peak * (1 + 1e-12)
    assert attainable <= intensity * gbps / 1000 * (1 + 1e-12)
    assert attainable == pytest.approx(min(peak, intensity * gbps / 1000))


def test_modified_z_flags_one_outlier_even_when_the_mad_is_zero() -> None:
    z = modified_z(np.array([1.0] * 7 + [1.35]))
    assert z[-1] > 3.5 and np.all(z[:-1] == 0)
    assert np.all(modified_z(np.array([2.0, 2.0, 2.0])) == 0)
    assert np.all(modified_z(np.array([1.0, 9.0])) == 0)  # too few to tell


def test_config_defaults_are_documented_values() -> None:
    config = AnalysisConfig()
    assert (config.warmup_steps, config.straggler_z, config.micro_gap_us) == (1, 3.5, 10.0)
