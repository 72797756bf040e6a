"""The columnar decoder agrees with protobuf's own parser, event for event.

Every test runs twice: with the C hot loop (tpuperf/_wire_native.c) and with the
numpy decoder that stands in where the C module is not built.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.generate import generate
from tests.conftest import SHARED_PROFILES, shared_profile
from tpuperf import _xspace_schema as pb
from tpuperf import kernels, xspace


@pytest.fixture(autouse=True, params=["native", "numpy"])
def backend(request):  # type: ignore[no-untyped-def]
    if request.param == "native" and not kernels.native_built():
        if os.environ.get("CI"):
            pytest.fail("CI builds the C decoder (tpuperf/_wire_native.c), but it did not import")
        pytest.skip("the C decoder is not built here")
    with kernels.use(request.param):
        yield request.param


REAL = sorted(
    str(p.relative_to(SHARED_PROFILES)) for p in SHARED_PROFILES.glob("*/*.xplane.pb")
) or ["tpu/v6e_4chip_inference.xplane.pb"]


def _plane_stats(ref_plane, names: dict[int, str]) -> dict:  # type: ignore[no-untyped-def]
    """A protobuf plane's own stats by name: refs resolved, stats without a value left out."""
    out = {}
    for stat in ref_plane.stats:
        kind = stat.WhichOneof("value")
        if kind is None:
            continue
        value = getattr(stat, kind)
        out[names.get(stat.metadata_id, str(stat.metadata_id))] = (
            names.get(value, "") if kind == "ref_value" else value
        )
    return out


def _assert_same(data: bytes) -> int:
    """Decode ``data`` both ways and compare every event and stat; return the event count."""
    ours = xspace.decode(data)
    ref = pb.XSpace()
    ref.ParseFromString(data)
    assert [p.name for p in ours.planes] == [p.name for p in ref.planes]
    assert [p.id for p in ours.planes] == [p.id for p in ref.planes]
    assert ours.hostnames == list(ref.hostnames)
    assert ours.errors == list(ref.errors)
    assert ours.warnings == list(ref.warnings)
    events = 0
    for plane, ref_plane in zip(ours.planes, ref.planes, strict=True):
        names = {key: meta.name for key, meta in ref_plane.stat_metadata.items()}
        assert plane.stat_names == names
        assert plane.stats == _plane_stats(ref_plane, names)
        assert sorted(plane.metadata.ids.tolist()) == sorted(ref_plane.event_metadata.keys())
        for key, meta in ref_plane.event_metadata.items():
            row = int(plane.metadata.rows(np.array([key]))[0])
            assert plane.metadata.names[row] == meta.name
            assert plane.metadata.display_names[row] == meta.display_name
        assert [line.name for line in plane.lines] == [line.name for line in ref_plane.lines]
        for line, ref_line in zip(plane.lines, ref_plane.lines, strict=True):
            assert line.timestamp_ns == ref_line.timestamp_ns
            assert line.metadata_id.tolist() == [e.metadata_id for e in ref_line.events]
            assert line.offset_ps.tolist() == [e.offset_ps for e in ref_line.events]
            assert line.duration_ps.tolist() == [e.duration_ps for e in ref_line.events]
            expected_stats = sorted(
                (i, s.metadata_id, s.WhichOneof("value") or "")
                for i, e in enumerate(ref_line.events)
                for s in e.stats
            )
            kinds = {
                xspace.STAT_NONE: "",
                xspace.STAT_DOUBLE: "double_value",
                xspace.STAT_UINT64: "uint64_value",
                xspace.STAT_INT64: "int64_value",
                xspace.STAT_STR: "str_value",
                xspace.STAT_BYTES: "bytes_value",
                xspace.STAT_REF: "ref_value",
            }
            got_stats = sorted(
                zip(
                    line.stats.owner.tolist(),
                    line.stats.metadata_id.tolist(),
                    [kinds[k] for k in line.stats.kind.tolist()],
                    strict=True,
                )
            )
            assert got_stats == expected_stats
            events += len(line)
    return events


@pytest.mark.parametrize("relative", REAL)
def test_real_profiles_decode_like_protobuf(relative: str) -> None:
    data = shared_profile(relative).read_bytes()
    assert _assert_same(data) > 1000


def test_stat_values_match_protobuf(v6e) -> None:
    data = v6e.read_bytes()
    ours = xspace.decode(data)
    ref = pb.XSpace()
    ref.ParseFromString(data)
    plane, ref_plane = ours.planes[0], ref.planes[0]
    names = {k: m.name for k, m in ref_plane.stat_metadata.items()}
    line = next(line for line in plane.lines if line.name == "XLA Ops")
    ref_line = next(line for line in ref_plane.lines if line.name == "XLA Ops")
    expected = [
        next(
            getattr(s, s.WhichOneof("value"))
            for s in e.stats
            if names[s.metadata_id] == "device_duration_ps"
        )
        for e in ref_line.events
    ]
    assert line.stat("device_duration_ps", -1).tolist() == expected
    assert plane.stats["peak_teraflops_per_second"] == 918.0
    flops = plane.metadata_stat("flops", -1)
    by_name = dict(zip(plane.metadata.display_names, flops.tolist(), strict=True))
    assert by_name["all-reduce"] == 1342177280


