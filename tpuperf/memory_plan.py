"""Memory: each program's peak, the buffers live at it and the code that made them, headroom.

XLA plans every program's device memory when it compiles it, and the HLO protos of a
profile's ``/host:metadata`` plane carry that plan (``HloProto.buffer_assignment``): logical
buffers (one per value an instruction defines), the allocations they are packed into, and
the heap simulator's trace (the program's schedule as allocate / free / share events). This
module reads it the way XProf's memory viewer does (openxla/xprof
``xprof/convert/hlo_proto_to_memory_visualization_utils.cc``), so that its peaks equal
``xprof get_peak_allocations``:

- Only HBM (memory color 0) is counted, and not the thread-local scratch of called
  computations (a reduction's scalars).
- The peak is what the program holds on the device: the sum of its HBM allocations
  (``get_peak_allocations``' figure, XLA's ``ComputeTotalAllocationBytes``). A donated
  parameter aliased to an output is one allocation, counted once. The split: parameters,
  outputs (may live out), constants, and temporaries (the allocation XLA packs every
  temporary into, sized by its heap simulator).
- The buffers live at the peak: the schedule's point of most live bytes, found by running
  the heap simulator's trace of the temporaries (an ALLOC adds its buffer, a SHARE_WITH makes
  a buffer share another's memory, counted once and again only when the memory it shares
  was freed, a FREE removes it when no sharer is left), plus the parameters, outputs and
  constants (live throughout; each allocation through its largest logical buffer). Their
  sum is ``live_peak_bytes`` (XProf's memory viewer's peak heap); the temporaries'
  allocation exceeds their part of it by what the packing could not reuse.

Capacity per device kind: the device plane's ``memory_size`` stat, else the chip table
(:func:`tpuperf.roofline.chips.hbm_capacity_bytes`), else ``--hbm-gib``. Headroom is the
capacity minus the largest peak of the programs that ran on that kind.

Allocator events (``MemoryAllocation`` / ``MemoryDeallocation`` on ``/host:CPU``), where a
profile has them, give memory over time per allocator, the peak in the capture window, the
lifetime peak and fragmentation, read as XProf's memory profile reads them; each allocator
states its own capacity (``bytes_reserved + bytes_allocated + bytes_available``: what the
runtime can hand out, a little under the chip's memory).

This module computes; :mod:`tpuperf.render.memory` shows what it returns.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import field
from typing import TYPE_CHECKING, Any

from tpuperf import scopes as _scopes
from tpuperf._dataclasses import dataclass
from tpuperf.schema import PASS_BACKWARD, PASS_OPTIMIZER, PASSES

if TYPE_CHECKING:
    from tpuperf.profiles import Profile
    from tpuperf.xspace import Space

MIB = 1 << 20
GIB = 1 << 30
HBM_COLOR = 0
HOST_COLOR = 5  # XLA's host memory space (Layout::kHostMemorySpace): offloaded buffers
# The name scope JAX gives the forward ops a checkpoint (remat) recomputes in the backward pass.
REMAT_LEVEL = "rematted_computation"

KIND_PARAMETER = "parameter"
KIND_OUTPUT = "output"
KIND_TEMPORARY = "temporary"
KIND_CONSTANT = "constant"
KINDS = (KIND_PARAMETER, KIND_OUTPUT, KIND_TEMPORARY, KIND_CONSTANT)

CAPACITY_DEVICE = "device"  # the device plane's memory_size stat
CAPACITY_TABLE = "chip_table"
CAPACITY_FLAG = "flag"  # --hbm-gib
CAPACITY_UNKNOWN = "unknown"

# Heap simulator event kinds (xla HeapSimulatorTrace.Event.Kind).
_ALLOC, _FREE, _SHARE_WITH = 0, 1, 2

# xla.PrimitiveType -> (name, bits), from openxla/xla xla/xla_data.proto.
_TYPES = {
    1: ("pred", 8),
    2: ("s8", 8),
    3: ("s16", 16),
    4: ("s32", 32),
    5: ("s64", 64),
    6: ("u8", 8),
    7: ("u16", 16),
    8: ("u32", 32),
    9: ("u64", 64),
    10: ("f16", 16),
    11: ("f32", 32),
    12: ("f64", 64),
    13: ("tuple", 0),
    14: ("opaque", 0),
    15: ("c64", 64),
    16: ("bf16", 16),
    17: ("token", 0),
    18: ("c128", 128),
    19: ("f8e5m2", 8),
    20: ("f8e4m3fn", 8),
    21: ("s4", 4),
    22: ("u4", 4),
    23: ("f8e4m3b11fnuz", 8),
    24: ("f8e5m2fnuz", 8),
    25: ("f8e4m3fnuz", 8),
    28: ("f8e4m3", 8),
    29: ("f8e3m4", 8),
    32: ("f4e2m1fn", 4),
    33: ("f8e8m0fnu", 8),
}


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Buffer:
    """A buffer live at a program's peak: a logical buffer of the buffer assignment."""

    op: str  # the defining instruction, with its shape index: ``copy-start{0}``
    opcode: str
    size_bytes: int
    shape: str  # ``f32[1024,1024]``
    dtype: str
    kind: str  # one of KINDS
    name_scope: str  # the instruction's op_name
    scope: str  # as `tpuperf tree` groups it: levels joined by /, (top level), (no scope)
    pass_: str  # one of schema.PASSES
    source: str  # file:line
    logical_buffer_id: int = -1

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "opcode": self.opcode,
            "size_bytes": self.size_bytes,
            "shape": self.shape,
            "dtype": self.dtype,
            "kind": self.kind,
            "scope": self.scope,
            "pass": self.pass_,
            "source": self.source,
            "name_scope": self.name_scope,
        }


