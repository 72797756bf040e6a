"""``tpuperf scan``: analyse many profiles, one row each, with gates for CI."""

from __future__ import annotations

import contextlib
import sys
import time
from enum import Enum
from typing import Any

from tpuperf.cli._common import format_option, wide_option
from tpuperf.cli._params import Argument, Option
from tpuperf.output import Format

FORMATS = (Format.table, Format.ndjson, Format.csv, Format.parquet, Format.json)


class Engine(str, Enum):
    local = "local"
    ray = "ray"


def command(
    paths: list[str] = Argument(
        ...,
        metavar="PATH",
        help="Profile files, run directories, logdirs or globs ('logs/**/*.xplane.pb'); "
        "local or gs://.",
        show_default=False,
    ),
    out: str = Option(
        None,
        "--out",
        "--output",
        "-o",
        metavar="FILE",
        help="Write the rows to FILE (whole or not at all); a path or a URL such as gs://.",
        show_default=False,
    ),
    format: Format | None = format_option(
        *FORMATS,
        help="table, ndjson, csv, parquet or json (one document of all rows; default: from "
        "the --out suffix: .ndjson/.jsonl, .csv, .parquet, .json; else table).",
    ),
    wide: bool = wide_option(),
    workers: int = Option(
        None,
        "--workers",
        "-j",
        help="Worker processes (local engine; default: one per core), or Ray tasks in flight.",
    ),
    engine: Engine = Option(
        None,
        "--engine",
        help="local: a process pool on this machine; ray: Ray tasks (default: ray with "
        "--ray-address, else local).",
        show_default=False,
    ),
    ray_address: str = Option(
        None,
        "--ray-address",
        help="Ray cluster to run on (auto, ray://HEAD:10001); default: a local Ray instance.",
    ),
    fail_on: list[str] = Option(
        None,
        "--fail-on",
        help="Exit 3 when a row trips FIELD OP VALUE, e.g. idle_pct>20 (repeatable).",
    ),
    cache_dir: str = Option(
        None,
        "--cache-dir",
        help="Cache of decoded tables and results (default: $TPUPERF_CACHE_DIR, else "
        "~/.cache/tpuperf).",
    ),
    no_cache: bool = Option(False, "--no-cache", help="Neither read nor write the cache."),
    per_run: bool = Option(
        False, "--per-run", help="One row per run directory (its hosts together), not per host."
    ),
) -> None:
    """Scan many profiles: one row per host profile (or per run) with step time, idle,
    exposed collectives, FLOPs utilization and the top recommendation.

    A directory means every profile under it (all runs of all logdirs). A profile that cannot
    be read becomes a row with its `error`; the scan goes on. Rows come in a fixed order and
    stream to the output as they finish; `--out` never leaves half a file. Results are cached
    by content, so a re-scan of unchanged profiles is fast. Exit 0, 3 when a `--fail-on` gate
    trips (the rows are listed on stderr), 4 when no profile was found.

    Example:

        tpuperf scan 'gs://my-bucket/jobs/**/*.xplane.pb' --out fleet.parquet

        tpuperf scan logs/ -f ndjson --fail-on 'step_time_ms.median>120'

        tpuperf scan logs/ --per-run --engine ray --ray-address auto -o runs.csv
    """
    from tpuperf import output
    from tpuperf import scanning as scan_mod
    from tpuperf.errors import BadInput, GateFailed, UsageError

    if cache_dir is not None and no_cache:
        raise UsageError("--cache-dir and --no-cache contradict each other; pass one")
    if workers is not None and workers < 1:
        raise UsageError("--workers must be 1 or more")
    gates = [scan_mod.parse_gate(text) for text in fail_on or []]
    chosen = output.choose_format(format, out, FORMATS)
    chosen_engine = engine or (Engine.ray if ray_address else Engine.local)
    if ray_address and chosen_engine is not Engine.ray:
        raise UsageError("--ray-address needs --engine ray")

    targets, notices = scan_mod.discover(paths, per_run=per_run)
    for notice in notices:
        output.note(notice)
    if not targets:
        raise BadInput(scan_mod.no_profiles_message(list(paths), notices))
    options = scan_mod.make_options(cache_dir=cache_dir, cache=not no_cache)

    stats = scan_mod.ScanStats()
    tripped: list[tuple[Any, dict[str, Any]]] = []
    unknown: dict[int, int] = {}  # gate index -> profiles where its field has no value
    started = time.perf_counter()
    # The progress bar shares the terminal with the rows only when they go to a file; a table
    # is drawn once the bar is gone.
    streams_to_terminal = out is None and chosen is not Format.table and sys.stdout.isatty()
    err = output.console(stderr=True)
    collected: list[dict[str, Any]] = []
    with _progress(err, len(targets), show=not streams_to_terminal) as advance:
        rows = scan_mod.iter_rows(
            targets,
            options,
            engine=chosen_engine.value,
            workers=workers,
            ray_address=ray_address,
            progress=advance,
            stats=stats,
        )
        with contextlib.closing(rows):
            gated = _gate(rows, gates, tripped, unknown)
            if chosen is Format.table:
                collected = list(gated)
            else:
                output.emit(_view(gated), chosen, out, wide=wide)
    if chosen is Format.table:
        output.emit(_view(collected), chosen, out, wide=wide)
    seconds = time.perf_counter() - started
    output.say(
        f"scanned {stats.total} profile{'s' if stats.total != 1 else ''} in {seconds:.1f} s: "
        f"{stats.from_cache} from the cache, {stats.errors} with errors"
    )
    for index, count in sorted(unknown.items()):
        gate = gates[index]
        output.note(
            f"gate {gate.text} not evaluated on {count} profile{'s' if count != 1 else ''}: "
            f"{gate.field} is unknown there"
        )
    if tripped:
        _report_trips(gates, tripped)
        raise GateFailed(
            f"{len({id(row) for _, row in tripped})} of {stats.total} profiles tripped "
            "--fail-on (listed above)"
        )


