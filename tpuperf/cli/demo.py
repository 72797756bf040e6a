"""``tpuperf demo``: profile the bundled example training job, start to finish."""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING

from tpuperf.cli._params import Option

if TYPE_CHECKING:
    from rich.console import Console

# How long the example job may take to import JAX, compile its step and say READY.
_START_TIMEOUT_S = 90.0


def command(
    duration: str = Option("2s", "--duration", "-d", help="Length of the capture."),
    logdir: Path | None = Option(
        None,
        "--logdir",
        help="Where to write the profile (default: a new temporary directory, kept).",
        show_default=False,
    ),
    port: int = Option(0, "--port", help="Profiler port for the job (0: any free one)."),
) -> None:
    """Profile the bundled example training job: start it, capture it, analyze it.

    Starts a small JAX training job (examples/train_job.py: a profiler server and a
    StepTraceAnnotation per step) as a subprocess on whatever backend JAX finds,
    captures it over the network exactly as `tpuperf capture` does, prints the report
    and the tree of its layers (`tpuperf tree`), and stops the job on every way out,
    Ctrl-C included. Needs jax and grpcio (the
    jax and capture extras of tpuperf).

    Example:

        tpuperf demo

        tpuperf demo --duration 3s --logdir demo-logs
    """
    import importlib.util
    import shutil
    import tempfile  # here, not at the top: every command imports this module

    from tpuperf.capturing import Target
    from tpuperf.cli._capture_view import (
        capture_with_display,
        parse_seconds,
        show_result,
        stderr_console,
        stdout_console,
    )
    from tpuperf.errors import CaptureFailed

    duration_s = parse_seconds(duration, "--duration")
    for module, extra in (("jax", "jax"), ("grpc", "capture")):
        if importlib.util.find_spec(module) is None:
            raise CaptureFailed(
                f"tpuperf demo needs {module}: pip install 'tpuperf[jax,capture]' "
                f"(the {extra!r} extra)"
            )
    err, out = stderr_console(), stdout_console()
    port = port or _free_port()
    made = None  # the temporary logdir this run made, removed if the run does not finish

    with tempfile.TemporaryFile("w+") as job_stderr:
        job = _start_job(port, job_stderr)
        ready = False
        try:
            started = time.monotonic()
            with err.status("starting the example training job (importing JAX, compiling)…"):
                _wait_ready(job, job_stderr, port)
            ready = True
            if logdir is None:
                logdir = made = Path(tempfile.mkdtemp(prefix="tpuperf-demo-"))
            err.print(
                f"tpuperf: example job ready on port {port} "
                f"({time.monotonic() - started:.1f} s); capturing {duration_s:g} s",
                markup=False,
                soft_wrap=True,
            )
            result = capture_with_display(
                [Target("localhost", port)], duration_s=duration_s, logdir=logdir
            )
        except BaseException:  # Ctrl-C, or a job that failed: no profile, so no folder either
            if made is not None:
                shutil.rmtree(made, ignore_errors=True)
            raise
        finally:
            _stop_job(job, ready)
    if made is not None and not result.saved:
        shutil.rmtree(made, ignore_errors=True)
    if show_result(result, out, err, analyze=True):
        _print_tree(result.session_dir, out)
    err.print(
        f"tpuperf: the profile is in {logdir}; next: tpuperf analyze {result.session_dir}",
        markup=False,
        soft_wrap=True,
    )


def _print_tree(session_dir: Path, out: Console) -> None:
    """The example job's layers (its jax.named_scope names), forward and backward."""
    from tpuperf.profiles import load
    from tpuperf.render.tree import render_tree
    from tpuperf.scopes import tree_report

    out.print()
    render_tree(tree_report(load(session_dir), depth=4, min_pct=2.0), out)


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def _start_job(port: int, stderr: IO[str]) -> subprocess.Popen[str]:
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    # The job imports tpuperf._demo_job; make sure it finds this copy of tpuperf.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tpuperf._demo_job",
            "--port",
            str(port),
            "--steps",
            "0",
            "--stop-with-parent",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=env,
    )


def _wait_ready(job: subprocess.Popen[str], job_stderr: IO[str], port: int) -> None:
    """Block until the job prints READY; CaptureFailed (with its stderr) if it never does."""
    from tpuperf.errors import CaptureFailed

    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:  # also keeps draining stdout so the job never blocks on it
        assert job.stdout is not None
        for line in job.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True, name="tpuperf-demo-stdout").start()
    deadline = time.monotonic() + _START_TIMEOUT_S
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise CaptureFailed(
                f"the example job did not get ready within {_START_TIMEOUT_S:.0f} s"
                + _stderr_tail(job_stderr)
            ) from None
        if line is None:
            job.wait()
            raise CaptureFailed(
                f"the example job exited with code {job.returncode} before it was ready"
                + _stderr_tail(job_stderr)
            )
        if line.startswith(f"READY port={port}"):
            return


def _stderr_tail(job_stderr: IO[str], lines: int = 15) -> str:
    job_stderr.flush()
    job_stderr.seek(0)
    tail = job_stderr.read().strip().splitlines()[-lines:]
    return ("; its last output:\n    " + "\n    ".join(tail)) if tail else ""


def _stop_job(job: subprocess.Popen[str], ready: bool = True) -> None:
    """SIGTERM (the job stops after its current step), then SIGKILL if it lingers; SIGKILL
    at once before it is ready (importing JAX or compiling, it would only stop once ready:
    Ctrl-C then took 5 s), when no capture can be under way."""
    if job.poll() is None and not ready:
        job.kill()
    if job.poll() is None:
        job.terminate()
        try:
            job.wait(timeout=10)
        except subprocess.TimeoutExpired:
            job.kill()
            job.wait()
    if job.stdout is not None:
        with contextlib.suppress(OSError):
            job.stdout.close()
