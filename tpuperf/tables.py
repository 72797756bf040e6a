"""Build a host's tables (see :mod:`tpuperf.schema`) from its decoded XSpace.

Three platforms put their ops in different places:

- TPU: ``/device:TPU:N`` planes, ``XLA Ops`` line; per-op costs are stats of
  the event *metadata*, so they are looked up per metadata entry, then spread
  to the events by index.
- GPU: ``/device:GPU:N`` planes, ``Stream #N(...)`` lines; kernels name their
  HLO op and module in event stats (``hlo_op``, ``hlo_module``).
- CPU-only JAX: no device planes; XLA ops run on ``/host:CPU`` thread lines as
  events with ``hlo_op`` / ``hlo_module`` stats, and become a CPU device 0.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tpuperf import schema
from tpuperf.schema import KIND_ASYNC_COPY, KIND_COLLECTIVE, KIND_COMPUTE, KIND_MEMCPY
from tpuperf.steps import dominant_module_steps, window_of
from tpuperf.xspace import Line, Plane, Space

_DEVICE_PLANE = re.compile(r"^/device:(TPU|GPU):(\d+)(.*)$")
_HOST_PLANE = "/host:CPU"
_METADATA_PLANE = "/host:metadata"
_TASK_ENVIRONMENT_PLANE = "Task Environment"
_SPARSE_CORE_BASE = 1000  # device ids of SparseCore planes start here, apart from TensorCores

# Line names on TensorCore planes, then on SparseCore planes ("/device:TPU:N SparseCore M").
_TPU_OPS_LINE = ("XLA Ops", "Sparse Core Ops")
_TPU_MODULES_LINE = ("XLA Modules", "Sparse Core Modules")
_TPU_ASYNC_LINE = ("Async XLA Ops",)
_STEPS_LINE = ("Steps", "Sparse Core Steps")
_GPU_STREAM_PREFIX = "Stream #"

_OP_SUFFIX = re.compile(r"\.\d+$")

# HLO op base names (no ".N" suffix, no "-start"/"-done") that are collectives.
COLLECTIVES = {
    "all-reduce": "all-reduce",
    "all-gather": "all-gather",
    "reduce-scatter": "reduce-scatter",
    "all-to-all": "all-to-all",
    "ragged-all-to-all": "all-to-all",
    "collective-permute": "collective-permute",
    "collective-broadcast": "collective-broadcast",
    "send": "send-recv",
    "recv": "send-recv",
}
_ASYNC_COPIES = {"copy-start", "copy-done", "copy"}
_GPU_COLLECTIVE_KERNEL = re.compile(r"nccl|rccl", re.IGNORECASE)
_GPU_COLLECTIVE_KINDS = (
    ("allreduce", "all-reduce"),
    ("allgather", "all-gather"),
    ("reducescatter", "reduce-scatter"),
    ("alltoall", "all-to-all"),
    ("sendrecv", "send-recv"),
    ("broadcast", "collective-broadcast"),
)
_GPU_MEMCPY = re.compile(r"^(memcpy|memset)", re.IGNORECASE)

# memory_access_breakdown entries: operation 1 read, 2 write; memory space 1 HBM,
# 2 CMEM, 3 VMEM (XProf's MemoryAccessed enums).
_MEMORY_SPACES = {1: "hbm", 2: "cmem", 3: "vmem"}
_MEMORY_OPERATIONS = {1: "read", 2: "write"}
_NO_RUN_ID = -(2**63)  # run ids can be negative


@dataclass
class HostTables:
    host: str
    frames: dict[str, pd.DataFrame]
    hostnames: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    capture_start_ns: int | None = None
    capture_stop_ns: int | None = None
    warnings: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- op names


def instruction_name(text: str) -> str:
    """The HLO instruction named by ``%copy-start.4 = (f32[...]) copy-start(...)``
    (``copy-start.4``); text that is not an HLO instruction comes back as it is."""
    text = text.strip()
    if text.startswith("%"):
        return text[1:].split(" = ", 1)[0].strip()
    return text


def op_base(name: str) -> str:
    """``all-gather-start.3`` -> ``all-gather-start``; ``%fusion.12`` -> ``fusion``."""
    return _OP_SUFFIX.sub("", name.lstrip("%"))


@functools.lru_cache(maxsize=65536)  # chips of one program share their op names
def classify_op(name: str, category: str = "") -> tuple[str, str, str]:
    """(kind, collective, async_role) of an HLO op from its name and hlo_category."""
    base = op_base(name)
    role = ""
    for suffix in ("-start", "-done", "-update"):
        if base.endswith(suffix):
            role = "start" if suffix == "-start" else "done"
            base = base[: -len(suffix)]
            break
    collective = COLLECTIVES.get(base) or COLLECTIVES.get(op_base(category or ""), "")
    if collective:
        return KIND_COLLECTIVE, collective, role
    if base in _ASYNC_COPIES and role:
        return KIND_ASYNC_COPY, "", role
    return KIND_COMPUTE, "", role


def _gpu_classify(kernel: str, hlo_op: str | None, line_name: str) -> tuple[str, str, str]:
    if _GPU_COLLECTIVE_KERNEL.search(kernel):
        squashed = kernel.lower().replace("_", "").replace("-", "")
        for needle, kind in _GPU_COLLECTIVE_KINDS:
            if needle in squashed:
                return KIND_COLLECTIVE, kind, ""
        return KIND_COLLECTIVE, "other", ""
    if _GPU_MEMCPY.match(kernel) or "Memcpy" in line_name or "Memset" in line_name:
        return KIND_MEMCPY, "", ""
    if hlo_op:
        return classify_op(hlo_op)
    return KIND_COMPUTE, "", ""


# --------------------------------------------------------------------------- host


@dataclass
class _Device:
    """One device's rows while a host is being built (tables without host/device columns)."""

    number: int
    row: dict[str, Any]
    ops: pd.DataFrame | dict[str, Any]
    modules: pd.DataFrame
    async_ops: pd.DataFrame | None = None
    steps: pd.DataFrame | None = None
    clock: DeviceClock | None = None  # TPU: the device clock


