"""`tpuperf analyze` and `tpuperf analyzers` through the CLI entry point."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from conftest import CPU_FIXTURE
from test_report import check_schema

from fixtures.generate import write_run
from tpuperf.cli import main


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    return write_run("collective_training", tmp_path_factory.mktemp("run"))


def test_json_output(run: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir, truth = run
    assert main(["analyze", str(run_dir), "--format", "json", "--warmup", "0"]) == 0
    data = json.loads(capsys.readouterr().out)
    check_schema(data)
    s = data["summary"]
    assert s["step_time_ms"]["median"] == pytest.approx(
        statistics.median(truth.step_time_ps) / 1e9, rel=0.01
    )
    assert s["exposed_collective_pct"] == pytest.approx(truth.exposed_collective_pct, rel=0.01)
    assert s["idle_pct"] == pytest.approx(truth.idle_pct, rel=0.01)
    assert data["recommendations"][0]["kind"] == truth.expected_top_recommendation


def test_table_output_at_a_pinned_width(
    run: tuple, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    run_dir, _ = run
    assert main(["analyze", str(run_dir)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert all(len(line) <= 100 for line in lines)
    assert "│ Chip     TPU v6 Lite (TPU)  peaks 918 TFLOP/s, 1637.99 GB/s from profile" in out
    assert "│ Devices  4 on 1 host(s)" in out
    assert "│ Steps    9 analysed (steps_line), 1 left out" in out
    assert "1. Exposed collectives: all-gather time compute does not hide" in out
    assert "Async windows: 72 —" in out


def test_markdown_to_a_file_is_written_atomically(
    run: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, _ = run
    target = tmp_path / "report.md"
    assert main(["analyze", str(run_dir), "--format", "md", "-o", str(target)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"wrote {target}" in captured.err
    assert target.read_text().startswith("# tpuperf analyze: ")
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]  # no temp file left


def test_table_to_a_file_is_plain_text(run: tuple, tmp_path: Path) -> None:
    run_dir, _ = run
    target = tmp_path / "report.txt"
    assert main(["analyze", str(run_dir), "-o", str(target)]) == 0
    text = target.read_text()
    assert "\x1b[" not in text
    assert "Recommendations (ranked by estimated savings)" in text


def test_one_analyzer_and_a_step_range(run: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir, _ = run
    args = ["analyze", str(run_dir), "-f", "json", "--analyzer", "idle", "--steps", "2:5"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["analyzers"]) == ["idle"]
    assert data["summary"]["steps_analyzed"] == 3
    assert {r["analyzer"] for r in data["recommendations"]} <= {"idle"}


def test_host_filter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir, truth = write_run("straggler", tmp_path)
    slow_host, slow_device = truth.straggler
    assert main(["analyze", str(run_dir), "-f", "json", "--host", slow_host]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["hosts"] == 1 and data["summary"]["devices"] == 4
    stragglers = data["analyzers"]["steps"]["metrics"]["stragglers"]
    assert [(s["host"], s["device"]) for s in stragglers] == [(slow_host, slow_device)]


def test_cpu_fixture_table_says_peaks_are_unknown(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["analyze", str(CPU_FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert "peaks unknown" in out
    # Only the reason that applies: no per-op FLOPs, so peak flags would not help (the report
    # told the user to pass them, then said that).
    assert "records no per-op FLOPs or bytes" in out
    assert "--peak-tflops" not in out

    assert main(["analyze", str(CPU_FIXTURE), "--format", "json"]) == 0
    notes = json.loads(capsys.readouterr().out)["analyzers"]["roofline"]["notes"]
    assert [n for n in notes if "FLOP" in n] == [
        "this profile records no per-op FLOPs or bytes (GPU and CPU profiles usually do not): "
        "no per-op roofline"
    ]


def test_unknown_analyzer_is_a_usage_error(run: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir, _ = run
    assert main(["analyze", str(run_dir), "--analyzer", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown analyzer 'nope'; valid: steps, idle, collectives, roofline" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps", "x:y"], "--steps 'x:y'"),
        (["--steps", "50:60"], "selects no step"),
        (["--host", "nowhere"], "--host 'nowhere' is not in this profile"),
        (["--peak-tflops", "-1"], "--peak-tflops must be a positive number"),
        (["--format", "xml"], "'xml' is not one of 'table', 'json', 'md', 'html'"),
    ],
)
def test_bad_options_exit_2(
    run: tuple, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    run_dir, _ = run
    assert main(["analyze", str(run_dir), *args]) == 2
    assert message in capsys.readouterr().err


def test_missing_profile_exits_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(tmp_path / "absent.xplane.pb")]) == 4
    assert "absent.xplane.pb" in capsys.readouterr().err


def test_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--help"]) == 0
    out = capsys.readouterr().out
    assert "Example" in out and "tpuperf analyze" in out
    assert main(["analyzers", "--help"]) == 0
    assert "Example" in capsys.readouterr().out


def test_analyzers_lists_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyzers", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema_version"] == 1
    names = [a["name"] for a in data["analyzers"]]
    assert names[:4] == ["steps", "idle", "collectives", "roofline"]
    assert data["analyzers"][0]["origin"] == "built-in"
    assert "ops" in data["analyzers"][0]["requires"]
    assert main(["analyzers"]) == 0
    assert "collectives" in capsys.readouterr().out


def _code_section(text: str) -> list[str]:
    """The lines of "Top ops in the code", up to the recommendations."""
    lines = text.splitlines()
    start = lines.index("Top ops in the code (pass, name scope, source line)")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("Recommendations"))
    return lines[start + 1 : end]


def test_top_ops_in_the_code_fit_the_width_and_wide_shows_them_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 5,000-character scope and source (a hostile profile's) take one line per op at 80
    columns, shortened; --wide prints them whole."""
    from fixtures.hostile import HOSTILE_NAMES, cases

    long_name = HOSTILE_NAMES[-1]
    assert len(long_name) == 5000
    path = tmp_path / "long.xplane.pb"
    path.write_bytes(dict(cases(0))["category_14"])  # tf_op and source are the long name
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["analyze", str(path), "--format", "json"]) == 0
    top = json.loads(capsys.readouterr().out)["top_ops"]
    assert [(r["scope"], r["primitive"], r["source"]) for r in top] == [
        ("", long_name, long_name)
    ] * 2
    assert main(["analyze", str(path)]) == 0
    lines = _code_section(capsys.readouterr().out)
    assert [line.split()[0] for line in lines] == [r["op"] for r in top]  # one line per op
    for line in lines:
        assert len(line) <= 80
        path_text, source_text = line.split()[2:]
        assert path_text.count("…") == source_text.count("…") == 1
        # Of the 56 cells left after op and pass, the path keeps a third, the source the rest.
        assert (len(path_text), len(source_text)) == (18, 38)
    assert main(["analyze", str(path), "--wide"]) == 0
    wide = "".join(_code_section(capsys.readouterr().out))
    assert wide.count(long_name) == 4  # scope and source of each op, whole


