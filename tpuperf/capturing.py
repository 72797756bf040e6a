"""Capture profiles from running JAX jobs, and profile steps of a loop you own.

:func:`capture` speaks the profiler service's gRPC protocol
(``tensorflow.ProfilerService/Profile``, see :mod:`tpuperf._profiler_service`) to every
address at once. All hosts get the same start time (``ProfileOptions.start_timestamp_ns``),
so their profiles cover one window, and each server is asked to send its XSpace back
(``ProfileRequest.emit_xspace``), so the profiles land on the caller's disk even when the
jobs run elsewhere::

    LOGDIR/plugins/profile/<session>/<host>_<port>.xplane.pb

which is the layout XProf and TensorBoard open. Files are written under a temporary name
and renamed, so a reader never sees half a profile. A server whose jaxlib predates
``emit_xspace`` ignores it and, like XProf's capture, writes the profile on its own disk
under the ``repository_root`` we send (our logdir, as an absolute path); the result says so.

Example::

    paths = tpuperf.capture(["10.0.0.2:9012", "10.0.0.3:9012"], duration_s=3, logdir="logs")

For a loop you own, :func:`profile_steps` wraps ``jax.profiler`` into the same layout::

    with tpuperf.profile_steps(100, 105, logdir="logs") as prof:
        for step in range(1000):
            with prof.step(step):
                state = train_step(state, batch)

The start time is the caller's clock: hosts whose clocks are far from it (no NTP) start
early or late by that much. Nothing here prints; progress goes to the ``progress`` callback.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field
from pathlib import Path
from typing import Any

from tpuperf._dataclasses import dataclass
from tpuperf.errors import CaptureFailed, UsageError

# Time between sending the requests and the common start: enough for the requests to
# reach every host over established connections, small enough not to be noticed.
_LEAD_S = 0.5
_MAX_WORKERS = 64
_EMPTY_TRACE = "no trace events collected: is the job running steps during the window?"


@dataclass(frozen=True)
class Target:
    """One profiler server: ``host:port`` of a process that called ``jax.profiler.start_server``."""

    host: str
    port: int

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def file_stem(self) -> str:
        """``<host>_<port>``, with anything a file name should not hold replaced by ``-``."""
        host = "".join(c if c.isalnum() or c in "-." else "-" for c in self.host)
        return f"{host}_{self.port}"


@dataclass
class HostCapture:
    """What happened for one address."""

    target: Target
    path: Path | None = None  # the profile on this machine
    size_bytes: int = 0
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    remote_path: str | None = None  # where a server that kept the profile wrote it
    start_ns: int = 0  # the requested start of the window this host was captured in
    attempts: int = 0

    @property
    def address(self) -> str:
        return self.target.address

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class CaptureResult:
    """One capture session: where it went and what each host gave."""

    session: str
    session_dir: Path
    duration_s: float
    hosts: list[HostCapture]

    @property
    def saved(self) -> list[Path]:
        return [h.path for h in self.hosts if h.path is not None]

    @property
    def failed(self) -> list[HostCapture]:
        return [h for h in self.hosts if not h.ok]


@dataclass(frozen=True)
class CaptureEvent:
    """A progress event. ``kind`` is one of:

    ``connecting`` (per address), ``window`` (the common window is set: ``start_ns`` to
    ``stop_ns``, Unix ns), ``writing`` (a host's profile arrived, ``size_bytes``),
    ``saved`` (``path``), ``failed`` (``message``), ``note`` (``message``), ``retry``
    (``message`` says which hosts and which attempt).
    """

    kind: str
    address: str | None = None
    message: str = ""
    start_ns: int = 0
    stop_ns: int = 0
    path: Path | None = None
    size_bytes: int = 0


Progress = Callable[[CaptureEvent], None]


class CaptureIncomplete(CaptureFailed):
    """Some hosts failed; the others were saved. ``result`` holds both."""

    def __init__(self, message: str, result: CaptureResult) -> None:
        super().__init__(message)
        self.result = result


class _HostError(Exception):
    """A host-level failure, already phrased for the user."""


def default_session_name() -> str:
    """A session name like XProf's: the local time as ``YYYY_MM_DD_HH_MM_SS``."""
    return time.strftime("%Y_%m_%d_%H_%M_%S")


def parse_addresses(specs: str | Iterable[str]) -> list[Target]:
    """Turn ``host:port[,host:port...]`` strings, or files of them, into targets.

    A file holds one address per line (commas also work); blank lines and ``#`` comments
    are skipped. IPv6 hosts are written ``[::1]:9012``. Duplicates are dropped.
    """
    items = [specs] if isinstance(specs, str) else list(specs)
    targets: list[Target] = []
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            if os.path.isfile(part):
                targets.extend(_read_address_file(Path(part)))
            else:
                targets.append(_parse_address(part))
    unique = list(dict.fromkeys(targets))
    if not unique:
        raise UsageError("no addresses given: pass host:port[,host:port...] or a file of them")
    return unique


def _read_address_file(path: Path) -> list[Target]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(
            f"{path}: not a file of host:port addresses (it is not text; a profile is read by "
            "tpuperf analyze, not captured)"
        ) from None
    targets = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        for part in line.split(","):
            if part.strip():
                try:
                    targets.append(_parse_address(part.strip()))
                except UsageError as exc:
                    raise UsageError(f"{path}:{number}: {exc}") from None
    if not targets:
        raise UsageError(f"{path}: no addresses in the file (one host:port per line)")
    return targets


def _parse_address(text: str) -> Target:
    if text.startswith("["):  # [v6]:port
        host, sep, port = text[1:].partition("]:")
    else:
        host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdecimal() or len(port) > 5 or not 0 < int(port) < 65536:
        raise UsageError(
            f"bad address {text!r}: expected host:port (the port the job passed to "
            "jax.profiler.start_server), or a file of addresses"
        )
    return Target(host, int(port))


def capture(
    addresses: str | Sequence[str],
    duration_s: float = 2.0,
    logdir: str | os.PathLike[str] = "profiles",
    session: str | None = None,
    host_tracer_level: int = 2,
    python_tracer: bool = False,
    delay_s: float = 0.0,
    retries: int = 0,
    progress: Progress | None = None,
) -> list[Path]:
    """Capture ``duration_s`` seconds from every address at once; return the saved files.

    ``addresses`` is ``"host:port,host:port"``, a list of them, or a file of them. The
    window starts ``delay_s`` after every host has been reached (plus half a second), the
    same instant for all. Profiles go to ``LOGDIR/plugins/profile/<session>/<host>_<port>
    .xplane.pb`` (``session`` defaults to the local time, ``YYYY_MM_DD_HH_MM_SS``).
    ``host_tracer_level`` is 0-3 (2 records XLA ops on host threads), ``python_tracer``
    records Python calls (slow), and a host that fails is tried ``retries`` more times in a
    later window. ``progress`` receives :class:`CaptureEvent`.

    Raises :class:`CaptureIncomplete` (a :class:`~tpuperf.errors.CaptureFailed`, exit code
    5) naming the hosts that failed, after saving the others; its ``result`` lists both.
    """
    result = run_capture(
        parse_addresses(addresses),
        duration_s=duration_s,
        logdir=logdir,
        session=session,
        host_tracer_level=host_tracer_level,
        python_tracer=python_tracer,
        delay_s=delay_s,
        retries=retries,
        progress=progress,
    )
    raise_for_failures(result)
    return result.saved


def raise_for_failures(result: CaptureResult, reasons_shown: bool = False) -> None:
    """Raise :class:`CaptureIncomplete` if any host of ``result`` failed: one line that names
    the failed hosts and, unless ``reasons_shown`` (the CLI printed each host's failure as it
    happened), why each failed."""
    failed = result.failed
    if not failed:
        return
    if len(failed) == len(result.hosts):
        head = f"capture failed for {'the host' if len(failed) == 1 else 'every host'}"
        tail = "nothing was saved"
    else:
        head = f"capture failed for {len(failed)} of {len(result.hosts)} hosts"
        tail = f"the other hosts were saved to {result.session_dir}"
    if reasons_shown:
        hosts = ", ".join(h.address for h in failed)
        raise CaptureIncomplete(f"{head} ({tail}): {hosts}; why is said above", result)
    reasons = "; ".join(f"{h.address}: {h.error}" for h in failed)
    raise CaptureIncomplete(f"{head} ({tail}): {reasons}", result)


def run_capture(
    targets: Sequence[Target],
    duration_s: float = 2.0,
    logdir: str | os.PathLike[str] = "profiles",
    session: str | None = None,
    host_tracer_level: int = 2,
    python_tracer: bool = False,
    delay_s: float = 0.0,
    retries: int = 0,
    progress: Progress | None = None,
    connect_timeout_s: float = 5.0,
    collect_timeout_s: float = 60.0,
) -> CaptureResult:
    """Like :func:`capture`, but returns every host's outcome instead of raising for them.

    ``connect_timeout_s`` bounds reaching a host; ``collect_timeout_s`` is how long after
    the window a host may take to send its profile before the call counts as timed out.
    """
    _check_options(duration_s, host_tracer_level, delay_s, retries, session)
    try:
        import grpc  # noqa: F401  (only to fail early with an install hint)
    except ModuleNotFoundError:
        raise CaptureFailed(
            "capture needs grpcio: pip install 'tpuperf[capture]' (or pip install grpcio)"
        ) from None
    session = session or default_session_name()
    session_dir = Path(logdir).expanduser().resolve() / "plugins" / "profile" / session
    emit = progress or (lambda event: None)
    hosts = {t: HostCapture(t) for t in dict.fromkeys(targets)}
    pending = list(hosts)
    for attempt in range(retries + 1):
        if attempt:
            emit(
                CaptureEvent(
                    "retry",
                    message=f"attempt {attempt + 1} of {retries + 1} for "
                    + ", ".join(t.address for t in pending),
                )
            )
            time.sleep(min(float(attempt), 5.0))
        for target in pending:
            hosts[target].attempts += 1
        _capture_round(
            [hosts[t] for t in pending],
            duration_s=duration_s,
            session=session,
            session_dir=session_dir,
            host_tracer_level=host_tracer_level,
            python_tracer=python_tracer,
            delay_s=delay_s,
            connect_timeout_s=connect_timeout_s,
            collect_timeout_s=collect_timeout_s,
            emit=emit,
        )
        pending = [t for t in pending if not hosts[t].ok]
        if not pending:
            break
    return CaptureResult(session, session_dir, duration_s, list(hosts.values()))


def _check_options(
    duration_s: float, host_tracer_level: int, delay_s: float, retries: int, session: str | None
) -> None:
    if not duration_s > 0:
        raise UsageError(f"duration must be positive, got {duration_s} s")
    if host_tracer_level not in (0, 1, 2, 3):
        raise UsageError(f"host tracer level must be 0, 1, 2 or 3, got {host_tracer_level}")
    if delay_s < 0:
        raise UsageError(f"delay must not be negative, got {delay_s} s")
    if retries < 0:
        raise UsageError(f"retries must not be negative, got {retries}")
    if session is not None and (
        not session or session in (".", "..") or "/" in session or os.sep in session
    ):
        raise UsageError(f"bad session name {session!r}: use a plain directory name")


def _capture_round(
    hosts: list[HostCapture],
    *,
    duration_s: float,
    session: str,
    session_dir: Path,
    host_tracer_level: int,
    python_tracer: bool,
    delay_s: float,
    connect_timeout_s: float,
    collect_timeout_s: float,
    emit: Progress,
) -> None:
    """Reach every host, then ask them all for the same window; fill in ``hosts``."""
    for host in hosts:
        host.error, host.path, host.remote_path, host.size_bytes = None, None, None, 0
    with ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, len(hosts))) as pool:
        channels = list(pool.map(lambda h: _connect(h, connect_timeout_s, emit), hosts))
        try:
            live = [(h, c) for h, c in zip(hosts, channels, strict=True) if c is not None]
            if not live:
                return
            start_ns = time.time_ns() + int((_LEAD_S + delay_s) * 1e9)
            stop_ns = start_ns + int(duration_s * 1e9)
            emit(CaptureEvent("window", start_ns=start_ns, stop_ns=stop_ns))
            # Every request is in flight before any answer is read: the gRPC futures do
            # not need a thread each, so a thousand hosts still start together.
            requests = [
                _request(
                    host,
                    channel,
                    start_ns=start_ns,
                    duration_s=duration_s,
                    session=session,
                    session_dir=session_dir,
                    host_tracer_level=host_tracer_level,
                    python_tracer=python_tracer,
                    collect_timeout_s=collect_timeout_s,
                )
                for host, channel in live
            ]
            answers = [
                pool.submit(_receive, host, future, timeout_s, session_dir, emit)
                for (host, _), (future, timeout_s) in zip(live, requests, strict=True)
            ]
            for answer in answers:
                answer.result()
        finally:
            for channel in channels:
                if channel is not None:
                    channel.close()


