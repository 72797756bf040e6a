from __future__ import annotations

from typing import Any

from tpuperf.cli._common import ProfileRequest, profile_command, steps_option, warmup_option
from tpuperf.cli._params import Option
from tpuperf.output import Format

FORMATS = (Format.table, Format.json)


@profile_command(*FORMATS)
def command(
    request: ProfileRequest,
    top: int = Option(20, "--top", help="Show this many host events."),
    steps: str = steps_option(),
    warmup: int = warmup_option(),
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
    from tpuperf.config import analysis_config
    from tpuperf.errors import UsageError
    from tpuperf.hostview import report

    if top < 1:
        raise UsageError("--top must be at least 1")
    config = analysis_config(steps=steps, warmup=warmup, host=request.host)
    loaded = request.load()
    document = report(loaded, config, top)

    def table(console: Any, wide: bool) -> None:
        from tpuperf.render.host import render_host  # rich: for a table only

        render_host(document, console, wide=wide)

    view = out.View(document=lambda: document, table=table)
    request.emit(view)
