"""How the console script ends: the interpreter's teardown is skipped (tpuperf/cli/_run.py
``leave``), what an exit owes others is not: threads that are not daemons are waited for,
``atexit`` handlers run, the output is whole, and the exit code is the command's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import CPU_FIXTURE, REPO

# The console script is `tpuperf.cli:main()` with no arguments: it reads sys.argv and exits.
_CHILD = """
import atexit, pathlib, sys, threading, time
marks = pathlib.Path(sys.argv.pop(1))

def late_thread():
    time.sleep(1.5)  # longer than the command: alive when it ends
    (marks / "thread").write_text("done")

def at_exit():
    (marks / "atexit").write_text("ran")

atexit.register(at_exit)
threading.Thread(target=late_thread).start()  # not a daemon: an exit waits for it
from tpuperf.cli import main
main()
"""


def _console_script(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"TPUPERF_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"},
    )


def test_a_command_exits_with_its_output_whole_its_threads_and_atexit_handlers_done(tmp_path):
    result = _console_script(tmp_path, "info", str(CPU_FIXTURE), "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)  # the whole document, flushed before the exit
    assert document["schema_version"]
    assert (tmp_path / "thread").read_text() == "done"
    assert (tmp_path / "atexit").read_text() == "ran"
    # The cache entry the command stored is whole: a second command is served from it.
    again = _console_script(tmp_path, "info", str(CPU_FIXTURE), "--format", "json")
    assert json.loads(again.stdout) == document


def test_a_failing_command_exits_with_its_code_after_the_same_duties(tmp_path):
    result = _console_script(tmp_path, "info", str(tmp_path / "missing.xplane.pb"))
    assert result.returncode == 4
    assert result.stderr.startswith("tpuperf: error: ")
    assert len(result.stderr.strip().splitlines()) == 1
    assert (tmp_path / "thread").read_text() == "done"
    assert (tmp_path / "atexit").read_text() == "ran"


def test_output_cut_by_its_reader_ends_with_141_after_the_same_duties(tmp_path):
    read, write = os.pipe()
    os.close(read)  # `tpuperf ops F | head -1`, head gone before the output is written
    try:
        result = subprocess.run(
            [sys.executable, "-c", _CHILD, str(tmp_path), "ops", str(CPU_FIXTURE)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={"TPUPERF_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"},
        )
    finally:
        os.close(write)
    assert (result.returncode, result.stderr) == (141, "")
    assert (tmp_path / "thread").read_text() == "done"
    assert (tmp_path / "atexit").read_text() == "ran"
