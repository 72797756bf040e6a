"""Peak dense bf16 FLOP/s and HBM bandwidth of the accelerators tpuperf knows by name.

Every number cites the public page it comes from. Peaks are *dense* (no 2:4
sparsity) bf16 tensor/matrix-unit rates per chip (per GPU); bandwidth is HBM
bandwidth in GB/s (1e9 bytes/s), as the vendors state it.

Where the peaks come from, in order (DESIGN.md, Roofline): the profile's plane
stats, then this table by chip name, then the user's ``--peak-tflops`` /
``--peak-hbm-gbps``. :func:`resolve_peaks` applies that order and says which
source it used.
"""

from __future__ import annotations

import dataclasses
import math
import re

from tpuperf._dataclasses import dataclass

# Values of Peaks.source.
SOURCE_PROFILE = (
    "profile"  # the plane's peak_teraflops_per_second / peak_hbm_bw_gigabytes_per_second
)
SOURCE_TABLE = "chip_table"
SOURCE_FLAGS = "flags"
SOURCE_UNKNOWN = "unknown"


@dataclass(frozen=True)
class ChipSpec:
    name: str
    vendor: str
    peak_tflops: float  # dense bf16 (fp16 where the chip has no bf16), TFLOP/s
    peak_hbm_gbps: float  # GB/s
    note: str = ""
    # The chip-to-chip link within a slice or node (ICI, NVLink, xGMI): its name and the
    # bidirectional bandwidth per chip the vendor states, GB/s (_INTERCONNECTS); NaN where
    # not listed.
    interconnect: str = ""
    interconnect_gbps: float = math.nan

    @property
    def interconnect_per_direction_gbps(self) -> float:
        """What one direction of the links can carry: the peak a bus bandwidth is held to."""
        return self.interconnect_gbps / 2


# (pattern over the normalised chip name, spec). The first match wins, so more
# specific names (v5 lite before v5, PCIe before SXM) come first.
_CHIPS: list[tuple[str, ChipSpec]] = [
    # https://cloud.google.com/tpu/docs/v4 : 275 TFLOP/s bf16, 1200 GB/s HBM2 per chip.
    (r"tpuv4", ChipSpec("TPU v4", "Google", 275.0, 1200.0)),
    # https://cloud.google.com/tpu/docs/v5e : 197 TFLOP/s bf16, 819 GB/s HBM2e per chip.
    # XLA calls it "TPU v5 lite".
    (r"tpuv5lite|v5e|v5litepod", ChipSpec("TPU v5e", "Google", 197.0, 819.0)),
    # https://cloud.google.com/tpu/docs/v5p : 459 TFLOP/s bf16, 2765 GB/s HBM2e per chip.
    # XLA calls it "TPU v5".
    (r"tpuv5p|tpuv5$|v5p", ChipSpec("TPU v5p", "Google", 459.0, 2765.0)),
    # https://cloud.google.com/tpu/docs/v6e : 918 TFLOP/s bf16, 1640 GB/s HBM per chip.
    # XLA calls it "TPU v6 lite"; v6e planes themselves record 1637.99 GB/s.
    (r"tpuv6lite|v6e|trillium", ChipSpec("TPU v6e", "Google", 918.0, 1640.0)),
    # https://cloud.google.com/tpu/docs/tpu7x : 2307 TFLOP/s bf16 (4614 fp8), 7380 GB/s HBM3e.
    (r"tpu7x|tpuv7|ironwood", ChipSpec("TPU7x", "Google", 2307.0, 7380.0)),
    # https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf
    # V100 SXM2: 125 TFLOP/s fp16 tensor (V100 has no bf16), 900 GB/s HBM2.
    (
        r"v100",
        ChipSpec("V100", "NVIDIA", 125.0, 900.0, note="fp16 tensor peak: V100 has no bf16"),
    ),
    # https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
    # A100 40GB: 312 TFLOP/s bf16 dense, 1555 GB/s; A100 80GB SXM: 312, 2039 GB/s.
    (r"a100.*40gb", ChipSpec("A100 40GB", "NVIDIA", 312.0, 1555.0)),
    (r"a100", ChipSpec("A100 80GB", "NVIDIA", 312.0, 2039.0)),
    # https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet
    # H100 SXM: 989 TFLOP/s bf16 dense (1979 with sparsity), 3350 GB/s HBM3;
    # H100 PCIe: 756 TFLOP/s dense, 2000 GB/s.
    (r"h100.*pcie", ChipSpec("H100 PCIe", "NVIDIA", 756.0, 2000.0)),
    (r"h100", ChipSpec("H100 SXM", "NVIDIA", 989.0, 3350.0)),
    # https://www.nvidia.com/en-us/data-center/h200/ : H200 SXM 989 TFLOP/s bf16 dense
    # (1979 with sparsity), 4800 GB/s HBM3e.
    (r"h200", ChipSpec("H200 SXM", "NVIDIA", 989.0, 4800.0)),
    # https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200): 4.5 PFLOP/s bf16 with
    # sparsity per GPU, so 2250 dense; 8 TB/s HBM3e per GPU.
    (r"b200", ChipSpec("B200", "NVIDIA", 2250.0, 8000.0)),
    # AMD GPUs by their gfx architecture, which is what profiles name ("AMD MI300 (gfx942)").
    # Peaks as XProf computes them (openxla/xprof xprof/utils/rocm_type_utils.cc: dense
    # bf16 matrix FLOPs per CU per clock, 2048 on gfx942 and 4096 on gfx950, times CUs
    # times clock; hardware_type_utils_test.cc checks 1307.4 and 2516.6):
    # gfx942, MI300X: 304 CUs x 2.1 GHz x 2048 = 1307.4 TFLOP/s; HBM3 5.3 TB/s from
    # https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf
    (r"gfx942|mi300x|mi300$|instinctmi300", ChipSpec("MI300X (gfx942)", "AMD", 1307.4, 5300.0)),
    # gfx950, MI355X: 256 CUs x 2.4 GHz x 4096 = 2516.6 TFLOP/s; HBM3E 8 TB/s from
    # https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html
    (r"gfx950|mi355x?|mi350x?", ChipSpec("MI355X (gfx950)", "AMD", 2516.6, 8000.0)),
]

