"""The protobuf wire format read with numpy, many messages at once.

What :mod:`tpuperf.xspace` reads message by message in bulk (plane headers, metadata, stats),
and what the numpy kernels (:mod:`tpuperf.kernels._numpy`) build on: varints decoded as
columns, the fields of many small messages decoded round by round, and the records of a
line's events found without a per-event loop (:func:`record_starts`). A malformed message
raises :class:`DecodeError` with the byte offset of the fault.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np


class DecodeError(ValueError):
    """The bytes are not a well-formed XSpace."""


WIRE_VARINT, WIRE_FIXED64, WIRE_LEN, WIRE_FIXED32 = 0, 1, 2, 5

# XEvent's fields (xplane.proto), and the tag of one event record of XLine.events (field 4).
EVENT_METADATA_ID, EVENT_OFFSET_PS, EVENT_DURATION_PS, EVENT_STATS = 1, 2, 3, 4
EVENT_RECORD_TAG = (4 << 3) | WIRE_LEN  # 0x22

# XStat value kinds, in the order of the oneof's field numbers (2..7).
STAT_NONE, STAT_DOUBLE, STAT_UINT64, STAT_INT64, STAT_STR, STAT_BYTES, STAT_REF = range(7)


def record_starts(buf: np.ndarray, first: int, stop: int) -> tuple[np.ndarray, int]:
    """Starts of the run of event records beginning at ``first``, and where the run ends.

    Each record is ``0x22 <varint length> <payload>``, so where a record starts
    depends on the length of the one before it. Rather than walk them one by
    one, take every 0x22 byte up to ``stop`` as a candidate start, link each
    candidate to where its record would end, and keep the candidates reachable
    from ``first``: repeatedly drop candidates that no kept candidate links to.
    A false candidate (a 0x22 inside a payload, such as an event's own stats,
    whose tag is also 0x22) is only ever linked to from other false ones, so
    the drops converge in as many rounds as the longest such chain, a handful.
    """
    candidates = first + np.flatnonzero(buf[first:stop] == EVENT_RECORD_TAG).astype(np.int64)
    lengths, widths = varints(buf, candidates + 1, stop, strict=False)
    # Compared as unsigned first: a length past 2**63 would wrap to a negative end.
    fits = lengths <= np.maximum(stop - candidates - 1 - widths, 0).astype(np.uint64)
    candidates = candidates[fits]
    ends = candidates + 1 + widths[fits] + lengths[fits].astype(np.int64)
    if not len(candidates) or candidates[0] != first:
        raise DecodeError(
            f"an event record runs past the end of its line (truncated file?), at byte {first}"
        )
    # successor[i]: index of the candidate that starts where record i ends, or -1;
    # looked up in a table over the line's bytes (linear, unlike a binary search).
    index_at = np.full(stop - first + 1, -1, dtype=np.int64)
    index_at[candidates - first] = np.arange(len(candidates))
    successor = index_at[ends - first]
    del index_at
    alive = np.ones(len(candidates), dtype=bool)
    while True:
        linked = np.zeros(len(candidates), dtype=bool)
        targets = successor[alive]
        linked[targets[targets >= 0]] = True
        linked[0] = True  # `first` itself
        keep = alive & linked
        if np.array_equal(keep, alive):
            break
        alive = keep
    chain = np.flatnonzero(alive)
    # The run ends where the last kept record ends and no candidate follows.
    last = chain[successor[chain] < 0]
    if len(last) != 1:
        raise DecodeError(
            f"event records of a line do not chain up (truncated or corrupt file), at byte {first}"
        )
    return candidates[chain], int(ends[last[0]])


def decode_events(
    buf: np.ndarray, record_starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    n = len(record_starts)
    lengths, widths = varints(buf, record_starts + 1, len(buf))
    starts = record_starts + 1 + widths
    stops = starts + lengths.astype(np.int64)
    fields = message_fields(buf, starts, stops)
    metadata_id = scalar_field(fields, EVENT_METADATA_ID, n)
    offset_ps = scalar_field(fields, EVENT_OFFSET_PS, n)
    duration_ps = scalar_field(fields, EVENT_DURATION_PS, n)
    return metadata_id, offset_ps, duration_ps, field_values(fields, EVENT_STATS, WIRE_LEN)


# XStat's value fields: (number, wire type, STAT_* kind).
STAT_VALUE_FIELDS = (
    (2, WIRE_FIXED64, STAT_DOUBLE),
    (3, WIRE_VARINT, STAT_UINT64),
    (4, WIRE_VARINT, STAT_INT64),
    (5, WIRE_LEN, STAT_STR),
    (6, WIRE_LEN, STAT_BYTES),
    (7, WIRE_VARINT, STAT_REF),
)


EMPTY = np.zeros(0, dtype=np.int64)


def field_key(number: int, wire: int) -> int:
    """The key of a field of one wire type in what message_fields returns: a field number
    met with another wire type than its own is not that field (protobuf and the C loop skip
    it), so fields are told apart by both."""
    return int(number) * 8 + int(wire)


def field_values(
    fields: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]], number: int, wire: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return fields.get(field_key(number, wire), (EMPTY, EMPTY, EMPTY))


def scalar_field(
    fields: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]], number: int, n: int
) -> np.ndarray:
    """Varint field ``number`` of each of n messages (0 where absent)."""
    out = np.zeros(n, dtype=np.int64)
    rows, values, _ = field_values(fields, number, WIRE_VARINT)
    out[rows] = values  # for a repeated scalar the last one wins, as in protobuf
    return out


def message_fields(
    buf: np.ndarray, starts: np.ndarray, stops: np.ndarray
) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Decode the fields of many small messages at once.

    Returns, per field number, (message index, value, value stop): varint
    values as int64; fixed64 values as their raw 8 bytes in an int64;
    length-delimited values as (message index, payload start, payload stop).
    Each round reads one field of every message that has fields left.
    """
    found: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    index = np.arange(len(starts), dtype=np.int64)
    cursor = starts.astype(np.int64, copy=True)
    end = stops.astype(np.int64, copy=False)
    limit = len(buf)
    active = cursor < end
    index, cursor, end = index[active], cursor[active], end[active]
    while len(index):
        tag_bytes = buf[cursor]
        if tag_bytes.max() < 0x80:  # one-byte tags (fields 1-15): the usual case
            numbers, wires, value_pos = tag_bytes >> 3, tag_bytes & 7, cursor + 1
        else:
            tags, tag_widths = varints(buf, cursor, limit)
            numbers, wires = tags >> np.uint64(3), tags & np.uint64(7)
            value_pos = cursor + tag_widths
        if not numbers.all():  # as protobuf (and the C loop): field number 0 is no field
            at = int(cursor[np.flatnonzero(numbers == 0)[0]])
            raise DecodeError(f"field number 0 (not an XSpace protobuf), at byte {at}")
        next_cursor = np.empty_like(cursor)
        wire_kinds = _distinct(wires)
        for wire in wire_kinds:
            # Most rounds see one wire type and one field number: skip the masks then.
            sel = None if len(wire_kinds) == 1 else wires == wire
            pos = _take(value_pos, sel)
            values, after = _read_values(buf, pos, wire, limit)
            if sel is None:
                next_cursor = after
            else:
                next_cursor[sel] = after
            selected_numbers, selected_index = _take(numbers, sel), _take(index, sel)
            field_numbers = _distinct(selected_numbers)
            for number in field_numbers:
                pick = None if len(field_numbers) == 1 else selected_numbers == number
                found.setdefault(field_key(number, wire), []).append(
                    (_take(selected_index, pick), _take(values, pick), _take(after, pick))
                )
        past = np.flatnonzero(next_cursor > end)
        if len(past):
            at = int(cursor[past[0]])
            raise DecodeError(
                f"a field runs past the end of its message (truncated file?), at byte {at}"
            )
        active = next_cursor < end
        if active.all():
            cursor = next_cursor
        else:
            index, cursor, end = index[active], next_cursor[active], end[active]
    return {
        number: chunks[0] if len(chunks) == 1 else _concat(chunks)
        for number, chunks in found.items()
    }


