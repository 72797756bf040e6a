"""The cache's report entries: an analysis read back instead of run again by `analyze` and
`report`, equal to the one it replaces in every format, keyed by all that made it, and
rebuilt (with one note) when damaged."""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tpuperf.analyzers import base
from tpuperf.analyzers.base import Recommendation

import tpuperf.analysis
import tpuperf.cli._common
import tpuperf.diffing
from tests.conftest import CPU_FIXTURE, Cli, shared_profile
from tests.test_golden import REAL
from tpuperf import cache as cache_mod
from tpuperf.cache import Cache
from tpuperf.columns import Lookup, Strings, Table
from tpuperf.config import AnalysisConfig

FIXTURES = CPU_FIXTURE.parent


def _entries(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("report.json"))


def _must_not_analyze(*args: object, **kwargs: object) -> None:
    raise AssertionError("analysed although the cache holds this report")


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    """A copy of the CPU fixture of its own (the test may change it)."""
    copy = tmp_path / "run" / CPU_FIXTURE.name
    copy.parent.mkdir()
    shutil.copyfile(CPU_FIXTURE, copy)
    past = time.time() - 60  # settled: its stat stands in for its content
    os.utime(copy, (past, past))
    return copy


@pytest.fixture
def cached(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("TPUPERF_CACHE_DIR", str(root))
    return root


def _same_type_and_value(got: Any, want: Any) -> None:
    assert type(got) is type(want), (got, want)
    if isinstance(want, dict):
        assert list(got) == list(want)
        for (gk, gv), (wk, wv) in zip(got.items(), want.items(), strict=True):
            _same_type_and_value(gk, wk)
            _same_type_and_value(gv, wv)
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same_type_and_value(g, w)
    elif isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
    elif isinstance(want, Table):
        assert list(got) == list(want) and got.n == want.n
        for name in want:
            assert type(got[name]) is type(want[name]), name
            if isinstance(want[name], Strings):
                assert got.strings(name).tolist() == want.strings(name).tolist(), name
                continue
            g, w = np.asarray(got.array(name)), np.asarray(want.array(name))
            assert g.dtype == w.dtype and g.tolist() == w.tolist(), name
    elif isinstance(want, float) and math.isnan(want):
        assert math.isnan(got)
    elif isinstance(want, np.generic):
        assert got.dtype == want.dtype and (got == want or (np.isnan(got) and np.isnan(want)))
    elif hasattr(want, "__dataclass_fields__"):
        for name in want.__dataclass_fields__:
            _same_type_and_value(getattr(got, name), getattr(want, name))
    else:
        assert got == want


def test_values_read_back_equal_and_of_the_same_types(tmp_path: Path) -> None:
    table = Table(
        {
            "name": Strings(np.array([1, 0, 1], dtype=np.int32), ("a", "b")),
            "kind": Lookup(np.array([0, 1, 0], dtype=np.int64), np.array([2.5, -1.0])),
            "ps": np.array([3, 1, 2], dtype=np.int64),
            "bound": np.array([None, "memory", 1.5], dtype=object),
        }
    )
    recommendation = Recommendation(
        analyzer="steps",
        kind="k",
        title="t",
        evidence="e",
        fix={"jax": "f"},
        est_savings_ms=1.5,
        est_savings_pct=float("nan"),
        confidence="high",
        values={"n": np.int64(3), "share": np.float32(0.25), "ok": np.bool_(True)},
    )
    values = {
        "plain": [None, True, 0, -7, 2**70, "é", 1.0, -0.0],
        "floats": (float("inf"), float("-inf"), float("nan")),
        "keys": {("tuple", 1): {1: "int key", (2, "x"): [(), {}]}},
        "array": np.arange(6, dtype=np.float32).reshape(2, 3),
        "empty": np.zeros(0, dtype=np.int64),
        "table": table,
        "recommendations": [recommendation],
        "config": AnalysisConfig(steps=(2, None), peak_tflops=9.5),
    }
    cache = Cache(tmp_path)
    cache.put_report("key", values)
    _same_type_and_value(cache.get_report("key"), values)
    assert cache.hits == 1


@pytest.mark.parametrize(
    "value",
    [
        Path("/tmp"),  # not tpuperf's
        {1, 2},  # a set
        np.array(["a"]),  # strings as numpy keeps them
        np.array([1 + 2j]),  # complex
    ],
    ids=["path", "set", "unicode_array", "complex"],
)
def test_values_it_cannot_keep_leave_the_entry_out(value: Any, tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    cache.put_report("key", {"value": value})
    assert cache.get_report("key") is None and not _entries(tmp_path)


def test_a_dataclass_that_computes_more_than_its_fields_is_not_kept(tmp_path: Path) -> None:
    from tpuperf.scopes import _Node

    cache = Cache(tmp_path)
    cache.put_report("key", {"node": _Node("a", "scope", ())})
    assert cache.get_report("key") is None


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("truncate_meta", "report.json is not JSON"),
        ("other_version", "written by tpuperf 0.0.1"),
        ("foreign_type", "os:system, not one of tpuperf's types"),
        ("unknown_tag", "a value tagged 'pickle'"),
        ("finite_tagged_float", "a tagged float"),
        ("fields_changed", "with fields"),
        ("truncate_blob", "columns.bin changed since it was written"),
        ("delete_meta", "report.json is missing"),
    ],
)
def test_a_damaged_report_is_said_removed_and_analysed_again(
    damage: str, reason: str, cli: Cli, profile: Path, cached: Path
) -> None:
    args = ["analyze", str(profile), "--format", "json"]
    want = cli.json(*args, "--no-cache")
    assert cli.json(*args) == want
    (entry,) = _entries(cached)
    meta_path, blob = entry / "report.json", entry / "columns.bin"
    meta = json.loads(meta_path.read_text())
    # The report's fields, as [name, value] pairs (beside the profile's notes).
    fields = next(value for name, value in meta["values"]["v"] if name == "report")["v"]
    if damage == "truncate_meta":
        meta_path.write_text(meta_path.read_text()[:100])
    elif damage == "other_version":
        meta["version"] = "0.0.1"
    elif damage == "foreign_type":
        config = next(pair for pair in fields if pair[0] == "config")
        config[1]["type"] = "os:system"
    elif damage == "unknown_tag":
        notes = next(pair for pair in fields if pair[0] == "notes")
        notes[1] = {"$": "pickle", "v": "gASV"}
    elif damage == "finite_tagged_float":
        notes = next(pair for pair in fields if pair[0] == "notes")
        notes[1] = {"$": "float", "v": "1.5"}
    elif damage == "fields_changed":
        config = next(pair for pair in fields if pair[0] == "config")
        config[1]["v"]["extra"] = 1
    elif damage == "truncate_blob":
        blob.write_bytes(blob.read_bytes()[:-8])
    elif damage == "delete_meta":
        meta_path.unlink()
    assert fields  # the entry holds the report's fields
    edited = ("other_version", "foreign_type", "unknown_tag", "finite_tagged_float")
    if damage in (*edited, "fields_changed"):
        meta_path.write_text(json.dumps(meta))
    code, out, err = cli(*args)
    assert code == 0 and json.loads(out) == want
    (note,) = [line for line in err.splitlines() if "cache entry" in line]
    assert reason in note and "unusable" in note, note
    # Rebuilt as the command ended: the next one reads it, and says nothing.
    assert len(_entries(cached)) == 1
    code, out, err = cli(*args)
    assert code == 0 and json.loads(out) == want and "cache entry" not in err


