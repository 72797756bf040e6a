"""``tpuperf analyzers``: list the analyzers ``tpuperf analyze`` can run."""

from __future__ import annotations

import json
import sys

import typer


def command(
    format: str = typer.Option("table", "--format", "-f", help="table or json."),
) -> None:
    """List the analyzers: built-in ones and those plug-ins add (entry point group
    ``tpuperf.analyzers``), with what each reads.

    Example:

        tpuperf analyzers

        tpuperf analyze run.xplane.pb --analyzer idle --analyzer steps
    """
    from tpuperf.analyzers import base
    from tpuperf.errors import UsageError

    if format not in ("table", "json"):
        raise UsageError(f"--format {format!r}: expected table or json")
    registry = base.available()
    builtin = {name for name, _ in base.BUILTIN}
    rows = [
        {
            "name": name,
            "summary": a.summary,
            "origin": "built-in" if name in builtin else "plug-in",
            "requires": {t: list(c) for t, c in a.requires.items()},
        }
        for name, a in registry.items()
    ]
    broken = base.plugin_errors()
    for name, error in broken.items():
        typer.echo(f"tpuperf: plug-in analyzer {name} failed to load: {error}", err=True)
    if format == "json":
        sys.stdout.write(json.dumps({"schema_version": 1, "analyzers": rows}, indent=2) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table()
    table.add_column("analyzer")
    table.add_column("origin")
    table.add_column("summary")
    for row in rows:
        table.add_row(row["name"], row["origin"], row["summary"])
    Console(file=sys.stdout).print(table)