def build_host(host: str, space: Space) -> HostTables:
    """All tables of one host's profile."""
    planes_by_name = {plane.name: plane for plane in space.planes}
    module_names = _module_names(space.planes)
    host_plane = planes_by_name.get(_HOST_PLANE)
    executions = _HostExecutions.of(host_plane)
    devices: list[_Device] = []
    sparse_ordinal = 0
    for plane in space.planes:
        match = _DEVICE_PLANE.match(plane.name)
        if not match:
            continue
        kind, number, suffix = match.group(1), int(match.group(2)), match.group(3)
        sparse = "SparseCore" in suffix
        device_id = _SPARSE_CORE_BASE + sparse_ordinal if sparse else number
        sparse_ordinal += sparse
        clock = IDENTITY_CLOCK
        if kind == "TPU":
            ops, modules, async_ops, clock = _tpu_ops(plane, module_names)
        else:
            (ops, modules), async_ops = _stream_ops(plane, module_names, executions), None
        steps_line = _line(plane, _STEPS_LINE)
        # A large plane's decoded event stats are not needed again: keep one plane's at a time.
        plane.release_stats()
        devices.append(
            _Device(
                number=device_id,
                row=_device_row(plane, host, device_id, kind, sparse, schema._rows(ops)),
                ops=ops,
                modules=modules,
                async_ops=async_ops,
                steps=_steps_from_line(steps_line, clock)
                if steps_line is not None and len(steps_line)
                else None,
                clock=clock,
            )
        )

    warnings: list[str] = []
    if not any(d.row["ops"] for d in devices) and host_plane is not None:
        cpu_ops, cpu_modules = _host_thread_ops(host_plane, module_names)
        if len(cpu_ops):
            devices.append(_Device(0, _cpu_device_row(host, len(cpu_ops)), cpu_ops, cpu_modules))
    if not devices:
        warnings.append(f"{host}: no device planes and no XLA ops: this is a host-only profile")

    markers = _step_markers(host_plane) if host_plane is not None else None
    for device in devices:
        if device.steps is None and device.row["ops"]:
            # Host step markers are on the host clock: each device gets them on its own clock.
            device.steps = (
                (device.clock or IDENTITY_CLOCK).place_steps(markers)
                if markers is not None
                else dominant_module_steps(device.modules)
            )
        if device.steps is not None:
            device.ops["step"] = _step_of(np.asarray(device.ops["start_ps"]), device.steps)

    def stacked(table: str, attribute: str) -> pd.DataFrame:
        parts = []
        for d in devices:
            if getattr(d, attribute) is not None:
                parts.append(_with_keys(getattr(d, attribute), host, d.number))
                setattr(d, attribute, None)  # the parts hold the columns now; concat frees them
        return schema.concat(table, parts)

    frames = {
        "devices": _frame("devices", [d.row for d in devices]),
        "ops": stacked("ops", "ops"),
        "modules": stacked("modules", "modules"),
        "async_ops": stacked("async_ops", "async_ops"),
        "steps": stacked("steps", "steps"),
        "lines": _lines_table(host, space.planes),
    }
    environment = planes_by_name.get(_TASK_ENVIRONMENT_PLANE)
    env_stats = environment.stats if environment is not None else {}
    return HostTables(
        host=host,
        frames=frames,
        hostnames=list(space.hostnames),
        versions=_versions(space.planes),
        capture_start_ns=_int_or_none(env_stats.get("profile_start_time")),
        capture_stop_ns=_int_or_none(env_stats.get("profile_stop_time")),
        warnings=warnings,
    )


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and value else None


def _versions(planes: list[Plane]) -> dict[str, str]:
    versions: dict[str, str] = {}
    for plane in planes:
        for key, value in plane.stats.items():
            if "version" in key and isinstance(value, str):
                versions[key] = value
    return versions


def split_module_name(name: str) -> tuple[str, str] | None:
    """``jit_train_step(16)`` -> (``jit_train_step``, ``16``); None for other names."""
    if not name.endswith(")"):
        return None
    head, _, digits = name[:-1].rpartition("(")
    return (head, digits) if head and digits.isdigit() else None


def _module_names(planes: list[Plane]) -> dict[str, str]:
    """program_id -> module name, from ``name(program_id)`` metadata on module planes and lines."""
    names: dict[str, str] = {}
    for plane in planes:
        if plane.name != _METADATA_PLANE and not _DEVICE_PLANE.match(plane.name):
            continue
        for name in plane.metadata.names:
            split = split_module_name(name)
            if split:
                names.setdefault(split[1], split[0])
    return names


def _line(plane: Plane, names: tuple[str, ...]) -> Line | None:
    """The plane's line with the first of ``names`` that it has."""
    by_name = {line.name: line for line in plane.lines}
    return next((by_name[name] for name in names if name in by_name), None)