@pytest.mark.parametrize(
    ("first", "then"),
    [
        (["analyze", "--format", "json"], ["analyze", "--format", "json"]),
        (["analyze", "--format", "md"], ["analyze", "--format", "md"]),
        (["analyze", "--format", "table", "--wide"], ["analyze", "--format", "table"]),
        (["report", "-o", "{out}"], ["report", "-o", "{out}"]),
        (["analyze", "-o", "{out}"], ["analyze", "--format", "md"]),
        (["report", "-o", "{out}"], ["analyze", "--format", "json"]),
        # An entry ranks RANKED_OPS ops: any --top up to that reads it.
        (["report", "-o", "{out}"], ["analyze", "--format", "html"]),
        (["analyze", "--format", "json"], ["analyze", "--format", "json", "--top", "3"]),
        (["analyze", "--top", "2"], ["analyze", "--format", "json", "--top", "100"]),
        (["analyze", "--format", "json"], ["analyze", "--format", "json", "--top", "0"]),
    ],
    ids=[
        "json",
        "md",
        "table",
        "report",
        "html_then_md",
        "report_then_json",
        "report_then_html",
        "top_10_then_3",
        "top_2_then_100",
        "top_10_then_0",
    ],
)
def test_a_report_read_back_prints_what_analysing_prints(
    first: list[str],
    then: list[str],
    cli: Cli,
    profile: Path,
    cached: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")

    def run(args: list[str], name: str, *more: str) -> str:
        out_file = tmp_path / f"{name}.html"
        argv = [a.replace("{out}", str(out_file)) for a in args]
        code, out, err = cli(argv[0], str(profile), *argv[1:], *more)
        assert code == 0, err
        return out_file.read_text() if "{out}" in args else out

    want = run(then, "cold", "--no-cache")
    run(first, "first")
    assert _entries(cached)
    monkeypatch.setattr(tpuperf.analysis, "analyze", _must_not_analyze)
    assert run(then, "served") == want


def test_anything_that_made_the_report_keys_it(
    cli: Cli, profile: Path, cached: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each option (but a --top of at most RANKED_OPS), the file's content and the tpuperf
    version give another entry; the report read back under each equals the one analysed
    without the cache."""
    base_args = ["analyze", str(profile), "--format", "json"]
    variants = [
        [],
        ["--warmup", "0"],
        ["--steps", "2:4"],
        ["--top", str(tpuperf.analysis.RANKED_OPS + 1)],
        ["--top", "1000"],
        ["--analyzer", "steps"],
        ["--analyzer", "steps", "--analyzer", "idle"],
        ["--peak-tflops", "100"],
        ["--peak-hbm-gbps", "50"],
    ]
    variants.append(["--host", tpuperf.load(profile).hosts[0].host])
    for count, more in enumerate(variants, 1):
        want = cli.json(*base_args, *more, "--no-cache")
        assert cli.json(*base_args, *more) == want
        assert len(_entries(cached)) == count, more
    with monkeypatch.context() as patch:
        patch.setattr(tpuperf.analysis, "analyze", _must_not_analyze)
        for more in variants:
            cli.json(*base_args, *more)
    # Another file's bytes at the same path: analysed again.
    profile.write_bytes((FIXTURES / "host_markers.xplane.pb").read_bytes())
    want = cli.json(*base_args, "--no-cache")
    assert cli.json(*base_args) == want and len(_entries(cached)) == len(variants) + 1
    # Another tpuperf: analysed again.
    monkeypatch.setattr(cache_mod, "code_version", lambda: "99.0")
    assert cli.json(*base_args) == want and len(_entries(cached)) == len(variants) + 2


def test_diff_reads_back_and_keeps_each_runs_analysis(
    cli: Cli, profile: Path, cached: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """diff analyses each run as analyze does, and through the same cache: a run analyze (or
    an earlier diff) analysed under the same options is read back, one diff analyses is kept
    for analyze; the output equals the one analysed without the cache."""
    other = tmp_path / "other" / "host_markers.xplane.pb"
    other.parent.mkdir()
    shutil.copyfile(FIXTURES / "host_markers.xplane.pb", other)
    past = time.time() - 60
    os.utime(other, (past, past))
    analysed: list[str] = []
    analyze = tpuperf.analysis.analyze

    def counted(profile: Any, *args: Any, **kwargs: Any) -> Any:
        analysed.append(Path(profile.source).name)
        return analyze(profile, *args, **kwargs)

    monkeypatch.setattr(tpuperf.analysis, "analyze", counted)
    for more in ([], ["--steps", "2:8"]):
        diff = ["diff", str(profile), str(other), "--format", "json", *more]
        want = cli.json(*diff, "--no-cache")
        assert cli.json("analyze", str(profile), "--format", "json", *more)
        analysed.clear()
        assert cli.json(*diff) == want
        assert analysed == [other.name]  # BASE read back
        assert cli.json(*diff) == want
        assert cli.json("analyze", str(other), "--format", "json", *more)
        assert analysed == [other.name]  # then both, and NEW for analyze
    # The same run on both sides: analysed once.
    analysed.clear()
    assert cli.json("diff", str(other), str(other), "--format", "json", "--warmup", "0")
    assert analysed == [other.name]


def _kept(entry: Path) -> str:
    """What a report entry keeps: ``report`` (an analysis) or ``diff`` (a comparison)."""
    values = json.loads((entry / "report.json").read_text())["values"]
    return str(values["v"][0][0])


def _must_not_load(*args: object, **kwargs: object) -> None:
    raise AssertionError("read a profile although the cache holds this diff")


def _must_not_compare(*args: object, **kwargs: object) -> None:
    raise AssertionError("compared although the cache holds this diff")


def test_a_diff_made_before_is_read_back_whole(
    cli: Cli, tmp_path: Path, cached: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A diff of the same runs under the same options is read back, without reading a
    profile or comparing again: the same output in every format, the same notes of loading
    each run, the same gates; a changed file, or a damaged entry (said in one note), is
    compared again."""
    monkeypatch.setenv("COLUMNS", "80")
    logdir = tmp_path / "logdir"
    for run, name in (("r1", "diff_cnn_b16"), ("r2", "diff_cnn_b64")):
        target = logdir / "plugins" / "profile" / run / "host.xplane.pb"
        target.parent.mkdir(parents=True)
        shutil.copyfile(FIXTURES / f"{name}.xplane.pb", target)
        past = time.time() - 60  # settled: its stat stands in for its content
        os.utime(target, (past, past))
    formats = (["-f", "json"], [], ["-f", "md", "--top", "3"])
    gate = ["-f", "json", "--fail-on", "verdict!=no_change", "--fail-on", "mfu_pct.delta>1"]
    for runs in ([], ["--base-run", "r1", "--new-run", "r2"], ["--steps", "2:8"]):
        args = ["diff", logdir, logdir, *runs]
        want = [cli(*args, *more, "--no-cache") for more in [*formats, gate]]
        assert "reading the latest of 2 runs" in want[0][2] or runs
        assert cli(*args, *formats[0]) == want[0]  # compared, and kept
        with monkeypatch.context() as patch:
            patch.setattr(tpuperf.cli._common, "load_profile", _must_not_load)
            patch.setattr(tpuperf.diffing, "compare_sides", _must_not_compare)
            for more, wanted in zip([*formats, gate], want, strict=True):
                assert cli(*args, *more) == wanted, more
    # Another file's bytes in a run: compared again.
    changed = logdir / "plugins" / "profile" / "r2" / "host.xplane.pb"
    changed.write_bytes((FIXTURES / "diff_lm_f32.xplane.pb").read_bytes())
    args = ["diff", logdir, logdir, "--base-run", "r1", "--new-run", "r2", "-f", "json"]
    want = cli(*args, "--no-cache")
    assert cli(*args) == want
    # A damaged entry: said, and compared again.
    diffs = [e for e in _entries(cached) if _kept(e) == "diff"]
    assert len(diffs) == 4  # one per comparison made
    for damaged in diffs:
        (damaged / "report.json").write_text("{")
    code, out, err = cli(*args)
    assert (code, out) == want[:2] and "unusable" in err


def _must_not_build_a_timeline(*args: object, **kwargs: object) -> None:
    raise AssertionError("built a timeline although the cache holds the page's data")


@pytest.mark.parametrize("first", [["analyze", "--format", "json"], ["analyze", "--top", "3"]])
def test_html_after_another_format_builds_the_timeline_alone(
    first: list[str],
    cli: Cli,
    profile: Path,
    cached: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The page draws data the other formats do not compute: after analyze, report reads the
    analysis back and builds only the timeline that data is made of (keeping a second entry,
    with it), and the next time reads that entry back, timeline and all."""
    import tpuperf.timeline

    page = tmp_path / "page.html"
    want = (cli("report", str(profile), "-o", str(page), "--no-cache"), page.read_text())
    cli(first[0], str(profile), *first[1:])
    assert len(_entries(cached)) == 1
    monkeypatch.setattr(tpuperf.analysis, "analyze", _must_not_analyze)
    assert (cli("report", str(profile), "-o", str(page)), page.read_text()) == want
    assert len(_entries(cached)) == 2
    monkeypatch.setattr(tpuperf.timeline, "build_timeline", _must_not_build_a_timeline)
    assert (cli("report", str(profile), "-o", str(page)), page.read_text()) == want


def test_a_plug_in_analyzer_is_never_read_back(
    cli: Cli, profile: Path, cached: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plug-in's code is not tpuperf's, whose version keys the entry: with one installed,
    an analysis that runs it is not kept; one of built-ins only is."""
    monkeypatch.setattr(base, "entry_point_names", lambda: ["mine"])
    args = ["analyze", str(profile), "--format", "json"]
    cli.json(*args)
    assert not _entries(cached)
    cli.json(*args, "--analyzer", "roofline")
    assert len(_entries(cached)) == 1


def test_a_command_that_fails_keeps_no_report(
    cli: Cli, profile: Path, cached: Path, tmp_path: Path
) -> None:
    code, _, err = cli("analyze", str(profile), "-o", str(profile / "r.json"))  # (a file)
    assert code != 0 and err
    assert not _entries(cached)
    code, _, _ = cli("analyze", str(profile), "--format", "json", "--no-cache")
    assert code == 0 and not _entries(cached)


@pytest.mark.parametrize("relative", REAL)
def test_a_real_profiles_report_read_back_draws_the_same_page_and_table(
    relative: str, cli: Cli, cached: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    path = str(shared_profile(relative))

    def outputs(*more: str) -> tuple[str, str]:
        page = tmp_path / "page.html"
        code, _, err = cli("report", path, "-o", str(page), *more)
        assert code == 0, err
        code, table, err = cli("analyze", path, "--format", "table", "--top", "25", *more)
        assert code == 0, err
        return page.read_text(), table

    want = outputs("--no-cache")
    outputs()  # the report, stored with its page
    monkeypatch.setattr(tpuperf.analysis, "analyze", _must_not_analyze)
    assert outputs() == want


def _must_not_read_tables(*args: object, **kwargs: object) -> None:
    raise AssertionError("read the profile's tables although its report is kept")


def test_a_report_read_back_reads_none_of_the_tables(
    cli: Cli, profile: Path, cached: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unchanged file's content key is its stat's: the report is found, and read, without
    its tables (a large profile's may have left the page cache)."""
    args = ["analyze", str(profile), "--format", "json"]
    want = cli.json(*args)
    monkeypatch.setattr(cache_mod, "host_tables", _must_not_read_tables)
    monkeypatch.setattr(tpuperf.analysis, "analyze", _must_not_analyze)
    assert cli.json(*args) == want


def test_a_touched_file_is_hashed_and_its_report_read_back(
    cli: Cli, profile: Path, cached: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["analyze", str(profile), "--format", "json"]
    want = cli.json(*args)
    profile.write_bytes(profile.read_bytes())  # the same bytes, another mtime
    assert cache_mod.known_files(profile, cache=Cache(cached)) is None
    monkeypatch.setattr(tpuperf.analysis, "analyze", _must_not_analyze)
    assert cli.json(*args) == want


def test_report_says_the_profiles_notes_whether_read_back_or_not(
    cli: Cli, cached: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logdir = tmp_path / "logdir"
    for run in ("2026_01_01_00_00_01", "2026_01_01_00_00_02"):
        (logdir / "plugins" / "profile" / run).mkdir(parents=True)
        shutil.copyfile(CPU_FIXTURE, logdir / "plugins" / "profile" / run / "h.xplane.pb")
    page = tmp_path / "page.html"
    code, _, analysed = cli("report", str(logdir), "-o", str(page))
    assert code == 0 and "reading the latest of 2 runs" in analysed
    want = page.read_text()
    monkeypatch.setattr(tpuperf.analysis, "analyze", _must_not_analyze)
    code, _, served = cli("report", str(logdir), "-o", str(page))
    assert code == 0 and served == analysed and page.read_text() == want
    # Another run: other files, another report.
    newer = logdir / "plugins" / "profile" / "2026_01_01_00_00_03"
    newer.mkdir()
    shutil.copyfile(FIXTURES / "host_markers.xplane.pb", newer / "h.xplane.pb")
    monkeypatch.undo()
    code, _, err = cli("report", str(logdir), "-o", str(page))
    assert code == 0 and "reading the latest of 3 runs" in err and page.read_text() != want


def test_report_entries_are_bounded_with_the_tables_least_recently_used_first(
    tmp_path: Path,
) -> None:
    values = {"column": np.arange(1000, dtype=np.int64)}  # 8,000 bytes and its JSON
    cache = Cache(tmp_path, max_bytes=20_000)
    cache.put_report("a" * 64, values)
    cache.put_report("b" * 64, values)
    assert cache.get_report("a" * 64) is not None  # a: used last
    Cache(tmp_path, max_bytes=20_000).put_report("c" * 64, values)
    kept = Cache(tmp_path, max_bytes=20_000)
    assert kept.get_report("b" * 64) is None  # b, the least recently used, went
    assert kept.get_report("a" * 64) is not None and kept.get_report("c" * 64) is not None


@pytest.mark.parametrize("relative", REAL)
def test_a_real_profiles_page_after_analyze_is_the_page_analysing_draws(
    relative: str, cli: Cli, cached: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(shared_profile(relative))
    page = tmp_path / "page.html"
    code, _, err = cli("report", path, "-o", str(page), "--no-cache")
    assert code == 0, err
    want = page.read_text()
    cli.json("analyze", path, "--format", "json")  # kept without the page's data
    monkeypatch.setattr(tpuperf.analysis, "analyze", _must_not_analyze)
    code, _, err = cli("report", path, "-o", str(page))
    assert code == 0 and page.read_text() == want, err


def test_a_command_asks_the_object_store_once_for_each_files_key(
    cli: Cli, profile: Path, cached: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report is looked for before the profile is loaded, and the load reads the same
    files: an object store's listing (a network request a file) is asked for once."""
    asked: list[str] = []
    real = cache_mod._stated_key

    def stated_key(url: str) -> str | None:
        asked.append(url)
        return real(url)

    monkeypatch.setattr(cache_mod, "_stated_key", stated_key)
    cli.json("analyze", str(profile), "--format", "json")  # analysed: looked for, then loaded
    assert len(asked) == 1 and asked[0].endswith(profile.name)
