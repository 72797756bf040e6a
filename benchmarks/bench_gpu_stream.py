"""Cost of one GPU stream of many kernels: the hostile-input issue's case whose cost was quadratic.

Run by hand (never as a timed test):

    python benchmarks/bench_gpu_stream.py                    # 50k, 100k, 500k, 2M kernels
    python benchmarks/bench_gpu_stream.py --kernels 500000 --repeat 5

Each profile is one GPU with every kernel on a single stream, 50 distinct kernels, each event
with its own correlation id, `hlo_op` and `hlo_module` (fixtures.large.write_gpu_stream), written
to benchmarks/out/. For each size it prints the median wall time and peak RSS of `tpuperf ops F
--format json` and `tpuperf analyze F --format json` in fresh processes, and the time per
kernel: linear cost keeps that column flat as the stream grows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from bench_engine import _RUN, BIN, HERE, REPO

COMMANDS = {
    "ops": lambda f: [str(BIN / "tpuperf"), "ops", str(f), "--format", "json"],
    "analyze": lambda f: [str(BIN / "tpuperf"), "analyze", str(f), "--format", "json"],
}


def stream_path(kernels: int) -> Path:
    path = HERE / "out" / f"gpu_stream_{kernels}.xplane.pb"
    if not path.exists():
        sys.path.insert(0, str(REPO))
        from fixtures.large import write_gpu_stream

        path.parent.mkdir(exist_ok=True)
        print(write_gpu_stream(path, kernels), file=sys.stderr)
    return path


def measure(command: list[str]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *command], capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout)
    if result["rc"] != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result['rc']}): {result['err']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--kernels", type=int, nargs="+", default=[50_000, 100_000, 500_000, 2_000_000]
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("| kernels | MB | command | wall s | peak RSS MB | µs per kernel |")
    print("|---|---|---|---|---|---|")
    for kernels in args.kernels:
        path = stream_path(kernels)
        for name, command in COMMANDS.items():
            runs = [measure(command(path)) for _ in range(args.repeat)]
            wall = statistics.median(r["wall"] for r in runs)
            rss = statistics.median(r["rss_mb"] for r in runs)
            print(
                f"| {kernels:,} | {path.stat().st_size / 1e6:.1f} | {name} | {wall:.2f} "
                f"| {rss:,.0f} | {wall / kernels * 1e6:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
