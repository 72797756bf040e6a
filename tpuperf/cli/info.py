"""``tpuperf info``: what a profile holds."""

from __future__ import annotations

from typing import Any

from tpuperf.cli._common import (
    format_option,
    host_option,
    no_cache_option,
    output_option,
    profile_argument,
    run_option,
    wide_option,
)
from tpuperf.output import Format

FORMATS = (Format.table, Format.json)


def command(
    profile: str = profile_argument(),
    format: Format | None = format_option(*FORMATS),
    output: str | None = output_option(),
    wide: bool = wide_option(),
    host: str = host_option(),
    run: str = run_option(),
    no_cache: bool = no_cache_option(),
) -> None:
    """What a profile holds: hosts, devices (kind, chip, peaks), lines, time span, steps, and
    which decoder read it.

    Example:

        tpuperf info logdir/plugins/profile/2026_11_30_10_00_00/

        tpuperf info host0.xplane.pb --format json | jq '.devices[].chip'
    """
    from tpuperf import output as out
    from tpuperf.cli._common import load_profile
    from tpuperf.inventory import describe

    fmt = out.choose_format(format, output, FORMATS)
    info = describe(load_profile(profile, host, run, cache=not no_cache))

    def table(console: Any, wide: bool) -> None:
        from tpuperf.render.listings import render_info  # rich: for a table only

        render_info(info, console, wide=wide)

    view = out.View(document=lambda: info, table=table)
    out.emit(view, fmt, output, wide=wide)
