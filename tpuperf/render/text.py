"""Formatting shared by every renderer: times, percentages, peaks, the parts of the step bar,
and profile strings made safe for Markdown. Plain functions of numbers and text; nothing here
reads a model stage."""

from __future__ import annotations

from typing import Any

from tpuperf.output import visible

MIB = 1 << 20
GIB = 1 << 30

# The split of step time, in bar order: (summary key, label, style, character). Each part has
# its own character, so the bar reads without colour too (a pipe, a CI log, a file).
SEGMENTS = [
    ("compute_pct", "compute", "green", "█"),
    ("exposed_collective_pct", "exposed collective", "red", "▓"),
    ("exposed_copy_pct", "exposed copy", "yellow", "▒"),
    ("no_op_pct", "no op", "grey50", "░"),
]


def peaks_text(summary: dict[str, Any]) -> str | None:
    """``918 TFLOP/s, 1638 GB/s``; a peak the chip table and profile do not know is ``?``
    (an unknown chip with only a FLOP peak); None when neither is known."""
    tflops, gbps = summary.get("peak_tflops"), summary.get("peak_hbm_gbps")
    if tflops is None and gbps is None:
        return None
    return (
        f"{'?' if tflops is None else f'{tflops:g}'} TFLOP/s, "
        f"{'?' if gbps is None else f'{gbps:g}'} GB/s"
    )


_FRAMEWORK_NAMES = {"jax": "JAX", "tensorflow": "TensorFlow", "pytorch": "PyTorch/XLA"}


def workload_text(workload: dict[str, Any] | None) -> str:
    """``JAX on TPU, inference (no backward ops)``: the summary's workload, which the fixes
    were chosen for; ``unknown`` without one."""
    if not workload:
        return "unknown"
    framework = _FRAMEWORK_NAMES.get(workload.get("framework") or "", "unknown framework")
    platform = workload.get("platform") or "unknown platform"
    where = "XLA:CPU" if platform == "CPU" else platform
    training = workload.get("training")
    if training is None:
        kind = "training or inference not known (no scope information)"
    else:
        kind = "training (backward ops)" if training else "inference (no backward ops)"
    return f"{framework} on {where}, {kind}"


def _number(value: Any) -> float | None:
    """A float, or None for None/NaN/NA (table cells may hold any of them)."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if f != f else f


def fmt_ms(value: Any) -> str:
    value = _number(value)
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 1:
        return f"{value:.2f} ms"
    return f"{value * 1000:.1f} us"


def fmt_pct(value: Any) -> str:
    value = _number(value)
    return "-" if value is None else f"{value:.1f}%"


def fmt_step_ms(value: float) -> str:
    """Milliseconds with three significant digits or more, without the unit."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


# What Markdown would read as markup in a profile string: table pipes, HTML, links.
_MARKDOWN = str.maketrans({"|": "\\|", "<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]"})


def md_code(text: object) -> str:
    """A profile string inside a Markdown code span (`` `...` ``), where nothing is markup: on
    one line, control characters written out, backticks (which would end the span) as quotes."""
    one_line = str(text).replace("\r\n", " ").replace("\n", " ").replace("`", "'")
    return visible(one_line).replace("|", "\\|")  # a pipe still ends a table cell


def md_text(text: object) -> str:
    """A profile string (op, host, chip name, or a sentence quoting them) as Markdown shows it:
    on one line, control characters written out, no HTML, link or table syntax of its own,
    backticks as quotes (so it can sit inside a code span)."""
    return md_code(text).replace("\\|", "|").translate(_MARKDOWN)


def fmt_bytes(value: Any) -> str:
    """Bytes with their unit: GiB from 1 GiB, MiB from 1 MiB, else KiB (2**10 ... 2**30)."""
    if value is None:
        return "?"
    value = int(value)
    if value == 0:
        return "0"
    if abs(value) >= GIB:
        return f"{value / GIB:.2f} GiB"
    if abs(value) >= MIB:
        return f"{value / MIB:.2f} MiB"
    return f"{value / 1024:.2f} KiB"


def memory_text(summary: dict[str, Any]) -> str | None:
    """``peak 20.00 GiB (jit_f) of 32.00 GiB, headroom 37.5%``; None without HLO modules."""
    peak = summary.get("peak_hbm_gib")
    if peak is None:
        return None
    text = f"peak {fmt_bytes(round(peak * GIB))} ({summary.get('peak_program')})"
    capacity = summary.get("hbm_capacity_gib")
    if capacity is None:
        return text + ", capacity unknown"
    return (
        text
        + f" of {fmt_bytes(round(capacity * GIB))}, headroom {fmt_pct(summary.get('headroom_pct'))}"
    )