def test_metadata_values_of_chosen_rows(v6e) -> None:
    data = v6e.read_bytes()
    plane = xspace.decode(data).planes[0]
    ref = pb.XSpace()
    ref.ParseFromString(data)
    ref_plane = ref.planes[0]
    names = {k: m.name for k, m in ref_plane.stat_metadata.items()}
    n = len(plane.metadata.ids)
    rows = np.array([n, *range(n - 1, -1, -3)])  # the extra row (unknown ids), then backwards
    expected = ["none"]
    for row in rows[1:].tolist():
        meta = ref_plane.event_metadata[int(plane.metadata.ids[row])]
        found = [s.str_value for s in meta.stats if names[s.metadata_id] == "hlo_category"]
        expected.append(found[-1] if found else "none")
    assert plane.metadata_values("hlo_category", rows, "none") == expected
    assert any(value != "none" for value in expected)
    program = plane.metadata_values("program_id", rows)
    assert program[0] is None
    assert program[1:] == [plane.metadata_stat("program_id")[r] for r in rows[1:].tolist()]
    assert any(value is not None for value in program)


def _ref_stat(stat, names: dict[int, str]):  # type: ignore[no-untyped-def]
    """A protobuf stat's value as the decoder gives it (refs resolved to the names)."""
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(stat, kind)
    return names.get(value, "") if kind == "ref_value" else value


def test_planes_with_the_same_metadata_bytes_share_one_decoded_metadata() -> None:
    """The chips of one program carry the same event metadata: it is decoded once and shared
    by their planes; a plane whose metadata differs has its own. Every plane's metadata reads
    as protobuf reads that plane's own, names and stat values (text included) alike."""
    data = next(iter(generate("clock_drift").xspaces.values()))
    ours = xspace.decode(data)
    ref = pb.XSpace()
    ref.ParseFromString(data)
    tpu = [(p, r) for p, r in zip(ours.planes, ref.planes, strict=True) if "TPU" in p.name]

    def entries(ref_plane):  # type: ignore[no-untyped-def]
        return sorted((k, m.SerializeToString()) for k, m in ref_plane.event_metadata.items())

    pairs = [(a, b) for a in tpu for b in tpu if a[0] is not b[0]]
    same = [entries(a[1]) == entries(b[1]) for a, b in pairs]
    assert any(same) and not all(same)  # the scenario has both cases
    for ((plane, _), (other, _)), equal in zip(pairs, same, strict=True):
        assert (plane.metadata is other.metadata) == equal
    for plane, ref_plane in tpu:
        names = {k: m.name for k, m in ref_plane.stat_metadata.items()}
        for key, meta in ref_plane.event_metadata.items():
            row = int(plane.metadata.rows(np.array([key]))[0])
            assert plane.metadata.names[row] == meta.name
            for stat in meta.stats:
                value = plane.metadata_values(names[stat.metadata_id], np.array([row]))[0]
                assert value == _ref_stat(stat, names)


_stat = st.fixed_dictionaries(
    {
        "metadata_id": st.integers(0, 50),
        "kind": st.sampled_from(
            ["double_value", "uint64_value", "int64_value", "str_value", "ref_value"]
        ),
        "int": st.integers(-(2**63), 2**63 - 1),
        "text": st.text(max_size=20),
        "double": st.floats(allow_nan=False),
    }
)
_event = st.fixed_dictionaries(
    {
        "metadata_id": st.integers(0, 2**40),
        "offset_ps": st.integers(0, 2**62),
        "duration_ps": st.integers(0, 2**40),
        "stats": st.lists(_stat, max_size=4),
    }
)


def _set_stat(stat, spec) -> None:  # type: ignore[no-untyped-def]
    stat.metadata_id = spec["metadata_id"]
    kind = spec["kind"]
    if kind == "double_value":
        stat.double_value = spec["double"]
    elif kind == "str_value":
        stat.str_value = spec["text"]
    elif kind == "int64_value":
        stat.int64_value = spec["int"]
    else:
        setattr(stat, kind, spec["int"] % 2**64)


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.lists(_event, max_size=30), min_size=1, max_size=3),
    name=st.text(max_size=10),
    others=st.lists(st.text(max_size=6), max_size=5),  # "" leaves the field out
    plane_stats=st.lists(_stat, max_size=5),
    stat_names=st.dictionaries(st.integers(0, 50), st.text(max_size=8), max_size=6),
    notes=st.lists(st.text(max_size=8), max_size=3),
)
def test_random_spaces_decode_like_protobuf(  # type: ignore[no-untyped-def]
    lines, name, others, plane_stats, stat_names, notes
) -> None:
    space = pb.XSpace()
    space.hostnames.append("h")
    space.errors.extend(notes)
    space.warnings.extend(reversed(notes))
    plane = space.planes.add(id=len(notes) - 2, name="/device:TPU:0")
    for key, stat_name in stat_names.items():  # names of plane stats and of refs
        plane.stat_metadata[key].name = stat_name
    for stat_spec in plane_stats:
        _set_stat(plane.stats.add(), stat_spec)
    plane.event_metadata[3].name = "%fusion.1 = f32[2] fusion()"
    plane.event_metadata[3].display_name = name
    for i, other in enumerate(others):  # names in some entries only, ids out of order
        plane.event_metadata[100 - i].id = 100 - i
        plane.event_metadata[100 - i].display_name = other
    for i, events in enumerate(lines):
        line = plane.lines.add(id=i, name=f"line {i}", timestamp_ns=i * 7, display_name=name)
        for spec in events:
            event = line.events.add(
                metadata_id=spec["metadata_id"],
                offset_ps=spec["offset_ps"],
                duration_ps=spec["duration_ps"],
            )
            for stat_spec in spec["stats"]:
                _set_stat(event.stats.add(), stat_spec)
    _assert_same(space.SerializeToString())


def test_truncated_bytes_are_refused(v6e) -> None:
    data = v6e.read_bytes()
    for cut in (len(data) // 3, len(data) - 5):
        with pytest.raises(xspace.DecodeError):
            xspace.decode(data[:cut])


def test_random_bytes_are_refused() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        data = rng.integers(0, 256, size=4096, dtype=np.uint8).tobytes()
        with pytest.raises(xspace.DecodeError):
            xspace.decode(data)
