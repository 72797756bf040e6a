"""The options of one analysis, shared by the timeline and every analyzer."""

from __future__ import annotations

from dataclasses import dataclass


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
