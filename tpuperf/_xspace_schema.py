"""The XSpace protobuf schema, built at import time.

tpuperf reads XSpace files without TensorFlow, XProf or a protoc step: the
message types below are declared here with the public field numbers of
``xla/tsl/profiler/protobuf/xplane.proto`` (package ``tensorflow.profiler``)
and turned into message classes by the installed protobuf runtime. This works
with protobuf 4.21 through 7.x.

Reading a profile does not need it (:mod:`tpuperf.xspace` decodes the wire format itself):
writing one does (``tpuperf capture``, the profiler service), and tests check the decoder
against it.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto

# (name, number, type, label, message type or None, oneof index or None)
_MESSAGES: dict[str, list[tuple[str, int, int, int, str | None, int | None]]] = {
    "XSpace": [
        ("planes", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "XPlane", None),
        ("errors", 2, _F.TYPE_STRING, _F.LABEL_REPEATED, None, None),
        ("warnings", 3, _F.TYPE_STRING, _F.LABEL_REPEATED, None, None),
        ("hostnames", 4, _F.TYPE_STRING, _F.LABEL_REPEATED, None, None),
    ],
    "XPlane": [
        ("id", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
        ("lines", 3, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "XLine", None),
        (
            "event_metadata",
            4,
            _F.TYPE_MESSAGE,
            _F.LABEL_REPEATED,
            "XPlane.EventMetadataEntry",
            None,
        ),
        ("stat_metadata", 5, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "XPlane.StatMetadataEntry", None),
        ("stats", 6, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "XStat", None),
    ],
    "XLine": [
        ("id", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
        ("timestamp_ns", 3, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("events", 4, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "XEvent", None),
        ("duration_ps", 9, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("display_id", 10, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("display_name", 11, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
    ],
    "XEvent": [
        ("metadata_id", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("offset_ps", 2, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, 0),
        ("duration_ps", 3, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("stats", 4, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "XStat", None),
        ("num_occurrences", 5, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, 0),
    ],
    "XStat": [
        ("metadata_id", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("double_value", 2, _F.TYPE_DOUBLE, _F.LABEL_OPTIONAL, None, 0),
        ("uint64_value", 3, _F.TYPE_UINT64, _F.LABEL_OPTIONAL, None, 0),
        ("int64_value", 4, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, 0),
        ("str_value", 5, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, 0),
        ("bytes_value", 6, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, None, 0),
        ("ref_value", 7, _F.TYPE_UINT64, _F.LABEL_OPTIONAL, None, 0),
    ],
    "XEventMetadata": [
        ("id", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
        ("metadata", 3, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, None, None),
        ("display_name", 4, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
        ("stats", 5, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "XStat", None),
        ("child_id", 6, _F.TYPE_INT64, _F.LABEL_REPEATED, None, None),
    ],
    "XStatMetadata": [
        ("id", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
        ("description", 3, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
    ],
}
_ONEOFS = {"XEvent": ["data"], "XStat": ["value"]}
_MAP_ENTRIES = {"EventMetadataEntry": "XEventMetadata", "StatMetadataEntry": "XStatMetadata"}
_PACKAGE = "tensorflow.profiler"


def _add_fields(
    message: Any, fields: list[tuple[str, int, int, int, str | None, int | None]]
) -> None:
    for name, number, ftype, label, type_name, oneof in fields:
        field = message.field.add(name=name, number=number, type=ftype, label=label)
        if type_name is not None:
            field.type_name = f".{_PACKAGE}.{type_name}"
        if oneof is not None:
            field.oneof_index = oneof


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    # A file name of our own keeps this schema apart from a TensorFlow or XProf copy
    # of xplane.proto that may already sit in the default pool.
    proto = descriptor_pb2.FileDescriptorProto(
        name="tpuperf/xplane.proto", package=_PACKAGE, syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=name)
        _add_fields(message, fields)
        for oneof in _ONEOFS.get(name, []):
            message.oneof_decl.add(name=oneof)
        if name == "XPlane":
            for entry_name, value_type in _MAP_ENTRIES.items():
                entry = message.nested_type.add(name=entry_name)
                entry.options.map_entry = True
                _add_fields(
                    entry,
                    [
                        ("key", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
                        ("value", 2, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, value_type, None),
                    ],
                )
    return proto


def message_class(pool: descriptor_pool.DescriptorPool, full_name: str) -> Any:
    """The message class of ``full_name`` (``package.Message``) in ``pool``, on protobuf 4.21
    to 7.x (also used by :mod:`tpuperf._hlo_schema`)."""
    descriptor = pool.FindMessageTypeByName(full_name)
    get_class = getattr(message_factory, "GetMessageClass", None)
    if get_class is not None:  # protobuf >= 4.22
        return get_class(descriptor)
    factory: Any = message_factory.MessageFactory(pool)
    return factory.GetPrototype(descriptor)  # protobuf 4.21


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file_descriptor())

XSpace = message_class(_POOL, f"{_PACKAGE}.XSpace")
XPlane = message_class(_POOL, f"{_PACKAGE}.XPlane")
XLine = message_class(_POOL, f"{_PACKAGE}.XLine")
XEvent = message_class(_POOL, f"{_PACKAGE}.XEvent")
XStat = message_class(_POOL, f"{_PACKAGE}.XStat")
XEventMetadata = message_class(_POOL, f"{_PACKAGE}.XEventMetadata")
XStatMetadata = message_class(_POOL, f"{_PACKAGE}.XStatMetadata")
