"""Capture from real JAX jobs (CPU) over the profiler service, and from fake servers.

Two example jobs (``python -m tpuperf._demo_job``) are started once for the tests of
``TestRunningJobs``; the fake servers are plain grpc servers speaking the same protocol,
for what a real jaxlib server does not do on demand (an old server, an empty trace, a
slow one).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import pytest

jax = pytest.importorskip("jax")
grpc = pytest.importorskip("grpc")

from tpuperf import _profiler_service as ps  # noqa: E402
from tpuperf._xspace_schema import XSpace  # noqa: E402
from tpuperf.capturing import (  # noqa: E402
    CaptureFailed,
    Target,
    capture,
    parse_addresses,
    profile_steps,
    run_capture,
)
from tpuperf.cli import main  # noqa: E402
from tpuperf.errors import UsageError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.jax, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start_job(port: int) -> subprocess.Popen[str]:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    return subprocess.Popen(
        [sys.executable, "-m", "tpuperf._demo_job", "--port", str(port), "--stop-with-parent"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def _wait_ready(job: subprocess.Popen[str], timeout_s: float = 90.0) -> None:
    assert job.stdout is not None
    ready = threading.Event()

    def read() -> None:
        assert job.stdout is not None
        for line in job.stdout:
            if line.startswith("READY"):
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    assert ready.wait(timeout_s), f"job exited with {job.poll()} before READY"


@pytest.fixture(scope="class")
def jobs() -> Iterator[list[str]]:
    """Two running example jobs; their addresses."""
    ports = [_free_port(), _free_port()]
    procs = [_start_job(port) for port in ports]
    try:
        for proc in procs:
            _wait_ready(proc)
        yield [f"localhost:{port}" for port in ports]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def _stats(plane: Any, stats: Any) -> dict[str, Any]:
    """Stat name -> value; a ref_value is the name of the stat metadata it points to."""
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    values = {}
    for stat in stats:
        kind = stat.WhichOneof("value")
        value = getattr(stat, kind) if kind else 0
        values[names.get(stat.metadata_id, "")] = names[value] if kind == "ref_value" else value
    return values


def _window_ns(path: Path) -> tuple[int, int]:
    """The capture window of a profile: `Task Environment` start/stop, else first/last event."""
    space = XSpace.FromString(path.read_bytes())
    for plane in space.planes:
        if plane.name == "Task Environment":
            stats = _stats(plane, plane.stats)
            if "profile_start_time" in stats and "profile_stop_time" in stats:
                return int(stats["profile_start_time"]), int(stats["profile_stop_time"])
    times = [
        (
            line.timestamp_ns * 1000 + e.offset_ps,
            line.timestamp_ns * 1000 + e.offset_ps + e.duration_ps,
        )
        for plane in space.planes
        for line in plane.lines
        for e in line.events
    ]
    return min(t[0] for t in times) // 1000, max(t[1] for t in times) // 1000


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


# --- real jobs ----------------------------------------------------------------------------


class TestRunningJobs:
    """Two example jobs, started once for these tests and stopped before the demo tests
    (which start their own), so those do not share two CPU cores with them."""

    def test_capture_one_job_gets_its_ops_and_steps(self, jobs: list[str], tmp_path: Path) -> None:
        # 2 s: on two busy cores a step of the example job can take far longer than its
        # usual 60 ms, and a 1 s window then held a single step.
        result = run_capture(
            parse_addresses(jobs[0]), duration_s=2.0, logdir=tmp_path, session="s1"
        )

        (host,) = result.hosts
        assert host.ok, host.error
        port = jobs[0].rsplit(":", 1)[1]
        assert host.path == tmp_path / "plugins" / "profile" / "s1" / f"localhost_{port}.xplane.pb"
        assert _files(tmp_path) == [host.path]  # no temporary file left beside it
        assert host.size_bytes == host.path.stat().st_size

        space = XSpace.FromString(host.path.read_bytes())
        (cpu,) = [p for p in space.planes if p.name == "/host:CPU"]
        modules, steps = set(), []
        for line in cpu.lines:
            for event in line.events:
                stats = _stats(cpu, event.stats)
                if "hlo_module" in stats:
                    modules.add(stats["hlo_module"])
                if cpu.event_metadata[event.metadata_id].name == "train":
                    steps.append(stats["step_num"])
        assert "jit_train_step" in modules  # the job's XLA ops, on host threads
        # ~60 ms steps in a 2 s window; consecutive step numbers from StepTraceAnnotation.
        assert len(steps) >= 2
        assert sorted(steps) == list(range(min(steps), min(steps) + len(steps)))

        # The server honoured start_timestamp_ns: it began tracing when asked, not on arrival.
        start_ns, stop_ns = _window_ns(host.path)
        assert abs(start_ns - host.start_ns) < 50e6
        assert 1.9e9 < stop_ns - start_ns < 2.5e9

    def test_captured_job_shows_its_layers_in_tpuperf_tree(
        self, jobs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        # 2 s, as above: tree leaves the first step out as warm-up, so it needs two or more.
        (path,) = capture(jobs[0], duration_s=2.0, logdir=tmp_path, session="tree")
        assert main(["tree", str(path), "--format", "json", "--min-pct", "0"]) == 0
        document = json.loads(capsys.readouterr().out)
        assert document["scoped"]
        nodes: dict[str, Any] = {}
        stack = [document["tree"]]
        while stack:
            node = stack.pop()
            nodes[node["path"]] = node
            stack.extend(node["children"])
        # The example job's jax.named_scope layers, each with its forward and backward time.
        for layer in ("Block_0/Attention", "Block_0/MLP"):
            node = nodes[f"jit(train_step)/Transformer/{layer}"]
            assert node["passes"]["forward"] > 0 and node["passes"]["backward"] > 0, layer
        assert nodes["jit(train_step)/adam"]["passes"]["optimizer"] > 0

    def test_two_jobs_are_captured_in_one_window(self, jobs: list[str], tmp_path: Path) -> None:
        paths = capture(jobs, duration_s=1.0, logdir=tmp_path, session="both")

        session_dir = tmp_path / "plugins" / "profile" / "both"
        assert sorted(paths) == _files(tmp_path)
        assert {p.parent for p in paths} == {session_dir}
        assert sorted(p.name for p in paths) == sorted(
            f"localhost_{a.rsplit(':', 1)[1]}.xplane.pb" for a in jobs
        )
        (a_start, a_stop), (b_start, b_stop) = (_window_ns(p) for p in paths)
        overlap = min(a_stop, b_stop) - max(a_start, b_start)
        union = max(a_stop, b_stop) - min(a_start, b_start)
        assert overlap / union >= 0.9, (a_start, a_stop, b_start, b_stop)

    def test_dead_host_is_named_and_live_one_saved(
        self, jobs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        dead = f"localhost:{_free_port()}"
        code = main(["capture", f"{jobs[0]},{dead}", "-d", "1s", "--logdir", str(tmp_path)])

        assert code == 5
        out, err = capsys.readouterr()
        assert dead in err and "connection refused" in err
        assert "capture failed for 1 of 2 hosts" in err
        (saved,) = _files(tmp_path)
        assert saved.name == f"localhost_{jobs[0].rsplit(':', 1)[1]}.xplane.pb"
        assert jobs[0] in out  # the summary table lists what was saved
        events = sum(
            len(line.events)
            for p in XSpace.FromString(saved.read_bytes()).planes
            for line in p.lines
        )
        assert f"{events:,}" in out

    def test_address_file_and_analyze_flag(
        self, jobs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        hosts = tmp_path / "hosts.txt"
        hosts.write_text(f"# the job\n{jobs[1]}\n\n")
        code = main(
            [
                "capture",
                str(hosts),
                "--duration",
                "500ms",
                "--logdir",
                str(tmp_path / "l"),
                "--analyze",
            ]
        )
        assert code == 0
        (saved,) = _files(tmp_path / "l")
        assert saved.name.endswith(f"_{jobs[1].rsplit(':', 1)[1]}.xplane.pb")


def test_profile_steps_writes_the_same_layout(tmp_path: Path) -> None:
    import jax.numpy as jnp

    step_fn = jax.jit(lambda x: jnp.tanh(x @ x).sum())
    x = jnp.ones((64, 64))
    with profile_steps(2, 5, logdir=tmp_path, session="loop") as prof:
        for step in range(7):
            with prof.step(step):
                step_fn(x).block_until_ready()
            assert prof.active == (2 <= step < 5)  # it stops at the top of step 5
    assert prof.path is not None
    assert prof.path.parent == tmp_path / "plugins" / "profile" / "loop"
    assert _files(tmp_path) == [prof.path]  # the staging directory is gone
    space = XSpace.FromString(prof.path.read_bytes())
    steps = sorted(
        _stats(plane, e.stats)["step_num"]
        for plane in space.planes
        for line in plane.lines
        for e in line.events
        if plane.event_metadata[e.metadata_id].name == "train"
    )
    assert steps == [2, 3, 4]


def test_demo_runs_and_stops_its_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    started = time.monotonic()
    code = main(["demo", "--duration", "1s", "--logdir", str(tmp_path), "--port", str(port)])
    elapsed = time.monotonic() - started

    assert code == 0, capsys.readouterr().err
    (saved,) = _files(tmp_path)
    assert saved.name == f"localhost_{port}.xplane.pb"
    assert elapsed < 120
    with pytest.raises(ConnectionRefusedError):  # the job is gone
        socket.create_connection(("localhost", port), timeout=2).close()


def _start_demo(args: list[str], **env: str) -> subprocess.Popen[str]:
    """``tpuperf ARGS`` (a demo) in a child Python, stderr piped, ``env`` added to its
    environment. SIGINT is handled as Python does by default, even when this test runs in the
    background (where SIGINT is inherited as ignored); the child has its own session, so a
    SIGINT sent to it reaches tpuperf alone (a terminal's Ctrl-C also reaches the job, which
    then stops by itself)."""
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    script = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        f"from tpuperf.cli import main; sys.exit(main({args!r}))"
    )
    return subprocess.Popen(
        [sys.executable, "-c", script],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ, PYTHONPATH=path, **env),
        start_new_session=True,
    )


def test_demo_stops_its_job_on_ctrl_c(tmp_path: Path) -> None:
    port = _free_port()
    demo = _start_demo(["demo", "-d", "30s", "--port", str(port), "--logdir", str(tmp_path)])
    try:
        assert demo.stderr is not None
        for line in demo.stderr:
            if "ready on port" in line:
                break
        time.sleep(1.0)  # inside the 30 s capture window
        interrupted = time.monotonic()
        demo.send_signal(signal.SIGINT)
        demo.wait(timeout=20)
        assert time.monotonic() - interrupted < 15  # not the 30 s window
        assert demo.returncode == 130
    finally:
        if demo.poll() is None:
            demo.kill()
    with pytest.raises(ConnectionRefusedError):  # the job is gone too
        socket.create_connection(("localhost", port), timeout=2).close()
    assert _files(tmp_path) == []


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _catches_sigterm(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")  # a zombie has stopped; only its parent's reaping is left


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
def test_ctrl_c_while_the_demo_job_starts_ends_at_once_and_leaves_nothing(tmp_path: Path) -> None:
    """Ctrl-C while the job imported JAX took 5 s (the job stopped only once ready), and the
    demo left an empty /tmp/tpuperf-demo-* behind."""
    demo = _start_demo(["demo", "-d", "1s"], TMPDIR=str(tmp_path))
    try:
        deadline = time.monotonic() + 30
        while not _children(demo.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        (job,) = _children(demo.pid)
        # Once the job handles SIGTERM (after importing JAX) it stops only when ready: wait
        # for that (its SigCgt mask has SIGTERM's bit), then interrupt it while it compiles.
        while not _catches_sigterm(job) and time.monotonic() < deadline:
            time.sleep(0.01)
        interrupted = time.monotonic()
        demo.send_signal(signal.SIGINT)
        demo.wait(timeout=20)
        assert time.monotonic() - interrupted < 1.0
        assert demo.returncode == 130
        assert demo.stderr is not None and "tpuperf: interrupted" in demo.stderr.read()
    finally:
        if demo.poll() is None:
            demo.kill()
    deadline = time.monotonic() + 5
    while not _gone(job) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(job)
    assert list(tmp_path.glob("tpuperf-demo-*")) == []


# --- nothing there -------------------------------------------------------------------------


def test_tpuperf_capture_is_the_function_after_the_cli_is_imported(tmp_path: Path) -> None:
    import tpuperf
    import tpuperf.capturing
    import tpuperf.cli.capture  # the CLI module must not shadow the function

    assert tpuperf.capture is tpuperf.capturing.capture

    dead = f"127.0.0.1:{_free_port()}"
    with pytest.raises(CaptureFailed, match="connection refused"):
        tpuperf.capture(dead, duration_s=1.0, logdir=tmp_path)


def test_nothing_listening_fails_fast_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = [f"localhost:{_free_port()}", f"127.0.0.1:{_free_port()}"]
    started = time.monotonic()
    code = main(
        ["capture", ",".join(dead), "--duration", "1s", "--logdir", str(tmp_path), "--session", "x"]
    )

    assert code == 5
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert "capture failed for every host (nothing was saved)" in err
    for address in dead:
        assert f"{address}: connection refused: nothing is listening" in err
    assert _files(tmp_path) == []

    with pytest.raises(CaptureFailed) as excinfo:
        capture(dead, duration_s=1.0, logdir=tmp_path)
    assert excinfo.value.exit_code == 5
    assert _files(tmp_path) == []


def test_a_failed_capture_ends_in_one_clean_line_that_says_why_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error line held a literal \\n and repeated the reason the display had shown."""
    dead = f"localhost:{_free_port()}"
    assert main(["capture", dead, "--duration", "1s", "--logdir", str(tmp_path)]) == 5
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == (
        f"tpuperf: error: capture failed for the host (nothing was saved): {dead}; "
        "why is said above"
    )
    assert sum("connection refused" in line for line in lines) == 1
    assert not any("\\" in line for line in lines)

    with pytest.raises(CaptureFailed) as excinfo:  # the library's message: one line, with why
        capture(dead, duration_s=1.0, logdir=tmp_path)
    message = str(excinfo.value)
    assert "\n" not in message
    assert message.startswith(f"capture failed for the host (nothing was saved): {dead}: ")
    assert message.count("connection refused") == 1


