"""`tpuperf analyze` and `tpuperf ops` in a real 80x24 terminal (tmux), as a user runs them.

tpuperf sees a terminal there (its size from the terminal, colours on, COLUMNS unset), so
this checks what no pipe can: the width rich measures. The pane's lines are read back
joined (``capture-pane -J``): a line the terminal had to wrap comes back longer than 80.
Skips when tmux is not installed (.ci/run installs it).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from rich.cells import cell_len

from tests._tables import check_table, tables
from tests.conftest import CPU_FIXTURE, REPO, SHARED_PROFILES
from tpuperf.render.terminal import fmt_ms

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (.ci/run installs it)")

PROFILES = [CPU_FIXTURE, SHARED_PROFILES / "tpu/v6e_4chip_inference.xplane.pb"]
PROFILES += [SHARED_PROFILES / "gpu/v100_8gpu_tf_training.xplane.pb"]


def _in_terminal(args: list[str], tmp_path: Path) -> list[str]:
    """Run ``python -m tpuperf ARGS`` in a new 80x24 tmux pane; its lines, joined."""
    assert TMUX is not None
    socket = f"tpuperf-test-{uuid.uuid4().hex[:8]}"
    tmux = [TMUX, "-L", socket, "-f", "/dev/null"]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
    env["TERM"] = "xterm-256color"
    done = tmp_path / "exit-code"
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "tpuperf", *args])
    script = f"cd {shlex.quote(str(REPO))}; {command} 2>/dev/null; echo $? > {done}; sleep 600"
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "80", "-y", "24", "-s", "t", "sh", "-c", script],
        check=True,
        env=env,
    )
    try:
        subprocess.run([*tmux, "set-option", "-t", "t", "history-limit", "5000"], env=env)
        for _ in range(1200):  # up to two minutes
            if done.exists() and done.read_text().strip():
                break
            subprocess.run(["sleep", "0.1"])
        assert done.read_text().strip() == "0", "tpuperf failed in the terminal"
        width = subprocess.run(
            [*tmux, "display-message", "-p", "-t", "t", "#{pane_width}"],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout.strip()
        assert width == "80"
        pane = subprocess.run(
            [*tmux, "capture-pane", "-p", "-J", "-S", "-", "-t", "t"],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, capture_output=True)
    lines = pane.rstrip("\n").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _profile(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real profile {path.name} not available ({SHARED_PROFILES} is absent)")
    return path


@pytest.mark.parametrize("path", PROFILES, ids=[p.name.split(".")[0] for p in PROFILES])
def test_analyze_in_an_80_column_terminal(path: Path, tmp_path: Path) -> None:
    from tpuperf.analysis import analyze
    from tpuperf.profiles import load

    lines = _in_terminal(["analyze", str(_profile(path))], tmp_path)
    wide = [line for line in lines if cell_len(line.rstrip()) > 80]
    assert not wide, wide
    assert lines[0].startswith("╭─ tpuperf analyze: ")
    top = analyze(load(str(path))).top_ops.records()
    found = [t for t in tables(lines, "op") if t.key_at == 0]
    assert len(found) == 1
    check_table(
        lines, found[0], [r["op"] for r in top], [[fmt_ms(r["ms_per_step"])] for r in top], 80
    )
    assert any(line.startswith("Recommendations") for line in lines)


@pytest.mark.parametrize("path", PROFILES, ids=[p.name.split(".")[0] for p in PROFILES])
def test_ops_in_an_80_column_terminal(path: Path, tmp_path: Path) -> None:
    from tpuperf.cli import main

    args = ["ops", str(_profile(path)), "--top", "15"]
    lines = _in_terminal(args, tmp_path)
    wide = [line for line in lines if cell_len(line.rstrip()) > 80]
    assert not wide, wide
    out = tmp_path / "ops.json"
    assert main([*args, "-f", "json", "-o", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    found = tables(lines, "op")
    assert len(found) == 1
    check_table(
        lines,
        found[0],
        [r["op"] for r in rows],
        [[f"{r['total_time_ms']:,.3f}"] for r in rows],
        80,
    )
    assert len(lines) == len(rows) + 3  # header, rule, rows, the line naming hidden columns