def _connect(host: HostCapture, timeout_s: float, emit: Progress) -> Any:
    """Open a gRPC channel to ``host`` and wait until it is ready; None (and error set) if not.

    A plain TCP connection first, because its errors say what is wrong (refused, no such
    host, no answer) where gRPC only reports that the channel is not ready.
    """
    import grpc

    target = host.target
    emit(CaptureEvent("connecting", address=target.address))
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection((target.host, target.port), timeout=timeout_s):
            pass
    except ConnectionRefusedError:
        return _fail(
            host,
            emit,
            f"connection refused: nothing is listening on port {target.port} of {target.host} "
            f"(is the job running, and did it call jax.profiler.start_server({target.port})?)",
        )
    except socket.gaierror as exc:
        return _fail(host, emit, f"cannot resolve host {target.host!r} ({exc.strerror})")
    except TimeoutError:
        return _fail(
            host,
            emit,
            f"no answer within {timeout_s:g} s: the host is down or a firewall drops "
            f"connections to port {target.port}",
        )
    except OSError as exc:
        return _fail(host, emit, f"cannot connect: {exc.strerror or exc}")
    channel = grpc.insecure_channel(
        target.address,
        options=[
            # Profiles are often far over gRPC's 4 MiB default.
            ("grpc.max_receive_message_length", -1),
            ("grpc.max_send_message_length", -1),
        ],
    )
    try:
        grpc.channel_ready_future(channel).result(timeout=max(0.1, deadline - time.monotonic()))
    except grpc.FutureTimeoutError:
        channel.close()
        return _fail(
            host,
            emit,
            f"something listens on port {target.port} but no gRPC connection came up within "
            f"{timeout_s:g} s: is it the port the job passed to jax.profiler.start_server?",
        )
    return channel


