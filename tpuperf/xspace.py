"""Decode XSpace bytes into columns, straight from the protobuf wire format.

An XSpace holds a few planes, each with a few lines, each with up to millions
of events. Nothing here uses the protobuf runtime (importing it and building the
message classes cost 15-20 ms of every command): fields are walked as columns of
(number, wire type, span), by a small C loop (``tpuperf/_wire_native.c``) when it
is built, else by numpy. The small parts (plane ids, names, metadata, plane stats)
are read message by message in bulk; the events, the hot path, are decoded all
events of a line at once straight into numpy arrays (see :func:`_event_records`
for how record boundaries are found without a per-event Python loop). Both give
the same columns, which tests/test_xspace.py checks against protobuf.

The result is a :class:`Space` of :class:`Plane` s of :class:`Line` s whose
events are arrays (``metadata_id``, ``offset_ps``, ``duration_ps``) plus a
columnar table of their stats.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# The hot loop in C (tpuperf/_wire_native.c); numpy does the same where it is not built, or
# on request (TPUPERF_DECODER=numpy; both decoders read the same inputs alike).
from tpuperf._native import native as _native
from tpuperf.columns import distinct, first_rows, sorted_codes
from tpuperf.errors import BadInput

_WIRE_VARINT, _WIRE_FIXED64, _WIRE_LEN, _WIRE_FIXED32 = 0, 1, 2, 5

# Field numbers (xplane.proto) of the fields decoded by hand here.
_SPACE_PLANES, _SPACE_ERRORS, _SPACE_WARNINGS, _SPACE_HOSTNAMES = 1, 2, 3, 4
_PLANE_ID, _PLANE_NAME, _PLANE_LINES, _PLANE_EVENT_METADATA = 1, 2, 3, 4
_PLANE_STAT_METADATA, _PLANE_STATS = 5, 6
_METADATA_NAME, _METADATA_DISPLAY_NAME, _METADATA_STATS = 2, 4, 5
_LINE_ID, _LINE_NAME, _LINE_TIMESTAMP_NS, _LINE_EVENTS = 1, 2, 3, 4
_LINE_DURATION_PS, _LINE_DISPLAY_ID, _LINE_DISPLAY_NAME = 9, 10, 11
_EVENT_METADATA_ID, _EVENT_OFFSET_PS, _EVENT_DURATION_PS, _EVENT_STATS = 1, 2, 3, 4
_EVENT_NUM_OCCURRENCES = 5
_EVENT_RECORD_TAG = (_LINE_EVENTS << 3) | _WIRE_LEN  # 0x22

# XStat value kinds, in the order of the oneof's field numbers (2..7).
STAT_NONE, STAT_DOUBLE, STAT_UINT64, STAT_INT64, STAT_STR, STAT_BYTES, STAT_REF = range(7)


class DecodeError(ValueError):
    """The bytes are not a well-formed XSpace."""


# --------------------------------------------------------------------------- results


@dataclass
class Stats:
    """The stats of a line's events, one row per stat (columnar)."""

    owner: np.ndarray  # index of the event the stat belongs to
    metadata_id: np.ndarray
    kind: np.ndarray  # STAT_* code
    int_value: np.ndarray  # int64, uint64 (two's complement) and ref values
    double_value: np.ndarray
    text_start: np.ndarray  # str and bytes values: span in the file's bytes
    text_stop: np.ndarray


# Integer stats read straight into event columns mark events without the stat with this.
MISSING = np.iinfo(np.int64).min


@dataclass
class IntEvents:
    """Events of a line with chosen integer stats (see :meth:`Line.int_events`)."""

    metadata_id: np.ndarray  # int64
    offset_ps: np.ndarray
    duration_ps: np.ndarray
    stats: dict[str, np.ndarray]  # name -> int64, MISSING where the event lacks it

    def __len__(self) -> int:
        return len(self.metadata_id)

    def start_ps(self, timestamp_ns: int) -> np.ndarray:
        return self.offset_ps + timestamp_ns * 1000