@dataclass(frozen=True)
class ProgramMemory:
    """One program's memory plan, read from its HLO module's buffer assignment."""

    host: str
    module: str
    program_id: str
    peak_bytes: int  # the HBM allocations' sizes added up
    split: dict[str, int]  # KINDS -> bytes; they add up to peak_bytes
    live_peak_bytes: int  # the bytes of the buffers live at the schedule's peak
    buffers: tuple[Buffer, ...]  # live at the peak, largest first
    peak_op: str  # the instruction the schedule was at when the peak was reached
    peak_position: int  # its index in the heap trace
    schedule_events: int  # the heap trace's events
    heap_bytes: tuple[int, ...] = ()  # bytes in use after each heap trace event, with
    # the indefinite bytes
    has_backward: bool = False
    device_kind: str = ""  # the chip (or kind) of the devices that ran it
    remat_bytes: int = 0  # HBM buffers defined by recomputed (rematerialized) ops
    offloaded_bytes: tuple[int, ...] = ()  # the host-memory allocations (offloaded), largest
    # first


@dataclass(frozen=True)
class AllocatorMemory:
    """One allocator's events: memory over time in the capture window."""

    allocator: str
    events: int
    peak_bytes: int  # max of bytes_reserved + bytes_allocated over the events
    peak_time_ps: int
    reserved_bytes_at_peak: int
    allocated_bytes_at_peak: int
    available_bytes_at_peak: int
    capacity_bytes: int  # reserved + allocated + available at the peak
    fragmentation: float  # the allocator's own figure at the peak (0..1)
    lifetime_peak_bytes: int  # peak_bytes_in_use of the last event
    curve: tuple[tuple[int, int], ...] = ()  # (time_ps, bytes in use), sampled


@dataclass
class MemoryReport:
    """What ``tpuperf memory`` shows: per device kind the capacity; per program its peak."""

    source: str
    capacity_bytes: dict[str, int | None]
    capacity_source: dict[str, str]
    programs: list[ProgramMemory]
    allocators: list[AllocatorMemory]
    notes: list[str] = field(default_factory=list)
    hlo_protos: int = 0  # HLO modules the profile carries

    def capacity_of(self, program: ProgramMemory) -> int | None:
        return self.capacity_bytes.get(program.device_kind)

    def headroom_bytes(self, program: ProgramMemory) -> int | None:
        capacity = self.capacity_of(program)
        return None if capacity is None else capacity - program.peak_bytes

    def largest_peak(self, kind: str) -> int:
        return max((p.peak_bytes for p in self.programs if p.device_kind == kind), default=0)

    def headroom(self, kind: str) -> int | None:
        """Capacity minus the largest peak of the programs on this device kind."""
        capacity = self.capacity_bytes.get(kind)
        return None if capacity is None else capacity - self.largest_peak(kind)


