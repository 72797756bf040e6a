"""XProf's own computations, redone on the raw file where tpuperf's tables do not keep what
XProf reads (issue 23): its GPU input-pipeline verdict (step groups, correlation ids), its
TPU duty cycle (host-clock op spans) and its TPU hardware-counter utilization (counter
events). Each as XProf 2.24.2 computes it.

**Input pipeline on GPU.** XProf (openxla/xprof: ``xplane_to_step_events.cc``, ``event_span.cc``,
``step_events_to_steps_db.cc``, ``op_stats_to_input_pipeline_analysis.cc``) builds the GPU
step breakdown from the *device* planes only (host events join only on a host-only profile):

- **Steps** are XProf's step groups (``group_id``). A GPU plane marks a group's step with each
  event of its derived ``Steps`` line (line id 0xdeadbeef), and XProf adds markers it derives
  itself: the plane's grouped events of its other lines in time order (earlier first, longer
  first at one instant), each run of one group's events spanned by one marker (even a group
  no ``Steps`` line names gets its step so). A step's time is the longest marker of its group
  on any GPU.
- **Events** are the events of every other, non-derived line of every GPU plane that carry both
  ``correlation_id`` and ``group_id``, a device keeping only the groups it has markers for. By
  name: ``MemcpyHToD...`` is host-to-device (input), ``MemcpyDToH...`` output, ``MemcpyDToD...``
  device-to-device, ``nccl...`` collectives, anything else device compute (16-bit where its
  ``tensor_shapes``, else its name, says ``half``; ``fp16`` in the name too).
- All GPUs' events of a group are laid over each other and each instant goes to the highest
  priority type present (XProf's EventType order: compute over output over device-to-device over
  collectives over input), swept over the event boundaries as XProf sweeps them (at one instant
  ends before starts, higher types first). Each piece counts as far as it lies in the step;
  the step time no event covers is **All Others**. A step with no device compute is dropped.
- **Verdict** over all steps' totals: input (host-to-device) at least 20% of the step time:
  HIGHLY input-bound; 5%: MODERATELY; else All Others at least 3%: POTENTIALLY input-bound;
  else NOT input-bound. The sentence is XProf's, percentages to one decimal.

XProf groups a raw capture's events itself before this (``group_id`` from its step markers);
tpuperf does not: a file whose GPU planes carry no step groups gives no breakdown.

**TPU duty cycle** (``xplane_to_op_stats.cc`` ``ConstructDutyCycleTracker``,
``duty_cycle_combiner.h``, ``op_stats_to_overview_page.cc``): per TPU plane, the events of its
``XLA Ops`` line are active time unless their ``hlo_category`` is an off-duty one (infeed,
outfeed, host send/recv and their dones, megacore fusion), and together with its
``XLA Modules`` line they span its total time, all on the *host clock* (an event's own offset
and duration, not its ``device_offset_ps``/``device_duration_ps``, which tpuperf's tables use).
Cores of one chip (``core_details``' ``local_chip_id``) are united, active time and span alike;
a plane without core details counts alone. Duty cycle = active / (active + idle) summed over
the chips.

**TPU hardware counters** (``xplane_to_utilization_viewer.cc``,
``tpu_generic_utilization_utils.cc``, the CLI's ``get_utilization_viewer`` and
``check_host_boundness``): on a v6e plane (``device_type_string`` "TPU v6 Lite") with a
``device_id`` stat, each line whose events carry ``performance_counter_id`` and
``counter_value`` is one sample. Per sample with tensor-core cycles: MXU idleness = cycles with
no MXU busy / cycles; HBM = 32 bytes per read/write beat of its 32 controllers over 1525.5 GiB/s
for cycles / 1.75 GHz; ICI read (write) = 128 bytes per flit over 294.9 GB/s for cycles / 1 GHz.
The CLI reads device 0 only and weights samples by their cycles (sum over sum).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tpuperf import kernels
from tpuperf.intervals import union
from tpuperf.kernels.wire import read_varint

if TYPE_CHECKING:
    from tpuperf.xspace import Line, Plane, Space

# XProf's EventType values (event_span.h): a higher value wins where events overlap.
UNKNOWN_TIME = 0
HOST_TO_DEVICE = 80
DEVICE_COLLECTIVES = 100
DEVICE_TO_DEVICE = 120
DEVICE_TO_HOST = 130
DEVICE_COMPUTE_32 = 140
DEVICE_COMPUTE_16 = 150
_TYPES = 180  # above XProf's last type (DEVICE_WAIT_HOST = 170)

# XProf's derived lines of a GPU plane: 0xdeadbeef (as a 32-bit int) is the Steps line, the
# ids after it hold names, ops and modules derived from the streams.
STEPS_LINE_ID = -559038737
_DERIVED_IDS = range(STEPS_LINE_ID, STEPS_LINE_ID + 16)

# The step-time categories XProf's input-pipeline page reports, and the event types in each.
CATEGORIES = {
    "device_compute_ms": (DEVICE_COMPUTE_16, DEVICE_COMPUTE_32),
    "device_to_device_ms": (DEVICE_TO_DEVICE,),
    "device_collectives_ms": (DEVICE_COLLECTIVES,),
    "host_compute_ms": (),
    "kernel_launch_ms": (),
    "input_ms": (HOST_TO_DEVICE,),
    "output_ms": (DEVICE_TO_HOST,),
    "compile_ms": (),
    "all_others_ms": (UNKNOWN_TIME,),
}
# XProf's thresholds (op_stats_to_input_pipeline_analysis.cc), percent of the step time.
HIGHLY_INPUT_BOUND_PCT = 20.0
MODERATELY_INPUT_BOUND_PCT = 5.0
ALL_OTHERS_PCT = 3.0


def _event_type(name: str, shapes: str) -> int:
    low = name.lower()
    if low.startswith("memcpyhtod"):
        return HOST_TO_DEVICE
    if low.startswith("memcpydtoh"):
        return DEVICE_TO_HOST
    if low.startswith("memcpydtod"):
        return DEVICE_TO_DEVICE
    if low.startswith("nccl"):
        return DEVICE_COLLECTIVES
    if shapes:
        return DEVICE_COMPUTE_16 if "half" in shapes else DEVICE_COMPUTE_32
    return DEVICE_COMPUTE_16 if ("half" in name or "fp16" in name) else DEVICE_COMPUTE_32


def _groups(line: Line) -> np.ndarray:
    from tpuperf.xspace import MISSING

    return np.asarray(line.stat("group_id", MISSING), dtype=np.int64)


def _plane_steps(
    plane: Plane,
) -> tuple[dict[int, list[tuple[int, int]]], dict[int, list[tuple[int, int, int]]]]:
    """One GPU plane's step markers and typed events, by group (XProf keeps only the groups
    that have both on this plane)."""
    from tpuperf.xspace import MISSING

    markers: dict[int, list[tuple[int, int]]] = {}
    events: dict[int, list[tuple[int, int, int]]] = {}
    grouped: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # for the derived markers
    for line in plane.lines:
        if not len(line):
            continue
        starts = np.asarray(line.start_ps, dtype=np.int64)
        ends = starts + np.asarray(line.duration_ps, dtype=np.int64)
        groups = _groups(line)
        if line.id == STEPS_LINE_ID:
            for g, s, e in zip(groups.tolist(), starts.tolist(), ends.tolist(), strict=True):
                if g != MISSING:
                    markers.setdefault(g, []).append((s, e))
            continue
        if line.id in _DERIVED_IDS:
            continue
        has_group = groups != MISSING
        grouped.append((starts[has_group], ends[has_group], groups[has_group]))
        correlation = np.asarray(line.stat("correlation_id", MISSING), dtype=np.int64)
        kept = np.flatnonzero((groups != MISSING) & (correlation != MISSING))
        if not len(kept):
            continue
        rows = plane.metadata.rows(line.metadata_id[kept])
        names = [plane.metadata.names[r] if r >= 0 else "" for r in rows.tolist()]
        shapes = line.stat("tensor_shapes", "")
        for i, name in zip(kept.tolist(), names, strict=True):
            shape = shapes[i] if isinstance(shapes[i], str) else ""
            events.setdefault(int(groups[i]), []).append(
                (_event_type(name, shape), int(starts[i]), int(ends[i]))
            )
    for group, begin, end in _derived_markers(grouped):
        markers.setdefault(group, []).append((begin, end))
    return {g: m for g, m in markers.items() if g in events}, {
        g: e for g, e in events.items() if g in markers
    }


def _derived_markers(
    grouped: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> list[tuple[int, int, int]]:
    """XProf's derived step markers of one plane: (group, begin, end) spanning each run of
    one group's events in time order."""
    if not grouped:
        return []
    starts, ends, groups = (np.concatenate(c) for c in zip(*grouped, strict=True))
    order = np.lexsort((starts - ends, starts))  # earlier first, then longer first
    found: list[tuple[int, int, int]] = []
    for group, start, end in zip(
        groups[order].tolist(), starts[order].tolist(), ends[order].tolist(), strict=True
    ):
        if found and found[-1][0] == group:
            last = found[-1]
            found[-1] = (group, min(last[1], start), max(last[2], end))
        else:
            found.append((group, start, end))
    return found


