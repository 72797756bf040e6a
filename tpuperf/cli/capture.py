"""``tpuperf capture``: profiles from running JAX jobs, all hosts in one window."""

from __future__ import annotations

from pathlib import Path

from tpuperf.cli._capture_view import (
    capture_with_display,
    parse_seconds,
    show_result,
    stderr_console,
    stdout_console,
)
from tpuperf.cli._params import Argument, Option


def command(
    addresses: list[str] = Argument(
        ...,
        metavar="ADDR[,ADDR...]",
        help="host:port of each job's profiler server (jax.profiler.start_server(port)), "
        "comma-separated, or a file with one address per line.",
        show_default=False,
    ),
    duration: str = Option("2s", "--duration", "-d", help="Length of the window: 500ms, 2s, 1m."),
    logdir: Path = Option(
        Path("profiles"),
        "--logdir",
        help="Where to write: LOGDIR/plugins/profile/SESSION/, a HOST_PORT.xplane.pb per host.",
    ),
    session: str | None = Option(
        None, "--session", help="Session directory name (default: the time, YYYY_MM_DD_HH_MM_SS)."
    ),
    host_tracer_level: int = Option(
        2,
        "--host-tracer-level",
        help="0 off, 1 user annotations, 2 also XLA ops on host threads, 3 verbose.",
    ),
    python_tracer: bool = Option(
        False, "--python-tracer", help="Also trace Python calls (slows the job down)."
    ),
    delay: str = Option(
        "0s", "--delay", help="Wait this long before the window starts (e.g. 30s)."
    ),
    retries: int = Option(
        0, "--retries", help="Try a failed host this many more times, in a later window."
    ),
    analyze: bool = Option(
        False, "--analyze", help="Analyze the new session and print the report."
    ),
) -> None:
    """Capture a profile from running JAX jobs: every host in one time window, saved here.

    Asks each job's profiler server (started in the job with
    jax.profiler.start_server(port)) for the same window and writes the profiles to
    LOGDIR/plugins/profile/SESSION/, the layout XProf and TensorBoard open, even when the
    jobs run on other machines. A host that fails does not lose the others; the exit code
    is then 5.

    Example:

        tpuperf capture 10.0.0.2:9012,10.0.0.3:9012 --duration 3s --logdir logs

        tpuperf capture hosts.txt --delay 30s --analyze
    """
    from tpuperf.capturing import parse_addresses

    targets = parse_addresses(addresses)
    duration_s = parse_seconds(duration, "--duration")
    delay_s = parse_seconds(delay, "--delay", allow_zero=True)
    result = capture_with_display(
        targets,
        duration_s=duration_s,
        logdir=logdir,
        session=session,
        host_tracer_level=host_tracer_level,
        python_tracer=python_tracer,
        delay_s=delay_s,
        retries=retries,
    )
    show_result(result, stdout_console(), stderr_console(), analyze)
