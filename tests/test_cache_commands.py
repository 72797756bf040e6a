"""The commands read profiles through the cache: the second command on an unchanged file is
served from it (decoding made impossible, never judged by timing), a changed file never is,
--no-cache and TPUPERF_CACHE_DIR, the size bound and what it evicts, writers racing for one
entry, and damaged entries noted once and rebuilt."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from fixtures.generate import write_run
from tests.conftest import REPO, Cli
from tpuperf import cache as cache_mod
from tpuperf.cache import Cache
from tpuperf.errors import BadProfile


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {
        s: write_run(s, root, run_name=s, seed=5, steps=4)[0]
        for s in ("straggler", "collective_training", "memory_bound", "host_bound")
    }


def _settled_copy(source: Path, target: Path) -> Path:
    """A copy of ``source`` whose mtime lies in the past (its stat may stand in for it)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, target)
    os.utime(target, (1_700_000_000, 1_700_000_000))
    return target


def _must_not_decode(*args: object) -> None:
    raise AssertionError("decoded although the cache holds these tables")


def _entries(root: str | Path) -> list[Path]:
    return sorted(p.parent for p in Path(root).rglob("host.json"))


# (command, arguments after the profile, JSON on stdout?)
READERS = [
    ("info", ["--format", "json"]),
    ("ops", ["--format", "json", "--by", "category"]),
    ("analyze", ["--format", "json"]),
    ("tree", ["--format", "json"]),
    ("host", ["--format", "json"]),
    ("memory", ["--format", "json"]),
]