def test_unresolvable_host_is_reported(tmp_path: Path) -> None:
    result = run_capture([Target("no-such-host.invalid", 9012)], duration_s=1.0, logdir=tmp_path)
    assert "cannot resolve host 'no-such-host.invalid'" in (result.hosts[0].error or "")


# --- fake servers: what a real one does not do on demand -----------------------------------


class _FakeServer:
    """A profiler service whose Profile answer is ``handler(request)``; records requests."""

    def __init__(self, handler: Callable[[Any], Any]) -> None:
        self.requests: list[Any] = []

        def profile(request: Any, context: Any) -> Any:
            self.requests.append(request)
            return handler(request)

        rpc = grpc.unary_unary_rpc_method_handler(
            profile,
            request_deserializer=ps.ProfileRequest.FromString,
            response_serializer=lambda m: m.SerializeToString(),
        )
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler(ps.SERVICE, {"Profile": rpc})]
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop(grace=None)


@pytest.fixture
def fake_server() -> Iterator[Callable[[Callable[[Any], Any]], _FakeServer]]:
    servers: list[_FakeServer] = []

    def make(handler: Callable[[Any], Any]) -> _FakeServer:
        servers.append(_FakeServer(handler))
        return servers[-1]

    yield make
    for server in servers:
        server.stop()


