from __future__ import annotations

import typer

from tpuperf.cli._common import (
    format_option,
    host_option,
    no_cache_option,
    output_option,
    profile_argument,
    run_option,
    steps_option,
    warmup_option,
    wide_option,
)
from tpuperf.output import Format

FORMATS = (Format.table, Format.json)


def command(
    profile: str = profile_argument(),
    top: int = typer.Option(20, "--top", help="Show this many host events."),
    steps: str = steps_option(),
    warmup: int = warmup_option(),
    format: Format | None = format_option(*FORMATS),
    output: str | None = output_option(),
    wide: bool = wide_option(),
    host: str = host_option(),
    run: str = run_option(),
    no_cache: bool = no_cache_option(),
) -> None:
    """What the host did while the devices waited: host events ranked by device-idle time.

    An iteration runs from one step's start to the next step's start. For every device-idle
    interval of the iterations (between steps and inside them) the host events that overlap
    it: Python functions (JAX's Python tracer, self time of the innermost user frame, with
    file:line), annotations (TraceMe) and runtime events (PjitFunction, execution, transfers,
    block_until_ready), ranked by the idle time they overlap per iteration; and the input
    verdict (input events where the profile has them, else data-loading code). Capture with
    ``jax.profiler.ProfileOptions().python_tracer_level = 1`` to see Python functions.

    Example:

        tpuperf host run.xplane.pb

        tpuperf host run_dir/ --top 50 --format json -o host.json
    """
    from tpuperf import output as out
    from tpuperf.analysis import analysis_config
    from tpuperf.cli._common import load_profile
    from tpuperf.errors import UsageError
    from tpuperf.hostview import report

    fmt = out.choose_format(format, output, FORMATS)
    if top < 1:
        raise UsageError("--top must be at least 1")
    config = analysis_config(steps=steps, warmup=warmup, host=host)
    loaded = load_profile(profile, host, run, cache=not no_cache)
    document = report(loaded, config, top)
    from tpuperf.render.host import render_host

    view = out.View(
        document=lambda: document,
        table=lambda console, wide: render_host(document, console, wide=wide),
    )
    out.emit(view, fmt, output, wide=wide)
