"""Fleet-scale batch analysis: many profiles in, one row per profile out (``tpuperf scan``).

The pieces, in the order a scan runs them::

    discover(paths, per_run)  -> [Target]     files, run dirs, logdirs, globs; local or fsspec URLs
    scan_one(target, options) -> row          the per-profile function every engine runs
    iter_rows(targets, ...)   -> rows         in target order, as they finish (local pool or Ray)
    scan(paths, ...)          -> DataFrame    all of the above, for Python callers

A row is a flat dict whose names and dtypes :data:`ROW_FIELDS` declares (nested report fields
flattened with a dot: ``step_time_ms.median``). Its numbers are those of ``tpuperf analyze`` on the
same profile. A profile that cannot be read or analysed becomes a row whose ``error`` says why;
the scan goes on. Decoded tables and finished rows are cached by content (:mod:`tpuperf.cache`),
so a re-scan of unchanged profiles neither decodes nor analyses them (nor retries an unchanged
local file that could not be read).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from tpuperf import gates, jsonout
from tpuperf._dataclasses import dataclass
from tpuperf.errors import BadInput, TpuperfError, UsageError
from tpuperf.gates import Gate
from tpuperf.sources import filesystem, host_name, strip_profile_suffix

if TYPE_CHECKING:
    import pandas as pd

    from tpuperf.analyzers.base import AnalysisConfig
    from tpuperf.cache import Cache

# The version of the row layout: the one of every tpuperf JSON output.
SCHEMA_VERSION = jsonout.SCHEMA_VERSION

# The row schema: name -> (pandas dtype, meaning). README documents every name here (tests hold
# it to that); ndjson, CSV and Parquet use these names, in this order.
ROW_FIELDS: dict[str, tuple[str, str]] = {
    "schema_version": ("int64", "version of this row layout (now 1)"),
    "path": (
        "string",
        "the profile file (absolute path or URL); with --per-run, the run directory",
    ),
    "run": ("string", "the run: the name of the directory holding the profile"),
    "host": ("string", "the host, named after its file; empty with --per-run"),
    "hosts": ("Int64", "hosts analysed together (1 unless --per-run)"),
    "platform": ("string", "TPU, GPU or CPU"),
    "chip": ("string", "the chip (device_type_string), comma-separated when several"),
    "devices": ("Int64", "devices analysed"),
    "steps": ("Int64", "steps analysed (warm-up left out, as tpuperf analyze does)"),
    "step_time_ms.median": ("float64", "median step time, ms"),
    "step_time_ms.mean": ("float64", "mean step time, ms"),
    "step_time_ms.p90": ("float64", "90th percentile step time, ms"),
    "iteration_time_ms.median": ("float64", "median iteration (step start to next), ms"),
    "iteration_time_ms.mean": ("float64", "mean iteration time, ms"),
    "iteration_time_ms.p90": ("float64", "90th percentile iteration time, ms"),
    "outside_steps_ms": ("float64", "time after a step ends, before the next, per iteration"),
    "busy_pct": ("float64", "time the op line is busy, % of the iteration"),
    "idle_pct": ("float64", "idle time, % of the iteration, averaged over devices"),
    "exposed_collective_pct": ("float64", "collective time compute did not hide, % of iteration"),
    "flops_utilization_pct": ("float64", "achieved FLOP/s over peak, %"),
    "mfu_pct": ("float64", "model FLOP/s over peak, %"),
    "peak_hbm_gib": ("float64", "the largest program's peak device memory, GiB (see Memory)"),
    "headroom_pct": ("float64", "device memory left above that peak, % of the capacity"),
    "top_recommendation.kind": ("string", "kind of the top-ranked recommendation"),
    "top_recommendation.est_savings_pct": ("float64", "its estimated saving, % of step time"),
    "top_recommendation.est_savings_ms": ("float64", "its estimated saving per step, ms"),
    "recommendations": ("Int64", "number of recommendations"),
    "analyzer_errors": ("string", "analyzers that failed ('name: error'; '; '-separated)"),
    "error": ("string", "why the profile could not be analysed; empty when it was"),
}

# Where each analysis field comes from in the report's JSON (Report.to_dict()).
_REPORT_PATHS: dict[str, tuple[str | int, ...]] = {
    "hosts": ("summary", "hosts"),
    "platform": ("summary", "platform"),
    "chip": ("summary", "chip"),
    "devices": ("summary", "devices"),
    "steps": ("summary", "steps_analyzed"),
    "step_time_ms.median": ("summary", "step_time_ms", "median"),
    "step_time_ms.mean": ("summary", "step_time_ms", "mean"),
    "step_time_ms.p90": ("summary", "step_time_ms", "p90"),
    "iteration_time_ms.median": ("summary", "iteration_time_ms", "median"),
    "iteration_time_ms.mean": ("summary", "iteration_time_ms", "mean"),
    "iteration_time_ms.p90": ("summary", "iteration_time_ms", "p90"),
    "outside_steps_ms": ("summary", "outside_steps_ms_per_iteration"),
    "busy_pct": ("summary", "busy_pct"),
    "idle_pct": ("summary", "idle_pct"),
    "exposed_collective_pct": ("summary", "exposed_collective_pct"),
    "flops_utilization_pct": ("summary", "flops_utilization_pct"),
    "mfu_pct": ("summary", "mfu_pct"),
    "peak_hbm_gib": ("summary", "peak_hbm_gib"),
    "headroom_pct": ("summary", "headroom_pct"),
    "top_recommendation.kind": ("recommendations", 0, "kind"),
    "top_recommendation.est_savings_pct": ("recommendations", 0, "est_savings_pct"),
    "top_recommendation.est_savings_ms": ("recommendations", 0, "est_savings_ms"),
}
_LOCATION_FIELDS = ("schema_version", "path", "run", "host", "error")
_ANALYSIS_FIELDS = tuple(name for name in ROW_FIELDS if name not in _LOCATION_FIELDS)

ENGINES = ("local", "ray")


# --------------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class ProfileFile:
    url: str  # local absolute path, or a URL with its protocol
    host: str
    content: str | None = None  # content key from an object store listing, when it states one


@dataclass(frozen=True)
class Target:
    """What one row is computed from: one host file, or (``--per-run``) a run's host files."""

    path: str
    run: str
    host: str
    files: tuple[ProfileFile, ...]


