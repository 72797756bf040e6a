"""The Report: its JSON against the documented schema, ranking, and the renderers."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pytest
from rich.console import Console
from test_analyzers_synth import build, four_chip_training, op

from tpuperf import analysis as report_module
from tpuperf.analysis import Report, analyze
from tpuperf.config import parse_steps
from tpuperf.errors import UsageError
from tpuperf.render.markdown import render_markdown
from tpuperf.render.terminal import render_report, split_bar

_TYPES: dict[str, Any] = {
    "int": int,
    "number": (int, float),
    "string": str,
    "object": dict,
    "array": list,
}


def _check(obj: dict, fields: dict[str, Any], where: str) -> None:
    """``obj`` has exactly ``fields``, each of its documented JSON type."""
    assert set(obj) == set(fields), (where, set(obj) ^ set(fields))
    for name, spec in fields.items():
        allowed = spec if isinstance(spec, list) else [spec]
        value = obj[name]
        ok = any(
            value is None if t is None else isinstance(value, _TYPES[t]) and type(value) is not bool
            for t in allowed
        )
        assert ok, f"{where}.{name} = {value!r} is not {spec}"


def check_schema(data: dict) -> None:
    """Hold a `tpuperf analyze` JSON document to report.py's documented field lists."""
    _check(data, report_module.TOP_LEVEL_FIELDS, "")
    assert data["schema_version"] == report_module.SCHEMA_VERSION
    _check(data["summary"], report_module.SUMMARY_FIELDS, "summary")
    _check(data["summary"]["step_time_ms"], report_module.STEP_TIME_FIELDS, "step_time_ms")
    workload = data["summary"]["workload"]
    if workload is not None:
        assert set(workload) == {"framework", "platform", "vendor", "training"}
        assert workload["framework"] in ("jax", "tensorflow", "pytorch", "unknown")
        assert workload["platform"] == data["platform"]
        assert workload["training"] in (True, False, None)
    passes = data["summary"]["passes"]
    if passes is not None:
        assert list(passes) == ["forward", "backward", "optimizer", "other"]
        for name, split in passes.items():
            _check(split, report_module.PASS_FIELDS, f"summary.passes.{name}")
    for i, rec in enumerate(data["recommendations"]):
        _check(rec, report_module.RECOMMENDATION_FIELDS, f"recommendations[{i}]")
        assert rec["rank"] == i + 1
        assert set(rec["evidence"]) == {"text", "ops", "values", "scopes"}
        for cited in rec["evidence"]["scopes"]:
            assert set(cited) == {"op", "scope", "primitive", "pass", "source"}
            assert cited["op"] in rec["evidence"]["ops"]
        # The one fix for the workload that ran (analyzers/fixes.py), keyed by its platform.
        assert set(rec["fix"]) == {data["platform"].lower()}
        assert rec["confidence"] in ("high", "medium", "low")
        assert 0 <= rec["est_savings_pct"] <= 100
    for i, top in enumerate(data["top_ops"]):
        _check(top, report_module.TOP_OP_FIELDS, f"top_ops[{i}]")
    for name, result in data["analyzers"].items():
        _check(result, report_module.ANALYZER_FIELDS, f"analyzers.{name}")
        for table in result["tables"].values():
            assert set(table) == {"columns", "rows", "total_rows"}
            assert all(len(row) == len(table["columns"]) for row in table["rows"])
    for key in ("busy_pct", "idle_pct", "exposed_collective_pct", "span_idle_pct"):
        value = data["summary"][key]
        assert value is None or 0 <= value <= 100, key


def test_json_follows_the_documented_schema() -> None:
    data = analyze(four_chip_training()).to_dict()
    check_schema(data)
    json.dumps(data, allow_nan=False)  # no NaN or Infinity anywhere


def test_json_without_steps_or_peaks_has_nulls_not_nan() -> None:
    profile = build(
        {("h0", 0): [op("fusion.1", 0, 100), op("fusion.2", 150, 50)]},
        kind="CPU",
        chip="CPU",
        peak_tflops=math.nan,
        peak_hbm_gbps=math.nan,
    )
    data = analyze(profile).to_dict()
    check_schema(data)
    text = json.dumps(data, allow_nan=False)
    assert "NaN" not in text and "Infinity" not in text
    assert data["summary"]["step_time_ms"] == {
        "median": None,
        "mean": None,
        "p90": None,
        "min": None,
        "max": None,
        "count": 0,
    }
    assert data["summary"]["peak_tflops"] is None
    assert data["top_ops"][0]["efficiency_pct"] is None


