from __future__ import annotations

from typing import Any

from tpuperf.cli._common import ProfileRequest, profile_command, steps_option, warmup_option
from tpuperf.cli._params import Option
from tpuperf.output import Format

FORMATS = (Format.table, Format.json)


@profile_command(*FORMATS, then=("steps", "warmup"))
def command(
    request: ProfileRequest,
    depth: int = Option(
        None, "--depth", help="Show scopes down to this level (op leaves count one more)."
    ),
    min_pct: float = Option(
        1.0, "--min-pct", help="Hide nodes under this share of all op time, in percent."
    ),
    steps: str = steps_option(),
    warmup: int = warmup_option(),
) -> None:
    """The scope tree: op time per JAX name scope (layer) of the model's code, per step.

    Each node shows its time per step per device, its share of all op time and a bar split
    into forward, backward, optimizer and other (ops without a scope); primitives are the
    leaves, with the source line that has most of their time (at the terminal's width a long
    name is shortened before its source line is; --wide shows every name whole). Per step
    means over the step windows `analyze` uses (the same --steps and --warmup). The format
    follows the -o suffix (.json, .txt) unless --format says it.

    Example:

        tpuperf tree run_dir/ --depth 3

        tpuperf tree profile.xplane.pb --min-pct 0 --format json -o tree.json
    """
    from tpuperf import output as out
    from tpuperf.config import analysis_config
    from tpuperf.errors import UsageError
    from tpuperf.scopes import no_scopes_message, tree_report

    if depth is not None and depth < 1:
        raise UsageError("--depth must be at least 1")
    if not 0 <= min_pct <= 100:  # a share of all op time: above 100 would hide every node
        raise UsageError(f"--min-pct {min_pct:g}: a share of op time, from 0 to 100")
    config = analysis_config(steps=steps, warmup=warmup)
    loaded = request.load()
    document = tree_report(loaded, depth, min_pct, config)
    if request.fmt is Format.table and not document["scoped"]:
        out.note(no_scopes_message(loaded.source))
        return

    def table(console: Any, wide: bool) -> None:
        from tpuperf.render.tree import render_tree  # rich: for a table only

        render_tree(document, console, wide=wide)

    view = out.View(document=lambda: document, table=table)
    request.emit(view)
