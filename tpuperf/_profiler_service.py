"""The messages of the profiler gRPC service, built at import time.

A process that called ``jax.profiler.start_server(port)`` serves
``tensorflow.ProfilerService``; :mod:`tpuperf.capturing` calls its ``Profile``
method with grpc's generic unary calls, so neither generated stubs nor a protoc
step are needed. The field numbers are the public ones of
``tsl/profiler/protobuf/profiler_service.proto`` and ``profiler_options.proto``
(package ``tensorflow``), as compiled into jaxlib 0.10 (``emit_xspace`` = 9 in
the request and ``xspace`` = 8 in the response are what bring the profile back
to the caller). Unknown fields are ignored by older servers, which is what the
server-side-write fallback relies on.

The messages live in the pool of :mod:`tpuperf._xspace_schema`, so
``ProfileResponse.xspace`` is that module's ``XSpace``: one definition of it.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2

from tpuperf._xspace_schema import _POOL, message_class

_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "tensorflow"
_XSPACE = ".tensorflow.profiler.XSpace"

SERVICE = "tensorflow.ProfilerService"
PROFILE_METHOD = f"/{SERVICE}/Profile"
TERMINATE_METHOD = f"/{SERVICE}/Terminate"

# (name, number, type, label, fully qualified message/enum type or None, oneof index or None)
_Field = tuple[str, int, int, int, str | None, int | None]

_OPT, _REP = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

_PROFILE_OPTIONS: list[_Field] = [
    ("include_dataset_ops", 1, _F.TYPE_BOOL, _OPT, None, None),
    ("host_tracer_level", 2, _F.TYPE_UINT32, _OPT, None, None),
    ("device_tracer_level", 3, _F.TYPE_UINT32, _OPT, None, None),
    ("python_tracer_level", 4, _F.TYPE_UINT32, _OPT, None, None),
    # Without version >= 1 the server ignores the levels above and uses its defaults.
    ("version", 5, _F.TYPE_UINT32, _OPT, None, None),
    ("device_type", 6, _F.TYPE_ENUM, _OPT, ".tensorflow.ProfileOptions.DeviceType", None),
    ("enable_hlo_proto", 7, _F.TYPE_BOOL, _OPT, None, None),
    # Unix time (ns) at which the server's profiler starts: one window for many hosts.
    ("start_timestamp_ns", 8, _F.TYPE_UINT64, _OPT, None, None),
    ("duration_ms", 9, _F.TYPE_UINT64, _OPT, None, None),
    ("repository_path", 10, _F.TYPE_STRING, _OPT, None, None),
    ("trace_options", 11, _F.TYPE_MESSAGE, _OPT, ".tensorflow.ProfileOptions.TraceOptions", None),
    (
        "advanced_configuration",
        12,
        _F.TYPE_MESSAGE,
        _REP,
        ".tensorflow.ProfileOptions.AdvancedConfigurationEntry",
        None,
    ),
    ("raise_error_on_start_failure", 13, _F.TYPE_BOOL, _OPT, None, None),
    ("session_id", 14, _F.TYPE_STRING, _OPT, None, None),
    ("override_hostname", 15, _F.TYPE_STRING, _OPT, None, None),
]

_PROFILE_REQUEST: list[_Field] = [
    ("duration_ms", 1, _F.TYPE_UINT64, _OPT, None, None),
    ("max_events", 2, _F.TYPE_UINT64, _OPT, None, None),
    ("tools", 3, _F.TYPE_STRING, _REP, None, None),
    ("opts", 4, _F.TYPE_MESSAGE, _OPT, ".tensorflow.ProfileOptions", None),
    # Where a server that does not send the XSpace back writes it, on its own disk:
    # <repository_root>/<session_id>/<host_name>.xplane.pb (what XProf's capture uses).
    ("repository_root", 5, _F.TYPE_STRING, _OPT, None, None),
    ("session_id", 6, _F.TYPE_STRING, _OPT, None, None),
    ("host_name", 7, _F.TYPE_STRING, _OPT, None, None),
    (
        "tool_options",
        8,
        _F.TYPE_MESSAGE,
        _REP,
        ".tensorflow.ProfileRequest.ToolOptionsEntry",
        None,
    ),
    ("emit_xspace", 9, _F.TYPE_BOOL, _OPT, None, None),
]

_PROFILE_RESPONSE: list[_Field] = [
    ("tool_data", 6, _F.TYPE_MESSAGE, _REP, ".tensorflow.ProfileToolData", None),
    ("empty_trace", 7, _F.TYPE_BOOL, _OPT, None, None),
    ("xspace", 8, _F.TYPE_MESSAGE, _OPT, _XSPACE, None),
]

# The same wire format with the XSpace left serialized (a length-delimited field reads
# the same as bytes): a large profile goes to disk without being decoded and re-encoded.
_PROFILE_RESPONSE_BYTES: list[_Field] = [
    *_PROFILE_RESPONSE[:2],
    ("xspace", 8, _F.TYPE_BYTES, _OPT, None, None),
]

# The messages besides ProfileOptions (built with its nested types below), in file order.
_MESSAGES: dict[str, list[_Field]] = {
    "ToolRequestOptions": [
        ("output_formats", 2, _F.TYPE_STRING, _OPT, None, None),
        ("save_to_repo", 3, _F.TYPE_BOOL, _OPT, None, None),
    ],
    "ProfileRequest": _PROFILE_REQUEST,
    "ProfileToolData": [
        ("name", 1, _F.TYPE_STRING, _OPT, None, None),
        ("data", 2, _F.TYPE_BYTES, _OPT, None, None),
    ],
    "ProfileResponse": _PROFILE_RESPONSE,
    "ProfileResponseBytes": _PROFILE_RESPONSE_BYTES,
    "TerminateRequest": [("session_id", 1, _F.TYPE_STRING, _OPT, None, None)],
    "TerminateResponse": [],
}
# The map<string, V> fields: the message, its entry type, V.
_MAP_ENTRIES = [
    (
        "ProfileOptions",
        "AdvancedConfigurationEntry",
        ".tensorflow.ProfileOptions.AdvancedConfigValue",
    ),
    ("ProfileRequest", "ToolOptionsEntry", ".tensorflow.ToolRequestOptions"),
]


def _add_fields(message: Any, fields: list[_Field]) -> None:
    for name, number, ftype, label, type_name, oneof in fields:
        field = message.field.add(name=name, number=number, type=ftype, label=label)
        if type_name is not None:
            field.type_name = type_name
        if oneof is not None:
            field.oneof_index = oneof


def _map_entry(message: Any, name: str, value_type_name: str) -> None:
    entry = message.nested_type.add(name=name)
    entry.options.map_entry = True
    _add_fields(
        entry,
        [
            ("key", 1, _F.TYPE_STRING, _OPT, None, None),
            ("value", 2, _F.TYPE_MESSAGE, _OPT, value_type_name, None),
        ],
    )


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    # Our own file name, as in _xspace_schema, so a TensorFlow or XProf copy of the
    # service in the default pool cannot clash with these.
    proto = descriptor_pb2.FileDescriptorProto(
        name="tpuperf/profiler_service.proto",
        package=_PACKAGE,
        syntax="proto3",
        dependency=["tpuperf/xplane.proto"],
    )

    options = proto.message_type.add(name="ProfileOptions")
    _add_fields(options, _PROFILE_OPTIONS)
    device_type = options.enum_type.add(name="DeviceType")
    for number, name in enumerate(["UNSPECIFIED", "CPU", "GPU", "TPU", "PLUGGABLE_DEVICE"]):
        device_type.value.add(name=name, number=number)
    trace_options = options.nested_type.add(name="TraceOptions")
    _add_fields(trace_options, [("host_traceme_filter_mask", 1, _F.TYPE_UINT64, _OPT, None, None)])
    config_value = options.nested_type.add(name="AdvancedConfigValue")
    config_value.oneof_decl.add(name="value")
    _add_fields(
        config_value,
        [
            ("string_value", 1, _F.TYPE_STRING, _OPT, None, 0),
            ("bool_value", 2, _F.TYPE_BOOL, _OPT, None, 0),
            ("int64_value", 3, _F.TYPE_INT64, _OPT, None, 0),
        ],
    )
    for name, fields in _MESSAGES.items():
        _add_fields(proto.message_type.add(name=name), fields)
    messages = {m.name: m for m in proto.message_type}
    for owner, entry, value_type_name in _MAP_ENTRIES:
        _map_entry(messages[owner], entry, value_type_name)
    response_bytes = messages["ProfileResponseBytes"]
    # proto3 `optional`, so that an empty XSpace that was sent differs from none sent.
    response_bytes.oneof_decl.add(name="_xspace")
    response_bytes.field[-1].oneof_index = 0
    response_bytes.field[-1].proto3_optional = True
    return proto


def _message_class(name: str) -> Any:
    return message_class(_POOL, f"{_PACKAGE}.{name}")


_POOL.Add(_file_descriptor())

ProfileOptions = _message_class("ProfileOptions")
ToolRequestOptions = _message_class("ToolRequestOptions")
ProfileRequest = _message_class("ProfileRequest")
ProfileToolData = _message_class("ProfileToolData")
ProfileResponse = _message_class("ProfileResponse")
ProfileResponseBytes = _message_class("ProfileResponseBytes")
TerminateRequest = _message_class("TerminateRequest")
TerminateResponse = _message_class("TerminateResponse")
