"""tpuperf, XProf and xprof-rs side by side: first command at three sizes, small profiles,
second commands, and tpuperf's stages against their floors; all in one run.

Run by hand (never as a timed test), after `pip install -e ".[dev]" xprof-rs`:

    python benchmarks/bench_engine.py                       # everything: 80 MB, 400 MB, 2 GB
    python benchmarks/bench_engine.py --shape large --sizes 80 --repeat 7
    python benchmarks/bench_engine.py --sizes 80 --only tpuperf xprof-rs --no-small
    python benchmarks/bench_engine.py --sizes --repeat 5    # the small profile only
    python benchmarks/bench_engine.py --sizes 4600 --repeat 1 --only tpuperf   # past 4 GiB
    python benchmarks/bench_engine.py --sizes 80 --before /tmp/main-tree    # before/after

It prints, in this order:

1. **First command**, per size: `tpuperf analyze F --format json`, `xprof get_overview F` and
   `xprof-rs get_overview F`, each in a fresh process on a fresh copy of the file (synced to
   disk) in a fresh directory with a fresh `TMPDIR` and an empty tpuperf cache
   (`TPUPERF_CACHE_DIR`): median (and min) wall time, CPU time and peak RSS (ru_maxrss of the
   child, which counts the pages of the memory-mapped profile it touched), and the ratios of
   tpuperf to the others. The tools alternate run by run so that they share the machine's state.
2. **Second command**, per size (`--second`): on one fresh copy, `tpuperf info F` reads it first;
   then `analyze`, `ops`, `info`, `tree`, `report`, `diff` (the file with itself) and `host`
   run on the unchanged file, as a user's next commands do, and `analyze`, `report` and `diff`
   again (the same analyses: a tpuperf that keeps them reads them back), and before `diff`
   the same `diff` ended once both its runs' tables are read from the cache (its first
   run's analysis skipped): the part of `diff` that reads tables, apart from its analyses
   and its bootstrap statistics
   (where a cache of the tables exists, this is what it serves; where `tpuperf analyze` has a
   `--no-cache` flag, `analyze --no-cache` is timed beside it). XProf's own second
   `get_overview` on its copy (it caches under `TMPDIR` and beside the profile) is shown with
   it where XProf runs at that size.
3. **Stages**, per size: tpuperf's split in one process (imports, the content key's hash,
   decode, tables, the cache entry, timeline, each analyzer, the scopes, the report, the JSON;
   wall and CPU, the minimum of `--stage-repeat` processes; the allocator tuned as the CLI
   tunes it, tpuperf/_malloc.py) beside each stage's floor: reading the file (from the page
   cache), the C loop decoding every event of every line once, one pass over every column of
   every table, writing the entry's bytes, one pass over each device's ops for the timeline
   (the running end of its intervals) and for an analyzer (a sum per op); then the sum of the
   stages the command runs, each once, to set beside its wall time.
4. **Small profile** (`--small-profile`, default the v6e profile of ../shared/profiles):
   `tpuperf --help`, `--version`, `info F`, `ops F`, `analyze F --format json` on a fresh copy,
   against `xprof get_overview F` (fresh copy, fresh `TMPDIR`) and `xprof-rs get_overview F`;
   then the same tpuperf commands a second time on an unchanged copy.

Profiles are generated once into benchmarks/out/: the `train` shape (fixtures.large.write_training:
8 chips, steps, modules, async all-gathers and an all-reduce) or, with --shape large, the engine
issue's shape (fixtures.generate.generate_large: 3,000 op metadata per chip, no async ops).
XProf is left out above --xprof-max-mb (default 100): cold, it needs 25x to 65x the file in
memory. Measure tpuperf as users install it, from a wheel in its own environment
(`python -m venv V && V/bin/pip install . xprof xprof-rs && V/bin/python
benchmarks/bench_engine.py`): an editable install (`pip install -e .`) has every command import
its finder first (50M instructions, 15-25 ms here), which no installed tpuperf does. The first
line printed says which one is measured. The checkout's modules are byte-compiled first (a pip
install does the same; with PYTHONDONTWRITEBYTECODE set, every command would compile tpuperf
again: 0.3-0.5 s).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _measure import measure  # benchmarks/_measure.py, beside this script

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BIN = Path(sys.executable).parent
BEFORE = "tpuperf before"
SMALL = REPO.parent / "shared" / "profiles" / "tpu" / "v6e_4chip_inference.xplane.pb"

FIRST = {
    "tpuperf": ["tpuperf", "analyze", "{f}", "--format", "json"],
    "xprof": ["xprof", "get_overview", "{f}"],
    "xprof-rs": ["xprof-rs", "get_overview", "{f}"],
}
SECOND = {
    "analyze": ["tpuperf", "analyze", "{f}", "--format", "json"],
    "ops": ["tpuperf", "ops", "{f}"],
    "info": ["tpuperf", "info", "{f}"],
    "tree": ["tpuperf", "tree", "{f}"],
    "report": ["tpuperf", "report", "{f}", "-o", "report.html"],
    "diff": ["tpuperf", "diff", "{f}", "{f}", "--format", "json"],
    "host": ["tpuperf", "host", "{f}"],
    # The same analyses again: what the cache keeps of an analysis is read back.
    "analyze, again": ["tpuperf", "analyze", "{f}", "--format", "json"],
    "report, again": ["tpuperf", "report", "{f}", "-o", "report.html"],
    "diff, again": ["tpuperf", "diff", "{f}", "{f}", "--format", "json"],
}
SMALL_COMMANDS = {
    "tpuperf --help": ["tpuperf", "--help"],
    "tpuperf --version": ["tpuperf", "--version"],
    "tpuperf info": ["tpuperf", "info", "{f}"],
    "tpuperf ops": ["tpuperf", "ops", "{f}"],
    "tpuperf analyze": ["tpuperf", "analyze", "{f}", "--format", "json"],
    "xprof get_overview": ["xprof", "get_overview", "{f}"],
    "xprof-rs get_overview": ["xprof-rs", "get_overview", "{f}"],
}

# `tpuperf diff F F --format json` as far as both runs' tables read from the cache, the part of
# the command the issue's second-command goal times ("reads its tables from a local cache"):
# the real command line, its first run's analysis skipped, ended once the second run's tables
# are read (what follows, the analyses and the bootstrap's statistics, is in the row `diff`).
_DIFF_TABLES = r"""
import os, sys
from tpuperf.cli import _common, main
load_profile = _common.load_profile
loaded = []
def load_then_stop(*args, **kwargs):
    profile = load_profile(*args, **kwargs)
    loaded.append(profile)
    if len(loaded) == 2:
        sys.stdout.flush()
        os._exit(0 if all(p.device_tables for p in loaded) else 1)
    return profile
