"""``tpuperf report``: the analysis as one self-contained HTML page."""

from __future__ import annotations

from tpuperf.cli._common import AnalysisRequest, analysis_command
from tpuperf.cli._params import Option
from tpuperf.output import Format


@analysis_command(
    Format.html,
    output=Option(
        "report.html", "--output", "-o", help="The HTML file to write (default report.html)."
    ),
)
def command(
    request: AnalysisRequest,
    top: int = Option(25, "--top", help="How many top ops the table lists."),
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
    from tpuperf.cli._common import html_page

    report = request.analyze(top)
    request.emit(out.View(html=lambda: html_page(report)))
