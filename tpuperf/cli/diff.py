"""``tpuperf diff``: what changed between two runs, and a regression gate for CI."""

from __future__ import annotations

import io
import sys
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from tpuperf.diffing import DiffReport

FORMATS = ("table", "json", "md")


def command(
    base: str = typer.Argument(..., help="The run to compare against: a file, run dir or logdir."),
    new: str = typer.Argument(..., help="The run to compare: a file, run directory or logdir."),
    format: str = typer.Option("table", "--format", "-f", help="table, json or md."),
    output: str = typer.Option(None, "--output", "-o", help="Write to FILE instead of stdout."),
    top: int = typer.Option(10, "--top", help="Op rows in table and md (JSON has every op)."),
    fail_on: list[str] = typer.Option(
        None,
        "--fail-on",
        help="Exit 3 when FIELD OP VALUE holds, e.g. step_time_ms.median.delta_pct>5 (repeatable).",
    ),
    steps: str = typer.Option(
        None, "--steps", help="Analyse step numbers A <= n < B of both (A:B, either side optional)."
    ),
    warmup: int = typer.Option(
        1, "--warmup", help="Leading steps to leave out as warm-up (ignored with --steps)."
    ),
    host: str = typer.Option(None, "--host", help="Analyse only this host of both runs."),
) -> None:
    """Compare two runs: step time, the compute / collective / copy / idle split, ops
    matched across recompilations, categories and recommendations.

    Each run is analysed as `tpuperf analyze` does. Warns on stderr when the runs differ in
    chip, devices, hosts, step source or jax/jaxlib versions. Exit 0, or 3 when a
    `--fail-on` gate trips (one line per gate on stderr).

    Example:

        tpuperf diff base_logdir/ new_logdir/

        tpuperf diff base.xplane.pb new.xplane.pb -f json \\
            --fail-on 'step_time_ms.median.delta_pct>5' --fail-on 'exposed_collective_pct.delta>3'
    """
    from rich.text import Text

    from tpuperf import gates
    from tpuperf.cli._common import check_format, load_profile, stderr_console
    from tpuperf.config import AnalysisConfig
    from tpuperf.diffing import GATE_FIELDS, compare, versions
    from tpuperf.errors import GateFailed, UsageError
    from tpuperf.report import analyze

    check_format(format, FORMATS)
    if warmup < 0:
        raise UsageError("--warmup must be 0 or more")
    if top < 0:
        raise UsageError("--top must be 0 or more")
    parsed = [
        gates.parse_gate(text, GATE_FIELDS, example="step_time_ms.median.delta_pct>5")
        for text in fail_on or []
    ]
    config = AnalysisConfig(warmup_steps=warmup)
    profiles = [load_profile(path, None) for path in (base, new)]
    reports = [analyze(p, config=config, steps=steps, host=host) for p in profiles]
    result = compare(reports[0], reports[1], *(versions(p) for p in profiles))

    console = stderr_console()
    for side, report in (("BASE", reports[0]), ("NEW", reports[1])):
        for name, error in report.errors.items():
            console.print(f"{side}: analyzer {name} failed: {error}", markup=False)
    for warning in result.warnings:  # as Text: chip names come from the profiles
        console.print(Text.assemble(("warning: ", "yellow"), warning), soft_wrap=True)
    _emit(result, format, output, top)

    row = result.gate_row()
    tripped = [gate for gate in parsed if gate.trips(row)]
    for gate in tripped:
        console.print(
            f"gate {gate.text}: tripped ({gate.field} = {row[gate.field]:.6g})",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if tripped:
        raise GateFailed(f"{len(tripped)} of {len(parsed)} --fail-on gates tripped")


def _emit(result: DiffReport, format: str, output: str | None, top: int) -> None:
    from tpuperf.cli._common import emit_text, stdout_console

    if format == "json":
        text = result.to_json() + "\n"
    elif format == "md":
        from tpuperf.render.diff import render_diff_markdown

        text = render_diff_markdown(result, top=top)
    else:
        from rich.console import Console

        from tpuperf.render.diff import render_diff_table

        if output is None:
            render_diff_table(result, stdout_console(), top=top)
            return
        # A file gets plain text at a fixed width: no colour codes, no terminal to size from.
        buffer = io.StringIO()
        render_diff_table(result, Console(file=buffer, width=100, color_system=None), top=top)
        text = buffer.getvalue()
    emit_text(text, output)
    if output is None:
        sys.stdout.flush()
