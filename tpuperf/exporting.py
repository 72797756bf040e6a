"""Export a profile's timeline as a Perfetto trace (``.pftrace``), for ui.perfetto.dev.

The trace is Perfetto's own protobuf format (TrackEvent), written packet by packet with
the ``perfetto`` package's streaming builder, so memory stays bounded whatever the
profile's size, and every event is written: there is no event cap (XProf's trace viewer
stops at 1M events). README, "Export", says why this format and not Chrome's JSON.

Layout: one track per host, under it one per device, and under each device one track per
line as the analysis reads it (:mod:`tpuperf.build`): ``Steps``, ``XLA Modules`` (module
executions), each op line (``XLA Ops`` on TPU, the ``Stream #N`` lines on GPU, host threads
for CPU-only profiles) and ``Async XLA Ops`` (async windows; a device without that line gets
``Async XLA Ops (from -start/-done)``, the windows the analysis pairs from its ops, so every
chip has its async windows). Every other line with events
is written as recorded, one track per line: a device plane's (``XLA TraceMe``, TensorFlow's
op and name-scope lines) under its device, a host plane's (``/host:CPU``: one per thread)
under a track of the plane under the host. A line is written as recorded when the analysis
tables do not hold every one of its events: on a CPU-only profile the XLA ops of a thread are
on the device's op track, and again, with the thread's other events, on the thread's track.
Those lines are read again from the host's file, one at a time.

All hosts share one time axis, in nanoseconds, less one origin for the whole run: a device's
events on its clock (a TPU's recorded lines mapped onto it as the tables map its host-clock
windows), host threads on the host's clock.

Slices on one track must nest. Ops on one line only nest (a ``while`` around its body),
but async windows overlap one another; an event that would cross one already open goes
to a second track of the same name, which the Perfetto UI shows merged with the first.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import field
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from tpuperf._dataclasses import dataclass
from tpuperf.async_windows import pair_async
from tpuperf.columns import distinct, median
from tpuperf.errors import TpuperfError, UsageError

if TYPE_CHECKING:
    from tpuperf.columns import Strings, Table
    from tpuperf.profiles import Profile
    from tpuperf.tables import DeviceTables

# The one packet sequence of the trace (interned names live on it).
SEQUENCE_ID = 1

_STEP_TRACK = {
    "steps_line": "Steps",
    "step_marker": "Steps (host step markers)",
    "module_period": "Steps (dominant module period)",
}
MODULES_TRACK = "XLA Modules"
ALIGN_CLOCK = "clock"
ALIGN_STEPS = "steps"
ALIGNMENTS = (ALIGN_CLOCK, ALIGN_STEPS)
ASYNC_TRACK = "Async XLA Ops"
ASYNC_PAIRED_TRACK = "Async XLA Ops (from -start/-done)"


@dataclass
class ExportCounts:
    """What a trace holds: tracks and slices, in all and per line track."""

    tracks: int = 0
    slices: int = 0
    # (host, device, line track name) -> slices, the overflow tracks of a line included
    per_track: dict[tuple[str, int, str], int] = field(default_factory=dict)
    # (host, plane, line) -> slices of the lines written as recorded
    recorded: dict[tuple[str, str, str], int] = field(default_factory=dict)
    shift_ns: dict[str, int] = field(default_factory=dict)  # host -> ns it was moved back by


def export_perfetto(
    profile: Profile,
    path_or_handle: str | os.PathLike[str] | BinaryIO,
    align: str = ALIGN_CLOCK,
) -> ExportCounts:
    """Write ``profile`` as a Perfetto protobuf trace to a path (atomically: a temporary
    file, then a rename) or to a binary handle; return what the trace holds.

    ``align``: ``"clock"`` keeps each host's recorded clock (hosts of one capture share
    wall-clock time); ``"steps"`` shifts each host so that its steps start with the first
    host's (for hosts whose clocks disagree by more than a step).
    """
    if align not in ALIGNMENTS:
        raise UsageError(f"--align {align}: choose one of {', '.join(ALIGNMENTS)}")
    counts = ExportCounts()
    if isinstance(path_or_handle, (str, os.PathLike)):
        from tpuperf.files import write_atomic

        write_atomic(path_or_handle, lambda handle: _write(profile, handle, counts, align))
    else:
        _write(profile, path_or_handle, counts, align)
    return counts


def _builder(handle: BinaryIO) -> Any:
    try:
        from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder
    except ImportError:
        raise TpuperfError(
            "the Perfetto export needs the perfetto package: pip install 'tpuperf[report]' "
            "(or pip install perfetto)"
        ) from None
    return StreamingTraceProtoBuilder(handle)


@dataclass
class _Track:
    """One line of a device: its events as [start, end) in ns since the origin, names."""

    name: str
    start_ns: np.ndarray
    end_ns: np.ndarray
    names: Strings
    categories: Strings | None


def _write(profile: Profile, handle: BinaryIO, counts: ExportCounts, align: str) -> None:
    builder = _builder(handle)
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    writer = _Writer(builder, pb)
    hosts: dict[str, list[DeviceTables]] = {}
    for device in profile.device_tables:
        hosts.setdefault(device.host, []).append(device)
    for info in profile.hosts:  # a host without devices may still have lines
        hosts.setdefault(info.host, [])
    shifts = _step_shifts_ps(hosts) if align == ALIGN_STEPS else dict.fromkeys(hosts, 0)
    counts.shift_ns = {host: shift // 1000 for host, shift in shifts.items()}
    files = {info.host: info.path for info in profile.hosts}
    recorded = {
        host: _Recorded.plan(profile, host, devices, files.get(host))
        for host, devices in hosts.items()
    }
    firsts = [
        first - shifts[host]
        for host, devices in hosts.items()
        if (first := _first_ps(devices)) is not None
    ]
    firsts += [r.first_ps - shifts[r.host] for r in recorded.values() if r.lines]
    # 1 us before the first event of the run (a timestamp of 0 would read as "no timestamp").
    origin_ps = min(firsts, default=0) - 1_000_000
    for host_rank, (host, devices) in enumerate(hosts.items()):
        host_uuid = writer.track(f"host {host}", None, host_rank)
        counts.tracks += 1
        parents: dict[str, _Parent] = {}  # device plane -> its track
        rank = 0
        for device in sorted(devices, key=lambda d: d.device):
            tracks = list(_tracks(device, origin_ps + shifts[host]))
            if not tracks:
                continue
            chip = device.row.get("chip") or ""
            plane = device.row.get("plane") or f"device {device.device}"
            parent = _Parent(writer.track(f"{plane} ({chip})" if chip else plane, host_uuid, rank))
            rank += 1
            counts.tracks += 1
            for track in tracks:
                for lane_rows in _lanes(track.start_ns, track.end_ns):
                    uuid = writer.track(track.name, parent.uuid, parent.next_rank())
                    counts.tracks += 1
                    writer.slices(uuid, track, lane_rows)
                parent.names.add(track.name)
                key = (host, device.device, track.name)
                counts.per_track[key] = counts.per_track.get(key, 0) + len(track.start_ns)
                counts.slices += len(track.start_ns)
            if plane.startswith("/device:"):  # a CPU-only profile's device is its host plane
                parents[plane] = parent
        recorded[host].write(writer, counts, host_uuid, rank, parents, origin_ps + shifts[host])


def _first_ps(devices: list[DeviceTables]) -> int | None:
    """The earliest start in the devices' tables (None without any)."""
    firsts = [
        int(table.array("start_ps").min())
        for device in devices
        for table in (device.ops, device.modules, device.async_ops, device.steps)
        if table is not None and table.n
    ]
    return min(firsts) if firsts else None


