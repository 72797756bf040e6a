"""Memory against time: how close each program comes to the device's memory, and what the
headroom left could buy back in step time.

Reads each program's memory plan (:mod:`tpuperf.memory_plan`: its peak, split and the buffers live
at the peak) and the op time of the scope table (:mod:`tpuperf.scopes`). Three kinds of advice:

- ``near_oom``: a program whose peak leaves under 10% of the device's memory (or none). It
  saves no time, so it is ranked first whatever the others save: the next change to the model
  may not fit. The evidence names the largest buffers live at the peak with their source
  lines; the fix: shard them, rematerialize them, offload them, donate the inputs.
- ``remat_headroom``: a training step that recomputes checkpointed (remat) forward ops in its
  backward pass (their scope is ``rematted_computation``) while the device has headroom.
  Saving those activations instead costs at most the bytes the recomputed ops define; the
  time it saves is the recomputation's, all of it when those bytes fit in the headroom, the
  share that fits otherwise.
- ``offload_headroom``: a program that offloads buffers to host memory (XLA's host memory
  space) and waits on the copies (``copy-start``/``copy-done`` time on the op line) while the
  device has headroom. Keeping the offloaded buffers that fit (largest first) saves their
  share of the copy time.

Time is per step per device over the analysed step windows, as the other analyzers count it.
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from tpuperf.analyzers import fixes
from tpuperf.analyzers.base import (
    KIND_NEAR_OOM,
    KIND_OFFLOAD_HEADROOM,
    KIND_REMAT_HEADROOM,
    Advice,
    AnalysisConfig,
    Analyzer,
    AnalyzerResult,
    Recommendation,
)

from tpuperf._dataclasses import dataclass

if TYPE_CHECKING:
    from tpuperf.memory_plan import MemoryReport, ProgramMemory
    from tpuperf.timeline import Timeline
    from tpuperf.workload import Workload

NEAR_OOM_PCT = 10.0  # headroom under this share of the device's memory is near out-of-memory
_BUFFERS_CITED = 3
_COPY_OPS = ("copy-start", "copy-done")
_SCOPES_KEPT = 12
_OPS_CITED = 5
_CURVE_POINTS = 400


def _gib(value: float) -> str:
    return f"{value / (1 << 30):.2f} GiB"


class MemoryAnalyzer(Analyzer):
    name = "memory"
    summary = (
        "Peak HBM per program against the device's memory: near-OOM buffers, and the "
        "remat or offload time the headroom could buy back."
    )
    requires: ClassVar[dict[str, list[str]]] = {"ops": ["module", "program_id", "op", "self_ps"]}

    def analyze(self, timeline: Timeline, config: AnalysisConfig) -> AnalyzerResult:
        from tpuperf.memory_plan import plan

        tl = timeline
        result = AnalyzerResult(self.name)
        report = plan(tl.profile)
        result.notes.extend(report.notes)
        if not report.programs:
            return result
        result.metrics = _metrics(report)
        step_ms = tl.mean_window_ps / 1e9
        times = _program_times(tl)
        for program in report.programs:
            capacity = report.capacity_of(program)
            if capacity is None:
                continue
            headroom = capacity - program.peak_bytes
            if 100.0 * headroom / capacity < NEAR_OOM_PCT:
                result.recommendations.append(
                    _near_oom(program, capacity, headroom, fixes.workload_of(tl))
                )
                continue
            spent = times.get((program.module, program.program_id), _Times())
            advice = []
            if program.remat_bytes and spent.remat_ms > 0:
                advice.append(_remat(program, headroom, spent))
            if program.offloaded_bytes and spent.copy_ms > 0:
                advice.append(_offload(program, headroom, spent, fixes.workload_of(tl)))
            result.recommendations += [
                _spend_headroom(program, a, step_ms, tl.has_steps) for a in advice
            ]
        return result


def _metrics(report: MemoryReport) -> dict[str, Any]:
    from tpuperf.memory_plan import by_scope

    largest = report.programs[0]
    capacity = report.capacity_of(largest)
    headroom = report.headroom(largest.device_kind)
    return {
        "device_kind": largest.device_kind,
        "capacity_bytes": capacity,
        "capacity_source": report.capacity_source.get(largest.device_kind, "unknown"),
        "peak_bytes": largest.peak_bytes,
        "peak_program": largest.module,
        "headroom_bytes": headroom,
        "headroom_pct": 100.0 * headroom / capacity if capacity and headroom is not None else None,
        "programs": len(report.programs),
        # The largest program, for the report's memory section.
        "split_bytes": dict(largest.split),
        "live_peak_bytes": largest.live_peak_bytes,
        "by_scope": by_scope(largest)[:_SCOPES_KEPT],
        "curve_bytes": _sampled(largest.heap_bytes),
        "schedule_events": largest.schedule_events,
    }


def _sampled(values: tuple[int, ...]) -> list[int]:
    """At most _CURVE_POINTS values, each the largest of its stretch (the peak stays)."""
    if len(values) <= _CURVE_POINTS:
        return list(values)
    width = -(-len(values) // _CURVE_POINTS)
    return [max(values[i : i + width]) for i in range(0, len(values), width)]


@dataclass
class _Times:
    """A program's recomputation and offload copy time (ms per step per device) and ops."""

    remat_ms: float = 0.0
    copy_ms: float = 0.0
    remat_ops: list[str] = field(default_factory=list)
    copy_ops: list[str] = field(default_factory=list)