def _breakdown(events: list[tuple[int, int, int]], begin: int, end: int) -> np.ndarray:
    """Picoseconds of the step [begin, end) per event type (index = XProf's type value), the
    events made non-overlapping by priority as XProf's sweep does it."""
    types = np.array([t for t, _, _ in events], dtype=np.int64)
    times = np.concatenate([[s for _, s, _ in events], [e for _, _, e in events]])
    kinds = np.concatenate([types, types])
    is_start = np.concatenate([np.ones(len(events), bool), np.zeros(len(events), bool)])
    order = np.lexsort((-kinds, is_start, times))
    times, kinds, is_start = times[order], kinds[order], is_start[order]
    count = [0] * _TYPES
    current = UNKNOWN_TIME
    owner = np.empty(len(times), dtype=np.int64)
    for i, (kind, start) in enumerate(zip(kinds.tolist(), is_start.tolist(), strict=True)):
        if start:
            count[kind] += 1
            current = max(current, kind)
        else:
            count[kind] -= 1
            if kind == current and count[kind] == 0:
                current = next((k for k in range(kind - 1, -1, -1) if count[k] > 0), 0)
        owner[i] = current
    lows = np.clip(times[:-1], begin, end)
    highs = np.clip(times[1:], begin, end)
    by_type = np.bincount(owner[:-1], weights=highs - lows, minlength=_TYPES).astype(np.int64)
    covered = int(by_type.sum())
    if covered < end - begin:
        by_type[UNKNOWN_TIME] += end - begin - covered
    return by_type