def discover(paths: Iterable[str], per_run: bool = False) -> tuple[list[Target], list[str]]:
    """The targets under ``paths``, in a deterministic order, and notices for the user.

    A path is a profile file (read whatever its name), a directory (every ``*.xplane.pb`` /
    ``*.xspace.pb`` under it, gzip-compressed or not: all runs of all logdirs, not only the
    latest as ``tpuperf analyze`` reads), or a glob (``**`` recurses); local or an fsspec URL.
    Each path's profiles are sorted by URL; a profile found twice is scanned once.
    """
    found: dict[str, ProfileFile] = {}
    notices: list[str] = []
    for path in paths:
        try:
            files = _discover_one(path)
        except BadInput as exc:
            notices.append(str(exc))
            continue
        if not files:
            notices.append(f"{path}: no *.xplane.pb profiles found")
        for f in files:
            found.setdefault(f.url, f)
    files = list(found.values())
    if not per_run:
        return [Target(f.url, _run_name(f.url), f.host, (f,)) for f in files], notices
    runs: dict[str, list[ProfileFile]] = {}
    for f in files:
        runs.setdefault(_parent(f.url), []).append(f)
    targets = [
        Target(run_dir, _run_name(members[0].url), "", tuple(sorted(members, key=lambda f: f.url)))
        for run_dir, members in runs.items()
    ]
    return targets, notices


def _discover_one(path: str) -> list[ProfileFile]:
    fs, root = filesystem(path, walk=True)
    remote = "://" in path
    if any(ch in root for ch in "*?["):
        matches = fs.glob(root, detail=True)
        out: list[ProfileFile] = []
        for name in sorted(matches):
            info = matches[name]
            if info.get("type") == "directory":
                out.extend(_walk(fs, name, remote))
            elif _is_profile(name):
                out.append(_profile_file(fs, name, info, remote))
        return out
    try:
        if fs.isdir(root):
            return _walk(fs, root, remote)
        info = fs.info(root)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file or directory") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot list: {exc}") from None
    return [_profile_file(fs, root, info, remote)]


