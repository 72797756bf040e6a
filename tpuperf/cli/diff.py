"""``tpuperf diff``: what changed between two runs, and a regression gate for CI."""

from __future__ import annotations

import typer

from tpuperf.cli._common import (
    format_option,
    host_option,
    output_option,
    run_option,
    steps_option,
    warmup_option,
    wide_option,
)
from tpuperf.output import Format

FORMATS = (Format.table, Format.json, Format.md)


def command(
    base: str = typer.Argument(..., help="The run to compare against: a file, run dir or logdir."),
    new: str = typer.Argument(..., help="The run to compare: a file, run directory or logdir."),
    format: Format | None = format_option(*FORMATS),
    output: str | None = output_option(),
    wide: bool = wide_option(),
    top: int = typer.Option(10, "--top", help="Op rows in table and md (JSON has every op)."),
    fail_on: list[str] = typer.Option(
        None,
        "--fail-on",
        help="Exit 3 when FIELD OP VALUE holds, e.g. step_time_ms.median.delta_pct>5 (repeatable).",
    ),
    steps: str = steps_option(" of both"),
    warmup: int = warmup_option(),
    host: str = host_option("Analyse only this host of both runs."),
    base_run: str = run_option("--base-run", "BASE, a logdir"),
    new_run: str = run_option("--new-run", "NEW, a logdir"),
) -> None:
    """Compare two runs: step time, the compute / collective / copy / idle split, ops
    matched across recompilations, categories and recommendations.

    Each run is analysed as `tpuperf analyze` does. Warns on stderr when the runs differ in
    chip, devices, hosts, step source or jax/jaxlib versions. Exit 0, or 3 when a
    `--fail-on` gate trips (one line per gate on stderr); a gate on a value unknown on either
    side (no MFU without model FLOPs) is not evaluated, and a note says so.

    Example:

        tpuperf diff base_logdir/ new_logdir/

        tpuperf diff logdir/ logdir/ --base-run 2026_01_05 --new-run 2026_01_06

        tpuperf diff base.xplane.pb new.xplane.pb -f json \\
            --fail-on 'step_time_ms.median.delta_pct>5' \\
            --fail-on 'exposed_collective_pct.delta>3'
    """
    from tpuperf import gates
    from tpuperf import output as out
    from tpuperf.cli._common import load_profile
    from tpuperf.config import AnalysisConfig
    from tpuperf.diffing import GATE_FIELDS, compare, versions
    from tpuperf.errors import GateFailed, UsageError
    from tpuperf.report import analyze

    fmt = out.choose_format(format, output, FORMATS)
    if warmup < 0:
        raise UsageError("--warmup must be 0 or more")
    if top < 0:
        raise UsageError("--top must be 0 or more")
    parsed = [
        gates.parse_gate(text, GATE_FIELDS, example="step_time_ms.median.delta_pct>5")
        for text in fail_on or []
    ]
    config = AnalysisConfig(warmup_steps=warmup)
    profiles = [
        load_profile(path, None, run, run_flag=flag)
        for path, run, flag in ((base, base_run, "--base-run"), (new, new_run, "--new-run"))
    ]
    reports = [analyze(p, config=config, steps=steps, host=host) for p in profiles]
    result = compare(reports[0], reports[1], *(versions(p) for p in profiles))

    for side, report in (("BASE", reports[0]), ("NEW", reports[1])):
        for name, error in report.errors.items():
            out.say(f"{side}: analyzer {name} failed: {error}")
    for warning in result.warnings:
        out.say(f"warning: {warning}")
    from tpuperf.render.diff import render_diff_markdown, render_diff_table

    view = out.View(
        document=result.to_dict,
        table=lambda console, wide: render_diff_table(result, console, top=top, wide=wide),
        markdown=lambda: render_diff_markdown(result, top=top),
    )
    out.emit(view, fmt, output, wide=wide)

    row = result.gate_row()
    tripped = []
    for gate in parsed:
        if not gate.known(row):
            out.note(f"gate {gate.text} not evaluated: {gate.field} is unknown")
        elif gate.trips(row):
            tripped.append(gate)
            out.say(f"gate {gate.text}: tripped ({gate.field} = {row[gate.field]:.6g})")
    if tripped:
        raise GateFailed(f"{len(tripped)} of {len(parsed)} --fail-on gates tripped")