@dataclass
class _Parent:
    """A track that lines go under, and the rank of its next child."""

    uuid: int
    names: set[str] = field(default_factory=set)  # its children's names
    children: int = 0

    def next_rank(self) -> int:
        self.children += 1
        return self.children - 1


@dataclass
class _Recorded:
    """The lines of one host's file that the analysis tables do not hold whole: written as
    the file records them."""

    host: str
    path: str | None
    lines: dict[str, set[str]]  # plane -> line names
    first_ps: int  # the earliest start among them, on the clock each is written on
    space: Any = None  # the decoded file (events are read line by line, when written)

    @classmethod
    def plan(
        cls, profile: Profile, host: str, devices: list[DeviceTables], path: str | None
    ) -> _Recorded:
        in_tables: dict[tuple[str, str], int] = {}
        for device in devices:
            plane = device.row.get("plane") or ""
            for name, n in _table_lines(device).items():
                in_tables[(plane, name)] = in_tables.get((plane, name), 0) + n
        events: dict[tuple[str, str], int] = {}
        first: dict[tuple[str, str], int] = {}
        table = profile.line_table
        for h, plane, line, n, first_ps in zip(
            table.strings("host").tolist(),
            table.strings("plane").tolist(),
            table.strings("line").tolist(),
            table.array("events").tolist(),
            table.array("first_ps").tolist(),
            strict=True,
        ):
            if h == host and n:
                key = (plane, line)
                events[key] = events.get(key, 0) + int(n)
                first[key] = min(first.get(key, first_ps), first_ps)
        wanted = [key for key, n in events.items() if in_tables.get(key) != n]
        lines: dict[str, set[str]] = {}
        for plane, line in wanted:
            lines.setdefault(plane, set()).add(line)
        if not wanted:
            return cls(host, path, {}, 0)
        space = profile.read_space(host)
        if space is None:
            raise TpuperfError(
                f"{host}: this profile was not read from a file, so the lines the analysis "
                "tables do not hold cannot be exported"
            )
        recorded = cls(host, path, lines, min(first[key] for key in wanted), space)
        # A TPU's lines go on its device clock, which may move them earlier than recorded.
        for plane in space.planes:
            clock = recorded.clock(plane)
            if clock is None:
                continue
            for recorded_line in plane.lines:
                if recorded_line.name in lines[plane.name] and len(recorded_line):
                    start, _ = recorded.times(recorded_line, clock)
                    recorded.first_ps = min(recorded.first_ps, int(start.min()))
                    recorded_line.release()
        return recorded

    def clock(self, plane: Any) -> Any:
        """The device clock of a TPU plane with lines to write (the one its analysis tables are
        built on); None for any other plane."""
        from tpuperf import build_tpu

        if not plane.name.startswith("/device:") or plane.name not in self.lines:
            return None
        return build_tpu.plane_clock(plane)

    def times(self, line: Any, clock: Any) -> tuple[np.ndarray, np.ndarray]:
        """Start and end of a line's events: as recorded, or placed on a device ``clock``."""
        from tpuperf import tables

        if clock is not None:
            start, duration = tables.placed_times(line, clock)
        else:
            start, duration = line.start_ps, line.duration_ps
        return start, start + np.maximum(duration, 0)

    def write(
        self,
        writer: _Writer,
        counts: ExportCounts,
        host_uuid: int,
        rank: int,
        devices: dict[str, _Parent],
        origin_ps: int,
    ) -> None:
        """Write the lines under their device's track (a device plane that has one) or under a
        track of their plane, from ``rank`` on under the host."""
        if not self.lines:
            return
        from tpuperf import xspace

        groups: dict[str, _Parent] = {}
        for plane in self.space.planes:
            names = self.lines.get(plane.name)
            if not names:
                continue
            clock = self.clock(plane)
            for line in plane.lines:
                if line.name not in names or not len(line):
                    continue
                parent = devices.get(plane.name)
                name = line.name
                if parent is None:
                    if plane.name not in groups:
                        groups[plane.name] = _Parent(writer.track(plane.name, host_uuid, rank))
                        rank += 1
                        counts.tracks += 1
                    parent = groups[plane.name]
                elif name in parent.names:  # also on a track from the tables, in part
                    name = f"{name} (as recorded)"
                try:
                    track = self.track(plane, line, name, clock, origin_ps)
                except xspace.DecodeError as exc:
                    raise TpuperfError(
                        f"{self.path}: line {line.name!r} of {plane.name}: {exc}"
                    ) from None
                for lane_rows in _lanes(track.start_ns, track.end_ns):
                    uuid = writer.track(name, parent.uuid, parent.next_rank())
                    counts.tracks += 1
                    writer.slices(uuid, track, lane_rows)
                key = (self.host, plane.name, line.name)
                counts.recorded[key] = counts.recorded.get(key, 0) + len(track.start_ns)
                counts.slices += len(track.start_ns)
                line.release()

    def track(self, plane: Any, line: Any, name: str, clock: Any, origin_ps: int) -> _Track:
        """A line's events, named by their metadata (display name, else name)."""
        from tpuperf.columns import Strings

        start_ps, end_ps = self.times(line, clock)
        start, end = _ns(start_ps, end_ps, origin_ps)
        meta = plane.metadata
        values = [
            d or n or "(unnamed)" for d, n in zip(meta.display_names, meta.names, strict=True)
        ]
        rows = meta.rows(line.metadata_id)
        codes = np.where(rows < 0, len(values), rows)
        return _Track(
            name, start, end, Strings.from_values([*values, "(no metadata)"], codes), None
        )


