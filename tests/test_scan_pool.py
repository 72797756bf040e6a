"""The local process pool: the same rows as one process, in order, and a dead worker isolated.

Kept apart from test_scan.py with light module-level imports: the pool's workers import this
module to find the functions below.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tpuperf import scanning as scan_mod


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures.generate import write_run

    root = tmp_path_factory.mktemp("pool")
    for index, scenario in enumerate(("host_bound", "memory_bound", "straggler", "gpu_training")):
        write_run(scenario, root / f"job{index}", run_name=f"run{index}", seed=index)
    (root / "job0" / "broken.xplane.pb").write_bytes(b"\x00\x01\x02")
    return root


def test_pool_rows_equal_one_process_in_order(tree: Path, tmp_path: Path) -> None:
    import pandas as pd

    serial = scan_mod.scan(tree, workers=1, cache=False)
    seen: list[tuple[int, int]] = []
    pooled = scan_mod.scan(
        tree, workers=2, cache_dir=tmp_path, progress=lambda done, total: seen.append((done, total))
    )
    pd.testing.assert_frame_equal(pooled, serial)
    assert list(pooled["path"]) == sorted(pooled["path"])
    assert seen[0] == (0, 6) and seen[-1] == (6, 6)
    assert (pooled["error"] != "").sum() == 1


def _crash_on_marked(target: scan_mod.Target, options: scan_mod.ScanOptions) -> dict:
    if "crash" in target.path:
        os._exit(1)  # what the OS killing a worker for memory looks like to the pool
    return scan_mod.error_row(target, "")  # cheap: no profile is read


def test_dead_worker_fails_only_its_profile(tmp_path: Path) -> None:
    targets = [
        scan_mod.Target(str(tmp_path / name), "run", name, ())
        for name in ("a", "b-crash", "c", "d", "e")
    ]
    options = scan_mod.ScanOptions()
    rows = list(scan_mod.iter_rows(targets, options, workers=2, fn=_crash_on_marked))
    assert [row["host"] for row in rows] == ["a", "b-crash", "c", "d", "e"]
    errors = {row["host"]: row["error"] for row in rows}
    assert errors.pop("b-crash").startswith("the worker process died while analysing")
    assert set(errors.values()) == {""}


def _slow_after_first(target: scan_mod.Target, options: scan_mod.ScanOptions) -> dict:
    if target.host != "a":
        import time

        time.sleep(120)
    return scan_mod.error_row(target, "")


def test_interrupt_stops_the_workers_at_once(tmp_path: Path) -> None:
    import multiprocessing
    import time

    targets = [scan_mod.Target(str(tmp_path / n), "run", n, ()) for n in ("a", "b", "c", "d")]

    def interrupt(done: int, total: int) -> None:
        if done:
            raise KeyboardInterrupt

    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        list(
            scan_mod.iter_rows(
                targets, scan_mod.ScanOptions(), workers=2, fn=_slow_after_first, progress=interrupt
            )
        )
    assert time.perf_counter() - started < 60  # not the 120 s a running worker would take
    deadline = time.time() + 10
    while multiprocessing.active_children() and time.time() < deadline:
        time.sleep(0.1)
    assert not multiprocessing.active_children()


def _row(target: scan_mod.Target, options: scan_mod.ScanOptions) -> dict:
    return scan_mod.error_row(target, "")


def test_a_pool_found_broken_as_a_job_is_submitted_retries_its_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker's death can break the pool between a wait and the next submit, which then
    # raises BrokenProcessPool itself (the pool's manager thread marks it broken): the jobs in
    # flight are retried alone, the rest go to a new pool, and every profile has its row.
    import concurrent.futures as cf
    from concurrent.futures.process import BrokenProcessPool

    pools: list[Breaking] = []

    class Breaking:
        """A pool run in this process. In the first, the second job's worker dies, and the
        pool is found broken as the third is submitted."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            self.first = not pools
            self.submitted = 0
            pools.append(self)

        def submit(self, fn: object, *args: object) -> cf.Future:
            self.submitted += 1
            if self.first and self.submitted == 3:
                raise BrokenProcessPool("a worker died")
            future: cf.Future = cf.Future()
            if self.first and self.submitted == 2:
                future.set_exception(BrokenProcessPool("a worker died"))
            else:
                future.set_result(_row(*args))  # type: ignore[arg-type]
            return future

        def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
            pass

    monkeypatch.setattr(cf, "ProcessPoolExecutor", Breaking)
    targets = [
        scan_mod.Target(str(tmp_path / name), "run", name, ()) for name in ("a", "b", "c", "d")
    ]
    rows = list(scan_mod.iter_rows(targets, scan_mod.ScanOptions(), workers=2, fn=_row))
    assert [row["host"] for row in rows] == ["a", "b", "c", "d"]
    assert {row["error"] for row in rows} == {""}
    assert len(pools) == 2 and pools[1].submitted == 2  # "b" ran alone, "c" and "d" anew