# Chip name -> (link, bidirectional GB/s per chip), each from the page that states it:
_INTERCONNECTS: dict[str, tuple[str, float]] = {
    # https://cloud.google.com/tpu/docs/v5e : bidirectional ICI bandwidth per chip 400 GB/s.
    "TPU v5e": ("ICI", 400.0),
    # https://cloud.google.com/tpu/docs/v5p : bidirectional ICI bandwidth per chip 1200 GB/s.
    "TPU v5p": ("ICI", 1200.0),
    # https://cloud.google.com/tpu/docs/v6e : bidirectional ICI bandwidth per chip 800 GB/s.
    "TPU v6e": ("ICI", 800.0),
    # The V100, A100 and H100 datasheets above: NVLink 300, 600 (SXM), 900 (SXM) GB/s, and
    # 600 GB/s for H100 PCIe over its NVLink bridge; https://www.nvidia.com/en-us/data-center/h200/
    # NVLink 900 GB/s; https://www.nvidia.com/en-us/data-center/hgx/ NVLink 1.8 TB/s per GPU.
    "V100": ("NVLink", 300.0),
    "A100 40GB": ("NVLink", 600.0),
    "A100 80GB": ("NVLink", 600.0),
    "H100 PCIe": ("NVLink", 600.0),
    "H100 SXM": ("NVLink", 900.0),
    "H200 SXM": ("NVLink", 900.0),
    "B200": ("NVLink", 1800.0),
    # The MI300X datasheet above: peak aggregate Infinity Fabric (xGMI) bandwidth 896 GB/s
    # (7 links x 128 GB/s).
    "MI300X (gfx942)": ("xGMI", 896.0),
}
_CHIPS = [
    (
        pattern,
        dataclasses.replace(
            spec,
            interconnect=_INTERCONNECTS[spec.name][0],
            interconnect_gbps=_INTERCONNECTS[spec.name][1],
        )
        if spec.name in _INTERCONNECTS
        else spec,
    )
    for pattern, spec in _CHIPS
]

CHIPS: tuple[ChipSpec, ...] = tuple(spec for _, spec in _CHIPS)


def _normalise(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.lower())


def lookup(chip_name: str | None) -> ChipSpec | None:
    """The table's spec for a chip name (``device_type_string`` or a GPU model), or None."""
    if not chip_name:
        return None
    key = _normalise(chip_name)
    for pattern, spec in _CHIPS:
        if re.search(pattern, key):
            return spec
    return None


class PeakPair:
    """What follows from a pair of peaks (``peak_tflops``, ``peak_hbm_gbps``; None: unknown):
    for :class:`Peaks` and the Report's view of the roofline analyzer's peaks."""

    peak_tflops: float | None
    peak_hbm_gbps: float | None

    @property
    def known(self) -> bool:
        return self.peak_tflops is not None and self.peak_hbm_gbps is not None

    @property
    def missing_flags(self) -> list[str]:
        """The flags that give the peaks not known (``--peak-tflops``, ``--peak-hbm-gbps``)."""
        given = (("--peak-tflops", self.peak_tflops), ("--peak-hbm-gbps", self.peak_hbm_gbps))
        return [flag for flag, value in given if value is None]


