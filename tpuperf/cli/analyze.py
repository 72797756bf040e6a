"""``tpuperf analyze``: what to fix first in a profile, and how much it buys."""

from __future__ import annotations

import typer

from tpuperf.cli._common import profile_argument
from tpuperf.output import Format, format_option, output_option, wide_option

FORMATS = (Format.table, Format.json, Format.md)


def command(
    profile: str = profile_argument(),
    format: Format | None = format_option(*FORMATS),
    output: str | None = output_option(),
    wide: bool = wide_option(),
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

    The report opens with a summary (chip, devices, steps, step time and the compute /
    exposed collective / idle split), then the top ops, then the recommendations ranked by
    the time they would save per step.

    Example:

        tpuperf analyze /tmp/logdir --format json -o report.json

        tpuperf analyze run.xplane.pb --analyzer collectives --steps 5:20
    """
    from tpuperf import output as out
    from tpuperf.analyzers.base import AnalysisConfig
    from tpuperf.errors import UsageError
    from tpuperf.profile import load
    from tpuperf.report import analyze

    fmt = out.choose_format(format, output, FORMATS)
    if warmup < 0:
        raise UsageError("--warmup must be 0 or more")
    if top < 0:
        raise UsageError("--top must be 0 or more")
    for flag, value in (("--peak-tflops", peak_tflops), ("--peak-hbm-gbps", peak_hbm_gbps)):
        if value is not None and not value > 0:
            raise UsageError(f"{flag} must be a positive number")
    config = AnalysisConfig(
        warmup_steps=warmup, peak_tflops=peak_tflops, peak_hbm_gbps=peak_hbm_gbps, top_ops=top
    )
    loaded = load(profile)
    report = analyze(loaded, config=config, analyzers=analyzer or None, steps=steps, host=host)
    for name, error in report.errors.items():
        out.say(f"analyzer {name} failed: {error}")
    from tpuperf.render.markdown import render_markdown
    from tpuperf.render.terminal import render_report

    view = out.View(
        document=report.to_dict,
        markdown=lambda: render_markdown(report),
        table=lambda console, wide: render_report(report, console, wide=wide),
    )
    out.emit(view, fmt, output, wide=wide)