class Line:
    """One XLine. Its events are decoded on first use, not when the file is read:

    - all fields and the position of every stat, by :attr:`metadata_id`, :attr:`offset_ps`,
      :attr:`duration_ps` and :attr:`stats` (what small lines and GPU streams need);
    - or only chosen integer stats, straight into columns, by :meth:`int_events`, which is
      how the large TPU op lines are read (and what may run in several threads at once).
    """

    def __init__(
        self,
        id: int,
        name: str,
        display_name: str,
        timestamp_ns: int,
        runs: list[tuple[int, int, int]],
        plane: Plane | None = None,
    ) -> None:
        self.id = id
        self.name = name
        self.display_name = display_name
        self.timestamp_ns = timestamp_ns
        self._runs = runs  # (first record, end, events) of each run of event records
        self._plane = plane
        self._columns: _EventColumns | None = None
        self._stats: Stats | None = None
        self._events = sum(n for _, _, n in runs)
        self._extent: tuple[int, int] | None = None  # once known, see extent()

    def __len__(self) -> int:
        return self._events

    @property
    def span(self) -> tuple[int, int]:
        """Where the line's events lie in the file: the first byte and the byte after."""
        if not self._runs:
            return (0, 0)
        return self._runs[0][0], self._runs[-1][1]

    def _decoded(self) -> _EventColumns:
        if self._columns is None:
            assert self._plane is not None
            data = self._plane._data
            buf = np.frombuffer(data, dtype=np.uint8)
            self._columns = _join_runs(
                [_event_run(data, buf, first, stop)[0] for first, stop, _ in self._runs]
            )
        return self._columns

    @property
    def metadata_id(self) -> np.ndarray:
        return self._decoded()[0]

    @property
    def offset_ps(self) -> np.ndarray:
        return self._decoded()[1]

    @property
    def duration_ps(self) -> np.ndarray:
        return self._decoded()[2]

    @property
    def stats(self) -> Stats:
        if self._stats is None:
            assert self._plane is not None
            self._stats = _decode_stats(self._plane._data, *self._decoded()[3])
        return self._stats

    def extent(self) -> tuple[int, int]:
        """(first event start, last event end), absolute within the host; (0, 0) with no events.

        Read without keeping the events (a host thread of a million events costs nothing)."""
        if not self._events:
            return 0, 0
        if self._extent is not None:
            return self._extent
        base = self.timestamp_ns * 1000
        if self._columns is None and _native is not None:
            assert self._plane is not None
            lowest, highest = None, None
            for first, stop, _ in self._runs:
                try:
                    _, _, low, high = _native.extent(self._plane._data, first, stop)
                except ValueError as exc:
                    raise DecodeError(str(exc)) from None
                lowest = low if lowest is None else min(lowest, low)
                highest = high if highest is None else max(highest, high)
            assert lowest is not None and highest is not None
            return base + lowest, base + highest
        offset = self.offset_ps
        return base + int(offset.min()), base + int((offset + self.duration_ps).max())

    def release(self) -> None:
        """Drop the decoded events (they are decoded again if asked for)."""
        self._columns = None
        self._stats = None

    @property
    def start_ps(self) -> np.ndarray:
        """Absolute start of each event within the host: timestamp_ns * 1000 + offset_ps."""
        return self.offset_ps + self.timestamp_ns * 1000

    def stat(self, name: str, default: Any = None) -> np.ndarray | list[Any]:
        """The stat ``name`` of every event (see :meth:`Plane.stat_column`)."""
        assert self._plane is not None
        return self._plane.stat_column(self.stats, len(self), name, default)

    def stat_codes(self, name: str) -> tuple[np.ndarray, list[Any]]:
        """The stat ``name`` of every event as codes (see :meth:`Plane.stat_codes`)."""
        assert self._plane is not None
        return self._plane.stat_codes(self.stats, len(self), name)

    def stat_strings(self, name: str) -> tuple[np.ndarray, list[str]]:
        """The string stat ``name`` of every event as (codes, distinct strings): ``""`` (the
        last of the strings) where an event lacks it or holds no string. Each distinct value is
        decoded once."""
        codes, values = self.stat_codes(name)
        strings = [v if isinstance(v, str) else "" for v in values] + [""]
        return np.where(codes >= 0, codes, len(values)), strings

    def int_events(self, names: tuple[str, ...], keep: str | None = None) -> IntEvents:
        """The events with the integer stats ``names`` (int64, uint64 or ref values) as
        columns, MISSING where an event lacks one; with ``keep``, only the events that have
        that stat. Decodes nothing else, and in C without holding the GIL."""
        assert self._plane is not None
        plane = self._plane
        if self._columns is None and _native is not None:
            ids = [(i, column) for column, n in enumerate(names) for i in plane.stat_ids(n)]
            wanted = np.array([i for i, _ in ids], dtype=np.int64)
            columns = np.array([c for _, c in ids], dtype=np.int64)
            keep_column = names.index(keep) if keep is not None else -1
            parts = []
            for first, stop, _ in self._runs:
                try:
                    _, *found = _native.events(
                        plane._data, first, stop, wanted, columns, len(names), keep_column
                    )
                except ValueError as exc:
                    raise DecodeError(str(exc)) from None
                parts.append([np.frombuffer(c, dtype=np.int64) for c in found])
                _release_pages(plane._data, first, stop)
            if not parts:
                parts = [[_EMPTY] * (3 + len(names))]
            joined = [
                np.concatenate([p[i] for p in parts]) if len(parts) > 1 else parts[0][i]
                for i in range(3 + len(names))
            ]
            metadata_id, offset_ps, duration_ps = joined[:3]
            if keep is None and len(offset_ps):  # every event: its extent comes for free
                base = self.timestamp_ns * 1000
                self._extent = (
                    base + int(offset_ps.min()),
                    base + int((offset_ps + duration_ps).max()),
                )
            return IntEvents(
                metadata_id, offset_ps, duration_ps, dict(zip(names, joined[3:], strict=True))
            )
        stats = {}
        for name in names:  # (as the C loop: no stat is read when none is asked for)
            column = plane.stat_column(self.stats, len(self), name, MISSING)
            stats[name] = (
                column
                if isinstance(column, np.ndarray) and column.dtype == np.int64
                else _ints(column)
            )
        events = IntEvents(self.metadata_id, self.offset_ps, self.duration_ps, stats)
        if keep is None:
            return events
        kept = stats[keep] != MISSING
        return IntEvents(
            events.metadata_id[kept],
            events.offset_ps[kept],
            events.duration_ps[kept],
            {n: c[kept] for n, c in stats.items()},
        )