_common.load_profile = load_then_stop
_common.run_analysis = lambda *args, **kwargs: None
main(["diff", sys.argv[1], sys.argv[1], "--format", "json"])
sys.exit(2)  # the command ended before reading both runs
"""
DIFF_TABLES = "diff: its runs' tables from the cache"

# The child reports its own resource use, so that only the tool (not a shell) is measured.
_STAGES = r"""
import json, resource, sys, time
clock = time.perf_counter; cpu = time.process_time
out = {}
def timed(name, start, start_cpu):
    out[name] = (clock() - start, cpu() - start_cpu)
t, c = clock(), cpu()
import numpy as np
from tpuperf import analysis, build, profiles, schema, sources, timeline, xspace
from tpuperf.analyzers import base
from tpuperf.columns import Lookup, Strings
from tpuperf.config import AnalysisConfig
timed("imports", t, c)
# The allocator as the CLI sets it (tpuperf/_malloc.py): without it every stage pays page
# faults the command does not.
from tpuperf._malloc import keep_freed_memory
keep_freed_memory()
path = sys.argv[1]
from tpuperf import cache as cache_mod
t, c = clock(), cpu(); data = sources.read_profile(path); key = cache_mod.content_key(data)
timed("hash (the content key)", t, c)
t, c = clock(), cpu(); space = xspace.decode(data)
timed("decode", t, c)
t, c = clock(), cpu(); host = build.build_host("h", space)
lines = host.lines.with_columns(host=Strings.constant("h", host.lines.n))
info = profiles.HostInfo("h", path)
part = profiles.HostPart(host.devices, lines.select(schema.TABLES["lines"]), info, [])
prof = profiles.assemble([part], path); del host
timed("tables", t, c)
import tempfile
with tempfile.TemporaryDirectory() as scratch:
    t, c = clock(), cpu(); cache_mod.Cache(scratch).put_tables(key, part)
    timed("cache entry (the command writes it beside the analysis)", t, c)
    written = sum(f.stat().st_size for f in __import__("pathlib").Path(scratch).rglob("*")
                  if f.is_file())
