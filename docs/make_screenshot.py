"""Make docs/report.png, the README's picture of `tpuperf report`, from the real v6e profile.

    python docs/make_screenshot.py [PROFILE]

Needs chromium (Debian: apt-get install chromium) and the shared profiles next to the repo.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from browser import visit  # noqa: E402

from tpuperf.cli import main  # noqa: E402

PROFILE = REPO.parent / "shared" / "profiles" / "tpu" / "v6e_4chip_inference.xplane.pb"


def make(profile: Path, target: Path, height: int = 2020) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        page = Path(scratch) / "report.html"
        # A relative path reads better in the picture than this machine's absolute one.
        if main(["report", os.path.relpath(profile), "-o", str(page)]) != 0:
            raise SystemExit("tpuperf report failed")
        result = visit(page, screenshot=target, width=1200, screenshot_height=height)
        if result.console_errors:
            raise SystemExit(f"console errors: {result.console_errors}")
    print(f"wrote {target} ({target.stat().st_size / 1000:.0f} kB)")


if __name__ == "__main__":
    make(Path(sys.argv[1]) if len(sys.argv) > 1 else PROFILE, REPO / "docs" / "report.png")