_RELEASE_MIN_BYTES = 1 << 22


def _release_pages(data: Any, start: int, stop: int) -> None:
    """Let the kernel drop a memory-mapped file's pages of [start, stop) from this process
    once they are decoded (they stay in the page cache, and come back if read again): a
    large profile is then not resident twice, as bytes and as columns."""
    import mmap

    if not isinstance(data, mmap.mmap) or stop - start < _RELEASE_MIN_BYTES:
        return
    page = mmap.PAGESIZE
    first = -(-start // page) * page  # whole pages inside the span only
    if stop - first >= page:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            data.madvise(mmap.MADV_DONTNEED, first, (stop - first) // page * page)


def _ints(values: np.ndarray | list[Any]) -> np.ndarray:
    """Integer stat values (MISSING for anything else), as int64."""
    out = np.full(len(values), MISSING, dtype=np.int64)
    for i, value in enumerate(values.tolist() if isinstance(values, np.ndarray) else values):
        if isinstance(value, int) and not isinstance(value, bool):
            out[i] = value if -(2**63) < value < 2**63 else MISSING
    return out


@dataclass
class EventMetadata:
    """A plane's event metadata, columnar: one row per metadata entry."""

    ids: np.ndarray  # sorted
    names: list[str]
    display_names: list[str]
    stats: Stats

    def rows(self, metadata_ids: np.ndarray) -> np.ndarray:
        """Row of each of ``metadata_ids`` (events' metadata ids); -1 where unknown."""
        if not len(self.ids):
            return np.full(len(metadata_ids), -1, dtype=np.int64)
        if self.ids[0] >= 0 and self.ids[-1] < 4 * len(self.ids) + 1024:
            # Ids are small and dense (the usual case): a lookup table beats a binary search.
            table = np.full(int(self.ids[-1]) + 2, -1, dtype=np.int64)
            table[self.ids] = np.arange(len(self.ids))
            inside = (metadata_ids >= 0) & (metadata_ids <= self.ids[-1])
            return table[np.where(inside, metadata_ids, len(table) - 1)]
        rows = np.searchsorted(self.ids, metadata_ids)
        rows[rows >= len(self.ids)] = len(self.ids) - 1
        return np.where(self.ids[rows] == metadata_ids, rows, -1)


@dataclass
class Plane:
    id: int
    name: str
    lines: list[Line]
    metadata: EventMetadata
    stat_names: dict[int, str]
    stats: dict[str, Any]  # the plane's own stats, decoded
    _data: bytes = field(default=b"", repr=False)

    def stat_ids(self, name: str) -> list[int]:
        return [i for i, n in self.stat_names.items() if n == name]

    def release_stats(self) -> None:
        """Drop the decoded events of every line (they are decoded again if asked for)."""
        for line in self.lines:
            line.release()

    def metadata_memory_breakdown(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The ``memory_access_breakdown`` stat of every metadata row, all rows at once.

        Returns (metadata row, operation, memory space, bytes), one entry per
        ``MemoryAccessed``. The stat is a serialized ``MemoryAccessBreakdown``:
        repeated ``memory_accessed`` (field 1) of {operation_type = 1,
        memory_space = 2, bytes_accessed = 3}, all varints.
        """
        stats = self.metadata.stats
        ids = self.stat_ids("memory_access_breakdown")
        rows = np.flatnonzero(_is_one_of(stats.metadata_id, ids) & (stats.kind == STAT_BYTES))
        buf = np.frombuffer(self._data, dtype=np.uint8)
        entries = _message_fields(buf, stats.text_start[rows], stats.text_stop[rows])
        owner, starts, stops = _field(entries, 1, _WIRE_LEN)
        fields = _message_fields(buf, starts, stops)
        n = len(owner)
        return (
            stats.owner[rows][owner],
            _scalar(fields, 1, n),
            _scalar(fields, 2, n),
            _scalar(fields, 3, n),
        )

    def metadata_stat(self, name: str, default: Any = None) -> np.ndarray | list[Any]:
        """The stat ``name`` of every event metadata row."""
        return self.stat_column(self.metadata.stats, len(self.metadata.ids), name, default)

    def stat_column(
        self, stats: Stats, count: int, name: str, default: Any = None
    ) -> np.ndarray | list[Any]:
        """One value of stat ``name`` per owner (event or metadata row).

        An int64 array when the stat is an integer wherever present, float64
        when it is a double, and a list otherwise (str, bytes; ref values
        resolved to the names they point to). Owners without the stat get
        ``default`` (NaN-free numeric arrays need a numeric default).
        """
        ids = self.stat_ids(name)
        rows = np.flatnonzero(_is_one_of(stats.metadata_id, ids))
        owners = stats.owner[rows]
        kinds = stats.kind[rows]
        if len(rows) and isinstance(default, (int, float)) and not isinstance(default, bool):
            if np.all((kinds == STAT_INT64) | (kinds == STAT_UINT64)):
                column = np.full(
                    count, default, dtype=np.int64 if isinstance(default, int) else np.float64
                )
                column[owners] = stats.int_value[rows]
                return column
            if np.all(kinds == STAT_DOUBLE):
                column = np.full(count, default, dtype=np.float64)
                column[owners] = stats.double_value[rows]
                return column
        if not len(rows) and isinstance(default, (int, float)) and not isinstance(default, bool):
            return np.full(
                count, default, dtype=np.int64 if isinstance(default, int) else np.float64
            )
        out: list[Any] = [default] * count
        for owner, value in zip(owners.tolist(), self._values(stats, rows, kinds), strict=True):
            out[owner] = value
        return out

    def stat_codes(self, stats: Stats, count: int, name: str) -> tuple[np.ndarray, list[Any]]:
        """The stat ``name`` per owner as (codes, distinct values): owner i has
        ``values[codes[i]]``, or no such stat where ``codes[i]`` is -1.

        Stats of many events share a few values (the op and module names a kernel was
        launched for, as refs): each distinct value is decoded once.
        """
        rows = np.flatnonzero(_is_one_of(stats.metadata_id, self.stat_ids(name)))
        codes = np.full(count, -1, dtype=np.int64)
        if not len(rows):
            return codes, []
        kinds = stats.kind[rows]
        integers = (kinds == STAT_INT64) | (kinds == STAT_UINT64)
        if np.all(kinds == STAT_REF) or np.all(integers):
            found, inverse = sorted_codes(stats.int_value[rows])
            first = first_rows(inverse, len(found))
            codes[stats.owner[rows]] = inverse
            return codes, self._values(stats, rows[first], kinds[first])
        seen: dict[Any, int] = {}
        for owner, value in zip(
            stats.owner[rows].tolist(), self._values(stats, rows, kinds), strict=True
        ):
            codes[owner] = seen.setdefault(value, len(seen))
        return codes, list(seen)

    def _values(self, stats: Stats, rows: np.ndarray, kinds: np.ndarray) -> list[Any]:
        return _stat_values(self._data, self.stat_names, stats, rows, kinds)


def _stat_values(
    data: Any, stat_names: dict[int, str], stats: Stats, rows: np.ndarray, kinds: np.ndarray
) -> list[Any]:
    """The values of stats ``rows`` (of kinds ``kinds``) as Python objects: text decoded,
    refs resolved to the names they point to, None where a stat has no value."""
    out: list[Any] = []
    starts, stops = stats.text_start[rows].tolist(), stats.text_stop[rows].tolist()
    ints, doubles = stats.int_value[rows].tolist(), stats.double_value[rows].tolist()
    for i, kind in enumerate(kinds.tolist()):
        if kind == STAT_STR:
            out.append(bytes(data[starts[i] : stops[i]]).decode("utf-8", "replace"))
        elif kind == STAT_BYTES:
            out.append(bytes(data[starts[i] : stops[i]]))
        elif kind == STAT_REF:
            out.append(stat_names.get(ints[i], ""))
        elif kind == STAT_DOUBLE:
            out.append(doubles[i])
        elif kind == STAT_UINT64:
            out.append(ints[i] & 0xFFFFFFFFFFFFFFFF)
        elif kind == STAT_INT64:
            out.append(ints[i])
        else:
            out.append(None)
    return out


def _is_one_of(values: np.ndarray, wanted: list[int]) -> np.ndarray:
    """``np.isin`` for the usual one or two stat ids, without its sort."""
    mask = np.zeros(len(values), dtype=bool)
    for value in wanted:
        mask |= values == value
    return mask


@dataclass
class Space:
    planes: list[Plane]
    hostnames: list[str]
    errors: list[str]
    warnings: list[str]


# --------------------------------------------------------------------------- decoding


# Profiles smaller than this decode their planes one after another (threads cost more).
_PARALLEL_BYTES = 8 << 20


def decode(data: bytes) -> Space:
    """Decode serialized XSpace bytes. Raises :class:`DecodeError` when they are not one."""
    if not data:
        raise DecodeError("the file is empty")
    buf = np.frombuffer(data, dtype=np.uint8)
    number, wire, _, value_start, value_stop = _field_columns(data, 0, len(data))
    is_plane = (number == _SPACE_PLANES) & (wire == _WIRE_LEN)
    spans = list(zip(value_start[is_plane].tolist(), value_stop[is_plane].tolist(), strict=True))
    workers = min(os.cpu_count() or 1, len(spans))
    if workers > 1 and len(data) >= _PARALLEL_BYTES:
        # Finding the lines' event runs is C without the GIL: planes go side by side.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers, thread_name_prefix="tpuperf-planes") as pool:
            planes = list(pool.map(lambda span: _decode_plane(data, buf, *span), spans))
    else:
        planes = [_decode_plane(data, buf, start, stop) for start, stop in spans]

    def texts(field_number: int) -> list[str]:  # a repeated string field of the XSpace
        pick = (number == field_number) & (wire == _WIRE_LEN)
        return _texts(data, value_start[pick], value_stop[pick])

    return Space(
        planes=planes,
        hostnames=texts(_SPACE_HOSTNAMES),
        errors=texts(_SPACE_ERRORS),
        warnings=texts(_SPACE_WARNINGS),
    )


def _decode_plane(data: Any, buf: np.ndarray, start: int, stop: int) -> Plane:
    number, wire, field_start, value_start, value_stop = _field_columns(data, start, stop)
    is_line = (number == _PLANE_LINES) & (wire == _WIRE_LEN)
    is_metadata = (number == _PLANE_EVENT_METADATA) & (wire == _WIRE_LEN)
    rest = ~(is_line | is_metadata)
    line_spans = list(zip(value_start[is_line].tolist(), value_stop[is_line].tolist(), strict=True))
    metadata_spans = np.stack([value_start[is_metadata], value_stop[is_metadata]], axis=1)
    # What is left (id, name, stat metadata, plane stats) is small: one message of its own.
    header = _join_fields(data, field_start[rest], value_stop[rest])
    header_buf = np.frombuffer(header, dtype=np.uint8)
    fields = _message_fields(header_buf, np.zeros(1, np.int64), np.full(1, len(header)))
    stat_names = _stat_names(header, header_buf, fields)
    plane = Plane(
        id=int(_scalar(fields, _PLANE_ID, 1)[0]),
        name=_strings(header, fields, _PLANE_NAME, 1)[0],
        lines=[],
        metadata=_decode_event_metadata(data, buf, metadata_spans),
        stat_names=stat_names,
        stats=_stat_dict(header, fields, stat_names),
        _data=data,
    )
    for line_start, line_stop in line_spans:
        line = _decode_line(data, buf, line_start, line_stop)
        line._plane = plane
        plane.lines.append(line)
    return plane


def _decode_event_metadata(data: Any, buf: np.ndarray, spans: np.ndarray) -> EventMetadata:
    """Decode the ``event_metadata`` map entries of a plane, all at once."""
    spans_array = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    n = len(spans_array)
    keys, fields = _map_entries(buf, spans_array[:, 0], spans_array[:, 1])
    owner, stat_starts, stat_stops = _field(fields, _METADATA_STATS, _WIRE_LEN)
    order = np.argsort(keys, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    stats = _decode_stats(data, rank[owner], stat_starts, stat_stops)
    names = _strings(data, fields, _METADATA_NAME, n)
    display_names = _strings(data, fields, _METADATA_DISPLAY_NAME, n)
    return EventMetadata(
        ids=keys[order],
        names=[names[i] for i in order.tolist()],
        display_names=[display_names[i] for i in order.tolist()],
        stats=stats,
    )


def _strings(
    data: bytes, fields: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]], number: int, n: int
) -> list[str]:
    """The string field ``number`` of ``n`` messages ("" where absent; the last one where a
    message repeats it, as protobuf reads it)."""
    rows, starts, stops = _field(fields, number, _WIRE_LEN)
    if not len(rows):
        return [""] * n
    texts = _texts(data, starts, stops)
    if len(rows) == n and bool((rows[1:] > rows[:-1]).all()):  # each message has it once
        return texts
    out = [""] * n
    for row, text in zip(rows.tolist(), texts, strict=True):
        out[row] = text
    return out


def _texts(data: Any, starts: np.ndarray, stops: np.ndarray) -> list[str]:
    """The spans of ``data`` decoded as UTF-8, bad bytes replaced."""
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    stops = np.ascontiguousarray(stops, dtype=np.int64)
    if _native is not None:
        return _native.texts(data, starts, stops)  # type: ignore[no-any-return]
    # The bytes gathered into one buffer and decoded at once: when it is ASCII (as names
    # nearly always are) character offsets are byte offsets, and each string a slice.
    lengths = stops - starts
    ends = np.cumsum(lengths)
    view = memoryview(data)
    blob = b"".join([view[b:e] for b, e in zip(starts.tolist(), stops.tolist(), strict=True)])
    if blob.isascii():
        text = blob.decode("ascii")
        return [text[b:e] for b, e in zip((ends - lengths).tolist(), ends.tolist(), strict=True)]
    return [
        bytes(view[b:e]).decode("utf-8", "replace")
        for b, e in zip(starts.tolist(), stops.tolist(), strict=True)
    ]


def _stat_names(
    header: bytes, buf: np.ndarray, fields: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> dict[int, str]:
    """A plane's ``stat_metadata`` map: stat id -> name (a repeated key: the last entry)."""
    _, starts, stops = _field(fields, _PLANE_STAT_METADATA, _WIRE_LEN)
    if not len(starts):
        return {}
    keys, values = _map_entries(buf, starts, stops)
    names = _strings(header, values, _METADATA_NAME, len(keys))
    return dict(zip(keys.tolist(), names, strict=True))


def _map_entries(
    buf: np.ndarray, starts: np.ndarray, stops: np.ndarray
) -> tuple[np.ndarray, dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """The entries of a ``map<int64, Message>`` field (at ``starts``/``stops``): each entry's
    key, and the fields of each entry's value (an entry without one: an empty message)."""
    n = len(starts)
    entries = _message_fields(buf, starts, stops)
    keys = _scalar(entries, 1, n)
    value_rows, value_starts, value_stops = _field(entries, 2, _WIRE_LEN)
    inner_starts, inner_stops = np.zeros(n, np.int64), np.zeros(n, np.int64)
    inner_starts[value_rows], inner_stops[value_rows] = value_starts, value_stops
    return keys, _message_fields(buf, inner_starts, inner_stops)


def _stat_dict(
    header: bytes,
    fields: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]],
    stat_names: dict[int, str],
) -> dict[str, Any]:
    """A plane's own stats by name (refs resolved; a stat without a value left out)."""
    _, starts, stops = _field(fields, _PLANE_STATS, _WIRE_LEN)
    stats = _decode_stats(header, np.arange(len(starts)), starts, stops)
    rows = np.flatnonzero(stats.kind != STAT_NONE)
    values = _stat_values(header, stat_names, stats, rows, stats.kind[rows])
    return {
        stat_names.get(key, str(key)): value
        for key, value in zip(stats.metadata_id[rows].tolist(), values, strict=True)
    }


def _decode_line(data: Any, buf: np.ndarray, start: int, stop: int) -> Line:
    scalars: dict[int, int] = {}
    strings: dict[int, str] = {}
    runs: list[tuple[int, int, int]] = []
    pos = start
    while pos < stop:
        tag, value_pos = _varint(data, pos, stop)
        number, wire = tag >> 3, tag & 7
        if number == _LINE_EVENTS and wire == _WIRE_LEN:
            # The events of a line are serialized back to back: find where the run of them
            # that starts here ends (they are decoded when first used), then go on after it.
            run_end, events = _run_extent(data, buf, pos, stop)
            runs.append((pos, run_end, events))
            pos = run_end
            continue
        value, pos = _skip(data, value_pos, stop, wire)
        if wire == _WIRE_VARINT:
            scalars[number] = _signed(value)
        elif wire == _WIRE_LEN:
            strings[number] = bytes(data[pos - value : pos]).decode("utf-8", "replace")
    return Line(
        id=scalars.get(_LINE_ID, 0),
        name=strings.get(_LINE_NAME, ""),
        display_name=strings.get(_LINE_DISPLAY_NAME, ""),
        timestamp_ns=scalars.get(_LINE_TIMESTAMP_NS, 0),
        runs=runs,
    )


def _run_extent(data: Any, buf: np.ndarray, first: int, stop: int) -> tuple[int, int]:
    """Where the run of event records at ``first`` ends, and how many records it holds."""
    if _native is not None:
        try:
            return _native.skip_records(data, first, stop)
        except ValueError as exc:
            raise DecodeError(str(exc)) from None
    starts, run_end = _event_records(buf, first, stop)
    return run_end, len(starts)


# A run of events: metadata_id, offset_ps, duration_ps, (stat owner, stat start, stat stop).
_EventColumns = tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]


def _event_run(data: bytes, buf: np.ndarray, first: int, stop: int) -> tuple[_EventColumns, int]:
    """The run of event records at ``first``, as columns, and where the run ends."""
    if _native is not None:
        try:
            run_end, *columns = _native.event_records(data, first, stop)
        except ValueError as exc:
            raise DecodeError(str(exc)) from None
        metadata_id, offset_ps, duration_ps, owner, stat_start, stat_stop = (
            np.frombuffer(column, dtype=np.int64) for column in columns
        )
        return (metadata_id, offset_ps, duration_ps, (owner, stat_start, stat_stop)), run_end
    starts, run_end = _event_records(buf, first, stop)
    return _decode_events(buf, starts), run_end


def _join_runs(runs: list[_EventColumns]) -> _EventColumns:
    if len(runs) == 1:
        return runs[0]
    if not runs:
        return _EMPTY, _EMPTY, _EMPTY, (_EMPTY, _EMPTY, _EMPTY)
    offsets = np.cumsum([0] + [len(run[0]) for run in runs[:-1]])
    return (
        np.concatenate([run[0] for run in runs]),
        np.concatenate([run[1] for run in runs]),
        np.concatenate([run[2] for run in runs]),
        (
            np.concatenate([run[3][0] + offset for run, offset in zip(runs, offsets, strict=True)]),
            np.concatenate([run[3][1] for run in runs]),
            np.concatenate([run[3][2] for run in runs]),
        ),
    )


def _event_records(buf: np.ndarray, first: int, stop: int) -> tuple[np.ndarray, int]:
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
    candidates = first + np.flatnonzero(buf[first:stop] == _EVENT_RECORD_TAG).astype(np.int64)
    lengths, widths = _varints(buf, candidates + 1, stop, strict=False)
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


def _decode_events(
    buf: np.ndarray, record_starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    n = len(record_starts)
    lengths, widths = _varints(buf, record_starts + 1, len(buf))
    starts = record_starts + 1 + widths
    stops = starts + lengths.astype(np.int64)
    fields = _message_fields(buf, starts, stops)
    metadata_id = _scalar(fields, _EVENT_METADATA_ID, n)
    offset_ps = _scalar(fields, _EVENT_OFFSET_PS, n)
    duration_ps = _scalar(fields, _EVENT_DURATION_PS, n)
    return metadata_id, offset_ps, duration_ps, _field(fields, _EVENT_STATS, _WIRE_LEN)


def _decode_stats(data: bytes, owner: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> Stats:
    if _native is not None:
        try:
            columns = _native.stats(
                data, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(stops, np.int64)
            )
        except ValueError as exc:
            raise DecodeError(str(exc)) from None
        metadata_id, kind, int_value, double_value, text_start, text_stop = columns
        return Stats(
            owner=owner,
            metadata_id=np.frombuffer(metadata_id, dtype=np.int64),
            kind=np.frombuffer(kind, dtype=np.uint8),
            int_value=np.frombuffer(int_value, dtype=np.int64),
            double_value=np.frombuffer(double_value, dtype=np.float64),
            text_start=np.frombuffer(text_start, dtype=np.int64),
            text_stop=np.frombuffer(text_stop, dtype=np.int64),
        )
    buf = np.frombuffer(data, dtype=np.uint8)
    n = len(owner)
    fields = _message_fields(buf, starts, stops)
    kind = np.zeros(n, dtype=np.uint8)
    int_value = np.zeros(n, dtype=np.int64)
    double_value = np.zeros(n, dtype=np.float64)
    text_start = np.zeros(n, dtype=np.int64)
    text_stop = np.zeros(n, dtype=np.int64)
    # Each value field sets the value of its kind; the stat's kind is its last value field
    # (as protobuf's oneof, and the C loop, read them in order).
    last_at = np.full(n, -1, dtype=np.int64)
    for number, wire, code in _STAT_VALUE_FIELDS:
        rows, values, after = _field(fields, number, wire)
        if code == STAT_DOUBLE:
            double_value[rows] = values.view(np.float64)
        elif code in (STAT_STR, STAT_BYTES):
            text_start[rows] = values
            text_stop[rows] = after
        else:
            int_value[rows] = values
        later = after > last_at[rows]
        kind[rows[later]] = code
        last_at[rows[later]] = after[later]
    return Stats(
        owner=owner,
        metadata_id=_scalar(fields, 1, n),
        kind=kind,
        int_value=int_value,
        double_value=double_value,
        text_start=text_start,
        text_stop=text_stop,
    )


# XStat's value fields: (number, wire type, STAT_* kind).
_STAT_VALUE_FIELDS = (
    (2, _WIRE_FIXED64, STAT_DOUBLE),
    (3, _WIRE_VARINT, STAT_UINT64),
    (4, _WIRE_VARINT, STAT_INT64),
    (5, _WIRE_LEN, STAT_STR),
    (6, _WIRE_LEN, STAT_BYTES),
    (7, _WIRE_VARINT, STAT_REF),
)


_EMPTY = np.zeros(0, dtype=np.int64)


def _key(number: int, wire: int) -> int:
    """The key of a field of one wire type in what _message_fields returns: a field number
    met with another wire type than its own is not that field (protobuf and the C loop skip
    it), so fields are told apart by both."""
    return int(number) * 8 + int(wire)


def _field(
    fields: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]], number: int, wire: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return fields.get(_key(number, wire), (_EMPTY, _EMPTY, _EMPTY))


def _scalar(
    fields: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]], number: int, n: int
) -> np.ndarray:
    """Varint field ``number`` of each of n messages (0 where absent)."""
    out = np.zeros(n, dtype=np.int64)
    rows, values, _ = _field(fields, number, _WIRE_VARINT)
    out[rows] = values  # for a repeated scalar the last one wins, as in protobuf
    return out


