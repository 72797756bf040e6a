"""Build a host's tables (see :mod:`tpuperf.schema`, :mod:`tpuperf.tables`) from its decoded
XSpace, as columns.

Three platforms put their ops in different places (one module each):

- TPU (:mod:`tpuperf.build_tpu`): ``/device:TPU:N`` planes, ``XLA Ops`` line; per-op costs
  are stats of the event *metadata*, so they are looked up per metadata entry, then spread
  to the events by index.
- GPU (:mod:`tpuperf.build_gpu`): ``/device:GPU:N`` planes, ``Stream #N(...)`` lines;
  kernels name their HLO op and module in event stats (``hlo_op``, ``hlo_module``).
- CPU-only JAX (:mod:`tpuperf.build_cpu`): no device planes; XLA ops run on ``/host:CPU``
  thread lines as events with ``hlo_op`` / ``hlo_module`` stats, one CPU device per
  ``device_ordinal``.

This module finds the planes, builds each device, places steps and lists the lines. Tables are
kept per device (:class:`~tpuperf.tables.DeviceTables`), as :class:`~tpuperf.columns.Table`
columns without pandas: TPU op columns that come from the event metadata share one array of
metadata rows (see :mod:`tpuperf.columns`). Devices are built in threads: the large op lines
are decoded in C without holding the GIL (a small profile's in the calling thread, where
threads cost more than they save: :mod:`tpuperf._threads`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tpuperf import _threads
from tpuperf.build_cpu import HOST_PLANE, host_devices
from tpuperf.build_tpu import TPU_MODULES_LINE, SharedMetadata, tpu_ops
from tpuperf.columns import Strings, Table, distinct
from tpuperf.step_windows import dominant_module_steps, window_of
from tpuperf.tables import (
    EMPTY_ASYNC,
    IDENTITY_CLOCK,
    DeviceClock,
    DeviceTables,
    HostTables,
    find_line,
    in_order,
    placed_times,
    split_module_name,
    untimed_warning,
)
from tpuperf.xspace import Line, Plane, Space

if TYPE_CHECKING:
    from tpuperf.build_gpu import HostExecutions

_DEVICE_PLANE = re.compile(r"^/device:(TPU|GPU):(\d+)(.*)$")
_METADATA_PLANE = "/host:metadata"
_TASK_ENVIRONMENT_PLANE = "Task Environment"
_SPARSE_CORE_BASE = 1000  # device ids of SparseCore planes start here, apart from TensorCores
_STEPS_LINE = ("Steps", "Sparse Core Steps")


class Stopped(Exception):
    """A build given up because its ``stop`` said so: what it would make is had elsewhere."""


def build_host(
    host: str, space: Space, threads: int | None = None, stop: Callable[[], bool] | None = None
) -> HostTables:
    """All tables of one host's profile; device planes are built in ``threads`` threads.
    ``stop``, asked before each device is built, gives the build up (:class:`Stopped`) once
    it answers True."""
    planes_by_name = {plane.name: plane for plane in space.planes}
    module_names = _module_names(space.planes)
    host_plane = planes_by_name.get(HOST_PLANE)
    device_planes = []
    sparse_ordinal = 0
    for plane in space.planes:
        match = _DEVICE_PLANE.match(plane.name)
        if not match:
            continue
        kind, number, suffix = match.group(1), int(match.group(2)), match.group(3)
        sparse = "SparseCore" in suffix
        device_id = _SPARSE_CORE_BASE + sparse_ordinal if sparse else number
        sparse_ordinal += sparse
        device_planes.append((plane, kind, device_id, sparse))
    executions = _host_executions(host_plane, [kind for _, kind, _, _ in device_planes])

    markers = _step_markers(host_plane) if host_plane is not None else None
    shared = SharedMetadata()  # the metadata columns of the host's chips (build_tpu)

    def build(item: tuple[Plane, str, int, bool]) -> DeviceTables:
        if stop is not None and stop():
            raise Stopped
        plane, kind, device_id, sparse = item
        device = _device(plane, kind, device_id, sparse, host, module_names, executions, shared)
        _place_steps(device, markers)
        return device

    workers = min(threads or os.cpu_count() or 1, len(device_planes))
    with _threads.pool(workers, "tpuperf-decode") as pool:
        devices = list(pool.map(build, device_planes))

    warnings: list[str] = []
    protos = _hlo_protos(planes_by_name.get(_METADATA_PLANE))
    if not any(d.row["ops"] for d in devices) and host_plane is not None:
        cpu, cpu_warnings = host_devices(host, host_plane, module_names, protos)
        for device in cpu:
            _place_steps(device, markers)
        devices += cpu
        warnings += cpu_warnings
    for device in devices:
        if device.untimed:
            warnings.append(untimed_warning(f"{host}: device {device.device}", device.untimed))
    if not devices:
        warnings.append(f"{host}: no device planes and no XLA ops: this is a host-only profile")
    environment = planes_by_name.get(_TASK_ENVIRONMENT_PLANE)
    env_stats = environment.stats if environment is not None else {}
    return HostTables(
        host=host,
        devices=devices,
        lines=_lines_table(space.planes),
        hostnames=list(space.hostnames),
        versions=_versions(space.planes),
        capture_start_ns=_int_or_none(env_stats.get("profile_start_time")),
        capture_stop_ns=_int_or_none(env_stats.get("profile_stop_time")),
        warnings=warnings,
        hlo_protos=protos,
    )


def _place_steps(device: DeviceTables, markers: Table | None) -> None:
    """The device's steps (its own Steps line, else the host's step markers, else the periods
    of its dominant module) and each op's step."""
    if device.steps is None and device.row["ops"]:
        # Host step markers are on the host clock: each device gets them on its own clock.
        device.steps = (
            (device.clock or IDENTITY_CLOCK).place_steps(markers)
            if markers is not None
            else dominant_module_steps(device.modules)
        )
    if device.steps is not None and device.steps.n:
        device.ops = device.ops.with_columns(
            step=_step_of(device.ops.array("start_ps"), device.steps)
        )
    device.clock = None  # its job (placing host-clock windows) is done; it is large


