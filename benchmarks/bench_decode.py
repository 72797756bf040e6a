"""Decode benchmark: file -> Profile tables on a generated ~80 MB, ~2M-event, 8-chip TPU profile.

Run by hand (never as a timed test), after `pip install -e ".[dev]"`:

    python benchmarks/bench_decode.py   # generates benchmarks/out/large_80mb.xplane.pb once
    python benchmarks/bench_decode.py --repeat 5
    python benchmarks/bench_decode.py --profile ../shared/profiles/tpu/v6e_4chip_inference.xplane.pb

Each measurement runs in a fresh subprocess so that peak RSS is that of one load alone.
Reports wall time (and the process's CPU time, steadier on a busy machine), MB/s,
events/s and peak RSS (ru_maxrss) for:
  decode  - bytes -> columnar XSpace (tpuperf.xspace.decode)
  load    - file -> validated Profile tables (tpuperf.load), the figure the target is about
  numpy   - load with the numpy decoder instead of the C loop (where the C module is not built)
  analyze - load + tpuperf.analyze: the whole of `tpuperf analyze`, imports aside

Side by side with XProf and xprof-rs, as users run them, is bench_engine.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {repo!r})
path, stage = sys.argv[1], sys.argv[2]
import tpuperf  # imports below are not timed
from tpuperf import profiles as _profile, analysis, kernels, build as _tables, xspace
assert kernels.implementation() == ("numpy" if stage == "numpy" else "native")
t0 = time.perf_counter()
c0 = time.process_time()
events = 0
if stage == "decode":
    data = open(path, "rb").read()
    space = xspace.decode(data)
    events = sum(len(line) for plane in space.planes for line in plane.lines)
elif stage in ("load", "numpy"):
    profile = tpuperf.load(path)
    events = int(profile.lines["events"].sum())
else:
    profile = tpuperf.load(path)
    analysis.analyze(profile).to_dict()
    events = int(profile.lines["events"].sum())
seconds = time.perf_counter() - t0
cpu_seconds = time.process_time() - c0
rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
print(json.dumps({{"seconds": seconds, "cpu_seconds": cpu_seconds, "events": events,
                   "peak_rss_mb": rss_mb}}))
"""


def measure(path: Path, stage: str) -> dict[str, float]:
    code = _CHILD.format(repo=str(REPO))
    # The numpy stage is the same load with the numpy kernels, chosen as a user chooses them.
    env = {**os.environ, "TPUPERF_DECODER": "numpy" if stage == "numpy" else ""}
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), stage],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=Path, default=HERE / "out" / "large_80mb.xplane.pb")
    args = parser.parse_args()
    if not args.profile.exists():
        sys.path.insert(0, str(REPO))
        from fixtures.generate import generate_large

        args.profile.parent.mkdir(parents=True, exist_ok=True)
        print(f"generating {args.profile} ...", file=sys.stderr)
        generate_large(args.profile)
    size_mb = args.profile.stat().st_size / 1e6
    print(f"profile: {args.profile} ({size_mb:.1f} MB)")
    stages = ["decode", "load", "numpy", "analyze"]
    for stage in stages:
        runs = [measure(args.profile, stage) for _ in range(args.repeat)]
        seconds = statistics.median(r["seconds"] for r in runs)
        events = runs[0]["events"]
        rss = max(r["peak_rss_mb"] for r in runs)
        cpu = statistics.median(r["cpu_seconds"] for r in runs)
        print(
            f"{stage:>7}: {seconds:.2f} s median of {args.repeat} "
            f"(min {min(r['seconds'] for r in runs):.2f}; CPU {cpu:.2f} s), "
            f"{size_mb / seconds:.0f} MB/s, "
            + (f"{events / seconds / 1e6:.2f} M events/s, " if events else "")
            + f"peak RSS {rss:.0f} MB"
        )


if __name__ == "__main__":
    main()
