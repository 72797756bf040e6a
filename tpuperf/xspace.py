"""Decode XSpace bytes into columns, straight from the protobuf wire format.

An XSpace holds a few planes, each with a few lines, each with up to millions
of events. Nothing here uses the protobuf runtime (importing it and building the
message classes cost 15-20 ms of every command): fields are walked as columns of
(number, wire type, span) by :mod:`tpuperf.kernels` (a small C loop where it is
built, else numpy; the numpy wire reading is :mod:`tpuperf.kernels.wire`). The small
parts (plane ids, names, metadata, plane stats) are read message by message in bulk;
the events, the hot path, are decoded all events of a line at once straight into
numpy arrays. Both kernels give the same columns, which tests/test_xspace.py checks
against protobuf.

The result is a :class:`Space` of :class:`Plane` s of :class:`Line` s whose
events are arrays (``metadata_id``, ``offset_ps``, ``duration_ps``) plus a
columnar table of their stats.
"""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import field
from typing import Any

import numpy as np

from tpuperf import _threads, kernels
from tpuperf._dataclasses import dataclass
from tpuperf._threads import PARALLEL_BYTES
from tpuperf.columns import distinct, first_rows, sorted_codes
from tpuperf.kernels.wire import (
    EMPTY,
    STAT_BYTES,
    STAT_DOUBLE,
    STAT_INT64,
    STAT_NONE,
    STAT_REF,
    STAT_STR,
    STAT_UINT64,
    WIRE_LEN,
    WIRE_VARINT,
    DecodeError,
    field_values,
    read_varint,
    scalar_field,
    skip_value,
    to_signed,
)

# Field numbers (xplane.proto) of the fields decoded by hand here.
_SPACE_PLANES, _SPACE_ERRORS, _SPACE_WARNINGS, _SPACE_HOSTNAMES = 1, 2, 3, 4
_PLANE_ID, _PLANE_NAME, _PLANE_LINES, _PLANE_EVENT_METADATA = 1, 2, 3, 4
_PLANE_STAT_METADATA, _PLANE_STATS = 5, 6
_METADATA_NAME, _METADATA_DISPLAY_NAME, _METADATA_STATS = 2, 4, 5
_LINE_ID, _LINE_NAME, _LINE_TIMESTAMP_NS, _LINE_EVENTS = 1, 2, 3, 4
_LINE_DURATION_PS, _LINE_DISPLAY_ID, _LINE_DISPLAY_NAME = 9, 10, 11


# --------------------------------------------------------------------------- results


@dataclass(eq=False)
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


