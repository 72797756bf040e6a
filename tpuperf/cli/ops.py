from __future__ import annotations

import typer

from tpuperf.cli._common import PROFILE_ARGUMENT_HELP


def command(
    profile: str = typer.Argument(..., help=PROFILE_ARGUMENT_HELP),
    by: str = typer.Option(
        "program_op",
        "--by",
        help="program_op (each program's ops apart, as XProf's hlo_stats), op (same-named ops "
        "of all programs together), category, module or program; or where the model's code "
        "made them: scope (JAX name scopes, self and total), source (file:line) or pass "
        "(forward, backward, optimizer).",
    ),
    depth: int = typer.Option(
        None, "--depth", help="With --by scope: scopes down to this level (default: all)."
    ),
    per_device: bool = typer.Option(
        False, "--per-device", help="One table per device instead of all together."
    ),
    top: int = typer.Option(
        None, "--top", "-n", help="Only the first N rows (per device with --per-device)."
    ),
    sort: str = typer.Option(
        "total_time",
        "--sort",
        help="total_time, self_time, occurrences, avg_time, flops, bytes_accessed or name.",
    ),
    format: str = typer.Option("table", "--format", "-f", help="table, json, csv or parquet."),
    output: str = typer.Option(
        None, "--output", "-o", help="Write to this file (needed for parquet)."
    ),
    host: str = typer.Option(None, "--host", help="Only this host of a run."),
    run: str = typer.Option(None, "--run", help="This run of a logdir (default: the latest)."),
) -> None:
    """The op table: time, count, FLOPs and bytes per op (or category, module, program).

    Example:

        tpuperf ops profile.xplane.pb --top 20

        tpuperf ops run_dir/ --by category --per-device --format csv -o ops.csv

        tpuperf ops run_dir/ --by scope --depth 3
    """
    from tpuperf.cli._common import check_format, emit_text, load_profile, stdout_console
    from tpuperf.errors import UsageError
    from tpuperf.opstats import SCOPE_GROUPINGS, aggregate_table

    check_format(format, ("table", "json", "csv", "parquet"))
    if depth is not None and by != "scope":
        raise UsageError("--depth goes with --by scope")
    if format == "parquet" and not output:
        raise UsageError("--format parquet writes a file: add -o FILE.parquet")
    if top is not None and top < 1:
        raise UsageError("--top must be at least 1")
    loaded = load_profile(profile, host, run)
    table = aggregate_table(loaded, by=by, per_device=per_device, sort=sort, top=top, depth=depth)
    if by in SCOPE_GROUPINGS:
        from tpuperf.scopes import no_scopes_message, scopes

        if not scopes(loaded).has_scopes:
            typer.echo(f"tpuperf: {no_scopes_message(loaded.source)}", err=True)
    if by == "op" and (table.array("programs") > 1).any():
        merged = int((table.array("programs") > 1).sum())
        typer.echo(
            f"tpuperf: --by op merges same-named ops of different programs ({merged} row(s) "
            "merge several); --by program_op keeps them apart",
            err=True,
        )
    if format == "json":
        from tpuperf.jsonout import dumps

        document = {
            "source": loaded.source,
            "by": by,
            "per_device": per_device,
            "rows": table.records(),
        }
        emit_text(dumps(document), output)
    elif format == "csv":
        from tpuperf.jsonout import csv_text

        emit_text(csv_text(table), output)
    elif format == "parquet":
        from tpuperf.jsonout import write_atomic, write_parquet

        write_atomic(output, lambda handle: write_parquet(table, handle))
        typer.echo(f"wrote {output}", err=True)
    else:
        from tpuperf.render.tables import render_ops, render_scope_ops

        render = render_scope_ops if by in SCOPE_GROUPINGS else render_ops
        if by in SCOPE_GROUPINGS and not scopes(loaded).has_scopes:
            return  # said in one line above; an empty table adds nothing
        if output:
            import io

            from rich.console import Console

            buffer = io.StringIO()
            render(table, by, Console(file=buffer, width=160))
            emit_text(buffer.getvalue(), output)
        else:
            render(table, by, stdout_console())
