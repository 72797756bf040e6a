"""``tpuperf analyze``: what to fix first in a profile, and how much it buys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpuperf.cli._common import AnalysisRequest, analysis_command
from tpuperf.cli._params import Option
from tpuperf.output import Format

if TYPE_CHECKING:
    from rich.console import Console

FORMATS = (Format.table, Format.json, Format.md, Format.html)


@analysis_command(*FORMATS)
def command(
    request: AnalysisRequest,
    top: int = Option(10, "--top", help="How many top ops to show."),
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
    from tpuperf.cli._common import html_page

    # The profile's notes are in the report, not on stderr.
    report = request.analyze(top, notices=False)

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
    request.emit(view)