def _fail(host: HostCapture, emit: Progress, message: str) -> None:
    host.error = message
    emit(CaptureEvent("failed", address=host.address, message=message))
    return None


def _request(
    host: HostCapture,
    channel: Any,
    *,
    start_ns: int,
    duration_s: float,
    session: str,
    session_dir: Path,
    host_tracer_level: int,
    python_tracer: bool,
    collect_timeout_s: float,
) -> tuple[Any, float]:
    """Send ``host`` its Profile request; return the call's future and its timeout."""
    from tpuperf import _profiler_service as ps

    duration_ms = max(1, round(duration_s * 1000))
    request = ps.ProfileRequest(
        duration_ms=duration_ms,
        emit_xspace=True,
        # Only read by a server too old for emit_xspace: where it writes on its own disk.
        repository_root=str(session_dir.parent),
        session_id=session,
        host_name=host.target.file_stem,
        opts=ps.ProfileOptions(
            version=1,
            host_tracer_level=host_tracer_level,
            device_tracer_level=1,
            python_tracer_level=1 if python_tracer else 0,
            # The HLO modules, whose op metadata names each op's scope and source line on
            # GPU and CPU (tpuperf tree); in-process traces include them by default.
            enable_hlo_proto=True,
            start_timestamp_ns=start_ns,
            duration_ms=duration_ms,
        ),
    )
    call = channel.unary_unary(
        ps.PROFILE_METHOD,
        request_serializer=lambda message: message.SerializeToString(),
        response_deserializer=ps.ProfileResponseBytes.FromString,
    )
    timeout_s = max(0.0, (start_ns - time.time_ns()) / 1e9) + duration_s + collect_timeout_s
    host.start_ns = start_ns
    return call.future(request, timeout=timeout_s), timeout_s


