"""The column libraries tpuperf could build its engine on, measured on the engine's own work.

Run by hand (never as a timed test):

    python benchmarks/bench_libraries.py
    python benchmarks/bench_libraries.py --rows 2000000 --groups 3000 --repeat 5

For each of numpy, pandas, pyarrow and polars (those installed), in fresh processes: the import
time, and the kernels that take the engine's time on a 2M-op, 8-chip profile, on one chip's
worth of rows (default 260,000) repeated for 8 chips:

- group sum: durations summed per op (3,000 distinct ops, as per-op statistics do);
- lookup: a per-metadata column read out at every op (names and costs are stored once per op
  metadata and indexed by each event);
- argsort: ops ordered by start time (the timeline orders every device's ops);
- overlap: for each op start, the window holding it (sorted search).

It prints the median time of each and the time relative to numpy. The engine uses numpy (and
its own C loop for decoding): see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

_IMPORT = "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"

_KERNELS = r"""
import json, sys, time
import numpy as np
library, rows, groups, chips, repeat = sys.argv[1], *map(int, sys.argv[2:6])
rng = np.random.default_rng(0)
op = rng.integers(0, groups, rows).astype(np.int32)
dur = rng.integers(1_000, 1_000_000, rows).astype(np.int64)
start = np.cumsum(dur + rng.integers(0, 1_000, rows))
per_meta = rng.random(groups)
windows = np.linspace(0, int(start[-1]), 101).astype(np.int64)

if library == "numpy":
    kernels = {
        "group sum": lambda: np.bincount(op, weights=dur, minlength=groups),
        "lookup": lambda: per_meta[op],
        "argsort": lambda: np.argsort(start[::-1], kind="stable"),
        "overlap": lambda: np.searchsorted(windows, start, side="right") - 1,
    }
elif library == "pandas":
    import pandas as pd
    frame = pd.DataFrame({"op": op, "dur": dur, "start": start})
    lookup = pd.Series(per_meta)
    reverse = pd.Series(start[::-1])
    win = pd.Index(windows)
    kernels = {
        "group sum": lambda: frame.groupby("op", sort=False)["dur"].sum(),
        "lookup": lambda: lookup.take(op),
        "argsort": lambda: reverse.argsort(kind="stable"),
        "overlap": lambda: win.searchsorted(frame["start"], side="right") - 1,
    }
elif library == "pyarrow":
    import pyarrow as pa
    import pyarrow.compute as pc
    table = pa.table({"op": op, "dur": dur})
    lookup = pa.array(per_meta)
    ops = pa.array(op)
    reverse = pa.array(start[::-1])
    kernels = {
        "group sum": lambda: table.group_by("op").aggregate([("dur", "sum")]),
        "lookup": lambda: lookup.take(ops),
        "argsort": lambda: pc.sort_indices(reverse),
        "overlap": None,  # no sorted search in pyarrow.compute
    }
elif library == "polars":
    import polars as pl
    frame = pl.DataFrame({"op": op, "dur": dur})
    lookup = pl.Series(per_meta)
    ops = pl.Series(op)
    reverse = pl.Series(start[::-1])
    win = pl.Series(windows)
    starts = pl.Series(start)
    kernels = {
        "group sum": lambda: frame.group_by("op").agg(pl.col("dur").sum()),
        "lookup": lambda: lookup.gather(ops),
        "argsort": lambda: reverse.arg_sort(),
        "overlap": lambda: win.search_sorted(starts, side="right") - 1,
    }
out = {}
for name, kernel in kernels.items():
    if kernel is None:
        out[name] = None
        continue
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(chips):
            kernel()
        times.append(time.perf_counter() - t)
    out[name] = min(times)
print(json.dumps(out))
"""

LIBRARIES = {"numpy": "numpy", "pandas": "pandas", "pyarrow": "pyarrow", "polars": "polars"}


def _run(code: str, *args: str) -> str | None:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=260_000, help="ops per chip")
    parser.add_argument("--groups", type=int, default=3_000, help="distinct ops")
    parser.add_argument("--chips", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, dict[str, float | None]] = {}
    for library, module in LIBRARIES.items():
        imports = [_run(_IMPORT.format(module=module)) for _ in range(args.repeat)]
        if any(i is None for i in imports):
            print(f"{library}: not installed", file=sys.stderr)
            continue
        kernels = _run(
            _KERNELS,
            library,
            *map(str, (args.rows, args.groups, args.chips, args.repeat)),
        )
        if kernels is None:
            print(f"{library}: the kernels failed", file=sys.stderr)
            continue
        results[library] = {
            "import": statistics.median(float(i) for i in imports if i),
            **json.loads(kernels),
        }
    names = ["import", "group sum", "lookup", "argsort", "overlap"]
    print(
        f"{args.chips} chips x {args.rows:,} ops, {args.groups:,} distinct ops; "
        "seconds (best of the repeats; import: median), and x numpy"
    )
    print("| library | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    base = results.get("numpy", {})
    for library, values in results.items():
        cells = []
        for name in names:
            value, ref = values.get(name), base.get(name)
            if value is None:
                cells.append("n/a")
            elif ref:
                cells.append(f"{value:.3f} ({value / ref:.1f}x)")
            else:
                cells.append(f"{value:.3f}")
        print(f"| {library} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