def test_recommendations_are_ranked_by_estimated_savings() -> None:
    report = analyze(four_chip_training(lead=300.0))
    pcts = [r.est_savings_pct for r in report.recommendations]
    assert pcts == sorted(pcts, reverse=True)
    assert report.summary["top_recommendation"] == {
        "kind": report.recommendations[0].kind,
        "est_savings_pct": pcts[0],
        "est_savings_ms": report.recommendations[0].est_savings_ms,
    }
    assert all(p >= report_module.MIN_SAVINGS_PCT for p in pcts)


def test_summary_is_the_same_whichever_analyzers_run() -> None:
    profile = four_chip_training()
    full = analyze(profile).summary
    only_idle = analyze(profile, analyzers=["idle"]).summary
    assert {k: v for k, v in full.items() if k != "top_recommendation"} == {
        k: v for k, v in only_idle.items() if k != "top_recommendation"
    }
    assert only_idle["top_recommendation"]["kind"] in ("host_bound", "idle_gaps")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2:10", (2, 10)), (":5", (None, 5)), ("3:", (3, None)), ("4", (4, 5))],
)
def test_parse_steps(text: str, expected: tuple) -> None:
    assert parse_steps(text) == expected


@pytest.mark.parametrize("text", ["a:b", "5:2", "1:2:3"])
def test_parse_steps_rejects_nonsense(text: str) -> None:
    with pytest.raises(UsageError, match="--steps"):
        parse_steps(text)


def _render(report: Report, width: int = 100) -> str:
    buffer = io.StringIO()
    render_report(report, Console(file=buffer, width=width, color_system=None))
    return buffer.getvalue()


def test_terminal_report_at_a_pinned_width() -> None:
    text = _render(analyze(four_chip_training(lead=300.0)))
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines)
    assert lines[0].startswith("╭─ tpuperf analyze: synthetic")
    assert "│ Chip     TPU v6 lite (TPU)  peaks 918 TFLOP/s, 1637.99 GB/s from profile" in text
    assert "│ Devices  4 on 1 host(s)" in text
    assert "│ Steps    4 analysed (steps_line), 1 left out" in text
    assert "│ Step     median 1.00 ms   mean 1.00 ms   p90 1.00 ms" in text
    legend = "█ compute 50.0%   ▓ exposed collective 16.0%   ▒ exposed copy 0.0%   ░ no op 34.0%"
    assert legend in text
    # The bar, without colour: 96 cells split 50/16/0/34, one character per part.
    bar = next(line for line in lines if line.startswith("│ ████"))[2:-2]
    assert (bar.count("█"), bar.count("▓"), bar.count("▒"), bar.count("░")) == (48, 15, 0, 33)
    assert bar == "█" * 48 + "▓" * 15 + "░" * 33
    order = [text.index(s) for s in ("Top ops", "Recommendations", "1. Host-bound", "2. Exposed")]
    assert order == sorted(order)
    assert "saves up to 320.0 us/step (32.0%), confidence high" in text
    assert "Fix (TPU):" in text and "Fix (GPU):" not in text


def test_split_bar_cells_add_up() -> None:
    summary = {"compute_pct": 33.3, "exposed_collective_pct": 33.3, "no_op_pct": 33.4}
    assert len(split_bar(summary, 40).plain) == 40


def test_markdown_report() -> None:
    text = render_markdown(analyze(four_chip_training()))
    assert text.startswith("# tpuperf analyze: synthetic")
    assert "| Exposed collective | 16.0% |" in text
    assert "## Top ops" in text and "| `fusion.1` | jit_step | compute | 300.0 us |" in text
    assert "### 1. Host-bound: devices wait for input before each step (`host_bound`)" in text
    assert "### 2. Exposed collectives: all-reduce time compute does not hide" in text
    assert "**Saves up to 160.0 us per step (16.0%)**" in text