def test_every_reading_command_is_served_from_the_cache_with_the_same_output(
    cli: Cli, runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TPUPERF_CACHE_DIR", str(tmp_path / "cache"))
    run = str(runs["straggler"])
    hosts = len(list(runs["straggler"].glob("*.xplane.pb")))
    assert hosts > 1
    cold = {name: cli.json(name, run, *args, "--no-cache") for name, args in READERS}
    cold["diff"] = cli.json("diff", run, run, "--format", "json", "--no-cache")
    assert not (tmp_path / "cache").exists()  # --no-cache writes nothing
    code, _, err = cli("info", run)  # the first command decodes and stores
    assert code == 0 and "cache" not in err
    assert len(_entries(tmp_path / "cache")) == hosts  # one per host file of the run
    monkeypatch.setattr(cache_mod, "decode_host", _must_not_decode)
    for name, args in READERS:
        assert cli.json(name, run, *args) == cold[name], name
    assert cli.json("diff", run, run, "--format", "json") == cold["diff"]
    # The commands that write files read their tables from it too.
    code, _, err = cli("report", run, "-o", tmp_path / "r.html")
    assert code == 0, err
    code, _, err = cli("export", run, "-o", tmp_path / "t.pftrace")
    assert code == 0, err
    monkeypatch.undo()
    monkeypatch.setenv("TPUPERF_CACHE_DIR", str(tmp_path / "cache"))
    code, _, err = cli("export", run, "-o", tmp_path / "cold.pftrace", "--no-cache")
    assert code == 0, err
    assert (tmp_path / "t.pftrace").read_bytes() == (tmp_path / "cold.pftrace").read_bytes()


def test_no_cache_neither_reads_nor_writes(
    cli: Cli, runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("TPUPERF_CACHE_DIR", str(cache_dir))
    run = str(runs["memory_bound"])
    expected = cli.json("ops", run, "--format", "json")
    assert _entries(cache_dir)

    def refuse(*args: object) -> None:
        raise AssertionError("--no-cache looked in the cache")

    monkeypatch.setattr(Cache, "get_tables", refuse)
    monkeypatch.setattr(Cache, "put_tables", refuse)
    assert cli.json("ops", run, "--format", "json", "--no-cache") == expected


def _stored(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, cache_dir: Path, command: str, profile: Path
) -> tuple[Any, Path]:
    """``tpuperf COMMAND PROFILE --format json`` with the cache in ``cache_dir`` (empty
    before): its JSON and the one cache entry it stored."""
    monkeypatch.setenv("TPUPERF_CACHE_DIR", str(cache_dir))
    document = cli.json(command, profile, "--format", "json")
    (entry,) = _entries(cache_dir)
    return document, entry


def test_tpuperf_cache_dir_is_where_entries_go(
    cli: Cli, runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host_file = runs["host_bound"] / "tpu-host-0.xplane.pb"
    expected, entry = _stored(cli, monkeypatch, tmp_path / "here", "info", host_file)
    assert entry.relative_to(tmp_path / "here").parts[:2] == (cache_mod.FORMAT, "tables")
    assert {p.name for p in entry.iterdir()} == {"columns.bin", "host.json"}
    # Deleting it is safe: the next command decodes again and fills it again.
    shutil.rmtree(tmp_path / "here")
    assert cli.json("info", host_file, "--format", "json") == expected
    assert _entries(tmp_path / "here") == [entry]


def _variant(data: bytes, old: bytes, new: bytes) -> bytes:
    assert len(old) == len(new) and old in data
    return data.replace(old, new)


@pytest.mark.parametrize("settled", [True, False], ids=["same_mtime", "just_written"])
def test_a_changed_file_is_never_served_stale(
    cli: Cli, runs: dict[str, Path], tmp_path: Path, settled: bool
) -> None:
    path = _settled_copy(runs["memory_bound"] / "tpu-host-0.xplane.pb", tmp_path / "p.xplane.pb")
    before = cli.json("ops", path, "--format", "json", "--by", "op")
    ops = [row["op"] for row in before["rows"]]
    old = next(op for op in ops if len(op) >= 6).encode()
    new = old[:-1] + (b"Q" if old[-1:] != b"Q" else b"R")
    stat = os.stat(path)
    # The same size and, for the settled case, the same mtime as the cached file: only the
    # content (and the ctime, which no one can set) moved.
    path.write_bytes(_variant(path.read_bytes(), old, new))
    if settled:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert os.stat(path).st_size == stat.st_size
    after = cli.json("ops", path, "--format", "json", "--by", "op")
    assert after == cli.json("ops", path, "--format", "json", "--by", "op", "--no-cache")
    assert new.decode() in [row["op"] for row in after["rows"]]
    assert old.decode() not in [row["op"] for row in after["rows"]]


def test_a_command_waits_for_its_cache_entry_and_says_what_broke_writing_it(
    cli: Cli, runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TPUPERF_CACHE_DIR", str(tmp_path / "cache"))
    host_file = runs["host_bound"] / "tpu-host-0.xplane.pb"
    expected = cli.json("info", host_file, "--format", "json", "--no-cache")

    def fail(self: Cache, key: str, tables: Any) -> None:
        raise RuntimeError("the writer broke")

    monkeypatch.setattr(Cache, "_store_tables", fail)
    # The output is written, then the command waits for the entry and fails as it would
    # have storing it in place: an internal error, said once.
    code, out, err = cli("info", host_file, "--format", "json")
    assert code == 1 and json.loads(out) == expected
    assert err.count("internal error: RuntimeError: the writer broke") == 1
    # A command that fails of its own after reading says its own error, not the writer's.
    (tmp_path / "file").write_text("")
    code, _, err = cli("info", host_file, "--format", "json", "-o", tmp_path / "file" / "x.json")
    assert code == 6 and "cannot write" in err and "writer" not in err
    assert not _entries(tmp_path / "cache")


def test_a_file_just_written_is_hashed_before_decoding_when_read_again(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tpuperf import xspace

    # "Just written" for the whole test, however long a loaded machine takes to decode it
    # (a file is racy for 50 ms where its mtime has sub-millisecond digits).
    monkeypatch.setattr(cache_mod, "_RACY_NS", 3600 * 10**9)
    monkeypatch.setattr(cache_mod, "_RACY_FINE_NS", 3600 * 10**9)
    path = tmp_path / "fresh.xplane.pb"
    shutil.copy(runs["memory_bound"] / "tpu-host-0.xplane.pb", path)  # modified just now
    cache = Cache(tmp_path / "cache")
    assert not cache.seen(str(path))
    first, key = cache_mod.host_tables(str(path), "h", cache)  # decoded beside the hash
    assert key == cache_mod.content_key(path.read_bytes())
    # Too fresh for its stat to stand in for its content, but seen: read again, it is hashed
    # and found, with nothing of it decoded (not even its planes).
    assert cache.seen(str(path)) and cache.known_content(str(path)) is None
    decoded: list[object] = []
    monkeypatch.setattr(xspace, "decode", decoded.append)
    monkeypatch.setattr(cache_mod, "decode_host", _must_not_decode)
    again, same = cache_mod.host_tables(str(path), "h", cache)
    assert same == key and cache.hits == 1 and not decoded
    assert [d.ops.array("dur_ps").tolist() for d in again.devices] == [
        d.ops.array("dur_ps").tolist() for d in first.devices
    ]


def test_a_damaged_file_never_seen_is_the_same_error_through_the_cache(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    data = (runs["straggler"] / "tpu-host-0.xplane.pb").read_bytes()
    path = tmp_path / "cut.xplane.pb"
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(BadProfile) as without:
        cache_mod.host_tables(str(path), "h", None)
    cache = Cache(tmp_path / "cache")
    assert not cache.seen(str(path))
    with pytest.raises(BadProfile) as through:
        cache_mod.host_tables(str(path), "h", cache)
    assert str(through.value) == str(without.value)
    assert "not a readable XSpace profile" in str(through.value)
    assert not _entries(tmp_path / "cache")


def _put(cache: Cache, source: Path) -> Path:
    cache_mod.host_tables(str(source), "h", cache)
    (entry,) = [e for e in _entries(cache.root) if e not in _put.seen]  # type: ignore[attr-defined]
    _put.seen.append(entry)  # type: ignore[attr-defined]
    return entry


def test_the_least_recently_used_entry_is_evicted(runs: dict[str, Path], tmp_path: Path) -> None:
    files = [runs[s] / "tpu-host-0.xplane.pb" for s in runs if s != "straggler"]
    sizes = []
    probe = Cache(tmp_path / "probe")
    for source in files:
        cache_mod.host_tables(str(source), "h", probe)
    sizes = {
        json.loads((e / "host.json").read_text())["info"]["size_bytes"]: sum(
            f.stat().st_size for f in e.iterdir()
        )
        for e in _entries(tmp_path / "probe")
    }
    assert len(sizes) == 3
    # Room for the two largest entries, not for all three.
    bound = sum(sorted(sizes.values())[1:])
    cache = Cache(tmp_path / "c", max_bytes=bound)
    _put.seen = []  # type: ignore[attr-defined]
    a, b = _put(cache, files[0]), _put(cache, files[1])
    os.utime(a, ns=(1, 1_000_000_000))  # a is the older of the two ...
    os.utime(b, ns=(1, 2_000_000_000))
    cache_mod.host_tables(str(files[0]), "h", cache)  # ... until it is used again
    assert cache.hits == 1
    c = _put(cache, files[2])
    assert _entries(cache.root) == sorted([a, c])  # b, the least recently used, went
    total = sum(f.stat().st_size for e in _entries(cache.root) for f in e.iterdir())
    assert total <= bound


def test_an_entry_larger_than_the_bound_is_not_stored(
    cli: Cli, runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TPUPERF_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("TPUPERF_CACHE_MAX_BYTES", "1000")
    host_file = runs["host_bound"] / "tpu-host-0.xplane.pb"
    expected = cli.json("info", host_file, "--format", "json", "--no-cache")
    assert cli.json("info", host_file, "--format", "json") == expected
    assert _entries(tmp_path / "c") == []
    assert not [p for p in (tmp_path / "c").rglob("*") if p.name.endswith(".tmp")]


def test_a_bound_that_is_no_number_is_a_usage_error(
    cli: Cli, runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TPUPERF_CACHE_MAX_BYTES", "8GiB")
    code, out, err = cli("info", runs["host_bound"])
    assert code == 2 and out == ""
    assert err.startswith("tpuperf: error: TPUPERF_CACHE_MAX_BYTES='8GiB'")
    assert len(err.strip().splitlines()) == 1


def test_two_writers_of_one_entry_leave_one_whole_entry(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both write the whole entry and rename it into place at the same moment: one rename
    wins, the other's copy is dropped, and both get the right tables."""
    # Settled (an mtime in the past), so each writer also notes the file's stat, as it does for
    # any file older than a few seconds.
    source = _settled_copy(
        runs["collective_training"] / "tpu-host-0.xplane.pb", tmp_path / "h.xplane.pb"
    )
    barrier = threading.Barrier(2, timeout=60)
    real_write = cache_mod.write_atomic

    def write_then_wait(path: str, *args: Any, **kwargs: Any) -> None:
        real_write(path, *args, **kwargs)
        if os.path.basename(path) == "host.json":  # the last file of the entry before its rename
            barrier.wait()  # (a settled file's stat note is written too, and must not wait)

    monkeypatch.setattr(cache_mod, "write_atomic", write_then_wait)
    results: list[Any] = [None, None]

    def load(i: int) -> None:
        results[i] = cache_mod.host_tables(str(source), "h", Cache(tmp_path / "cache"))[0]

    threads = [threading.Thread(target=load, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    monkeypatch.undo()
    assert all(r is not None for r in results)
    (entry,) = _entries(tmp_path / "cache")
    assert [p for p in entry.parent.iterdir()] == [entry]  # no temporary left behind
    cache = Cache(tmp_path / "cache")
    monkeypatch.setattr(cache_mod, "decode_host", _must_not_decode)
    served, _ = cache_mod.host_tables(str(source), "h", cache)
    assert cache.hits == 1
    for got in (*results, served):
        assert [d.ops.n for d in got.devices] == [d.ops.n for d in results[0].devices]
        assert [d.ops.array("dur_ps").sum() for d in got.devices] == [
            d.ops.array("dur_ps").sum() for d in results[0].devices
        ]


def test_an_entry_stored_in_the_background_is_the_entry_stored_in_place(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = runs["collective_training"] / "tpu-host-0.xplane.pb"
    in_place = Cache(tmp_path / "in_place")
    behind = Cache(tmp_path / "behind", write_behind=True)
    decoded, key = cache_mod.host_tables(str(source), "h", in_place)
    _, same = cache_mod.host_tables(str(source), "h", behind)
    behind.wait()  # the entry is whole once wait returns
    (a,), (b,) = _entries(tmp_path / "in_place"), _entries(tmp_path / "behind")
    assert same == key and a.name == b.name
    assert (a / "columns.bin").read_bytes() == (b / "columns.bin").read_bytes()
    meta_a, meta_b = (json.loads((e / "host.json").read_text()) for e in (a, b))
    assert meta_a.pop("blob")[0] == meta_b.pop("blob")[0]  # mtime and inode differ
    assert meta_a == meta_b
    monkeypatch.setattr(cache_mod, "decode_host", _must_not_decode)
    served, _ = cache_mod.host_tables(str(source), "h", behind)
    assert behind.hits == 1
    assert [d.ops.array("dur_ps").tolist() for d in served.devices] == [
        d.ops.array("dur_ps").tolist() for d in decoded.devices
    ]


def test_a_background_write_that_fails_raises_in_wait(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = runs["straggler"] / "tpu-host-0.xplane.pb"
    tables, key = cache_mod.host_tables(str(source), "h", None)

    def fail(self: Cache, key: str, tables: Any) -> None:
        raise RuntimeError("the writer broke")

    monkeypatch.setattr(Cache, "_store_tables", fail)
    cache = Cache(tmp_path / "cache", write_behind=True)
    cache.put_tables(Cache.tables_key("h", key), tables)  # returns; the error waits for wait()
    with pytest.raises(RuntimeError, match="the writer broke"):
        cache.wait()
    cache.wait()  # said once
    assert not _entries(tmp_path / "cache")


def test_processes_filling_one_cache_at_once_agree(runs: dict[str, Path], tmp_path: Path) -> None:
    profile = str(runs["straggler"])
    env = {**os.environ, "TPUPERF_CACHE_DIR": str(tmp_path / "c"), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "tpuperf", "ops", profile, "--format", "json"]
    procs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e for _, e in outputs]
    assert outputs[0][0] == outputs[1][0] == outputs[2][0]
    assert all(not err for _, err in outputs)
    entries = _entries(tmp_path / "c")
    # Each of the run's host files stored whole, once.
    assert len(entries) == len(list(runs["straggler"].glob("*.xplane.pb")))
    leftovers = [p for e in entries for p in e.parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_a_damaged_entry_is_one_note_then_rebuilt(
    cli: Cli, runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host_file = runs["host_bound"] / "tpu-host-0.xplane.pb"
    expected, entry = _stored(cli, monkeypatch, tmp_path / "c", "ops", host_file)
    blob = entry / "columns.bin"
    blob.write_bytes(blob.read_bytes()[:100])  # cut short
    code, out, err = cli("ops", host_file, "--format", "json")
    assert code == 0 and json.loads(out) == expected
    (line,) = err.splitlines()
    assert line.startswith("tpuperf: note: cache entry ") and "columns.bin changed" in line
    assert line.endswith("); read the profile again")
    code, out, err = cli("ops", host_file, "--format", "json")
    assert code == 0 and json.loads(out) == expected and err == ""


def _readme_section(title: str) -> str:
    text = (REPO / "README.md").read_text()
    start = text.index(f"## {title}\n")
    return text[start : text.index("\n## ", start + 1)]


def test_readme_cache_section_says_what_the_code_does(capsys: pytest.CaptureFixture[str]) -> None:
    from tpuperf.cli import COMMANDS, main

    section = _readme_section("The cache of decoded tables")
    first = section.split("\n\n")[1]
    listed = set(re.findall(r"`(\w+)`", first))
    # The commands it names are exactly those with --no-cache.
    offering = set()
    for name, _ in COMMANDS:
        assert main([name, "--help"]) == 0
        if "--no-cache" in capsys.readouterr().out:
            offering.add(name)
    assert listed == offering
    for name in ("TPUPERF_CACHE_DIR", "XDG_CACHE_HOME", "TPUPERF_CACHE_MAX_BYTES", "columns.bin"):
        assert f"`{name}" in section or f"`${name}" in section, name
    assert "(default 8 GiB)" in section and cache_mod.DEFAULT_MAX_BYTES == 8 * 1024**3
    assert "in the 2 seconds before" in section and cache_mod._RACY_NS == 2_000_000_000
    assert "(50 ms where" in section and cache_mod._RACY_FINE_NS == 50_000_000
    assert "`tpuperf: note: cache entry ... unusable (why); read the profile again`" in section


def test_a_cached_gs_profile_is_not_downloaded_again(
    cli: Cli, runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The object's stated MD5 and size key it: a second command asks for those, not the
    bytes; an object rewritten with other bytes is read again. Against a local GCS emulator
    (as tests/test_scan_gcs.py), skipped without one."""
    import socket

    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    pytest.importorskip("gcsfs")
    emulator = pytest.importorskip("gcp_storage_emulator.server")
    import fsspec

    from tpuperf import sources

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = emulator.create_server("127.0.0.1", port, in_memory=True, default_bucket="cached")
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        monkeypatch.setenv("FSSPEC_GCS_ENDPOINT_URL", endpoint)
        monkeypatch.setenv("FSSPEC_GCS_TOKEN", "anon")
        monkeypatch.setitem(fsspec.config.conf, "gcs", {"endpoint_url": endpoint, "token": "anon"})
        fs = fsspec.filesystem("gcs", skip_instance_cache=True)
        url = "gs://cached/job/tpu-host-0.xplane.pb"
        first = (runs["memory_bound"] / "tpu-host-0.xplane.pb").read_bytes()
        second = (runs["host_bound"] / "tpu-host-0.xplane.pb").read_bytes()
        fs.pipe(url, first)
        args = ["ops", url, "--format", "json", "--by", "category"]
        expected = cli.json(*args, "--no-cache")
        assert cli.json(*args) == expected  # decoded and stored

        def no_download(*a: object) -> None:
            raise AssertionError("downloaded a profile the cache holds")

        with monkeypatch.context() as patch:
            patch.setattr(sources, "read_profile", no_download)
            assert cli.json(*args) == expected
        fs.pipe(url, second)  # other bytes under the same name
        fs.invalidate_cache()
        changed = cli.json(*args)
        assert changed == cli.json(*args, "--no-cache") and changed != expected
    finally:
        server.stop()


def test_a_scan_fills_the_cache_the_commands_read(
    cli: Cli, runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One cache: after `tpuperf scan`, a command on a scanned profile decodes nothing."""
    import tpuperf

    run = runs["collective_training"]
    expected = cli.json("info", run, "--format", "json", "--no-cache")
    tpuperf.scan(run, workers=1)  # into the default cache (TPUPERF_CACHE_DIR)
    monkeypatch.setattr(cache_mod, "decode_host", _must_not_decode)
    assert cli.json("info", run, "--format", "json") == expected
