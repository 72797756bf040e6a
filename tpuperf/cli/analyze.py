"""``tpuperf analyze``: what to fix first in a profile, and how much it buys."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from tpuperf.cli._common import (
    analyzer_option,
    format_option,
    host_option,
    no_cache_option,
    output_option,
    peak_options,
    profile_argument,
    run_option,
    steps_option,
    warmup_option,
    wide_option,
)
from tpuperf.output import Format

if TYPE_CHECKING:
    from rich.console import Console

FORMATS = (Format.table, Format.json, Format.md, Format.html)


PEAK_TFLOPS, PEAK_HBM_GBPS = peak_options()


def command(
    profile: str = profile_argument(),
    format: Format | None = format_option(*FORMATS),
    output: str | None = output_option(),
    wide: bool = wide_option(),
    analyzer: list[str] = analyzer_option(),
    steps: str = steps_option(),
    warmup: int = warmup_option(),
    host: str = host_option("Analyse only this host of a multi-host run."),
    run: str = run_option(),
    peak_tflops: float = PEAK_TFLOPS,
    peak_hbm_gbps: float = PEAK_HBM_GBPS,
    top: int = typer.Option(10, "--top", help="How many top ops to show."),
    no_cache: bool = no_cache_option(),
) -> None:
    """Analyze a profile: step time, idle, collectives, roofline, and ranked recommendations.

    The report opens with a summary (chip, devices, steps, step time and the compute /
    exposed collective / idle split), then the top ops, then the recommendations ranked by
    the time they would save per step.

    Example:

        tpuperf analyze /tmp/logdir --format json -o report.json

        tpuperf analyze run.xplane.pb --analyzer collectives --steps 5:20

        tpuperf analyze /tmp/logdir --format html -o report.html
    """
    from tpuperf import output as out
    from tpuperf.cli._common import analyze_profile, html_page, load_profile

    fmt = out.choose_format(format, output, FORMATS)
    # The profile's notes are in the report, not on stderr.
    loaded = load_profile(profile, None, run, notices=False, cache=not no_cache)
    report = analyze_profile(
        loaded,
        analyzers=analyzer or None,
        steps=steps,
        warmup=warmup,
        host=host,
        peak_tflops=peak_tflops,
        peak_hbm_gbps=peak_hbm_gbps,
        top=top,
    )

    def markdown() -> str:
        from tpuperf.render.markdown import render_markdown

        return render_markdown(report)

    def table(console: Console, wide: bool) -> None:
        from tpuperf.render.terminal import render_report

        render_report(report, console, wide=wide)

    # Renderers are imported for the format asked for only (rich is not needed for JSON).
    view = out.View(
        document=report.to_dict,
        markdown=markdown,
        html=lambda: html_page(report),
        table=table,
    )
    out.emit(view, fmt, output, wide=wide)