@dataclass(eq=False)
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
            self._columns = _join_runs(
                [_event_run(data, first, stop) for first, stop, _ in self._runs]
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
        if self._columns is None:
            assert self._plane is not None
            lowest, highest = None, None
            for first, stop, _ in self._runs:
                _, _, low, high = kernels.extent(self._plane._data, first, stop)
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
        ids = [(i, column) for column, n in enumerate(names) for i in plane.stat_ids(n)]
        wanted = np.array([i for i, _ in ids], dtype=np.int64)
        columns = np.array([c for _, c in ids], dtype=np.int64)
        keep_column = names.index(keep) if keep is not None else -1
        parts = []
        for first, stop, events in self._runs:
            _, found = kernels.int_events(
                plane._data, first, stop, wanted, columns, len(names), keep_column, events
            )
            parts.append(found)
            release_pages(plane._data, first, stop)
        if not parts:
            parts = [[EMPTY] * (3 + len(names))]
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


_RELEASE_MIN_BYTES = 1 << 22


def release_pages(data: Any, start: int, stop: int) -> None:
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


@dataclass(eq=False)
class EventMetadata:
    """A plane's event metadata, columnar: one row per metadata entry."""

    ids: np.ndarray  # sorted
    names: list[str]
    display_names: list[str]
    stats: Stats

    def rows(
        self, metadata_ids: np.ndarray, unknown: int = -1, dtype: Any = np.int64
    ) -> np.ndarray:
        """Row of each of ``metadata_ids`` (events' metadata ids), as ``dtype``; ``unknown``
        where the id is not in the metadata."""
        if not len(self.ids):
            return np.full(len(metadata_ids), unknown, dtype=dtype)
        if self.ids[0] >= 0 and self.ids[-1] < 4 * len(self.ids) + 1024:
            # Ids are small and dense (the usual case): a lookup table beats a binary search.
            # Shifted by one, with ``unknown`` at both ends, so that ids out of range (below
            # 0, past the last) clip onto it: one pass, 10x faster than masking them.
            table = np.full(int(self.ids[-1]) + 3, unknown, dtype=dtype)
            table[self.ids + 1] = np.arange(len(self.ids))
            return table.take(np.asarray(metadata_ids) + 1, mode="clip")
        rows = np.searchsorted(self.ids, metadata_ids)
        rows[rows >= len(self.ids)] = len(self.ids) - 1
        return np.where(self.ids[rows] == metadata_ids, rows, unknown).astype(dtype, copy=False)


@dataclass(eq=False)
class Plane:
    id: int
    name: str
    lines: list[Line]
    metadata: EventMetadata
    stat_names: dict[int, str]
    stats: dict[str, Any]  # the plane's own stats, decoded
    _data: bytes = field(default=b"", repr=False)

    def stat_ids(self, name: str) -> list[int]:
        """The ids the plane's stat metadata gives ``name`` (a plane of TensorFlow's names
        over a thousand stats, and a line's every stat is looked up by name)."""
        return list(self._stat_ids_by_name.get(name, ()))

    @functools.cached_property
    def _stat_ids_by_name(self) -> dict[str, list[int]]:
        by_name: dict[str, list[int]] = {}
        for i, n in self.stat_names.items():
            by_name.setdefault(n, []).append(i)
        return by_name

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
        entries = kernels.message_fields(buf, stats.text_start[rows], stats.text_stop[rows])
        owner, starts, stops = field_values(entries, 1, WIRE_LEN)
        fields = kernels.message_fields(buf, starts, stops)
        n = len(owner)
        return (
            stats.owner[rows][owner],
            scalar_field(fields, 1, n),
            scalar_field(fields, 2, n),
            scalar_field(fields, 3, n),
        )

    def metadata_stat(self, name: str, default: Any = None) -> np.ndarray | list[Any]:
        """The stat ``name`` of every event metadata row."""
        return self.stat_column(self.metadata.stats, len(self.metadata.ids), name, default)

    def metadata_values(self, name: str, rows: np.ndarray, default: Any = None) -> list[Any]:
        """The stat ``name`` of the metadata rows ``rows`` as :meth:`metadata_stat` gives it,
        ``default`` where a row lacks it (the row past the last, for events of unknown
        metadata, has no stats). Only those rows' stats are decoded."""
        stats = self.metadata.stats
        found = np.flatnonzero(_is_one_of(stats.metadata_id, self.stat_ids(name)))
        stat_of = np.full(len(self.metadata.ids) + 1, -1, dtype=np.int64)
        stat_of[stats.owner[found]] = found  # where a row repeats the stat, the last one
        picked = stat_of[np.asarray(rows, dtype=np.int64)]
        has = picked >= 0
        if has.all():
            return self._values(stats, picked, stats.kind[picked])
        out: list[Any] = [default] * len(picked)
        at = np.flatnonzero(has)
        values = self._values(stats, picked[at], stats.kind[picked[at]])
        for i, value in zip(at.tolist(), values, strict=True):
            out[i] = value
        return out

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
    refs resolved to the names they point to, None where a stat has no value.

    Converted a kind at a time (a metadata column is usually of one kind): text decoded by
    the kernels, numbers by numpy, not one value at a time."""
    rows = np.asarray(rows, dtype=np.int64)
    kinds = np.asarray(kinds)
    present = distinct(kinds).tolist()
    if len(present) <= 1:
        return _values_of_kind(data, stat_names, stats, rows, present[0]) if present else []
    out: list[Any] = [None] * len(rows)
    for kind in present:
        at = np.flatnonzero(kinds == kind)
        values = _values_of_kind(data, stat_names, stats, rows[at], kind)
        for i, value in zip(at.tolist(), values, strict=True):
            out[i] = value
    return out


def _values_of_kind(
    data: Any, stat_names: dict[int, str], stats: Stats, rows: np.ndarray, kind: int
) -> list[Any]:
    """The values of stats ``rows``, all of kind ``kind``, as Python objects."""
    if kind == STAT_STR:
        return kernels.texts(data, stats.text_start[rows], stats.text_stop[rows])
    if kind == STAT_BYTES:
        starts, stops = stats.text_start[rows].tolist(), stats.text_stop[rows].tolist()
        return [bytes(data[a:b]) for a, b in zip(starts, stops, strict=True)]
    if kind == STAT_REF:
        return [stat_names.get(i, "") for i in stats.int_value[rows].tolist()]
    if kind == STAT_DOUBLE:
        return stats.double_value[rows].tolist()
    if kind == STAT_UINT64:  # stored as int64: the same 64 bits read unsigned
        return stats.int_value[rows].view(np.uint64).tolist()
    if kind == STAT_INT64:
        return stats.int_value[rows].tolist()
    return [None] * len(rows)


def _is_one_of(values: np.ndarray, wanted: list[int]) -> np.ndarray:
    """``np.isin`` for the usual one or two stat ids, without its sort."""
    mask = np.zeros(len(values), dtype=bool)
    for value in wanted:
        mask |= values == value
    return mask


@dataclass(eq=False)
class Space:
    planes: list[Plane]
    hostnames: list[str]
    errors: list[str]
    warnings: list[str]


# --------------------------------------------------------------------------- decoding


def decode(data: bytes) -> Space:
    """Decode serialized XSpace bytes. Raises :class:`DecodeError` when they are not one."""
    if not data:
        raise DecodeError("the file is empty")
    buf = np.frombuffer(data, dtype=np.uint8)
    number, wire, _, value_start, value_stop = kernels.scan_fields(data, 0, len(data))
    is_plane = (number == _SPACE_PLANES) & (wire == WIRE_LEN)
    spans = list(zip(value_start[is_plane].tolist(), value_stop[is_plane].tolist(), strict=True))
    # Finding the lines' event runs is C without the GIL: a large profile's planes go side by
    # side, a small one's one after another (threads cost it more).
    workers = min(os.cpu_count() or 1, len(spans))
    shared: dict[bytes, EventMetadata] = {}  # see _event_metadata
    with _threads.pool(workers, "tpuperf-planes", parallel=len(data) >= PARALLEL_BYTES) as pool:
        planes = list(
            pool.map(lambda span: _decode_plane(data, buf, span[0], span[1], shared), spans)
        )

    def texts(field_number: int) -> list[str]:  # a repeated string field of the XSpace
        pick = (number == field_number) & (wire == WIRE_LEN)
        return kernels.texts(data, value_start[pick], value_stop[pick])

    return Space(
        planes=planes,
        hostnames=texts(_SPACE_HOSTNAMES),
        errors=texts(_SPACE_ERRORS),
        warnings=texts(_SPACE_WARNINGS),
    )


def _decode_plane(
    data: Any,
    buf: np.ndarray,
    start: int,
    stop: int,
    shared: dict[bytes, EventMetadata],
) -> Plane:
    number, wire, field_start, value_start, value_stop = kernels.scan_fields(data, start, stop)
    is_line = (number == _PLANE_LINES) & (wire == WIRE_LEN)
    is_metadata = (number == _PLANE_EVENT_METADATA) & (wire == WIRE_LEN)
    rest = ~(is_line | is_metadata)
    line_spans = list(zip(value_start[is_line].tolist(), value_stop[is_line].tolist(), strict=True))
    metadata_spans = np.stack([value_start[is_metadata], value_stop[is_metadata]], axis=1)
    # What is left (id, name, stat metadata, plane stats) is small: one message of its own.
    header = _join_fields(data, field_start[rest], value_stop[rest])
    header_buf = np.frombuffer(header, dtype=np.uint8)
    fields = kernels.message_fields(header, np.zeros(1, np.int64), np.full(1, len(header)))
    stat_names = _stat_names(header, header_buf, fields)
    plane = Plane(
        id=int(scalar_field(fields, _PLANE_ID, 1)[0]),
        name=_strings(header, fields, _PLANE_NAME, 1)[0],
        lines=[],
        metadata=_event_metadata(data, buf, field_start[is_metadata], metadata_spans, shared),
        stat_names=stat_names,
        stats=_stat_dict(header, fields, stat_names),
        _data=data,
    )
    for line_start, line_stop in line_spans:
        line = _decode_line(data, line_start, line_stop)
        line._plane = plane
        plane.lines.append(line)
    return plane


def _event_metadata(
    data: Any,
    buf: np.ndarray,
    field_starts: np.ndarray,
    spans: np.ndarray,
    shared: dict[bytes, EventMetadata],
) -> EventMetadata:
    """A plane's event metadata (its ``event_metadata`` entries: fields from ``field_starts``,
    values at ``spans``), decoded once for the planes whose entries are the same bytes: the
    chips of one program carry the same thousands of entries each (``shared``, by those
    bytes; their text spans point into the first such plane's copy, which holds the same
    text). Planes share the object; nothing changes it."""
    if not len(spans):
        return _decode_event_metadata(data, buf, spans)
    stops = spans[:, 1]
    if bool((field_starts[1:] == stops[:-1]).all()):  # the entries back to back, as a rule
        key = bytes(memoryview(data)[int(field_starts[0]) : int(stops[-1])])
    else:
        key = _join_fields(data, field_starts, stops)
    found = shared.get(key)
    if found is None:  # two threads may both decode it: the first one stored is kept
        found = shared.setdefault(key, _decode_event_metadata(data, buf, spans))
    return found


def _decode_event_metadata(data: Any, buf: np.ndarray, spans: np.ndarray) -> EventMetadata:
    """Decode the ``event_metadata`` map entries of a plane, all at once."""
    spans_array = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    n = len(spans_array)
    keys, fields = _map_entries(buf, spans_array[:, 0], spans_array[:, 1])
    owner, stat_starts, stat_stops = field_values(fields, _METADATA_STATS, WIRE_LEN)
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
    rows, starts, stops = field_values(fields, number, WIRE_LEN)
    if not len(rows):
        return [""] * n
    texts = kernels.texts(data, starts, stops)
    if len(rows) == n and bool((rows[1:] > rows[:-1]).all()):  # each message has it once
        return texts
    out = [""] * n
    for row, text in zip(rows.tolist(), texts, strict=True):
        out[row] = text
    return out


def _stat_names(
    header: bytes, buf: np.ndarray, fields: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> dict[int, str]:
    """A plane's ``stat_metadata`` map: stat id -> name (a repeated key: the last entry)."""
    _, starts, stops = field_values(fields, _PLANE_STAT_METADATA, WIRE_LEN)
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
    entries = kernels.message_fields(buf, starts, stops)
    keys = scalar_field(entries, 1, n)
    value_rows, value_starts, value_stops = field_values(entries, 2, WIRE_LEN)
    inner_starts, inner_stops = np.zeros(n, np.int64), np.zeros(n, np.int64)
    inner_starts[value_rows], inner_stops[value_rows] = value_starts, value_stops
    return keys, kernels.message_fields(buf, inner_starts, inner_stops)


