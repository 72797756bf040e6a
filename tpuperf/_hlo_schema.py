"""The part of XLA's HLO protobuf schema that names ops' scopes, built at import time.

GPU and CPU profiles carry each XLA module as a serialized ``xla.HloProto`` (the
``Hlo Proto`` stat of the ``/host:metadata`` plane's event metadata). Only what
:mod:`tpuperf.scopes` reads is declared here, with the public field numbers of
openxla/xla ``xla/service/hlo.proto`` and ``xla/xla_data.proto`` (``OpMetadata``);
every other field is skipped by the protobuf runtime as unknown. As with
:mod:`tpuperf._xspace_schema`, nothing is generated or checked in, and the types
live in a pool of their own, apart from a jaxlib or XProf copy of the same schema.

Only :mod:`tpuperf.scopes` (scope data), :mod:`tpuperf.hlo_collectives` (the opcode, shape and
replica groups of collectives) and :mod:`tpuperf.memory_plan` import this module, and only when
they are asked for. :data:`HloProto` reads what scopes need; :data:`HloBufferProto` reads the
same message with the module's buffer assignment (``HloProto.buffer_assignment``: logical
buffers, allocations, heap simulator traces), which only the memory view needs (decoding it
costs time).
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool

from tpuperf._xspace_schema import message_class

_F = descriptor_pb2.FieldDescriptorProto
_OPTIONAL, _REPEATED = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

# (name, number, type, label, message type or None)
_MESSAGES: dict[str, list[tuple[str, int, int, int, str | None]]] = {
    "HloProto": [
        ("hlo_module", 1, _F.TYPE_MESSAGE, _OPTIONAL, "HloModuleProto"),
    ],
    "HloModuleProto": [
        ("name", 1, _F.TYPE_STRING, _OPTIONAL, None),
        ("entry_computation_name", 2, _F.TYPE_STRING, _OPTIONAL, None),
        ("computations", 3, _F.TYPE_MESSAGE, _REPEATED, "HloComputationProto"),
        ("id", 5, _F.TYPE_INT64, _OPTIONAL, None),
        ("stack_frame_index", 17, _F.TYPE_MESSAGE, _OPTIONAL, "StackFrameIndexProto"),
    ],
    "HloComputationProto": [
        ("name", 1, _F.TYPE_STRING, _OPTIONAL, None),
        ("instructions", 2, _F.TYPE_MESSAGE, _REPEATED, "HloInstructionProto"),
        ("id", 5, _F.TYPE_INT64, _OPTIONAL, None),
    ],
    "HloInstructionProto": [
        ("name", 1, _F.TYPE_STRING, _OPTIONAL, None),
        ("opcode", 2, _F.TYPE_STRING, _OPTIONAL, None),
        ("metadata", 7, _F.TYPE_MESSAGE, _OPTIONAL, "OpMetadata"),
        ("id", 35, _F.TYPE_INT64, _OPTIONAL, None),
        ("called_computation_ids", 38, _F.TYPE_INT64, _REPEATED, None),
        # What a collective moves and among whom (tpuperf.hlo_collectives).
        ("shape", 3, _F.TYPE_MESSAGE, _OPTIONAL, "ShapeProto"),
        ("operand_ids", 36, _F.TYPE_INT64, _REPEATED, None),
        ("replica_groups", 49, _F.TYPE_MESSAGE, _REPEATED, "ReplicaGroup"),
        ("source_target_pairs", 52, _F.TYPE_MESSAGE, _REPEATED, "SourceTarget"),
        ("collective_device_list", 87, _F.TYPE_MESSAGE, _OPTIONAL, "CollectiveDeviceListProto"),
        # Newer XLA's mesh-axes form, printed as replica_groups=mesh['x'=8,'y'=1] {'x'}.
        ("mesh_device_list", 93, _F.TYPE_MESSAGE, _OPTIONAL, "MeshAxesReplicaGroupListProto"),
    ],
    "ShapeProto": [
        ("element_type", 2, _F.TYPE_INT32, _OPTIONAL, None),  # xla.PrimitiveType
        ("dimensions", 3, _F.TYPE_INT64, _REPEATED, None),
        ("tuple_shapes", 4, _F.TYPE_MESSAGE, _REPEATED, "ShapeProto"),
    ],
    "ReplicaGroup": [
        ("replica_ids", 1, _F.TYPE_INT64, _REPEATED, None),
    ],
    "SourceTarget": [
        ("source", 1, _F.TYPE_INT64, _OPTIONAL, None),
        ("target", 2, _F.TYPE_INT64, _OPTIONAL, None),
    ],
    "CollectiveDeviceListProto": [
        ("replica_groups", 1, _F.TYPE_MESSAGE, _REPEATED, "ReplicaGroup"),
        ("iota_replica_group_list", 2, _F.TYPE_MESSAGE, _OPTIONAL, "IotaReplicaGroupListProto"),
    ],
    "IotaReplicaGroupListProto": [
        ("num_replica_groups", 1, _F.TYPE_INT64, _OPTIONAL, None),
        ("num_devices_per_group", 2, _F.TYPE_INT64, _OPTIONAL, None),
    ],
    "MeshAxesReplicaGroupListProto": [
        ("mesh", 1, _F.TYPE_MESSAGE, _OPTIONAL, "MeshProto"),
        ("axes", 2, _F.TYPE_MESSAGE, _REPEATED, "AxisRefProto"),
    ],
    "MeshProto": [
        ("axes", 1, _F.TYPE_MESSAGE, _REPEATED, "MeshAxisProto"),
    ],
    "MeshAxisProto": [
        ("name", 1, _F.TYPE_STRING, _OPTIONAL, None),
        ("size", 2, _F.TYPE_INT64, _OPTIONAL, None),
    ],
    "AxisRefProto": [
        ("mesh_axis_index", 1, _F.TYPE_INT64, _OPTIONAL, None),
    ],
    "OpMetadata": [
        ("op_type", 1, _F.TYPE_STRING, _OPTIONAL, None),
        ("op_name", 2, _F.TYPE_STRING, _OPTIONAL, None),
        ("source_file", 3, _F.TYPE_STRING, _OPTIONAL, None),
        ("source_line", 4, _F.TYPE_INT32, _OPTIONAL, None),
        ("stack_frame_id", 15, _F.TYPE_INT32, _OPTIONAL, None),
    ],
    # Newer XLA puts the Python stack in one table per module; an op points at its
    # innermost frame (1-based ids, 0 for none).
    "StackFrameIndexProto": [
        ("file_names", 1, _F.TYPE_STRING, _REPEATED, None),
        ("function_names", 2, _F.TYPE_STRING, _REPEATED, None),
        ("file_locations", 3, _F.TYPE_MESSAGE, _REPEATED, "FileLocation"),
        ("stack_frames", 4, _F.TYPE_MESSAGE, _REPEATED, "StackFrame"),
    ],
    "FileLocation": [
        ("file_name_id", 1, _F.TYPE_INT32, _OPTIONAL, None),
        ("function_name_id", 2, _F.TYPE_INT32, _OPTIONAL, None),
        ("line", 3, _F.TYPE_INT32, _OPTIONAL, None),
    ],
    "StackFrame": [
        ("file_location_id", 1, _F.TYPE_INT32, _OPTIONAL, None),
        ("parent_frame_id", 2, _F.TYPE_INT32, _OPTIONAL, None),
    ],
}
_PACKAGE = "xla"


# What the memory view reads besides: field numbers of openxla/xla xla/service/hlo.proto
# (LogicalBufferProto, BufferAllocationProto, HeapSimulatorTrace, BufferAssignmentProto).
_BUFFER_MESSAGES: dict[str, list[tuple[str, int, int, int, str | None]]] = {
    **_MESSAGES,
    "HloProto": [
        *_MESSAGES["HloProto"],
        ("buffer_assignment", 3, _F.TYPE_MESSAGE, _OPTIONAL, "BufferAssignmentProto"),
    ],
    "BufferAssignmentProto": [
        ("logical_buffers", 1, _F.TYPE_MESSAGE, _REPEATED, "LogicalBufferProto"),
        ("buffer_allocations", 3, _F.TYPE_MESSAGE, _REPEATED, "BufferAllocationProto"),
        ("heap_simulator_traces", 4, _F.TYPE_MESSAGE, _REPEATED, "HeapSimulatorTrace"),
    ],
    "LogicalBufferProto": [
        ("id", 1, _F.TYPE_INT64, _OPTIONAL, None),
        ("size", 2, _F.TYPE_INT64, _OPTIONAL, None),
        ("defined_at", 3, _F.TYPE_MESSAGE, _OPTIONAL, "BufferLocation"),
        ("color", 4, _F.TYPE_INT64, _OPTIONAL, None),
    ],
    "BufferLocation": [  # LogicalBufferProto.Location
        ("instruction_name", 2, _F.TYPE_STRING, _OPTIONAL, None),
        ("shape_index", 3, _F.TYPE_INT64, _REPEATED, None),
        ("instruction_id", 4, _F.TYPE_INT64, _OPTIONAL, None),
    ],
    "BufferAllocationProto": [
        ("index", 1, _F.TYPE_INT64, _OPTIONAL, None),
        ("size", 2, _F.TYPE_INT64, _OPTIONAL, None),
        ("is_thread_local", 3, _F.TYPE_BOOL, _OPTIONAL, None),
        ("is_entry_computation_parameter", 5, _F.TYPE_BOOL, _OPTIONAL, None),
        ("parameter_number", 6, _F.TYPE_INT64, _OPTIONAL, None),
        ("maybe_live_out", 7, _F.TYPE_BOOL, _OPTIONAL, None),
        ("color", 8, _F.TYPE_INT64, _OPTIONAL, None),
        ("assigned", 9, _F.TYPE_MESSAGE, _REPEATED, "Assigned"),
        ("is_tuple", 11, _F.TYPE_BOOL, _OPTIONAL, None),
        ("is_constant", 12, _F.TYPE_BOOL, _OPTIONAL, None),
    ],
    "Assigned": [  # BufferAllocationProto.Assigned
        ("logical_buffer_id", 1, _F.TYPE_INT64, _OPTIONAL, None),
        ("offset", 2, _F.TYPE_INT64, _OPTIONAL, None),
        ("size", 3, _F.TYPE_INT64, _OPTIONAL, None),
    ],
    "HeapSimulatorTrace": [
        ("events", 1, _F.TYPE_MESSAGE, _REPEATED, "HeapEvent"),
        ("whole_module_simulation", 2, _F.TYPE_BOOL, _OPTIONAL, None),
        ("buffer_allocation_index", 3, _F.TYPE_INT64, _OPTIONAL, None),
    ],
    "HeapEvent": [  # HeapSimulatorTrace.Event; kind: ALLOC 0, FREE 1, SHARE_WITH 2
        ("kind", 1, _F.TYPE_INT32, _OPTIONAL, None),
        ("buffer_id", 2, _F.TYPE_INT64, _OPTIONAL, None),
        ("computation_name", 3, _F.TYPE_STRING, _OPTIONAL, None),
        ("instruction_name", 4, _F.TYPE_STRING, _OPTIONAL, None),
        ("share_with_canonical_id", 5, _F.TYPE_INT64, _OPTIONAL, None),
    ],
}


def _file_descriptor(
    messages: dict[str, list[tuple[str, int, int, int, str | None]]], file_name: str
) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name=file_name, package=_PACKAGE, syntax="proto3")
    for name, fields in messages.items():
        message = proto.message_type.add(name=name)
        for field_name, number, ftype, label, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=ftype, label=label)
            if type_name is not None:
                field.type_name = f".{_PACKAGE}.{type_name}"
    return proto


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file_descriptor(_MESSAGES, "tpuperf/hlo.proto"))

HloProto = message_class(_POOL, f"{_PACKAGE}.HloProto")

# A pool of its own: the same names, more fields.
_BUFFER_POOL = descriptor_pool.DescriptorPool()
_BUFFER_POOL.Add(_file_descriptor(_BUFFER_MESSAGES, "tpuperf/hlo_buffers.proto"))

HloBufferProto = message_class(_BUFFER_POOL, f"{_PACKAGE}.HloProto")