del part
config = AnalysisConfig()
t, c = clock(), cpu(); tl = timeline.build_timeline(prof, config)
timed("timeline", t, c)
analyzers = base.select(None)
for analyzer in analyzers:
    t, c = clock(), cpu(); base.run(analyzer, tl, config)
    timed("analyzer " + analyzer.name, t, c)
t, c = clock(), cpu(); analysis._workload(prof, True)
timed("scopes (the workload; the command builds them beside the timeline)", t, c)
t, c = clock(), cpu(); r = analysis.analyze(prof, config=config)
timed("report (timeline and analyzers again, in threads, and its own tables)", t, c)
from tpuperf import output
t, c = clock(), cpu(); text = output.json_text(r.to_dict())
timed("json", t, c)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6

# Floors: the least each stage could do.
floor = {}
t, c = clock(), cpu()
buf = bytearray(16 << 20)
with open(path, "rb", buffering=0) as f:
    while f.readinto(buf):
        pass
floor["decode"] = [("read the file (page cache)", clock() - t, cpu() - c)]
floor["hash"] = floor["decode"]
t, c = clock(), cpu()
with tempfile.TemporaryFile() as scratch:
    left = written
    while left > 0:
        left -= scratch.write(memoryview(buf)[: min(len(buf), left)])
floor["cache entry"] = [("write its bytes (page cache)", clock() - t, cpu() - c)]
t, c = clock(), cpu()
n_events = 0
for plane in space.planes:
    for line in plane.lines:
        n_events += len(line.int_events(()).metadata_id)
    plane.release_stats()
floor["tables"] = [("decode every event once (C loop)", clock() - t, cpu() - c)]
t, c = clock(), cpu()
for device in prof.device_tables:
    for table in (device.ops, device.modules, device.async_ops, device.steps):
        if table is None:
            continue
        for name in table:
            column = table[name]
            (column if isinstance(column, np.ndarray) else column.index).copy()
floor["tables"].append(("one pass over every column", clock() - t, cpu() - c))
t, c = clock(), cpu()
for device in prof.device_tables:
    ops = device.ops
    if ops.n:
        np.maximum.accumulate(ops.array("start_ps") + ops.array("dur_ps"))
floor["timeline"] = [("one pass over each device's ops", clock() - t, cpu() - c)]
t, c = clock(), cpu()
for device in prof.device_tables:
    ops = device.ops
    if ops.n:
        op = ops.strings("op")
        np.bincount(op.index, weights=ops.array("dur_ps"))