def _stat_dict(
    header: bytes,
    fields: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]],
    stat_names: dict[int, str],
) -> dict[str, Any]:
    """A plane's own stats by name (refs resolved; a stat without a value left out)."""
    _, starts, stops = field_values(fields, _PLANE_STATS, WIRE_LEN)
    stats = _decode_stats(header, np.arange(len(starts)), starts, stops)
    rows = np.flatnonzero(stats.kind != STAT_NONE)
    values = _stat_values(header, stat_names, stats, rows, stats.kind[rows])
    return {
        stat_names.get(key, str(key)): value
        for key, value in zip(stats.metadata_id[rows].tolist(), values, strict=True)
    }


def _decode_line(data: Any, start: int, stop: int) -> Line:
    scalars: dict[int, int] = {}
    strings: dict[int, str] = {}
    runs: list[tuple[int, int, int]] = []
    pos = start
    while pos < stop:
        tag, value_pos = read_varint(data, pos, stop)
        number, wire = tag >> 3, tag & 7
        if number == _LINE_EVENTS and wire == WIRE_LEN:
            # The events of a line are serialized back to back: find where the run of them
            # that starts here ends (they are decoded when first used), then go on after it.
            run_end, events = kernels.skip_records(data, pos, stop)
            runs.append((pos, run_end, events))
            pos = run_end
            continue
        value, pos = skip_value(data, value_pos, stop, wire)
        if wire == WIRE_VARINT:
            scalars[number] = to_signed(value)
        elif wire == WIRE_LEN:
            strings[number] = bytes(data[pos - value : pos]).decode("utf-8", "replace")
    return Line(
        id=scalars.get(_LINE_ID, 0),
        name=strings.get(_LINE_NAME, ""),
        display_name=strings.get(_LINE_DISPLAY_NAME, ""),
        timestamp_ns=scalars.get(_LINE_TIMESTAMP_NS, 0),
        runs=runs,
    )


# A run of events: metadata_id, offset_ps, duration_ps, (stat owner, stat start, stat stop).
_EventColumns = tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]


def _event_run(data: Any, first: int, stop: int) -> _EventColumns:
    """The run of event records at ``first``, as columns."""
    _, metadata_id, offset_ps, duration_ps, owner, stat_start, stat_stop = kernels.event_records(
        data, first, stop
    )
    return metadata_id, offset_ps, duration_ps, (owner, stat_start, stat_stop)


def _join_runs(runs: list[_EventColumns]) -> _EventColumns:
    if len(runs) == 1:
        return runs[0]
    if not runs:
        return EMPTY, EMPTY, EMPTY, (EMPTY, EMPTY, EMPTY)
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


def _decode_stats(data: Any, owner: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> Stats:
    metadata_id, kind, int_value, double_value, text_start, text_stop = kernels.stats(
        data, starts, stops
    )
    return Stats(owner, metadata_id, kind, int_value, double_value, text_start, text_stop)


# --------------------------------------------------------------------------- small walker


def _join_fields(data: Any, starts: np.ndarray, stops: np.ndarray) -> bytes:
    return b"".join(bytes(data[a:b]) for a, b in zip(starts.tolist(), stops.tolist(), strict=True))