def _view(rows: Any) -> Any:
    """The rows (an iterator: they stream to ndjson, CSV and Parquet as they come)."""
    from tpuperf import output
    from tpuperf.render.listings import render_scan
    from tpuperf.scanning import ROW_FIELDS

    return output.View(
        rows=lambda: output.Rows(list(ROW_FIELDS), rows, _arrow_schema),
        table=lambda console, wide: render_scan(list(rows), console, wide=wide),
    )


def _arrow_schema() -> Any:
    """The Parquet columns: ROW_FIELDS' names and (pandas) dtypes, so `pd.read_parquet` gives
    back what `tpuperf.scan()` returns."""
    import pyarrow as pa

    from tpuperf.scanning import to_frame

    return pa.Schema.from_pandas(to_frame([]), preserve_index=False)


@contextlib.contextmanager
def _progress(console: Any, total: int, show: bool = True) -> Any:
    """A progress bar on stderr when it is a terminal; a callback ``advance(done, total)``."""
    if not show or not console.is_terminal:
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "scanning",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("scan", total=total)
        yield lambda done, total: bar.update(task, completed=done)


def _gate(
    rows: Any,
    gates: list[Any],
    tripped: list[tuple[Any, dict[str, Any]]],
    unknown: dict[int, int],
) -> Any:
    """Pass rows through, keeping those that trip a gate (only those are held in memory) and
    counting, per gate, the rows where its value is unknown (a gate there passes: say so)."""
    for row in rows:
        for index, gate in enumerate(gates):
            if not gate.known(row):
                unknown[index] = unknown.get(index, 0) + 1
            elif gate.trips(row):
                tripped.append((gate, row))
        yield row


def _report_trips(gates: list[Any], tripped: list[tuple[Any, dict[str, Any]]]) -> None:
    from tpuperf.output import say

    for gate in gates:
        rows = [row for g, row in tripped if g is gate]
        if not rows:
            continue
        say(
            f"gate {gate.text}: tripped by {len(rows)} profile{'s' if len(rows) != 1 else ''}",
            [f"{row['path']}: {gate.field}={_plain(row[gate.field])}" for row in rows],
        )


def _plain(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else str(value)
