"""Build a host's tables (see :mod:`tpuperf.schema`) from its decoded XSpace, as columns.

Three platforms put their ops in different places:

- TPU: ``/device:TPU:N`` planes, ``XLA Ops`` line; per-op costs are stats of
  the event *metadata*, so they are looked up per metadata entry, then spread
  to the events by index.
- GPU: ``/device:GPU:N`` planes, ``Stream #N(...)`` lines; kernels name their
  HLO op and module in event stats (``hlo_op``, ``hlo_module``).
- CPU-only JAX: no device planes; XLA ops run on ``/host:CPU`` thread lines as
  events with ``hlo_op`` / ``hlo_module`` stats, and become a CPU device 0.

Tables are kept per device (:class:`DeviceTables`), as :class:`~tpuperf.columns.Table`
columns without pandas: TPU op columns that come from the event metadata share one array of
metadata rows (see :mod:`tpuperf.columns`). Devices are built in threads: the large op lines
are decoded in C without holding the GIL.
"""

from __future__ import annotations

import functools
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tpuperf.columns import (
    Lookup,
    Strings,
    Table,
    concat_strings,
    distinct,
    factorize,
    median,
)
from tpuperf.schema import KIND_ASYNC_COPY, KIND_COLLECTIVE, KIND_COMPUTE, KIND_MEMCPY
from tpuperf.step_windows import dominant_module_steps, window_of
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

# HLO op base names (no ".N" suffix, no "-start"/"-done"; "_" read as "-") that are
# collectives, in XLA's spelling and in JAX's: shard_map and pmap name an instruction after
# the primitive that made it (all_gather.3, reduce_scatter.7, psum_invariant, ppermute).
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
    "psum": "all-reduce",
    "pmean": "all-reduce",
    "pmax": "all-reduce",
    "pmin": "all-reduce",
    "psum-invariant": "all-reduce",
    "psum-scatter": "reduce-scatter",
    "ppermute": "collective-permute",
    "pshuffle": "collective-permute",
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


def _split_role(name: str) -> tuple[str, str]:
    """(base, async role) of an op name or opcode: ``all_gather-start.3`` -> (all-gather,
    start)."""
    base = op_base(name).replace("_", "-")
    for suffix in ("-start", "-done", "-update"):
        if base.endswith(suffix):
            return base[: -len(suffix)], "start" if suffix == "-start" else "done"
    return base, ""


def collective_of(name: str) -> str:
    """The collective an op name or opcode is (all-reduce, ...), or ""."""
    return COLLECTIVES.get(_split_role(name)[0], "")


@functools.lru_cache(maxsize=65536)  # chips of one program share their op names
def classify_op(name: str, category: str = "") -> tuple[str, str, str]:
    """(kind, collective, async_role) of an HLO op from its name and its opcode (the HLO
    proto's, or TPU's hlo_category), which wins where it names a collective."""
    base, role = _split_role(name)
    opcode, opcode_role = _split_role(category) if category else ("", "")
    collective = COLLECTIVES.get(opcode, "") or COLLECTIVES.get(base, "")
    if collective:
        return KIND_COLLECTIVE, collective, opcode_role or role
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
class DeviceTables:
    """One device's tables: schema.TABLES' columns but ``host`` and ``device`` (constant)."""

    host: str
    device: int
    row: dict[str, Any]  # the devices table's row
    ops: Table
    modules: Table
    async_ops: Table
    steps: Table | None = None
    clock: DeviceClock | None = None  # TPU: the device clock (see DeviceClock)
    # Waiting for peers inside collectives (XLA:CPU's Rendezvous events): schema "waits".
    waits: Table | None = None
    untimed: int = 0  # events left out: their times are past what int64 picoseconds hold


@dataclass
class HostTables:
    host: str
    devices: list[DeviceTables]
    lines: Table  # plane, line, events, first_ps, last_ps
    hostnames: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    capture_start_ns: int | None = None
    capture_stop_ns: int | None = None
    warnings: list[str] = field(default_factory=list)
    # Serialized xla.HloProto per module (`name(program_id)`), from the metadata plane: read
    # only when scope data is asked for (tpuperf/scopes.py).
    hlo_protos: dict[str, bytes] = field(default_factory=dict)


def build_host(host: str, space: Space, threads: int | None = None) -> HostTables:
    """All tables of one host's profile; device planes are built in ``threads`` threads."""
    planes_by_name = {plane.name: plane for plane in space.planes}
    module_names = _module_names(space.planes)
    host_plane = planes_by_name.get(_HOST_PLANE)
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
    executions = (
        _HostExecutions.of(host_plane)
        if any(kind == "GPU" for _, kind, _, _ in device_planes)
        else _HostExecutions.none()
    )

    markers = _step_markers(host_plane) if host_plane is not None else None

    def build(item: tuple[Plane, str, int, bool]) -> DeviceTables:
        plane, kind, device_id, sparse = item
        device = _device(plane, kind, device_id, sparse, host, module_names, executions)
        _place_steps(device, markers)
        return device

    workers = min(threads or os.cpu_count() or 1, len(device_planes))
    if workers > 1:
        with ThreadPoolExecutor(workers, thread_name_prefix="tpuperf-decode") as pool:
            devices = list(pool.map(build, device_planes))
    else:
        devices = [build(item) for item in device_planes]

    warnings: list[str] = []
    protos = _hlo_protos(planes_by_name.get(_METADATA_PLANE))
    if not any(d.row["ops"] for d in devices) and host_plane is not None:
        cpu, cpu_warnings = _host_devices(host, host_plane, module_names, protos)
        for device in cpu:
            _place_steps(device, markers)
        devices += cpu
        warnings += cpu_warnings
    for device in devices:
        if device.untimed:
            warnings.append(_untimed_warning(f"{host}: device {device.device}", device.untimed))
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


# --------------------------------------------------------------------------- collectives

