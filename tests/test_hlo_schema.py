"""The HLO proto reader (:mod:`tpuperf._hlo_schema`) against the protobuf runtime: the same
value in every declared field of every module of the fixtures and of real profiles, the wire
forms protobuf accepts (packed and unpacked, repeated occurrences merged, negative integers),
and an error where protobuf raises one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests._wire import len_field, tag, varint
from tests.conftest import REPO, SHARED_PROFILES
from tpuperf import _hlo_schema
from tpuperf._hlo_schema import BUFFER_MESSAGES, MESSAGE, MESSAGES
from tpuperf.kernels.wire import DecodeError

_PROFILES = [
    REPO / "fixtures" / "data" / "memory_cnn.xplane.pb",
    REPO / "fixtures" / "data" / "coll_straggler.xplane.pb",
    REPO / "fixtures" / "data" / "diff_lm_bf16.xplane.pb",
    SHARED_PROFILES / "gpu" / "mi300_jax_te_fused_attn.xplane.pb",
    SHARED_PROFILES / "tpu" / "v6e_4chip_inference.xplane.pb",
]


@pytest.fixture(autouse=True)
def _from_the_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every proto read by this module's reader, whatever was read before."""
    monkeypatch.setattr(_hlo_schema, "WIRE_BUDGET_BYTES", 1 << 62)


def _same(ours: Any, theirs: Any, type_name: str, messages: dict[str, Any], where: str) -> int:
    """Assert that every declared field of ``ours`` equals protobuf's ``theirs``; the number
    of values compared."""
    compared = 0
    for name, _, kind, repeated, message_type in messages[type_name]:
        mine, its = getattr(ours, name), getattr(theirs, name)
        at = f"{where}.{name}"
        if kind == MESSAGE:
            if repeated:
                assert len(mine) == len(its), at
                for i, (a, b) in enumerate(zip(mine, its, strict=True)):
                    compared += _same(a, b, message_type, messages, f"{at}[{i}]")
            else:
                compared += _same(mine, its, message_type, messages, at)
        else:
            assert (list(mine) if repeated else mine) == (list(its) if repeated else its), at
            assert (
                all(type(v) is type(w) for v, w in zip(mine, its, strict=True))
                if repeated
                else (type(mine) is type(its))
            ), at
            compared += 1
    return compared


def _protos(path: Path) -> list[bytes]:
    from tpuperf.profiles import load

    if not path.exists():
        pytest.skip(f"{path} not available")
    return [data for by_name in load(path).hlo_protos.values() for data in by_name.values()]


@pytest.mark.parametrize("path", _PROFILES, ids=lambda p: p.name)
def test_every_declared_field_reads_as_protobuf_reads_it(path: Path) -> None:
    protos = _protos(path)
    assert protos
    compared = 0
    for data in protos:
        compared += _same(
            _hlo_schema.read(data), _hlo_schema.HloProto.FromString(data), "HloProto", MESSAGES, ""
        )
        compared += _same(
            _hlo_schema.read_buffers(data),
            _hlo_schema.HloBufferProto.FromString(data),
            "HloProto",
            BUFFER_MESSAGES,
            "",
        )
    assert compared > 100 * len(protos)


def _field(number: int, wire: int, payload: bytes | int) -> bytes:
    if wire == 0:
        assert isinstance(payload, int)
        return tag(number, 0) + varint(payload)
    assert isinstance(payload, bytes)
    return len_field(number, payload)


