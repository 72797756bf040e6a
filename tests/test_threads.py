"""tpuperf._threads: the in-thread executor a small profile uses gives what a thread pool gives."""

from __future__ import annotations

import threading
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
    ("workers", "parallel", "beside", "threads"),
    [
        (4, True, False, True),
        (1, True, False, False),
        (4, False, False, False),
        (1, True, True, True),  # one worker beside the caller's own work: a thread
        (1, False, True, False),
    ],
)
def test_pool_is_a_thread_pool_only_for_parallel_work(
    workers: int, parallel: bool, beside: bool, threads: bool
) -> None:
    pool = _threads.pool(workers, "tpuperf-test", parallel=parallel, beside=beside)
    with pool:
        assert isinstance(pool, ThreadPoolExecutor) == threads
        assert pool.submit(sum, [1, 2]).result() == 3
        ran_in = pool.submit(threading.current_thread).result()
        assert (ran_in is not threading.current_thread()) == threads


def test_a_large_profile_is_hashed_beside_its_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # The content key is made in a thread of its own while the calling thread builds the
    # tables (hashlib lets go of the GIL): one after the other, a large first read waits for
    # both.
    from tpuperf import cache

    threads: dict[str, threading.Thread] = {}

    def key(data: Any) -> str:
        threads["hash"] = threading.current_thread()
        return "sha256:test"

    def decode(url: str, host: str, data: Any, stop: Any = None) -> str:
        threads["decode"] = threading.current_thread()
        return "tables"

    monkeypatch.setattr(cache, "_mapped_content_key", key)
    monkeypatch.setattr(cache, "decode_host", decode)
    store = cache.Cache(tmp_path)
    large = b"\0" * _threads.PARALLEL_BYTES
    assert cache._hash_beside_build("f", "h", large, store) == ("sha256:test", "tables")
    assert threads["decode"] is threading.current_thread()
    assert threads["hash"] is not threading.current_thread()
    # A small profile's are made in the calling thread, one after the other.
    assert cache._hash_beside_build("f", "h", b"\0" * 1024, store) == ("sha256:test", "tables")
    assert threads["hash"] is threading.current_thread()
