"""``tpuperf ops``: the op table."""

from __future__ import annotations

from typing import Any

from tpuperf.cli._common import ProfileRequest, profile_command
from tpuperf.cli._params import Option
from tpuperf.output import Format

FORMATS = (Format.table, Format.json, Format.csv, Format.parquet)


@profile_command(*FORMATS)
def command(
    request: ProfileRequest,
    by: str = Option(
        "program_op",
        "--by",
        help="program_op (each program's ops apart, as XProf's hlo_stats), op (same-named ops "
        "of all programs together), category, module or program; or where the model's code "
        "made them: scope (JAX name scopes, self and total), source (file:line) or pass "
        "(forward, backward, optimizer); or collective (one row per collective op: bytes, "
        "group size, waiting vs moving, bus bandwidth, last arriver).",
    ),
    depth: int = Option(
        None, "--depth", help="With --by scope: scopes down to this level (default: all)."
    ),
    per_device: bool = Option(
        False, "--per-device", help="One table per device instead of all together."
    ),
    top: int = Option(
        None, "--top", "-n", help="Only the first N rows (per device with --per-device)."
    ),
    sort: str = Option(
        "total_time",
        "--sort",
        help="total_time, self_time, occurrences, avg_time, flops, bytes_accessed or name.",
    ),
) -> None:
    """The op table: time, count, FLOPs and bytes per op (or category, module, program).

    Example:

        tpuperf ops profile.xplane.pb --top 20

        tpuperf ops run_dir/ --by category --per-device -o ops.csv

        tpuperf ops run_dir/ --by scope --depth 3

        tpuperf ops run_dir/ --by collective
    """
    from tpuperf import output as out
    from tpuperf.errors import UsageError
    from tpuperf.opstats import COLLECTIVE_GROUPING, SCOPE_GROUPINGS, aggregate_table

    if depth is not None and by != "scope":
        raise UsageError("--depth goes with --by scope")
    if per_device and by == COLLECTIVE_GROUPING:
        raise UsageError("--per-device does not go with --by collective (its rows span devices)")
    if top is not None and top < 1:
        raise UsageError("--top must be at least 1")
    loaded = request.load()
    if by == COLLECTIVE_GROUPING:
        from tpuperf.analysis import collective_table

        table = collective_table(loaded, top)
    else:
        table = aggregate_table(
            loaded, by=by, per_device=per_device, sort=sort, top=top, depth=depth
        )
    has_scopes = True
    if by in SCOPE_GROUPINGS:
        from tpuperf.scopes import no_scopes_message, scopes

        has_scopes = scopes(loaded).has_scopes
        if not has_scopes:
            out.note(no_scopes_message(loaded.source, by))
    if by == "op" and (table.array("programs") > 1).any():
        merged = int((table.array("programs") > 1).sum())
        out.note(
            f"--by op merges same-named ops of different programs ({merged} row(s) merge "
            "several); --by program_op keeps them apart"
        )
    if by == COLLECTIVE_GROUPING:
        from tpuperf.megascale import rendezvous_names

        if dcn := rendezvous_names(loaded.device_tables):
            out.note(
                f"{len(dcn)} megascale (DCN) collective(s) ({', '.join(sorted(dcn))}): "
                "slack, stall and required bandwidth per rendezvous in `tpuperf analyze "
                "--analyzer collectives` (table megascale)"
            )
        view = out.View(
            document=lambda: {"source": loaded.source, "by": by, "rows": table.records()},
            rows=lambda: out.Rows.from_table(table),
            table=lambda console, wide: _listings().render_collectives(table, console, wide=wide),
        )
        request.emit(view)
        return

    if by in SCOPE_GROUPINGS and request.fmt is out.Format.table and not has_scopes:
        return  # said in one line above; an empty table adds nothing
    view = out.View(
        document=lambda: {
            "source": loaded.source,
            "by": by,
            "per_device": per_device,
            "rows": table.records(),
        },
        rows=lambda: out.Rows.from_table(table),
        table=lambda console, wide: (
            _listings().render_scope_ops if by in SCOPE_GROUPINGS else _listings().render_ops
        )(table, by, console, wide=wide, per_device=per_device),
    )
    request.emit(view)


def _listings() -> Any:
    """:mod:`tpuperf.render.listings`, imported for a table only (it imports rich)."""
    from tpuperf.render import listings

    return listings