def _walk(fs: Any, root: str, remote: bool) -> list[ProfileFile]:
    listing = fs.find(root, detail=True)
    return [
        _profile_file(fs, name, listing[name], remote)
        for name in sorted(listing)
        if _is_profile(name)
    ]


def _profile_file(fs: Any, name: str, info: dict[str, Any], remote: bool) -> ProfileFile:
    from tpuperf.cache import listing_key

    url = fs.unstrip_protocol(name) if remote else name
    return ProfileFile(url, host_name(name), listing_key(info) if remote else None)


def _is_profile(name: str) -> bool:
    return strip_profile_suffix(PurePosixPath(name).name) is not None


def _parent(url: str) -> str:
    return url.rsplit("/", 1)[0]


def _run_name(url: str) -> str:
    return PurePosixPath(_parent(url)).name


# --------------------------------------------------------------------------- one profile


@dataclass
class ScanOptions:
    """What every engine's workers need besides the target; plain data, cheap to send."""

    config: dict[str, Any] = field(default_factory=dict)  # AnalysisConfig fields
    cache_dir: str | None = None  # None: no cache
    analyzers: list[str] = field(default_factory=list)  # names, part of the row cache key

    def key(self) -> dict[str, Any]:
        return {"config": self.config, "analyzers": self.analyzers, "schema": SCHEMA_VERSION}


def make_options(
    config: AnalysisConfig | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    cache: bool = True,
) -> ScanOptions:
    """Options for a scan with ``tpuperf analyze``'s defaults unless ``config`` says otherwise."""
    from tpuperf.analyzers import base
    from tpuperf.cache import default_dir

    config = config if config is not None else base.AnalysisConfig()
    fields = {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.name != "memo"  # per-analysis scratch space, never shared between profiles
    }
    if isinstance(fields.get("steps"), tuple):
        fields["steps"] = list(fields["steps"])
    directory = None
    if cache:
        directory = os.fspath(cache_dir) if cache_dir is not None else os.fspath(default_dir())
    return ScanOptions(fields, directory, [a.name for a in base.select(None)])


def scan_one(target: Target, options: ScanOptions) -> dict[str, Any]:
    """The row of one target; never raises for a bad profile (the row's ``error`` says why)."""
    from tpuperf import cache as cache_mod
    from tpuperf.profiles import assemble

    cache = cache_mod.Cache(options.cache_dir) if options.cache_dir is not None else None
    states = _local_states(target) if cache is not None else None
    try:
        known = _known_contents(target, cache)
        if cache is not None and None not in known:
            row = _cached_analysis(target, known, options, cache)
            if row is not None:
                return _located(row, target)
        parts, contents = [], []
        for f, content in zip(target.files, known, strict=True):
            tables, key = cache_mod.host_tables(f.url, f.host, cache, content)
            parts.append(tables)
            contents.append(key)
        if cache is not None and None in known:  # the same content may have been seen elsewhere
            row = _cached_analysis(target, contents, options, cache)
            if row is not None:
                return _located(row, target)
        profile = assemble(parts, target.path)
        del parts
        row = _analysis(profile, options)
        del profile
        if cache is not None:
            cache.put_row(cache.row_key(_hosts(target, contents), options.key()), row)
        return _located(row, target)
    except BadInput as exc:
        # A bad local file fails the same way until it changes: remember the error, unless the
        # file changed while it was read (it is being written).
        if cache is not None and states is not None and states == _local_states(target):
            cache.put_row(cache.failure_key(states, options.key()), {"error": str(exc)})
        return error_row(target, str(exc))
    except TpuperfError as exc:
        return error_row(target, str(exc))
    except Exception as exc:  # one profile's surprise must not stop a fleet scan
        return error_row(target, f"{type(exc).__name__}: {exc}")


