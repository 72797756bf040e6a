"""tpuperf, XProf and xprof-rs side by side on generated TPU training profiles of three sizes.

Run by hand (never as a timed test), after `pip install -e ".[dev]" xprof-rs`:

    python benchmarks/bench_engine.py                       # 80 MB, 400 MB, 2 GB; 5 runs each
    python benchmarks/bench_engine.py --sizes 80 --repeat 7
    python benchmarks/bench_engine.py --sizes 4600 --repeat 1 --only tpuperf   # past 4 GiB

Profiles are written once to benchmarks/out/ by fixtures.large.write_training (the shape of
the collective_training scenario: steps, modules, 35 ops per step with async all-gathers and an
all-reduce, async windows). Every measurement is a fresh process on a fresh copy of the file in
a fresh directory with a fresh TMPDIR (XProf's CLI caches results under the temp dir and beside
the profile), and the tools alternate run by run so that the machine's state is shared. For
each tool and size it prints the median (and min) wall time, CPU time and peak RSS (ru_maxrss
of the child, which counts the profile's pages that the process touched), and the ratios of
tpuperf to each of the others; then tpuperf's own split by stage (imports, decode, tables,
timeline, each analyzer, report), measured in one more process.

The commands are what a user runs:
    tpuperf analyze F --format json
    xprof get_overview F
    xprof-rs get_overview F

XProf is left out above --xprof-max-mb (default 100): cold, it needs about 27x the file in memory
(2.2 GB for an 85 MB file of the `large` shape, 5.7 GB for the `train` shape), so a 400 MB
profile does not fit this machine. --shape large measures the shape of the engine issue's own
figures (fixtures.generate.generate_large: 3,000 op metadata per chip, no async ops) instead of
the training shape.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BIN = Path(sys.executable).parent

TOOLS = {
    "tpuperf": lambda f: [str(BIN / "tpuperf"), "analyze", str(f), "--format", "json"],
    "xprof": lambda f: [str(BIN / "xprof"), "get_overview", str(f)],
    "xprof-rs": lambda f: [str(BIN / "xprof-rs"), "get_overview", str(f)],
}

# The child reports its own resource use, so that only the tool (not a shell) is measured.
_RUN = r"""
import json, os, resource, subprocess, sys, time
t0 = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.perf_counter() - t0
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": done.returncode, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
                  "rss_mb": usage.ru_maxrss / 1024, "err": done.stderr.decode()[-400:]}))