@dataclass(frozen=True)
class Peaks(PeakPair):
    """The peaks an analysis uses, and where each came from (one of the SOURCE_* values)."""

    peak_tflops: float | None
    peak_hbm_gbps: float | None
    tflops_source: str
    hbm_source: str
    chip: str = ""

    @property
    def source(self) -> str:
        """One word for both peaks: their common source, or "a+b" when they differ."""
        if self.tflops_source == self.hbm_source:
            return self.tflops_source
        return f"{self.tflops_source}+{self.hbm_source}"


def _positive(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    if math.isnan(value) or value <= 0:
        return None
    return value


def resolve_peaks(
    chip_name: str | None,
    profile_tflops: float | None = None,
    profile_hbm_gbps: float | None = None,
    flag_tflops: float | None = None,
    flag_hbm_gbps: float | None = None,
) -> Peaks:
    """Pick each peak from the profile, else the chip table, else the flags (DESIGN.md order)."""
    spec = lookup(chip_name)
    candidates_tflops = [
        (_positive(profile_tflops), SOURCE_PROFILE),
        (spec.peak_tflops if spec else None, SOURCE_TABLE),
        (_positive(flag_tflops), SOURCE_FLAGS),
    ]
    candidates_hbm = [
        (_positive(profile_hbm_gbps), SOURCE_PROFILE),
        (spec.peak_hbm_gbps if spec else None, SOURCE_TABLE),
        (_positive(flag_hbm_gbps), SOURCE_FLAGS),
    ]
    tflops, tflops_source = next(
        ((v, s) for v, s in candidates_tflops if v is not None), (None, SOURCE_UNKNOWN)
    )
    hbm, hbm_source = next(
        ((v, s) for v, s in candidates_hbm if v is not None), (None, SOURCE_UNKNOWN)
    )
    return Peaks(
        tflops, hbm, tflops_source, hbm_source, chip=spec.name if spec else (chip_name or "")
    )


# HBM capacity per chip, in GiB (2**30 bytes: HBM stacks come in binary sizes, and vendors'
# "GB" here means them), by the ChipSpec name above. Used for memory headroom when the
# profile states no capacity of its own (DESIGN.md, Memory).
_HBM_GIB: dict[str, float] = {
    # https://cloud.google.com/tpu/docs/v4 : 32 GiB HBM per chip.
    "TPU v4": 32.0,
    # https://cloud.google.com/tpu/docs/v5e : 16 GiB HBM per chip.
    "TPU v5e": 16.0,
    # https://cloud.google.com/tpu/docs/v5p : 95 GiB HBM per chip.
    "TPU v5p": 95.0,
    # https://cloud.google.com/tpu/docs/v6e : 32 GiB HBM per chip (the allocator of a v6e
    # profile states 31.25 GiB usable).
    "TPU v6e": 32.0,
    # https://cloud.google.com/tpu/docs/tpu7x : 192 GiB HBM per chip.
    "TPU7x": 192.0,
    # V100 datasheet (above): 32 GB or 16 GB HBM2; the larger, the SXM2 part's usual size.
    "V100": 32.0,
    # A100 datasheet (above): 40 GB HBM2 or 80 GB HBM2e.
    "A100 40GB": 40.0,
    "A100 80GB": 80.0,
    # H100 datasheet (above): 80 GB HBM3 (SXM) / 80 GB HBM2e (PCIe).
    "H100 PCIe": 80.0,
    "H100 SXM": 80.0,
    # https://www.nvidia.com/en-us/data-center/h200/ : 141 GB HBM3e.
    "H200 SXM": 141.0,
    # https://www.nvidia.com/en-us/data-center/hgx/ : HGX B200, 1.4 TB HBM3e over 8 GPUs
    # (180 GB each).
    "B200": 180.0,
    # MI300X data sheet (above): 192 GB HBM3.
    "MI300X (gfx942)": 192.0,
    # https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html : 288 GB HBM3E.
    "MI355X (gfx950)": 288.0,
}


def hbm_capacity_bytes(chip_name: str | None) -> int | None:
    """The chip table's HBM capacity of a chip name, in bytes, or None."""
    spec = lookup(chip_name)
    gib = _HBM_GIB.get(spec.name) if spec else None
    return round(gib * (1 << 30)) if gib else None
