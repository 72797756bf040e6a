"""Export formats side by side: Perfetto protobuf (what `tpuperf export` writes) against
Chrome trace-event JSON, gzip-compressed, on a large generated TPU training profile.

Run by hand (never as a timed test), after `pip install -e ".[dev]"`:

    python benchmarks/bench_export.py      # generates benchmarks/out/train_40mb.xplane.pb
    python benchmarks/bench_export.py --size-mb 200

Each format runs in a fresh subprocess: the profile is loaded, then exported. Reports (the
run with the median CPU time of --repeat runs) the export's wall and CPU time, the file size,
the peak RSS of the process (ru_maxrss) and the RSS once the profile is loaded, so the
export's own memory is the difference. The JSON
writer here lays out the same tracks and slices (tpuperf.exporting's tracks and lanes) as
complete ("X") events on one pid per device and one tid per line, written a chunk at a time
through gzip.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

_CHILD = r"""
import gzip, json, resource, sys, time
sys.path.insert(0, {repo!r})
import tpuperf
from tpuperf import exporting

path, fmt, out = sys.argv[1], sys.argv[2], sys.argv[3]
profile = tpuperf.load(path)
loaded_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def chrome_json(profile, out):
    hosts = {{}}
    for device in profile.device_tables:
        hosts.setdefault(device.host, []).append(device)
    origin = exporting._origin_ps(hosts, dict.fromkeys(hosts, 0))
    slices = 0
    with gzip.open(out, "wt", compresslevel=6) as handle:
        handle.write('{{"displayTimeUnit":"ns","traceEvents":[\n')
        first = True
        for pid, device in enumerate(profile.device_tables, 1):
            name = f"{{device.host}} {{device.row.get('plane')}}"
            handle.write(("" if first else ",") + json.dumps(
                {{"ph": "M", "pid": pid, "name": "process_name", "args": {{"name": name}}}}) + "\n")
            first = False
            tid = 0
            for track in exporting._tracks(device, origin):
                for rows in exporting._lanes(track.start_ns, track.end_ns):
                    tid += 1
                    handle.write("," + json.dumps({{"ph": "M", "pid": pid, "tid": tid,
                        "name": "thread_name", "args": {{"name": track.name}}}}) + "\n")
                    names = track.names.take(rows).tolist()
                    cats = track.categories.take(rows).tolist()
                    start = track.start_ns[rows].tolist()
                    end = track.end_ns[rows].tolist()
                    parts = []
                    for n, c, s, e in zip(names, cats, start, end):
                        parts.append(
                            ',{{"ph":"X","pid":%d,"tid":%d,"ts":%.3f,"dur":%.3f,"name":%s,'
                            '"cat":%s}}\n'
                            % (pid, tid, s / 1000, (e - s) / 1000, json.dumps(n), json.dumps(c)))
                        if len(parts) == 10000:
                            handle.write("".join(parts)); parts = []
                    handle.write("".join(parts))
                    slices += len(rows)
        handle.write("]}}\n")
    return slices


cpu0, t0 = time.process_time(), time.perf_counter()
if fmt == "perfetto":
    slices = exporting.export_perfetto(profile, out).slices
else:
    slices = chrome_json(profile, out)
wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
import os, struct
raw = os.path.getsize(out)
if fmt == "json":  # gzip's trailer holds the uncompressed size (mod 2**32)
    with open(out, "rb") as handle:
        handle.seek(-4, 2)
        raw = struct.unpack("<I", handle.read(4))[0]
print(json.dumps({{"format": fmt, "raw_bytes": raw, "slices": slices, "wall_s": wall, "cpu_s": cpu,
                  "bytes": os.path.getsize(out), "loaded_rss_mb": loaded_rss_mb,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=40)
    parser.add_argument("--profile", type=Path, help="a profile to use instead of a generated one")
    parser.add_argument("--repeat", type=int, default=3, help="runs per format (median shown)")
    args = parser.parse_args()
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    profile = args.profile or out / f"train_{args.size_mb}mb.xplane.pb"
    if not profile.exists():
        subprocess.run(
            [sys.executable, "-m", "fixtures.large", str(profile), str(args.size_mb)],
            cwd=REPO,
            check=True,
        )
    print(f"{profile} ({profile.stat().st_size / 1e6:.0f} MB)")
    for fmt, suffix in (("perfetto", ".pftrace"), ("json", ".json.gz")):
        target = out / f"{profile.name.split('.')[0]}{suffix}"
        child = _CHILD.format(repo=str(REPO))
        runs = []
        for _ in range(args.repeat):
            done = subprocess.run(
                [sys.executable, "-c", child, str(profile), fmt, str(target)],
                capture_output=True,
                text=True,
            )
            if done.returncode:
                raise SystemExit(done.stderr)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        result = sorted(runs, key=lambda r: r["cpu_s"])[len(runs) // 2]
        print(
            f"{fmt:9} {result['slices']:>10,} slices  {result['wall_s']:6.1f} s wall  "
            f"{result['cpu_s']:6.1f} s CPU  {result['bytes'] / 1e6:7.1f} MB "
            f"({result['raw_bytes'] / 1e6:.0f} MB uncompressed)  "
            f"peak RSS {result['peak_rss_mb']:6.0f} MB "
            f"(loaded profile {result['loaded_rss_mb']:.0f} MB)"
        )


if __name__ == "__main__":
    main()