def _receive(
    host: HostCapture, future: Any, timeout_s: float, session_dir: Path, emit: Progress
) -> None:
    """Wait for ``host``'s answer and save the profile it holds."""
    import grpc

    try:
        response = future.result()
    except grpc.RpcError as exc:
        _fail(host, emit, _rpc_error_message(exc, host.target, timeout_s))
        return
    if response.empty_trace or (response.HasField("xspace") and not response.xspace):
        _fail(host, emit, _EMPTY_TRACE)
        return
    if not response.HasField("xspace"):
        _server_kept_profile(host, session_dir, emit)
        return
    emit(CaptureEvent("writing", address=host.address, size_bytes=len(response.xspace)))
    try:
        path = _write_atomic(session_dir, f"{host.target.file_stem}.xplane.pb", response.xspace)
    except OSError as exc:
        _fail(host, emit, f"cannot write the profile under {session_dir}: {exc}")
        return
    host.path, host.size_bytes = path, len(response.xspace)
    emit(CaptureEvent("saved", address=host.address, path=path, size_bytes=host.size_bytes))


def _server_kept_profile(host: HostCapture, session_dir: Path, emit: Progress) -> None:
    remote = session_dir / f"{host.target.file_stem}.xplane.pb"
    host.remote_path = str(remote)
    note = (
        f"{host.address} did not send the profile back (its jaxlib predates "
        f"ProfileRequest.emit_xspace), so it wrote it on its own disk as {remote}"
    )
    if remote.is_file():  # the job runs here, or shares this filesystem
        host.path, host.size_bytes = remote, remote.stat().st_size
        note += ", which is on this machine too"
    else:
        note += ": copy it from that host"
    host.notes.append(note)
    emit(CaptureEvent("note", address=host.address, message=note))
    if host.path is not None:
        emit(
            CaptureEvent("saved", address=host.address, path=host.path, size_bytes=host.size_bytes)
        )