def test_wire_forms_protobuf_accepts() -> None:
    """Unpacked and packed repeated integers, negative int64 and int32 values, a scalar given
    twice (the last wins), a message given twice (merged), an unknown field, a known field with
    another wire type (skipped), as the protobuf runtime reads them."""
    metadata = _field(1, 2, b"add") + _field(4, 0, -7) + _field(15, 0, 3)
    shape = _field(2, 0, 11) + _field(3, 2, b"\x04\x80\x01")  # dimensions packed: 4, 128
    instruction = (
        _field(1, 2, b"first")
        + _field(1, 2, "név".encode())  # the last value wins
        + _field(2, 2, b"all-reduce")
        + _field(35, 0, -5)
        + _field(36, 0, 3)  # operand_ids, unpacked
        + _field(36, 2, b"\x01\x96\x01")  # packed: 1, 150
        + _field(38, 0, 2)
        + _field(7, 2, metadata[:5])  # metadata in two parts, merged
        + _field(7, 2, metadata[5:])
        + _field(3, 2, shape)
        + _field(49, 2, _field(1, 2, b"\x00\x01\x02\x03"))
        + _field(999, 2, b"unknown")
        + _field(5, 0, 1)  # no field 5 declared: skipped
        + _field(2, 0, 4)  # opcode as a varint: not a string, skipped
    )
    computation = _field(1, 2, b"main") + _field(2, 2, instruction) + _field(5, 0, 9)
    module = _field(1, 2, b"m") + _field(3, 2, computation) + _field(5, 0, 1 << 40)
    data = _field(1, 2, module)
    ours, theirs = _hlo_schema.read(data), _hlo_schema.HloProto.FromString(data)
    assert _same(ours, theirs, "HloProto", MESSAGES, "") > 20
    read = ours.hlo_module.computations[0].instructions[0]
    assert (read.name, read.id, list(read.operand_ids)) == ("név", -5, [3, 1, 150])
    assert (read.metadata.op_type, read.metadata.source_line) == ("add", -7)
    assert list(read.shape.dimensions) == [4, 128]
    assert list(read.replica_groups[0].replica_ids) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "data",
    [
        b"\x0a\xff\xff\xff\x0fnot an HloProto",  # a length past the end
        b"\x0a\x03\x0a\x05ab",  # a nested length past its message
        b"\x0a\x04\x0a\x02\xff\xfe",  # a string that is not UTF-8
        b"\x0a\x02\x00\x01",  # field number 0
        b"\x0a\x02\x0b\x01",  # wire type 3 (a group)
    ],
)
def test_a_malformed_proto_raises_decode_error(data: bytes) -> None:
    with pytest.raises(Exception):  # noqa: B017 - protobuf's own error
        _hlo_schema.HloProto.FromString(data).hlo_module.name  # noqa: B018
    with pytest.raises(DecodeError):
        _hlo_schema.read(data).hlo_module.name  # noqa: B018


def test_past_the_budget_protobuf_reads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a process has read WIRE_BUDGET_BYTES of protos from the wire, protobuf reads the
    rest, to the same values."""
    data = _protos(_PROFILES[0])[0]
    monkeypatch.setattr(_hlo_schema, "WIRE_BUDGET_BYTES", len(data) + 1)
    monkeypatch.setattr(_hlo_schema, "_wire_bytes_read", 0)
    first, second = _hlo_schema.read_buffers(data), _hlo_schema.read_buffers(data)
    assert isinstance(first, _hlo_schema._Message)
    assert isinstance(second, _hlo_schema.HloBufferProto)
    assert _same(first, second, "HloProto", BUFFER_MESSAGES, "") > 100


def test_what_does_not_fit_in_the_budget_protobuf_reads_from_the_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reader that says what it is about to read (expect) has protobuf read all of it where
    it does not fit in what is left of the budget, and nothing changes where it fits."""
    data = _protos(_PROFILES[0])[0]
    monkeypatch.setattr(_hlo_schema, "WIRE_BUDGET_BYTES", 3 * len(data) - 1)
    monkeypatch.setattr(_hlo_schema, "_wire_bytes_read", 0)
    _hlo_schema.expect(2 * len(data))  # fits
    assert isinstance(_hlo_schema.read(data), _hlo_schema._Message)
    _hlo_schema.expect(2 * len(data))  # 1 read + 2 to come: none from the wire
    first = _hlo_schema.read(data)
    assert isinstance(first, _hlo_schema.HloProto)
    assert isinstance(_hlo_schema.read_buffers(data), _hlo_schema.HloBufferProto)
    assert _same(_hlo_schema._READERS["HloProto"](data, ((0, len(data)),)), first, "HloProto",
                 MESSAGES, "") > 100  # fmt: skip