def _hlo_protos(plane: Plane | None) -> dict[str, bytes]:
    """The metadata plane's ``Hlo Proto`` stats, by the name of their event metadata."""
    if plane is None or not plane.stat_ids("Hlo Proto"):
        return {}
    values = plane.metadata_stat("Hlo Proto")
    return {
        name: value
        for name, value in zip(plane.metadata.names, values, strict=True)
        if isinstance(value, bytes) and value
    }


def _host_executions(host_plane: Plane | None, kinds: list[str]) -> HostExecutions | None:
    """Which host program execution launched each GPU kernel (:mod:`tpuperf.build_gpu`);
    None on a host without GPU planes, which does not import that module."""
    if "GPU" not in kinds:
        return None
    from tpuperf.build_gpu import HostExecutions

    return HostExecutions.of(host_plane)


def _device(
    plane: Plane,
    kind: str,
    device_id: int,
    sparse: bool,
    host: str,
    module_names: dict[str, str],
    executions: HostExecutions | None,
    shared: SharedMetadata | None = None,
) -> DeviceTables:
    clock = None
    untimed = 0
    if kind == "TPU":
        ops, modules, async_ops, clock = tpu_ops(plane, module_names, shared)
    else:
        from tpuperf.build_gpu import HostExecutions, stream_ops

        ops, modules, untimed = stream_ops(plane, module_names, executions or HostExecutions.none())
        async_ops = EMPTY_ASYNC
    steps_line = find_line(plane, _STEPS_LINE)
    steps = (
        _steps_from_line(steps_line, clock or IDENTITY_CLOCK)
        if steps_line is not None and len(steps_line)
        else None
    )
    # A large plane's decoded events are not needed again.
    plane.release_stats()
    return DeviceTables(
        host=host,
        device=device_id,
        row=_device_row(plane, host, device_id, kind, sparse, ops.n),
        ops=ops,
        modules=modules,
        async_ops=async_ops,
        steps=steps,
        clock=clock,
        untimed=untimed,
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


def _module_names(planes: list[Plane]) -> dict[str, str]:
    """program_id -> module name, from ``name(program_id)`` metadata: the events of module
    lines on device planes, every entry of the metadata plane."""
    names: dict[str, str] = {}
    for plane in planes:
        if plane.name == _METADATA_PLANE:
            candidates = plane.metadata.names
        elif _DEVICE_PLANE.match(plane.name):
            # Only what module executions name: the plane's other metadata (ops, steps) is
            # many thousands of names, none of them a module.
            line = find_line(plane, TPU_MODULES_LINE)
            if line is None or not len(line):
                continue
            rows = distinct(plane.metadata.rows(line.int_events(()).metadata_id))
            candidates = [plane.metadata.names[r] for r in rows.tolist() if r >= 0]
        else:
            continue
        for name in candidates:
            split = split_module_name(name)
            if split:
                names.setdefault(split[1], split[0])
    return names


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


def _float(value: Any) -> float:
    """A positive, finite number from a stat; NaN (unknown) for anything else (a string, NaN,
    infinity, zero or less: what a broken writer puts where a peak or a size goes)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return float("nan")
    number = float(value)
    return number if math.isfinite(number) and number > 0 else float("nan")


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


def _decimal_names(rows: np.ndarray, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The ``rows`` whose name is a number (decimal digits that fit an int64, as int() reads
    them), and those numbers. A TPU names its steps by their numbers, thousands of them: when
    every name is one, they are checked as one string and read in one pass."""
    lengths = np.fromiter(map(len, names), dtype=np.int64, count=len(names))
    numeric = (lengths > 0) & (lengths <= 18)
    if numeric.all() and "".join(names).isdecimal():
        return rows, np.fromiter(map(int, names), dtype=np.int64, count=len(names))
    numeric &= np.fromiter(map(str.isdecimal, names), dtype=bool, count=len(names))
    kept = [int(name) for name, ok in zip(names, numeric.tolist(), strict=True) if ok]
    return rows[numeric], np.array(kept, dtype=np.int64)


def _steps_from_line(line: Line, clock: DeviceClock) -> Table:
    """Steps of a `Steps` line: numbered by their ``step_num`` stat, else by their name when it
    is a number (as the metadata of TPU steps is), else by their position."""
    assert line._plane is not None
    plane = line._plane
    events = line.int_events(("step_num",))
    step_num = events.stats["step_num"]
    numbers = step_num
    unnumbered = step_num < 0
    if unnumbered.any():  # steps without a step_num stat: their name, else their position
        rows = plane.metadata.rows(events.metadata_id[unnumbered])
        named = np.full(len(plane.metadata.names) + 1, -1, dtype=np.int64)
        used = distinct(rows[rows >= 0])
        names = list(map(str.strip, map(plane.metadata.names.__getitem__, used.tolist())))
        used, numbers_of = _decimal_names(used, names)
        named[used] = numbers_of
        by_name = named[np.where(rows >= 0, rows, len(named) - 1)]
        position = np.flatnonzero(unnumbered)
        numbers = step_num.copy()
        numbers[unnumbered] = np.where(by_name >= 0, by_name, position)
    start, dur = placed_times(line, clock)
    return in_order(
        Table(
            {
                "step": numbers,
                "start_ps": start,
                "end_ps": start + dur,
                "source": Strings.constant("steps_line", len(numbers)),
            }
        )
    )


def _step_markers(plane: Plane) -> Table | None:
    """Host step markers: events with a ``step_num`` stat (``StepTraceAnnotation``)."""
    if not plane.stat_ids("step_num"):
        return None
    spans: dict[int, list[int]] = {}
    for line in plane.lines:
        if not len(line):
            continue
        events = line.int_events(("step_num",), keep="step_num")
        values = events.stats["step_num"]
        kept = np.flatnonzero(values >= 0)
        start = events.start_ps(line.timestamp_ns)[kept]
        end = start + events.duration_ps[kept]
        for step, s, e in zip(values[kept].tolist(), start.tolist(), end.tolist(), strict=True):
            span = spans.setdefault(int(step), [s, e])
            span[0], span[1] = min(span[0], s), max(span[1], e)
    if not spans:
        return None
    steps = sorted(spans)
    return Table(
        {
            "step": np.array(steps, dtype=np.int64),
            "start_ps": np.array([spans[s][0] for s in steps], dtype=np.int64),
            "end_ps": np.array([spans[s][1] for s in steps], dtype=np.int64),
            "source": Strings.constant("step_marker", len(steps)),
        }
    )


def _step_of(starts: np.ndarray, steps: Table) -> np.ndarray:
    """The step each op start falls in, or -1 outside every step."""
    order = np.argsort(steps.array("start_ps"), kind="stable")
    index = window_of(starts, steps.array_at("start_ps", order), steps.array_at("end_ps", order))
    numbers = steps.array_at("step", order)
    # Step numbers are small: 4 bytes an op, not 8 (the DataFrame view widens them again).
    small = len(numbers) == 0 or (numbers.min() >= -(2**31) and numbers.max() < 2**31)
    numbers = numbers.astype(np.int32) if small else numbers
    # -1 (outside every step) first, so that the window index plus one picks the number.
    index += 1
    return np.concatenate([np.full(1, -1, dtype=numbers.dtype), numbers])[index]


def _lines_table(planes: list[Plane]) -> Table:
    """Every line of every plane: its event count and extent, read without keeping events."""
    plane_names, line_names, events, first, last = [], [], [], [], []
    for plane in planes:
        for line in plane.lines:
            plane_names.append(plane.name)
            line_names.append(line.name)
            events.append(len(line))
            low, high = line.extent()
            first.append(low)
            last.append(high)
    return Table(
        {
            "plane": Strings.from_list(plane_names),
            "line": Strings.from_list(line_names),
            "events": np.array(events, dtype=np.int64),
            "first_ps": np.array(first, dtype=np.int64),
            "last_ps": np.array(last, dtype=np.int64),
        }
    )