# Bytes per element of xla.PrimitiveType values (xla/xla_data.proto): PRED 1, S8 2, S16 3,
# S32 4, S64 5, U8 6, U16 7, U32 8, U64 9, F16 10, F32 11, F64 12, C64 15, BF16 16, C128 18,
# S4 21, U4 22, and the 8-bit floats 19, 20, 23-25, 28, 29, 31. TUPLE 13, OPAQUE 14 and
# TOKEN 17 hold no data of their own.
_ELEMENT_BYTES: dict[int, float] = {
    1: 1,
    2: 1,
    3: 2,
    4: 4,
    5: 8,
    6: 1,
    7: 2,
    8: 4,
    9: 8,
    10: 2,
    11: 4,
    12: 8,
}
_ELEMENT_BYTES |= {15: 8, 16: 2, 18: 16, 21: 0.5, 22: 0.5}
_ELEMENT_BYTES |= dict.fromkeys((19, 20, 23, 24, 25, 28, 29, 31), 1)
# The same by the name HLO text prints.
_TEXT_ELEMENT_BYTES: dict[str, float] = {
    "pred": 1,
    "s8": 1,
    "u8": 1,
    "s16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
}
_TEXT_ELEMENT_BYTES |= {"s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8}
_TEXT_ELEMENT_BYTES |= {"c128": 16, "s4": 0.5, "u4": 0.5}
_TEXT_ARRAY = re.compile(r"\b([a-z]+\d*(?:e\d+m\d+\w*)?)\[([\d,]*)\]")
_TEXT_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.+?)\s+([\w\-]+)\(")
_TEXT_GROUPS_EXPLICIT = re.compile(r"replica_groups=\{\{([\d,\s]*)\}")
_TEXT_GROUPS_IOTA = re.compile(r"replica_groups=\[(\d+),(\d+)\]<=")
_TEXT_GROUPS_MESH = re.compile(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}")
_TEXT_PAIRS = re.compile(r"source_target_pairs=\{((?:\{\d+,\d+\},?)*)\}")


@dataclass(frozen=True)
class HloCollective:
    """What one collective instruction moves and among how many devices."""

    opcode: str  # all-reduce, all-gather-start, ...
    bytes: float  # of its result (the gathered or reduced buffer); NaN when unknown
    # Devices per replica group; EVERY_DEVICE when the groups are empty (all devices take
    # part); None when the instruction does not say (a -done half: its -start says).
    group_size: int | None
    dtype: str = ""  # the element type of its result (f32, bf16, ...); "mixed" or "" unknown
    sliced: bool = False  # its result is only sliced afterwards (a reduce-scatter would do)
    operand: int = -1  # the instruction id of its first operand (-1: unknown)


# xla.PrimitiveType values by the name HLO text prints, for the dtypes advice names.
_ELEMENT_NAMES = {1: "pred", 4: "s32", 5: "s64", 10: "f16", 11: "f32", 12: "f64", 16: "bf16"}
# Ops that pass a value through unchanged, which a slice may follow.
_PASS_THROUGH = {"get-tuple-element", "bitcast", "copy", "reshape"}
_SLICES = {"slice", "dynamic-slice"}


def hlo_collectives(data: bytes) -> dict[str, HloCollective]:
    """The collective instructions of a serialized ``xla.HloProto``, by name: opcode, the
    bytes and element type of the result, the replica-group size (explicit groups, iota
    groups, mesh axes or permute pairs), whether the result is only sliced afterwards, and
    its first operand. Raises the protobuf runtime's error when ``data`` is not one."""
    from tpuperf import _hlo_schema

    module = _hlo_schema.HloProto.FromString(data).hlo_module
    slicing = {c.id for c in module.computations if _slices_a_parameter(c)}
    out = {}
    for computation in module.computations:
        users: dict[int, list[Any]] = {}
        for instruction in computation.instructions:
            for operand in instruction.operand_ids:
                users.setdefault(int(operand), []).append(instruction)
        for instruction in computation.instructions:
            if not collective_of(instruction.opcode):
                continue
            shape = instruction.shape
            if instruction.opcode.endswith("-start") and len(shape.tuple_shapes) >= 2:
                shape = shape.tuple_shapes[1]  # (operands, result, ...): the result
            types = {_ELEMENT_NAMES.get(int(t), "") for t in _element_types(shape)}
            out[instruction.name] = HloCollective(
                instruction.opcode,
                _proto_bytes(shape),
                _proto_group_size(instruction),
                dtype=types.pop() if len(types) == 1 else ("mixed" if types else ""),
                sliced=_only_sliced(int(instruction.id), users, slicing),
                operand=int(instruction.operand_ids[0]) if len(instruction.operand_ids) else -1,
            )
    return out


def _element_types(shape: Any) -> list[int]:
    if len(shape.tuple_shapes):
        return [t for s in shape.tuple_shapes for t in _element_types(s)]
    return [int(shape.element_type)]


def _slices_a_parameter(computation: Any) -> bool:
    """Whether a (fused) computation slices one of its parameters."""
    parameters = {int(i.id) for i in computation.instructions if i.opcode == "parameter"}
    return any(
        i.opcode in _SLICES and len(i.operand_ids) and int(i.operand_ids[0]) in parameters
        for i in computation.instructions
    )


def _only_sliced(start: int, users: dict[int, list[Any]], slicing: set[int]) -> bool:
    """Whether every use of instruction ``start``'s value, through pass-through ops, is a slice
    (or a fusion that slices it): the reduced buffer is only needed in part."""
    seen, frontier, uses = {start}, [start], 0
    while frontier:
        for user in users.get(frontier.pop(), []):
            uses += 1
            if user.opcode in _PASS_THROUGH:
                if int(user.id) not in seen:
                    seen.add(int(user.id))
                    frontier.append(int(user.id))
            elif user.opcode in _SLICES or (
                user.opcode == "fusion" and slicing.intersection(user.called_computation_ids)
            ):
                continue
            else:
                return False
    return uses > 0


def _proto_bytes(shape: Any) -> float:
    if len(shape.tuple_shapes):
        return float(sum(_proto_bytes(s) for s in shape.tuple_shapes))
    size = _ELEMENT_BYTES.get(int(shape.element_type))
    if size is None:
        return 0.0 if int(shape.element_type) in (13, 14, 17) else float("nan")
    return float(math.prod(int(d) for d in shape.dimensions) * size)


EVERY_DEVICE = 0  # HloCollective.group_size of empty replica groups


def _proto_group_size(instruction: Any) -> int | None:
    mesh = instruction.mesh_device_list
    if len(mesh.mesh.axes):
        sizes = [int(a.size) for a in mesh.mesh.axes]
        picked = [int(a.mesh_axis_index) for a in mesh.axes] or list(range(len(sizes)))
        return math.prod(sizes[i] for i in picked if 0 <= i < len(sizes))
    devices = instruction.collective_device_list
    if devices.iota_replica_group_list.num_devices_per_group:
        return int(devices.iota_replica_group_list.num_devices_per_group)
    groups = devices.replica_groups or instruction.replica_groups
    if len(groups) and len(groups[0].replica_ids):
        return len(groups[0].replica_ids)
    if len(instruction.source_target_pairs):
        pairs = instruction.source_target_pairs
        return len({p.source for p in pairs} | {p.target for p in pairs})
    return None if instruction.opcode.endswith("-done") else EVERY_DEVICE


def text_collective(hlo_text: str) -> tuple[float, int | None, str]:
    """(result bytes, replica-group size, element type) of a collective from its HLO text
    (``%all-reduce.1 = f32[1024]{0} all-reduce(...), replica_groups=[2,4]<=[8]``); NaN and None
    where the text does not say, EVERY_DEVICE for empty replica groups."""
    match = _TEXT_INSTRUCTION.match(hlo_text)
    nbytes = float("nan")
    dtype = ""
    if match:
        shape, opcode = match.groups()
        arrays = _TEXT_ARRAY.findall(shape)
        if opcode.endswith("-start") and shape.startswith("(") and len(arrays) >= 2:
            arrays = arrays[1:2]  # (operand, result, ...): the result
        sizes = [_TEXT_ELEMENT_BYTES.get(t, 1 if "f8" in t else None) for t, _ in arrays]
        types = {t for t, _ in arrays}
        dtype = types.pop() if len(types) == 1 else ("mixed" if types else "")
        if arrays and None not in sizes:
            nbytes = float(
                sum(
                    math.prod(int(d) for d in dims.split(",") if d) * (size or 0)
                    for (_, dims), size in zip(arrays, sizes, strict=True)
                )
            )
    return nbytes, _text_group_size(hlo_text), dtype


def _text_group_size(hlo_text: str) -> int | None:
    if match := _TEXT_GROUPS_EXPLICIT.search(hlo_text):
        return len([x for x in match.group(1).split(",") if x.strip()])
    if match := _TEXT_GROUPS_IOTA.search(hlo_text):
        return int(match.group(2))
    if match := _TEXT_GROUPS_MESH.search(hlo_text):
        sizes = dict(re.findall(r"'?([\w.]+)'?\s*=\s*(\d+)", match.group(1)))
        picked = re.findall(r"'?([\w.]+)'?", match.group(2)) or list(sizes)
        return math.prod(int(sizes[a]) for a in picked if a in sizes)
    if match := _TEXT_PAIRS.search(hlo_text):
        ids = re.findall(r"\d+", match.group(1))
        return len(set(ids)) or None
    if "replica_groups={}" in hlo_text:
        return EVERY_DEVICE
    return None


def collective_facts(protos: dict[str, bytes]) -> dict[tuple[str, str], HloCollective]:
    """Every collective of a host's HLO protos by (proto key ``name(program_id)``, op); a
    damaged proto adds nothing."""
    out: dict[tuple[str, str], HloCollective] = {}
    for key, data in protos.items():
        try:
            found = hlo_collectives(data)
        except Exception:  # a damaged module costs its collectives' facts, not the command
            continue
        for name, fact in found.items():
            out[key, name] = fact
    return out


def _device(
    plane: Plane,
    kind: str,
    device_id: int,
    sparse: bool,
    host: str,
    module_names: dict[str, str],
    executions: _HostExecutions,
) -> DeviceTables:
    clock = None
    untimed = 0
    if kind == "TPU":
        ops, modules, async_ops, clock = _tpu_ops(plane, module_names)
    else:
        ops, modules, untimed = _stream_ops(plane, module_names, executions)
        async_ops = _EMPTY_ASYNC
    steps_line = _line(plane, _STEPS_LINE)
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


def split_module_name(name: str) -> tuple[str, str] | None:
    """``jit_train_step(16)`` -> (``jit_train_step``, ``16``); None for other names."""
    if not name.endswith(")"):
        return None
    head, _, digits = name[:-1].rpartition("(")
    return (head, digits) if head and digits.isdecimal() else None


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
            line = _line(plane, _TPU_MODULES_LINE)
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


def _line(plane: Plane, names: tuple[str, ...]) -> Line | None:
    """The plane's line with the first of ``names`` that it has."""
    by_name = {line.name: line for line in plane.lines}
    return next((by_name[name] for name in names if name in by_name), None)


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


def _cpu_device_row(host: str, device: int, n_ops: int) -> dict[str, Any]:
    return {
        "host": host,
        "device": device,
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
    """A positive, finite number from a stat; NaN (unknown) for anything else (a string, NaN,
    infinity, zero or less: what a broken writer puts where a peak or a size goes)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return float("nan")
    number = float(value)
    return number if math.isfinite(number) and number > 0 else float("nan")


def _costs(values: np.ndarray | list[Any]) -> np.ndarray:
    """A cost stat (FLOPs, bytes) per metadata row as float64: NaN (unknown) where it is not
    a number from 0 up to 2**64 (XLA writes them as 64-bit integers; 1e308 is a broken writer's,
    and would make every sum infinite)."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
        costs = values.astype(np.float64)
    else:
        costs = np.array(
            [
                v if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan
                for v in values
            ],
            dtype=np.float64,
        )
    costs[~np.isfinite(costs) | (costs < 0) | (costs >= 2.0**64)] = np.nan
    return costs


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

    def place_steps(self, steps: Table) -> Table:
        """A steps table (host step markers) on the device clock, in order (see _in_order)."""
        if not len(self.host_start):
            return steps
        start, end = self.place(steps.array("start_ps"), steps.array("end_ps"))
        return _in_order(steps.with_columns(start_ps=start, end_ps=end))


_NONE = np.empty(0, dtype=np.int64)
IDENTITY_CLOCK = DeviceClock(_NONE, _NONE, _NONE)

_COST_STATS = ("flops", "model_flops", "bytes_accessed")


def _tpu_ops(plane: Plane, module_names: dict[str, str]) -> tuple[Table, Table, Table, DeviceClock]:
    meta = plane.metadata
    n_meta = len(meta.ids)
    line = _line(plane, _TPU_OPS_LINE)
    async_line = _line(plane, _TPU_ASYNC_LINE)
    async_rows = _metadata_rows(plane, async_line.metadata_id) if async_line is not None else None
    async_used = distinct(async_rows).tolist() if async_rows is not None else []
    clock = IDENTITY_CLOCK
    host_times: tuple[np.ndarray, np.ndarray] | None = None
    rows, used = None, []
    if line is not None:
        events = line.int_events(("device_offset_ps", "device_duration_ps"))
        rows = _metadata_rows(plane, events.metadata_id).astype(np.int32)
        start, dur, clock = device_clock(events, line.timestamp_ns)
        # The ops' host-clock times: what async windows are matched to them by.
        host_times = (events.start_ps(line.timestamp_ns), events.duration_ps)
        del events
        used = distinct(rows).tolist()
    # Names and classes of the metadata rows the two lines use, only: a plane's metadata also
    # names every step and module execution, thousands on a long capture.
    op_meta = _OpMeta.of(plane, sorted({*used, *async_used} - {n_meta}))
    if line is None:
        ops = _empty_ops()
    else:
        assert rows is not None

        def per_meta(values: list[str], default: str = "") -> Strings:
            return _meta_strings([*values, default], rows, used)

        costs = {
            name: Lookup(
                rows,
                np.append(_costs(plane.metadata_stat(name, np.nan)), np.nan),
            )
            for name in _COST_STATS
        }
        memory = {
            name: Lookup(rows, values) for name, values in _memory_breakdown(plane, n_meta).items()
        }
        classes = op_meta.classes
        ops = Table(
            {
                "line": Strings(rows, (line.name,), np.zeros(n_meta + 1, dtype=np.int32)),
                "module": per_meta([module_names.get(p, "") for p in op_meta.program_ids]),
                "program_id": per_meta(op_meta.program_ids),
                "op": per_meta(op_meta.op_names),
                "hlo_text": per_meta(meta.names),
                "category": per_meta(op_meta.categories),
                "kind": per_meta([c[0] for c in classes], KIND_COMPUTE),
                "collective": per_meta([c[1] for c in classes]),
                "async_role": per_meta([c[2] for c in classes]),
                "start_ps": start,
                "dur_ps": dur,
                "self_ps": self_time(start, dur),
                **costs,
                **memory,
                "tf_op": per_meta(op_meta.texts(plane, "tf_op")),
                "source": per_meta(op_meta.texts(plane, "source")),
                "step": np.full(len(rows), -1, dtype=np.int64),
            }
        )
    modules = _tpu_modules(plane, clock)
    if line is not None:
        module = ops.strings("module")
        missing = module.eq("")
        if missing.any():
            names = np.array(module.tolist(), dtype=object)
            names[missing] = _modules_by_time(modules, ops.array_at("start_ps", missing))
            ops = ops.with_columns(module=Strings.from_list(names.tolist()))
    async_ops = (
        _tpu_async(plane, async_line, async_rows, async_used, op_meta, clock, ops, host_times)
        if async_line is not None and async_rows is not None
        else _EMPTY_ASYNC
    )
    return ops, modules, async_ops, clock


def _metadata_rows(plane: Plane, metadata_id: np.ndarray) -> np.ndarray:
    """The metadata row of each event; an unknown id points at the extra last row ("", NaN)."""
    rows = plane.metadata.rows(metadata_id)
    rows[rows < 0] = len(plane.metadata.ids)
    return rows


_COMPUTE = (KIND_COMPUTE, "", "")


@dataclass(frozen=True)
class _OpMeta:
    """Per metadata row of a TPU plane, for the rows its op lines use (``rows``; the others
    hold "" and are never read): the op's name, hlo_category, program id and classes."""

    rows: list[int]
    op_names: list[str]
    categories: list[str]
    program_ids: list[str]
    classes: list[tuple[str, str, str]]

    @classmethod
    def of(cls, plane: Plane, rows: list[int]) -> _OpMeta:
        meta = plane.metadata
        n = len(meta.ids)
        op_names, categories, program_ids = [""] * n, [""] * n, [""] * n
        classes = [_COMPUTE] * n
        category_stat = plane.metadata_stat("hlo_category", "")
        program_stat = plane.metadata_stat("program_id")
        for row in rows:
            name = op_names[row] = meta.display_names[row] or meta.names[row]
            category = category_stat[row]
            category = categories[row] = category if isinstance(category, str) else ""
            program = program_stat[row]
            program_ids[row] = str(program) if program is not None else ""
            classes[row] = classify_op(name, category)
        return cls(rows, op_names, categories, program_ids, classes)

    def texts(self, plane: Plane, stat: str) -> list[str]:
        """A text stat of the metadata at ``rows`` ("" where it is not text)."""
        values = plane.metadata_stat(stat, "")
        out = [""] * len(self.op_names)
        for row in self.rows:
            value = values[row]
            out[row] = value if isinstance(value, str) else ""
        return out


def _meta_strings(values: list[str], rows: np.ndarray, used: list[int] | None = None) -> Strings:
    """The strings of metadata rows ``rows``, from one value per metadata row. Only the rows
    in use are factorized: a plane's metadata also names every step and module execution,
    thousands on a long capture."""
    if used is None:
        used = distinct(rows).tolist()
    codes, unique = factorize([values[row] for row in used])
    mapping = np.zeros(len(values), dtype=np.int32)
    mapping[used] = codes
    return Strings(rows, unique, mapping)


# Device times past this (about 53 days in ps) are no times a capture holds: a broken writer's
# (int64 max, a uint64 read as negative). They are treated as missing, like negative ones.
_LATEST_PS = 2**62


def _device_times(offset: np.ndarray, duration: np.ndarray) -> np.ndarray:
    """Which events carry device times to use: both present (MISSING is negative) and
    plausible (under _LATEST_PS, so that sums of them never overflow int64)."""
    return (offset >= 0) & (duration >= 0) & (offset < _LATEST_PS) & (duration < _LATEST_PS)


def device_clock(events: Any, timestamp_ns: int) -> tuple[np.ndarray, np.ndarray, DeviceClock]:
    """Start and duration of TPU ops on the device clock, and that clock (see DeviceClock)."""
    host_start = events.start_ps(timestamp_ns)
    host_dur = events.duration_ps
    device_offset = events.stats["device_offset_ps"]
    device_duration = events.stats["device_duration_ps"]
    use = _device_times(device_offset, device_duration)
    if not use.any():
        return host_start, host_dur, IDENTITY_CLOCK
    if use.all():  # the usual case: no masks, no copies
        offset = host_start - device_offset
        shift = int(median(offset))
        start = device_offset + shift
        dur = device_duration
        start_offset = offset
        start_offset -= shift  # host start less placed start, in place
        clock_start = host_start
        end_offset = start_offset + (host_dur - dur)
    else:
        shift = int(median((host_start - device_offset)[use]))
        start = np.where(use, device_offset + shift, host_start)
        dur = np.where(use, device_duration, host_dur)
        clock_start = host_start[use]
        start_offset = (host_start - start)[use]
        end_offset = (host_start + host_dur - (start + dur))[use]
    if not bool(np.all(clock_start[1:] >= clock_start[:-1])):  # a line is in host order, as a rule
        order = np.argsort(clock_start, kind="stable")
        clock_start, start_offset, end_offset = (
            clock_start[order],
            start_offset[order],
            end_offset[order],
        )
    return start, dur, DeviceClock(clock_start, start_offset, end_offset, shift)


def placed_times(line: Line, clock: DeviceClock) -> tuple[np.ndarray, np.ndarray]:
    """Start and duration of a TPU line's events on the device clock: from their own device
    times where they carry them (as Steps events do), else mapped by ``clock``."""
    events = line.int_events(("device_offset_ps", "device_duration_ps"))
    host_start = events.start_ps(line.timestamp_ns)
    start, end = clock.place(host_start, host_start + events.duration_ps)
    if len(clock.host_start):
        device_offset = events.stats["device_offset_ps"]
        device_duration = events.stats["device_duration_ps"]
        use = _device_times(device_offset, device_duration)
        own = device_offset + clock.shift
        start = np.where(use, own, start)
        end = np.where(use, own + device_duration, end)
    return start, end - start


def plane_clock(plane: Plane) -> DeviceClock | None:
    """The device clock a TPU plane's tables are built on (from its op line, as ``_tpu_ops``
    builds it), to place the plane's other lines when they are read again; None without an op
    line with events."""
    line = _line(plane, _TPU_OPS_LINE)
    if line is None or not len(line):
        return None
    events = line.int_events(("device_offset_ps", "device_duration_ps"))
    _, _, clock = device_clock(events, line.timestamp_ns)
    line.release()
    return clock


def _memory_breakdown(plane: Plane, n: int) -> dict[str, np.ndarray]:
    """HBM / VMEM / CMEM read and write bytes per metadata row (NaN where not recorded), with
    an extra last row (NaN) for events whose metadata is unknown."""
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


def _modules_by_time(modules: Table, starts: np.ndarray) -> list[str]:
    """Module of each op start, by which module execution contains it ("" for none)."""
    if not modules.n:
        return [""] * len(starts)
    module_start = modules.array("start_ps")
    order = np.argsort(module_start, kind="stable")
    module_start = module_start[order]
    module_end = module_start + modules.array_at("dur_ps", order)
    names = modules.strings("module").take(order).tolist()
    index = np.searchsorted(module_start, starts, side="right") - 1
    return [
        names[i] if i >= 0 and s < module_end[i] else ""
        for i, s in zip(index.tolist(), np.asarray(starts).tolist(), strict=True)
    ]


def _tpu_modules(plane: Plane, clock: DeviceClock) -> Table:
    """Executions of the `XLA Modules` line, on the device clock: each runs from about its
    first op's start to its last op's end (see DeviceClock.place)."""
    line = _line(plane, _TPU_MODULES_LINE)
    if line is None:
        return _EMPTY_MODULES
    rows = _metadata_rows(plane, line.metadata_id)
    n_meta = len(plane.metadata.names)
    names = [""] * (n_meta + 1)
    program_ids = [""] * (n_meta + 1)
    for row in distinct(rows[rows < n_meta]).tolist():  # only the module entries
        name = plane.metadata.names[row]
        names[row], program_ids[row] = split_module_name(name) or (name, "")
    start, dur = placed_times(line, clock)
    used = distinct(rows).tolist()
    return Table(
        {
            "module": _meta_strings(names, rows, used),
            "program_id": _meta_strings(program_ids, rows, used),
            "start_ps": start,
            "dur_ps": dur,
        }
    )


def _tpu_async(
    plane: Plane,
    line: Line,
    rows: np.ndarray,
    used: list[int],
    op_meta: _OpMeta,
    clock: DeviceClock,
    ops: Table,
    host_times: tuple[np.ndarray, np.ndarray] | None,
) -> Table:
    """Windows of the `Async XLA Ops` line (``line``, its events' metadata ``rows``, the
    distinct ones ``used``), on the device clock: each from its start op's start to its done
    op's end, the ops it names (see _nearest_named). ``host_times`` are the ops' host-clock
    starts and durations."""
    n_meta = len(plane.metadata.names)
    done_codes, done_names = line.stat_strings("hlo_op")
    done = Strings.from_values(done_names, done_codes)
    start, dur = placed_times(line, clock)
    # The event's display name is generic ("async-copy"); its HLO text names the start op.
    names = plane.metadata.names
    per_row = ["" for _ in range(n_meta + 1)]
    for row in used:
        if row < n_meta:
            text = names[row]
            per_row[row] = (
                instruction_name(text) if text.lstrip().startswith("%") else op_meta.op_names[row]
            )
    start_op = _meta_strings(per_row, rows, used)
    if host_times is not None and len(clock.host_start) and ops.n:
        op_host_start, op_host_dur = host_times
        op_name = ops.strings("op")
        op_start = ops.array("start_ps")
        op_end = op_start + ops.array("dur_ps")
        host_start = line.start_ps
        host_end = host_start + line.duration_ps
        found_start = _nearest_named(start_op, host_start, op_name, op_host_start, op_start)
        found_end = _nearest_named(done, host_end, op_name, op_host_start + op_host_dur, op_end)
        end = np.where(found_end >= 0, found_end, start + dur)
        start = np.where(found_start >= 0, found_start, start)
        dur = np.maximum(end - start, 0)
    return Table(
        {
            "op": start_op,
            "done_op": done,
            "category": _meta_strings([*op_meta.categories, ""], rows, used),
            "collective": _meta_strings([*(c[1] for c in op_meta.classes), ""], rows, used),
            "start_ps": start,
            "dur_ps": dur,
        }
    )


def _nearest_named(
    names: Strings,
    host_times: np.ndarray,
    op_names: Strings,
    op_host_times: np.ndarray,
    op_placed_times: np.ndarray,
) -> np.ndarray:
    """For each (name, host time), the placed time of the op so named whose host time is
    nearest; -1 where no op has the name. Host times of one event and the ops it names agree,
    while several ops can share one host instant, so the name decides."""
    out = np.full(len(names), -1, dtype=np.int64)
    name_codes = names.codes
    op_codes = op_names.codes
    for code in distinct(name_codes).tolist():
        name = names.values[code]
        op_code = op_names.code(name)
        if not name or op_code < 0:
            continue
        ask = np.flatnonzero(name_codes == code)
        have = np.flatnonzero(op_codes == op_code)
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
    return _in_order(
        Table(
            {
                "step": numbers,
                "start_ps": start,
                "end_ps": start + dur,
                "source": Strings.constant("steps_line", len(numbers)),
            }
        )
    )


def _in_order(steps: Table) -> Table:
    """Steps sorted by start, none starting before the one before it ended (mapping windows
    onto a device clock can make neighbours overlap by the clocks' jitter)."""
    order = np.argsort(steps.array("start_ps"), kind="stable")
    ordered = steps.take(order)
    start = ordered.array("start_ps")
    end = ordered.array("end_ps")
    if len(start) > 1:
        start = np.maximum(start, np.concatenate([[start[0]], np.maximum.accumulate(end)[:-1]]))
        end = np.maximum(end, start)
        ordered = ordered.with_columns(start_ps=start, end_ps=end)
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
    def none(cls) -> _HostExecutions:
        return cls(_NONE, _NONE, [])

    @classmethod
    def of(cls, plane: Plane | None) -> _HostExecutions:
        correlation: list[np.ndarray] = []
        launch: list[np.ndarray] = []
        threads: list[tuple[np.ndarray, np.ndarray]] = []
        if plane is None or not plane.stat_ids("correlation_id"):
            return cls.none()
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
            events = line.int_events(("correlation_id",))
            ids = events.stats["correlation_id"]
            start = events.start_ps(line.timestamp_ns)
            has = ids >= 0
            if has.any():
                correlation.append(ids[has])
                launch.append(start[has])
            rows = plane.metadata.rows(events.metadata_id)
            executions = np.flatnonzero(is_execution[np.where(rows < 0, -1, rows)])
            if len(executions):
                exec_start = start[executions]
                order = np.argsort(exec_start, kind="stable")
                end = exec_start + events.duration_ps[executions]
                threads.append((exec_start[order], end[order]))
        ids = np.concatenate(correlation) if correlation else _NONE
        times = np.concatenate(launch) if launch else _NONE
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
) -> tuple[Table, Table, int]:
    lines = [line for line in plane.lines if line.name.startswith(_GPU_STREAM_PREFIX) and len(line)]
    found = _kernel_ops(plane, lines, module_names, executions)
    modules = _module_runs(found.ops, found.execution) if found.ops.n else _EMPTY_MODULES
    return found.ops, modules, found.untimed


def _untimed_warning(where: str, untimed: int) -> str:
    return (
        f"{where}: {untimed} op event{'s' if untimed != 1 else ''} with times past what int64 "
        "picoseconds hold left out (their times are unknown)"
    )


# Events of XLA:CPU inside a collective while it waits for its peers to arrive.
_WAIT_EVENTS = ("Rendezvous",)
# Stats of the host's program launch that say how many devices it ran on.
_ADDRESSABLE_DEVICES = "num_addressable_devices"


def _host_devices(
    host: str, plane: Plane, module_names: dict[str, str], protos: dict[str, bytes]
) -> tuple[list[DeviceTables], list[str]]:
    """XLA:CPU's devices: their ops run on host threads, each event naming its device with a
    ``device_ordinal`` stat; one device per ordinal, each with its own modules and waits.
    Without ordinals every op is device 0, with a warning where the launches say that more
    than one device ran."""
    addressable = _max_stat(plane, _ADDRESSABLE_DEVICES)
    # Only host threads with XLA ops on them: the others are skipped without decoding them.
    lines = [line for line in plane.lines if len(line) and plane.stat_ids("hlo_op")]
    facts = collective_facts(protos) if protos else {}
    found = _kernel_ops(plane, lines, module_names, None, facts)
    if not found.ops.n:
        return [], [_untimed_warning(host, found.untimed)] if found.untimed else []
    warnings = []
    ordinal = found.ordinal
    if not (ordinal >= 0).any():
        ordinal = np.zeros(found.ops.n, dtype=np.int64)
        if addressable > 1:
            warnings.append(
                f"{host}: the XLA ops of {addressable} CPU devices carry no device_ordinal: "
                "they are one timeline (device 0), so per-device times and overlap are merged"
            )
    elif (ordinal < 0).any():
        warnings.append(
            f"{host}: {int((ordinal < 0).sum())} XLA op(s) carry no device_ordinal; they are "
            "counted on device 0"
        )
        ordinal = np.where(ordinal < 0, 0, ordinal)
    devices = []
    for number in np.unique(ordinal).tolist():
        rows = np.flatnonzero(ordinal == number)
        ops = found.ops.take(rows)
        waits = found.waits.take(np.flatnonzero(found.waits_ordinal == number))
        devices.append(
            DeviceTables(
                host,
                int(number),
                _cpu_device_row(host, int(number), ops.n),
                ops,
                _module_runs(ops, found.execution[rows]),
                _EMPTY_ASYNC,
                waits=waits,
            )
        )
    devices[0].untimed = found.untimed  # the host's events: counted once, on its first device
    return devices, warnings


def _max_stat(plane: Plane, name: str) -> int:
    """The largest integer value of stat ``name`` on the plane's events (0 without any)."""
    if not plane.stat_ids(name):
        return 0
    best = 0
    for line in plane.lines:
        if not len(line):
            continue
        values = np.asarray(line.stat(name, -1))
        if values.dtype.kind in "iu" and len(values):
            best = max(best, int(values.max()))
    return best


@dataclass
class _KernelOps:
    ops: Table
    execution: np.ndarray  # per op: its run (run_id, or the launching host execution)
    ordinal: np.ndarray  # per op: device_ordinal, -1 where the event does not say
    waits: Table  # schema "waits" less host and device
    waits_ordinal: np.ndarray  # per wait: the device_ordinal of the op it lies in
    untimed: int = 0  # events left out: their times are past what int64 picoseconds hold


_OP_COST_COLUMNS = (
    "flops",
    "model_flops",
    "bytes_accessed",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "vmem_read_bytes",
    "vmem_write_bytes",
    "cmem_read_bytes",
    "cmem_write_bytes",
)


def _kernel_ops(
    plane: Plane,
    lines: list[Line],
    module_names: dict[str, str],
    executions: _HostExecutions | None,
    facts: dict[tuple[str, str], HloCollective] | None = None,
) -> _KernelOps:
    """Op rows from events that carry ``hlo_op``/``hlo_module`` stats (or, on GPU, any kernel).

    ``executions`` is given for GPU planes; on host threads (XLA:CPU) ops say their
    execution themselves, with a ``run_id`` stat, and their device with ``device_ordinal``;
    the Rendezvous events nested in their collectives are the waits. Events are grouped by
    what names them (kernel, op, module, program, TF op), and each distinct group is named
    and classified once (by the HLO opcode in ``facts`` where it has the op), so the cost per
    event is a few array operations.
    """
    gpu = executions is not None
    columns: dict[str, list[Strings]] = {name: [] for name in _KERNEL_STRING_COLUMNS}
    numbers: dict[str, list[np.ndarray]] = {
        "start_ps": [],
        "dur_ps": [],
        "self_ps": [],
        "execution": [],
        "ordinal": [],
    }
    waits: dict[str, list[Any]] = {"line": [], "start_ps": [], "dur_ps": [], "ordinal": []}
    untimed = 0
    is_wait = np.array([n in _WAIT_EVENTS for n in plane.metadata.names] + [False], dtype=bool)
    for line in lines:
        hlo_codes, hlo_values = line.stat_codes("hlo_op")
        idx = np.arange(len(line)) if gpu else np.flatnonzero(hlo_codes >= 0)
        timed = _timed(line.start_ps[idx], line.duration_ps[idx])
        if not timed.all():
            untimed += len(idx) - int(timed.sum())
            idx = idx[timed]
        if not len(idx):
            continue
        named = [plane.metadata.rows(line.metadata_id[idx])]
        stats = [line.stat_codes(name) for name in ("hlo_module", "program_id", "tf_op")]
        named += [hlo_codes[idx], *(codes[idx] for codes, _ in stats)]
        group, groups = _distinct_rows(named)
        labels = _kernel_labels(
            plane,
            line.name,
            groups,
            [hlo_values, *(values for _, values in stats)],
            module_names,
            gpu,
            facts or {},
        )
        for name, per_group in labels.items():
            columns[name].append(Strings.from_values(per_group, group))
        columns["line"].append(Strings.constant(line.name, len(idx)))
        columns["source"].append(Strings.constant("", len(idx)))
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
        start = line.start_ps[idx]
        dur = line.duration_ps[idx]
        numbers["start_ps"].append(start)
        numbers["dur_ps"].append(dur)
        numbers["self_ps"].append(self_time(start, dur))
        numbers["execution"].append(execution)
        ordinal = np.full(len(idx), -1, dtype=np.int64)
        if not gpu:
            ordinals = np.asarray(line.stat("device_ordinal", -1))
            if ordinals.dtype.kind in "iu":
                ordinal = ordinals[idx].astype(np.int64)
            rows = plane.metadata.rows(line.metadata_id)
            _line_waits(
                line, is_wait[np.where(rows < 0, -1, rows)], start, start + dur, ordinal, waits
            )
        numbers["ordinal"].append(ordinal)
        line.release()
    if not columns["op"]:
        return _KernelOps(_empty_ops(), _NONE, _NONE, _EMPTY_WAITS, _NONE, untimed)

    def joined(name: str) -> np.ndarray:
        return np.concatenate(numbers[name]).astype(np.int64, copy=False)

    strings = {name: concat_strings(parts) for name, parts in columns.items()}
    n = len(strings["op"])
    nan = Lookup(np.zeros(n, dtype=np.int8), np.array([np.nan]))
    table = Table(
        {
            **{name: strings[name] for name in _KERNEL_STRING_COLUMNS[:9]},
            "start_ps": joined("start_ps"),
            "dur_ps": joined("dur_ps"),
            "self_ps": joined("self_ps"),
            **dict.fromkeys(_OP_COST_COLUMNS, nan),
            "tf_op": strings["tf_op"],
            "source": strings["source"],
            "step": np.full(n, -1, dtype=np.int64),
        }
    )
    wait_table = _EMPTY_WAITS
    if waits["line"]:
        wait_table = Table(
            {
                "line": concat_strings(waits["line"]),
                "start_ps": np.concatenate(waits["start_ps"]),
                "dur_ps": np.concatenate(waits["dur_ps"]),
            }
        )
    return _KernelOps(
        table,
        joined("execution"),
        joined("ordinal"),
        wait_table,
        np.concatenate(waits["ordinal"]) if waits["ordinal"] else _NONE,
        untimed,
    )


def _timed(start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Which host-clock events have times to use: start within +-_LATEST_PS and a duration
    from 0 to _LATEST_PS, so that their ends, and differences of them, stay in int64 (a start
    near the int64 limit made self time overflow)."""
    return (start > -_LATEST_PS) & (start < _LATEST_PS) & (dur >= 0) & (dur < _LATEST_PS)


def _line_waits(
    line: Line,
    is_wait: np.ndarray,  # per event of the line
    op_start: np.ndarray,
    op_end: np.ndarray,
    op_ordinal: np.ndarray,
    out: dict[str, list[Any]],
) -> None:
    """The wait events of a host thread line that lie inside one of its ops, with that op's
    device; appended to ``out``'s columns."""
    found = np.flatnonzero(is_wait)
    if not len(found):
        return
    start = line.start_ps[found]
    end = start + line.duration_ps[found]
    # The op each wait lies in: the last op to start at or before it (ops on a thread are in
    # order; a wait in none of them is not a collective's).
    order = np.argsort(op_start, kind="stable")
    at = np.searchsorted(op_start[order], start, side="right") - 1
    inside = at >= 0
    owner = order[np.maximum(at, 0)]
    inside &= op_end[owner] >= end
    if not inside.any():
        return
    out["line"].append(Strings.constant(line.name, int(inside.sum())))
    out["start_ps"].append(start[inside].astype(np.int64))
    out["dur_ps"].append((end - start)[inside].astype(np.int64))
    out["ordinal"].append(op_ordinal[owner[inside]])


def _distinct_rows(codes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(group of each row, the distinct rows) of parallel code columns (each >= -1).

    The codes of a row are packed into one int64 (mixed radix) so that one sort of
    integers finds the groups; a sort of rows is many times slower.
    """
    shifted = [np.asarray(c, dtype=np.int64) + 1 for c in codes]
    radices = [int(c.max()) + 1 if len(c) else 1 for c in shifted]
    if float(np.prod(np.array(radices, dtype=np.float64))) >= 2.0**62:
        distinct, group = np.unique(np.stack(shifted, axis=1), axis=0, return_inverse=True)
        return group.reshape(-1), distinct - 1
    key = np.zeros(len(shifted[0]), dtype=np.int64)
    for column, radix in zip(shifted, radices, strict=True):
        key = key * radix + column
    keys, group = np.unique(key, return_inverse=True)
    rows = np.empty((len(keys), len(shifted)), dtype=np.int64)
    for i in range(len(shifted) - 1, -1, -1):
        keys, rows[:, i] = np.divmod(keys, radices[i])
    return group.reshape(-1), rows - 1


def _kernel_labels(
    plane: Plane,
    line_name: str,
    groups: np.ndarray,
    values: list[list[Any]],
    module_names: dict[str, str],
    gpu: bool,
    facts: dict[tuple[str, str], HloCollective],
) -> dict[str, list[str]]:
    """The string columns of each group of events: a group is (metadata row, and codes of
    ``hlo_op``, ``hlo_module``, ``program_id``, ``tf_op`` into ``values``; -1 if absent)."""
    hlo_values, module_values, program_values, tf_values = values
    names = plane.metadata.names
    out: dict[str, list[str]] = {
        name: [] for name in ("module", "program_id", "op", "hlo_text", "tf_op", "category")
    }
    out |= {"kind": [], "collective": [], "async_role": []}
    for row, hlo_code, module_code, program_code, tf_code in groups.tolist():
        kernel = names[row] if row >= 0 else ""
        hlo = hlo_values[hlo_code] if hlo_code >= 0 else None
        hlo = hlo if isinstance(hlo, str) else None
        program = program_values[program_code] if program_code >= 0 else None
        module = module_values[module_code] if module_code >= 0 else None
        if not isinstance(module, str) or not module:
            module = module_names.get(str(program), "") if program is not None else ""
        tf_op = tf_values[tf_code] if tf_code >= 0 else None
        fact = facts.get((f"{module}({program})", hlo or kernel)) if facts else None
        kind, collective, role = (
            _gpu_classify(kernel, hlo, line_name)
            if gpu
            else classify_op(hlo or kernel, fact.opcode if fact else "")
        )
        op = hlo or kernel
        out["module"].append(module)
        out["program_id"].append(str(program) if program is not None else "")
        out["op"].append(op)
        out["hlo_text"].append(kernel)
        out["tf_op"].append(tf_op if isinstance(tf_op, str) else "")
        out["category"].append(_derived_category(op, kind))
        out["kind"].append(kind)
        out["collective"].append(collective)
        out["async_role"].append(role)
    return out


# The string columns of an ops table, in schema order (tf_op and source come after the costs).
_KERNEL_STRING_COLUMNS = (
    "line",
    "module",
    "program_id",
    "op",
    "hlo_text",
    "category",
    "kind",
    "collective",
    "async_role",
    "tf_op",
    "source",
)


def _derived_category(op: str, kind: str) -> str:
    if kind == KIND_MEMCPY:
        return "memcpy"
    return op_base(op) or kind


def _module_runs(ops: Table, execution: np.ndarray) -> Table:
    """Module executions on a device.

    Ops are grouped by the execution the profile records for them (``run_id`` on
    XLA:CPU, the launching host execution on GPU): one execution per (module,
    execution), even when its ops ran on several threads or streams. Ops whose
    execution is unknown join the one before them. Without any recorded
    execution, an execution is a run of consecutive ops, by start, of one module.
    """
    module = ops.strings("module")
    has_module = ~module.eq("")
    if not has_module.any():
        return _EMPTY_MODULES
    start_all = ops.array("start_ps")
    candidates = np.flatnonzero(has_module)
    order = candidates[np.argsort(start_all[candidates], kind="stable")]
    codes = module.codes[order]
    execution = execution[order]
    known = execution != _NO_RUN_ID
    if known.any():
        # Forward-fill the unknown ones (leading ones take the first known execution).
        source = np.where(known, np.arange(len(known)), -1)
        source = np.maximum.accumulate(source)
        source[source < 0] = int(np.flatnonzero(known)[0])
        pairs = np.stack([codes.astype(np.int64), execution[source]], axis=1)
        _, first_seen, run_index = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
        run_index = run_index.reshape(-1)
    else:
        new_run = np.ones(len(codes), dtype=bool)
        new_run[1:] = codes[1:] != codes[:-1]
        run_index = np.cumsum(new_run) - 1
        first_seen = np.flatnonzero(new_run)
    start = start_all[order]
    end = start + ops.array_at("dur_ps", order)
    n_runs = int(run_index.max()) + 1
    run_start = np.full(n_runs, np.iinfo(np.int64).max, dtype=np.int64)
    run_end = np.full(n_runs, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(run_start, run_index, start)
    np.maximum.at(run_end, run_index, end)
    # The runs in order of their key (as np.unique sorts), then by start.
    first_seen = np.asarray(first_seen)
    firsts = order[first_seen]
    by_start = np.argsort(run_start, kind="stable")
    return Table(
        {
            "module": ops.strings("module").take(firsts[by_start]),
            "program_id": ops.strings("program_id").take(firsts[by_start]),
            "start_ps": run_start[by_start],
            "dur_ps": (run_end - run_start)[by_start],
        }
    )


def _empty_ops() -> Table:
    empty = np.zeros(0, dtype=np.int64)
    return Table(
        {
            **{name: Strings(empty, ()) for name in _KERNEL_STRING_COLUMNS[:9]},
            "start_ps": empty,
            "dur_ps": empty,
            "self_ps": empty,
            **{name: np.zeros(0, dtype=np.float64) for name in _OP_COST_COLUMNS},
            "tf_op": Strings(empty, ()),
            "source": Strings(empty, ()),
            "step": empty,
        }
    )


_EMPTY_MODULES = Table(
    {
        "module": Strings(_NONE, ()),
        "program_id": Strings(_NONE, ()),
        "start_ps": _NONE,
        "dur_ps": _NONE,
    }
)
_EMPTY_WAITS = Table({"line": Strings(_NONE, ()), "start_ps": _NONE, "dur_ps": _NONE})
_EMPTY_ASYNC = Table(
    {
        "op": Strings(_NONE, ()),
        "done_op": Strings(_NONE, ()),
        "category": Strings(_NONE, ()),
        "collective": Strings(_NONE, ()),
        "start_ps": _NONE,
        "dur_ps": _NONE,
    }
)


# --------------------------------------------------------------------------- steps


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
    return np.where(index >= 0, numbers[np.maximum(index, 0)], numbers.dtype.type(-1))


# --------------------------------------------------------------------------- self time


def self_time(start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each event's duration less the time of events nested inside it (one line's events).

    Most lines have no nesting, which one vectorised check finds (and then the
    durations themselves come back, not a copy); only clusters of events that do
    nest are walked with a stack.
    """
    n = len(start)
    if n < 2:
        return dur.astype(np.int64, copy=False)
    # By start, an enclosing event before what it encloses; most lines are already in order.
    in_order = bool(np.all(start[1:] > start[:-1]))
    order = None if in_order else np.lexsort((-dur, start))
    s, d = (start, dur) if order is None else (start[order], dur[order])
    e = s + d
    if in_order and not (s[1:] < e[:-1]).any():
        return dur  # the usual case, no event reaching into the next: durations, shared
    running_end = np.maximum.accumulate(e)
    nested = np.zeros(n, dtype=bool)
    nested[1:] = s[1:] < running_end[:-1]
    if not nested.any():
        return dur  # self time is the duration, and shares its array
    result = d.astype(np.int64, copy=True)
    cluster_starts = np.flatnonzero(~nested)
    cluster_ends = np.append(cluster_starts[1:], n)
    several = cluster_ends - cluster_starts > 1  # only clusters that nest are walked
    for begin, end in zip(
        cluster_starts[several].tolist(), cluster_ends[several].tolist(), strict=True
    ):
        _subtract_children(s, e, result, begin, end)
    if order is None:
        return result
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