def cached_row(target: Target, options: ScanOptions) -> dict[str, Any] | None:
    """The target's row when the cache has it and no file has to be read to know so."""
    from tpuperf.cache import Cache

    if options.cache_dir is None:
        return None
    cache = Cache(options.cache_dir)
    known = _known_contents(target, cache)
    if None not in known:
        row = _cached_analysis(target, known, options, cache)
        if row is not None:
            return _located(row, target)
    states = _local_states(target)
    if states is not None:
        failure = cache.get_row(cache.failure_key(states, options.key()))
        if failure is not None and isinstance(failure.get("error"), str) and failure["error"]:
            return error_row(target, failure["error"])
    return None


def error_row(target: Target, message: str) -> dict[str, Any]:
    return _located(dict.fromkeys(_ANALYSIS_FIELDS), target, error=message)


def _known_contents(target: Target, cache: Cache | None) -> list[str | None]:
    return [
        cache.content_of(f.url, f.content) if cache is not None else f.content for f in target.files
    ]


def _local_states(target: Target) -> list[tuple[str, list[int]]] | None:
    """Each file's path and settled state when all are local and settled, else None."""
    from tpuperf.cache import settled_state

    out = []
    for f in target.files:
        state = settled_state(f.url) if "://" not in f.url else None
        if state is None:
            return None
        out.append((f.url, state))
    return out


def _hosts(target: Target, contents: Sequence[str | None]) -> list[tuple[str, str]]:
    return [(f.host, str(c)) for f, c in zip(target.files, contents, strict=True)]


def _cached_analysis(
    target: Target, contents: Sequence[str | None], options: ScanOptions, cache: Cache
) -> dict[str, Any] | None:
    row = cache.get_row(cache.row_key(_hosts(target, contents), options.key()))
    if row is None or set(row) != set(_ANALYSIS_FIELDS):
        return None  # written by another row layout: recompute
    return row


def _analysis(profile: Any, options: ScanOptions) -> dict[str, Any]:
    from tpuperf.analysis import analyze
    from tpuperf.analyzers.base import AnalysisConfig

    config = dict(options.config)
    if isinstance(config.get("steps"), list):
        config["steps"] = tuple(config["steps"])
    # Rows hold no scope data, so the scope table is not built (scopes=False).
    report = analyze(profile, config=AnalysisConfig(**config), scopes=False)
    document = report.to_dict()
    row: dict[str, Any] = {name: _dig(document, path) for name, path in _REPORT_PATHS.items()}
    row["recommendations"] = len(document.get("recommendations") or [])
    row["analyzer_errors"] = "; ".join(f"{n}: {e}" for n, e in report.errors.items())
    return row


def _dig(document: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        if isinstance(step, int):
            if not isinstance(document, list) or len(document) <= step:
                return None
        elif not isinstance(document, dict):
            return None
        document = document[step] if isinstance(step, int) else document.get(step)
    return document


def _located(analysis: dict[str, Any], target: Target, error: str = "") -> dict[str, Any]:
    row: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "path": target.path,
        "run": target.run,
        "host": target.host,
        "error": error,
    }
    row.update(analysis)
    return {name: row.get(name) for name in ROW_FIELDS}


# --------------------------------------------------------------------------- engines


@dataclass
class ScanStats:
    """Counts a caller can show after (or during) a scan."""

    total: int = 0
    from_cache: int = 0  # rows answered from the cache without reading a profile
    errors: int = 0


@dataclass
class _Failure:
    """An engine could not run the per-profile function for a target (its worker died, ...)."""

    message: str