def _program_times(tl: Timeline) -> dict[tuple[str, str], _Times]:
    """(module, program id) -> its recomputation and offload copy time per step per device, over
    the step windows analyze counts (the other analyzers' windows), most time first."""
    from tpuperf import scopes
    from tpuperf.memory_plan import is_remat

    data = scopes.scopes(tl.profile)
    if not data.n:
        return {}
    times = scopes.scope_time(tl.profile, timeline=tl)
    table = data.table
    modules = table.strings("module").tolist()
    programs = table.strings("program_id").tolist()
    ops = table.strings("op").tolist()
    name_scopes = table.strings("name_scope").tolist()
    out: dict[tuple[str, str], _Times] = {}
    for row in sorted(range(data.n), key=lambda r: -int(times.time_ps[r])):
        time_ps = int(times.time_ps[row])
        if not time_ps:
            continue
        entry = out.setdefault((modules[row], programs[row]), _Times())
        ms = time_ps / times.windows / 1e9
        if is_remat(scopes.parse_path(name_scopes[row])):
            entry.remat_ms += ms
            entry.remat_ops.append(ops[row])
        if scopes.op_base(ops[row]) in _COPY_OPS:
            entry.copy_ms += ms
            entry.copy_ops.append(ops[row])
    return out


def _spend_headroom(
    program: ProgramMemory, advice: Advice, step_ms: float, has_steps: bool
) -> Recommendation:
    """``advice`` to spend ``program``'s free device memory (remat or offload): medium
    confidence with steps, else low; the first ops cited; its values after the program's name
    and id."""
    identity = {"program": program.module, "program_id": program.program_id}
    cited = replace(advice, ops=advice.ops[:_OPS_CITED], values={**identity, **advice.values})
    return cited.recommendation("memory", step_ms, "medium" if has_steps else "low")