def _step_shifts_ps(hosts: dict[str, list[DeviceTables]]) -> dict[str, int]:
    """Per host, how far its steps start after the first host's: the median over the step
    numbers both have of the difference of their earliest starts (0 without shared steps)."""
    starts: dict[str, dict[int, int]] = {}
    for host, devices in hosts.items():
        earliest: dict[int, int] = {}
        for device in devices:
            if device.steps is None or not device.steps.n:
                continue
            for step, start in zip(
                device.steps.array("step").tolist(),
                device.steps.array("start_ps").tolist(),
                strict=True,
            ):
                earliest[step] = min(start, earliest.get(step, start))
        starts[host] = earliest
    reference = starts[next(iter(hosts))] if hosts else {}
    shifts = {}
    for host, earliest in starts.items():
        shared = sorted(set(earliest) & set(reference))
        shifts[host] = int(median([earliest[n] - reference[n] for n in shared])) if shared else 0
    return shifts


def _ns(start_ps: np.ndarray, end_ps: np.ndarray, origin_ps: int) -> tuple[np.ndarray, np.ndarray]:
    # Both ends rounded down: rounding is monotonic, so nested events stay nested.
    start = (np.asarray(start_ps, dtype=np.int64) - origin_ps) // 1000
    end = (np.asarray(end_ps, dtype=np.int64) - origin_ps) // 1000
    return start, np.maximum(end, start)


