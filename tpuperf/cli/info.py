from __future__ import annotations

import typer

from tpuperf.cli._common import PROFILE_ARGUMENT_HELP


def command(
    profile: str = typer.Argument(..., help=PROFILE_ARGUMENT_HELP),
    format: str = typer.Option("table", "--format", "-f", help="table or json."),
    host: str = typer.Option(None, "--host", help="Only this host of a run."),
    run: str = typer.Option(None, "--run", help="This run of a logdir (default: the latest)."),
    output: str = typer.Option(
        None, "--output", "-o", help="Write to this file instead of stdout."
    ),
) -> None:
    """What a profile holds: hosts, devices (kind, chip, peaks), lines, time span, steps.

    Example:

        tpuperf info logdir/plugins/profile/2026_11_30_10_00_00/

        tpuperf info host0.xplane.pb --format json | jq '.devices[].chip'
    """
    from tpuperf.cli._common import check_format, emit_text, load_profile, stdout_console
    from tpuperf.inspect import describe

    check_format(format, ("table", "json"))
    info = describe(load_profile(profile, host, run))
    if format == "json":
        from tpuperf.jsonout import dumps

        emit_text(dumps(info), output)
        return
    from tpuperf.render.tables import render_info

    if output:
        import io

        from rich.console import Console

        buffer = io.StringIO()
        render_info(info, Console(file=buffer, width=120))
        emit_text(buffer.getvalue(), output)
    else:
        render_info(info, stdout_console())
