"""Input resolution: files, run directories, logdirs (latest run by name), hosts and runs."""

from __future__ import annotations

import os
import time

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