def _one_digit(value: float) -> str:
    return f"{value:.1f}"


def verdict(input_pct: float, all_others_pct: float) -> tuple[str, str]:
    """XProf's input classification and sentence for these shares of the step time."""
    if input_pct >= HIGHLY_INPUT_BOUND_PCT:
        return "host", (
            f"Your program is HIGHLY input-bound because {_one_digit(input_pct)}% of the total "
            "step time sampled is waiting for input. Therefore, you should first focus on "
            "reducing the input time."
        )
    if input_pct >= MODERATELY_INPUT_BOUND_PCT:
        return "both", (
            f"Your program is MODERATELY input-bound because {_one_digit(input_pct)}% of the "
            "total step time sampled is waiting for input. Therefore, you would need to reduce "
            "both the input time and other time."
        )
    if all_others_pct >= ALL_OTHERS_PCT:
        return "both", (
            f"Your program is POTENTIALLY input-bound because {_one_digit(all_others_pct)}% of "
            "the total step time sampled is spent on 'All Others' time (which could be due to "
            "I/O or Python execution or both)."
        )
    return "device", (
        f"Your program is NOT input-bound because only {_one_digit(input_pct)}% of the total "
        "step time sampled is waiting for input. Therefore, you should focus on reducing other "
        "time."
    )