def _space_with_event() -> Any:
    space = XSpace()
    plane = space.planes.add(name="/host:CPU")
    plane.event_metadata[1].id = 1
    plane.event_metadata[1].name = "op"
    plane.lines.add(name="t").events.add(metadata_id=1, duration_ps=5)
    return space


def test_request_asks_for_the_xspace_and_a_common_start(fake_server: Any, tmp_path: Path) -> None:
    def answer(request: Any) -> Any:
        response = ps.ProfileResponse()
        response.xspace.CopyFrom(_space_with_event())
        return response

    servers = [fake_server(answer), fake_server(answer)]
    before = time.time_ns()
    result = run_capture(
        parse_addresses([s.address for s in servers]),
        duration_s=0.25,
        logdir=tmp_path,
        host_tracer_level=3,
        python_tracer=True,
        delay_s=0.2,
    )
    assert [h.ok for h in result.hosts] == [True, True]
    (a,), (b,) = (s.requests for s in servers)
    assert a.emit_xspace and a.opts.version == 1
    assert a.opts.start_timestamp_ns == b.opts.start_timestamp_ns >= before + 0.7e9
    assert (a.duration_ms, a.opts.duration_ms) == (250, 250)
    opts = a.opts
    assert (opts.host_tracer_level, opts.python_tracer_level, opts.device_tracer_level) == (3, 1, 1)
    assert opts.enable_hlo_proto  # the HLO modules name each op's scope (tpuperf tree)
    assert a.host_name == f"127.0.0.1_{servers[0].port}"
    assert a.repository_root == str(tmp_path.resolve() / "plugins" / "profile")
    saved = result.saved
    assert len(saved) == 2 and XSpace.FromString(saved[0].read_bytes()) == _space_with_event()


