"""`tpuperf export --format perfetto`: the trace read back with Perfetto's own protos.

The perfetto package's trace processor binary is downloaded at run time, which these
machines cannot do; so the tests parse the file with the package's trace protos and
check what the trace processor would: declared tracks, interned names, slices that nest
on every track; and that every event of the profile is there.
"""

from __future__ import annotations

import collections
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fixtures.generate import write_run
from tpuperf.cli import main
from tpuperf.exporting import ASYNC_PAIRED_TRACK, ASYNC_TRACK, MODULES_TRACK, export_perfetto
from tpuperf.profiles import load

pb = pytest.importorskip(
    "perfetto.protos.perfetto.trace.perfetto_trace_pb2", reason="needs the perfetto package"
)


@dataclass
class TraceView:
    """What a trace holds, per track, after checking that Perfetto could read it."""

    names: dict[int, str] = field(default_factory=dict)  # track uuid -> name
    parents: dict[int, int] = field(default_factory=dict)
    slices: collections.Counter[int] = field(default_factory=collections.Counter)
    slice_names: dict[int, collections.Counter[str]] = field(default_factory=dict)
    first_begin_ns: dict[int, int] = field(default_factory=dict)

    def path(self, uuid: int) -> tuple[str, ...]:
        out = [self.names[uuid]]
        while uuid in self.parents:
            uuid = self.parents[uuid]
            out.append(self.names[uuid])
        return tuple(reversed(out))

    def by_line(self) -> dict[tuple[str, ...], int]:
        """(host track, device track, line) -> slices; same-named lanes of a line summed."""
        out: dict[tuple[str, ...], int] = collections.Counter()
        for uuid, n in self.slices.items():
            out[self.path(uuid)] += n
        return dict(out)