@pytest.mark.parametrize("scenario", ["memory_bound", "host_bound"])
def test_evidence_text_accounts_for_every_op_whose_code_it_cites(
    scenario: str, tmp_path: Any
) -> None:
    """Each op of ``evidence.scopes`` is named in the text at its place in the code, or
    counted in "and N more ops in M other places" (the text named the first 3 ops' code while
    evidence.scopes listed 5)."""
    import re

    from fixtures.generate import write_run
    from tpuperf.analysis import EVIDENCE_SCOPES
    from tpuperf.profiles import load

    run_dir, _ = write_run(scenario, tmp_path / "run", steps=4)
    report = analyze(load(run_dir))
    checked = 0
    for rec in report.recommendations:
        if not rec.scopes:
            continue
        text = rec.evidence.split("; in the code: ", 1)[1]
        places: dict[tuple[str, ...], list[str]] = {}
        for cited in rec.scopes:
            key = (cited["scope"], cited["primitive"], cited["pass"], cited["source"])
            places.setdefault(key, []).append(cited["op"])
        named = list(places.items())[:EVIDENCE_SCOPES]
        for (scope, primitive, _, _), ops in named:
            path = "/".join(p for p in (scope, primitive) if p)
            assert f"{', '.join(ops)} at {path}" in text, (rec.kind, text)
        more = re.search(r"and (\d+) more ops? in (\d+) other places?$", text)
        rest = list(places.values())[EVIDENCE_SCOPES:]
        if rest:
            assert more is not None, text
            assert int(more.group(1)) == sum(len(ops) for ops in rest)
            assert int(more.group(2)) == len(rest)
            checked += 1
        else:
            assert more is None, text
    assert checked  # a recommendation that cites ops at more places than the text names


def test_analyze_takes_a_path_a_path_object_or_a_profile() -> None:
    """``tpuperf.analyze`` owns the request: a path, a ``Path`` and a loaded Profile give one
    report, and the options it is given are those of ``tpuperf analyze``."""
    from pathlib import Path

    from conftest import CPU_FIXTURE

    import tpuperf

    by_text = tpuperf.analyze(str(CPU_FIXTURE), steps="2:8").to_dict()
    by_path = tpuperf.analyze(Path(CPU_FIXTURE), steps="2:8").to_dict()
    by_profile = tpuperf.analyze(tpuperf.load(CPU_FIXTURE), steps="2:8").to_dict()
    assert by_text == by_path == by_profile
    assert by_text["summary"]["steps_analyzed"] == 6
    assert by_text["source"] == str(CPU_FIXTURE)


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        ({"warmup": -1}, "--warmup"),
        ({"top": -2}, "--top"),
        ({"peak_tflops": 0.0}, "--peak-tflops"),
        ({"peak_hbm_gbps": -5.0}, "--peak-hbm-gbps"),
        ({"steps": "9:3"}, "--steps"),
    ],
)
def test_analyze_checks_its_options(options: dict[str, Any], flag: str) -> None:
    from conftest import CPU_FIXTURE

    with pytest.raises(UsageError, match=flag):
        analyze(str(CPU_FIXTURE), **options)


def test_report_carries_the_options_it_was_made_with() -> None:
    from conftest import CPU_FIXTURE

    made = analyze(str(CPU_FIXTURE), warmup=3, top=4, peak_tflops=7.5)
    assert (made.config.warmup_steps, made.config.top_ops, made.config.peak_tflops) == (3, 4, 7.5)
    assert len(made.top_ops.records()) <= 4


@pytest.mark.parametrize(
    "profile",
    [
        "fixtures/data/coll_fsdp.xplane.pb",
        "fixtures/data/coll_straggler.xplane.pb",
        "fixtures/data/host_markers.xplane.pb",
        "tpu/v6e_4chip_inference.xplane.pb",
        "gpu/v100_8gpu_tf_training.xplane.pb",
        "gpu/mi300_jax_conv.xplane.pb",
    ],
)
def test_every_fix_is_the_running_platforms(profile: str) -> None:
    """A recommendation's fix holds the platform that ran, one key: collective advice on
    XLA:CPU gave both the TPU and the GPU text (GPU flags on a CPU run)."""
    from conftest import REPO, shared_profile

    path = REPO / profile if profile.startswith("fixtures/") else shared_profile(profile)
    made = analyze(str(path))
    assert made.recommendations
    for rec in made.recommendations:
        assert list(rec.fix) == [made.platform.lower()], (rec.kind, list(rec.fix))


