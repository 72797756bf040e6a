"""`tpuperf scan`: discovery, rows equal to `tpuperf analyze`, bad profiles, cache, formats, gates.

The tree: one run of every generated scenario (the straggler run has two hosts), a gzip-compressed
copy of one profile, three corrupt profiles and a file that is not a profile. Scans here run in
this process (``workers=1``); the process pool and Ray have their own test modules.
"""

from __future__ import annotations

import gzip
import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest

import tpuperf
from fixtures.generate import SCENARIOS, write_run
from tests.conftest import Cli
from tpuperf import scanning as scan_mod
from tpuperf.cli import main
from tpuperf.scanning import ROW_FIELDS

CORRUPT = ("garbage", "empty", "truncated")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet")
    for index, scenario in enumerate(SCENARIOS):
        write_run(scenario, root / f"job{index}", run_name=f"2026_01_0{index + 1}", seed=index)
    good = next((root / "job0").rglob("*.xplane.pb")).read_bytes()
    bad = root / "bad" / "plugins" / "profile" / "2026_02_01"
    bad.mkdir(parents=True)
    (bad / "garbage.xplane.pb").write_bytes(b"\x07not a profile at all" * 10)
    (bad / "empty.xplane.pb").write_bytes(b"")
    (bad / "truncated.xplane.pb").write_bytes(good[: len(good) // 2])
    zipped = root / "zipped" / "plugins" / "profile" / "2026_03_01"
    zipped.mkdir(parents=True)
    (zipped / "gz-host.xplane.pb.gz").write_bytes(gzip.compress(good))
    (zipped / "notes.txt").write_text("not a profile")
    return root


def _profiles(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*.xplane.pb*"))


@pytest.fixture(scope="module")
def baseline(tree: Path) -> pd.DataFrame:
    """The tree scanned in this process without a cache: the reference the other scans match."""
    return tpuperf.scan(tree, workers=1, cache=False)


@pytest.fixture(scope="module")
def warm_cache(tree: Path, baseline: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A cache that holds the tree, for tests about what is done with rows rather than making
    them (a cached row equals a computed one: test_cached_rescan_reads_no_profile_and_matches)."""
    directory = tmp_path_factory.mktemp("cache")
    tpuperf.scan(tree, workers=1, cache_dir=directory)
    return str(directory)


def _analyze_json(path: str, cli: Cli) -> dict:
    return cli.json("analyze", path, "--format", "json")


def _same(actual: object, expected: object) -> bool:
    if expected is None:
        return (
            actual is None or actual is pd.NA or (isinstance(actual, float) and math.isnan(actual))
        )
    return actual == expected


def test_one_row_per_host_profile_in_path_order(tree: Path, baseline: pd.DataFrame) -> None:
    assert list(baseline.columns) == list(ROW_FIELDS)
    assert {c: str(t) for c, t in baseline.dtypes.items()} == {
        name: dtype for name, (dtype, _) in ROW_FIELDS.items()
    }
    assert list(baseline["path"]) == _profiles(tree)
    assert (baseline["schema_version"] == scan_mod.SCHEMA_VERSION).all()
    errors = baseline[baseline["error"] != ""]
    assert sorted(errors["host"]) == sorted(CORRUPT)
    assert errors[["devices", "idle_pct", "top_recommendation.kind"]].isna().all().all()
    assert (
        errors.loc[errors["host"] == "empty", "error"]
        .item()
        .endswith("the file is empty; capture the profile again")
    )
    straggler = baseline[baseline["run"] == "2026_01_04"]
    assert list(straggler["host"]) == ["tpu-host-0", "tpu-host-1"]


def test_rows_equal_tpuperf_analyze(baseline: pd.DataFrame, cli: Cli) -> None:
    good = baseline[baseline["error"] == ""]
    assert len(good) == len(SCENARIOS) + 2  # straggler has two hosts; plus the gzip copy
    kinds = set()
    for row in good.to_dict("records"):
        report = _analyze_json(row["path"], cli)
        summary, recs = report["summary"], report["recommendations"]
        expected = {
            "platform": summary["platform"],
            "chip": summary["chip"],
            "devices": summary["devices"],
            "steps": summary["steps_analyzed"],
            "step_time_ms.median": summary["step_time_ms"]["median"],
            "step_time_ms.p90": summary["step_time_ms"]["p90"],
            "idle_pct": summary["idle_pct"],
            "exposed_collective_pct": summary["exposed_collective_pct"],
            "flops_utilization_pct": summary["flops_utilization_pct"],
            "top_recommendation.kind": recs[0]["kind"],
            "top_recommendation.est_savings_pct": recs[0]["est_savings_pct"],
            "recommendations": len(recs),
        }
        for name, value in expected.items():
            assert _same(row[name], value), (row["path"], name, row[name], value)
        kinds.add(row["top_recommendation.kind"])
    assert {"exposed_collective", "host_bound", "memory_bound"} <= kinds


def test_per_run_rows_equal_analyze_of_the_run(tree: Path, warm_cache: str, cli: Cli) -> None:
    frame = tpuperf.scan(tree, per_run=True, workers=1, cache_dir=warm_cache)
    run_dirs = sorted({str(Path(p).parent) for p in _profiles(tree)})
    assert list(frame["path"]) == run_dirs
    assert (frame["host"] == "").all()
    row = frame[frame["run"] == "2026_01_04"].iloc[0]
    report = _analyze_json(row["path"], cli)
    assert row["hosts"] == 2 == report["summary"]["hosts"]
    assert row["devices"] == report["summary"]["devices"] == 8
    assert row["exposed_collective_pct"] == report["summary"]["exposed_collective_pct"]
    assert row["top_recommendation.kind"] == report["recommendations"][0]["kind"]
    bad = frame[frame["run"] == "2026_02_01"].iloc[0]
    assert "not a readable XSpace" in bad["error"] or "empty" in bad["error"]


def test_discovery_globs_files_duplicates_and_missing(tree: Path) -> None:
    targets, notices = scan_mod.discover(
        [
            str(tree / "**" / "*.xplane.pb"),
            str(tree / "job0"),  # already matched by the glob: scanned once
            str(tree / "missing"),
        ]
    )
    plain = [p for p in _profiles(tree) if not p.endswith(".gz")]
    assert [t.path for t in targets] == plain
    assert [t.host for t in targets][:4] == ["empty", "garbage", "truncated", "tpu-host-0"]
    assert notices == [f"{tree / 'missing'}: no such file or directory"]
    single = str(tree / "zipped" / "plugins" / "profile" / "2026_03_01" / "gz-host.xplane.pb.gz")
    targets, _ = scan_mod.discover([single])
    assert [(t.host, t.run) for t in targets] == [("gz-host", "2026_03_01")]


def test_no_profiles_is_exit_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["scan", str(tmp_path / "empty"), str(tmp_path / "nope"), "--no-cache"]) == 4
    err = capsys.readouterr().err
    assert "no profiles found" in err and "nope: no such file or directory" in err
    with pytest.raises(tpuperf.TpuperfError, match="no profiles found"):
        tpuperf.scan(tmp_path / "empty", cache=False)


def test_cached_rescan_reads_no_profile_and_matches(
    tree: Path, baseline: pd.DataFrame, tmp_path: Path
) -> None:
    paths = [str(tree / "bad"), str(tree / "job1"), str(tree / "job3")]
    baseline = baseline[baseline["path"].str.contains("/job1/|/job3/|/bad/")].reset_index(drop=True)
    first_stats = scan_mod.ScanStats()
    targets, _ = scan_mod.discover(paths)
    options = scan_mod.make_options(cache_dir=tmp_path)
    first = scan_mod.to_frame(
        list(scan_mod.iter_rows(targets, options, workers=1, stats=first_stats))
    )
    assert first_stats.from_cache == 0 and first_stats.errors == len(CORRUPT)
    _age(tree)  # a file touched within the last 2 s is hashed again, not trusted by its stat
    list(scan_mod.iter_rows(targets, options, workers=1))  # records the stats of aged files
    second_stats = scan_mod.ScanStats()
    second = scan_mod.to_frame(
        list(scan_mod.iter_rows(targets, options, workers=1, stats=second_stats))
    )
    # Every profile is answered from the cache without reading it, the bad ones too.
    assert second_stats.from_cache == len(targets)
    pd.testing.assert_frame_equal(first, baseline)
    pd.testing.assert_frame_equal(second, baseline)


def test_a_bad_file_is_retried_once_it_changes(tree: Path, tmp_path: Path) -> None:
    bad = tmp_path / "run" / "h.xplane.pb"
    bad.parent.mkdir()
    bad.write_bytes(b"")
    _age(tmp_path)
    targets, _ = scan_mod.discover([str(bad)])
    options = scan_mod.make_options(cache_dir=tmp_path / "cache")
    (row,) = scan_mod.iter_rows(targets, options, workers=1)
    assert row["error"].endswith("the file is empty; capture the profile again")
    assert scan_mod.cached_row(targets[0], options) == row  # remembered while unchanged
    bad.write_bytes(next(tree.rglob("tpu-host-0.xplane.pb")).read_bytes())
    assert scan_mod.cached_row(targets[0], options) is None
    (row,) = scan_mod.iter_rows(targets, options, workers=1)
    assert row["error"] == "" and row["devices"] == 4


def test_damaged_cache_entries_are_rebuilt(
    tree: Path, baseline: pd.DataFrame, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache"
    tpuperf.scan(tree / "job3", workers=1, cache_dir=cache_dir)
    rows = sorted((cache_dir).rglob("rows/*/*.json"))
    blobs = sorted((cache_dir).rglob("tables/*/*/columns.bin"))
    assert len(rows) == 2 and len(blobs) == 2
    rows[0].write_text("{not json")
    data = blobs[0].read_bytes()
    blobs[0].write_bytes(data[: len(data) // 2])
    data = bytearray(blobs[1].read_bytes())
    middle = len(data) // 3
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    blobs[1].write_bytes(bytes(data))  # the same size, damaged inside
    again = tpuperf.scan(tree / "job3", workers=1, cache_dir=cache_dir)
    expected = baseline[baseline["run"] == "2026_01_04"].reset_index(drop=True)
    pd.testing.assert_frame_equal(again, expected)
    assert json.loads(rows[0].read_text())["row"]["devices"] == 4  # rewritten


def test_cli_formats(
    tree: Path, baseline: pd.DataFrame, warm_cache: str, tmp_path: Path, capsys
) -> None:
    cache = ["--cache-dir", warm_cache, "-j", "1"]
    assert main(["scan", str(tree), "--format", "ndjson", *cache]) == 0
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert all(list(line) == list(ROW_FIELDS) for line in lines)
    pd.testing.assert_frame_equal(scan_mod.to_frame(lines), baseline)
    assert f"scanned {len(baseline)} profiles" in captured.err

    out = tmp_path / "rows.parquet"
    assert main(["scan", str(tree), "--out", str(out), *cache]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(out), baseline)

    out = tmp_path / "rows.csv"
    assert main(["scan", str(tree), "-o", str(out), *cache]) == 0
    csv = pd.read_csv(out, keep_default_na=False, na_values=[""])
    assert list(csv.columns) == list(ROW_FIELDS)
    assert list(csv["path"]) == list(baseline["path"])
    good = baseline["error"] == ""
    assert list(csv.loc[good, "idle_pct"]) == list(baseline.loc[good, "idle_pct"])
    assert list(csv["error"].fillna("")) == list(baseline["error"])

    capsys.readouterr()
    assert main(["scan", str(tree), *cache]) == 0
    table = capsys.readouterr().out
    assert "2026_01_02/tpu-host-0" in table.replace("\n", "").replace(" ", "")
    assert "host_bound" in table
    assert "errors:" in table and "the file is empty" in table

    assert main(["scan", str(tree), "-f", "parquet", *cache]) == 2
    assert "-o FILE.parquet" in capsys.readouterr().err


def test_fail_on_gates(
    tree: Path, baseline: pd.DataFrame, warm_cache: str, tmp_path: Path, capsys
) -> None:
    cache = ["--cache-dir", warm_cache, "-j", "1"]
    out = tmp_path / "rows.ndjson"
    code = main(
        [
            "scan",
            str(tree),
            "-o",
            str(out),
            "--fail-on",
            "idle_pct>20",
            "--fail-on",
            "step_time_ms.median>=1000",
            *cache,
        ]
    )
    assert code == 3
    err = capsys.readouterr().err
    tripping = baseline[baseline["idle_pct"] > 20]
    assert len(tripping) >= 1
    assert f"gate idle_pct>20: tripped by {len(tripping)} profile" in err
    for path in tripping["path"]:
        assert f"{path}: idle_pct=" in err
    assert "gate step_time_ms.median>=1000: tripped" not in err  # no row trips it: not listed
    assert len(out.read_text().splitlines()) == len(baseline)  # the output is still complete

    assert main(["scan", str(tree), "--fail-on", "idle_pct>99", *cache]) == 0
    assert (
        main(["scan", str(tree), "--fail-on", "top_recommendation.kind==host_bound", *cache]) == 3
    )
    assert main(["scan", str(tree), "--fail-on", "error!=''", *cache]) == 3
    err = capsys.readouterr().err
    assert "truncated.xplane.pb: error=" in err


def test_a_gate_on_an_unknown_value_says_it_was_not_evaluated(
    tree: Path, baseline: pd.DataFrame, warm_cache: str, capsys
) -> None:
    """A gate passes where its field has no value (an error row has no idle_pct, a CPU profile
    no MFU); the scan says on how many profiles, as diff does."""
    cache = ["--cache-dir", warm_cache, "-j", "1"]
    capsys.readouterr()
    assert main(["scan", str(tree), "--fail-on", "idle_pct>99", "-f", "ndjson", *cache]) == 0
    err = capsys.readouterr().err
    missing = int(baseline["idle_pct"].isna().sum())
    assert missing >= 1  # the truncated file's row
    plural = "s" if missing != 1 else ""
    assert (
        f"tpuperf: note: gate idle_pct>99 not evaluated on {missing} profile{plural}: "
        "idle_pct is unknown there"
    ) in err
    assert main(["scan", str(tree), "--fail-on", "error!=''", "-f", "ndjson", *cache]) == 3
    assert "not evaluated" not in capsys.readouterr().err  # error is known on every row


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("idle>20", "no field 'idle'"),
        ("idle_pct>>20", "not a number"),
        ("idle_pct", "expected FIELD OP VALUE"),
        ("chip>3", "chip is text; use == or !="),
    ],
)
def test_bad_gate_is_a_usage_error_listing_fields(expression, message, tree: Path, capsys) -> None:
    assert main(["scan", str(tree), "--no-cache", "--fail-on", expression]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "step_time_ms.median" in err and "exposed_collective_pct" in err
    assert "scanned" not in err  # refused before any profile is read


def test_gate_semantics() -> None:
    gate = scan_mod.parse_gate(" step_time_ms.median >= 120 ")
    assert (gate.field, gate.op, gate.value) == ("step_time_ms.median", ">=", 120.0)
    assert gate.trips({"step_time_ms.median": 120.0})
    assert not gate.trips({"step_time_ms.median": 119.9})
    assert not gate.trips({"step_time_ms.median": None})  # unknown never trips
    assert not gate.trips({"step_time_ms.median": float("nan")})
    assert scan_mod.parse_gate('chip=="TPU v6 Lite"').trips({"chip": "TPU v6 Lite"})


def test_interrupt_leaves_no_output_file(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    real = scan_mod.scan_one
    calls = []

    def interrupted(target, options):
        calls.append(target.path)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(target, options)

    monkeypatch.setattr(scan_mod, "scan_one", interrupted)
    out = tmp_path / "out" / "rows.ndjson"
    out.parent.mkdir()
    out.write_text("previous\n")
    assert main(["scan", str(tree), "-o", str(out), "-j", "1", "--no-cache"]) == 130
    assert out.read_text() == "previous\n"  # the old file stays, whole
    assert sorted(p.name for p in out.parent.iterdir()) == ["rows.ndjson"]  # no temporary left
    assert "scanned" not in capsys.readouterr().err


def test_usage_errors(tree: Path, tmp_path: Path, capsys) -> None:
    assert main(["scan", str(tree), "--no-cache", "--cache-dir", str(tmp_path)]) == 2
    assert main(["scan", str(tree), "--no-cache", "--workers", "0"]) == 2
    assert main(["scan", str(tree), "--no-cache", "--engine", "spark"]) == 2
    assert main(["scan", str(tree), "--no-cache", "--engine", "local", "--ray-address", "x"]) == 2


def test_help_has_an_example(capsys) -> None:
    assert main(["scan", "--help"]) == 0
    out = capsys.readouterr().out
    assert "Example" in out and "--fail-on" in out


def test_python_api_accepts_one_path_or_many(
    tree: Path, baseline: pd.DataFrame, warm_cache: str
) -> None:
    files = [p for p in _profiles(tree) if "job1" in p or "job2" in p]
    frame = tpuperf.scan([Path(f) for f in reversed(files)], workers=1, cache_dir=warm_cache)
    assert list(frame["path"]) == list(reversed(files))  # given order, then sorted within a path
    expected = baseline.set_index("path").loc[list(reversed(files))].reset_index()
    pd.testing.assert_frame_equal(frame, expected[list(ROW_FIELDS)])


def test_readme_documents_every_row_field() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    if "tpuperf scan" not in readme or "step_time_ms.median" not in readme:
        pytest.skip("README has no `tpuperf scan` row schema section yet")
    missing = [name for name in ROW_FIELDS if f"`{name}`" not in readme]
    assert not missing, f"README does not document scan row fields: {missing}"


def _age(root: Path) -> None:
    import os
    import time

    past = time.time() - 60
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (past, past))


def test_to_frame_of_no_rows_has_the_schema() -> None:
    frame = scan_mod.to_frame([])
    assert len(frame) == 0 and list(frame.columns) == list(ROW_FIELDS)
    buffer = io.BytesIO()
    frame.to_parquet(buffer)


def test_a_path_with_an_escape_byte_keeps_its_value_in_data_formats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CSV wrote the path as the text ``\\x1b[2J``, so the row no longer named the file:
    data formats hold the real value; only a terminal shows the written-out form."""
    import csv

    import pyarrow.parquet as pq

    from tests.conftest import CPU_FIXTURE

    profile = tmp_path / "runs" / "a\x1b[2J.xplane.pb"
    profile.parent.mkdir()
    profile.write_bytes(CPU_FIXTURE.read_bytes())
    paths = {}
    for suffix in ("csv", "json", "ndjson", "parquet"):
        out = tmp_path / f"x.{suffix}"
        assert main(["scan", str(profile.parent), "--out", str(out)]) == 0
        if suffix == "csv":
            (row,) = csv.DictReader(out.open(newline="", encoding="utf-8"))
        elif suffix == "json":
            (row,) = json.loads(out.read_text())["rows"]
        elif suffix == "ndjson":
            (row,) = [json.loads(line) for line in out.read_text().splitlines()]
        else:
            (row,) = pq.read_table(out).to_pylist()
        paths[suffix] = (row["path"], row["host"])
    assert set(paths.values()) == {(str(profile), "a\x1b[2J")}, paths
    assert Path(paths["csv"][0]).read_bytes() == CPU_FIXTURE.read_bytes()  # it names the file

    capsys.readouterr()
    monkeypatch.setattr("tpuperf.output._isatty", lambda stream: True)
    assert main(["scan", str(profile.parent), "--format", "csv"]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "a\\x1b[2J.xplane.pb" in shown