def _tracks(device: DeviceTables, origin_ps: int) -> Iterator[_Track]:
    """The device's lines: steps, module executions, each op line, async windows."""
    from tpuperf.columns import Strings

    steps = device.steps
    if steps is not None and steps.n:
        start, end = _ns(steps.array("start_ps"), steps.array("end_ps"), origin_ps)
        numbers = steps.array("step").tolist()
        yield _Track(
            _steps_track_name(steps),
            start,
            end,
            Strings.from_list([f"step {n}" for n in numbers]),
            Strings.constant("step", steps.n),
        )
    modules = device.modules
    if modules.n:
        start_ps = modules.array("start_ps")
        start, end = _ns(start_ps, start_ps + modules.array("dur_ps"), origin_ps)
        yield _Track(
            MODULES_TRACK,
            start,
            end,
            modules.strings("module"),
            Strings.constant("module", modules.n),
        )
    ops = device.ops
    if ops.n:
        lines = ops.strings("line")
        codes = lines.codes
        start_ps = ops.array("start_ps")
        end_ps = start_ps + ops.array("dur_ps")
        for code in distinct(codes).tolist():
            rows = np.flatnonzero(codes == code)
            start, end = _ns(start_ps[rows], end_ps[rows], origin_ps)
            yield _Track(
                lines.values[code],
                start,
                end,
                ops.strings("op").take(rows),
                ops.strings("category").take(rows),
            )
    windows = device.async_ops
    if windows.n:
        start_ps = windows.array("start_ps")
        start, end = _ns(start_ps, start_ps + windows.array("dur_ps"), origin_ps)
        yield _Track(ASYNC_TRACK, start, end, windows.strings("op"), windows.strings("category"))
    elif ops.n and (paired := pair_async(ops)) is not None:
        # No async line (on the v6e profile only TPU:0 has one): the windows the analysis
        # pairs from the device's -start/-done ops, so every chip has them.
        rows, end_ps = paired
        start, end = _ns(ops.array("start_ps")[rows], end_ps, origin_ps)
        yield _Track(
            ASYNC_PAIRED_TRACK,
            start,
            end,
            ops.strings("op").take(rows),
            ops.strings("category").take(rows),
        )


