"""`--engine ray` on a local Ray instance gives the same table as `--engine local`.

Ray starts once for the module (it takes seconds); the scans reuse it. Skipped without ray.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

# Ray reports usage statistics over the internet unless told not to; tests stay offline.
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
ray = pytest.importorskip("ray")

from fixtures.generate import write_run  # noqa: E402
from tpuperf import scanning as scan_mod  # noqa: E402
from tpuperf.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ray")
    for index, scenario in enumerate(("host_bound", "straggler")):
        write_run(scenario, root / f"job{index}", run_name=f"run{index}", seed=index)
    (root / "job1" / "corrupt.xplane.pb").write_bytes(b"\x0f" * 40)
    return root


def test_ray_table_equals_local(local_ray, tree: Path, tmp_path: Path) -> None:
    local = scan_mod.scan(tree, workers=1, cache=False)
    on_ray = scan_mod.scan(tree, engine="ray", cache=False)
    pd.testing.assert_frame_equal(on_ray, local)
    assert (local["error"] != "").sum() == 1
    per_run = scan_mod.scan(tree, engine="ray", per_run=True, workers=2, cache_dir=tmp_path)
    pd.testing.assert_frame_equal(
        per_run, scan_mod.scan(tree, per_run=True, workers=1, cache=False)
    )


def test_cli_engine_ray(local_ray, tree: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "ray.ndjson"
    assert main(["scan", str(tree), "--engine", "ray", "--no-cache", "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    expected = scan_mod.scan(tree, workers=1, cache=False)
    pd.testing.assert_frame_equal(scan_mod.to_frame(rows), expected)