_Job = tuple[int, Target]
_Result = tuple[int, "dict[str, Any] | _Failure"]
_ScanFn = Callable[[Target, ScanOptions], "dict[str, Any]"]


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def iter_rows(
    targets: list[Target],
    options: ScanOptions,
    *,
    engine: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    stats: ScanStats | None = None,
    fn: _ScanFn | None = None,
) -> Generator[dict[str, Any], None, None]:
    """The targets' rows in target order, each yielded as soon as it and those before it are done.

    Rows the cache already holds are answered here; the rest go to ``engine``: ``local`` (this
    process with one worker, else a pool of ``workers`` processes, default one per core) or
    ``ray`` (Ray tasks on the cluster at ``ray_address``, or a local Ray instance; ``workers``
    then caps the tasks in flight). ``progress(done, total)`` is called as rows finish. Close the
    iterator (``contextlib.closing``) to stop a scan early: its workers are stopped. ``fn``
    replaces :func:`scan_one` (it must be importable by name in the workers).
    """
    fn = fn if fn is not None else scan_one
    if engine not in ENGINES:
        raise UsageError(f"--engine {engine}: choose one of {', '.join(ENGINES)}")
    if workers is not None and workers < 1:
        raise UsageError("--workers must be 1 or more")
    stats = stats if stats is not None else ScanStats()
    stats.total = len(targets)
    done: dict[int, dict[str, Any]] = {}
    pending: list[_Job] = []
    for index, target in enumerate(targets):
        row = cached_row(target, options)
        if row is None:
            pending.append((index, target))
        else:
            done[index] = row
    stats.from_cache = len(done)
    finished = len(done)
    if progress is not None:
        progress(finished, len(targets))
    next_index = 0

    def ready() -> Iterator[dict[str, Any]]:
        nonlocal next_index
        while next_index in done:
            row = done.pop(next_index)
            if row["error"]:
                stats.errors += 1
            yield row
            next_index += 1

    yield from ready()
    if not pending:
        return
    if engine == "ray":
        results = _run_ray(fn, pending, options, ray_address, workers)
    else:
        count = min(workers or default_workers(), len(pending))
        results = (
            _run_serial(fn, pending, options)
            if count == 1
            else _run_pool(fn, pending, options, count)
        )
    by_index = dict(pending)
    try:
        for index, result in results:
            if isinstance(result, _Failure):
                result = error_row(by_index[index], result.message)
            done[index] = result
            finished += 1
            if progress is not None:
                progress(finished, len(targets))
            yield from ready()
    finally:
        results.close()


# How often a process waiting for its jobs (a thread of its own, a pool's workers) wakes up. A
# Ctrl-C that the kernel hands to another of its threads (numpy's, pyarrow's) is turned into a
# KeyboardInterrupt only when the main thread runs again, not while it sleeps on a lock or reads.
_WAKE_S = 0.5


def _run_serial(
    fn: _ScanFn, jobs: list[_Job], options: ScanOptions
) -> Generator[_Result, None, None]:
    for index, target in jobs:
        yield index, _waking(fn, target, options)