# --------------------------------------------------------------------------- issue 18: the page


def test_the_page_data_comes_from_the_report_only_when_asked(tmp_path) -> None:
    """What only the HTML page draws (per-step and per-device breakdowns, op categories, the
    scope tree) is computed from the analysis's own timeline on first use: the JSON form does
    not compute it, and it equals the generated run's ground truth."""
    from fixtures.generate import write_run
    from tpuperf.config import AnalysisConfig
    from tpuperf.profiles import load

    run_dir, truth = write_run("straggler", tmp_path / "run", steps=6)
    report = analyze(load(run_dir), config=AnalysisConfig(warmup_steps=0))
    report.to_json()
    page_only = {"step_breakdown", "device_breakdowns", "op_categories", "scope_tree"}
    assert not page_only & set(vars(report))

    steps = report.step_breakdown
    assert steps.steps.tolist() == list(range(6))
    assert steps.windows == 6 * len(truth.devices)
    want = [t / 1e9 for t in truth.step_time_ps]
    assert steps.ms["step_ps"].tolist() == pytest.approx(want, rel=1e-9)
    devices = report.device_breakdowns
    assert [d.key for d in devices] == sorted((d.host, d.device) for d in truth.devices)
    for device in devices:
        compute_ps = truth.device(device.host, device.device).compute_ps
        assert device.ms["compute_ps"] == pytest.approx(compute_ps / 6 / 1e9, rel=1e-6)
    slowest = max(devices, key=lambda d: d.ms["compute_ps"])
    assert slowest.key == truth.straggler
    assert report.op_categories  # every analysed op, with its category
    assert set(report.op_categories) == set(
        zip(report.ops.strings("module").tolist(), report.ops.strings("op").tolist(), strict=True)
    )
    # The scope tree is over the same windows as the summary's pass split.
    passes = report.summary["passes"]
    tree = report.scope_tree
    assert tree is not None and tree["children"]
    total = sum(p["ms_per_step"] for p in passes.values())
    assert tree["ms_per_step"] == pytest.approx(total, rel=1e-9)
    assert page_only <= set(vars(report))  # computed once, kept


def test_the_report_gives_renderers_typed_findings() -> None:
    """The findings renderers show (peaks, stragglers, idle, collectives, memory) are the
    Report's declared fields, equal to the analyzers' documented JSON, and the straggler is the
    capture's slowed device (fixtures/make_coll_fixtures.py)."""
    import dataclasses

    from conftest import REPO

    path = REPO / "fixtures" / "data" / "coll_straggler.xplane.pb"
    truth = json.loads(path.with_suffix("").with_suffix(".truth.json").read_text())
    report = analyze(str(path))
    document = report.to_dict()["analyzers"]
    assert [s.device for s in report.stragglers][:1] == [truth["slow_device"]]
    assert [dataclasses.asdict(s) for s in report.stragglers] == [
        {
            k: s[k]
            for k in ("host", "device", "z", "compute_ms_per_step", "median_compute_ms_per_step")
        }
        for s in document["steps"]["metrics"]["stragglers"]
    ]
    assert report.straggler_confidence in ("high", "medium", "low")
    peaks = document["roofline"]["metrics"]["peaks"]
    assert dataclasses.asdict(report.roofline_peaks) == pytest.approx(peaks, nan_ok=True)
    idle = report.idle
    assert idle is not None
    assert dataclasses.asdict(idle) == {
        k: document["idle"]["metrics"][k] for k in dataclasses.asdict(idle)
    }
    kinds = document["collectives"]["metrics"]["by_kind"]
    assert [k.kind for k in report.collective_kinds] == list(kinds)
    for kind in report.collective_kinds:
        assert kind.exposed_ms_per_step == kinds[kind.kind]["exposed_ms_per_step"]
    windows = document["collectives"]["metrics"]["async"]
    assert report.async_windows.windows == windows["windows"]
    memory = report.memory_peak
    assert memory is not None
    assert memory.peak_bytes == document["memory"]["metrics"]["peak_bytes"]
    assert report.roofline_ops is report.results["roofline"].tables.get("ops")
    assert report.host_events is report.results["idle"].tables.get("host_events")