def _records(data: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each `packet` field of a Trace: tag 0x0a, a varint length, bytes."""
    i, n = 0, len(data)
    while i < n:
        assert data[i] == 0x0A, f"byte {i}: not a Trace.packet field"
        tag_at = i
        i += 1
        length = shift = 0
        while True:
            byte = data[i]
            i += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        yield tag_at, i + length
        i += length


def _packets(path: Path, chunk: int = 50_000) -> Iterator[object]:
    """The trace's packets, parsed a chunk of records at a time (bounded memory)."""
    data = path.read_bytes()
    start = None
    count = 0
    for begin, end in _records(data):
        if start is None:
            start = begin
        count += 1
        if count == chunk:
            yield from pb.Trace.FromString(data[start:end]).packet
            start, count = None, 0
    if start is not None:
        yield from pb.Trace.FromString(data[start:]).packet


def read_trace(path: Path, names: bool = True) -> TraceView:
    """Parse ``path`` and check it the way Perfetto's importer reads it."""
    view = TraceView()
    interned_names: dict[int, str] = {}
    interned_categories: dict[int, str] = {}
    open_ends: dict[int, int] = collections.Counter()
    last_ts: dict[int, int] = {}
    begin_type, end_type = pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END
    needs_state = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    first = True
    for packet in _packets(path):
        assert packet.trusted_packet_sequence_id == 1
        if first:
            assert packet.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            first = False
        if packet.HasField("interned_data"):
            for entry in packet.interned_data.event_names:
                interned_names[entry.iid] = entry.name
            for entry in packet.interned_data.event_categories:
                interned_categories[entry.iid] = entry.name
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            assert d.uuid not in view.names, "a track declared twice"
            view.names[d.uuid] = d.name
            if d.HasField("parent_uuid"):
                assert d.parent_uuid in view.names, "a parent declared after its child"
                view.parents[d.uuid] = d.parent_uuid
            continue
        event = packet.track_event
        uuid = event.track_uuid
        timestamp = packet.timestamp
        # Per track, time never goes back, and ends close the slices begun before them.
        assert timestamp >= last_ts.get(uuid, 1), "time goes back on a track"
        last_ts[uuid] = timestamp
        if event.type == begin_type:
            assert packet.sequence_flags & needs_state
            name = interned_names[event.name_iid]  # a KeyError: used before it was interned
            for category in event.category_iids:
                assert category in interned_categories
            view.slices[uuid] += 1
            open_ends[uuid] += 1
            if uuid not in view.first_begin_ns:
                assert uuid in view.names, "an event on an undeclared track"
                view.first_begin_ns[uuid] = timestamp
            if names:
                view.slice_names.setdefault(uuid, collections.Counter())[name] += 1
        else:
            assert event.type == end_type
            assert open_ends[uuid] > 0, "an end without a begin"
            open_ends[uuid] -= 1
    assert not any(open_ends.values()), "slices left open"
    return view


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    return write_run("straggler", tmp_path_factory.mktemp("straggler"), steps=6)


def _device_track(view: TraceView, host: str, device: int) -> tuple[str, str]:
    for path in view.by_line():
        if path[0] == f"host {host}" and path[1].startswith(f"/device:TPU:{device} "):
            return path[0], path[1]
    raise AssertionError(f"no track for {host} device {device}")


def test_slices_per_track_are_the_op_executions_of_each_device(
    straggler: tuple[Path, object], tmp_path: Path
) -> None:
    run_dir, truth = straggler
    target = tmp_path / "trace.pftrace"
    counts = export_perfetto(load(run_dir), target)
    view = read_trace(target)
    lines = view.by_line()
    # Both hosts of the run are in the one trace, each device under its host.
    assert {path[0] for path in lines} == {f"host {h}" for h in truth.hosts}  # type: ignore[attr-defined]
    for device in truth.devices:  # type: ignore[attr-defined]
        host_track, device_track = _device_track(view, device.host, device.device)
        assert lines[(host_track, device_track, "XLA Ops")] == device.ops
        assert lines[(host_track, device_track, "Steps")] == len(device.steps)
    assert sum(view.slices.values()) == counts.slices


def test_slice_names_and_every_line_match_the_profile(tmp_path: Path) -> None:
    run_dir, _ = write_run("collective_training", tmp_path / "run", steps=4)
    profile = load(run_dir)
    target = tmp_path / "trace.pftrace"
    export_perfetto(profile, target)
    view = read_trace(target)
    by_path = {view.path(uuid): uuid for uuid in view.slices}
    for device in profile.device_tables:
        host_track, device_track = _device_track(view, device.host, device.device)
        ops = by_path[(host_track, device_track, "XLA Ops")]
        assert view.slice_names[ops] == collections.Counter(device.ops.strings("op").tolist())
        modules = by_path[(host_track, device_track, MODULES_TRACK)]
        assert view.slice_names[modules] == collections.Counter(
            device.modules.strings("module").tolist()
        )
        # Async windows overlap: they spread over lanes named alike, which Perfetto merges.
        lanes = [u for p, u in by_path.items() if p == (host_track, device_track, ASYNC_TRACK)]
        lanes += [
            uuid
            for uuid in view.slices
            if view.path(uuid) == (host_track, device_track, ASYNC_TRACK) and uuid not in lanes
        ]
        assert sum(view.slices[u] for u in set(lanes)) == device.async_ops.n


def test_hosts_share_one_timeline_and_steps_can_align_them(
    straggler: tuple[Path, object], tmp_path: Path
) -> None:
    run_dir, truth = straggler
    profile = load(run_dir)

    def first_step_ns(align: str) -> dict[str, int]:
        target = tmp_path / f"{align}.pftrace"
        export_perfetto(profile, target, align=align)
        view = read_trace(target, names=False)
        out: dict[str, int] = {}
        for uuid, begin in view.first_begin_ns.items():
            path = view.path(uuid)
            if path[-1] == "Steps":
                host = path[0].removeprefix("host ")
                out[host] = min(begin, out.get(host, begin))
        return out

    clock = first_step_ns("clock")
    steps = first_step_ns("steps")
    hosts = truth.hosts  # type: ignore[attr-defined]
    step_ns = min(truth.step_time_ps) / 1000  # type: ignore[attr-defined]
    # The generator gives each host its own clock: as recorded they lie far apart ...
    assert abs(clock[hosts[1]] - clock[hosts[0]]) > 10 * step_ns
    # ... and aligned by steps, the hosts start their first step together.
    assert abs(steps[hosts[1]] - steps[hosts[0]]) < 0.01 * step_ns


def test_cli_writes_the_trace_atomically(
    straggler: tuple[Path, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, _ = straggler
    target = tmp_path / "out" / "trace.pftrace"
    assert main(["export", str(run_dir), "--format", "perfetto", "-o", str(target)]) == 0
    err = capsys.readouterr().err
    view = read_trace(target, names=False)
    assert f"{sum(view.slices.values()):,} slices" in err
    assert [p.name for p in target.parent.iterdir()] == ["trace.pftrace"]  # no temporary left
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask  # not the temporary's 0600
    assert main(["export", str(run_dir), "--format", "json", "-o", str(target)]) == 2
    assert main(["export", str(run_dir)]) == 2


@pytest.mark.slow
def test_a_profile_of_more_than_a_million_events_exports_completely(tmp_path: Path) -> None:
    from fixtures.large import write_training

    source = tmp_path / "large.xplane.pb"
    written = write_training(source, 40)
    assert written["events"] > 1_000_000
    profile = load(source)
    target = tmp_path / "large.pftrace"
    counts = export_perfetto(profile, target)
    expected = sum(
        d.ops.n + d.modules.n + d.async_ops.n + (d.steps.n if d.steps is not None else 0)
        for d in profile.device_tables
    )
    assert expected == written["events"]
    assert counts.slices == expected
    view = read_trace(target, names=False)
    assert sum(view.slices.values()) == expected
    lines = view.by_line()
    for device in profile.device_tables:
        host_track, device_track = _device_track(view, device.host, device.device)
        assert lines[(host_track, device_track, "XLA Ops")] == device.ops.n


STEP_TRACKS = ("Steps", "Steps (host step markers)", "Steps (dominant module period)")


def _every_line_is_exported(profile: object, view: TraceView) -> dict[tuple[str, ...], int]:
    """Check that each line of the profile with events is in the trace whole: on a track of
    its name under its host (its device's, or its plane's) holding exactly its events. Returns
    the tracks of lines written as recorded: path -> slices."""
    lines: dict[tuple[str, str, str], int] = collections.Counter()
    table = profile.line_table  # type: ignore[attr-defined]
    for row in table.records():
        if row["events"]:
            lines[(row["host"], row["plane"], row["line"])] += row["events"]
    tracks = view.by_line()
    from_tables: dict[tuple[str, str], set[str]] = {}  # (host, plane) -> its table tracks
    for device in profile.device_tables:  # type: ignore[attr-defined]
        names = set(device.ops.strings("line").tolist())
        names |= {MODULES_TRACK, ASYNC_TRACK} | {n for n in STEP_TRACKS}
        from_tables.setdefault((device.host, device.row["plane"]), set()).update(names)
    recorded = {}
    for (host, plane, line), events in lines.items():
        candidates = {
            path: n
            for path, n in tracks.items()
            if len(path) == 3
            and path[0] == f"host {host}"
            and (path[1] == plane or path[1].startswith(f"{plane} ("))
            and path[2] in (line, f"{line} (as recorded)")
        }
        assert events in candidates.values(), (host, plane, line, events, candidates)
        for path, n in candidates.items():
            # Under the plane's own track, or a device's track but no line of its tables.
            on_plane = path[1] == plane
            if n == events and (on_plane or path[2] not in from_tables.get((host, plane), ())):
                recorded[path] = n
    return recorded


def test_every_line_of_a_cpu_capture_is_exported(tmp_path: Path) -> None:
    """The host threads of a real CPU capture are exported whole, one track per thread under
    the host plane, with the names and relative times the file records; the XLA ops of the
    threads are also on the device's op tracks."""
    from tests.conftest import CPU_FIXTURE
    from tpuperf import xspace

    profile = load(CPU_FIXTURE)
    target = tmp_path / "cpu.pftrace"
    counts = export_perfetto(profile, target)
    view = read_trace(target)
    recorded = _every_line_is_exported(profile, view)
    host = profile.hosts[0].host
    space = xspace.decode(CPU_FIXTURE.read_bytes())
    (cpu,) = [p for p in space.planes if p.name == "/host:CPU"]
    names = [d or n for d, n in zip(cpu.metadata.display_names, cpu.metadata.names, strict=True)]
    lanes: dict[tuple[str, ...], list[int]] = {}  # a line's events may nest on several
    for uuid in view.slices:
        lanes.setdefault(view.path(uuid), []).append(uuid)
    starts = {}
    for line in cpu.lines:
        path = (f"host {host}", "/host:CPU", line.name)
        assert recorded[path] == len(line) == counts.recorded[(host, "/host:CPU", line.name)]
        got: collections.Counter[str] = collections.Counter()
        for uuid in lanes[path]:
            got += view.slice_names[uuid]
        rows = cpu.metadata.rows(line.metadata_id)
        assert got == collections.Counter(names[r] for r in rows.tolist())
        first_ns = min(view.first_begin_ns[uuid] for uuid in lanes[path])
        starts[line.name] = (first_ns, int(line.start_ps.min()))
    # Threads keep the host's clock: their first events lie apart as recorded (ns, floored).
    (a, (a_ns, a_ps)), (b, (b_ns, b_ps)) = sorted(starts.items())[:2]
    assert abs((b_ns - a_ns) - (b_ps - a_ps) / 1000) <= 1, (a, b)
    # And every slice is a line's event or a row of the analysis tables.
    device = profile.device_tables[0]
    assert counts.slices == sum(recorded.values()) + sum(
        n for key, n in counts.per_track.items() if key[:2] == (host, device.device)
    )
    assert sum(view.slices.values()) == counts.slices


def test_every_line_of_the_real_profiles_is_exported(tmp_path: Path) -> None:
    """TPU: `XLA TraceMe` under each device, the `/host:CPU` threads under the host; GPU
    (TensorFlow): the `TensorFlow Ops` and `TensorFlow Name Scope` lines under their GPU."""
    from tests.conftest import shared_profile

    tpu = shared_profile("tpu/v6e_4chip_inference.xplane.pb")
    gpu = shared_profile("gpu/v100_8gpu_tf_training.xplane.pb")
    for source, wanted in (
        (tpu, {"XLA TraceMe", "main/3116817"}),
        (gpu, {"TensorFlow Ops", "TensorFlow Name Scope", "python3"}),
    ):
        profile = load(source)
        target = tmp_path / f"{source.stem}.pftrace"
        counts = export_perfetto(profile, target)
        view = read_trace(target, names=False)
        recorded = _every_line_is_exported(profile, view)
        assert wanted <= {path[2] for path in recorded}
        assert sum(recorded.values()) == sum(counts.recorded.values())
        assert sum(view.slices.values()) == counts.slices
    # A TPU's TraceMe events are placed on its device clock, as its ops: inside the capture's
    # device tracks, not hundreds of ms away as its host clock would put them.
    profile = load(tpu)
    target = tmp_path / "tpu.pftrace"
    export_perfetto(profile, target)
    view = read_trace(target, names=False)
    first: dict[tuple[str, ...], int] = {}
    for uuid, ns in view.first_begin_ns.items():
        path = view.path(uuid)
        first[path] = min(ns, first.get(path, ns))
    for path, ns in first.items():
        if path[-1] == "XLA TraceMe":
            modules = first[(*path[:2], MODULES_TRACK)]
            assert abs(ns - modules) < 1_000_000, path  # within 1 ms of the first module


def test_every_chip_has_the_async_windows_the_analysis_uses(tmp_path: Path) -> None:
    """v6e: only TPU:0 records an `Async XLA Ops` line (600 windows); the analysis pairs the
    other chips' copy-start/copy-done ops into 600 windows each, and the trace has them all."""
    from tests.conftest import shared_profile
    from tpuperf.analysis import analyze

    profile = load(shared_profile("tpu/v6e_4chip_inference.xplane.pb"))
    target = tmp_path / "v6e.pftrace"
    export_perfetto(profile, target)
    view = read_trace(target)
    report = analyze(profile, steps=(None, None), analyzers=["collectives"])
    windows = report.results["collectives"].tables["async_windows"]
    for device in range(4):
        host_track, device_track = _device_track(view, profile.host_names[0], device)
        names: collections.Counter[str] = collections.Counter()
        tracks = set()
        for uuid in view.slices:
            path = view.path(uuid)
            if path[:2] == (host_track, device_track) and path[2] in (
                ASYNC_TRACK,
                ASYNC_PAIRED_TRACK,
            ):
                names.update(view.slice_names[uuid])
                tracks.add(path[2])
        assert tracks == {ASYNC_TRACK if device == 0 else ASYNC_PAIRED_TRACK}, device
        # The trace has every window of the capture (one per copy-start); the analysis the
        # ones that start in its steps (all but the last call's six).
        starts = profile.device_tables[device].ops.strings("async_role").eq("start")
        assert sum(names.values()) == int(starts.sum()) == 600
        mine = windows.array("device") == device
        want = collections.Counter(windows.strings("op").take(mine).tolist())
        assert sum(want.values()) == 594
        if device:  # TPU:0's line names its windows by the line's own events
            assert set(names) == set(want), device
            assert all(names[op] >= n for op, n in want.items()), device


def test_a_file_name_that_says_another_format_is_refused(
    straggler: tuple[Path, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, _ = straggler
    for name, said in (
        ("trace.json.gz", "not JSON compressed with gzip"),
        ("trace.json", "not JSON"),
        ("trace.pftrace.gz", "not gzip"),
        ("report.html", "not HTML"),
    ):
        assert main(["export", str(run_dir), "-o", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert said in err and "name it .pftrace (or .perfetto-trace, .pb)" in err, err
        assert not (tmp_path / name).exists()
    # Perfetto's names, and a name without a suffix, are written: the same trace each time.
    slices = set()
    for name in ("t.pftrace", "t.perfetto-trace", "t.pb", "trace"):
        assert main(["export", str(run_dir), "-o", str(tmp_path / name)]) == 0
        slices.add(sum(read_trace(tmp_path / name, names=False).slices.values()))
    capsys.readouterr()
    assert len(slices) == 1 and slices.pop() > 0


def test_a_host_without_devices_has_its_threads_exported(tmp_path: Path) -> None:
    """A run where one host recorded only host threads (no device, no XLA op): its threads
    are in the trace under its own host, whole."""
    from fixtures.generate import US, _host_cpu_plane, _xspace

    run_dir, _ = write_run("collective_training", tmp_path / "run", steps=3)
    dispatch = [(k * 100 * US, 20 * US) for k in range(7)]
    (run_dir / "input-host.xplane.pb").write_bytes(
        _xspace([_host_cpu_plane(0, dispatch)], "input-host")
    )
    profile = load(run_dir)
    assert "input-host" in profile.host_names
    assert "input-host" not in {d.host for d in profile.device_tables}
    target = tmp_path / "trace.pftrace"
    counts = export_perfetto(profile, target)
    view = read_trace(target)
    recorded = _every_line_is_exported(profile, view)
    assert recorded[("host input-host", "/host:CPU", "python3")] == 7
    assert counts.recorded[("input-host", "/host:CPU", "python3")] == 7
    thread = ("host input-host", "/host:CPU", "python3")
    (uuid,) = [u for u in view.slices if view.path(u) == thread]
    assert view.slice_names[uuid] == {"PjitFunction(train_step)": 7}
