"""``tpuperf export``: a profile's timeline as a trace for ui.perfetto.dev."""

from __future__ import annotations

from tpuperf.cli._common import (
    host_option,
    no_cache_option,
    profile_argument,
    run_option,
)
from tpuperf.cli._params import Option

# Names a Perfetto protobuf trace goes by (the first is the one to use); ui.perfetto.dev opens
# each of them.
TRACE_SUFFIXES = (".pftrace", ".perfetto-trace", ".pb")
# Suffixes that say a file is something else: another output format, or compressed.
_OTHER_SUFFIXES = {
    ".json": "JSON",
    ".md": "Markdown",
    ".csv": "CSV",
    ".parquet": "Parquet",
    ".ndjson": "JSON lines",
    ".jsonl": "JSON lines",
    ".txt": "text",
    ".html": "HTML",
    ".htm": "HTML",
    ".gz": "gzip",
    ".bz2": "bzip2",
    ".xz": "xz",
    ".zst": "zstd",
    ".zip": "zip",
}
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zip")


def command(
    profile: str = profile_argument(),
    format: str = Option(
        "perfetto", "--format", "-f", metavar="FORMAT", help="perfetto (a .pftrace file)."
    ),
    output: str = Option(
        None,
        "--output",
        "-o",
        help="The trace file to write, NAME.pftrace (.perfetto-trace or .pb also); required.",
    ),
    host: str = host_option("Only this host of a run (default: all)."),
    run: str = run_option(),
    align: str = Option(
        "clock",
        "--align",
        help="clock: hosts as their clocks say; steps: shift hosts so their steps line up.",
    ),
    no_cache: bool = no_cache_option(),
) -> None:
    """Export every event of a profile as a Perfetto trace: all hosts of a run on one
    timeline; under each host its devices, each with a track per line as the analysis reads
    it (steps, module executions, ops, async windows) and every other line as recorded
    (XLA TraceMe, TensorFlow ops and name scopes), then the host threads (/host:CPU).

    The trace has no event cap and is written as a stream; open it at
    https://ui.perfetto.dev (Open trace file). Needs the perfetto package (the `report`
    extra).

    Example:

        tpuperf export /tmp/logdir --format perfetto -o trace.pftrace

        tpuperf export logdir/plugins/profile/run1/ --align steps -o run1.pftrace
    """
    from tpuperf import output as out
    from tpuperf.cli._common import load_profile
    from tpuperf.errors import UsageError
    from tpuperf.exporting import export_perfetto

    if format != "perfetto":
        raise UsageError(f"--format {format}: choose perfetto")
    if not output:
        raise UsageError("-o/--output: name the trace file to write, e.g. -o trace.pftrace")
    check_trace_name(output)
    counts = export_perfetto(
        load_profile(profile, host, run, cache=not no_cache), output, align=align
    )
    out.say(
        f"wrote {output}: {counts.slices:,} slices on {counts.tracks:,} tracks; "
        "open it at https://ui.perfetto.dev"
    )


def check_trace_name(output: str) -> None:
    """Refuse a file name whose suffix says another format (``trace.json.gz``): the file would
    hold an uncompressed Perfetto protobuf under a name that promises something else."""
    from pathlib import PurePosixPath

    from tpuperf.errors import UsageError

    suffixes = [s.lower() for s in PurePosixPath(output).suffixes]
    suffix = suffixes[-1] if suffixes else ""
    if suffix in TRACE_SUFFIXES or suffix not in _OTHER_SUFFIXES:
        return
    named = _OTHER_SUFFIXES[suffix]
    if suffix in _COMPRESSED and len(suffixes) > 1 and suffixes[-2] in _OTHER_SUFFIXES:
        named = f"{_OTHER_SUFFIXES[suffixes[-2]]} compressed with {named}"  # .json.gz
    raise UsageError(
        f"-o {output}: the export writes an uncompressed Perfetto protobuf trace, not "
        f"{named}; name it {TRACE_SUFFIXES[0]} (or {', '.join(TRACE_SUFFIXES[1:])})"
    )