def _with_keys(part: pd.DataFrame | dict[str, Any], host: str, device: int) -> dict[str, Any]:
    """The columns of ``part`` with the host and device columns added."""
    columns = dict(part.items()) if isinstance(part, pd.DataFrame) else dict(part)
    n = schema._rows(part)
    columns["host"] = _constant(host, n)
    columns["device"] = np.full(n, device, dtype=np.int64)
    return columns


def _frame(table: str, rows: list[dict[str, Any]]) -> pd.DataFrame:
    if not rows:
        return schema.empty(table)
    return schema.conform(table, pd.DataFrame(rows))


# --------------------------------------------------------------------------- devices


def _device_row(
    plane: Plane, host: str, device: int, kind: str, sparse: bool, n_ops: int
) -> dict[str, Any]:
    stats = plane.stats
    peak_tflops = _float(stats.get("peak_teraflops_per_second"))
    peak_hbm_gbps = _float(stats.get("peak_hbm_bw_gigabytes_per_second"))
    if np.isnan(peak_hbm_gbps) and "memory_bandwidth" in stats:  # GPU planes: bytes/s
        peak_hbm_gbps = _float(stats["memory_bandwidth"]) / 1e9
    return {
        "host": host,
        "device": device,
        "plane": plane.name,
        "kind": kind,
        "core": "SparseCore" if sparse else ("TensorCore" if kind == "TPU" else "GPU"),
        "chip": _chip_name(kind, stats),
        "peak_tflops": peak_tflops,
        "peak_hbm_gbps": peak_hbm_gbps,
        "memory_bytes": _float(stats.get("memory_size")),
        "ops": n_ops,
    }


def _cpu_device_row(host: str, n_ops: int) -> dict[str, Any]:
    return {
        "host": host,
        "device": 0,
        "plane": _HOST_PLANE,
        "kind": "CPU",
        "core": "CPU",
        "chip": "CPU",
        "peak_tflops": np.nan,
        "peak_hbm_gbps": np.nan,
        "memory_bytes": np.nan,
        "ops": n_ops,
    }


def _float(value: Any) -> float:
    return (
        float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool)
        else float("nan")
    )


# NVIDIA compute capability -> the data-center part that has it (H100 and H200
# share 9.0: told apart by memory size).
_NVIDIA_BY_CAPABILITY = {(7, 0): "V100", (8, 0): "A100", (10, 0): "B200"}
_AMD_BY_CAPABILITY = {(9, 4): "MI300 (gfx942)", (9, 5): "MI355 (gfx950)", (9, 0): "MI200 (gfx90a)"}


def _chip_name(kind: str, stats: dict[str, Any]) -> str:
    name = stats.get("device_type_string")
    if isinstance(name, str) and name:
        return name
    if kind != "GPU":
        return kind
    if "compute_cap_major" not in stats:
        return "GPU"
    capability = (int(stats.get("compute_cap_major", 0)), int(stats.get("compute_cap_minor", 0)))
    if stats.get("device_vendor") == "AMD":
        return "AMD " + _AMD_BY_CAPABILITY.get(
            capability, f"GPU (gfx{capability[0]}{capability[1]})"
        )
    if capability == (9, 0):
        memory = _float(stats.get("memory_size"))
        return "NVIDIA H200" if memory > 100e9 else "NVIDIA H100"
    part = _NVIDIA_BY_CAPABILITY.get(capability)
    return f"NVIDIA {part}" if part else f"NVIDIA GPU (sm_{capability[0]}{capability[1]})"


# --------------------------------------------------------------------------- TPU