# --------------------------------------------------------------------------- one program


class _Logical:
    """A logical buffer during the heap simulation (XProf's reference counting)."""

    __slots__ = ("allocation", "canonical", "instruction", "proto", "refs")

    def __init__(self, proto: Any, allocation: Any, instruction: Any) -> None:
        self.proto = proto
        self.allocation = allocation
        self.instruction = instruction
        self.canonical: _Logical | None = None
        self.refs = 0

    @property
    def id(self) -> int:
        return int(self.proto.id)

    @property
    def size(self) -> int:
        return int(self.proto.size)

    def root(self) -> _Logical:
        node = self
        while node.canonical is not None:
            node = node.canonical
        return node

    def inc(self) -> int:
        root = self.root()
        root.refs += 1
        return root.refs

    def dec(self) -> int:
        root = self.root()
        root.refs -= 1
        return root.refs


def _indefinite(allocation: Any) -> bool:
    return bool(
        allocation.is_entry_computation_parameter
        or allocation.is_constant
        or allocation.maybe_live_out
    )


def _kind(allocation: Any) -> str:
    """The buffer kind of an allocation (a donated parameter aliased to an output is one
    allocation: a parameter)."""
    if allocation.is_entry_computation_parameter:
        return KIND_PARAMETER
    if allocation.maybe_live_out:
        return KIND_OUTPUT
    if allocation.is_constant:
        return KIND_CONSTANT
    return KIND_TEMPORARY  # temporaries and thread-local scratch


def _shape_at(shape: Any, index: list[int]) -> Any:
    for i in index:
        if i < len(shape.tuple_shapes):
            shape = shape.tuple_shapes[i]
        else:
            break
    return shape


def shape_text(shape: Any) -> tuple[str, str]:
    """(``f32[8,128]``, ``f32``) of a ShapeProto; a tuple reads ``(f32[8], s32[])``."""
    name = _TYPES.get(int(shape.element_type), (f"type{int(shape.element_type)}", 0))[0]
    if shape.tuple_shapes or name == "tuple":
        parts = [shape_text(s)[0] for s in shape.tuple_shapes]
        return "(" + ", ".join(parts) + ")", "tuple"
    dims = ",".join(str(int(d)) for d in shape.dimensions)
    return f"{name}[{dims}]", name


def _pass(path: _scopes.ScopePath, has_backward: bool, opcode: str) -> str:
    """The pass of the op that defines a buffer, by the scope table's rules (a gradient
    reduction after jax.grad finishes the backward pass)."""
    from tpuperf.tables import collective_of

    found = _scopes.pass_of(path, has_backward)
    if found == PASS_OPTIMIZER and collective_of(opcode) in _scopes._GRADIENT_REDUCTIONS:
        return PASS_BACKWARD
    return found


def is_remat(path: _scopes.ScopePath) -> bool:
    """Whether an op with this path is a recomputation of a checkpointed (remat) forward op."""
    return REMAT_LEVEL in path.levels


def scope_label(path: _scopes.ScopePath) -> str:
    """The scope a buffer is counted in, by `tpuperf tree`'s rules."""
    if path.levels:
        return path.scope
    return _scopes.TOP_LEVEL if path.primitive else _scopes.NO_SCOPE


