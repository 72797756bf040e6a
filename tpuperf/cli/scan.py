"""``tpuperf scan``: analyse many profiles, one row each, with gates for CI."""

from __future__ import annotations

import contextlib
import sys
import time
from enum import Enum
from typing import Any, BinaryIO

import typer


class Format(str, Enum):
    ndjson = "ndjson"
    csv = "csv"
    parquet = "parquet"
    table = "table"


class Engine(str, Enum):
    local = "local"
    ray = "ray"


_SUFFIX_FORMATS = {
    ".ndjson": Format.ndjson,
    ".jsonl": Format.ndjson,
    ".csv": Format.csv,
    ".parquet": Format.parquet,
}

# Rows per Parquet row group when streaming rows to a file.
_PARQUET_BATCH = 512


def command(
    paths: list[str] = typer.Argument(
        ...,
        help="Profile files, run directories, logdirs or globs ('logs/**/*.xplane.pb'); "
        "local or gs://.",
        show_default=False,
    ),
    out: str = typer.Option(
        None,
        "--out",
        "--output",
        "-o",
        help="Write the rows to FILE (whole or not at all); a path or a URL such as gs://.",
    ),
    format: Format = typer.Option(
        None,
        "--format",
        "-f",
        help="Output format (default: from the --out suffix: .ndjson/.jsonl, .csv, .parquet; "
        "else table).",
        show_default=False,
    ),
    workers: int = typer.Option(
        None,
        "--workers",
        "-j",
        help="Worker processes (local engine; default: one per core), or Ray tasks in flight.",
    ),
    engine: Engine = typer.Option(
        None,
        "--engine",
        help="local: a process pool on this machine; ray: Ray tasks (default: ray with "
        "--ray-address, else local).",
        show_default=False,
    ),
    ray_address: str = typer.Option(
        None,
        "--ray-address",
        help="Ray cluster to run on (auto, ray://HEAD:10001); default: a local Ray instance.",
    ),
    fail_on: list[str] = typer.Option(
        None,
        "--fail-on",
        help="Exit 3 when a row trips FIELD OP VALUE, e.g. idle_pct>20 (repeatable).",
    ),
    cache_dir: str = typer.Option(
        None,
        "--cache-dir",
        help="Cache of decoded tables and results (default: $TPUPERF_CACHE_DIR, else "
        "~/.cache/tpuperf).",
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the cache."),
    per_run: bool = typer.Option(
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

        tpuperf scan logs/ -f ndjson --fail-on 'idle_pct>20' --fail-on 'step_time_ms.median>120'

        tpuperf scan logs/ --per-run --engine ray --ray-address auto -o runs.csv
    """
    from tpuperf import scanning as scan_mod
    from tpuperf.cli._common import stderr_console
    from tpuperf.errors import BadInput, GateFailed, UsageError

    if cache_dir is not None and no_cache:
        raise UsageError("--cache-dir and --no-cache contradict each other; pass one")
    if workers is not None and workers < 1:
        raise UsageError("--workers must be 1 or more")
    gates = [scan_mod.parse_gate(text) for text in fail_on or []]
    chosen = format or _format_from_suffix(out)
    if chosen is Format.parquet and out is None:
        raise UsageError("--format parquet writes a file: add --out FILE.parquet")
    if out is not None and "://" in out:
        _check_url(out)
    chosen_engine = engine or (Engine.ray if ray_address else Engine.local)
    if ray_address and chosen_engine is not Engine.ray:
        raise UsageError("--ray-address needs --engine ray")

    from rich.markup import escape

    console = stderr_console()
    targets, notices = scan_mod.discover(paths, per_run=per_run)
    for notice in notices:
        console.print(f"[yellow]note:[/] {escape(notice)}", highlight=False, soft_wrap=True)
    if not targets:
        raise BadInput(scan_mod.no_profiles_message(list(paths), notices))
    options = scan_mod.make_options(cache_dir=cache_dir, cache=not no_cache)

    stats = scan_mod.ScanStats()
    tripped: list[tuple[Any, dict[str, Any]]] = []
    started = time.perf_counter()
    with _progress(console, len(targets)) as advance:
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
            gated = _gate(rows, gates, tripped)
            if chosen is Format.table:
                _write_table(list(gated), out)
            elif out is None:
                sys.stdout.flush()
                _write_stream(gated, chosen, sys.stdout.buffer)
            else:
                _write_file(out, lambda handle: _write_stream(gated, chosen, handle))
    seconds = time.perf_counter() - started
    console.print(
        f"scanned {stats.total} profile{'s' if stats.total != 1 else ''} in {seconds:.1f} s: "
        f"{stats.from_cache} from the cache, {stats.errors} with errors"
        + (f"; wrote {out}" if out else ""),
        highlight=False,
        soft_wrap=True,
    )
    if tripped:
        _report_trips(console, gates, tripped)
        raise GateFailed(
            f"{len({id(row) for _, row in tripped})} of {stats.total} profiles tripped "
            "--fail-on (listed above)"
        )


def _write_file(out: str, write: Any) -> None:
    """Write ``out`` (a path, or an fsspec URL such as gs://) through ``write(handle)`` so that
    it appears whole or not at all."""
    from tpuperf.jsonout import write_atomic

    if "://" not in out:
        write_atomic(out, write)
        return
    import os
    import tempfile

    import fsspec

    # An object store has no rename, but an object appears only once its upload completes:
    # the rows go to a local temporary file, uploaded at the end.
    with tempfile.TemporaryDirectory(prefix="tpuperf-scan-") as temp:
        local = os.path.join(temp, "rows")
        write_atomic(local, write)
        fs, path = fsspec.core.url_to_fs(out)
        fs.put_file(local, path)


def _check_url(out: str) -> None:
    import fsspec

    from tpuperf.errors import UsageError

    try:
        fsspec.core.url_to_fs(out)
    except (ImportError, ValueError) as exc:
        hint = " (install tpuperf[gcs] for gs:// paths)" if out.startswith("gs://") else ""
        raise UsageError(f"--out {out}: cannot write there: {exc}{hint}") from None


def _format_from_suffix(out: str | None) -> Format:
    if out is None:
        return Format.table
    lowered = out.lower()
    for suffix, fmt in _SUFFIX_FORMATS.items():
        if lowered.endswith(suffix):
            return fmt
    return Format.table


@contextlib.contextmanager
def _progress(console: Any, total: int) -> Any:
    """A progress bar on stderr when it is a terminal; a callback ``advance(done, total)``."""
    if not console.is_terminal:
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


def _gate(rows: Any, gates: list[Any], tripped: list[tuple[Any, dict[str, Any]]]) -> Any:
    """Pass rows through, keeping those that trip a gate (only those are held in memory)."""
    for row in rows:
        for gate in gates:
            if gate.trips(row):
                tripped.append((gate, row))
        yield row


def _report_trips(
    console: Any, gates: list[Any], tripped: list[tuple[Any, dict[str, Any]]]
) -> None:
    for gate in gates:
        rows = [row for g, row in tripped if g is gate]
        if not rows:
            continue
        console.print(
            f"[red]gate {gate.text}[/]: tripped by {len(rows)} profile"
            f"{'s' if len(rows) != 1 else ''}",
            highlight=False,
            soft_wrap=True,
        )
        for row in rows:
            console.print(
                f"  {row['path']}: {gate.field}={_plain(row[gate.field])}",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )


def _plain(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else str(value)


def _write_stream(rows: Any, fmt: Format, handle: BinaryIO) -> None:
    if fmt is Format.parquet:
        _write_parquet(rows, handle)
        return
    if fmt is Format.csv:
        from tpuperf.scanning import ROW_FIELDS

        handle.write(_csv_line(list(ROW_FIELDS)))
    for row in rows:
        handle.write(_ndjson_line(row) if fmt is Format.ndjson else _csv_line(list(row.values())))
        handle.flush()


def _ndjson_line(row: dict[str, Any]) -> bytes:
    import json

    from tpuperf.jsonout import clean

    return (json.dumps(clean(row), allow_nan=False, separators=(",", ":")) + "\n").encode()


def _csv_line(values: list[Any]) -> bytes:
    import csv
    import io
    import math

    buffer = io.StringIO()
    cells = [
        ""
        if v is None or (isinstance(v, float) and not math.isfinite(v))
        else repr(v)
        if isinstance(v, float)
        else v
        for v in values
    ]
    csv.writer(buffer, lineterminator="\n").writerow(cells)
    return buffer.getvalue().encode()


def _write_parquet(rows: Any, handle: BinaryIO) -> None:
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tpuperf.scanning import SCHEMA_VERSION, to_frame

    schema = pa.Schema.from_pandas(to_frame([]), preserve_index=False)
    schema = schema.with_metadata(
        {**(schema.metadata or {}), b"tpuperf": json.dumps({"schema_version": SCHEMA_VERSION})}
    )
    with pq.ParquetWriter(handle, schema) as writer:
        batch: list[dict[str, Any]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= _PARQUET_BATCH:
                writer.write_table(_arrow(batch, schema, to_frame))
                batch = []
        if batch:
            writer.write_table(_arrow(batch, schema, to_frame))


def _arrow(batch: list[dict[str, Any]], schema: Any, to_frame: Any) -> Any:
    import pyarrow as pa

    return pa.Table.from_pandas(to_frame(batch), schema=schema, preserve_index=False)


# Columns of the terminal table: (row field, header); "profile" is run/host. Errors are listed
# under the table, where they have room.
_TABLE_COLUMNS = (
    ("profile", "profile"),
    ("chip", "chip"),
    ("step_time_ms.median", "step ms"),
    ("idle_pct", "idle %"),
    ("exposed_collective_pct", "coll %"),
    ("flops_utilization_pct", "flops %"),
    ("top_recommendation.kind", "top recommendation"),
    ("top_recommendation.est_savings_pct", "saves %"),
)  # devices, steps, p90 and the rest are in the ndjson, CSV and Parquet rows
_TEXT_COLUMNS = ("profile", "chip", "top_recommendation.kind")


def _write_table(rows: list[dict[str, Any]], out: str | None) -> None:
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from tpuperf.cli._common import stdout_console

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for field, header in _TABLE_COLUMNS:
        if field == "profile":  # the one column that wraps, so a narrow terminal loses nothing
            table.add_column(header, overflow="fold")
        elif field in _TEXT_COLUMNS:
            table.add_column(header, overflow="ellipsis", no_wrap=True)
        else:
            table.add_column(header, justify="right", no_wrap=True, min_width=len(header))
    errors = []
    for row in rows:
        cells = {**row, "profile": "/".join(p for p in (row["run"], row["host"]) if p)}
        if row["error"]:
            errors.append(f"{cells['profile']}: {row['error']}")
            cells["top_recommendation.kind"] = "error (below)"
        table.add_row(*(Text(_cell(cells[field])) for field, _ in _TABLE_COLUMNS))
    console = stdout_console() if out is None else None
    buffer = io.StringIO()
    if console is None:
        console = Console(file=buffer, width=160, color_system=None)
    console.print(table)
    if errors:
        console.print("\nerrors:", highlight=False)
        for line in errors:
            console.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
    if out is not None:
        data = buffer.getvalue().encode()

        def write(handle: BinaryIO) -> None:
            handle.write(data)

        _write_file(out, write)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return str(value)
