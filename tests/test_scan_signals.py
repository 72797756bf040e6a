"""`tpuperf scan` under signals: a worker killed mid-profile (SIGKILL, as the out-of-memory
killer does) loses only its own row; Ctrl-C (SIGINT) leaves `--out` whole or absent.

Module-level imports stay light: the pool's workers import this module to find
``_killed_while_reading``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tpuperf import scanning as scan_mod

# The profile whose worker kills itself: the one host file under a run directory of this name.
VICTIM_RUN = "victim"


@contextlib.contextmanager
def _sigint_handled() -> Iterator[None]:
    """SIGINT handled here while a child starts, so that the child starts with its default
    handling, as a terminal's shell hands Ctrl-C on: a test run in the background of a shell
    without job control (`cmd &` in a script) inherits SIGINT ignored, and a child would
    inherit that too (a handler, unlike an ignored signal, is not passed on to a program)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _killed_while_reading(target: scan_mod.Target, options: scan_mod.ScanOptions) -> dict:
    """``scan_one``, except that the worker reading the victim's profile kills itself with SIGKILL
    once the bytes are read (the test hook: the pool runs this instead of ``scan_one``)."""
    if target.run == VICTIM_RUN:
        from tpuperf import sources

        read = sources.read_profile

        def read_then_die(url: str, *args: object, **kwargs: object) -> object:
            read(url, *args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
            raise AssertionError("unreachable: SIGKILL cannot be caught")

        sources.read_profile = read_then_die  # in this worker process only
    return scan_mod.scan_one(target, options)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six small profiles (the straggler run has two hosts); the victim is neither first nor
    last, so the pool has rows done before it and jobs queued after it."""
    from fixtures.generate import write_run

    root = tmp_path_factory.mktemp("signals")
    runs = [
        ("host_bound", "a_run"),
        ("memory_bound", "b_run"),
        ("collective_training", VICTIM_RUN),
        ("straggler", "w_run"),
        ("gpu_training", "x_run"),
    ]
    for seed, (scenario, run) in enumerate(runs):
        write_run(scenario, root / run, run_name=run, seed=seed, steps=4)
    return root


def test_sigkilled_worker_loses_only_its_row(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import pandas as pd

    from tpuperf.cli import main

    expected = scan_mod.scan(tree, workers=1, cache=False)
    victim = expected["run"] == VICTIM_RUN
    assert victim.sum() == 1 and len(expected) == 6

    monkeypatch.setattr(scan_mod, "scan_one", _killed_while_reading)
    out = tmp_path / "rows.ndjson"
    code = main(
        ["scan", str(tree), "-j", "2", "--no-cache", "-o", str(out), "--fail-on", "error!=''"]
    )
    err = capsys.readouterr().err

    assert code == 3  # the dead worker's row is an error row, as any profile that fails
    assert "6 profiles" in err and "1 with errors" in err
    rows = scan_mod.to_frame([json.loads(line) for line in out.read_text().splitlines()])
    assert list(rows["path"]) == list(expected["path"])  # every profile once, in order
    dead = rows[victim].iloc[0]
    assert dead["error"] == (
        "the worker process died while analysing this profile: killed by signal 9 (SIGKILL), "
        "as the out-of-memory killer does; run `tpuperf analyze` on it alone to see why"
    )
    assert dead[["platform", "devices", "steps", "busy_pct"]].isna().all()
    pd.testing.assert_frame_equal(
        rows[~victim].reset_index(drop=True), expected[~victim].reset_index(drop=True)
    )


# --------------------------------------------------------------------------- Ctrl-C


def _group(pgid: int) -> list[int]:
    """Live processes of a process group (zombies left out: they are gone, only not reaped)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended while we looked
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _wait_for(condition, what: str, scan: subprocess.Popen, seconds: float = 25) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if scan.poll() is not None:
            pytest.fail(f"the scan ended before {what}: {scan.stderr.read().decode()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {seconds} s")
        time.sleep(0.02)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize(("fmt", "workers"), [("ndjson", 2), ("csv", 2), ("parquet", 1)])
def test_ctrl_c_leaves_no_output_and_no_process(
    tree: Path, tmp_path: Path, fmt: str, workers: int
) -> None:
    """Ctrl-C in the middle of a scan: exit 130 with one line, no --out, no temporary file, no
    process left. The last profile is a FIFO that no one writes: reading it never ends, so the
    scan is still running when interrupted however fast the machine is."""
    stuck = tmp_path / "stuck" / "zz-host.xplane.pb"
    stuck.parent.mkdir()
    os.mkfifo(stuck)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / f"rows.{fmt}"
    command = [sys.executable, "-m", "tpuperf", "scan", str(tree), str(stuck), "--no-cache"]
    with _sigint_handled():  # the scan takes Ctrl-C as from a terminal
        scan = subprocess.Popen(
            [*command, "-j", str(workers), "--out", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, as a shell gives a command
        )
    writer: list[int] = []  # the FIFO's write end, held open (and silent) so reads block

    def stuck_is_read() -> bool:
        try:
            writer.append(os.open(stuck, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: no one has it open for reading yet
            return False
        return True

    try:
        _wait_for(stuck_is_read, "reader of the FIFO", scan)
        # Every other job has started. The text formats show their rows in the temporary file;
        # Parquet holds them until a row group fills (with one worker they are done already).
        if fmt != "parquet":
            header = 1 if fmt == "csv" else 0

            def rows_written() -> bool:
                partial = list(out_dir.glob(f".{out.name}.*.tmp"))
                return bool(partial) and partial[0].read_bytes().count(b"\n") == header + 6

            _wait_for(rows_written, "rows in the temporary file", scan)
        os.killpg(scan.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
        _, err = scan.communicate(timeout=20)
    finally:
        if scan.poll() is None:
            os.killpg(scan.pid, signal.SIGKILL)
            scan.wait()
        for descriptor in writer:
            os.close(descriptor)
    assert scan.returncode == 130
    assert err.decode() == "tpuperf: interrupted\n"
    assert list(out_dir.iterdir()) == []  # no --out (the scan could not finish), no .tmp
    deadline = time.monotonic() + 10
    while _group(scan.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group(scan.pid) == []  # no worker, no resource tracker left behind


# A scan whose Ctrl-C the kernel hands to another of its threads (as it may to pyarrow's): the
# helper thread here takes it, by pthread_kill, once the scan is blocked reading the FIFO.
_OTHER_THREAD_CHILD = """
import signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal
helper = threading.Thread(target=time.sleep, args=(600,), daemon=True)
helper.start()
stuck = sys.argv[1]

def interrupt_elsewhere():
    import os
    while True:  # the FIFO's reader is the scan, once it opens it
        try:
            fd = os.open(stuck, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            time.sleep(0.02)
    time.sleep(0.2)  # the scan is in its read
    signal.pthread_kill(helper.ident, signal.SIGINT)
    time.sleep(600)  # the write end held open (and silent), so the read blocks

threading.Thread(target=interrupt_elsewhere, daemon=True).start()
sys.argv = ["tpuperf", "scan", stuck, "--no-cache", "-j", "1", "--out", sys.argv[2]]
from tpuperf.cli import main
main()
"""


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs pthread_kill")
def test_ctrl_c_handed_to_another_thread_stops_a_scan_blocked_in_a_read(tmp_path: Path) -> None:
    """One worker runs the jobs in this process: the main thread waits for each a moment at a
    time, so a Ctrl-C taken by another thread still stops it while the job's read never
    returns (before: the scan hung until the read returned)."""
    stuck = tmp_path / "stuck.xplane.pb"
    os.mkfifo(stuck)
    out = tmp_path / "out" / "rows.ndjson"
    out.parent.mkdir()
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", _OTHER_THREAD_CHILD, str(stuck), str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 130, result.stderr
    assert result.stderr == "tpuperf: interrupted\n"
    assert list(out.parent.iterdir()) == []
    assert time.monotonic() - started < 30
