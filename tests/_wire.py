"""Protobuf wire bytes made by hand, for the decoders' tests."""

from __future__ import annotations


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def len_field(number: int, payload: bytes) -> bytes:
    return tag(number, 2) + varint(len(payload)) + payload