@dataclass(frozen=True)
class DeviceClock:
    """Puts one TPU device's host-clock events on its device clock.

    TPU op events carry ``device_offset_ps`` / ``device_duration_ps``, the
    device's own timing, which XProf's op statistics use. Their host-clock
    times are that timing converted piece by piece, and the conversion drifts:
    on the v6e profile, host minus device moves by 260 ms over the capture, even
    inside one program execution, and host-clock durations differ by up to 10%.
    So every interval of a device goes on the device clock: ops by their device
    times, and host-clock-only events (module executions, ``Async XLA Ops``
    windows, steps, host step markers) by mapping each window onto it
    (:meth:`place`). The whole device timeline is shifted by one constant, the
    median host-minus-device offset of its ops, so that devices and hosts still
    line up roughly with each other.
    """

    host_start: np.ndarray  # host-clock starts of the ops with device times, sorted
    start_offset: np.ndarray  # each one's host start minus its placed device start
    end_offset: np.ndarray  # each one's host end minus its placed device end
    shift: int = 0  # placed time = device time + shift

    def place(self, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Host-clock windows [start, end) on the device clock.

        Each boundary moves as the op nearest it inside the window: the start as the
        first op that starts in the window moves its start, the end as the last one
        moves its end. So a window from a start op's start to its done op's end maps
        exactly onto theirs. A window with no op inside moves whole, as the next op's
        start (else the last op's).
        """
        start = np.asarray(start, dtype=np.int64)
        end = np.asarray(end, dtype=np.int64)
        n = len(self.host_start)
        if n == 0:
            return start, end
        first = np.searchsorted(self.host_start, start, side="left")
        last = np.searchsorted(self.host_start, end, side="left") - 1
        moved = self.start_offset[np.minimum(first, n - 1)]
        end_moved = np.where(first <= last, self.end_offset[np.clip(last, 0, n - 1)], moved)
        placed_start = start - moved
        return placed_start, np.maximum(end - end_moved, placed_start)

    def place_steps(self, steps: pd.DataFrame) -> pd.DataFrame:
        """A steps table (host step markers) on the device clock, in order (see _in_order)."""
        if not len(self.host_start):
            return steps
        start, end = self.place(steps["start_ps"].to_numpy(), steps["end_ps"].to_numpy())
        placed = steps.copy()
        placed["start_ps"] = start
        placed["end_ps"] = end
        return _in_order(placed)


_NONE = np.empty(0, dtype=np.int64)
IDENTITY_CLOCK = DeviceClock(_NONE, _NONE, _NONE)


def _tpu_ops(
    plane: Plane, module_names: dict[str, str]
) -> tuple[pd.DataFrame | dict[str, Any], pd.DataFrame, pd.DataFrame, DeviceClock]:
    meta = plane.metadata
    n_meta = len(meta.ids)
    op_names = [d or n for d, n in zip(meta.display_names, meta.names, strict=True)]
    categories = [c if isinstance(c, str) else "" for c in plane.metadata_stat("hlo_category", "")]
    program_ids = [str(p) if p is not None else "" for p in plane.metadata_stat("program_id")]
    classes = [classify_op(n, c) for n, c in zip(op_names, categories, strict=True)]
    costs = {
        name: np.append(np.asarray(plane.metadata_stat(name, np.nan), dtype=np.float64), np.nan)
        for name in ("flops", "model_flops", "bytes_accessed")
    }
    memory = _memory_breakdown(plane, n_meta)

    line = _line(plane, _TPU_OPS_LINE)
    ops: pd.DataFrame | dict[str, Any]
    clock = IDENTITY_CLOCK
    if line is None:
        ops = schema.empty("ops").drop(columns=["host", "device"])
    else:
        rows = meta.rows(line.metadata_id)
        start, dur, clock = _device_clock(line)
        module_by_meta = [module_names.get(p, "") for p in program_ids]
        ops = dict(
            {
                "line": _constant(line.name, len(rows)),
                "module": _spread(module_by_meta, rows),
                "program_id": _spread(program_ids, rows),
                "op": _spread(op_names, rows),
                "hlo_text": _spread(meta.names, rows),
                "category": _spread(categories, rows),
                "kind": _spread([c[0] for c in classes], rows, KIND_COMPUTE),
                "collective": _spread([c[1] for c in classes], rows),
                "async_role": _spread([c[2] for c in classes], rows),
                "start_ps": start,
                "dur_ps": dur,
                "self_ps": self_time(start, dur),
                **{name: column[rows] for name, column in costs.items()},
                **{name: column[rows] for name, column in memory.items()},
                "tf_op": _spread(_strings(plane.metadata_stat("tf_op", "")), rows),
                "source": _spread(_strings(plane.metadata_stat("source", "")), rows),
                "step": np.full(len(rows), -1, dtype=np.int64),
            }
        )
    modules = _tpu_modules(plane, clock)
    if line is not None:
        module = ops["module"]
        missing = np.asarray(module == "")
        if missing.any():
            filled = np.asarray(module, dtype=object)
            filled[missing] = _modules_by_time(modules, ops["start_ps"][missing])
            ops["module"] = pd.Categorical(filled)
    async_ops = _tpu_async(plane, op_names, categories, classes, clock, ops)
    return ops, modules, async_ops, clock


def _device_clock(line: Line) -> tuple[np.ndarray, np.ndarray, DeviceClock]:
    """Start and duration of TPU ops on the device clock, and that clock (see DeviceClock)."""
    device_offset = np.asarray(line.stat("device_offset_ps", -1))
    device_duration = np.asarray(line.stat("device_duration_ps", -1))
    if device_offset.dtype.kind not in "iu" or device_duration.dtype.kind not in "iu":
        return line.start_ps, line.duration_ps, IDENTITY_CLOCK
    use = (device_offset >= 0) & (device_duration >= 0)
    if not use.any():
        return line.start_ps, line.duration_ps, IDENTITY_CLOCK
    host_start = line.start_ps
    shift = int(np.median(host_start[use] - device_offset[use]))
    start = np.where(use, device_offset + shift, host_start)
    dur = np.where(use, device_duration, line.duration_ps)
    order = np.argsort(host_start[use], kind="stable")
    host_end = host_start + line.duration_ps
    clock = DeviceClock(
        host_start[use][order],
        (host_start - start)[use][order],
        (host_end - (start + dur))[use][order],
        shift,
    )
    return start, dur, clock


def _placed_times(line: Line, clock: DeviceClock) -> tuple[np.ndarray, np.ndarray]:
    """Start and duration of a TPU line's events on the device clock: from their own device
    times where they carry them (as Steps events do), else mapped by ``clock``."""
    host_start = line.start_ps
    start, end = clock.place(host_start, host_start + line.duration_ps)
    device_offset = np.asarray(line.stat("device_offset_ps", -1))
    device_duration = np.asarray(line.stat("device_duration_ps", -1))
    if (
        len(clock.host_start)
        and device_offset.dtype.kind in "iu"
        and device_duration.dtype.kind in "iu"
    ):
        use = (device_offset >= 0) & (device_duration >= 0)
        own = device_offset + clock.shift
        start = np.where(use, own, start)
        end = np.where(use, own + device_duration, end)
    return start, end - start


def _constant(value: str, n: int) -> pd.Categorical:
    return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=[value])


def _spread(values: list[str], rows: np.ndarray, default: str = "") -> pd.Categorical:
    """Per-event categorical from per-metadata strings (row -1: ``default``)."""
    codes, categories = pd.factorize(np.array([*values, default], dtype=object))
    return pd.Categorical.from_codes(codes[rows], categories=categories)


def _strings(values: np.ndarray | list[Any]) -> list[str]:
    return [v if isinstance(v, str) else "" for v in values]


def _memory_breakdown(plane: Plane, n: int) -> dict[str, np.ndarray]:
    """HBM / VMEM / CMEM read and write bytes per metadata row (NaN where not recorded)."""
    rows, operation, memory_space, size = plane.metadata_memory_breakdown()
    recorded = np.zeros(n + 1, dtype=bool)
    recorded[np.flatnonzero(_has_stat(plane, "memory_access_breakdown"))] = True
    columns = {}
    for space_code, space in _MEMORY_SPACES.items():
        for operation_code, direction in _MEMORY_OPERATIONS.items():
            column = np.where(recorded, 0.0, np.nan)
            pick = (memory_space == space_code) & (operation == operation_code)
            np.add.at(column, rows[pick], size[pick].astype(np.float64))
            columns[f"{space}_{direction}_bytes"] = column
    return columns


def _has_stat(plane: Plane, name: str) -> np.ndarray:
    """Whether each metadata row carries the stat ``name``."""
    stats = plane.metadata.stats
    has = np.zeros(len(plane.metadata.ids), dtype=bool)
    has[stats.owner[np.isin(stats.metadata_id, plane.stat_ids(name))]] = True
    return has


def _modules_by_time(modules: pd.DataFrame, starts: np.ndarray) -> list[str]:
    """Module of each op start, by which module execution contains it ("" for none)."""
    if modules.empty:
        return [""] * len(starts)
    ordered = modules.sort_values("start_ps", kind="stable")
    module_start = ordered["start_ps"].to_numpy(dtype=np.int64)
    module_end = module_start + ordered["dur_ps"].to_numpy(dtype=np.int64)
    names = ordered["module"].astype(str).tolist()
    index = np.searchsorted(module_start, starts, side="right") - 1
    return [
        names[i] if i >= 0 and s < module_end[i] else ""
        for i, s in zip(index.tolist(), np.asarray(starts).tolist(), strict=True)
    ]


def _tpu_modules(plane: Plane, clock: DeviceClock) -> pd.DataFrame:
    """Executions of the `XLA Modules` line, on the device clock: each runs from about its
    first op's start to its last op's end (see DeviceClock.place)."""
    line = _line(plane, _TPU_MODULES_LINE)
    if line is None:
        return schema.empty("modules").drop(columns=["host", "device"])
    rows = plane.metadata.rows(line.metadata_id)
    names = [""] * len(plane.metadata.names)
    program_ids = [""] * len(plane.metadata.names)
    for row in np.unique(rows[rows >= 0]).tolist():  # only the module entries, not every op's
        name = plane.metadata.names[row]
        names[row], program_ids[row] = split_module_name(name) or (name, "")
    start, dur = _placed_times(line, clock)
    return pd.DataFrame(
        {
            "module": _spread(names, rows),
            "program_id": _spread(program_ids, rows),
            "start_ps": start,
            "dur_ps": dur,
        }
    )


def _tpu_async(
    plane: Plane,
    op_names: list[str],
    categories: list[str],
    classes: list[tuple[str, str, str]],
    clock: DeviceClock,
    ops: pd.DataFrame | dict[str, Any],
) -> pd.DataFrame:
    """Windows of the `Async XLA Ops` line, on the device clock: each from its start op's
    start to its done op's end, the ops it names (see _ends_of_named_ops)."""
    line = _line(plane, _TPU_ASYNC_LINE)
    if line is None:
        return schema.empty("async_ops").drop(columns=["host", "device"])
    rows = plane.metadata.rows(line.metadata_id)
    done = _strings(line.stat("hlo_op", ""))
    start, dur = _placed_times(line, clock)
    # The event's display name is generic ("async-copy"); its HLO text names the start op.
    started = [
        instruction_name(text) if text.lstrip().startswith("%") else name
        for text, name in zip(plane.metadata.names, op_names, strict=True)
    ]
    start_op = np.array([*started, ""], dtype=object)[rows]
    ops_line = _line(plane, _TPU_OPS_LINE)
    if ops_line is not None and len(ops_line) and len(clock.host_start):
        host_start = line.start_ps
        host_end = host_start + line.duration_ps
        op_host_start = ops_line.start_ps
        op_host_end = op_host_start + ops_line.duration_ps
        op_name = np.asarray(ops["op"], dtype=object)
        op_start = np.asarray(ops["start_ps"])
        op_end = op_start + np.asarray(ops["dur_ps"])
        found_start = _nearest_named(start_op, host_start, op_name, op_host_start, op_start)
        found_end = _nearest_named(
            np.array(done, dtype=object), host_end, op_name, op_host_end, op_end
        )
        end = np.where(found_end >= 0, found_end, start + dur)
        start = np.where(found_start >= 0, found_start, start)
        dur = np.maximum(end - start, 0)
    return pd.DataFrame(
        {
            "op": pd.Categorical(start_op),
            "done_op": pd.Categorical(done),
            "category": _spread(categories, rows),
            "collective": _spread([c[1] for c in classes], rows),
            "start_ps": start,
            "dur_ps": dur,
        }
    )


def _nearest_named(
    names: np.ndarray,
    host_times: np.ndarray,
    op_names: np.ndarray,
    op_host_times: np.ndarray,
    op_placed_times: np.ndarray,
) -> np.ndarray:
    """For each (name, host time), the placed time of the op so named whose host time is
    nearest; -1 where no op has the name. Host times of one event and the ops it names agree,
    while several ops can share one host instant, so the name decides."""
    out = np.full(len(names), -1, dtype=np.int64)
    for name in set(names.tolist()):
        ask = np.flatnonzero(names == name)
        have = np.flatnonzero(op_names == name)
        if not len(have) or not name:
            continue
        order = np.argsort(op_host_times[have], kind="stable")
        times = op_host_times[have][order]
        placed = op_placed_times[have][order]
        at = np.searchsorted(times, host_times[ask])
        before = np.clip(at - 1, 0, len(times) - 1)
        after = np.clip(at, 0, len(times) - 1)
        pick = np.where(
            np.abs(times[before] - host_times[ask]) <= np.abs(times[after] - host_times[ask]),
            before,
            after,
        )
        out[ask] = placed[pick]
    return out


def _steps_from_line(line: Line, clock: DeviceClock) -> pd.DataFrame:
    assert line._plane is not None
    rows = line._plane.metadata.rows(line.metadata_id)
    names = [line._plane.metadata.names[r] if r >= 0 else "" for r in rows.tolist()]
    step_nums = line.stat("step_num", -1)
    numbers = [
        int(s) if s >= 0 else (int(n) if n.strip().isdigit() else i)
        for i, (s, n) in enumerate(zip(np.asarray(step_nums).tolist(), names, strict=True))
    ]
    start, dur = _placed_times(line, clock)
    frame = pd.DataFrame(
        {
            "step": np.array(numbers, dtype=np.int64),
            "start_ps": start,
            "end_ps": start + dur,
            "source": "steps_line",
        }
    )
    return _in_order(frame)


def _in_order(steps: pd.DataFrame) -> pd.DataFrame:
    """Steps sorted by start, none starting before the one before it ended (mapping windows
    onto a device clock can make neighbours overlap by the clocks' jitter)."""
    ordered = steps.sort_values("start_ps", kind="stable").reset_index(drop=True)
    start = ordered["start_ps"].to_numpy(dtype=np.int64)
    end = ordered["end_ps"].to_numpy(dtype=np.int64)
    if len(start) > 1:
        start = np.maximum(start, np.concatenate([[start[0]], np.maximum.accumulate(end)[:-1]]))
        end = np.maximum(end, start)
        ordered["start_ps"] = start
        ordered["end_ps"] = end
    return ordered


# --------------------------------------------------------------------------- GPU and CPU


# Host events that run one XLA program on one device: JAX 0.8's ``<module>:XLA GPU module``
# and the ``XlaModule:#hlo_module=...#`` annotation of other versions.
_HOST_EXECUTION_SUFFIX = ":XLA GPU module"
_HOST_EXECUTION_PREFIX = "XlaModule:"


@dataclass
class _HostExecutions:
    """Which host program execution launched each GPU kernel.

    A kernel carries the ``correlation_id`` of its host launch event; the launch
    lies inside the host event that ran the program (``jit_f:XLA GPU module``),
    one per call and device. Back-to-back calls of one jitted function are
    separate executions, which kernel order alone cannot tell apart.
    """

    correlation: np.ndarray  # correlation ids of the launch events, sorted
    launch_ps: np.ndarray  # their host-clock starts, same order
    threads: list[tuple[np.ndarray, np.ndarray]]  # per host line: executions' starts, ends

    @classmethod
    def of(cls, plane: Plane | None) -> _HostExecutions:
        correlation: list[np.ndarray] = []
        launch: list[np.ndarray] = []
        threads: list[tuple[np.ndarray, np.ndarray]] = []
        if plane is not None and plane.stat_ids("correlation_id"):
            is_execution = np.array(
                [
                    n.endswith(_HOST_EXECUTION_SUFFIX) or n.startswith(_HOST_EXECUTION_PREFIX)
                    for n in plane.metadata.names
                ]
                + [False],
                dtype=bool,
            )
            for line in plane.lines:
                if not len(line):
                    continue
                ids = np.asarray(line.stat("correlation_id", -1))
                if ids.dtype.kind in "iu" and (ids >= 0).any():
                    correlation.append(ids[ids >= 0])
                    launch.append(line.start_ps[ids >= 0])
                executions = np.flatnonzero(is_execution[plane.metadata.rows(line.metadata_id)])
                if len(executions):
                    start = line.start_ps[executions]
                    order = np.argsort(start, kind="stable")
                    end = start + line.duration_ps[executions]
                    threads.append((start[order], end[order]))
        ids = np.concatenate(correlation) if correlation else np.empty(0, dtype=np.int64)
        times = np.concatenate(launch) if launch else np.empty(0, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        return cls(ids[order], times[order], threads)

    def of_kernels(self, correlation_ids: np.ndarray) -> np.ndarray:
        """The execution index of each kernel (by its correlation id) on the host thread that
        launched most of them; _NO_RUN_ID where the profile does not say."""
        out = np.full(len(correlation_ids), _NO_RUN_ID, dtype=np.int64)
        if not len(self.correlation) or not self.threads:
            return out
        where = np.searchsorted(self.correlation, correlation_ids)
        where = np.minimum(where, len(self.correlation) - 1)
        found = self.correlation[where] == correlation_ids
        launch = self.launch_ps[where]
        best, best_hits = None, 0
        for start, end in self.threads:
            index = np.searchsorted(start, launch, side="right") - 1
            hits = found & (index >= 0) & (launch < end[np.maximum(index, 0)])
            if hits.sum() > best_hits:
                best, best_hits = (index, hits), int(hits.sum())
        if best is not None:
            index, hits = best
            out[hits] = index[hits]
        return out


def _stream_ops(
    plane: Plane, module_names: dict[str, str], executions: _HostExecutions
) -> tuple[pd.DataFrame, pd.DataFrame]:
    lines = [line for line in plane.lines if line.name.startswith(_GPU_STREAM_PREFIX) and len(line)]
    return _kernel_ops(plane, lines, module_names, executions)


def _host_thread_ops(
    plane: Plane, module_names: dict[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    return _kernel_ops(plane, [line for line in plane.lines if len(line)], module_names, None)


def _kernel_ops(
    plane: Plane,
    lines: list[Line],
    module_names: dict[str, str],
    executions: _HostExecutions | None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Op rows from events that carry ``hlo_op``/``hlo_module`` stats (or, on GPU, any kernel).

    ``executions`` is given for GPU planes; on host threads (XLA:CPU) ops say their
    execution themselves, with a ``run_id`` stat.
    """
    gpu = executions is not None
    parts: list[pd.DataFrame] = []
    meta = plane.metadata
    for line in lines:
        hlo_ops = line.stat("hlo_op")
        keep = np.array([v is not None for v in hlo_ops], dtype=bool)
        if not gpu:
            if not keep.any():
                continue
        else:
            keep[:] = True
        idx = np.flatnonzero(keep)
        rows = meta.rows(line.metadata_id[idx])
        kernels = [meta.names[r] if r >= 0 else "" for r in rows.tolist()]
        hlo = [hlo_ops[i] if isinstance(hlo_ops[i], str) else None for i in idx.tolist()]
        hlo_modules = line.stat("hlo_module")
        program_ids = line.stat("program_id")
        tf_ops = line.stat("tf_op")
        if executions is not None:
            correlation = np.asarray(line.stat("correlation_id", -1))
            execution = (
                executions.of_kernels(correlation[idx])
                if correlation.dtype.kind in "iu"
                else np.full(len(idx), _NO_RUN_ID, dtype=np.int64)
            )
        else:
            run_ids = np.asarray(line.stat("run_id", _NO_RUN_ID))
            execution = (
                run_ids[idx]
                if run_ids.dtype.kind in "iu"
                else np.full(len(idx), _NO_RUN_ID, dtype=np.int64)
            )
        module = []
        for i in idx.tolist():
            name = hlo_modules[i]
            if not isinstance(name, str) or not name:
                pid = program_ids[i]
                name = module_names.get(str(pid), "") if pid is not None else ""
            module.append(name)
        classes = [
            _gpu_classify(k, h, line.name) if gpu else classify_op(h or k)
            for k, h in zip(kernels, hlo, strict=True)
        ]
        start = line.start_ps[idx]
        dur = line.duration_ps[idx]
        ops = [h if h else k for h, k in zip(hlo, kernels, strict=True)]
        parts.append(
            pd.DataFrame(
                {
                    "line": line.name,
                    "module": module,
                    "program_id": [
                        str(program_ids[i]) if program_ids[i] is not None else ""
                        for i in idx.tolist()
                    ],
                    "op": ops,
                    "hlo_text": kernels,
                    "category": [
                        _derived_category(o, c[0]) for o, c in zip(ops, classes, strict=True)
                    ],
                    "kind": [c[0] for c in classes],
                    "collective": [c[1] for c in classes],
                    "async_role": [c[2] for c in classes],
                    "start_ps": start,
                    "dur_ps": dur,
                    "self_ps": self_time(start, dur),
                    "tf_op": _strings([tf_ops[i] for i in idx.tolist()]),
                    "source": "",
                    "step": np.full(len(idx), -1, dtype=np.int64),
                    "_execution": execution,
                }
            )
        )
    if not parts:
        empty = schema.empty("ops").drop(columns=["host", "device"])
        return empty, schema.empty("modules").drop(columns=["host", "device"])
    ops_frame = pd.concat(parts, ignore_index=True)
    modules = _module_runs(ops_frame)
    ops_frame = ops_frame.drop(columns="_execution")
    for name in (
        "flops",
        "model_flops",
        "bytes_accessed",
        "hbm_read_bytes",
        "hbm_write_bytes",
        "vmem_read_bytes",
        "vmem_write_bytes",
        "cmem_read_bytes",
        "cmem_write_bytes",
    ):
        ops_frame[name] = np.nan
    return ops_frame, modules


def _derived_category(op: str, kind: str) -> str:
    if kind == KIND_MEMCPY:
        return "memcpy"
    return op_base(op) or kind


def _module_runs(ops: pd.DataFrame) -> pd.DataFrame:
    """Module executions on a device.

    Ops are grouped by the execution the profile records for them (``run_id`` on
    XLA:CPU, the launching host execution on GPU): one execution per (module,
    execution), even when its ops ran on several threads or streams. Ops whose
    execution is unknown join the one before them. Without any recorded
    execution, an execution is a run of consecutive ops, by start, of one module.
    """
    with_module = ops[ops["module"] != ""].sort_values("start_ps", kind="stable")
    if with_module.empty:
        return schema.empty("modules").drop(columns=["host", "device"])
    names = with_module["module"].astype(str).to_numpy()
    execution = with_module["_execution"].to_numpy()
    known = execution != _NO_RUN_ID
    if known.any():
        # Forward-fill the unknown ones (leading ones take the first known execution).
        source = np.where(known, np.arange(len(known)), -1)
        source = np.maximum.accumulate(source)
        source[source < 0] = int(np.flatnonzero(known)[0])
        keys = pd.Series(names).str.cat(pd.Series(execution[source]).astype(str), sep="#")
        _, first_seen, run_index = np.unique(
            keys.to_numpy(), return_index=True, return_inverse=True
        )
    else:
        new_run = np.ones(len(names), dtype=bool)
        new_run[1:] = names[1:] != names[:-1]
        run_index = np.cumsum(new_run) - 1
        first_seen = np.flatnonzero(new_run)
    start = with_module["start_ps"].to_numpy()
    end = start + with_module["dur_ps"].to_numpy()
    runs = (
        pd.DataFrame({"run": run_index, "start": start, "end": end})
        .groupby("run")
        .agg(start_ps=("start", "min"), end_ps=("end", "max"))
    )
    first_seen = np.asarray(first_seen)[runs.index.to_numpy()]
    frame = pd.DataFrame(
        {
            "module": names[first_seen],
            "program_id": with_module["program_id"].to_numpy()[first_seen],
            "start_ps": runs["start_ps"].to_numpy(),
            "dur_ps": (runs["end_ps"] - runs["start_ps"]).to_numpy(),
        }
    )
    return frame.sort_values("start_ps", kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- steps


def _step_markers(plane: Plane) -> pd.DataFrame | None:
    """Host step markers: events with a ``step_num`` stat (``StepTraceAnnotation``)."""
    spans: dict[int, list[int]] = {}
    for line in plane.lines:
        if not len(line) or not plane.stat_ids("step_num"):
            continue
        owners = np.flatnonzero(np.isin(line.stats.metadata_id, plane.stat_ids("step_num")))
        if not len(owners):
            continue
        values = line.stat("step_num", -1)
        events = np.flatnonzero(np.asarray(values) >= 0)
        start = line.start_ps[events]
        end = start + line.duration_ps[events]
        for step, s, e in zip(
            np.asarray(values)[events].tolist(), start.tolist(), end.tolist(), strict=True
        ):
            span = spans.setdefault(int(step), [s, e])
            span[0], span[1] = min(span[0], s), max(span[1], e)
    if not spans:
        return None
    steps = sorted(spans)
    return pd.DataFrame(
        {
            "step": np.array(steps, dtype=np.int64),
            "start_ps": np.array([spans[s][0] for s in steps], dtype=np.int64),
            "end_ps": np.array([spans[s][1] for s in steps], dtype=np.int64),
            "source": "step_marker",
        }
    )


def _step_of(starts: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """The step each op start falls in, or -1 outside every step."""
    ordered = steps.sort_values("start_ps")
    index = window_of(starts, ordered["start_ps"].to_numpy(), ordered["end_ps"].to_numpy())
    return np.where(index >= 0, ordered["step"].to_numpy()[np.maximum(index, 0)], -1)


# --------------------------------------------------------------------------- self time


def self_time(start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each event's duration less the time of events nested inside it (one line's events).

    Most lines have no nesting, which one vectorised check finds; only clusters
    of events that do nest are walked with a stack.
    """
    n = len(start)
    if n < 2:
        return dur.astype(np.int64, copy=True)
    # By start, an enclosing event before what it encloses; most lines are already in order.
    in_order = bool(np.all(start[1:] > start[:-1]))
    order = np.arange(n) if in_order else np.lexsort((-dur, start))
    s, d = start[order], dur[order]
    e = s + d
    running_end = np.maximum.accumulate(e)
    nested = np.zeros(n, dtype=bool)
    nested[1:] = s[1:] < running_end[:-1]
    result = d.astype(np.int64, copy=True)
    if nested.any():
        cluster_starts = np.flatnonzero(~nested)
        cluster_ends = np.append(cluster_starts[1:], n)
        for begin, end in zip(cluster_starts.tolist(), cluster_ends.tolist(), strict=True):
            if end - begin > 1:
                _subtract_children(s, e, result, begin, end)
    out = np.empty(n, dtype=np.int64)
    out[order] = result
    return out


def _subtract_children(
    s: np.ndarray, e: np.ndarray, result: np.ndarray, begin: int, end: int
) -> None:
    stack: list[int] = []
    for i in range(begin, end):
        while stack and e[stack[-1]] <= s[i]:
            stack.pop()
        if stack:
            parent = stack[-1]
            result[parent] -= min(e[i], e[parent]) - s[i]
        stack.append(i)


# --------------------------------------------------------------------------- lines


def _lines_table(host: str, planes: list[Plane]) -> pd.DataFrame:
    rows = []
    for plane in planes:
        for line in plane.lines:
            start = line.start_ps
            rows.append(
                {
                    "host": host,
                    "plane": plane.name,
                    "line": line.name,
                    "events": len(line),
                    "first_ps": int(start.min()) if len(line) else 0,
                    "last_ps": int((start + line.duration_ps).max()) if len(line) else 0,
                }
            )
    return _frame("lines", rows)