def _rpc_error_message(exc: Any, target: Target, timeout_s: float) -> str:
    import grpc

    code = exc.code() if hasattr(exc, "code") else None
    details = (exc.details() if hasattr(exc, "details") else None) or str(exc)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return (
            f"deadline exceeded: no profile within {timeout_s:.0f} s (the window plus the time "
            "allowed to collect it); the host may be overloaded, or its clock far behind "
            "this machine's"
        )
    if code == grpc.StatusCode.UNAVAILABLE:
        return (
            f"connection lost or refused ({details}): is the job still running with its "
            f"profiler server on port {target.port}?"
        )
    if code == grpc.StatusCode.CANCELLED:
        return "the capture was cancelled before the profile arrived"
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return (
            f"port {target.port} serves gRPC but not the profiler service: is it the port "
            "the job passed to jax.profiler.start_server?"
        )
    name = code.name if code is not None else "error"
    return f"the profiler server answered {name}: {details}"


def _write_atomic(directory: Path, name: str, data: bytes) -> Path:
    """Write ``data`` to ``directory/name`` whole or not at all (through a dot-named temporary
    file that readers globbing ``*.xplane.pb`` never pick up; see tpuperf.output)."""
    from tpuperf.files import write_atomic

    final = directory / name
    write_atomic(final, data)
    return final


# --- profiling steps of a loop you own ---------------------------------------------------


