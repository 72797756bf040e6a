"""``tpuperf analyzers``: list the analyzers ``tpuperf analyze`` can run."""

from __future__ import annotations

from tpuperf.cli._common import format_option, output_option, wide_option
from tpuperf.output import Format

FORMATS = (Format.table, Format.json)


def command(
    format: Format | None = format_option(*FORMATS),
    output: str | None = output_option(),
    wide: bool = wide_option(),
) -> None:
    """List the analyzers: the built-in ones and those plug-ins add (entry point group
    ``tpuperf.analyzers``), with what each reads.

    Example:

        tpuperf analyzers

        tpuperf analyze run.xplane.pb --analyzer idle --analyzer steps
    """
    from tpuperf import output as out
    from tpuperf.analyzers import base

    fmt = out.choose_format(format, output, FORMATS)
    registry = base.available()
    builtin = {name for name, _ in base.BUILTIN}
    rows = [
        {
            "name": name,
            "summary": a.summary,
            "origin": "built-in" if name in builtin else "plug-in",
            "requires": {t: list(c) for t, c in a.requires.items()},
        }
        for name, a in registry.items()
    ]
    for name, error in base.plugin_errors().items():
        out.say(f"plug-in analyzer {name} failed to load: {error}")
    from tpuperf.render.listings import render_analyzers

    view = out.View(
        document=lambda: {"analyzers": rows},
        table=lambda console, wide: render_analyzers(rows, console, wide=wide),
    )
    out.emit(view, fmt, output, wide=wide)
