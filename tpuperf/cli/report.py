"""``tpuperf report``: the analysis as one self-contained HTML page."""

from __future__ import annotations

from typing import Any

import typer

from tpuperf.cli._common import PROFILE_ARGUMENT_HELP


def analysis(
    profile: Any,
    *,
    analyzer: list[str] | None = None,
    steps: str | None = None,
    warmup: int = 1,
    host: str | None = None,
    peak_tflops: float | None = None,
    peak_hbm_gbps: float | None = None,
    top: int = 10,
) -> tuple[Any, Any]:
    """Check the analysis options, analyze ``profile``, and return (report, timeline): the
    timeline is the one the analyzers read (built once; the second call finds it)."""
    from tpuperf.config import AnalysisConfig
    from tpuperf.errors import UsageError
    from tpuperf.report import analyze, parse_steps
    from tpuperf.timeline import build_timeline

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
    report = analyze(profile, config=config, analyzers=analyzer or None)
    return report, build_timeline(profile, config)


def command(
    profile: str = typer.Argument(..., help=PROFILE_ARGUMENT_HELP),
    output: str = typer.Option(
        "report.html", "--output", "-o", help="The HTML file to write (default report.html)."
    ),
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
    run: str = typer.Option(None, "--run", help="This run of a logdir (default: the latest)."),
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
    top: int = typer.Option(25, "--top", help="How many top ops the table lists."),
) -> None:
    """Write the analysis as one self-contained HTML file: summary, per-step and per-device
    charts, a roofline of every op, ranked recommendations and a sortable top-ops table.

    Scripts, styles and data are inside the file and it makes no network request, so it
    opens offline and can be attached to a bug. Needs plotly (pip install 'tpuperf[report]').

    Example:

        tpuperf report /tmp/logdir -o report.html

        tpuperf report gpu.xplane.pb --peak-tflops 989 --peak-hbm-gbps 3350 -o gpu.html
    """
    from tpuperf.cli._common import load_profile
    from tpuperf.jsonout import write_text_atomic
    from tpuperf.render.html import render_html

    loaded = load_profile(profile, None, run)
    report, timeline = analysis(
        loaded,
        analyzer=analyzer,
        steps=steps,
        warmup=warmup,
        host=host,
        peak_tflops=peak_tflops,
        peak_hbm_gbps=peak_hbm_gbps,
        top=top,
    )
    for name, error in report.errors.items():
        typer.echo(f"tpuperf: analyzer {name} failed: {error}", err=True)
    write_text_atomic(output, render_html(report, timeline))
    typer.echo(f"tpuperf: wrote {output}", err=True)
