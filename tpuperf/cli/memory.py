from __future__ import annotations

from typing import Any

from tpuperf.cli._common import ProfileRequest, profile_command
from tpuperf.cli._params import Option
from tpuperf.output import Format

FORMATS = (Format.table, Format.json, Format.md)


@profile_command(*FORMATS)
def command(
    request: ProfileRequest,
    program: str = Option(None, "--program", help="Only this program (module name or program id)."),
    top: int = Option(
        10, "--top", help="Show this many of each program's buffers live at the peak (0: all)."
    ),
    hbm_gib: float = Option(
        None,
        "--hbm-gib",
        help="Device memory in GiB, used when the profile and chip table do not know it.",
    ),
) -> None:
    """Peak device memory (HBM) per program, the buffers live at the peak and the code that
    made them, and the headroom left.

    Every program of the profile, largest peak first: its peak (the HBM allocations XLA
    planned for it: parameters, outputs, temporaries, constants; a donated buffer once),
    the buffers live at the peak of its schedule with their op, shape, scope, pass and source
    line (--wide), and the headroom (capacity minus the peak). Capacity comes from the
    profile's device stats or allocator events, else the chip table, else --hbm-gib. Where
    the profile has allocator events, memory over the capture and fragmentation too. The
    format follows the -o suffix (.json, .md, .txt) unless --format says it.

    Example:

        tpuperf memory profile.xplane.pb --top 5

        tpuperf memory run_dir/ --program jit_train_step -o memory.json
    """
    from tpuperf import output as out
    from tpuperf.errors import UsageError
    from tpuperf.memory_plan import memory_report, to_document

    if top < 0:
        raise UsageError("--top must be 0 or more")
    if hbm_gib is not None and not hbm_gib > 0:
        raise UsageError("--hbm-gib must be more than 0")
    loaded = request.load()
    report = memory_report(loaded, program=program, hbm_gib=hbm_gib)
    if program is not None and not report.programs and report.hlo_protos:
        raise UsageError(f"--program {program}: no program of {loaded.source} has that name or id")
    document = to_document(report, top=top or None)
    if request.fmt is not Format.json:
        for note in document["notes"]:  # what the profile lacks, one line each
            out.note(note)
        if not report.programs and not report.allocators:
            return

    def table(console: Any, wide: bool) -> None:
        from tpuperf.render.memory import render_memory  # rich: for a table only

        render_memory(document, console, wide=wide)

    def markdown() -> str:
        from tpuperf.render.memory import render_memory_markdown

        return render_memory_markdown(document)

    view = out.View(document=lambda: document, table=table, markdown=markdown)
    request.emit(view)
