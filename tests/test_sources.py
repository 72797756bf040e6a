"""Input resolution: files, run directories, logdirs (latest run by name), hosts and runs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import tpuperf
from fixtures.generate import write_run
from tpuperf.errors import BadInput, UsageError
from tpuperf.sources import resolve


def test_run_directory_is_all_hosts(tmp_path) -> None:
    run_dir, truth = write_run("straggler", tmp_path)
    resolved = resolve(str(run_dir))
    assert [f.host for f in resolved.files] == sorted(truth.hosts)
    profile = tpuperf.load(run_dir)
    assert sorted(set(profile.ops["host"].astype(str))) == sorted(truth.hosts)


def test_logdir_latest_run_by_name_not_mtime(tmp_path) -> None:
    write_run("host_bound", tmp_path, run_name="2026_01_02_00_00_00")
    older, _ = write_run("memory_bound", tmp_path, run_name="2026_01_01_00_00_00")
    # The older run is touched last: the choice must still be by name.
    now = time.time() + 100
    for path in older.iterdir():
        os.utime(path, (now, now))
    resolved = resolve(str(tmp_path))
    assert resolved.run == "2026_01_02_00_00_00"
    assert any("--run" in notice and "2026_01_02_00_00_00" in notice for notice in resolved.notices)
    assert resolve(str(tmp_path), run="2026_01_01_00_00_00").run == "2026_01_01_00_00_00"
    with pytest.raises(UsageError, match="2026_01_01_00_00_00, 2026_01_02_00_00_00"):
        resolve(str(tmp_path), run="nope")


def test_host_picks_one(tmp_path) -> None:
    run_dir, truth = write_run("straggler", tmp_path)
    host = truth.hosts[1]
    profile = tpuperf.load(run_dir, host=host)
    assert profile.host_names == [host]
    with pytest.raises(UsageError, match="hosts: "):
        resolve(str(run_dir), host="nope")


def test_missing_path(tmp_path) -> None:
    with pytest.raises(BadInput, match="no such file or directory"):
        resolve(str(tmp_path / "missing"))


# --------------------------------------------------------------------------- memory limits


def _bomb(path, gib: int = 8):  # type: ignore[no-untyped-def]
    """A gzip file of concatenated members (one stream to gzip(1)) that inflates to ``gib``
    GiB of zeros: 64 MiB members compress to about 64 KiB each."""
    import gzip

    member = gzip.compress(b"\0" * (64 << 20), compresslevel=9)
    path.write_bytes(member * (gib * 16))
    return path


def _fake_root(tmp_path, files: dict[str, str]):  # type: ignore[no-untyped-def]
    for name, text in files.items():
        target = tmp_path / name.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return str(tmp_path)


_MEMINFO = "MemTotal: 67108864 kB\nMemAvailable: 33554432 kB\n"  # 32 GiB available


@pytest.mark.parametrize(
    ("files", "room"),
    [
        # cgroup v2: the process's group, under a parent with a tighter limit.
        (
            {
                "/proc/self/cgroup": "0::/job/task\n",
                "/sys/fs/cgroup/job/task/memory.max": "max\n",
                "/sys/fs/cgroup/job/task/memory.current": "100\n",
                "/sys/fs/cgroup/job/memory.max": f"{3 << 30}\n",
                "/sys/fs/cgroup/job/memory.current": f"{1 << 30}\n",
            },
            2 << 30,
        ),
        # cgroup v1: the memory controller's own hierarchy; 2**63 - 4096 is no limit.
        (
            {
                "/proc/self/cgroup": "4:memory:/docker/abc\n1:cpu:/\n",
                "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": f"{4 << 30}\n",
                "/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": f"{1 << 30}\n",
                "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
                "/sys/fs/cgroup/memory/memory.usage_in_bytes": "5\n",
            },
            3 << 30,
        ),
        # No limit anywhere: what the kernel says is available.
        ({"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "max\n"}, 32 << 30),
    ],
    ids=["cgroup-v2", "cgroup-v1", "none"],
)
def test_available_memory_is_the_room_under_the_cgroup_limits(tmp_path, files, room) -> None:
    from tpuperf import sources

    root = _fake_root(tmp_path / "root", {"/proc/meminfo": _MEMINFO, **files})
    assert sources.available_memory(root) == room

    if room < 32 << 30:  # an 8 GiB gzip under that limit is refused, not inflated
        bomb = _bomb(tmp_path / "bomb.xplane.pb.gz")
        with pytest.raises(BadInput, match="inflates to more than"):
            sources.read_profile(str(bomb), available=sources.available_memory(root) // 8)


def test_gzip_bomb_under_ulimit_v_is_refused_in_one_line(tmp_path) -> None:
    """Under ``ulimit -v`` an 8 GiB gzip ended in ``internal error: MemoryError`` after
    taking gigabytes: the inflate cap now counts the address-space limit (RLIMIT_AS)."""
    import subprocess
    import sys

    bomb = _bomb(tmp_path / "bomb.xplane.pb.gz")
    limit_kib = 2_500_000  # about 2.4 GiB of address space: python, numpy and pandas fit
    result = subprocess.run(
        [
            "bash",
            "-c",
            f'ulimit -v {limit_kib} && exec "$0" -m tpuperf info "$1"',
            sys.executable,
            str(bomb),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 4, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"tpuperf: error: {bomb}: this gzip file inflates to more than ")
    available_gib = float(line.split("than the ")[1].split(" GiB")[0])
    assert 0 < available_gib < limit_kib / 2**20  # the limit's room, not the machine's memory


def _resident_kb(path: Path) -> int | None:
    """kB of ``path``'s memory maps resident in this process (/proc/self/smaps); None where
    the file is not mapped."""
    found, total, current = False, 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and ":" not in head[0]:  # a mapping's first line
            current = len(head) > 5 and head[5] == str(path)
            found |= current
        elif current and head[0] == "Rss:":
            total += int(head[1])
    return total if found else None


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux /proc only")
def test_release_drops_a_mapped_profiles_pages_and_keeps_its_bytes(tmp_path, v6e) -> None:
    from tpuperf.sources import read_profile, release

    path = tmp_path / "copy.xplane.pb"
    path.write_bytes(v6e.read_bytes())
    data = read_profile(str(path))
    assert bytes(data[: len(data)]) == v6e.read_bytes()  # every page read: all resident
    assert _resident_kb(path) >= len(data) // 1024 - 4
    release(data)
    assert _resident_kb(path) == 0
    assert bytes(data[: len(data)]) == v6e.read_bytes()  # read again from the page cache
    release(b"bytes are left alone")


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux /proc only")
def test_a_loaded_profile_leaves_none_of_its_file_resident(tmp_path, v6e) -> None:
    """Its decoded planes refer to each other, so the map lives until a garbage collection;
    its pages are let go of as soon as the tables are built."""
    import gc

    import tpuperf

    path = tmp_path / "copy.xplane.pb"
    path.write_bytes(v6e.read_bytes())
    gc.disable()
    try:
        profile = tpuperf.load(str(path))
        assert profile.summary()["ops"] > 0
        assert _resident_kb(path) in (0, None)
    finally:
        gc.enable()
