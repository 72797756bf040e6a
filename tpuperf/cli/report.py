"""``tpuperf report``: the analysis as one self-contained HTML page."""

from __future__ import annotations

import typer

from tpuperf.cli._common import (
    analyzer_option,
    host_option,
    no_cache_option,
    peak_options,
    profile_argument,
    run_option,
    steps_option,
    warmup_option,
)
from tpuperf.output import Format

PEAK_TFLOPS, PEAK_HBM_GBPS = peak_options()


def command(
    profile: str = profile_argument(),
    output: str = typer.Option(
        "report.html", "--output", "-o", help="The HTML file to write (default report.html)."
    ),
    analyzer: list[str] = analyzer_option(),
    steps: str = steps_option(),
    warmup: int = warmup_option(),
    host: str = host_option("Analyse only this host of a multi-host run."),
    run: str = run_option(),
    peak_tflops: float = PEAK_TFLOPS,
    peak_hbm_gbps: float = PEAK_HBM_GBPS,
    top: int = typer.Option(25, "--top", help="How many top ops the table lists."),
    no_cache: bool = no_cache_option(),
) -> None:
    """Write the analysis as one self-contained HTML file: summary, per-step and per-device
    charts, a roofline of every op, ranked recommendations and a sortable top-ops table.

    Scripts, styles and data are inside the file and it makes no network request, so it
    opens offline and can be attached to a bug.

    Example:

        tpuperf report /tmp/logdir -o report.html

        tpuperf report gpu.xplane.pb --peak-tflops 989 -o gpu.html
    """
    from tpuperf import output as out
    from tpuperf.cli._common import analyze_profile, html_page, load_profile

    out.choose_format(None, output, (Format.html,))  # -o x.json is refused, not HTML in it
    loaded = load_profile(profile, None, run, cache=not no_cache)
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
    out.emit(out.View(html=lambda: html_page(report)), Format.html, output)
