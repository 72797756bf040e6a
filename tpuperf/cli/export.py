"""``tpuperf export``: a profile's timeline as a trace for ui.perfetto.dev."""

from __future__ import annotations

import typer

from tpuperf.cli._common import profile_argument


def command(
    profile: str = profile_argument(),
    format: str = typer.Option(
        "perfetto", "--format", "-f", metavar="FORMAT", help="perfetto (a .pftrace file)."
    ),
    output: str = typer.Option(
        None, "--output", "-o", help="The trace file to write (e.g. trace.pftrace); required."
    ),
    host: str = typer.Option(None, "--host", help="Only this host of a run (default: all)."),
    run: str = typer.Option(None, "--run", help="This run of a logdir (default: the latest)."),
    align: str = typer.Option(
        "clock",
        "--align",
        help="clock: hosts as their clocks say; steps: shift hosts so their steps line up.",
    ),
) -> None:
    """Export every event of a profile as a Perfetto trace: all hosts of a run on one
    timeline, one track per device and line (steps, module executions, ops, async windows).

    The trace has no event cap and is written as a stream; open it at
    https://ui.perfetto.dev (Open trace file). Needs the perfetto package (the `report`
    extra).

    Example:

        tpuperf export /tmp/logdir --format perfetto -o trace.pftrace

        tpuperf export logdir/plugins/profile/run1/ --align steps -o run1.pftrace
    """
    from tpuperf.cli._common import load_profile
    from tpuperf.errors import UsageError
    from tpuperf.export import export_perfetto

    if format != "perfetto":
        raise UsageError(f"--format {format}: choose perfetto")
    if not output:
        raise UsageError("-o/--output: name the trace file to write, e.g. -o trace.pftrace")
    counts = export_perfetto(load_profile(profile, host, run), output, align=align)
    typer.echo(
        f"tpuperf: wrote {output}: {counts.slices:,} slices on {counts.tracks:,} tracks; "
        "open it at https://ui.perfetto.dev",
        err=True,
    )