def _steps_track_name(steps: Table) -> str:
    sources = steps.strings("source").tolist() if "source" in steps else []
    return _STEP_TRACK.get(sources[0], "Steps") if sources else "Steps"


def _table_lines(device: DeviceTables) -> dict[str, int]:
    """The line tracks :func:`_tracks` writes for a device, and their slices."""
    out: dict[str, int] = {}
    if device.steps is not None and device.steps.n:
        out[_steps_track_name(device.steps)] = device.steps.n
    if device.modules.n:
        out[MODULES_TRACK] = device.modules.n
    if device.ops.n:
        lines = device.ops.strings("line")
        per_line = np.bincount(lines.codes, minlength=len(lines.values))
        for code in np.flatnonzero(per_line).tolist():
            name = lines.values[code]
            out[name] = out.get(name, 0) + int(per_line[code])
    if device.async_ops.n:
        out[ASYNC_TRACK] = out.get(ASYNC_TRACK, 0) + device.async_ops.n
    return out


def _lanes(start: np.ndarray, end: np.ndarray) -> list[np.ndarray]:
    """Split events into lanes on which they nest: each lane's rows in the order to write
    them (by start, the longer first). Events that only nest stay on one lane."""
    order = np.lexsort((-end, start))
    if len(order) < 2:
        return [order]
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    inside = s[1:] < reach[:-1]  # starts before something earlier has ended
    if not inside.any():
        return [order]
    # Nesting or crossing: walk the events with one stack of open ends per lane.
    lane = np.zeros(len(order), dtype=np.int64)
    stacks: list[list[int]] = []
    for i, (si, ei) in enumerate(zip(s.tolist(), e.tolist(), strict=True)):
        for k, stack in enumerate(stacks):
            while stack and stack[-1] <= si:
                stack.pop()
            if not stack or ei <= stack[-1]:
                stack.append(ei)
                lane[i] = k
                break
        else:
            stacks.append([ei])
            lane[i] = len(stacks) - 1
    return [order[lane == k] for k in range(len(stacks))]


