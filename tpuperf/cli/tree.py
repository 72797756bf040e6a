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
    depth: int = typer.Option(
        None, "--depth", help="Show scopes down to this level (op leaves count one more)."
    ),
    min_pct: float = typer.Option(
        1.0, "--min-pct", help="Hide nodes under this share of all op time, in percent."
    ),
    format: Format | None = format_option(*FORMATS),
    output: str | None = output_option(),
    wide: bool = wide_option(),
    steps: str = steps_option(),
    warmup: int = warmup_option(),
    host: str = host_option(),
    run: str = run_option(),
    no_cache: bool = no_cache_option(),
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
    from tpuperf.analysis import analysis_config
    from tpuperf.cli._common import load_profile
    from tpuperf.errors import UsageError
    from tpuperf.scopes import no_scopes_message, tree_report

    fmt = out.choose_format(format, output, FORMATS)
    if depth is not None and depth < 1:
        raise UsageError("--depth must be at least 1")
    if not 0 <= min_pct <= 100:  # a share of all op time: above 100 would hide every node
        raise UsageError(f"--min-pct {min_pct:g}: a share of op time, from 0 to 100")
    config = analysis_config(steps=steps, warmup=warmup)
    loaded = load_profile(profile, host, run, cache=not no_cache)
    document = tree_report(loaded, depth, min_pct, config)
    if fmt is Format.table and not document["scoped"]:
        out.note(no_scopes_message(loaded.source))
        return
    from tpuperf.render.tree import render_tree

    view = out.View(
        document=lambda: document,
        table=lambda console, wide: render_tree(document, console, wide=wide),
    )
    out.emit(view, fmt, output, wide=wide)
