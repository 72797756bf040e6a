"""tpuperf._threads: the in-thread executor a small profile uses gives what a thread pool gives."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tpuperf import _threads


def _outcome(executor: Any) -> list[Any]:
    calls: list[int] = []

    def work(x: int, scale: int = 1) -> int:
        calls.append(x)
        if x == 3:
            raise ValueError(f"no {x}")
        return x * scale

    with executor as pool:
        futures = [pool.submit(work, x, scale=10) for x in range(5)]
        mapped = list(pool.map(work, [5, 6], [2, 3]))
        results: list[Any] = []
        for future in futures:
            try:
                results.append(future.result())
            except ValueError as exc:  # raised by result(), not by submit()
                results.append(("raised", str(exc)))
    return [sorted(calls), results, mapped]


def test_in_thread_gives_what_a_pool_gives() -> None:
    expected = [[0, 1, 2, 3, 4, 5, 6], [0, 10, 20, ("raised", "no 3"), 40], [10, 18]]
    assert _outcome(ThreadPoolExecutor(2)) == expected
    assert _outcome(_threads.InThread()) == expected


def test_map_raises_what_the_call_raised() -> None:
    def fail(x: int) -> int:
        raise KeyError(x)

    for executor in (ThreadPoolExecutor(2), _threads.InThread()):
        with executor as pool, pytest.raises(KeyError):
            list(pool.map(fail, [1, 2]))


@pytest.mark.parametrize(
    ("workers", "parallel", "threads"), [(4, True, True), (1, True, False), (4, False, False)]
)
def test_pool_is_a_thread_pool_only_for_parallel_work(
    workers: int, parallel: bool, threads: bool
) -> None:
    pool = _threads.pool(workers, "tpuperf-test", parallel=parallel)
    with pool:
        assert isinstance(pool, ThreadPoolExecutor) == threads
        assert pool.submit(sum, [1, 2]).result() == 3