class StepProfiler:
    """Profiles steps ``start_step`` to ``stop_step - 1`` of a training loop (see
    :func:`profile_steps`). ``path`` is the saved profile once the range has ended."""

    def __init__(
        self,
        start_step: int,
        stop_step: int,
        logdir: str | os.PathLike[str] = "profiles",
        session: str | None = None,
        host_tracer_level: int = 2,
        python_tracer: bool = False,
        name: str = "train",
    ) -> None:
        if not 0 <= start_step < stop_step:
            raise UsageError(
                f"profile_steps needs 0 <= start_step < stop_step, got {start_step}, {stop_step}"
            )
        _check_options(1.0, host_tracer_level, 0.0, 0, session)
        self.start_step, self.stop_step = start_step, stop_step
        self.logdir = Path(logdir).expanduser().resolve()
        self.session = session or default_session_name()
        self.session_dir = self.logdir / "plugins" / "profile" / self.session
        self.host_tracer_level, self.python_tracer, self.name = (
            host_tracer_level,
            python_tracer,
            name,
        )
        self.paths: list[Path] = []
        self._staging: Path | None = None
        self._done = False
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self._staging is not None

    @property
    def path(self) -> Path | None:
        return self.paths[0] if self.paths else None

    def step(self, step_num: int) -> contextlib.AbstractContextManager[Any]:
        """Call at the top of every step. Starts tracing at ``start_step``, stops and saves
        at ``stop_step``; returns a context manager that marks the step in the trace
        (``jax.profiler.StepTraceAnnotation``) while tracing, so ``with prof.step(i):``
        wraps the step's work."""
        with self._lock:
            if self.active and not self.start_step <= step_num < self.stop_step:
                self._stop()
            if not self.active and not self._done and self.start_step <= step_num < self.stop_step:
                self._start()
        if self.active:
            import jax

            return jax.profiler.StepTraceAnnotation(self.name, step_num=step_num)
        return contextlib.nullcontext()

    def stop(self) -> Path | None:
        """Stop early (or after the loop) and save what was traced; the saved file or None."""
        with self._lock:
            if self.active:
                self._stop()
        return self.path

    def __enter__(self) -> StepProfiler:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _start(self) -> None:
        import jax

        options = jax.profiler.ProfileOptions()
        options.host_tracer_level = self.host_tracer_level
        options.python_tracer_level = 1 if self.python_tracer else 0
        # jax names the session directory itself; trace into a private staging logdir on
        # the same filesystem and move the files into our session afterwards.
        self.logdir.mkdir(parents=True, exist_ok=True)
        staging = self.logdir / f".tpuperf-staging-{os.getpid()}-{os.urandom(4).hex()}"
        jax.profiler.start_trace(str(staging), profiler_options=options)
        self._staging = staging

    def _stop(self) -> None:
        import jax

        staging, self._staging, self._done = self._staging, None, True
        assert staging is not None
        try:
            jax.profiler.stop_trace()
            self.session_dir.mkdir(parents=True, exist_ok=True)
            for produced in sorted(staging.glob("plugins/profile/*/*.xplane.pb")):
                final = self.session_dir / produced.name
                os.replace(produced, final)
                self.paths.append(final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def profile_steps(
    start_step: int,
    stop_step: int,
    logdir: str | os.PathLike[str] = "profiles",
    session: str | None = None,
    host_tracer_level: int = 2,
    python_tracer: bool = False,
) -> StepProfiler:
    """Profile steps ``start_step`` to ``stop_step - 1`` (like ``range``) of a loop you own.

    The profile goes to ``LOGDIR/plugins/profile/<session>/<hostname>.xplane.pb``, the
    layout :func:`capture` writes, and each profiled step is marked as a ``train`` step::

        with tpuperf.profile_steps(100, 105, logdir="logs") as prof:
            for step in range(1000):
                with prof.step(step):
                    state = train_step(state, batch)
        print(prof.path)

    ``prof.step(i)`` may also be called as a plain statement at the top of the step. The
    trace stops at ``stop_step``, or when the ``with`` block (or ``prof.stop()``) ends.
    Wraps ``jax.profiler.start_trace``/``stop_trace``, so only one may run at a time.
    """
    return StepProfiler(start_step, stop_step, logdir, session, host_tracer_level, python_tracer)