def input_pipeline(space: Space) -> dict[str, Any] | None:
    """XProf's GPU step breakdown and input verdict (see the module docstring), or None where
    XProf would not take its GPU path (TPU planes, no GPU planes) or the GPU planes carry no
    step groups."""
    planes = [p for p in space.planes if p.name.startswith("/device:GPU:")]
    if not planes or any(p.name.startswith("/device:TPU:") for p in space.planes):
        return None
    markers: dict[int, list[tuple[int, int]]] = {}
    events: dict[int, list[tuple[int, int, int]]] = {}
    for plane in planes:
        plane_markers, plane_events = _plane_steps(plane)
        for g, found in plane_markers.items():
            markers.setdefault(g, []).extend(found)
        for g, typed in plane_events.items():
            events.setdefault(g, []).extend(typed)
    steps = []
    for group in sorted(markers):
        begin, end = max(markers[group], key=lambda m: m[1] - m[0])
        by_type = _breakdown(events[group], begin, end)
        if not (by_type[DEVICE_COMPUTE_16] or by_type[DEVICE_COMPUTE_32]):
            continue  # not a well-formed step
        step: dict[str, Any] = {"step": group, "step_time_ms": (end - begin) / 1e9}
        for category, kinds in CATEGORIES.items():
            step[category] = sum(int(by_type[k]) for k in kinds) / 1e9
        steps.append(step)
    if not steps:
        return None
    total = sum(s["step_time_ms"] for s in steps)
    input_pct = 100.0 * sum(s["input_ms"] for s in steps) / total
    all_others_pct = 100.0 * sum(s["all_others_ms"] for s in steps) / total
    classification, conclusion = verdict(input_pct, all_others_pct)
    return {
        "number_of_steps": len(steps),
        "steptime_ms_average": total / len(steps),
        "average_ms": {c: sum(s[c] for s in steps) / len(steps) for c in CATEGORIES},
        "input_percent": input_pct,
        "all_others_percent": all_others_pct,
        "input_classification": classification,
        "input_conclusion": conclusion,
        "steps": steps,
    }


# --------------------------------------------------------------------------- TPU duty cycle

_OFF_DUTY = frozenset(
    (
        "infeed",
        "outfeed",
        "host send",
        "host send-done",
        "host recv",
        "host recv-done",
        "megacore fusion",
    )
)


def _local_chip_id(core_details: Any) -> int | None:
    """``local_chip_id`` (field 4) of a serialized CoreDetails; None without the stat. An empty
    message parses as chip 0, as in XProf."""
    if not isinstance(core_details, bytes):
        return None
    pos, chip = 0, 0
    while pos < len(core_details):
        key, pos = read_varint(core_details, pos, len(core_details))
        if key & 7 == 0:
            value, pos = read_varint(core_details, pos, len(core_details))
            if key >> 3 == 4:
                chip = value
        elif key & 7 == 2:
            length, pos = read_varint(core_details, pos, len(core_details))
            pos += length
        else:
            return None
    return chip


def duty_cycle(space: Space) -> dict[str, Any] | None:
    """XProf's TPU duty cycle (see the module docstring): ``busy_time_ps``, ``idle_time_ps``
    and ``duty_cycle_percent``; None without TPU op lines."""
    chips: dict[tuple[str, int], tuple[list[np.ndarray], list[np.ndarray], list[int], list[int]]]
    chips = {}
    for index, plane in enumerate(space.planes):
        if not plane.name.startswith("/device:TPU:"):
            continue
        chip = _local_chip_id(plane.stats.get("core_details"))
        key = ("chip", chip) if chip is not None else ("plane", index)
        active_starts, active_ends, lows, highs = chips.setdefault(key, ([], [], [], []))
        for line in plane.lines:
            if line.name not in ("XLA Ops", "XLA Modules") or not len(line):
                continue
            # the events' times and metadata alone: no stats decoded, the file's pages let go
            events = line.int_events(())
            starts = events.start_ps(line.timestamp_ns)
            ends = starts + events.duration_ps
            lows.append(int(starts.min()))
            highs.append(int(ends.max()))
            if line.name == "XLA Ops":
                category = plane.metadata_stat("hlo_category", "")
                # Off duty by metadata row, the row past the last (an unknown one) on duty
                off_row = np.fromiter(
                    (c in _OFF_DUTY for c in category), dtype=bool, count=len(category)
                )
                if off_row.any():  # (else every op is on duty: no op's row is looked up)
                    rows = plane.metadata.rows(events.metadata_id, unknown=len(category))
                    on = ~np.append(off_row, False)[rows]
                    starts, ends = starts[on], ends[on]
                active_starts.append(starts)
                active_ends.append(ends)
    busy = idle = 0
    for active_starts, active_ends, lows, highs in chips.values():
        if not lows:
            continue
        # Each op line in time order, as a rule: merged as they are read, no sort of them all
        active = kernels.union_length(list(zip(active_starts, active_ends, strict=True)))
        if active is None:  # a line out of order
            active = union(np.concatenate(active_starts), np.concatenate(active_ends)).total
        busy += active
        idle += max(highs) - min(lows) - active
    if busy + idle == 0:
        return None
    return {
        "busy_time_ps": busy,
        "idle_time_ps": idle,
        "duty_cycle_percent": 100.0 * busy / (busy + idle),
    }


# --------------------------------------------------------------------------- TPU counters

