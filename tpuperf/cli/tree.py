from __future__ import annotations

import typer

from tpuperf.cli._common import PROFILE_ARGUMENT_HELP


def command(
    profile: str = typer.Argument(..., help=PROFILE_ARGUMENT_HELP),
    depth: int = typer.Option(
        None, "--depth", help="Show scopes down to this level (op leaves count one more)."
    ),
    min_pct: float = typer.Option(
        1.0, "--min-pct", help="Hide nodes under this share of all op time, in percent."
    ),
    format: str = typer.Option("table", "--format", "-f", help="table or json."),
    output: str = typer.Option(
        None, "--output", "-o", help="Write to this file instead of stdout."
    ),
    host: str = typer.Option(None, "--host", help="Only this host of a run."),
    run: str = typer.Option(None, "--run", help="This run of a logdir (default: the latest)."),
) -> None:
    """The scope tree: op time per JAX name scope (layer) of the model's code, per step.

    Each node shows its time per step per device, its share of all op time and a bar split
    into forward, backward, optimizer and other (ops without a scope); primitives are the
    leaves, with the source line that has most of their time.

    Example:

        tpuperf tree run_dir/ --depth 3

        tpuperf tree profile.xplane.pb --min-pct 0 --format json -o tree.json
    """
    from tpuperf.cli._common import check_format, emit_text, load_profile, stdout_console
    from tpuperf.errors import UsageError
    from tpuperf.scopes import no_scopes_message, tree_report

    check_format(format, ("table", "json"))
    if depth is not None and depth < 1:
        raise UsageError("--depth must be at least 1")
    if not min_pct >= 0:
        raise UsageError("--min-pct must be 0 or more")
    loaded = load_profile(profile, host, run)
    document = tree_report(loaded, depth, min_pct)
    if format == "json":
        from tpuperf.jsonout import dumps

        emit_text(dumps(document), output)
        return
    if not document["scoped"]:
        typer.echo(f"tpuperf: {no_scopes_message(loaded.source)}", err=True)
        return
    from tpuperf.render.tree import render_tree

    if output:
        import io

        from rich.console import Console

        buffer = io.StringIO()
        render_tree(document, Console(file=buffer, width=100, color_system=None))
        emit_text(buffer.getvalue(), output)
    else:
        render_tree(document, stdout_console())
