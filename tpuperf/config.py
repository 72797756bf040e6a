"""The options of one analysis, shared by the timeline and every analyzer."""

from __future__ import annotations

import dataclasses
from typing import Any

from tpuperf._dataclasses import dataclass
from tpuperf.errors import UsageError


@dataclass(frozen=True)
class AnalysisConfig:
    """Options every analyzer sees. ``None`` means "not given". Frozen: change a copy with
    ``dataclasses.replace``."""

    warmup_steps: int = 1  # leading steps left out when no explicit step range is given
    steps: tuple[int | None, int | None] | None = None  # step numbers [A, B)
    host: str | None = None
    peak_tflops: float | None = None  # used only when neither the profile nor the chip table knows
    peak_hbm_gbps: float | None = None
    micro_gap_us: float = 10.0  # in-step gaps shorter than this are launch overhead (micro)
    straggler_z: float = 3.5  # |modified z| above this marks a straggler (XProf's threshold)
    top_ops: int = 10


def parse_steps(text: str) -> tuple[int | None, int | None]:
    """``A:B`` (either side may be empty) -> step numbers [A, B); ``N`` alone is step N."""
    try:
        if ":" not in text:
            n = int(text)
            return n, n + 1
        lo, hi = text.split(":", 1)
        bounds = (int(lo) if lo.strip() else None, int(hi) if hi.strip() else None)
    except ValueError:
        raise UsageError(
            f"--steps {text!r}: expected A:B with integer step numbers, e.g. 2:10"
        ) from None
    if bounds[0] is not None and bounds[1] is not None and bounds[1] <= bounds[0]:
        raise UsageError(f"--steps {text!r}: B must be greater than A")
    return bounds


def analysis_config(
    *,
    steps: str | tuple[int | None, int | None] | None = None,
    warmup: int | None = None,
    host: str | None = None,
    peak_tflops: float | None = None,
    peak_hbm_gbps: float | None = None,
    top: int | None = None,
    config: AnalysisConfig | None = None,
) -> AnalysisConfig:
    """The frozen config of one analysis request: ``config`` (default: the defaults) with the
    options that were given, each checked (a bad one is a :class:`UsageError` naming its
    flag). ``steps`` is ``"A:B"`` or ``(A, B)``."""
    config = config if config is not None else AnalysisConfig()
    if warmup is not None and warmup < 0:
        raise UsageError("--warmup must be 0 or more")
    if top is not None and top < 0:
        raise UsageError("--top must be 0 or more")
    for flag, value in (("--peak-tflops", peak_tflops), ("--peak-hbm-gbps", peak_hbm_gbps)):
        if value is not None and not value > 0:
            raise UsageError(f"{flag} must be a positive number")
    given: dict[str, Any] = {
        "warmup_steps": warmup,
        "steps": parse_steps(steps) if isinstance(steps, str) else steps,
        "host": host,
        "peak_tflops": peak_tflops,
        "peak_hbm_gbps": peak_hbm_gbps,
        "top_ops": top,
    }
    return dataclasses.replace(config, **{k: v for k, v in given.items() if v is not None})