class _Writer:
    """Packets on one sequence: track descriptors, interned names and categories, slices."""

    def __init__(self, builder: Any, pb: Any) -> None:
        self.builder = builder
        self.pb = pb
        self.next_uuid = 1
        self.names: dict[str, int] = {}
        self.categories: dict[str, int] = {}

    def track(self, name: str, parent: int | None, rank: int) -> int:
        uuid = self.next_uuid
        self.next_uuid += 1
        packet = self.builder.create_packet()
        packet.trusted_packet_sequence_id = SEQUENCE_ID
        if uuid == 1:  # the first packet of the sequence: its interning state starts empty
            packet.sequence_flags = (
                self.pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
                | self.pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
            )
        descriptor = packet.track_descriptor
        descriptor.uuid = uuid
        descriptor.name = name
        if parent is not None:
            descriptor.parent_uuid = parent
        descriptor.sibling_order_rank = rank
        descriptor.child_ordering = self.pb.TrackDescriptor.EXPLICIT
        self.builder.write_packet(packet)
        return uuid

    def slices(self, uuid: int, track: _Track, rows: np.ndarray) -> None:
        """The events ``rows`` of ``track`` (in writing order, nesting) as begin/end pairs."""
        names = _interned(track.names, rows, self.names)
        categories = (
            _interned(track.categories, rows, self.categories)
            if track.categories is not None
            else _Interned(np.zeros(len(rows), dtype=np.int64), {})
        )
        # Row position -> the new interned entries its packet defines (first uses only).
        define: dict[int, list[tuple[str, int, str]]] = {}
        for kind, interned in (("event_names", names), ("event_categories", categories)):
            for position, entries in _first_uses(interned.iids, interned.new).items():
                define.setdefault(position, []).extend((kind, i, t) for i, t in entries)
        # Packets are reused: only the timestamp and the name change from slice to slice
        # (the builder serializes each packet as it is written).
        write = self.builder.write_packet
        end = self._event(uuid, self.pb.TrackEvent.TYPE_SLICE_END, 0)
        begins: dict[int, Any] = {}
        open_ends: list[int] = []
        ends = track.end_ns[rows].tolist()
        name_iids = names.iids.tolist()
        category_iids = categories.iids.tolist()
        for i, start in enumerate(track.start_ns[rows].tolist()):
            while open_ends and open_ends[-1] <= start:
                end.timestamp = open_ends.pop()
                write(end)
            category = category_iids[i]
            if i in define:
                packet = self._event(uuid, self.pb.TrackEvent.TYPE_SLICE_BEGIN, category)
                for kind, iid, text in define[i]:
                    getattr(packet.interned_data, kind).add(iid=iid, name=text)
                event = packet.track_event
            else:
                if category not in begins:
                    packet = self._event(uuid, self.pb.TrackEvent.TYPE_SLICE_BEGIN, category)
                    begins[category] = (packet, packet.track_event)
                packet, event = begins[category]
            packet.timestamp = start
            event.name_iid = name_iids[i]
            write(packet)
            open_ends.append(ends[i])
        while open_ends:
            end.timestamp = open_ends.pop()
            write(end)

    def _event(self, uuid: int, kind: int, category_iid: int) -> Any:
        packet = self.builder.create_packet()
        packet.trusted_packet_sequence_id = SEQUENCE_ID
        event = packet.track_event
        event.type = kind
        event.track_uuid = uuid
        if kind == self.pb.TrackEvent.TYPE_SLICE_BEGIN:
            packet.sequence_flags = self.pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
            if category_iid:
                event.category_iids.append(category_iid)
        return packet


@dataclass
class _Interned:
    iids: np.ndarray  # per row
    new: dict[int, str]  # iids first used here -> their string


def _interned(strings: Strings, rows: np.ndarray, known: dict[str, int]) -> _Interned:
    """The iid of each row's string; strings not seen before get new iids."""
    codes = strings.codes[rows] if len(rows) else np.zeros(0, dtype=np.int64)
    used = distinct(codes)
    iid_of_code = np.zeros(len(strings.values) + 1, dtype=np.int64)
    new: dict[int, str] = {}
    for code in used.tolist():
        text = strings.values[code] if strings.values else ""
        if not text:  # no category: leave it out rather than name it ""
            continue
        iid = known.get(text)
        if iid is None:
            iid = known[text] = len(known) + 1
            new[iid] = text
        iid_of_code[code] = iid
    return _Interned(iid_of_code[codes], new)


def _first_uses(iids: np.ndarray, new: dict[int, str]) -> dict[int, list[tuple[int, str]]]:
    """Row position -> the new interned entries to define in that row's packet."""
    if not new:
        return {}
    values, first = np.unique(iids, return_index=True)
    out: dict[int, list[tuple[int, str]]] = {}
    for iid, position in zip(values.tolist(), first.tolist(), strict=True):
        if iid in new:
            out.setdefault(position, []).append((iid, new[iid]))
    return out
