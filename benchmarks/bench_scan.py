"""Scan benchmark: `tpuperf scan` over a generated fleet of 200 host profiles, 3 of them corrupt.

Run by hand (never as a timed test):

    python benchmarks/bench_scan.py                # generates benchmarks/out/scan_fleet once
    python benchmarks/bench_scan.py --repeat 3 --profiles 200

Every scan is the real command line (`python -m tpuperf scan ... -o rows.ndjson`) in a fresh
process, timed from outside, with the peak RSS of the largest process it started (the scan or
one of its workers). It measures:

  workers 1       --workers 1 --no-cache   (one process)
  workers 2       --workers 2 --no-cache   (a pool of two)
  first scan      --workers 2 into an empty cache
  tables cached   --workers 2 after deleting the cached rows: decode skipped, analysis not
  re-scan         --workers 2 with everything cached

and checks the output: one row per profile, an error in exactly the corrupt ones, and every other
row equal to `tpuperf.analyze(tpuperf.load(path))` of its file (the numbers `tpuperf analyze`
prints), field by field.

With --large it also scans the decode benchmark's ~86 MB, 2M-event profile
(benchmarks/out/large_80mb.xplane.pb, made by bench_decode.py) alone: uncached, first, tables cached
and re-scan, where the table cache's share is larger than on the small fleet profiles.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

from _measure import measure  # benchmarks/_measure.py, beside this script

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

CORRUPT = {
    "garbage.xplane.pb": b"\x07this is not a profile" * 20,
    "empty.xplane.pb": b"",
    "truncated.xplane.pb": None,  # the first half of a good profile
}


def make_fleet(root: Path, profiles: int) -> None:
    """``profiles`` host files: generated runs of every scenario, round robin, and 3 corrupt."""
    from fixtures.generate import SCENARIOS, write_run

    marker = root / "fleet.json"
    if marker.exists() and json.loads(marker.read_text()) == {"profiles": profiles}:
        return
    shutil.rmtree(root, ignore_errors=True)
    written, index = 0, 0
    good = profiles - len(CORRUPT)
    while written < good:
        scenario = SCENARIOS[index % len(SCENARIOS)]
        hosts = 1 if scenario == "straggler" and good - written < 2 else None
        _, truth = write_run(
            scenario,
            root / f"job{index:04d}",
            run_name=f"2026_01_01_00_{index // 60:02d}_{index % 60:02d}",
            seed=index,
            hosts=hosts,
        )
        written += len(truth.hosts)
        index += 1
    bad = root / "job_corrupt" / "plugins" / "profile" / "2026_02_01_00_00_00"
    bad.mkdir(parents=True)
    sample = next(root.rglob("*.xplane.pb")).read_bytes()
    for name, data in CORRUPT.items():
        (bad / name).write_bytes(sample[: len(sample) // 2] if data is None else data)
    marker.write_text(json.dumps({"profiles": profiles}))


def run_scan(fleet: Path, out: Path, *flags: str) -> dict:
    command = [sys.executable, "-m", "tpuperf", "scan", str(fleet), "-o", str(out), *flags]
    result = measure(command, cwd=REPO)
    if result["rc"] != 0:
        raise SystemExit(f"scan failed ({result['rc']}): {result['stderr']}")
    # "scanned N profiles in S s: K from the cache, E with errors": a re-scan that is not all
    # from the cache means the code changed under the benchmark (a development version's cache
    # key includes its source).
    match = re.search(r"(\d+) from the cache", result["stderr"])
    result["from_cache"] = int(match.group(1)) if match else None
    return result


def check(rows_path: Path, profiles: int) -> dict:
    """The figures the issue asks for: rows, errors, and equality with `tpuperf analyze`."""
    import tpuperf

    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    errors = [r for r in rows if r["error"]]
    summary_fields = {
        "platform": ("platform",),
        "chip": ("chip",),
        "devices": ("devices",),
        "steps": ("steps_analyzed",),
        "step_time_ms.median": ("step_time_ms", "median"),
        "step_time_ms.mean": ("step_time_ms", "mean"),
        "step_time_ms.p90": ("step_time_ms", "p90"),
        "busy_pct": ("busy_pct",),
        "idle_pct": ("idle_pct",),
        "exposed_collective_pct": ("exposed_collective_pct",),
        "flops_utilization_pct": ("flops_utilization_pct",),
        "mfu_pct": ("mfu_pct",),
    }
    mismatches = []
    for row in rows:
        if row["error"]:
            continue
        report = tpuperf.analyze(tpuperf.load(row["path"])).to_dict()
        expected = {}
        for name, path in summary_fields.items():
            value = report["summary"]
            for key in path:
                value = value[key]
            expected[name] = value
        top = report["recommendations"][0] if report["recommendations"] else {}
        expected["top_recommendation.kind"] = top.get("kind")
        expected["top_recommendation.est_savings_pct"] = top.get("est_savings_pct")
        expected["recommendations"] = len(report["recommendations"])
        for name, value in expected.items():
            got = row[name]
            same = got == value or (
                isinstance(value, float) and isinstance(got, float) and math.isnan(value)
            )
            if not same:
                mismatches.append((row["path"], name, got, value))
    return {
        "rows": len(rows),
        "expected_rows": profiles,
        "errors": len(errors),
        "error_files": sorted(Path(r["path"]).name for r in errors),
        "compared_with_analyze": len(rows) - len(errors),
        "mismatches": mismatches[:10],
        "kinds": sorted({r["top_recommendation.kind"] for r in rows if not r["error"]}),
    }


def bench_large(out: Path, repeat: int) -> None:
    large = out / "large_80mb.xplane.pb"
    if not large.exists():
        raise SystemExit(f"{large} is missing: run benchmarks/bench_decode.py once to make it")
    cache = out / "scan_cache_large"
    rows = out / "scan_rows_large.ndjson"
    print(f"large: {large.stat().st_size / 1e6:.0f} MB", flush=True)
    times: dict[str, list[float]] = {}
    for _ in range(repeat):
        shutil.rmtree(cache, ignore_errors=True)
        for name, flags, drop in (
            ("uncached", ["--no-cache"], None),
            ("first scan", ["--cache-dir", str(cache)], None),
            ("tables cached", ["--cache-dir", str(cache)], "rows"),
            ("re-scan", ["--cache-dir", str(cache)], None),
        ):
            if drop:
                shutil.rmtree(cache / "v1" / drop, ignore_errors=True)
            result = run_scan(large, rows, *flags)
            times.setdefault(name, []).append(result["wall_s"])
            print(
                f"  {name:<14} {result['wall_s']:7.2f} s   "
                f"peak RSS {result['peak_rss_mb']:6.0f} MB   "
                f"from the cache {result['from_cache']}",
                flush=True,
            )
    print(json.dumps({name: round(statistics.median(t), 2) for name, t in times.items()}))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profiles", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-check", action="store_true", help="Skip the equality check.")
    parser.add_argument("--large", action="store_true", help="Also scan the large profile.")
    parser.add_argument("--large-only", action="store_true", help="Only scan the large profile.")
    args = parser.parse_args()
    out = HERE / "out"
    if args.large_only:
        bench_large(out, args.repeat)
        return

    fleet = out / "scan_fleet"
    t0 = time.perf_counter()
    make_fleet(fleet, args.profiles)
    files = sorted(fleet.rglob("*.xplane.pb"))
    print(
        f"fleet: {len(files)} host profiles, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB "
        f"({time.perf_counter() - t0:.1f} s to generate or find)",
        flush=True,
    )
    cache = out / "scan_cache"
    rows = out / "scan_rows.ndjson"
    runs: dict[str, list[dict]] = {}
    outputs: set[bytes] = set()
    for _ in range(args.repeat):
        shutil.rmtree(cache, ignore_errors=True)
        plan = [
            ("workers 1", ["--workers", "1", "--no-cache"], None),
            ("workers 2", ["--workers", "2", "--no-cache"], None),
            ("first scan", ["--workers", "2", "--cache-dir", str(cache)], None),
            ("tables cached", ["--workers", "2", "--cache-dir", str(cache)], "rows"),
            ("re-scan", ["--workers", "2", "--cache-dir", str(cache)], None),
        ]
        for name, flags, drop in plan:
            if drop:
                shutil.rmtree(cache / "v1" / drop, ignore_errors=True)
            result = run_scan(fleet, rows, *flags)
            runs.setdefault(name, []).append(result)
            outputs.add(rows.read_bytes())
            print(
                f"  {name:<14} {result['wall_s']:7.2f} s   "
                f"peak RSS {result['peak_rss_mb']:6.0f} MB   "
                f"from the cache {result['from_cache']}",
                flush=True,
            )

    def median(name: str) -> float:
        return statistics.median(r["wall_s"] for r in runs[name])

    figures = {name: round(median(name), 2) for name in runs}
    figures["speedup workers 2 / 1"] = round(median("workers 1") / median("workers 2"), 2)
    figures["speedup re-scan / first"] = round(median("first scan") / median("re-scan"), 1)
    figures["speedup tables cached / first"] = round(
        median("first scan") / median("tables cached"), 2
    )
    figures["peak RSS MB (max)"] = round(max(r["peak_rss_mb"] for rs in runs.values() for r in rs))
    figures["identical outputs"] = len(outputs) == 1  # every run wrote the same bytes
    print(json.dumps(figures, indent=2))
    if args.large:
        bench_large(out, args.repeat)
    if not args.no_check:
        print(json.dumps(check(rows, len(files)), indent=2))


if __name__ == "__main__":
    main()
