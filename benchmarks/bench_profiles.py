"""`tpuperf analyze` on real profiles: the first command, and the second after `info`.

The engine benchmark (bench_engine.py) measures generated TPU profiles of 80 MB to 2 GB and
one small real one. What users open most are small real profiles of other kinds: GPU traces
with thousands of host events, CPU captures of JAX programs with a hundred HLO modules. This
runs `tpuperf analyze F --format json` on each of them, on a fresh copy with an empty cache
(first), and again after `tpuperf info F` on a fresh copy (second: the tables read back, the
analysis made), alternating with another checkout's tpuperf where `--before` names one.

Run by hand (never as a timed test), as bench_engine.py is:

    python benchmarks/bench_profiles.py                           # every real profile, fixture
    python benchmarks/bench_profiles.py --before /tmp/main-tree --repeat 5
    python benchmarks/bench_profiles.py --profiles fixtures/data/diff_lm_bf16.xplane.pb

Profiles: ../shared/profiles/*/*.xplane.pb and fixtures/data/*.xplane.pb unless
`--profiles` names others. `--before DIR` is a `git archive` of another commit laid out as
bench_engine.py's `--help` says.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from bench_engine import REPO, _finder, _measured, in_scratch  # beside this script

ANALYZE = ["analyze", "{f}", "--format", "json"]
INFO = ["info", "{f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", type=Path, help="another checkout's tpuperf, to alternate")
    parser.add_argument("--bin-dir", type=Path, action="append", default=[])
    args = parser.parse_args()
    profiles = args.profiles or [
        *sorted((REPO.parent / "shared" / "profiles").glob("*/*.xplane.pb")),
        *sorted((REPO / "fixtures" / "data").glob("*.xplane.pb")),
    ]
    find = _finder(args.bin_dir)
    print(_measured(find))
    tools = {"tpuperf": ["tpuperf"]}
    if args.before is not None:
        before = ["env", f"PYTHONPATH={args.before.resolve()}", sys.executable, "-m", "tpuperf"]
        tools["before"] = before
    print(f"\nmedian of {args.repeat} (min in brackets), wall s")
    header = "| profile | MB | " + " | ".join(f"{name} first | {name} after info" for name in tools)
    print(header + " |")
    print("|---|---|" + "---|---|" * len(tools))
    for path in profiles:
        first: dict[str, list[float]] = {name: [] for name in tools}
        second: dict[str, list[float]] = {name: [] for name in tools}
        for _ in range(args.repeat):
            for name, tool in tools.items():  # alternate
                analyze = in_scratch(path, [tool + ANALYZE], find)
                first[name].append(analyze[0]["wall_s"])
                after_info = in_scratch(path, [tool + INFO, tool + ANALYZE], find)
                second[name].append(after_info[1]["wall_s"])
        cells = [
            f"{statistics.median(runs[name]):.3f} ({min(runs[name]):.3f})"
            for name in tools
            for runs in (first, second)
        ]
        print(f"| {path.name} | {path.stat().st_size / 1e6:.2f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
