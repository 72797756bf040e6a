"""Per-device facts of the ``coll_*`` captures, recomputed from their raw events.

Independent of tpuperf's decoder and timeline: the XSpace is parsed with the protobuf runtime
(tpuperf/_xspace_schema.py's message classes), ops are the host-thread events with an
``hlo_op`` stat, split by their ``device_ordinal`` stat; an op is a collective when its name is
one of the collectives of the compiled HLO (the capture's truth file, from
``.lower(...).compile().as_text()``). Time shares are unions of intervals over the step
windows (step markers: events with ``step_num``), the first step left out as tpuperf's
default warm-up does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The interval algebra of the generated profiles' truth: like it, apart from tpuperf's.
from fixtures.generate import _intersect, _union

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "data"
WARMUP_STEPS = 1


@dataclass
class Device:
    ops: list[tuple[int, int, str]] = field(default_factory=list)  # start, end, hlo_op
    waits: list[tuple[int, int]] = field(default_factory=list)  # Rendezvous inside a collective


@dataclass
class Capture:
    truth: dict[str, Any]
    devices: dict[int, Device]
    steps: dict[int, tuple[int, int]]  # step -> (start_ps, end_ps)

    @property
    def selected(self) -> list[int]:
        return sorted(self.steps)[WARMUP_STEPS:]

    def shares(self) -> dict[str, float]:
        """compute, exposed collective and idle in percent of the step windows, per device
        then averaged over devices (DESIGN.md's definitions)."""
        names = set(self.truth["collectives"])
        out: dict[str, list[float]] = {"compute": [], "exposed_collective": [], "idle": []}
        for device in self.devices.values():
            comp = _union([(s, e) for s, e, op in device.ops if op not in names])
            coll = _union([(s, e) for s, e, op in device.ops if op in names])
            busy = _union([(s, e) for s, e, _ in device.ops])
            window = compute = exposed = idle = 0
            for step in self.selected:
                lo, hi = self.steps[step]
                window += hi - lo
                c = _measure(comp, lo, hi)
                compute += c
                exposed += _measure(coll, lo, hi) - _measure(_intersect(coll, comp), lo, hi)
                idle += (hi - lo) - _measure(busy, lo, hi)
            out["compute"].append(100.0 * compute / window)
            out["exposed_collective"].append(100.0 * exposed / window)
            out["idle"].append(100.0 * idle / window)
        return {k: sum(v) / len(v) for k, v in out.items()}

    def last_arrivals(self, op: str) -> dict[int, int]:
        """How often each device starts ``op`` last, over the selected steps."""
        counts: dict[int, int] = {}
        for step in self.selected:
            lo, hi = self.steps[step]
            starts = {
                number: min(
                    (s for s, _, name in d.ops if name == op and lo <= s < hi), default=None
                )
                for number, d in self.devices.items()
            }
            known = {k: v for k, v in starts.items() if v is not None}
            if len(known) == len(self.devices):
                last = max(known, key=lambda k: known[k])
                counts[last] = counts.get(last, 0) + 1
        return counts


def load(name: str) -> Capture:
    from tpuperf._xspace_schema import XSpace

    truth = json.loads((DATA / f"{name}.truth.json").read_text())
    space = XSpace.FromString((DATA / f"{name}.xplane.pb").read_bytes())
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
    devices: dict[int, Device] = {}
    steps: dict[int, list[int]] = {}
    for line in plane.lines:
        ops: list[tuple[int, int, int, str]] = []
        waits: list[tuple[int, int]] = []
        for event in line.events:
            start = line.timestamp_ns * 1000 + event.offset_ps
            end = start + event.duration_ps
            stats = {stat_names[s.metadata_id]: s for s in event.stats}
            if "step_num" in stats:
                span = steps.setdefault(stats["step_num"].int64_value, [start, end])
                span[0], span[1] = min(span[0], start), max(span[1], end)
            if "hlo_op" in stats and "device_ordinal" in stats:
                hlo = stats["hlo_op"]
                name = (
                    hlo.str_value
                    if hlo.WhichOneof("value") == "str_value"
                    else plane.stat_metadata[hlo.ref_value].name
                )
                ops.append((start, end, stats["device_ordinal"].int64_value, name))
            elif plane.event_metadata[event.metadata_id].name == "Rendezvous":
                waits.append((start, end))
        for start, end, ordinal, name in ops:
            devices.setdefault(ordinal, Device()).ops.append((start, end, name))
        for start, end in waits:
            owner = next((o for s, e, o, _ in ops if s <= start and end <= e), None)
            if owner is not None:
                devices[owner].waits.append((start, end))
    return Capture(truth, devices, {k: (v[0], v[1]) for k, v in steps.items()})


def _measure(intervals: list[tuple[int, int]], lo: int, hi: int) -> int:
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in intervals)
