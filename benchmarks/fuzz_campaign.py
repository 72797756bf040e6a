"""A long fuzz campaign by hand: damaged and hostile profiles through every command, both decoders.

Inputs: ``--mutants N`` damaged copies of the real profiles in ``../shared/profiles`` and the
CPU fixture (:mod:`fixtures.mutate`: truncations, bit flips, varint and length overwrites,
chunk duplication and deletion, garbage, gzip of mutants, broken gzip streams), plus every
well-formed hostile XSpace of :mod:`fixtures.hostile`. Each input goes through ``info``,
``ops --format json``, ``ops --format csv``, ``analyze --format json`` and ``analyze`` (table),
the two decoders (C and numpy) taking turns so that each input and each command meets both
(``--both-decoders``: every pair on both), and the inputs, in batches, through ``scan`` on
both. Every run is in a worker process with a 4 GB address-space cap; a run that takes over
30 s is a hang (its worker is killed and replaced).

Each run is sorted into one outcome:

- ``ok``: exit 0 and output that parses (JSON without NaN, CSV with one row per line);
- ``clean error``: exit 2 or 4 and one ``tpuperf: error: ...`` line on stderr;
- ``internal error``: exit 1 (``please report it``) or an exception out of ``main``;
- ``injection``: a control character (ESC, BEL, C1, ...) in text output, or a CSV cell a
  spreadsheet would run as a formula;
- ``unparseable``: JSON or CSV that does not parse;
- ``memory``: ``MemoryError``; ``hang``: killed at the timeout; ``signal``: the worker died.

    python benchmarks/fuzz_campaign.py --mutants 2000 --seed 1 --workers 2

prints the outcome table (Markdown) and the distinct causes of every outcome but ``ok`` and
``clean error``; ``--save DIR`` keeps the inputs behind them.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import multiprocessing
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fixtures.hostile import COMMANDS, OUTCOMES, cases, judge  # noqa: E402
from fixtures.mutate import mutate  # noqa: E402

SHARED = REPO.parent / "shared" / "profiles"
SOURCES = [*sorted(SHARED.rglob("*.xplane.pb")), REPO / "fixtures/data/cpu_train_steps.xplane.pb"]
ADDRESS_SPACE = 4 << 30
TIMEOUT_S = 30.0


# --------------------------------------------------------------------------- in the worker


def _worker(tasks: Any, results: Any) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    os.environ["COLUMNS"] = "80"
    from tpuperf import kernels
    from tpuperf.cli import main

    while (task := tasks.get()) is not None:
        key, decoder, command, args = task
        raw = io.BytesIO()
        out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
        err = io.StringIO()
        code: Any
        try:
            with (
                kernels.use("native" if decoder == "C" else "numpy"),
                contextlib.redirect_stdout(out),
                contextlib.redirect_stderr(err),
            ):
                code = main(args)
        except MemoryError:
            code = "memory"
        except BaseException as exc:
            code = f"exception {type(exc).__name__}: {str(exc)[:100]}"
        out.flush()
        outcome, cause = judge(command, code, raw.getvalue(), err.getvalue())
        results.put((key, decoder, command, outcome, cause))


# --------------------------------------------------------------------------- in the parent


def _inputs(mutants: int, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    out = [(f"hostile/{name}", data) for name, data in cases(seed)]
    data = {path: path.read_bytes() for path in SOURCES}
    for i in range(mutants):
        source = rng.choice(SOURCES)
        kind, mutant = mutate(data[source], rng)
        out.append((f"{source.name.split('.')[0]}/{kind}/{i}", mutant))
    return out


def run(
    mutants: int, seed: int, workers: int, save: Path | None, alternate: bool = True
) -> dict[str, Any]:
    inputs = _inputs(mutants, seed)
    scratch = Path(tempfile.mkdtemp(prefix="tpuperf-fuzz-"))
    paths = {}
    for i, (key, data) in enumerate(inputs):
        suffix = ".xplane.pb.gz" if data[:2] == b"\x1f\x8b" else ".xplane.pb"
        paths[key] = scratch / f"input_{i:05d}{suffix}"
        paths[key].write_bytes(data)
    tasks: list[tuple[str, str, str, list[str]]] = []
    for n, (key, path) in enumerate(paths.items()):
        for i, (command, args) in enumerate(COMMANDS.items()):
            # Every input through every command, the decoders taking turns (by input and
            # command): each input and each command meets both decoders.
            decoder = ("C", "numpy")[(n + i) % 2] if alternate else None
            for which in (decoder,) if decoder else ("C", "numpy"):
                tasks.append((key, which, command, [args[0], str(path), *args[1:]]))
    # scan: batches of 50 inputs, each batch its own directory.
    keys = list(paths)
    for b in range(0, len(keys), 50):
        batch = scratch / f"scan_{b:05d}"
        batch.mkdir()
        for key in keys[b : b + 50]:
            os.link(paths[key], batch / paths[key].name)
        for decoder in ("C", "numpy"):
            args = ["scan", str(batch), "--workers", "1", "--no-cache", "--format", "ndjson"]
            tasks.append((f"scan batch {b // 50}", decoder, "scan", args))

    context = multiprocessing.get_context("fork")
    results: Any = context.Queue()
    table: collections.Counter[str] = collections.Counter()
    per_command: collections.Counter[tuple[str, str]] = collections.Counter()
    causes: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    findings: dict[str, str] = {}
    started = time.perf_counter()

    class Slot:
        def __init__(self) -> None:
            self.tasks: Any = context.Queue()
            self.process = context.Process(target=_worker, args=(self.tasks, results), daemon=True)
            self.process.start()
            self.current: tuple[str, str, str, list[str]] | None = None
            self.deadline = 0.0

        def give(self, task: tuple[str, str, str, list[str]]) -> None:
            self.current, self.deadline = task, time.monotonic() + TIMEOUT_S
            self.tasks.put(task)

    def record(key: str, decoder: str, command: str, outcome: str, cause: str) -> None:
        table[outcome] += 1
        per_command[(command, outcome)] += 1
        if outcome not in ("ok", "clean error"):
            causes[outcome][cause] += 1
            findings.setdefault(key, f"{decoder} {command}: {outcome}: {cause}")

    queue = collections.deque(tasks)
    slots = [Slot() for _ in range(workers)]
    done = reported = 0
    while done < len(tasks):
        for i, slot in enumerate(slots):
            if slot.current is None and queue:
                slot.give(queue.popleft())
            elif slot.current is not None and not slot.process.is_alive():
                key, decoder, command, _ = slot.current
                record(key, decoder, command, "signal", f"exit code {slot.process.exitcode}")
                done += 1
                slots[i] = Slot()
            elif slot.current is not None and time.monotonic() > slot.deadline:
                slot.process.kill()
                slot.process.join()
                key, decoder, command, _ = slot.current
                record(key, decoder, command, "hang", f"over {TIMEOUT_S:.0f} s")
                done += 1
                slots[i] = Slot()
        with contextlib.suppress(Exception):
            key, decoder, command, outcome, cause = results.get(timeout=0.2)
            record(key, decoder, command, outcome, cause)
            done += 1
            for slot in slots:
                if slot.current is not None and slot.current[:3] == (key, decoder, command):
                    slot.current = None
        if done // 500 > reported:
            reported = done // 500
            print(f"  {done:,}/{len(tasks):,} runs", file=sys.stderr)
    for slot in slots:
        slot.tasks.put(None)
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        for key in findings:
            if key in paths:
                (save / key.replace("/", "_")).write_bytes(paths[key].read_bytes())
    return {
        "inputs": len(inputs),
        "hostile": sum(1 for k, _ in inputs if k.startswith("hostile/")),
        "runs": len(tasks),
        "seconds": time.perf_counter() - started,
        "outcomes": {o: table[o] for o in OUTCOMES},
        "per_command": {f"{c} / {o}": n for (c, o), n in sorted(per_command.items())},
        "causes": {o: dict(c.most_common(20)) for o, c in causes.items()},
        "findings": findings,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--save", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    parser.add_argument(
        "--both-decoders",
        action="store_true",
        help="every input and command on both decoders (twice the runs; by default they take "
        "turns)",
    )
    options = parser.parse_args()
    result = run(
        options.mutants, options.seed, options.workers, options.save, not options.both_decoders
    )
    print(
        f"{result['inputs']:,} inputs ({result['inputs'] - result['hostile']:,} mutants, "
        f"{result['hostile']} hostile), {result['runs']:,} runs, {result['seconds']:.0f} s\n"
    )
    print("| outcome | runs |\n|---|---|")
    for outcome, n in result["outcomes"].items():
        print(f"| {outcome} | {n:,} |")
    for outcome, found in result["causes"].items():
        print(f"\n{outcome}:")
        for cause, n in found.items():
            print(f"  {n:5d}  {cause}")
    if options.json:
        options.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