def program_memory(data: bytes, key: str, host: str = "") -> ProgramMemory | None:
    """The memory plan of one serialized ``xla.HloProto`` (``key``: ``name(program_id)``);
    None when it has no buffer assignment. Raises the protobuf runtime's error when ``data``
    is not an HloProto."""
    from tpuperf import _hlo_schema
    from tpuperf.tables import split_module_name

    proto = _hlo_schema.read_buffers(data)
    assignment = proto.buffer_assignment
    if not assignment.buffer_allocations:
        return None
    module = proto.hlo_module
    split_name = split_module_name(key)
    name, program_id = split_name if split_name else (module.name or key, "")

    instructions: dict[int, Any] = {}
    computations = {c.id: c for c in module.computations}
    for computation in module.computations:
        for instruction in computation.instructions:
            instructions[int(instruction.id)] = instruction
    protos = {int(b.id): b for b in assignment.logical_buffers}
    logical: dict[int, _Logical] = {}
    for allocation in assignment.buffer_allocations:
        for assigned in allocation.assigned:
            buffer = protos.get(int(assigned.logical_buffer_id))
            if buffer is None:
                continue
            instruction = instructions.get(int(buffer.defined_at.instruction_id))
            if instruction is None:
                continue
            logical[int(buffer.id)] = _Logical(buffer, allocation, instruction)

    hbm = [
        a
        for a in assignment.buffer_allocations
        if int(a.color) == HBM_COLOR and not a.is_thread_local
    ]
    split = dict.fromkeys(KINDS, 0)
    for allocation in hbm:
        split[_kind(allocation)] += int(allocation.size)
    # Allocations of indefinite lifetime: live throughout, each through its largest buffer.
    indefinite_bytes = 0
    peak_buffers: list[_Logical] = []
    for allocation in hbm:
        if not _indefinite(allocation):
            continue
        best: _Logical | None = None
        for assigned in allocation.assigned:
            candidate = logical.get(int(assigned.logical_buffer_id))
            if candidate is not None and candidate.size > (best.size if best else 0):
                best = candidate
        if best is not None:
            indefinite_bytes += int(allocation.size)
            peak_buffers.append(best)

    heap = _simulate(assignment, logical, hbm)
    peak_buffers.extend(heap.peak_buffers)

    meta = _Metadata(computations)
    has_backward = _has_backward(module)
    frames = module.stack_frame_index
    buffers = []
    for buffer in peak_buffers:
        instruction = buffer.instruction
        path, metadata = meta.of(instruction)
        name_scope = metadata.op_name
        source = _scopes.source_text(*_scopes.source_of(metadata, frames))
        index = [int(i) for i in buffer.proto.defined_at.shape_index]
        shape, dtype = shape_text(_shape_at(instruction.shape, index))
        label = instruction.name + ("{" + ",".join(map(str, index)) + "}" if index else "")
        buffers.append(
            Buffer(
                op=label,
                opcode=instruction.opcode,
                size_bytes=buffer.size,
                shape=shape,
                dtype=dtype,
                kind=_kind(buffer.allocation),
                name_scope=name_scope,
                scope=scope_label(path),
                pass_=_pass(path, has_backward, instruction.opcode),
                source=source,
                logical_buffer_id=buffer.id,
            )
        )
    buffers.sort(key=lambda b: (-b.size_bytes, b.op))
    hbm_ids = {id(a) for a in hbm}
    remat_bytes = sum(
        b.size
        for b in logical.values()
        if id(b.allocation) in hbm_ids and is_remat(meta.of(b.instruction)[0])
    )
    offloaded = sorted(
        (int(a.size) for a in assignment.buffer_allocations if int(a.color) == HOST_COLOR),
        reverse=True,
    )
    return ProgramMemory(
        host=host,
        module=name,
        program_id=program_id,
        peak_bytes=sum(split.values()),
        split=split,
        live_peak_bytes=heap.peak_bytes + indefinite_bytes,
        buffers=tuple(buffers),
        peak_op=heap.peak_op,
        peak_position=heap.peak_position,
        schedule_events=heap.events,
        heap_bytes=tuple(b + indefinite_bytes for b in heap.curve),
        has_backward=has_backward,
        remat_bytes=remat_bytes,
        offloaded_bytes=tuple(offloaded),
    )


@dataclass
class _Heap:
    peak_bytes: int = 0
    peak_buffers: list[_Logical] = field(default_factory=list)
    peak_op: str = ""
    peak_position: int = -1
    events: int = 0
    curve: list[int] = field(default_factory=list)


def _heap_trace(assignment: Any, logical: dict[int, _Logical], hbm: list[Any]) -> Any | None:
    """The heap trace of the program's HBM temporaries: the trace whose first event's buffer
    lies in the first (by index) HBM allocation of definite lifetime; else the trace with
    the most events on HBM buffers (XProf's choice)."""
    traces = assignment.heap_simulator_traces
    by_allocation: dict[int, int] = {}
    for i, trace in enumerate(traces):
        if not trace.events:
            continue
        first = logical.get(int(trace.events[0].buffer_id))
        if first is not None:
            by_allocation[int(first.allocation.index)] = i
    for allocation in sorted(hbm, key=lambda a: int(a.index)):
        if not _indefinite(allocation) and int(allocation.index) in by_allocation:
            return traces[by_allocation[int(allocation.index)]]
    best, best_count = None, 0
    for trace in traces:
        count = 0
        for event in trace.events:
            buffer = logical.get(int(event.buffer_id))
            if buffer is not None and int(buffer.proto.color) == HBM_COLOR:
                count += 1
        if count > best_count:
            best, best_count = trace, count
    return best