def test_scope_and_source_fit_the_room_path_first() -> None:
    from tpuperf.render.terminal import code_text

    path = "jit(train_step)/Transformer/Block_0/Attention/softmax/exp"
    assert code_text(path, "model.py:212", 80) == (path, "model.py:212")
    short_path, source = code_text(path, "model.py:212", 40)
    assert source == "model.py:212" and len(short_path) <= 40 - 2 - 12
    assert short_path.endswith("/Attention/softmax/exp")
    # A long source leaves the path a third of the room, and keeps its line number.
    assert code_text(path, "a" * 100 + ".py:7", 60)[1].endswith("aaa.py:7")
    assert len(code_text(path, "a" * 100 + ".py:7", 60)[1]) == 60 - 20
    # A short path leaves its room to a long source.
    assert code_text("jit(f)/add", "a_very_long_module_name_for_tests.py:1234", 30) == (
        "jit(f)/add",
        "a_very…tests.py:1234",  # 20 cells: the 30 less the path
    )


def test_each_idle_measure_has_one_name_in_every_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The V100 profile, where the two measures differ (memcpy time with no compute kernel is
    idle but not "no op"): the bar's "no op" is no_op_pct, "idle" is idle_pct wherever it is
    said (the footer, scan's column), and the no-op gaps add up to no_op_pct."""
    import re

    from conftest import shared_profile

    path = str(shared_profile("gpu/v100_8gpu_tf_training.xplane.pb"))
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["analyze", path, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    summary = data["summary"]
    idle, no_op = summary["idle_pct"], summary["no_op_pct"]
    assert f"{idle:.1f}" != f"{no_op:.1f}"  # 27.8 and 27.6: two measures to tell apart
    assert main(["analyze", path]) == 0
    text = capsys.readouterr().out
    said_no_op = re.findall(r"no op:? ([\d.]+)%", text)
    said_idle = re.findall(r"[Ii]dle[^:\d%]*?:? ([\d.]+)%", text)
    assert said_no_op and set(said_no_op) == {f"{no_op:.1f}"}
    assert said_idle and set(said_idle) == {f"{idle:.1f}"}
    between = re.search(r"between steps ([\d.]+)%, inside steps ([\d.]+)%", text)
    assert between is not None
    assert float(between[1]) + float(between[2]) == pytest.approx(no_op, abs=0.1)
    assert main(["scan", path, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert rows[0]["idle_pct"] == pytest.approx(idle)


@pytest.mark.parametrize("command", ["analyze", "report", "tree", "host", "diff"])
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--warmup", "-1"), "--warmup must be 0 or more"),
        (("--steps", "x:y"), "--steps"),
    ],
)
def test_every_command_checks_the_analysis_options_alike(
    cli, command: str, flags: tuple[str, ...], message: str
) -> None:
    # One check of --warmup and --steps (tpuperf.analysis.analysis_config) for every command
    # that takes them: the same exit code and message.
    paths = [CPU_FIXTURE, CPU_FIXTURE] if command == "diff" else [CPU_FIXTURE]
    code, _, err = cli(command, *paths, *flags)
    assert code == 2, err
    assert f"tpuperf: error: {message}" in err
