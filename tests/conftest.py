"""Shared test fixtures: where the real profiles are, and a pinned terminal width."""

from __future__ import annotations

import os
from pathlib import Path

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


def shared_profile(relative: str) -> Path:
    """A real profile from ../shared/profiles, or skip the test when that folder is absent."""
    path = SHARED_PROFILES / relative
    if not path.exists():
        pytest.skip(f"real profile {relative} not available ({SHARED_PROFILES} is absent)")
    return path


@pytest.fixture
def v6e() -> Path:
    return shared_profile("tpu/v6e_4chip_inference.xplane.pb")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="Rewrite tests/golden/ from the current outputs (review the diff before committing).",
    )