def _simulate(assignment: Any, logical: dict[int, _Logical], hbm: list[Any]) -> _Heap:
    """Run the heap trace: the peak of the bytes in use and the buffers live at it."""
    result = _Heap()
    trace = _heap_trace(assignment, logical, hbm)
    if trace is None:
        return result
    result.events = len(trace.events)
    in_use = 0
    live: dict[int, _Logical] = {}  # canonical id -> the buffer shown for it (dict: ordered)
    for position, event in enumerate(trace.events):
        result.curve.append(in_use)
        buffer = logical.get(int(event.buffer_id))
        if buffer is None:
            continue
        kind = int(event.kind)
        if kind == _ALLOC:
            buffer.inc()
            in_use += buffer.size
            live[buffer.id] = buffer
        elif kind == _FREE:
            if buffer.dec() == 0:
                root = buffer.root()
                in_use -= root.size
                live.pop(root.id, None)
            continue
        elif kind == _SHARE_WITH:
            canonical = logical.get(int(event.share_with_canonical_id))
            if canonical is None:
                continue
            buffer.canonical = canonical
            if canonical.inc() != 1:
                continue
            # The memory it shares had been freed: in use again, shown as the sharer.
            root = canonical.root()
            in_use += root.size
            live[root.id] = buffer
        else:
            continue
        if in_use > result.peak_bytes:
            result.peak_bytes = in_use
            result.peak_buffers = list(live.values())
            result.peak_op = event.instruction_name
            result.peak_position = position
    result.curve.append(in_use)
    return result


class _Metadata:
    """An instruction's parsed scope path and the OpMetadata it is read from, by the scope
    table's rules, read when asked: a plan needs them for the buffers it shows and those in
    device memory (the remat bytes), not for each of a module's instructions (100 programs
    of the bf16 transformer fixture: 7,072 instructions, 1,400 such buffers)."""

    def __init__(self, computations: dict[int, Any]) -> None:
        self._computations = computations  # the module's, by id
        self._read: dict[int, tuple[Any, Any]] = {}

    def of(self, instruction: Any) -> tuple[Any, Any]:
        key = int(instruction.id)
        found = self._read.get(key)
        if found is None:
            metadata = _scopes.op_metadata(instruction, self._computations)
            found = self._read[key] = (_scopes.parse_path(metadata.op_name), metadata)
        return found


def _has_backward(module: Any) -> bool:
    """Whether an instruction of ``module`` is of the backward pass. Each instruction's own
    op_name is read, once each distinct one: the metadata the scope table reads for an
    instruction is its own or, for a fusion without any, that of an instruction inside it,
    itself one of the module's."""
    names = {i.metadata.op_name for c in module.computations for i in c.instructions}
    return any(_scopes.is_backward(_scopes.parse_path(name)) for name in names)


# --------------------------------------------------------------------------- allocators

_ALLOCATION_EVENTS = ("MemoryAllocation", "MemoryDeallocation")
_CURVE_POINTS = 400