floor["analyzer"] = [("a sum per op over each device's ops", clock() - t, cpu() - c)]
print(json.dumps({"stages": out, "floors": floor, "events": n_events, "peak_rss_mb": rss,
                  "json_bytes": len(text)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="*", default=[80, 400, 2000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", nargs="+", choices=list(FIRST), default=list(FIRST))
    parser.add_argument("--shape", choices=["train", "large"], default="train")
    parser.add_argument("--xprof-max-mb", type=float, default=100.0)
    parser.add_argument("--no-stages", action="store_true")
    parser.add_argument("--stage-repeat", type=int, default=3)
    parser.add_argument("--no-second", action="store_true")
    parser.add_argument("--no-small", action="store_true")
    parser.add_argument("--small-profile", type=Path, default=SMALL)
    parser.add_argument(
        "--before",
        type=Path,
        help="also time `tpuperf analyze` of this source tree (another commit: `git archive REV "
        "| tar -x -C DIR`, the built tpuperf/_wire_native*.so copied into DIR/tpuperf, and "
        "DIR/tpuperf/analyzers, DIR/tpuperf/roofline linked to ../analyzers, ../roofline)",
    )
    parser.add_argument(
        "--bin-dir", type=Path, action="append", default=[], help="where else to find the tools"
    )
    args = parser.parse_args()
    # A wheel's install byte-compiles; without the .pyc files every run compiles the package.
    for folder in ("tpuperf", "analyzers", "roofline"):
        compileall.compile_dir(REPO / folder, quiet=1)
    find = _finder(args.bin_dir)
    print(_measured(find))
    print(_machine(args.repeat))
    commands = dict(FIRST)
    if args.before is not None:
        commands[BEFORE] = [
            "env",
            f"PYTHONPATH={args.before.resolve()}",
            sys.executable,
            "-m",
            "tpuperf",
            *FIRST["tpuperf"][1:],
        ]
        for folder in ("tpuperf", "analyzers", "roofline"):
            compileall.compile_dir(args.before / folder, quiet=1)
    rows: list[dict[str, float]] = []
    for size in args.sizes:
        source = profile_path(size, args.shape)
        mb = source.stat().st_size / 1e6
        tools = [t for t in args.only if find(t) and (t != "xprof" or mb <= args.xprof_max_mb)]
        if args.before is not None:  # another checkout's tpuperf, alternating with this one's
            tools.insert(1, BEFORE)
        runs: dict[str, list[dict[str, float]]] = {t: [] for t in tools}
        for _ in range(args.repeat):
            for tool in tools:  # alternate, so every tool sees the same machine
                runs[tool].append(in_scratch(source, [commands[tool]], find)[0])
        here = [_row(tool, runs[tool], mb) for tool in tools]
        rows += here
        print(_first_table(here, mb))
        if not args.no_second and "tpuperf" in tools:
            print(_second(source, args.repeat, find, "xprof" in tools))
        if not args.no_stages and "tpuperf" in tools:
            print(_stages(source, args.stage_repeat))
        sys.stdout.flush()
    per_mb = [r for r in rows if r["tool"] == "tpuperf" and r["rc"] == 0]
    if len(per_mb) > 1:
        base = per_mb[0]
        print("tpuperf per MB against the smallest:")
        for r in per_mb[1:]:
            time_ratio = (r["wall_s"] / r["size_mb"]) / (base["wall_s"] / base["size_mb"])
            rss_ratio = (r["rss_mb"] / r["size_mb"]) / (base["rss_mb"] / base["size_mb"])
            print(f"  {r['size_mb']:.0f} MB: time {time_ratio:.2f}x, RSS {rss_ratio:.2f}x")
    if not args.no_small and args.small_profile.exists():
        print(_small(args.small_profile, args.repeat, find))


def _measured(find: Callable[[str], str | None]) -> str:
    """Which tpuperf the runs measure: an installed one, or this checkout's editable install."""
    tool = find("tpuperf")
    if tool is None:
        return "tpuperf: not found"
    where = subprocess.run(
        [tool, "--version"], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""}
    ).stdout.strip()
    python = _python_of(find)
    origin = subprocess.run(
        [python, "-c", "import tpuperf; print(tpuperf.__file__)"],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),  # as the commands run: outside the checkout
    ).stdout.strip()
    editable = Path(origin).resolve().is_relative_to(REPO)
    kind = "this checkout: an editable install, +15-25 ms a command" if editable else "installed"
    return f"tpuperf measured: {where}, {origin} ({kind})"


def _python_of(find: Callable[[str], str | None]) -> str:
    """The Python that runs the tpuperf measured (its script's first line)."""
    tool = find("tpuperf")
    if tool is None:
        return sys.executable
    return Path(tool).read_text(errors="replace").splitlines()[0].removeprefix("#!")


def _machine(repeat: int) -> str:
    """How fast the machine is at the time of the run: `import numpy` in a fresh interpreter,
    the floor of every command, to set seconds of runs on other days beside these."""
    with tempfile.TemporaryDirectory() as scratch:
        walls = [
            measure([sys.executable, "-c", "import numpy"], cwd=Path(scratch))["wall_s"]
            for _ in range(max(repeat, 1))
        ]
    median = statistics.median(walls)
    return f"machine: `python -c 'import numpy'` {median:.3f} s (median of {len(walls)})"


def _finder(extra: list[Path]) -> Callable[[str], str | None]:
    """The path of a tool: beside this Python, on PATH, or in one of ``extra``."""

    def find(tool: str) -> str | None:
        for folder in (BIN, *extra):
            if (folder / tool).exists():
                return str(folder / tool)
        return shutil.which(tool)

    return find


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


def in_scratch(
    source: Path, commands: list[list[str]], find: Callable[[str], str | None]
) -> list[dict[str, float]]:
    """Run ``commands`` one after another (``{f}`` is the file) on one fresh copy of ``source``
    in a fresh directory, with a fresh TMPDIR and an empty tpuperf cache; each one's figures."""
    (HERE / "out").mkdir(exist_ok=True)  # the small profile alone on a fresh clone
    with tempfile.TemporaryDirectory(dir=HERE / "out") as scratch:
        run_dir = Path(scratch) / "run"
        run_dir.mkdir()
        copy = run_dir / source.name
        shutil.copyfile(source, copy)
        os.sync()  # the copy's write-back must not overlap the measured run
        env = {
            **os.environ,
            "TMPDIR": _mkdir(Path(scratch) / "tmp"),
            "TPUPERF_CACHE_DIR": _mkdir(Path(scratch) / "cache"),
            "XDG_CACHE_HOME": _mkdir(Path(scratch) / "xdg"),
        }
        results = []
        for command in commands:
            argv = [find(command[0]) or command[0]] + [
                str(copy) if a == "{f}" else a for a in command[1:]
            ]
            result = measure(argv, cwd=run_dir, env=env)
            if result["rc"] != 0:
                print(
                    f"{' '.join(command)} failed ({result['rc']}): {result['stderr'][-400:]}",
                    file=sys.stderr,
                )
            results.append(result)
    return results


def _mkdir(path: Path) -> str:
    path.mkdir()
    return str(path)


def _row(tool: str, runs: list[dict[str, float]], mb: float) -> dict[str, float]:
    ok = [r for r in runs if r["rc"] == 0] or runs
    return {
        "size_mb": mb,
        "tool": tool,  # type: ignore[dict-item]
        "rc": ok[0]["rc"],
        "wall_s": statistics.median(r["wall_s"] for r in ok),
        "wall_min_s": min(r["wall_s"] for r in ok),
        "cpu_s": statistics.median(r["cpu_s"] for r in ok),
        "rss_mb": statistics.median(r["peak_rss_mb"] for r in ok),
    }


def _first_table(rows: list[dict[str, float]], mb: float) -> str:
    ours = next((r for r in rows if r["tool"] == "tpuperf"), None)
    lines = [
        f"\nfirst command, profile {mb:.1f} MB (median of the runs, min in brackets)",
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


def _has_no_cache(find: Callable[[str], str | None]) -> bool:
    """Whether this tpuperf's analyze has a --no-cache flag."""
    done = subprocess.run(
        [find("tpuperf") or "tpuperf", "analyze", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    return "--no-cache" in done.stdout


def _second(source: Path, repeat: int, find: Callable[[str], str | None], xprof: bool) -> str:
    """Commands on a file that a first command has read: median and min per command."""
    commands: dict[str, list[str]] = {}
    for name, command in SECOND.items():
        if name == "diff":
            commands[DIFF_TABLES] = [_python_of(find), "-c", _DIFF_TABLES, "{f}"]
        commands[name] = command
    if _has_no_cache(find):
        commands["analyze --no-cache"] = [*SECOND["analyze"], "--no-cache"]
    times: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
    for _ in range(repeat):
        _, *then = in_scratch(source, [SECOND["info"], *commands.values()], find)
        for name, result in zip(commands, then, strict=True):
            times[name].append(result)
    if xprof:
        times["xprof get_overview, 2nd"] = [
            in_scratch(source, [FIRST["xprof"], FIRST["xprof"]], find)[1] for _ in range(repeat)
        ]
    lines = [
        "\nsecond command: after `tpuperf info F` on the same copy (median, min in brackets)",
        "| command | wall s (min) | CPU s | peak RSS MB |",
        "|---|---|---|---|",
    ]
    for name, runs in times.items():
        ok = [r for r in runs if r["rc"] == 0] or runs
        lines.append(
            f"| {name} | {statistics.median(r['wall_s'] for r in ok):.2f} "
            f"({min(r['wall_s'] for r in ok):.2f}) "
            f"| {statistics.median(r['cpu_s'] for r in ok):.2f} "
            f"| {statistics.median(r['peak_rss_mb'] for r in ok):,.0f} |"
        )
    return "\n".join(lines)


def _stages(source: Path, repeat: int) -> str:
    """tpuperf's stages (the minimum over ``repeat`` processes) beside their floors."""
    found = []
    for _ in range(max(repeat, 1)):
        done = subprocess.run(  # (not in the checkout, whose tpuperf an installed one is not)
            [sys.executable, "-c", _STAGES, str(source)],
            capture_output=True,
            text=True,
            cwd=source.parent,
        )
        if done.returncode:
            return f"stages failed: {done.stderr[-800:]}"
        found.append(json.loads(done.stdout))
    stages = {
        k: [min(r["stages"][k][i] for r in found) for i in (0, 1)] for k in found[0]["stages"]
    }
    floors = {
        k: [
            (
                name,
                min(r["floors"][k][j][1] for r in found),
                min(r["floors"][k][j][2] for r in found),
            )
            for j, (name, _, _) in enumerate(v)
        ]
        for k, v in found[0]["floors"].items()
    }
    lines = [
        f"\ntpuperf's stages in one process ({found[0]['events']:,} events; the minimum of "
        f"{len(found)} processes; peak RSS {min(r['peak_rss_mb'] for r in found):,.0f} MB)",
        "| stage | wall s | CPU s | floor | floor wall s | stage / floor |",
        "|---|---|---|---|---|---|",
    ]
    for name, (wall, cpu) in stages.items():
        key = "analyzer" if name.startswith("analyzer") else name.split(" (")[0]
        below = floors.get(key, [])
        floor_wall = sum(f[1] for f in below)
        text = " + ".join(f[0] for f in below) or ""
        ratio = f"{wall / floor_wall:.1f}x" if floor_wall > 0 else ""
        lines.append(
            f"| {name} | {wall:.3f} | {cpu:.3f} | {text} | {floor_wall:.3f} | {ratio} |"
            if below
            else f"| {name} | {wall:.3f} | {cpu:.3f} | | | |"
        )
    # What the command runs, each once (the report holds the timeline and the analyzers).
    once = [v for k, v in stages.items() if not k.startswith(("timeline", "analyzer "))]
    lines.append(
        f"\nthe command's stages one after another: {sum(w for w, _ in once):.3f} s wall, "
        f"{sum(c for _, c in once):.3f} s CPU (imports, hash, decode, tables, cache entry, "
        "scopes, report, json; in the command the hash runs beside the decode and the tables, "
        "the cache entry beside the analysis and the scopes beside the timeline, and the "
        "command's wall time adds the interpreter's start and exit and the command line's "
        "own imports)"
    )
    return "\n".join(lines)


def _small(path: Path, repeat: int, find: Callable[[str], str | None]) -> str:
    """The small profile: each command on a fresh copy, then tpuperf's again on the same copy."""
    names = [n for n in SMALL_COMMANDS if find(SMALL_COMMANDS[n][0])]
    first: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    again: dict[str, list[dict[str, float]]] = {n: [] for n in names if n.startswith("tpuperf ")}
    for _ in range(repeat):
        for name in names:  # alternate
            first[name].append(in_scratch(path, [SMALL_COMMANDS[name]], find)[0])
        second = in_scratch(path, [SECOND["info"], *(SMALL_COMMANDS[n] for n in again)], find)[1:]
        for name, result in zip(again, second, strict=True):
            again[name].append(result)
    overview = first.get("xprof get_overview")
    xprof_wall = statistics.median(r["wall_s"] for r in overview) if overview else float("nan")
    lines = [
        f"\nsmall profile {path.name} ({path.stat().st_size / 1e6:.2f} MB), median of {repeat} "
        "(min in brackets)",
        "| command | first wall s (min) | CPU s | peak RSS MB | / XProf get_overview "
        "| again on the same file, wall s |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        runs = first[name]
        wall = statistics.median(r["wall_s"] for r in runs)
        repeat_text = (
            f"{statistics.median(r['wall_s'] for r in again[name]):.3f}" if name in again else ""
        )
        failed = [r["rc"] for r in runs if r["rc"] != 0]
        status = f" (exit {failed[0]}: {runs[0]['stderr'].strip()[:60]})" if failed else ""
        lines.append(
            f"| {name}{status} | {wall:.3f} ({min(r['wall_s'] for r in runs):.3f}) "
            f"| {statistics.median(r['cpu_s'] for r in runs):.3f} "
            f"| {statistics.median(r['peak_rss_mb'] for r in runs):,.0f} "
            f"| {wall / xprof_wall:.2f} | {repeat_text} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