"""

_STAGES = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import numpy
from tpuperf import sources, xspace, build, timeline, profiles, schema, analysis
from tpuperf.analyzers import base
from tpuperf.columns import Strings
from tpuperf.config import AnalysisConfig
out = {"imports": time.perf_counter() - t0}
path = sys.argv[1]
t = time.perf_counter(); data = sources.read_profile(path); space = xspace.decode(data)
out["decode"] = time.perf_counter() - t
t = time.perf_counter(); host = build.build_host("h", space)
lines = host.lines.with_columns(host=Strings.constant("h", host.lines.n))
info = profile.HostInfo("h", path)
part = profile.HostPart(host.devices, lines.select(schema.TABLES["lines"]), info, [])
prof = profile.assemble([part], path); del space, host, part
out["tables"] = time.perf_counter() - t
config = AnalysisConfig()
t = time.perf_counter(); tl = timeline.build_timeline(prof, config)
out["timeline"] = time.perf_counter() - t
for analyzer in base.select(None):
    t = time.perf_counter(); base.run(analyzer, tl, config)
    out["analyzer " + analyzer.name] = time.perf_counter() - t
t = time.perf_counter(); analysis.analyze(prof, config=config).to_json()
out["report (all of analyze, timeline reused)"] = time.perf_counter() - t
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def profile_path(size_mb: int, shape: str = "train") -> Path:
    path = HERE / "out" / f"{shape}_{size_mb}mb.xplane.pb"
    if not path.exists():
        sys.path.insert(0, str(REPO))
        path.parent.mkdir(parents=True, exist_ok=True)  # a fresh clone has no benchmarks/out
        print(f"generating {path} ...", file=sys.stderr)
        if shape == "train":
            from fixtures.large import write_training

            print(write_training(path, size_mb), file=sys.stderr)
        else:  # 2M events make 85.7 MB
            from fixtures.generate import generate_large

            print(generate_large(path, events=int(size_mb / 85.7 * 2e6)), file=sys.stderr)
    return path


def measure(tool: str, source: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=HERE / "out") as scratch:
        run_dir = Path(scratch) / "run"
        run_dir.mkdir()
        copy = run_dir / source.name
        shutil.copyfile(source, copy)
        os.sync()  # the copy's write-back must not overlap the measured run
        tmp = Path(scratch) / "tmp"
        tmp.mkdir()
        env = {**os.environ, "TMPDIR": str(tmp)}
        done = subprocess.run(
            [sys.executable, "-c", _RUN, *TOOLS[tool](copy)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    result = json.loads(done.stdout)
    if result["rc"] != 0:
        print(f"{tool} failed ({result['rc']}): {result['err']}", file=sys.stderr)
    return result


def stages(source: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _STAGES, str(source)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[80, 400, 2000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", nargs="+", choices=list(TOOLS), default=list(TOOLS))
    parser.add_argument("--no-stages", action="store_true")
    parser.add_argument("--shape", choices=["train", "large"], default="train")
    parser.add_argument("--xprof-max-mb", type=float, default=100.0)
    args = parser.parse_args()
    tools = [t for t in TOOLS if t in args.only and (BIN / t).exists()]
    rows = []
    for size in args.sizes:
        source = profile_path(size, args.shape)
        mb = source.stat().st_size / 1e6
        here = [t for t in tools if t != "xprof" or mb <= args.xprof_max_mb]
        runs: dict[str, list[dict[str, float]]] = {t: [] for t in here}
        for _ in range(args.repeat):
            for tool in here:  # alternate, so every tool sees the same machine
                runs[tool].append(measure(tool, source))
        for tool in here:
            ok = [r for r in runs[tool] if r["rc"] == 0] or runs[tool]
            rows.append(
                {
                    "size_mb": mb,
                    "tool": tool,
                    "rc": ok[0]["rc"],
                    "wall_s": statistics.median(r["wall"] for r in ok),
                    "wall_min_s": min(r["wall"] for r in ok),
                    "cpu_s": statistics.median(r["cpu"] for r in ok),
                    "rss_mb": statistics.median(r["rss_mb"] for r in ok),
                }
            )
        print(_table([r for r in rows if r["size_mb"] == mb], mb))
        if "tpuperf" in tools and not args.no_stages:
            split = stages(source)
            print("  tpuperf stages: " + ", ".join(f"{k} {v:.2f}" for k, v in split.items()))
        sys.stdout.flush()
    per_mb = [r for r in rows if r["tool"] == "tpuperf" and r["rc"] == 0]
    if len(per_mb) > 1:
        base = per_mb[0]
        print("tpuperf per MB against the smallest:")
        for r in per_mb[1:]:
            time_ratio = (r["wall_s"] / r["size_mb"]) / (base["wall_s"] / base["size_mb"])
            rss_ratio = (r["rss_mb"] / r["size_mb"]) / (base["rss_mb"] / base["size_mb"])
            print(f"  {r['size_mb']:.0f} MB: time {time_ratio:.2f}x, RSS {rss_ratio:.2f}x")


def _table(rows: list[dict[str, float]], mb: float) -> str:
    ours = next((r for r in rows if r["tool"] == "tpuperf"), None)
    lines = [
        f"profile {mb:.1f} MB",
        "| tool | wall s (min) | CPU s | peak RSS MB | RSS / file | tpuperf wall / this "
        "| tpuperf RSS / this |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio_wall = ours["wall_s"] / r["wall_s"] if ours and r["rc"] == 0 else float("nan")
        ratio_rss = ours["rss_mb"] / r["rss_mb"] if ours and r["rc"] == 0 else float("nan")
        status = "" if r["rc"] == 0 else f" (exit {r['rc']})"
        lines.append(
            f"| {r['tool']}{status} | {r['wall_s']:.2f} ({r['wall_min_s']:.2f}) "
            f"| {r['cpu_s']:.2f} | {r['rss_mb']:,.0f} | {r['rss_mb'] / mb:.1f}x "
            f"| {ratio_wall:.2f} | {ratio_rss:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
