"""One command timed in a child process, as a user runs it: its exit code, wall and CPU time,
peak RSS and the end of its stderr. A small Python wrapper runs the command and reads the
rusage of its children, so the benchmark's own process is not counted. Shared by
bench_engine.py and bench_scan.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

_WRAPPER = r"""
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                      text=True, errors="replace")
wall = time.perf_counter() - t0
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": done.returncode, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
                  "peak_rss_mb": usage.ru_maxrss * 1024 / 1e6, "stderr": done.stderr[-2000:]}))
"""


def measure(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Run ``argv`` in ``cwd``: rc, wall_s, cpu_s, peak_rss_mb, stderr (its last 2,000
    characters)."""
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *argv],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=cwd,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
