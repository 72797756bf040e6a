"""Where work on a profile goes side by side in threads, and where a small profile goes without.

Planes, devices and analyzers are independent, and the C kernels, hashlib and numpy let go of
the GIL in their loops: a large profile's work goes to a thread pool. A small profile's does
not. Starting the threads, importing concurrent.futures (and logging with it) and handing the
GIL back and forth cost it more than they save (the 0.86 MB v6e profile: about 7 ms of
``info`` and 13 ms of ``analyze``), so its work is done in the calling thread, in the order it
is submitted, with the same results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

# Profiles smaller than this (bytes, decompressed) are decoded and hashed in the calling thread.
PARALLEL_BYTES = 8 << 20

# Profiles with fewer ops than this (all devices together) are analysed in the calling thread:
# every profile of tests/ and ../shared/profiles (up to 7,000 ops) analyses faster that way.
PARALLEL_OPS = 20_000


def pool(workers: int, name: str, *, parallel: bool = True, beside: bool = False) -> Any:
    """A ThreadPoolExecutor of ``workers`` threads named ``name``-N; with ``parallel`` False,
    or with one worker that the caller would only wait for, an :class:`InThread` executor
    (nothing imported, no thread started). A caller that works on while the pool does (the
    hash beside the build, the scopes beside the timeline) says ``beside``: its one worker
    is then a thread."""
    if parallel and (workers > 1 or (beside and workers == 1)):
        from concurrent.futures import ThreadPoolExecutor

        return ThreadPoolExecutor(workers, thread_name_prefix=name)
    return InThread()


class InThread:
    """An executor (``submit``, ``map``, ``with``) that makes each call as it is submitted."""

    def __enter__(self) -> InThread:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Done:
        return Done(fn, args, kwargs)

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any]) -> Iterator[Any]:
        # Every call made before the first result is taken, as Executor.map submits them all.
        return iter([fn(*args) for args in zip(*iterables, strict=False)])


class Done:
    """A call already made, as a future: :meth:`result` returns what it returned or raises
    what it raised."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]):
        self._value: Any = None
        self._error: Exception | None = None
        try:
            self._value = fn(*args, **kwargs)
        except Exception as exc:  # raised by result(), where a pool's future raises it
            self._error = exc

    def done(self) -> bool:
        return True

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value