def allocator_memory(space: Space) -> list[AllocatorMemory]:
    """Per allocator, memory over time from the host plane's allocator events (empty when
    the profile has none), read as XProf's memory profile reads them: the peak is the last
    event at the highest ``bytes_reserved + bytes_allocated`` (events in the order of the
    host plane's lines), its capacity adds ``bytes_available``."""
    import numpy as np

    found: dict[str, dict[str, Any]] = {}
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        wanted = [
            int(i)
            for i, n in zip(plane.metadata.ids, plane.metadata.names, strict=True)
            if n in _ALLOCATION_EVENTS
        ]
        if not wanted:
            continue
        for line in plane.lines:
            mask = np.isin(line.metadata_id, wanted)
            if not mask.any():
                continue
            rows = np.flatnonzero(mask)
            count = len(line)
            columns = {
                name: np.asarray(line.stat(name, 0))
                for name in (
                    "bytes_reserved",
                    "bytes_allocated",
                    "bytes_available",
                    "peak_bytes_in_use",
                    "index_on_host",
                    "device_ordinal",
                )
            }
            fragmentation = line.stat("fragmentation", 0.0)
            names = line.stat("allocator_name", None)
            has = {n: bool(plane.stat_ids(n)) for n in ("allocator_name", "index_on_host")}
            start = line.start_ps
            for row in rows.tolist():
                if has["allocator_name"] and isinstance(names, list) and names[row]:
                    allocator = str(names[row])
                elif has["index_on_host"]:
                    allocator = str(int(columns["index_on_host"][row]))
                else:
                    allocator = str(int(columns["device_ordinal"][row]))
                entry = found.setdefault(allocator, {"rows": []})
                entry["rows"].append(
                    (
                        int(start[row]),
                        int(columns["bytes_reserved"][row]),
                        int(columns["bytes_allocated"][row]),
                        int(columns["bytes_available"][row]),
                        float(_float_at(fragmentation, row)),
                        int(columns["peak_bytes_in_use"][row]),
                    )
                )
            del count
    out = []
    for allocator, entry in sorted(found.items()):
        rows_ = entry["rows"]
        peak = None
        for row_ in rows_:
            used = row_[1] + row_[2]
            if peak is None or used >= peak[1] + peak[2]:
                peak = row_
        assert peak is not None
        ordered = sorted(rows_)
        step = max(1, len(ordered) // _CURVE_POINTS)
        curve = tuple((t, r + a) for t, r, a, *_ in ordered[::step])
        out.append(
            AllocatorMemory(
                allocator=allocator,
                events=len(rows_),
                peak_bytes=peak[1] + peak[2],
                peak_time_ps=peak[0],
                reserved_bytes_at_peak=peak[1],
                allocated_bytes_at_peak=peak[2],
                available_bytes_at_peak=peak[3],
                capacity_bytes=peak[1] + peak[2] + peak[3],
                fragmentation=peak[4],
                lifetime_peak_bytes=rows_[-1][5],
                curve=curve,
            )
        )
    return out


def _float_at(values: Any, row: int) -> float:
    value = values[row]
    return float(value) if value is not None else 0.0


# --------------------------------------------------------------------------- the report


def memory_report(
    profile: Profile | str | os.PathLike[str],
    program: str | None = None,
    hbm_gib: float | None = None,
    allocators: bool = True,
) -> MemoryReport:
    """The memory view of a profile (a :class:`~tpuperf.profiles.Profile`, or anything
    :func:`tpuperf.load` reads): every program's plan (``program``: only those whose module
    name or program id is this), capacity and headroom per device kind, and the allocator
    events where the profile has them. ``tpuperf.memory_report(path)`` is ``tpuperf memory``."""
    if isinstance(profile, (str, os.PathLike)):
        from tpuperf.profiles import load

        profile = load(profile)

    notes: list[str] = []
    kinds = _program_kinds(profile)
    programs: list[ProgramMemory] = []
    # Each program once (hosts of one run hold the same programs), as the first host has it.
    once: dict[tuple[str, int], tuple[str, str, bytes]] = {}
    for host, by_name in sorted(profile.hlo_protos.items()):
        for key, data in by_name.items():
            once.setdefault((key, len(data)), (host, key, data))
    if once:
        from tpuperf import _hlo_schema

        _hlo_schema.expect(sum(size for _, size in once))
    for host, key, data in once.values():
        try:
            found = program_memory(data, key, host)
        except Exception as exc:  # a damaged module costs its memory view, not the command
            notes.append(f"{host}: HLO module {key} could not be read ({type(exc).__name__})")
            continue
        if found is None:
            continue
        if program is not None and program not in (found.module, found.program_id, key):
            continue
        kind = kinds.get((host, found.program_id)) or kinds.get((host, "")) or ""
        programs.append(_with_kind(found, kind))
    programs.sort(key=lambda p: (-p.peak_bytes, p.module, p.program_id))

    allocator_list: list[AllocatorMemory] = []
    if allocators:
        for info in profile.hosts:
            space = profile.read_space(info.host)  # the events the tables do not keep
            if space is not None:
                allocator_list.extend(allocator_memory(space))

    capacity: dict[str, int | None] = {}
    capacity_source: dict[str, str] = {}
    device_memory = _device_memory(profile)
    for kind in sorted({p.device_kind for p in programs} | set(device_memory)):
        capacity[kind], capacity_source[kind] = resolve_capacity(
            kind, device_memory.get(kind), hbm_gib
        )
    return MemoryReport(
        source=profile.source,
        capacity_bytes=capacity,
        capacity_source=capacity_source,
        programs=programs,
        allocators=allocator_list,
        notes=notes,
        hlo_protos=sum(len(by_name) for by_name in profile.hlo_protos.values()),
    )


def resolve_capacity(
    kind: str, device_bytes: int | None, hbm_gib: float | None
) -> tuple[int | None, str]:
    """A device kind's memory and where it comes from: the device's own stat, else the chip
    table, else ``--hbm-gib`` (DESIGN.md, Memory)."""
    from tpuperf.roofline.chips import hbm_capacity_bytes

    if device_bytes:
        return device_bytes, CAPACITY_DEVICE
    chip_bytes = hbm_capacity_bytes(kind)
    if chip_bytes:
        return chip_bytes, CAPACITY_TABLE
    if hbm_gib is not None:
        return round(hbm_gib * GIB), CAPACITY_FLAG
    return None, CAPACITY_UNKNOWN


def _with_kind(program: ProgramMemory, kind: str) -> ProgramMemory:
    from dataclasses import replace

    return replace(program, device_kind=kind)


def _device_name(row: dict[str, Any]) -> str:
    return str(row.get("chip") or row.get("kind") or "")


def _program_kinds(profile: Profile) -> dict[tuple[str, str], str]:
    """(host, program id) -> the device kind (chip name, else TPU/GPU/CPU) that ran it;
    (host, "") -> the host's most common one, for programs no op names."""
    out: dict[tuple[str, str], str] = {}
    counts: dict[str, dict[str, int]] = {}
    for device in profile.device_tables:
        name = _device_name(device.row)
        host_counts = counts.setdefault(device.host, {})
        host_counts[name] = host_counts.get(name, 0) + device.ops.n
        if not device.ops.n:
            continue
        for program_id in set(device.ops.strings("program_id").values):
            if program_id:
                out.setdefault((device.host, str(program_id)), name)
    for host, host_counts in counts.items():
        out[(host, "")] = max(host_counts.items(), key=lambda kv: (kv[1], kv[0]))[0]
    return out


def _device_memory(profile: Profile) -> dict[str, int]:
    """Device kind -> the memory size its planes state (``memory_size``), where they do."""
    import math

    out: dict[str, int] = {}
    for device in profile.device_tables:
        value = device.row.get("memory_bytes")
        if value is not None and not math.isnan(float(value)) and float(value) > 0:
            out[_device_name(device.row)] = int(value)
    return out


SUMMARY_FIELDS = (
    "peak_hbm_gib",
    "peak_program",
    "hbm_capacity_gib",
    "headroom_pct",
    "program_peak_gib",
)
_PLANS: weakref.WeakKeyDictionary[Any, MemoryReport] = weakref.WeakKeyDictionary()


def plan(profile: Profile) -> MemoryReport:
    """The profile's memory plans (:func:`memory_report` without allocator events, which would
    mean reading the file again), built on first use and kept with the profile: the memory
    analyzer and the report's summary share them."""
    found = _PLANS.get(profile)
    if found is None:
        found = _PLANS[profile] = memory_report(profile, allocators=False)
    return found


def summary_fields(profile: Profile) -> dict[str, Any]:
    """What ``analyze``'s summary says of memory: the largest peak (``peak_hbm_gib``, of
    ``peak_program``), the capacity of its device kind (``hbm_capacity_gib``), the headroom
    left (``headroom_pct`` of the capacity) and every program's peak by module name
    (``program_peak_gib``: the largest of same-named programs); null without HLO modules."""
    report = plan(profile)
    if not report.programs:
        return dict.fromkeys(SUMMARY_FIELDS)
    largest = report.programs[0]
    capacity = report.capacity_of(largest)
    headroom = report.headroom(largest.device_kind)
    peaks: dict[str, float] = {}
    for program in report.programs:  # largest first: the first of a name is its largest
        peaks.setdefault(program.module, program.peak_bytes / GIB)
    return {
        "peak_hbm_gib": largest.peak_bytes / GIB,
        "peak_program": largest.module,
        "hbm_capacity_gib": capacity / GIB if capacity else None,
        "headroom_pct": (
            100.0 * headroom / capacity if capacity and headroom is not None else None
        ),
        "program_peak_gib": peaks,
    }


# --------------------------------------------------------------------------- by model code


def by_scope(program: ProgramMemory) -> list[dict[str, Any]]:
    """Bytes live at the peak per scope (`tpuperf tree`'s groups) and pass, largest first."""
    totals: dict[str, dict[str, Any]] = {}
    for buffer in program.buffers:
        row = totals.setdefault(
            buffer.scope,
            {"scope": buffer.scope, "bytes": 0, "buffers": 0, "passes": dict.fromkeys(PASSES, 0)},
        )
        row["bytes"] += buffer.size_bytes
        row["buffers"] += 1
        row["passes"][buffer.pass_] += buffer.size_bytes
    return sorted(totals.values(), key=lambda r: (-r["bytes"], r["scope"]))


def by_pass(program: ProgramMemory) -> dict[str, int]:
    """Bytes live at the peak per pass (forward activations kept for the backward pass,
    backward, optimizer, other: parameters and ops without a scope)."""
    out = dict.fromkeys(PASSES, 0)
    for buffer in program.buffers:
        out[buffer.pass_] += buffer.size_bytes
    return out


def by_kind(program: ProgramMemory) -> dict[str, int]:
    return dict(program.split)


# --------------------------------------------------------------------------- JSON


def to_document(report: MemoryReport, top: int | None = None) -> dict[str, Any]:
    """The JSON document of ``tpuperf memory`` (see README, Memory)."""
    kinds = sorted(report.capacity_bytes)
    return {
        "source": report.source,
        "capacity_bytes": {k: report.capacity_bytes[k] for k in kinds},
        "capacity_source": {k: report.capacity_source[k] for k in kinds},
        "headroom_bytes": {k: report.headroom(k) for k in kinds},
        "largest_peak_bytes": {k: report.largest_peak(k) for k in kinds},
        "programs": [
            {
                "host": p.host,
                "module": p.module,
                "program_id": p.program_id,
                "device_kind": p.device_kind,
                "peak_bytes": p.peak_bytes,
                "capacity_bytes": report.capacity_of(p),
                "headroom_bytes": report.headroom_bytes(p),
                "split_bytes": dict(p.split),
                "live_peak_bytes": p.live_peak_bytes,
                "peak_op": p.peak_op,
                "peak_position": p.peak_position,
                "schedule_events": p.schedule_events,
                "by_pass_bytes": by_pass(p),
                "by_scope": by_scope(p),
                "remat_bytes": p.remat_bytes,
                "offloaded_bytes": sum(p.offloaded_bytes),
                "buffer_count": len(p.buffers),
                "buffers": [b.to_dict() for b in (p.buffers[:top] if top else p.buffers)],
            }
            for p in report.programs
        ],
        "allocators": [
            {
                "allocator": a.allocator,
                "events": a.events,
                "peak_bytes": a.peak_bytes,
                "peak_time_ps": a.peak_time_ps,
                "reserved_bytes": a.reserved_bytes_at_peak,
                "allocated_bytes": a.allocated_bytes_at_peak,
                "available_bytes": a.available_bytes_at_peak,
                "capacity_bytes": a.capacity_bytes,
                "fragmentation_pct": 100.0 * a.fragmentation,
                "lifetime_peak_bytes": a.lifetime_peak_bytes,
                "curve": [list(point) for point in a.curve],
            }
            for a in report.allocators
        ],
        "notes": list(report.notes) + explain_absent(report),
    }


def explain_absent(report: MemoryReport) -> list[str]:
    """The lines that say what a profile lacks for the memory view."""
    out = []
    if not report.hlo_protos:
        out.append(
            f"{report.source}: no HLO modules (the profile has no /host:metadata plane with "
            "Hlo Proto entries): no buffer assignment to read, so no memory view"
        )
    elif not report.programs:
        out.append(f"{report.source}: its HLO modules carry no buffer assignment")
    if not report.allocators:
        out.append(
            f"{report.source}: no allocator events (MemoryAllocation/MemoryDeallocation on "
            "/host:CPU): no memory over time"
        )
    return out