def _near_oom(
    program: ProgramMemory, capacity: int, headroom: int, workload: Workload
) -> Recommendation:
    cited = [b for b in program.buffers[:_BUFFERS_CITED]]
    listed = "; ".join(
        f"{b.op} {_gib(b.size_bytes)} {b.shape} ({b.scope}, {b.pass_}"
        + (f", {b.source})" if b.source else ")")
        for b in cited
    )
    pct = 100.0 * headroom / capacity
    return Recommendation(
        analyzer="memory",
        kind=KIND_NEAR_OOM,
        title=(
            f"{program.module} peaks at {_gib(program.peak_bytes)} of {_gib(capacity)} device "
            f"memory: {pct:.1f}% headroom"
        ),
        evidence=(
            f"{program.module} holds {program.peak_bytes} bytes at its peak "
            f"(temporaries {program.split['temporary']}, parameters "
            f"{program.split['parameter']}, outputs {program.split['output']}); "
            f"{len(program.buffers)} buffers are live at the peak, the largest: {listed}"
        ),
        fix=fixes.near_oom(workload),
        est_savings_ms=0.0,
        est_savings_pct=0.0,
        confidence="high",
        ops=[b.op for b in cited],
        values={
            "program": program.module,
            "program_id": program.program_id,
            "peak_bytes": program.peak_bytes,
            "capacity_bytes": capacity,
            "headroom_bytes": headroom,
            "headroom_pct": pct,
            "buffers": [b.to_dict() for b in cited],
        },
    )


def _remat(program: ProgramMemory, headroom: int, spent: _Times) -> Advice:
    remat_ms = spent.remat_ms
    fits = min(1.0, headroom / program.remat_bytes)
    savings = remat_ms * fits
    kept = min(program.remat_bytes, headroom)
    return Advice(
        kind=KIND_REMAT_HEADROOM,
        title=(
            f"{program.module} recomputes checkpointed activations for {remat_ms:.3f} ms a "
            f"step while {_gib(headroom)} of device memory is free"
        ),
        evidence=(
            f"ops under rematted_computation take {remat_ms:.3f} ms per step; the buffers they "
            f"define total {program.remat_bytes} bytes, and the device has {headroom} bytes of "
            f"headroom above the {program.peak_bytes}-byte peak: saving "
            f"{kept} bytes of them instead buys back {savings:.3f} ms per step"
        ),
        fix={
            "tpu": (
                "Save the activations instead of recomputing them: drop jax.checkpoint "
                "(nn.remat) on this block, or give it a policy that saves them "
                "(jax.checkpoint(f, policy=jax.checkpoint_policies.dots_saveable), or "
                "save_only_these_names with jax.ad_checkpoint.checkpoint_name)"
            ),
            "gpu": (
                "Drop jax.checkpoint (nn.remat) on this block or use a saving policy "
                "(jax.checkpoint_policies.dots_saveable)"
            ),
        },
        savings_ms=savings,
        ops=spent.remat_ops,
        values={
            "remat_ms_per_step": remat_ms,
            "remat_bytes": program.remat_bytes,
            "headroom_bytes": headroom,
            "bytes_to_keep": kept,
        },
    )


def _offload(program: ProgramMemory, headroom: int, spent: _Times, workload: Workload) -> Advice:
    copy_ms = spent.copy_ms
    total = sum(program.offloaded_bytes)
    kept: list[int] = []
    room = headroom
    for size in program.offloaded_bytes:  # largest first
        if size <= room:
            kept.append(size)
            room -= size
    kept_bytes = sum(kept)
    savings = copy_ms * kept_bytes / total if total else 0.0
    return Advice(
        kind=KIND_OFFLOAD_HEADROOM,
        title=(
            f"{program.module} offloads {_gib(total)} to host memory and waits "
            f"{copy_ms:.3f} ms a step on the copies while {_gib(headroom)} of device memory "
            "is free"
        ),
        evidence=(
            f"{len(program.offloaded_bytes)} buffers ({total} bytes) live in host memory; "
            f"copy-start/copy-done take {copy_ms:.3f} ms per step on the op line; "
            f"{len(kept)} of them ({kept_bytes} bytes) fit in the {headroom} bytes of headroom "
            f"above the {program.peak_bytes}-byte peak: keeping them on the device buys back "
            f"{savings:.3f} ms per step"
        ),
        fix=fixes.keep_offloaded(workload),
        savings_ms=savings,
        ops=spent.copy_ops,
        values={
            "copy_ms_per_step": copy_ms,
            "offloaded_bytes": total,
            "offloaded_buffers": len(program.offloaded_bytes),
            "bytes_to_keep": kept_bytes,
            "buffers_to_keep": len(kept),
            "headroom_bytes": headroom,
        },
    )