def test_empty_trace_says_why(fake_server: Any, tmp_path: Path) -> None:
    def answer(request: Any) -> Any:
        response = ps.ProfileResponse(empty_trace=True)
        response.xspace.SetInParent()
        return response

    server = fake_server(answer)
    with pytest.raises(CaptureFailed, match="no trace events collected: is the job running steps"):
        capture(server.address, duration_s=0.1, logdir=tmp_path)
    assert _files(tmp_path) == []


def test_old_server_writes_on_its_own_disk(fake_server: Any, tmp_path: Path) -> None:
    def answer(request: Any) -> Any:  # what a server that predates emit_xspace does
        target = Path(request.repository_root) / request.session_id
        target.mkdir(parents=True)
        (target / f"{request.host_name}.xplane.pb").write_bytes(
            _space_with_event().SerializeToString()
        )
        return ps.ProfileResponse()

    server = fake_server(answer)
    result = run_capture(
        parse_addresses(server.address), duration_s=0.1, logdir=tmp_path, session="old"
    )
    (host,) = result.hosts
    assert host.ok
    assert (
        host.path == tmp_path / "plugins" / "profile" / "old" / f"127.0.0.1_{server.port}.xplane.pb"
    )
    assert "did not send the profile back" in host.notes[0]


def test_deadline_exceeded_is_reported(fake_server: Any, tmp_path: Path) -> None:
    def answer(request: Any) -> Any:
        time.sleep(3)
        return ps.ProfileResponse()

    server = fake_server(answer)
    started = time.monotonic()
    result = run_capture(
        parse_addresses(server.address), duration_s=0.1, logdir=tmp_path, collect_timeout_s=0.5
    )
    assert time.monotonic() - started < 2.5
    assert (result.hosts[0].error or "").startswith("deadline exceeded")
    assert _files(tmp_path) == []