def _waking(fn: _ScanFn, target: Target, options: ScanOptions) -> dict[str, Any]:
    """``fn(target, options)`` in a thread of its own, waited for _WAKE_S at a time (as a pool's
    workers are), so that a Ctrl-C is taken even while the job is blocked in a read that does
    not return. The thread is a daemon: an interrupted job does not hold the process's exit.
    Its exception is raised here."""
    import threading

    outcome: list[Any] = []

    def job() -> None:
        try:
            outcome.append((True, fn(target, options)))
        except BaseException as exc:  # raised in the waiting thread
            outcome.append((False, exc))

    worker = threading.Thread(target=job, name="tpuperf-scan", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(_WAKE_S)
    finished, value = outcome[0]
    if not finished:
        raise value
    return value  # type: ignore[no-any-return]


def _run_pool(
    fn: _ScanFn, jobs: list[_Job], options: ScanOptions, workers: int
) -> Generator[_Result, None, None]:
    """Run ``fn`` in a pool of ``workers`` processes, yielding results as they finish.

    At most two jobs per worker are queued, so a huge scan holds little in flight. When a worker
    dies (the OS killed it for memory, a native crash), the pool cannot say which job it was
    running: every job still in flight is retried alone in a fresh process once the others are
    done, and only one that kills its process alone becomes a failure.
    """
    import concurrent.futures as cf
    import multiprocessing
    from concurrent.futures.process import BrokenProcessPool

    # spawn, not fork: the parent may hold threads (a progress bar, pyarrow's pools), and a fork
    # of a threaded process can deadlock in the child.
    context = multiprocessing.get_context("spawn")

    def new_pool(size: int) -> cf.ProcessPoolExecutor:
        return cf.ProcessPoolExecutor(size, mp_context=context, initializer=_worker_init)

    queue = deque(jobs)
    suspects: list[_Job] = []
    pool = new_pool(workers)
    in_flight: dict[cf.Future[dict[str, Any]], _Job] = {}
    clean_exit = False
    try:
        while queue or in_flight:
            broken = False
            while queue and len(in_flight) < 2 * workers:
                try:
                    future = pool.submit(fn, queue[0][1], options)
                except BrokenProcessPool:  # a worker died since the last wait
                    broken = True
                    break
                in_flight[future] = queue.popleft()
            finished, _ = cf.wait(in_flight, timeout=_WAKE_S, return_when=cf.FIRST_COMPLETED)
            for future in finished:
                job = in_flight.pop(future)
                try:
                    yield job[0], future.result()
                except BrokenProcessPool:
                    suspects.append(job)
                    broken = True
                except Exception as exc:  # the result did not come back (pickling, ...)
                    yield job[0], _Failure(f"{type(exc).__name__}: {exc}")
            if broken:
                suspects.extend(in_flight.values())
                in_flight.clear()
                _stop(pool)
                pool = new_pool(workers)
        clean_exit = True
    finally:
        if clean_exit:
            pool.shutdown(wait=True)
        else:
            _stop(pool)
    for index, target in suspects:
        yield index, _run_alone(context, fn, target, options)


def _run_alone(
    context: Any, fn: _ScanFn, target: Target, options: ScanOptions
) -> dict[str, Any] | _Failure:
    """``fn(target, options)`` in a process of its own: its row, or a failure that says how the
    process died (a process rather than a pool of one, to read its exit status)."""
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_alone_main, args=(sender, fn, target, options), daemon=True)
    process.start()
    sender.close()  # the child holds the only writer: reading gives EOF once it is gone
    try:
        while not receiver.poll(_WAKE_S):
            pass
        result: dict[str, Any] | _Failure = receiver.recv()
    except EOFError:
        process.join()
        return _Failure(_died_message(process.exitcode))
    finally:
        receiver.close()
        if process.is_alive():  # Ctrl-C while it ran, or it lingers after sending
            process.terminate()
        process.join()
    return result


def _alone_main(sender: Any, fn: _ScanFn, target: Target, options: ScanOptions) -> None:
    _worker_init()
    try:
        result: dict[str, Any] | _Failure = fn(target, options)
    except Exception as exc:  # as a pool reports a function that raised
        result = _Failure(f"{type(exc).__name__}: {exc}")
    sender.send(result)


def _died_message(exitcode: int | None) -> str:
    """The row's error when a worker died while analysing the profile: how, and what to do."""
    import signal

    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "unknown"
        how = f"killed by signal {-exitcode} ({name})"
        if -exitcode == signal.SIGKILL:
            how += ", as the out-of-memory killer does"
    else:
        how = f"exited with status {exitcode}"
    return (
        f"the worker process died while analysing this profile: {how}; "
        "run `tpuperf analyze` on it alone to see why"
    )


def _worker_init() -> None:
    import signal

    # Ctrl-C reaches the whole process group; the parent alone decides to stop the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _stop(pool: Any) -> None:
    """Stop a pool now: queued jobs cancelled, running ones killed."""
    kill = getattr(pool, "kill_workers", None)  # Python 3.14+
    if kill is not None:
        kill()
        pool.shutdown(wait=True, cancel_futures=True)
        return
    # Before 3.14 there is no public way to kill the workers; shutdown() forgets them, so take
    # them first.
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
    # The pool's manager thread closes its wake-up pipe once it sees the workers gone. Wait for
    # it: before 3.12 the interpreter's exit hook can write to that pipe while it is being
    # closed, and prints an ignored "Bad file descriptor" traceback after our last line.
    if manager is not None:
        manager.join(timeout=5)


