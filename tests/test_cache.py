"""The profile cache: exact round trips, content keys, damaged entries rebuilt, nothing pickled."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tpuperf
from fixtures.generate import SCENARIOS, write_run
from tpuperf import _threads, build, schema
from tpuperf import cache as cache_mod
from tpuperf.cache import Cache


def assert_same_profile(actual: tpuperf.Profile, expected: tpuperf.Profile) -> None:
    for table in schema.TABLES:
        left, right = getattr(actual, table), getattr(expected, table)
        pd.testing.assert_frame_equal(left, right, check_exact=True, check_categorical=True)
        for column in left.columns:
            if isinstance(left[column].dtype, pd.CategoricalDtype):
                # Same categories in the same order, of the same dtype: codes mean the same.
                assert left[column].cat.categories.equals(right[column].cat.categories), column
                assert left[column].cat.categories.dtype == right[column].cat.categories.dtype
    assert actual.hosts == expected.hosts
    assert actual.warnings == expected.warnings
    assert actual.source == expected.source


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {s: write_run(s, root, run_name=s, seed=3)[0] for s in SCENARIOS}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_cached_profile_round_trips_exactly(
    scenario: str, runs: dict[str, Path], tmp_path: Path
) -> None:
    cache = Cache(tmp_path)
    expected = tpuperf.load(runs[scenario])
    cold = cache_mod.load(runs[scenario], cache=cache)  # decoded, then stored
    warm = cache_mod.load(runs[scenario], cache=cache)  # read back from Parquet
    assert_same_profile(cold, expected)
    assert_same_profile(warm, expected)
    assert len(list(tmp_path.rglob("host.json"))) == len(expected.hosts)


def test_one_host_of_a_run_and_a_gzip_file(runs: dict[str, Path], tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    host = "tpu-host-1"
    expected = tpuperf.load(runs["straggler"], host=host)
    cache_mod.load(runs["straggler"], host=host, cache=cache)
    assert_same_profile(cache_mod.load(runs["straggler"], host=host, cache=cache), expected)

    zipped = tmp_path / "z.xplane.pb.gz"
    zipped.write_bytes(gzip.compress((runs["host_bound"] / "tpu-host-0.xplane.pb").read_bytes()))
    expected = tpuperf.load(zipped)
    cache_mod.load(zipped, cache=cache)
    assert_same_profile(cache_mod.load(zipped, cache=cache), expected)


def test_nothing_is_pickled(runs: dict[str, Path], tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    tpuperf.scan(runs["gpu_training"], workers=1, cache_dir=tmp_path)
    cache_mod.load(runs["gpu_training"], cache=cache)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.suffix for p in files} == {".bin", ".json"}
    for path in files:
        if path.suffix == ".json":
            assert path.read_bytes()[:1] == b"{"
    # The raw arrays are numbers only: each host.json names their dtypes.
    for meta_path in tmp_path.rglob("host.json"):
        meta = json.loads(meta_path.read_text())
        assert {np.dtype(dtype).kind for dtype, _, _ in meta["arrays"]} <= set("biuf")


def test_same_bytes_elsewhere_hit_and_a_new_version_misses(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = Cache(tmp_path / "cache")
    source = runs["memory_bound"] / "tpu-host-0.xplane.pb"
    copy = tmp_path / "elsewhere" / "tpu-host-0.xplane.pb"
    copy.parent.mkdir()
    shutil.copy(source, copy)
    _, key = cache_mod.host_tables(str(source), "tpu-host-0", cache)
    assert key == cache_mod.content_key(source.read_bytes())
    # The same content under another path is a hit, with this path in its HostInfo: a file
    # the cache has never seen is built while it is hashed, and a small one is hashed first,
    # so its build stops before its first device.
    monkeypatch.setattr(build, "_device", _must_not_decode)
    second, same = cache_mod.host_tables(str(copy), "tpu-host-0", cache)
    assert same == key and second.info.path == str(copy)
    # Another host name is another entry (the name is in every table) ...
    with pytest.raises(AssertionError, match="decoded"):
        cache_mod.host_tables(str(copy), "other-host", cache)
    # ... and so is another tpuperf.
    monkeypatch.setattr(cache_mod, "code_version", lambda: "99.0")
    with pytest.raises(AssertionError, match="decoded"):
        cache_mod.host_tables(str(source), "tpu-host-0", cache)


def test_a_build_stops_before_the_next_device_once_told(runs: dict[str, Path]) -> None:
    # What the cache's hash beside the build relies on: `stop` is asked before each device.
    from tpuperf import xspace

    data = (runs["straggler"] / "tpu-host-0.xplane.pb").read_bytes()
    whole = build.build_host("tpu-host-0", xspace.decode(data), 1)
    assert len(whole.devices) > 2
    asked: list[int] = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 2

    with pytest.raises(build.Stopped):
        build.build_host("tpu-host-0", xspace.decode(data), 1, stop)
    assert len(asked) == 3  # two devices built, the third given up


def test_a_file_of_a_size_already_read_is_hashed_before_its_build(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    # A copy has the size of the file it copies: it is looked for in the cache before
    # anything of it is built. A file of another size is built while it is hashed.
    cache = Cache(tmp_path / "cache")
    source = runs["straggler"] / "tpu-host-1.xplane.pb"
    other = runs["memory_bound"] / "tpu-host-0.xplane.pb"
    cache_mod.load(source, cache=cache)
    copy = _copy(source, tmp_path / "elsewhere")
    assert cache.seen(str(copy)) and not cache.seen(str(other))
    assert other.stat().st_size != source.stat().st_size


@pytest.mark.parametrize("damaged", [False, True])
def test_a_build_stops_once_the_hash_finds_the_tables_in_the_cache(
    damaged: bool, runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file the cache holds though it has seen neither its path nor its size (a profile
    # read from an object store, then downloaded) stops its build once hashed, before its
    # first device where it is small (hashed first), and is read from the cache. Where those
    # tables do not read back, it is built whole and stored again.
    notes: list[str] = []
    cache = Cache(tmp_path / "cache", note=notes.append)
    source = runs["straggler"] / "tpu-host-1.xplane.pb"
    expected = tpuperf.load(source)
    cache_mod.load(source, cache=cache)
    shutil.rmtree(tmp_path / "cache" / cache_mod.FORMAT / "sizes")
    copy = _copy(source, tmp_path / "elsewhere")
    assert not cache.seen(str(copy))
    expected_copy = tpuperf.load(copy)
    if damaged:
        (meta,) = (tmp_path / "cache").rglob("host.json")
        meta.write_text(meta.read_text()[:100])
    else:
        monkeypatch.setattr(build, "_device", _must_not_decode)
    assert_same_profile(cache_mod.load(copy, cache=cache), expected_copy)
    assert cache.hits == (0 if damaged else 1)
    assert len(notes) == damaged and all("host.json is not JSON" in n for n in notes)
    # Stored again, whole: the source is read back from it.
    monkeypatch.setattr(cache_mod, "decode_host", _must_not_decode)
    assert_same_profile(cache_mod.load(source, cache=cache), expected)


def test_a_large_profile_hashed_beside_its_build_gives_the_same_tables(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a large profile's: the hash in a thread beside the build, which either stops once
    # the hash finds the tables in the cache or ends first; the same tables either way.
    monkeypatch.setattr(_threads, "PARALLEL_BYTES", 1)
    cache = Cache(tmp_path / "cache")
    source = runs["straggler"] / "tpu-host-1.xplane.pb"
    expected = tpuperf.load(source)
    assert_same_profile(cache_mod.load(source, cache=cache), expected)
    key = Cache.tables_key("tpu-host-1", cache_mod.content_key(source.read_bytes()))
    assert cache.holds_tables(key)
    shutil.rmtree(tmp_path / "cache" / cache_mod.FORMAT / "sizes")  # not known as a copy
    copy = _copy(source, tmp_path / "elsewhere")
    assert_same_profile(cache_mod.load(copy, cache=cache), tpuperf.load(copy))
    assert_same_profile(cache_mod.load(source, cache=cache), expected)


def _copy(source: Path, folder: Path) -> Path:
    folder.mkdir()
    return Path(shutil.copy(source, folder / source.name))


def test_a_content_key_is_the_xxh3_128_of_the_bytes_or_their_sha256_without_xxhash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hashlib

    xxhash = pytest.importorskip("xxhash")
    data = np.random.default_rng(3).integers(0, 256, 100_003, dtype=np.uint8).tobytes()
    for chunk in (data, b"", b"x"):
        want = "xxh3_128:" + xxhash.xxh3_128(chunk).hexdigest()
        assert cache_mod.content_key(chunk) == want
        assert cache_mod._mapped_content_key(chunk) == want
    # One byte changed anywhere: another key.
    changed = bytearray(data)
    changed[77_777] ^= 1
    assert cache_mod.content_key(bytes(changed)) != cache_mod.content_key(data)
    monkeypatch.setitem(sys.modules, "xxhash", None)  # not installed: import fails
    want = "sha256:" + hashlib.sha256(data).hexdigest()
    assert cache_mod.content_key(data) == want
    assert cache_mod._mapped_content_key(data) == want


@pytest.mark.parametrize("xxhash", [True, False], ids=["xxh3", "sha256"])
def test_a_mapped_file_hashes_to_its_content_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, xxhash: bool
) -> None:
    import mmap

    if not xxhash:
        monkeypatch.setitem(sys.modules, "xxhash", None)
    monkeypatch.setattr(cache_mod, "_HASH_CHUNK", 4096)
    data = np.random.default_rng(7).integers(0, 256, 4096 * 3 + 1234, dtype=np.uint8).tobytes()
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    with open(path, "rb") as file:
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    assert cache_mod._mapped_content_key(mapped) == cache_mod.content_key(data)
    assert mapped[:] == data  # pages let go come back as they were
    assert cache_mod._mapped_content_key(data) == cache_mod.content_key(data)
    assert cache_mod._mapped_content_key(b"") == cache_mod.content_key(b"")


def _must_not_decode(*args: object, **kwargs: object) -> None:
    raise AssertionError("decoded although the cache holds these tables")


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("delete_meta", "host.json is missing"),
        ("garbage_meta", "host.json is not JSON"),
        ("meta_without_arrays", "host.json lacks"),
        ("other_version", "written by tpuperf 0.0.1"),
        ("other_format", "(format v1)"),
        ("other_key", "host.json names another key"),
        ("truncate_blob", "columns.bin changed since it was written"),
        ("flip_blob_bytes", "columns.bin changed since it was written"),
        ("delete_blob", "No such file"),
        ("array_past_the_end", "lies past the end of columns.bin"),
        ("object_dtype", "dtype |O"),
        ("negative_array_number", "no array -1"),
        ("negative_shape", "shape [-1]"),
        ("strings_count", "values, not"),
    ],
)
def test_damaged_entry_is_ignored_and_rebuilt(
    damage: str, reason: str, runs: dict[str, Path], tmp_path: Path
) -> None:
    notes: list[str] = []
    cache = Cache(tmp_path, note=notes.append)
    run = runs["collective_training"]
    expected = tpuperf.load(run)
    cache_mod.load(run, cache=cache)
    (entry,) = [p.parent for p in tmp_path.rglob("host.json")]
    blob, meta_path = entry / "columns.bin", entry / "host.json"
    data = bytearray(blob.read_bytes())
    meta = json.loads(meta_path.read_text())
    if damage == "delete_meta":
        meta_path.unlink()
    elif damage == "garbage_meta":
        meta_path.write_text('{"key": ')
    elif damage == "meta_without_arrays":
        del meta["arrays"]
    elif damage == "other_version":
        meta["version"] = "0.0.1"
    elif damage == "other_format":
        meta["format"] = "v1"
    elif damage == "other_key":
        meta["key"] = "0" * 64
    elif damage == "truncate_blob":
        blob.write_bytes(bytes(data[: len(data) // 2]))
    elif damage == "flip_blob_bytes":  # same size: its stamp (mtime) tells
        middle = len(data) // 3
        data[middle : middle + 32] = bytes(b ^ 0x5A for b in data[middle : middle + 32])
        blob.write_bytes(bytes(data))
    elif damage == "delete_blob":
        blob.unlink()
    elif damage == "array_past_the_end":
        meta["arrays"][0][2] = len(data) + 64
    elif damage == "object_dtype":  # nothing is ever unpickled
        meta["arrays"][0][0] = "|O"
    elif damage == "negative_array_number":  # would name another array, from the end
        meta["lines"]["columns"]["first_ps"][1] = -1
    elif damage == "negative_shape":
        meta["arrays"][0][1] = [-1]
    elif damage == "strings_count":  # a string column's values, joined in columns.bin
        column = next(
            c
            for d in meta["devices"]
            for t in d["tables"].values()
            for c in t["columns"].values()
            if c[0] == "strings" and len(c[3]) == 2 and all(type(v) is int for v in c[3])
        )
        column[3][1] += 1
    if damage in ("meta_without_arrays", "other_version", "other_format", "other_key") or (
        damage
        in (
            "array_past_the_end",
            "object_dtype",
            "negative_array_number",
            "negative_shape",
            "strings_count",
        )
    ):
        meta_path.write_text(json.dumps(meta))
    assert_same_profile(cache_mod.load(run, cache=cache), expected)
    assert cache.hits == 0
    (note,) = notes  # one line, naming what was wrong
    assert reason in note and "cache entry" in note, note
    # Rebuilt: the next load reads an intact entry, and says nothing.
    assert meta_path.exists()
    assert_same_profile(cache_mod.load(run, cache=cache), expected)
    assert cache.hits == 1 and len(notes) == 1


@pytest.mark.parametrize(
    ("values", "joined"),
    [
        (("fusion.1", "", "%add = f32[8]{0} add(...)", "naïve ✓", "fusion.1"), True),
        (("a\x00b", "c"), False),  # a NUL in a value: kept as a JSON list
        ((), False),
    ],
)
def test_string_columns_are_stored_as_text_and_read_back_exactly(
    values: tuple[str, ...], joined: bool, tmp_path: Path
) -> None:
    from tpuperf.columns import Strings, Table

    codes = np.arange(len(values), dtype=np.int32)
    table = Table({"name": Strings(codes, values)}, n=len(values))
    with cache_mod._Blob(tmp_path / "columns.bin") as blob:
        spec = cache_mod._encode(table, blob)
    stored = spec["columns"]["name"][3]
    assert (stored != list(values)) == joined
    st = os.stat(tmp_path / "columns.bin")
    meta = {"arrays": blob.arrays, "blob": [st.st_size, st.st_mtime_ns, st.st_ino]}
    for read_later in (False, True):
        back = cache_mod._decode(
            json.loads(json.dumps(spec)), cache_mod._Arrays(tmp_path, meta), read_later=read_later
        )
        column = back["name"]
        # Kept joined and read later: not read until used, then read whole.
        assert ("values" not in vars(column)) == (read_later and joined)
        assert column.values == values
        assert np.array_equal(column.codes, codes)
        assert type(column) is Strings or read_later


def test_a_commands_string_values_are_read_from_the_cache_as_used(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """The tables a command reads back keep their joined string values (the profile's HLO
    texts among them) unread until a column is used; each reads back as stored."""
    cache = Cache(tmp_path)
    run = runs["collective_training"]
    expected = tpuperf.load(run)
    cache_mod.load(run, cache=cache)
    again = cache_mod.load(run, cache=cache)
    assert cache.hits == 1
    from tpuperf.columns import Strings

    ops = again.device_tables[0].ops
    strings = [name for name in ops if isinstance(ops[name], Strings)]
    assert "hlo_text" in [name for name in strings if "values" not in vars(ops[name])]
    assert_same_profile(again, expected)
    assert all("values" in vars(ops[name]) for name in strings)


def test_rows_round_trip_and_damaged_rows_miss(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    key = cache.row_key([("h", "sha256:00")], {"config": {"warmup_steps": 1}})
    assert cache.get_row(key) is None
    row = {"idle_pct": 12.345678901234567, "chip": "TPU v6 Lite", "devices": 4, "mfu_pct": None}
    cache.put_row(key, row)
    assert cache.get_row(key) == row
    other = cache.row_key([("h", "sha256:00")], {"config": {"warmup_steps": 2}})
    assert other != key and cache.get_row(other) is None
    (path,) = tmp_path.rglob(f"{key}.json")
    path.write_text("[1, 2")
    assert cache.get_row(key) is None and not path.exists()


def test_stat_memo_trusts_only_an_unchanged_settled_file(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    path = tmp_path / "p.xplane.pb"
    path.write_bytes(b"one")
    now = time.time_ns()
    os.utime(path, ns=(now, now))
    cache.remember_content(str(path), "sha256:one")
    assert cache.known_content(str(path)) is None  # just written: its mtime may not move again
    past = time.time() - 60
    os.utime(path, (past, past))
    cache.remember_content(str(path), "sha256:one")
    assert cache.known_content(str(path)) == "sha256:one"
    path.write_bytes(b"two")  # same size, new mtime
    assert cache.known_content(str(path)) is None


def test_a_file_is_settled_after_its_file_systems_timestamp_tick(tmp_path: Path) -> None:
    """A file stamped finer than a millisecond is settled 50 ms after its mtime; one stamped
    in whole milliseconds or seconds (a coarse file system) only after 2 s."""
    path = tmp_path / "p.xplane.pb"
    path.write_bytes(b"one")

    def settled(age_ns: int, tick_ns: int) -> bool:
        mtime = -(-(time.time_ns() - age_ns) // tick_ns) * tick_ns  # stamped at a tick
        if tick_ns == 1 and mtime % 1_000_000 == 0:
            mtime -= 1
        os.utime(path, ns=(mtime, mtime))
        return cache_mod.settled_state(str(path)) is not None

    fine = 1
    assert not settled(0, fine)
    assert not settled(cache_mod._RACY_FINE_NS // 2, fine)
    assert settled(cache_mod._RACY_FINE_NS * 3, fine)
    for coarse in (1_000_000, 1_000_000_000):
        assert not settled(cache_mod._RACY_FINE_NS * 3, coarse)
        assert not settled(cache_mod._RACY_NS // 2, coarse)
        assert settled(cache_mod._RACY_NS + 2 * coarse, coarse)


def test_listing_keys() -> None:
    assert cache_mod.listing_key({"size": 5, "md5Hash": "XUFAKrxLKna5cZ2REBfFkg=="}) == (
        "md5hash:XUFAKrxLKna5cZ2REBfFkg==:5"
    )
    assert cache_mod.listing_key({"size": 5, "ETag": '"abc"'}) == "etag:abc:5"
    assert cache_mod.listing_key({"size": 5}) is None


def test_unwritable_cache_only_slows(runs: dict[str, Path], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    cache = Cache(blocker)
    expected = tpuperf.load(runs["host_bound"])
    assert_same_profile(cache_mod.load(runs["host_bound"], cache=cache), expected)


def test_default_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TPUPERF_CACHE_DIR", str(tmp_path / "a"))
    assert cache_mod.default_dir() == str(tmp_path / "a")
    monkeypatch.delenv("TPUPERF_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_mod.default_dir() == str(tmp_path / "x" / "tpuperf")


def test_keys_are_sha256_of_their_text() -> None:
    """Keys are hashed with the interpreter's own SHA-256 where it has one (no OpenSSL to
    load): the same digest as hashlib's."""
    import hashlib

    for text in ("", "tables", "é" * 1000, json.dumps([cache_mod.FORMAT, "x", [1, 2]])):
        assert cache_mod._text_digest(text) == hashlib.sha256(text.encode()).hexdigest()


def test_the_code_version_moves_with_the_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """A development version carries a digest of tpuperf's source files: of their stats
    where every file is settled, of their bytes where one was just modified; another stat
    (a file written) is another version."""
    monkeypatch.setattr(tpuperf, "__version__", "1.0.dev0")
    real = cache_mod.settled_state

    def version(state: object) -> str:
        monkeypatch.setattr(cache_mod, "settled_state", state)
        cache_mod.code_version.cache_clear()
        try:
            return cache_mod.code_version()
        finally:
            cache_mod.code_version.cache_clear()

    settled = version(real)
    assert settled.startswith("1.0.dev0+stat.") and version(real) == settled
    touched = version(
        lambda path: (
            [*real(path)[:1], real(path)[1] + 1, *real(path)[2:]]
            if path.endswith("cache.py")
            else real(path)
        )
    )
    assert touched.startswith("1.0.dev0+stat.") and touched != settled
    # One file too recent for its stat: the bytes are hashed instead.
    racy = version(lambda path: None if path.endswith("cache.py") else real(path))
    assert racy.startswith("1.0.dev0+src.") and racy == version(lambda path: None)
    # A release is its version alone.
    monkeypatch.setattr(tpuperf, "__version__", "1.0")
    assert version(real) == "1.0"
