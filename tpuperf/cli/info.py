"""``tpuperf info``: what a profile holds."""

from __future__ import annotations

from typing import Any

from tpuperf.cli._common import ProfileRequest, profile_command
from tpuperf.output import Format

FORMATS = (Format.table, Format.json)


@profile_command(*FORMATS)
def command(request: ProfileRequest) -> None:
    """What a profile holds: hosts, devices (kind, chip, peaks), lines, time span, steps, and
    which decoder read it.

    Example:

        tpuperf info logdir/plugins/profile/2026_11_30_10_00_00/

        tpuperf info host0.xplane.pb --format json | jq '.devices[].chip'
    """
    from tpuperf import output as out
    from tpuperf.inventory import describe

    info = describe(request.load())

    def table(console: Any, wide: bool) -> None:
        from tpuperf.render.listings import render_info  # rich: for a table only

        render_info(info, console, wide=wide)

    view = out.View(document=lambda: info, table=table)
    request.emit(view)
