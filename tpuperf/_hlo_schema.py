"""The part of XLA's HLO protobuf schema that tpuperf reads, and a reader of it from the wire.

GPU and CPU profiles carry each XLA module as a serialized ``xla.HloProto`` (the
``Hlo Proto`` stat of the ``/host:metadata`` plane's event metadata). Only what
:mod:`tpuperf.scopes` (scope data), :mod:`tpuperf.hlo_collectives` (the opcode, shape and
replica groups of collectives) and :mod:`tpuperf.memory_plan` (the buffer assignment) read is
declared here, with the public field numbers of openxla/xla ``xla/service/hlo.proto`` and
``xla/xla_data.proto`` (``OpMetadata``); every other field is skipped.

:func:`read` and :func:`read_buffers` read a serialized proto without the protobuf runtime
(importing it costs a small command 25-70 ms): each message's declared fields are attributes
with protobuf's defaults where absent (0, "", False, an empty tuple for a repeated field, an
empty message), and a message field is read on first access, so that what is never looked
at (the metadata of ops nobody asked about) is never decoded. A malformed message raises
:class:`~tpuperf.kernels.wire.DecodeError` when the part that holds the fault is read.

Writing needs protobuf (tests and fixtures build HLO protos): :data:`HloProto` and
:data:`HloBufferProto` are protobuf message classes of the same tables, built in a pool of
their own (apart from a jaxlib or XProf copy of the schema) on first use.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from tpuperf.kernels.wire import DecodeError, read_varint

# Field types: the integers are read as protobuf reads int64, int32 and bool.
INT64, INT32, BOOL, STRING, MESSAGE = range(5)

# (name, number, type, repeated, message type or None)
Field = tuple[str, int, int, bool, str | None]

MESSAGES: dict[str, list[Field]] = {
    "HloProto": [
        ("hlo_module", 1, MESSAGE, False, "HloModuleProto"),
    ],
    "HloModuleProto": [
        ("name", 1, STRING, False, None),
        ("entry_computation_name", 2, STRING, False, None),
        ("computations", 3, MESSAGE, True, "HloComputationProto"),
        ("id", 5, INT64, False, None),
        ("stack_frame_index", 17, MESSAGE, False, "StackFrameIndexProto"),
    ],
    "HloComputationProto": [
        ("name", 1, STRING, False, None),
        ("instructions", 2, MESSAGE, True, "HloInstructionProto"),
        ("id", 5, INT64, False, None),
    ],
    "HloInstructionProto": [
        ("name", 1, STRING, False, None),
        ("opcode", 2, STRING, False, None),
        ("metadata", 7, MESSAGE, False, "OpMetadata"),
        ("id", 35, INT64, False, None),
        ("called_computation_ids", 38, INT64, True, None),
        # What a collective moves and among whom (tpuperf.hlo_collectives).
        ("shape", 3, MESSAGE, False, "ShapeProto"),
        ("operand_ids", 36, INT64, True, None),
        ("replica_groups", 49, MESSAGE, True, "ReplicaGroup"),
        ("source_target_pairs", 52, MESSAGE, True, "SourceTarget"),
        ("collective_device_list", 87, MESSAGE, False, "CollectiveDeviceListProto"),
        # Newer XLA's mesh-axes form, printed as replica_groups=mesh['x'=8,'y'=1] {'x'}.
        ("mesh_device_list", 93, MESSAGE, False, "MeshAxesReplicaGroupListProto"),
    ],
    "ShapeProto": [
        ("element_type", 2, INT32, False, None),  # xla.PrimitiveType
        ("dimensions", 3, INT64, True, None),
        ("tuple_shapes", 4, MESSAGE, True, "ShapeProto"),
    ],
    "ReplicaGroup": [
        ("replica_ids", 1, INT64, True, None),
    ],
    "SourceTarget": [
        ("source", 1, INT64, False, None),
        ("target", 2, INT64, False, None),
    ],
    "CollectiveDeviceListProto": [
        ("replica_groups", 1, MESSAGE, True, "ReplicaGroup"),
        ("iota_replica_group_list", 2, MESSAGE, False, "IotaReplicaGroupListProto"),
    ],
    "IotaReplicaGroupListProto": [
        ("num_replica_groups", 1, INT64, False, None),
        ("num_devices_per_group", 2, INT64, False, None),
    ],
    "MeshAxesReplicaGroupListProto": [
        ("mesh", 1, MESSAGE, False, "MeshProto"),
        ("axes", 2, MESSAGE, True, "AxisRefProto"),
    ],
    "MeshProto": [
        ("axes", 1, MESSAGE, True, "MeshAxisProto"),
    ],
    "MeshAxisProto": [
        ("name", 1, STRING, False, None),
        ("size", 2, INT64, False, None),
    ],
    "AxisRefProto": [
        ("mesh_axis_index", 1, INT64, False, None),
    ],
    "OpMetadata": [
        ("op_type", 1, STRING, False, None),
        ("op_name", 2, STRING, False, None),
        ("source_file", 3, STRING, False, None),
        ("source_line", 4, INT32, False, None),
        ("stack_frame_id", 15, INT32, False, None),
    ],
    # Newer XLA puts the Python stack in one table per module; an op points at its
    # innermost frame (1-based ids, 0 for none).
    "StackFrameIndexProto": [
        ("file_names", 1, STRING, True, None),
        ("function_names", 2, STRING, True, None),
        ("file_locations", 3, MESSAGE, True, "FileLocation"),
        ("stack_frames", 4, MESSAGE, True, "StackFrame"),
    ],
    "FileLocation": [
        ("file_name_id", 1, INT32, False, None),
        ("function_name_id", 2, INT32, False, None),
        ("line", 3, INT32, False, None),
    ],
    "StackFrame": [
        ("file_location_id", 1, INT32, False, None),
        ("parent_frame_id", 2, INT32, False, None),
    ],
}

# What the memory view reads besides: field numbers of openxla/xla xla/service/hlo.proto
# (LogicalBufferProto, BufferAllocationProto, HeapSimulatorTrace, BufferAssignmentProto).
BUFFER_MESSAGES: dict[str, list[Field]] = {
    **MESSAGES,
    "HloProto": [
        *MESSAGES["HloProto"],
        ("buffer_assignment", 3, MESSAGE, False, "BufferAssignmentProto"),
    ],
    "BufferAssignmentProto": [
        ("logical_buffers", 1, MESSAGE, True, "LogicalBufferProto"),
        ("buffer_allocations", 3, MESSAGE, True, "BufferAllocationProto"),
        ("heap_simulator_traces", 4, MESSAGE, True, "HeapSimulatorTrace"),
    ],
    "LogicalBufferProto": [
        ("id", 1, INT64, False, None),
        ("size", 2, INT64, False, None),
        ("defined_at", 3, MESSAGE, False, "BufferLocation"),
        ("color", 4, INT64, False, None),
    ],
    "BufferLocation": [  # LogicalBufferProto.Location
        ("instruction_name", 2, STRING, False, None),
        ("shape_index", 3, INT64, True, None),
        ("instruction_id", 4, INT64, False, None),
    ],
    "BufferAllocationProto": [
        ("index", 1, INT64, False, None),
        ("size", 2, INT64, False, None),
        ("is_thread_local", 3, BOOL, False, None),
        ("is_entry_computation_parameter", 5, BOOL, False, None),
        ("parameter_number", 6, INT64, False, None),
        ("maybe_live_out", 7, BOOL, False, None),
        ("color", 8, INT64, False, None),
        ("assigned", 9, MESSAGE, True, "Assigned"),
        ("is_tuple", 11, BOOL, False, None),
        ("is_constant", 12, BOOL, False, None),
    ],
    "Assigned": [  # BufferAllocationProto.Assigned
        ("logical_buffer_id", 1, INT64, False, None),
        ("offset", 2, INT64, False, None),
        ("size", 3, INT64, False, None),
    ],
    "HeapSimulatorTrace": [
        ("events", 1, MESSAGE, True, "HeapEvent"),
        ("whole_module_simulation", 2, BOOL, False, None),
        ("buffer_allocation_index", 3, INT64, False, None),
    ],
    "HeapEvent": [  # HeapSimulatorTrace.Event; kind: ALLOC 0, FREE 1, SHARE_WITH 2
        ("kind", 1, INT32, False, None),
        ("buffer_id", 2, INT64, False, None),
        ("computation_name", 3, STRING, False, None),
        ("instruction_name", 4, STRING, False, None),
        ("share_with_canonical_id", 5, INT64, False, None),
    ],
}


_PACKAGE = "xla"


# --------------------------------------------------------------------------- reading


# Reading in Python costs each MB of HLO 75 ms (the collectives), 85 ms (the scopes) and
# 120 ms (the memory plan) more than protobuf's reader (upb); the protobuf runtime's import
# costs 20-70 ms, once. So protos are read from the wire until a process has read this many
# bytes of them (a small profile carries tens of KB; the three read each proto, so 256 KB is
# three reads of 85 KB), the rest by protobuf; where a reader says beforehand that what it is
# about to read does not fit (:func:`expect`), protobuf reads all of it. Either way every
# field holds the same value (tests/test_hlo_schema.py).
WIRE_BUDGET_BYTES = 1 << 18
_wire_bytes_read = 0


def read(data: bytes) -> Any:
    """The ``xla.HloProto`` of ``data`` with the fields of :data:`MESSAGES`."""
    if _from_wire(data):
        return _READERS["HloProto"](data, ((0, len(data)),))
    return _protobuf_class("HloProto").FromString(data)


def read_buffers(data: bytes) -> Any:
    """The ``xla.HloProto`` of ``data`` with its buffer assignment (:data:`BUFFER_MESSAGES`)."""
    if _from_wire(data):
        return _BUFFER_READERS["HloProto"](data, ((0, len(data)),))
    return _protobuf_class("HloBufferProto").FromString(data)


def expect(total_bytes: int) -> None:
    """Say that protos of ``total_bytes`` together are about to be read. Where they do not fit
    in what is left of the budget, protobuf reads them from the first: its import would be
    paid for the rest of them anyway, and it reads them three times faster."""
    global _wire_bytes_read
    if _wire_bytes_read + total_bytes > WIRE_BUDGET_BYTES:
        _wire_bytes_read = WIRE_BUDGET_BYTES


def _from_wire(data: bytes) -> bool:
    """Whether ``data`` is read by this module's reader (else by protobuf's)."""
    global _wire_bytes_read
    if _wire_bytes_read + len(data) > WIRE_BUDGET_BYTES:
        return False
    _wire_bytes_read += len(data)  # threads may race here: the budget is a rough one
    return True


class _Message:
    """A message read from the wire: its declared scalar fields are read when it is made,
    its message fields (:class:`_Lazy`) when first looked at."""

    # number -> (attribute, type, repeated) of the declared fields
    _fields: ClassVar[dict[int, tuple[str, int, bool]]] = {}

    def __init__(self, data: bytes = b"", spans: Iterable[tuple[int, int]] = ()) -> None:
        self._data = data
        self._spans: dict[int, list[tuple[int, int]]] = {}  # message fields: where they lie
        try:
            for start, stop in spans:
                _read_fields(self, data, start, stop)
        except (IndexError, UnicodeDecodeError) as exc:
            raise DecodeError(f"not a well-formed {type(self).__name__}: {exc}") from None


class _Lazy:
    """A message field: read from where it lies (all of its occurrences merged, as protobuf
    merges them) on first access, then kept on the message."""

    def __init__(self, name: str, number: int, repeated: bool, readers: dict[str, type]) -> None:
        self.name, self.number, self.repeated = name, number, repeated
        self.readers = readers
        self.type_name = ""

    def __get__(self, message: _Message | None, owner: type) -> Any:
        if message is None:
            return self
        spans = message._spans.get(self.number, ())
        cls = self.readers[self.type_name]
        if self.repeated:
            value: Any = tuple(cls(message._data, (span,)) for span in spans)
        else:
            value = cls(message._data, spans)
        message.__dict__[self.name] = value
        return value


def _integer(value: int, kind: int) -> int | bool:
    if kind == INT64:
        return value - (1 << 64) if value >= 1 << 63 else value
    if kind == INT32:
        value &= 0xFFFFFFFF
        return value - (1 << 32) if value >= 1 << 31 else value
    return value != 0


def _read_fields(message: _Message, data: bytes, pos: int, stop: int) -> None:
    """Read the fields of ``data[pos:stop]`` into ``message`` (the last value of a scalar
    wins, repeated values add up, as protobuf reads them)."""
    fields = message._fields
    values = message.__dict__
    while pos < stop:
        tag = data[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = read_varint(data, pos - 1, stop)
        wire = tag & 7
        value = 0
        start = pos
        if wire == 0:
            value = data[pos]
            pos += 1
            if value >= 0x80:
                value, pos = read_varint(data, pos - 1, stop)
        elif wire == 2:
            length = data[pos]
            pos += 1
            if length >= 0x80:
                length, pos = read_varint(data, pos - 1, stop)
            start = pos
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise DecodeError(f"wire type {wire} (not an HLO proto), at byte {start - 1}")
        if pos > stop:
            raise DecodeError(f"a field runs past the end of its message, at byte {start}")
        if tag < 8:
            raise DecodeError(f"field number 0 (not an HLO proto), at byte {start - 1}")
        spec = fields.get(tag >> 3)
        if spec is None:
            continue
        name, kind, repeated = spec
        if kind == MESSAGE:
            if wire == 2:
                message._spans.setdefault(tag >> 3, []).append((start, pos))
        elif kind == STRING:
            if wire == 2:
                text = str(data[start:pos], "utf-8")
                if repeated:
                    values.setdefault(name, []).append(text)
                else:
                    values[name] = text
        elif wire == 0:
            if repeated:
                values.setdefault(name, []).append(_integer(value, kind))
            else:
                values[name] = _integer(value, kind)
        elif wire == 2 and repeated:  # packed
            found = values.setdefault(name, [])
            at = start
            while at < pos:
                value = data[at]
                at += 1
                if value >= 0x80:
                    value, at = read_varint(data, at - 1, pos)
                found.append(_integer(value, kind))
            if at > pos:
                raise DecodeError(f"a packed varint runs past its field, at byte {start}")


_DEFAULTS = {INT64: 0, INT32: 0, BOOL: False, STRING: ""}


def _readers(messages: dict[str, list[Field]]) -> dict[str, type]:
    """A :class:`_Message` class per message of ``messages``."""
    readers: dict[str, type] = {}
    for type_name, fields in messages.items():
        namespace: dict[str, Any] = {
            "_fields": {
                number: (name, kind, repeated) for name, number, kind, repeated, _ in fields
            }
        }
        for name, number, kind, repeated, message_type in fields:
            if kind == MESSAGE:
                lazy = _Lazy(name, number, repeated, readers)
                lazy.type_name = message_type or ""
                namespace[name] = lazy
            else:
                namespace[name] = () if repeated else _DEFAULTS[kind]
        readers[type_name] = type(type_name, (_Message,), namespace)
    return readers


_READERS = _readers(MESSAGES)
_BUFFER_READERS = _readers(BUFFER_MESSAGES)


# --------------------------------------------------------------------------- writing


def _message_classes() -> dict[str, Any]:
    """The protobuf classes :data:`HloProto` and :data:`HloBufferProto` (each in a pool of
    its own: the same names, more fields)."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    from tpuperf._xspace_schema import message_class

    proto_types = {
        INT64: descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
        INT32: descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
        BOOL: descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
        STRING: descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        MESSAGE: descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
    }
    repeated_label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    optional_label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    classes = {}
    for class_name, messages, file_name in (
        ("HloProto", MESSAGES, "tpuperf/hlo.proto"),
        ("HloBufferProto", BUFFER_MESSAGES, "tpuperf/hlo_buffers.proto"),
    ):
        proto = descriptor_pb2.FileDescriptorProto(
            name=file_name, package=_PACKAGE, syntax="proto3"
        )
        for name, fields in messages.items():
            message = proto.message_type.add(name=name)
            for field_name, number, kind, repeated, type_name in fields:
                field = message.field.add(
                    name=field_name,
                    number=number,
                    type=proto_types[kind],
                    label=repeated_label if repeated else optional_label,
                )
                if type_name is not None:
                    field.type_name = f".{_PACKAGE}.{type_name}"
        pool = descriptor_pool.DescriptorPool()
        pool.Add(proto)
        classes[class_name] = message_class(pool, f"{_PACKAGE}.HloProto")
    return classes


_CLASSES: dict[str, Any] = {}


def _protobuf_class(name: str) -> Any:
    if not _CLASSES:
        _CLASSES.update(_message_classes())
    return _CLASSES[name]


def __getattr__(name: str) -> Any:
    """:data:`HloProto` and :data:`HloBufferProto`, built on first use (they import protobuf)."""
    if name in ("HloProto", "HloBufferProto"):
        return _protobuf_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