def _message_fields(
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
            tags, tag_widths = _varints(buf, cursor, limit)
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
                found.setdefault(_key(number, wire), []).append(
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
    if wire == _WIRE_VARINT:
        values, widths = _varints(buf, pos, limit)
        return values.view(np.int64), pos + widths
    if wire == _WIRE_LEN:
        lengths, widths = _varints(buf, pos, limit)
        starts = pos + widths
        return starts, starts + lengths.astype(np.int64)
    if wire == _WIRE_FIXED64:
        if len(pos) and int(pos.max()) + 8 > limit:
            at = int(pos[np.argmax(pos + 8 > limit)])
            raise DecodeError(
                f"a fixed64 value runs past the end of its message (truncated file?), at byte {at}"
            )
        raw = buf[pos[:, None] + np.arange(8)]
        return raw.copy().view("<i8").reshape(-1), pos + 8
    if wire == _WIRE_FIXED32:
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
    return [int(v) for v in distinct(values)]


def _varints(
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


# --------------------------------------------------------------------------- small walker


def _field_columns(data: Any, start: int, stop: int) -> tuple[np.ndarray, ...]:
    """The fields of one message as columns: (number, wire type, field start, value start,
    value stop), as :func:`_fields` walks them (in C when it is built)."""
    if _native is not None:
        try:
            columns = _native.scan_fields(data, start, stop)
        except ValueError as exc:
            raise DecodeError(str(exc)) from None
        number = np.frombuffer(columns[0], dtype=np.int64)
        if len(number) and not number.all():
            at = int(np.frombuffer(columns[2], dtype=np.int64)[np.argmin(number != 0)])
            raise DecodeError(f"field number 0 (not an XSpace protobuf), at byte {at}")
        return tuple(np.frombuffer(c, dtype=np.int64) for c in columns)
    rows = list(_fields(data, start, stop))
    if not rows:
        return tuple(np.zeros(0, dtype=np.int64) for _ in range(5))
    return tuple(np.array(column, dtype=np.int64) for column in zip(*rows, strict=True))


def _join_fields(data: Any, starts: np.ndarray, stops: np.ndarray) -> bytes:
    return b"".join(bytes(data[a:b]) for a, b in zip(starts.tolist(), stops.tolist(), strict=True))


def _fields(data: bytes, start: int, stop: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Walk one message's fields: (number, wire type, field start, value start, value stop)."""
    pos = start
    while pos < stop:
        field_start = pos
        tag, pos = _varint(data, pos, stop)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise DecodeError(f"field number 0 (not an XSpace protobuf), at byte {field_start}")
        value_start = pos
        value, pos = _skip(data, pos, stop, wire)
        if wire == _WIRE_LEN:
            value_start = pos - value
        yield number, wire, field_start, value_start, pos


def _varint(data: bytes, pos: int, stop: int) -> tuple[int, int]:
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


def _skip(data: bytes, pos: int, stop: int, wire: int) -> tuple[int, int]:
    """Skip a value of ``wire`` type; return (varint value or length, position after)."""
    if wire == _WIRE_VARINT:
        return _varint(data, pos, stop)
    if wire == _WIRE_LEN:
        length, pos = _varint(data, pos, stop)
        if pos + length > stop:
            raise DecodeError(
                f"a field runs past the end of its message (truncated file?), at byte {pos}"
            )
        return length, pos + length
    if wire == _WIRE_FIXED64:
        if pos + 8 > stop:
            raise DecodeError(
                f"a fixed64 value runs past the end of its message (truncated file?), at byte {pos}"
            )
        return 0, pos + 8
    if wire == _WIRE_FIXED32:
        if pos + 4 > stop:
            raise DecodeError(
                f"a fixed32 value runs past the end of its message (truncated file?), at byte {pos}"
            )
        return 0, pos + 4
    raise DecodeError(f"invalid wire type (not an XSpace protobuf), at byte {pos}")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def decode_or_bad_input(data: bytes, path: str) -> Space:
    """:func:`decode`, with a failure turned into a :class:`BadInput` naming ``path``."""
    try:
        return decode(data)
    except DecodeError as exc:
        raise BadInput(f"{path}: not a readable XSpace profile: {exc}") from None
