"""``tpuperf analyze``: what to fix first in a profile, and how much it buys."""

from __future__ import annotations

import io
import sys

import typer

FORMATS = ("table", "json", "md", "html")


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so readers never see
    half a report."""
    from tpuperf.jsonout import write_text_atomic

    write_text_atomic(path, text)


def command(
    profile: str = typer.Argument(..., help="A .xplane.pb file, a run directory or a logdir."),
    format: str = typer.Option("table", "--format", "-f", help="table, json, md or html."),
    output: str = typer.Option(None, "--output", "-o", help="Write to FILE instead of stdout."),
    analyzer: list[str] = typer.Option(
        None,
        "--analyzer",
        "-a",
        help="Run only this analyzer (repeatable; see `tpuperf analyzers`).",
    ),
    steps: str = typer.Option(
        None, "--steps", help="Analyse step numbers A <= n < B (A:B, either side optional)."
    ),
    warmup: int = typer.Option(
        1, "--warmup", help="Leading steps to leave out as warm-up (ignored with --steps)."
    ),
    host: str = typer.Option(None, "--host", help="Analyse only this host of a multi-host run."),
    peak_tflops: float = typer.Option(
        None,
        "--peak-tflops",
        help="Dense bf16 peak TFLOP/s, used when the profile and chip table do not know it.",
    ),
    peak_hbm_gbps: float = typer.Option(
        None,
        "--peak-hbm-gbps",
        help="HBM bandwidth in GB/s, used when the profile and chip table do not know it.",
    ),
    top: int = typer.Option(10, "--top", help="How many top ops to show."),
) -> None:
    """Analyze a profile: step time, idle, collectives, roofline, and ranked recommendations.

    The report opens with a summary (chip, devices, steps, step time and the
    compute / exposed collective / idle split), then the top ops, then the
    recommendations ranked by the time they would save per step.

    Example:

        tpuperf analyze /tmp/logdir --format json -o report.json

        tpuperf analyze run.xplane.pb --analyzer collectives --steps 5:20

        tpuperf analyze /tmp/logdir --format html -o report.html
    """
    from tpuperf.analyzers.base import AnalysisConfig
    from tpuperf.errors import UsageError
    from tpuperf.profile import load
    from tpuperf.report import analyze, parse_steps

    if format not in FORMATS:
        raise UsageError(f"--format {format!r}: expected one of {', '.join(FORMATS)}")
    if warmup < 0:
        raise UsageError("--warmup must be 0 or more")
    if top < 0:
        raise UsageError("--top must be 0 or more")
    for flag, value in (("--peak-tflops", peak_tflops), ("--peak-hbm-gbps", peak_hbm_gbps)):
        if value is not None and not value > 0:
            raise UsageError(f"{flag} must be a positive number")
    config = AnalysisConfig(
        warmup_steps=warmup,
        steps=parse_steps(steps) if steps is not None else None,
        host=host,
        peak_tflops=peak_tflops,
        peak_hbm_gbps=peak_hbm_gbps,
        top_ops=top,
    )
    loaded = load(profile)
    report = analyze(loaded, config=config, analyzers=analyzer or None)
    for name, error in report.errors.items():
        typer.echo(f"tpuperf: analyzer {name} failed: {error}", err=True)

    if format == "json":
        text = report.to_json() + "\n"
    elif format == "html":
        from tpuperf.render.html import render_html
        from tpuperf.timeline import build_timeline

        # The timeline the analyzers read: built once per (profile, config), found again here.
        text = render_html(report, build_timeline(loaded, config))
    elif format == "md":
        from tpuperf.render.markdown import render_markdown

        text = render_markdown(report) + "\n"
    else:
        from rich.console import Console

        from tpuperf.render.terminal import render_report

        if output is None:
            render_report(report, Console(file=sys.stdout))
            return
        # A file gets plain text at a fixed width: no colour codes, no terminal to size from.
        buffer = io.StringIO()
        render_report(report, Console(file=buffer, width=100, color_system=None))
        text = buffer.getvalue()
    if output is None:
        sys.stdout.write(text)
    else:
        write_atomically(output, text)
        typer.echo(f"tpuperf: wrote {output}", err=True)