def _concat(
    chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, values, stops = zip(*chunks, strict=True)
    return np.concatenate(rows), np.concatenate(values), np.concatenate(stops)


def _take(array: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    return array if mask is None else array[mask]


def _read_values(
    buf: np.ndarray, pos: np.ndarray, wire: int, limit: int
) -> tuple[np.ndarray, np.ndarray]:
    """Values of one wire type at ``pos``, and where each ends.

    Varints come back as int64, fixed64 as their raw bits in an int64, and
    length-delimited fields as the start of their payload (the end is ``after``).
    """
    if wire == WIRE_VARINT:
        values, widths = varints(buf, pos, limit)
        return values.view(np.int64), pos + widths
    if wire == WIRE_LEN:
        lengths, widths = varints(buf, pos, limit)
        starts = pos + widths
        # Compared as unsigned: a length past 2**63 would wrap to a negative end.
        past = lengths > np.maximum(limit - starts, 0).astype(np.uint64)
        if past.any():
            at = int(starts[np.argmax(past)])
            raise DecodeError(
                f"a field runs past the end of its message (truncated file?), at byte {at}"
            )
        return starts, starts + lengths.astype(np.int64)
    if wire == WIRE_FIXED64:
        if len(pos) and int(pos.max()) + 8 > limit:
            at = int(pos[np.argmax(pos + 8 > limit)])
            raise DecodeError(
                f"a fixed64 value runs past the end of its message (truncated file?), at byte {at}"
            )
        raw = buf[pos[:, None] + np.arange(8)]
        return raw.copy().view("<i8").reshape(-1), pos + 8
    if wire == WIRE_FIXED32:
        return np.zeros(len(pos), dtype=np.int64), pos + 4
    at = int(pos[0]) if len(pos) else 0
    raise DecodeError(f"invalid wire type (not an XSpace protobuf), at byte {at}")


def _distinct(values: np.ndarray) -> list[int]:
    """The distinct values of a small-valued array (tags, wire types), sorted."""
    if not len(values):
        return []
    low, high = int(values.min()), int(values.max())
    if low == high:  # the usual case: every message has the same field here
        return [low]
    if high < 4096:
        return np.flatnonzero(np.bincount(values.astype(np.int64))).tolist()
    return [int(v) for v in np.unique(values)]


def varints(
    buf: np.ndarray, pos: np.ndarray, limit: int, strict: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Decode the varints starting at ``pos``: (values as uint64, widths in bytes).

    Not ``strict`` (for candidate positions that may not be varints at all): a varint
    that runs past ``limit`` or beyond 10 bytes is no varint; it gets a width that
    reaches past ``limit``, so that callers drop it, instead of raising.
    """
    limit = min(limit, len(buf))
    n = len(pos)
    if n and int(pos.max()) >= limit:
        if strict:
            first = int(pos[np.argmax(pos >= limit)])
            raise DecodeError(
                f"a varint runs past the end of its message (truncated file?), at byte {first}"
            )
        pos = np.minimum(pos, limit - 1)
    byte = buf[pos]
    values = (byte & 0x7F).astype(np.uint64)
    more = byte >= 0x80
    if not more.any():  # one-byte varints: tags, small ids and lengths
        return values, np.broadcast_to(np.int64(1), (n,))
    widths = np.ones(n, dtype=np.int64)
    todo = np.flatnonzero(more)
    for k in range(1, 10):
        if not len(todo):
            return values, widths
        # While every varint goes on (fixed-width values such as timestamps), skip the indexing.
        every = len(todo) == n
        at = (pos if every else pos[todo]) + k
        if int(at.max()) >= limit:
            if strict:
                where = int(at[np.argmax(at >= limit)])
                raise DecodeError(
                    f"a varint runs past the end of its message (truncated file?), at byte {where}"
                )
            cut = at >= limit
            widths[todo[cut]] = limit + 1  # past any end a caller checks against
            todo, at = todo[~cut], at[~cut]
            every = False
            if not len(todo):
                return values, widths
        byte = buf[at]
        bits = (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        if every:
            values |= bits
            widths += 1
        else:
            values[todo] |= bits
            widths[todo] = k + 1
        todo = todo[byte >= 0x80]
    if len(todo):
        if strict:
            first = int(pos[todo[0]])
            raise DecodeError(
                f"a varint is longer than 10 bytes (not an XSpace protobuf), at byte {first}"
            )
        widths[todo] = limit + 1
    return values, widths


def walk_fields(data: Any, start: int, stop: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Walk one message's fields: (number, wire type, field start, value start, value stop)."""
    pos = start
    while pos < stop:
        field_start = pos
        tag, pos = read_varint(data, pos, stop)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise DecodeError(f"field number 0 (not an XSpace protobuf), at byte {field_start}")
        value_start = pos
        value, pos = skip_value(data, pos, stop, wire)
        if wire == WIRE_LEN:
            value_start = pos - value
        yield number, wire, field_start, value_start, pos


def read_varint(data: Any, pos: int, stop: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= stop:
            raise DecodeError(
                f"a varint runs past the end of its message (truncated file?), at byte {pos}"
            )
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise DecodeError(
                f"a varint is longer than 10 bytes (not an XSpace protobuf), at byte {pos}"
            )


def skip_value(data: Any, pos: int, stop: int, wire: int) -> tuple[int, int]:
    """Skip a value of ``wire`` type; return (varint value or length, position after)."""
    if wire == WIRE_VARINT:
        return read_varint(data, pos, stop)
    if wire == WIRE_LEN:
        length, pos = read_varint(data, pos, stop)
        if pos + length > stop:
            raise DecodeError(
                f"a field runs past the end of its message (truncated file?), at byte {pos}"
            )
        return length, pos + length
    if wire == WIRE_FIXED64:
        if pos + 8 > stop:
            raise DecodeError(
                f"a fixed64 value runs past the end of its message (truncated file?), at byte {pos}"
            )
        return 0, pos + 8
    if wire == WIRE_FIXED32:
        if pos + 4 > stop:
            raise DecodeError(
                f"a fixed32 value runs past the end of its message (truncated file?), at byte {pos}"
            )
        return 0, pos + 4
    raise DecodeError(f"invalid wire type (not an XSpace protobuf), at byte {pos}")


def to_signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value