def test_retries_capture_a_host_that_failed_first(fake_server: Any, tmp_path: Path) -> None:
    calls = []

    def answer(request: Any) -> Any:
        calls.append(request.opts.start_timestamp_ns)
        response = ps.ProfileResponse()
        if len(calls) == 1:
            response.empty_trace = True
        else:
            response.xspace.CopyFrom(_space_with_event())
        return response

    server = fake_server(answer)
    (path,) = capture(server.address, duration_s=0.1, logdir=tmp_path, retries=1)
    assert path.is_file() and len(calls) == 2 and calls[1] > calls[0]


# --- arguments -----------------------------------------------------------------------------


def test_parse_addresses(tmp_path: Path) -> None:
    listing = tmp_path / "hosts"
    listing.write_text("a:1\n b:2 # second\n\n[::1]:3,a:1\n")
    assert parse_addresses([str(listing), "c:4"]) == [
        Target("a", 1),
        Target("b", 2),
        Target("::1", 3),
        Target("c", 4),
    ]
    assert Target("::1", 3).address == "[::1]:3" and Target("::1", 3).file_stem == "--1_3"
    for bad in ["nohost", "h:", "h:99999", ":80", ""]:
        with pytest.raises(UsageError):
            parse_addresses(bad)


@pytest.mark.parametrize(
    "args",
    [
        ["capture", "h:1", "--duration", "soon"],
        ["capture", "h:1", "--duration", "0s"],
        ["capture", "h:1", "--host-tracer-level", "4"],
        ["capture", "h:1", "--session", "a/b"],
        ["capture", "h"],
    ],
)
def test_bad_arguments_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2


def test_a_file_that_is_not_text_is_no_file_of_addresses(tmp_path: Path) -> None:
    """`tpuperf capture run.xplane.pb` (a profile, not addresses) ended in an internal
    UnicodeDecodeError: a usage error naming the file."""
    from tpuperf.capturing import parse_addresses
    from tpuperf.errors import UsageError

    profile = tmp_path / "run.xplane.pb"
    profile.write_bytes(b"\x0a\x8b\xff\xfe\x00\x80binary")
    with pytest.raises(UsageError, match=r"run\.xplane\.pb: not a file of host:port addresses"):
        parse_addresses(str(profile))
