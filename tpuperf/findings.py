"""The analyzers' findings a renderer shows, as declared types: what
:class:`tpuperf.analysis.Report`'s properties (``idle``, ``stragglers``, ``memory_peak``, ...)
return, read from the results' documented metrics, so that no renderer names an analyzer's
keys; and the breakdowns of the steps and devices the HTML page draws.

Only renderers read them: a report written as JSON does not import this module (a
dataclass's generated methods are compiled as its module is imported, ~0.6 ms a class here).
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

import numpy as np

from tpuperf._dataclasses import dataclass
from tpuperf.roofline.chips import PeakPair
from tpuperf.timeline import OfDevice


@dataclass(frozen=True, eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class StepBreakdown:
    """The analysed steps' time by breakdown column (``Timeline.breakdown_table`` summed by
    step, over the devices that ran each step)."""

    windows: int  # analysed windows over all devices; 0: no device ran ops in them
    step_source: str | None  # where the steps came from; None: the profile has no steps
    steps: np.ndarray  # step numbers, ascending; empty without steps
    ms: dict[str, np.ndarray]  # BREAKDOWN_COLUMNS -> ms per step, mean over devices


@dataclass(frozen=True)
class DeviceBreakdown(OfDevice):
    """One device's time by breakdown column, ms per step (mean over its analysed windows)."""

    host: str
    device: int
    ms: dict[str, float]  # BREAKDOWN_COLUMNS -> ms per step


def declared(cls: Any, values: dict[str, Any] | None) -> Any:
    """An instance of the dataclass ``cls`` from an analyzer's metrics (its fields' names are
    the metric names; others are left out); None for None."""
    if values is None:
        return None
    return cls(**{f.name: values[f.name] for f in dataclasses.fields(cls) if f.name in values})


@dataclass(frozen=True)
class RooflinePeaks(PeakPair):
    """The roofline analyzer's ``metrics.peaks``."""

    chip: str | None = None
    peak_tflops: float | None = None
    peak_hbm_gbps: float | None = None
    tflops_source: str | None = None
    hbm_source: str | None = None
    ridge_flop_per_byte: float | None = None


@dataclass(frozen=True)
class Straggler(OfDevice):
    """One of the steps analyzer's ``metrics.stragglers``."""

    host: str
    device: int
    z: float  # modified z-score of its compute time
    compute_ms_per_step: float
    median_compute_ms_per_step: float


@dataclass(frozen=True)
class IdleFigures:
    """The idle analyzer's metrics a reader sees first."""

    idle_pct: float
    no_op_pct: float
    between_steps_idle_pct: float
    in_step_idle_pct: float
    micro_gap_us: float
    micro_idle_pct: float
    equivalent_idle_chips: float
    host_bound: bool


@dataclass(frozen=True)
class CollectiveKind:
    """One kind of the collectives analyzer's ``metrics.by_kind``."""

    kind: str
    exposed_ms_per_step: float
    ms_per_step: float
    ops_per_step: float
    async_ops_per_step: float
    replica_group_sizes: list[int]


@dataclass(frozen=True)
class AsyncWindows:
    """The collectives analyzer's ``metrics.async``: async windows by how compute hides them."""

    windows: int = 0
    hidden: int = 0
    partial: int = 0
    exposed: int = 0
    overlap_pct: float | None = None  # of async time, weighted by window length


@dataclass(frozen=True)
class MemoryPeak:
    """The memory analyzer's metrics: the largest program's peak device memory."""

    peak_bytes: int
    peak_program: str
    split_bytes: dict[str, int]  # kind -> bytes at the peak
    by_scope: list[dict[str, Any]]  # scope, bytes, buffers, passes
    capacity_bytes: int | None = None
    capacity_source: str | None = None
    headroom_pct: float | None = None
    curve_bytes: list[int] = field(default_factory=list)  # bytes in use along the schedule