def _run_ray(
    fn: _ScanFn,
    jobs: list[_Job],
    options: ScanOptions,
    address: str | None,
    max_in_flight: int | None,
) -> Generator[_Result, None, None]:
    """Run ``fn`` as Ray tasks, one per target, yielding results as they finish.

    Connects to the cluster at ``address`` (``auto``, ``ray://host:10001``, ...), else starts a
    local Ray instance, which it shuts down at the end; a Ray already initialised in this process
    is used as it is. Tasks in flight are capped (default: twice the cluster's CPUs), so the
    object store never holds the results of a whole fleet at once.
    """
    try:
        import ray
    except ImportError:
        raise UsageError(
            "--engine ray needs Ray; install it with: pip install 'tpuperf[ray]'"
        ) from None
    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address)
        else:
            ray.init(include_dashboard=False)
        started = True
    remote = ray.remote(num_cpus=1)(fn)
    limit = max_in_flight or max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
    queue = deque(jobs)
    in_flight: dict[Any, _Job] = {}
    try:
        while queue or in_flight:
            while queue and len(in_flight) < limit:
                job = queue.popleft()
                in_flight[remote.remote(job[1], options)] = job
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=_WAKE_S)
            for ref in ready:
                job = in_flight.pop(ref)
                try:
                    yield job[0], ray.get(ref)
                except Exception as exc:  # the task failed (its worker died, out of memory, ...)
                    yield job[0], _Failure(f"the Ray task failed: {type(exc).__name__}: {exc}")
    finally:
        for ref in in_flight:
            with contextlib.suppress(Exception):  # already finished or gone: nothing to stop
                ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


# --------------------------------------------------------------------------- Python entry


def scan(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    per_run: bool = False,
    workers: int | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    cache: bool = True,
    config: AnalysisConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Analyse every profile under ``paths``; one row per profile (per run with ``per_run``).

    The columns and dtypes are :data:`ROW_FIELDS`; rows come in :func:`discover`'s order.
    ``frame.attrs["notices"]`` holds what discovery had to say (paths with no profiles).
    Raises :class:`~tpuperf.errors.BadInput` when no profile is found at all.
    """
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    texts = [os.fspath(p) for p in items]
    targets, notices = discover(texts, per_run=per_run)
    if not targets:
        raise BadInput(no_profiles_message(texts, notices))
    options = make_options(config, cache_dir, cache)
    rows = list(
        iter_rows(
            targets,
            options,
            engine=engine,
            workers=workers,
            ray_address=ray_address,
            progress=progress,
        )
    )
    frame = to_frame(rows)
    frame.attrs["notices"] = notices
    return frame


def no_profiles_message(paths: list[str], notices: list[str]) -> str:
    detail = "; ".join(notices) if notices else ", ".join(paths)
    return (
        f"no profiles found ({detail}); pass *.xplane.pb files, run directories, logdirs or "
        "globs such as 'logs/**/*.xplane.pb'"
    )


def to_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows as a DataFrame with :data:`ROW_FIELDS`' columns and dtypes."""
    import pandas as pd

    frame = pd.DataFrame.from_records(rows, columns=list(ROW_FIELDS))
    return frame.astype({name: dtype for name, (dtype, _) in ROW_FIELDS.items()})


# --------------------------------------------------------------------------- gates

_NUMERIC = ("float64", "Int64", "int64")


def gate_fields() -> dict[str, list[str]]:
    numeric = [n for n, (d, _) in ROW_FIELDS.items() if d in _NUMERIC and n != "schema_version"]
    text = [n for n, (d, _) in ROW_FIELDS.items() if d == "string"]
    return {"numeric": numeric, "text": text}


def parse_gate(text: str) -> Gate:
    """A gate over the row fields: ``idle_pct>20``, ``step_time_ms.median>=120``,
    ``top_recommendation.kind==host_bound``, ``error!=''`` (grammar: :mod:`tpuperf.gates`)."""
    fields = gate_fields()
    return gates.parse_gate(text, fields["numeric"], fields["text"], example="idle_pct>20")