# TPU v6e counter ids (openxla/xprof xprof/utils/tpu_counter_ids_v6e.h): the tensor core's
# cycles and cycles with no MXU busy; the HBM controllers' read responses (two per
# controller) and write and partial-write requests (four), 32 controllers 2**21 ids apart from
# the first controller's; the ICI router's read and write request insertions.
V6E_CYCLES = 3257466888
V6E_MXU_BUSY_0 = 3257467400
_V6E_HBM_FIRST = 3019980856
V6E_HBM_READ = tuple(_V6E_HBM_FIRST + k * 2**21 + o for k in range(32) for o in (0, 8))
V6E_HBM_WRITE = tuple(
    _V6E_HBM_FIRST + k * 2**21 + o for k in range(32) for o in (-32, -24, -16, -8)
)
V6E_ICI_READ = (2953257136, 2953257192)
V6E_ICI_WRITE = (2953257248, 2953257304)
_V6E_HZ = 1.75e9
_V6E_PEAK_HBM_BPS = 1525.5 * 2**30
_HBM_BYTES_PER_BEAT = 32
_ICI_BYTES_PER_FLIT = 128
_PEAK_ICI_BPS = 294947368421.0526  # over cycles counted at 1 GHz, as XProf approximates


def _counter_samples(plane: Plane) -> list[dict[int, int]]:
    """Each line's counters (id -> value) of a plane: event stats, else their metadata's."""
    from tpuperf.xspace import MISSING

    samples = []
    ids_by_row = plane.metadata_stat("performance_counter_id", MISSING)
    values_by_row = plane.metadata_stat("counter_value", MISSING)
    for line in plane.lines:
        if not len(line):
            continue
        ids = np.asarray(line.stat("performance_counter_id", MISSING), dtype=np.int64)
        values = np.asarray(line.stat("counter_value", MISSING))
        rows = plane.metadata.rows(line.metadata_id)
        sample = {}
        for i, (counter, value) in enumerate(zip(ids.tolist(), values.tolist(), strict=True)):
            row = int(rows[i])
            if counter == MISSING and row >= 0:
                counter = int(np.asarray(ids_by_row)[row])
            if value == MISSING and row >= 0:
                value = np.asarray(values_by_row)[row].item()
            if counter not in (MISSING, 0) and value != MISSING:
                sample[counter] = int(value)
        if sample:
            samples.append(sample)
    return samples


def utilization(space: Space, device: int = 0) -> dict[str, float] | None:
    """XProf's counter-based utilization of TPU v6e ``device`` (see the module docstring):
    ``mxu_idleness_percent``, ``hbm_bandwidth_utilization_percent``,
    ``ici_read_utilization_percent``, ``ici_write_utilization_percent``; None where the
    device has no v6e counter samples with cycles."""
    totals = np.zeros(7)  # idle cycles, cycles, hbm bytes, hbm peak, ici rd, ici wr, ici peak
    for plane in space.planes:
        if not plane.name.startswith("/device:TPU:"):
            continue
        if plane.stats.get("device_id") != device:
            continue
        if "TPU v6 Lite" not in str(plane.stats.get("device_type_string", "")):
            continue
        for sample in _counter_samples(plane):
            cycles = sample.get(V6E_CYCLES, 0)
            if not cycles:
                continue
            beats = sum(sample.get(c, 0) for c in (*V6E_HBM_READ, *V6E_HBM_WRITE))
            totals += [
                sample.get(V6E_MXU_BUSY_0, 0),
                cycles,
                beats * _HBM_BYTES_PER_BEAT,
                _V6E_PEAK_HBM_BPS * cycles / _V6E_HZ,
                sum(sample.get(c, 0) for c in V6E_ICI_READ) * _ICI_BYTES_PER_FLIT,
                sum(sample.get(c, 0) for c in V6E_ICI_WRITE) * _ICI_BYTES_PER_FLIT,
                _PEAK_ICI_BPS * cycles / 1e9,
            ]
    idle, cycles, hbm, hbm_peak, ici_read, ici_write, ici_peak = totals.tolist()
    if not cycles:
        return None
    return {
        "mxu_idleness_percent": 100.0 * idle / cycles,
        "hbm_bandwidth_utilization_percent": 100.0 * hbm / hbm_peak,
        "ici_read_utilization_percent": 100.0 * ici_read / ici_peak,
        "ici_write_utilization_percent": 100.0 * ici_write / ici_peak,
    }
