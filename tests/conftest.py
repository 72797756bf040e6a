"""Shared test fixtures: where the real profiles are, a pinned terminal width, and the one way
tests run the CLI (``cli``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]
SHARED_PROFILES = REPO.parent / "shared" / "profiles"
CPU_FIXTURE = REPO / "fixtures" / "data" / "cpu_train_steps.xplane.pb"
CPU_TRUTH = REPO / "fixtures" / "data" / "cpu_train_steps.truth.json"

# Rendered tables are compared at a fixed width (memray pins COLUMNS too).
os.environ["COLUMNS"] = "100"

# In CI, hypothesis draws the same examples every run: a build passes or fails on the code, not
# on the draw. Locally it draws new ones, to find what those examples miss.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


_CHILD = """
import json, sys
before = set(sys.modules)
from tpuperf.cli import main
code = main(sys.argv[1:])
print(json.dumps([code, sorted(set(sys.modules) - before)]), file=sys.stderr)
"""


def command_imports(*args: str) -> tuple[int, str, set[str]]:
    """Exit code, stdout and the modules a fresh interpreter imported to run ``tpuperf ARGS``
    (beyond those it had loaded at start)."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, cwd=REPO
    )
    code, modules = json.loads(result.stderr.splitlines()[-1])
    return code, result.stdout, set(modules)


def top_level(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def shared_profile(relative: str) -> Path:
    """A real profile from ../shared/profiles, or skip the test when that folder is absent."""
    path = SHARED_PROFILES / relative
    if not path.exists():
        pytest.skip(f"real profile {relative} not available ({SHARED_PROFILES} is absent)")
    return path


def xprof_tool(tool: str, session_dir: Path) -> Any:
    """The JSON that XProf's command line (``xprof.cli.xprof_cli TOOL``) prints for the session
    ``session_dir`` (LOGDIR/SESSION), read again from the file; skips the test without xprof."""
    import subprocess
    import sys

    pytest.importorskip("xprof.cli.xprof_cli", reason="xprof (the dev extra) is not installed")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "xprof.cli.xprof_cli",
            tool,
            f"--session_id={session_dir.name}",
            f"--logdir={session_dir.parent}",
            "--bypass_cache=True",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout[done.stdout.index("{") :])


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test's commands cache decoded tables in a fresh folder of their own, never in
    ~/.cache (subprocesses inherit it)."""
    directory = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("TPUPERF_CACHE_DIR", str(directory))
    monkeypatch.delenv("TPUPERF_CACHE_MAX_BYTES", raising=False)
    return directory


@pytest.fixture
def v6e() -> Path:
    return shared_profile("tpu/v6e_4chip_inference.xplane.pb")


class Cli:
    """Runs ``tpuperf`` in the test's process, as ``tpuperf.cli.main`` does for the command
    line, and returns what it printed (captured by pytest's ``capsys``)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self._capsys = capsys

    def __call__(self, *args: str | os.PathLike[str]) -> tuple[int, str, str]:
        """Exit code, stdout and stderr of ``tpuperf ARGS``."""
        from tpuperf.cli import main

        code = main([os.fspath(a) for a in args])
        out, err = self._capsys.readouterr()
        return code, out, err

    def json(self, *args: str | os.PathLike[str]) -> Any:
        """The JSON document ``tpuperf ARGS`` prints, which must exit 0 (what was printed
        before it is dropped)."""
        self._capsys.readouterr()
        code, out, err = self(*args)
        assert code == 0, (args, err)
        return json.loads(out)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="Rewrite tests/golden/ from the current outputs (review the diff before committing).",
    )
