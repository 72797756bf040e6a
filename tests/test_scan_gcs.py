"""`gs://` scans against a local GCS emulator (gcp-storage-emulator); nothing reaches the internet.

gcsfs is pointed at the emulator through fsspec's environment configuration
(``FSSPEC_GCS_ENDPOINT_URL``, ``FSSPEC_GCS_TOKEN=anon``), which the pool's worker processes
inherit. ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`` stops recent gcsfs from probing the bucket
type over gRPC, which waits 60 s per call against an emulator. Skipped without gcsfs or the
emulator.
"""

from __future__ import annotations

import gzip
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

# gcsfs reads this when it is imported, so it is set before the import (and so for the workers).
os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
pytest.importorskip("gcsfs")
emulator = pytest.importorskip("gcp_storage_emulator.server")

import fsspec  # noqa: E402

from fixtures.generate import generate  # noqa: E402
from tpuperf import scanning as scan_mod  # noqa: E402
from tpuperf.cli import main  # noqa: E402

BUCKET = "fleet-profiles"


@pytest.fixture(scope="module")
def gcs() -> Iterator[fsspec.AbstractFileSystem]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = emulator.create_server("127.0.0.1", port, in_memory=True, default_bucket=BUCKET)
    server.start()
    settings = {"FSSPEC_GCS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "FSSPEC_GCS_TOKEN": "anon"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in settings.items():
            patch.setenv(name, value)
        # fsspec read its environment at import; this process needs the settings now.
        patch.setitem(
            fsspec.config.conf,
            "gcs",
            {"endpoint_url": settings["FSSPEC_GCS_ENDPOINT_URL"], "token": "anon"},
        )
        fs = fsspec.filesystem("gcs", skip_instance_cache=True)
        yield fs
    server.stop()


@pytest.fixture(scope="module")
def uploaded(gcs: fsspec.AbstractFileSystem, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same profiles in the bucket and in a local mirror, for comparison."""
    local = tmp_path_factory.mktemp("mirror")
    files: dict[str, bytes] = {}
    for index, scenario in enumerate(("collective_training", "straggler", "gpu_training")):
        run = generate(scenario, seed=index)
        for host, data in run.xspaces.items():
            files[f"jobs/job{index}/plugins/profile/2026_01_0{index + 1}/{host}.xplane.pb"] = data
    files["jobs/job0/plugins/profile/2026_01_01/zipped.xplane.pb.gz"] = gzip.compress(
        files["jobs/job0/plugins/profile/2026_01_01/tpu-host-0.xplane.pb"]
    )
    files["jobs/bad/plugins/profile/2026_02_01/bad.xplane.pb"] = b"\x07 not a profile"
    files["jobs/job0/README.txt"] = b"not a profile"
    for name, data in files.items():
        gcs.pipe(f"gs://{BUCKET}/{name}", data)
        (local / name).parent.mkdir(parents=True, exist_ok=True)
        (local / name).write_bytes(data)
    gcs.invalidate_cache()
    return local


def _without_location(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows without where the files were (errors name the file, too)."""
    out = frame.drop(columns=["path"])
    out["error"] = [e.rsplit(".xplane.pb", 1)[-1] for e in out["error"]]
    return out


def test_gs_scan_equals_local_scan(uploaded: Path, tmp_path: Path) -> None:
    remote = scan_mod.scan(f"gs://{BUCKET}/jobs", workers=1, cache_dir=tmp_path)
    local = scan_mod.scan(uploaded / "jobs", workers=1, cache=False)
    assert list(remote["path"]) == [
        f"gs://{BUCKET}/jobs/{Path(p).relative_to(uploaded / 'jobs').as_posix()}"
        for p in local["path"]
    ]
    pd.testing.assert_frame_equal(_without_location(remote), _without_location(local))
    assert list(remote.loc[remote["error"] != "", "host"]) == ["bad"]

    # A re-scan is answered from the cache by the objects' MD5s, without downloading them.
    stats = scan_mod.ScanStats()
    targets, _ = scan_mod.discover([f"gs://{BUCKET}/jobs"])
    options = scan_mod.make_options(cache_dir=tmp_path)
    again = scan_mod.to_frame(list(scan_mod.iter_rows(targets, options, workers=1, stats=stats)))
    assert stats.from_cache == len(targets) - 1
    pd.testing.assert_frame_equal(again, remote)


def test_gs_glob_pool_and_per_run(uploaded: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "rows.parquet"
    pattern = f"gs://{BUCKET}/jobs/**/*.xplane.pb"
    assert main(["scan", pattern, "-j", "2", "--no-cache", "-o", str(out)]) == 0
    pooled = pd.read_parquet(out)
    assert not any(p.endswith(".gz") for p in pooled["path"])  # the glob names .xplane.pb only
    local = scan_mod.scan(str(uploaded / "jobs" / "**" / "*.xplane.pb"), workers=1, cache=False)
    pd.testing.assert_frame_equal(_without_location(pooled), _without_location(local))

    per_run = scan_mod.scan(f"gs://{BUCKET}/jobs/job1", per_run=True, workers=1, cache=False)
    assert list(per_run["path"]) == [f"gs://{BUCKET}/jobs/job1/plugins/profile/2026_01_02"]
    assert per_run["hosts"].tolist() == [2] and per_run["error"].tolist() == [""]


def test_rows_written_to_a_bucket(uploaded: Path, gcs, tmp_path: Path) -> None:
    out = f"gs://{BUCKET}/results/fleet.ndjson"
    assert main(["scan", f"gs://{BUCKET}/jobs/job2", "-j", "1", "--no-cache", "-o", out]) == 0
    gcs.invalidate_cache()
    lines = gcs.cat(out).decode().splitlines()
    assert len(lines) == 1 and '"platform":"GPU"' in lines[0]


def test_gs_missing_prefix_is_exit_4(uploaded: Path, capsys) -> None:
    assert main(["scan", f"gs://{BUCKET}/nothing-here", "--no-cache"]) == 4
    assert "no profiles found" in capsys.readouterr().err
    assert os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] == "false"
