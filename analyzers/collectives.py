"""collectives: exposed collective time by kind, async overlap, exposed async copies."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from tpuperf.analyzers import fixes
from tpuperf.analyzers.base import (
    KIND_AVOIDABLE_COLLECTIVE,
    KIND_COLLECTIVE_BYTES,
    KIND_COLLECTIVE_WAIT,
    KIND_DCN_STALL,
    KIND_EXPOSED_ASYNC_COPY,
    KIND_EXPOSED_COLLECTIVE,
    KIND_REDUCE_COPIES,
    Advice,
    AnalysisConfig,
    Analyzer,
    AnalyzerResult,
    Recommendation,
    savings_pct,
)
from tpuperf.analyzers.outliers import modified_z
from tpuperf.roofline.chips import lookup

from tpuperf import hlo_patterns, schema
from tpuperf._dataclasses import dataclass
from tpuperf.async_windows import pair_async
from tpuperf.columns import (
    Column,
    Strings,
    Table,
    distinct,
    factorize,
    group_index,
    median,
    stack,
    sum_by,
)
from tpuperf.hlo_collectives import (
    EVERY_DEVICE,
    HloCollective,
    collective_facts,
    text_collective,
)
from tpuperf.intervals import measure_in
from tpuperf.tables import split_module_name
from tpuperf.timeline import DeviceView, Timeline, window_of
from tpuperf.workload import Workload

if TYPE_CHECKING:
    from tpuperf import megascale

COLLECTIVE_KINDS = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
)

# An async window counts as hidden when compute covers at least this much of it,
# and as exposed when compute covers at most _EXPOSED_MAX; partial in between.
HIDDEN_MIN = 0.9
EXPOSED_MAX = 0.1

_TPU_FLAGS = {
    "all-gather": (
        "--xla_tpu_enable_async_collective_fusion=true "
        "--xla_tpu_enable_async_collective_fusion_fuse_all_gather=true "
        "--xla_tpu_enable_async_collective_fusion_multiple_steps=true "
        "--xla_tpu_overlap_compute_collective_tc=true --xla_enable_async_all_gather=true"
    ),
    "all-reduce": (
        "--xla_tpu_enable_data_parallel_all_reduce_opt=true "
        "--xla_tpu_data_parallel_opt_different_sized_ops=true "
        "--xla_tpu_enable_async_collective_fusion=true"
    ),
    "reduce-scatter": (
        "--xla_tpu_enable_async_collective_fusion=true "
        "--xla_tpu_enable_async_collective_fusion_multiple_steps=true "
        "--xla_tpu_overlap_compute_collective_tc=true"
    ),
    "collective-permute": "--xla_enable_async_collective_permute=true",
    "all-to-all": "--xla_tpu_enable_async_collective_fusion=true",
}
_GPU_FLAGS = {
    "all-gather": "--xla_gpu_enable_pipelined_all_gather=true",
    "all-reduce": "--xla_gpu_enable_pipelined_all_reduce=true",
    "reduce-scatter": "--xla_gpu_enable_pipelined_reduce_scatter=true",
}


def replica_group_size(hlo_text: str) -> int | None:
    """The size of the first replica group named in an HLO instruction, or None."""
    if match := hlo_patterns.GROUPS_EXPLICIT.search(hlo_text):
        return len([x for x in match.group(1).split(",") if x.strip()])
    if match := hlo_patterns.GROUPS_IOTA.search(hlo_text):
        return int(match.group(2))
    return None


def overlap_class(fraction: float) -> str:
    if fraction >= HIDDEN_MIN:
        return "hidden"
    if fraction <= EXPOSED_MAX:
        return "exposed"
    return "partial"


class CollectivesAnalyzer(Analyzer):
    name = "collectives"
    summary = "Exposed collective time by kind, async overlap (hidden/partial/exposed), copies."
    requires: ClassVar[dict[str, list[str]]] = {
        "ops": [
            "host",
            "device",
            "line",
            "op",
            "hlo_text",
            "category",
            "kind",
            "collective",
            "async_role",
            "start_ps",
            "dur_ps",
        ],
        "async_ops": ["host", "device", "op", "collective", "category", "start_ps", "dur_ps"],
    }

    def analyze(self, timeline: Timeline, config: AnalysisConfig) -> AnalyzerResult:
        tl = timeline
        result = AnalyzerResult(self.name, notes=list(tl.notes))
        if not tl.n_windows:
            result.metrics = {"exposed_collective_pct": None}
            return result
        views = tl.devices
        exposed_pct = tl.device_mean_pct("exposed_collective_ps")
        ops = _exposure(tl, {v.key: v.selected for v in views})
        kind = ops.strings("kind")
        coll = ops.take(kind.eq(schema.KIND_COLLECTIVE))
        by_kind = self._by_kind(coll, tl)
        windows = _async_windows(tl)
        copies = ops.take(kind.isin([schema.KIND_ASYNC_COPY, schema.KIND_MEMCPY]))
        copy_ms = tl.per_step(tl.total("other_ps")) / 1e9
        total_coll_ps = float(coll.array("dur_ps").sum())
        metrics: dict[str, Any] = {
            "exposed_collective_pct": exposed_pct,
            "exposed_collective_ms_per_step": tl.per_step(tl.total("exposed_collective_ps")) / 1e9,
            "collective_ms_per_step": tl.per_step(total_coll_ps) / 1e9,
            # On GPU this is the NCCL/RCCL kernel time that compute kernels hid.
            "collective_overlapped_pct": (
                100.0 * (1 - float(coll.array("exposed_ps").sum()) / total_coll_ps)
                if total_coll_ps > 0
                else None
            ),
            "by_kind": by_kind,
            "async": _async_summary(windows),
            "exposed_copy_ms_per_step": copy_ms,
            "exposed_copy_pct": tl.device_mean_pct("other_ps"),
        }
        result.metrics = metrics
        top = _top_ops(coll, tl) if coll.n else None
        exposed_by_op: dict[str, float] = {}
        if top is not None:
            for op, value in zip(
                top.strings("op").tolist(), top.array("exposed_ms_per_step").tolist(), strict=True
            ):
                exposed_by_op[op] = exposed_by_op.get(op, 0.0) + value
        table, totals, extra = collective_table(tl, exposed_by_op, windows)
        metrics.update({k: v for k, v in totals.items() if k != "ms_per_step"})
        metrics["last_arriver"] = _last_arriver(extra)
        if table.n:
            result.tables["collectives"] = table
        if top is not None:
            result.tables["collective_ops"] = top
        if windows.n:
            result.tables["async_windows"] = windows
        if copies.n:
            result.tables["copy_ops"] = _top_ops(copies, tl)
        dcn = _megascale(tl)
        if dcn:
            result.tables["megascale"] = _megascale_table(dcn)
            metrics["megascale"] = _megascale_metrics(dcn, tl)

        step_ms = tl.mean_window_ps / 1e9
        outside = self._outside(tl)
        metrics["outside_steps"] = outside or None
        waiting = (totals.get("wait_pct") or 0.0) >= WAIT_DOMINATES_PCT
        if waiting:
            result.recommendations.append(self._wait_rec(extra, totals, tl, step_ms))
        rec = self._collective_rec(
            coll, by_kind, outside, step_ms, config, tl, transfer_only=waiting, totals=totals
        )
        if rec is not None:
            result.recommendations.append(rec)
        result.recommendations.extend(
            self._bandwidth_recs(extra, totals, step_ms, fixes.workload_of(tl))
        )
        result.recommendations.extend(self._avoidable_recs(extra, step_ms))
        if dcn:
            rec = self._dcn_rec(dcn, metrics["megascale"], step_ms)
            if rec is not None:
                result.recommendations.append(rec)
        if copy_ms > 0 and copies.n:
            compute_ms = tl.per_step(tl.total("compute_ps")) / 1e9
            result.recommendations.extend(
                self._copy_recs(copies, windows, copy_ms, compute_ms, step_ms, tl)
            )
        return result

    def _by_kind(self, coll: Table, tl: Timeline) -> dict[str, Any]:
        out: dict[str, Any] = {}
        n_windows = tl.n_windows
        step_ps = tl.total("step_ps")
        collective = coll.strings("collective")
        codes = collective.codes
        hlo_text = coll.strings("hlo_text")
        exposed = coll.array("exposed_ps")
        dur = coll.array("dur_ps")
        async_role = coll.strings("async_role")
        sync = async_role.eq("")
        for code in sorted(set(codes.tolist()), key=lambda c: collective.values[c]):
            rows = codes == code
            kind = collective.values[code] or "other"
            texts = hlo_text.take(np.flatnonzero(rows)).compact().values
            sizes = sorted({s for s in (replica_group_size(t) for t in texts) if s is not None})
            out[kind] = {
                "exposed_ms_per_step": float(exposed[rows].sum()) / n_windows / 1e9,
                "exposed_pct": 100.0 * float(exposed[rows].sum()) / step_ps if step_ps else 0.0,
                "ms_per_step": float(dur[rows].sum()) / n_windows / 1e9,
                "ops_per_step": int(rows.sum()) / n_windows,
                "sync_ops_per_step": int((rows & sync).sum()) / n_windows,
                "async_ops_per_step": int((rows & ~sync).sum()) / n_windows,
                "replica_group_sizes": sizes,
            }
        return out

    def _collective_rec(
        self,
        coll: Table,
        by_kind: dict[str, Any],
        outside: dict[str, Any],
        step_ms: float,
        config: AnalysisConfig,
        tl: Timeline,
        transfer_only: bool = False,
        totals: dict[str, Any] | None = None,
    ) -> Recommendation | None:
        """Hiding collectives behind compute. Where waiting for peers dominates, only their
        transfer can be hidden (overlap does not make a late peer arrive sooner), and there is
        no advice without compute to hide behind."""
        compute = np.array([v.mean("compute_ps") for v in tl.devices])
        exposed = np.array([v.mean("exposed_collective_ps") for v in tl.devices])
        z = modified_z(compute)
        straggling = bool((z > config.straggler_z).any())
        slow_name = ""
        if straggling:
            # The others' extra collective time is waiting for the straggler, which overlap cannot
            # hide; the straggler's own exposed collective time is the transfer itself.
            slow = int(np.argmax(z))
            in_step_ms = float(exposed[slow]) / 1e9
            compute_ms = float(compute[slow]) / 1e9
            slow_name = tl.devices[slow].name
        else:
            in_step_ms = float(exposed.mean()) / 1e9
            compute_ms = float(compute.mean()) / 1e9
        outside_ms = outside.get("amortized_ms_per_step") or 0.0
        exposed_all_ms = in_step_ms
        moving = False
        if transfer_only and not straggling and totals and totals.get("ms_per_step"):
            # Only the moving part can hide behind compute; waiting for a late peer cannot.
            in_step_ms *= totals["transfer_ms_per_step"] / totals["ms_per_step"]
            moving = True
        # Overlap hides a collective behind compute, so it saves at most the compute there is.
        hideable_ms = min(in_step_ms, compute_ms)
        if transfer_only and hideable_ms <= 0.01 * step_ms and outside_ms <= 0:
            return None
        exposed_ms = hideable_ms + outside_ms
        if in_step_ms + outside_ms <= 0:
            return None
        parts, op_names = [], []
        kinds: list[str] = []
        if in_step_ms > 0:
            top = _top_ops(coll, tl)
            top = top.take(np.arange(min(5, top.n)))
            kinds = [
                k
                for k in sorted(by_kind, key=lambda k: -by_kind[k]["exposed_ms_per_step"])
                if by_kind[k]["exposed_ms_per_step"] > 0
            ]
            kind_text = ", ".join(
                f"{k} {by_kind[k]['exposed_ms_per_step']:.3f} ms"
                + (" (synchronous)" if by_kind[k]["async_ops_per_step"] == 0 else "")
                for k in kinds
            )
            # Ops under 1% of the exposed time (the -start halves) are noise in a sentence.
            shown = top.array("exposed_ms_per_step")
            top = top.take(shown >= 0.01 * shown.sum())
            ops_text = ", ".join(
                f"{r['op']} {r['exposed_ms_per_step']:.3f} ms" for r in top.records()
            )
            if straggling:
                median_ms = median(exposed) / 1e9
                text = (
                    f"{in_step_ms:.3f} ms per step of collectives with no compute beside them on "
                    f"{slow_name}, the slow chip, which waits for no one (the median device shows "
                    f"{median_ms:.3f} ms, the rest waiting for it); over all devices: "
                )
            elif moving:
                text = (
                    f"{exposed_all_ms:.3f} ms per step of collectives with no compute beside "
                    f"them, of which {in_step_ms:.3f} ms move data and the rest "
                    f"({totals['wait_pct'] if totals else 0:.0f}% of collective time) waits for "
                    "peers, which overlap cannot hide: "
                )
            else:
                text = f"{in_step_ms:.3f} ms per step of collectives with no compute beside them: "
            text += kind_text + (f"; top ops: {ops_text}" if ops_text else "")
            if hideable_ms < in_step_ms:
                text += (
                    f"; overlap can hide at most the {compute_ms:.3f} ms of compute per step "
                    "there is to hide them behind"
                )
            parts.append(text)
            op_names += [o for o in top.strings("op").tolist() if o]
        if outside_ms > 0:
            ops_text = ", ".join(
                f"{o['op']} x{o['count_per_device']:g} {o['exposed_ms_per_device']:.3f} ms"
                + (" (synchronous)" if o["sync"] else "")
                for o in outside["ops"][:5]
            )
            parts.append(
                f"outside the steps, {outside['exposed_ms_per_device']:.3f} ms per device of "
                f"exposed collectives ({ops_text}), {outside_ms:.3f} ms per step amortized over "
                f"{outside['steps']} steps"
            )
            op_names += [o["op"] for o in outside["ops"][:5]]
            for k in outside["kinds"]:
                if k not in kinds:
                    kinds.append(k)
        tpu = "; ".join(f"{k}: {_TPU_FLAGS[k]}" for k in kinds if k in _TPU_FLAGS)
        gpu = "; ".join(f"{k}: {_GPU_FLAGS[k]}" for k in kinds if k in _GPU_FLAGS)
        sync = sorted(
            {k for k in kinds if k in by_kind and by_kind[k]["async_ops_per_step"] == 0}
            | set(outside.get("sync_kinds", []))
        )
        head = kinds[0] if kinds else "collective"
        return Recommendation(
            analyzer=self.name,
            kind=KIND_EXPOSED_COLLECTIVE,
            title=(
                f"Exposed collectives: {head} time compute does not hide"
                if in_step_ms > 0
                else f"Exposed {'synchronous ' if sync else ''}{head} outside the steps"
            ),
            evidence="; ".join(parts),
            fix=fixes.collectives(fixes.workload_of(tl), tpu, gpu, sync),
            est_savings_ms=exposed_ms,
            est_savings_pct=savings_pct(exposed_ms, step_ms),
            # One-off collectives outside the steps save wall time, not step time: less sure.
            confidence="low" if in_step_ms <= 0 else ("medium" if sync else "high"),
            ops=op_names,
            values={
                "exposed_collective_ms_per_step": in_step_ms,
                "hideable_ms_per_step": hideable_ms,
                "outside_steps_amortized_ms_per_step": outside_ms,
                "by_kind_ms": {k: by_kind[k]["exposed_ms_per_step"] for k in by_kind},
            },
        )

    def _wait_rec(
        self, extra: dict[str, Any], totals: dict[str, Any], tl: Timeline, step_ms: float
    ) -> Recommendation:
        """Waiting for peers dominates the collectives: the fix is the late device's work
        (a straggler) or the spread of arrivals (load imbalance), not overlap."""
        rows = [r for r in extra["rows"] if r["_instances"]]
        worst = max(rows, key=lambda r: r["wait_ms"]) if rows else extra["rows"][0]
        waits = np.asarray(extra["device_wait_ms"])
        last = worst["_last_device"]
        consistent = last is not None and (worst["last_arriver_pct"] or 0) >= (
            100 * LAST_ARRIVER_MIN_SHARE
        )
        source = (
            "Rendezvous events inside each collective"
            if totals["wait_source"] == "rendezvous"
            else "start times across the group"
        )
        text = (
            f"{totals['wait_ms_per_step']:.3f} of {totals['ms_per_step']:.3f} ms per step of "
            f"collective time ({totals['wait_pct']:.0f}%) is waiting for peers (from the "
            f"{source}); {worst['op']} ({worst['kind']}) waits {worst['wait_ms']:.3f} ms per "
            f"step, arrivals spread {worst['arrival_spread_ms'] or 0:.3f} ms"
        )
        ops = [worst["op"]]
        # Evening out the work saves what the latest device is systematically late by (its
        # lateness over the median device's), at most what the devices wait.
        lateness = np.asarray(extra["device_lateness_ms"])
        late = int(np.argmax(lateness))
        savings = float(lateness[late] - median(lateness)) if len(lateness) else 0.0
        savings = min(max(savings, 0.0), float(np.mean(waits)) if len(waits) else 0.0)
        if consistent:
            name = tl.devices[last].name
            others = np.delete(waits, last)
            more, more_ops = _runs_more(tl, last)
            text += (
                f"; {name} arrives last {worst['_last_count']} of {worst['_instances']} times,"
                f" {lateness[last] - median(lateness):.3f} ms per step later than the median "
                f"device, and waits {waits[last]:.3f} ms per step against a median of "
                f"{median(others) if len(others) else 0.0:.3f} ms"
                + (f"; it runs more of: {more}" if more else "")
            )
            ops += more_ops
            title = f"Straggler at collectives: the others wait for {name} at {worst['op']}"
            confidence = "high" if worst["_instances"] >= 10 else "medium"
        else:
            if last is not None:
                text += (
                    f"; no device is last most of the time ({tl.devices[last].name} is, "
                    f"{worst['_last_count']} of {worst['_instances']} times), so most of the "
                    f"wait is jitter; the latest on average, {tl.devices[late].name}, is "
                    f"{savings:.3f} ms per step later than the median device"
                )
            title = "Load imbalance: devices wait for each other at collectives"
            confidence = "low"
        fix = (
            "Even out the work per device before the collective: look at what the late "
            "device runs that the others do not (uneven shards of the batch or sequence, a "
            "branch on the device index, padding), and at its host (CPU contention, data "
            "loading); overlapping the collective with compute does not make a late peer "
            "arrive sooner."
        )
        return Recommendation(
            analyzer=self.name,
            kind=KIND_COLLECTIVE_WAIT,
            title=title,
            evidence=text,
            fix={"tpu": fix, "gpu": fix},
            est_savings_ms=savings,
            est_savings_pct=savings_pct(savings, step_ms),
            confidence=confidence,
            ops=ops,
            values={
                "wait_ms_per_step": totals["wait_ms_per_step"],
                "wait_pct": totals["wait_pct"],
                "last_arriver": tl.devices[last].name if last is not None else None,
                "last_arriver_pct": worst["last_arriver_pct"],
                "device_wait_ms_per_step": [float(w) for w in waits],
                "device_lateness_ms_per_step": [float(x) for x in lateness],
            },
        )

    def _bandwidth_recs(
        self,
        extra: dict[str, Any],
        totals: dict[str, Any],
        step_ms: float,
        workload: Workload,
    ) -> list[Recommendation]:
        """Moving the data dominates: fewer bytes (bf16), fewer, larger collectives, or a
        sharding that needs less; bounded by the exposed transfer time."""
        peak = totals.get("interconnect_peak_gbps")
        found, savings, ops = [], 0.0, []
        for row in extra["rows"]:
            transfer = min(row["transfer_ms"], row["exposed_ms_per_step"])
            fact = row["_fact"]
            if transfer <= 0 or row["transfer_ms"] < row["wait_ms"]:
                continue  # no exposed transfer, or waiting dominates this collective
            if peak and row["busbw_gbps"] is not None:
                if row["link_peak_pct"] >= LOW_LINK_PCT:
                    continue
                # At the link's peak the same bytes would take busbw/peak of the time.
                saved = transfer * (1 - row["busbw_gbps"] / peak)
                why = f"{row['busbw_gbps']:.1f} GB/s bus bandwidth, {row['link_peak_pct']:.0f}%"
                why += " of the link"
            elif fact is not None and fact.dtype in ("f32", "f64"):
                saved = transfer / 2  # half the bytes in bf16 (f32) or f32 (f64)
                why = f"{fact.dtype}"
                if row["busbw_gbps"] is not None:
                    why += f", {row['busbw_gbps']:.2f} GB/s bus bandwidth"
            else:
                continue
            found.append(
                f"{row['op']} {row['transfer_ms']:.3f} ms moving {row['bytes'] / 1e6:.2f} MB "
                f"x{row['count_per_step']:g} ({why})"
            )
            savings += saved
            ops.append(row["op"])
        if savings <= 0.01 * step_ms:
            return []
        small = [r for r in extra["rows"] if r["count_per_step"] >= 4 and r["bytes"] < 1e6]
        evidence = (
            f"{totals['transfer_ms_per_step']:.3f} ms per step of collectives move data "
            f"(waiting is {totals['wait_pct'] or 0:.0f}%): " + "; ".join(found[:5])
        )
        if small:
            evidence += f"; {len(small)} op(s) run 4+ times per step on under 1 MB each"
        return [
            Recommendation(
                analyzer=self.name,
                kind=KIND_COLLECTIVE_BYTES,
                title="Collectives move data slowly: send fewer bytes",
                evidence=evidence,
                fix=fixes.collective_bytes(workload),
                est_savings_ms=savings,
                est_savings_pct=savings_pct(savings, step_ms),
                confidence="medium" if peak else "low",
                ops=ops,
                values={
                    "transfer_ms_per_step": totals["transfer_ms_per_step"],
                    "interconnect_peak_gbps": peak,
                },
            )
        ]

    def _avoidable_recs(self, extra: dict[str, Any], step_ms: float) -> list[Recommendation]:
        """Collective work the program need not do: an all-reduce whose result is only
        sliced (a reduce-scatter moves half), the same all-gather twice per step."""
        found = []
        for row in extra["rows"]:
            fact = row["_fact"]
            if row["kind"] != "all-reduce" or fact is None or not fact.sliced:
                continue
            # all-reduce = reduce-scatter + all-gather; the gathered half is thrown away.
            saved = min(row["ms_per_step"] - row["wait_ms"], row["exposed_ms_per_step"]) / 2
            if saved <= 0:
                continue
            found.append(
                Advice(
                    KIND_AVOIDABLE_COLLECTIVE,
                    title=f"{row['op']}: all-reduce then slice; a reduce-scatter does half",
                    evidence=(
                        f"{row['op']} all-reduces {row['bytes'] / 1e6:.2f} MB "
                        f"({row['ms_per_step']:.3f} ms per step) and every use of its result "
                        "is a slice: each device keeps only its shard"
                    ),
                    fix={
                        "tpu": (
                            "Reduce-scatter the gradients to the parameters' sharding: give "
                            "the gradients the parameters' NamedSharding "
                            "(jax.lax.with_sharding_constraint) or use psum_scatter in "
                            "shard_map, so XLA emits a reduce-scatter instead of "
                            "all-reduce + dynamic-slice."
                        ),
                        "gpu": (
                            "Reduce-scatter the gradients to the parameters' sharding "
                            "(with_sharding_constraint on the gradients, or psum_scatter in "
                            "shard_map); check --xla_gpu_enable_reduce_scatter_creator is on."
                        ),
                    },
                    savings_ms=saved,
                    ops=[row["op"]],
                    values={"bytes": row["bytes"], "ms_per_step": row["ms_per_step"]},
                )
            )
        gathers: dict[int, list[dict[str, Any]]] = {}
        for row in extra["rows"]:
            fact = row["_fact"]
            if row["kind"] == "all-gather" and fact is not None and fact.operand >= 0:
                gathers.setdefault(fact.operand, []).append(row)
        for same in gathers.values():
            if len(same) < 2:
                continue
            extra_rows = sorted(same, key=lambda r: -r["ms_per_step"])[1:]
            saved = sum(r["exposed_ms_per_step"] for r in extra_rows)
            if saved <= 0:
                continue
            names = [r["op"] for r in same]
            found.append(
                Advice(
                    KIND_AVOIDABLE_COLLECTIVE,
                    title=f"The same all-gather runs {len(same)} times per step",
                    evidence=(
                        f"{', '.join(names)} gather the same operand "
                        f"({same[0]['bytes'] / 1e6:.2f} MB each)"
                    ),
                    fix={
                        "tpu": (
                            "Gather the parameter once per step and reuse it (keep the gathered "
                            "value live, or loosen the remat policy that recomputes it)."
                        ),
                        "gpu": (
                            "Gather the parameter once per step and reuse it (keep the gathered "
                            "value live, or loosen the remat policy that recomputes it)."
                        ),
                    },
                    savings_ms=saved,
                    ops=names,
                    values={"ops": names},
                )
            )
        return [advice.recommendation(self.name, step_ms, "medium") for advice in found]

    def _dcn_rec(
        self, per_device: list[list[megascale.Occurrence]], m: dict[str, Any], step_ms: float
    ) -> Recommendation | None:
        """DCN (multislice) collectives stall the devices: more slack, fewer bytes."""
        if m["stall_pct"] < DCN_STALL_MIN_PCT:
            return None
        from tpuperf import megascale

        rows = megascale.summarize(per_device)
        worst = rows[0]
        required = float(worst["required_gbps"])
        text = (
            f"DCN collectives stall the device {m['stall_ms_per_step']:.3f} ms per step "
            f"({m['stall_pct']:.1f}% of the step), {m['done_stall_ms_per_step']:.3f} ms of it "
            f"in send-done/recv-done; {worst['rendezvous']} ({worst['transfer_type']}, "
            f"{worst['send_op']} .. {worst['recv_op']}) stalls {float(worst['stall_ms']):.3f} "
            f"ms of an observed {float(worst['observed_ms']):.3f} ms with "
            f"{float(worst['slack_ms']):.3f} ms of slack"
            + (f", needing {required:.1f} Gbit/s" if math.isfinite(required) else "")
        )
        fix = (
            "Give the DCN transfers more slack: schedule more independent compute between "
            "each send and its recv-done (XLA's latency-hiding scheduler, issuing the "
            "cross-slice collective earlier, e.g. the gradient reduction per layer instead of "
            "at the end), and move fewer bytes across slices: keep FSDP/tensor sharding "
            "inside a slice and only data parallelism across slices, reduce in bf16, or "
            "accumulate gradients over microbatches before reducing across slices."
        )
        savings = float(m["done_stall_ms_per_step"])
        return Recommendation(
            analyzer=self.name,
            kind=KIND_DCN_STALL,
            title=f"DCN collectives stall the devices: {worst['rendezvous']} first",
            evidence=text,
            fix={"tpu": fix, "gpu": fix},
            est_savings_ms=savings,
            est_savings_pct=savings_pct(savings, step_ms),
            confidence="medium",
            ops=[str(worst["send_op"]), str(worst["recv_op"])],
            values={
                "stall_ms_per_step": m["stall_ms_per_step"],
                "stall_pct": m["stall_pct"],
                "rendezvous": worst["rendezvous"],
                "slack_ms": worst["slack_ms"],
                "required_gbps": required if math.isfinite(required) else None,
            },
        )

    def _outside(self, tl: Timeline) -> dict[str, Any]:
        """Exposed collectives on the devices but outside every step (setup, one-off calls)."""
        if not tl.has_steps or not tl.devices:
            return {}
        exposed_ps = float(np.mean([v.outside["exposed_collective_ps"] for v in tl.devices]))
        if exposed_ps <= 0:
            return {}
        rows = {}
        for view in tl.devices:
            rows[view.key] = _of_kind(view, tl.outside_rows(view), schema.KIND_COLLECTIVE)
        ops = _exposure(tl, rows)
        n_dev = max(tl.n_devices, 1)
        keys = [ops.strings(c) for c in ("op", "collective", "async_role")]
        group, first = group_index(keys)
        count = np.bincount(group, minlength=len(first))
        exposed = sum_by(group, len(first), ops.array("exposed_ps"))
        order = np.argsort(-exposed, kind="stable")
        op, collective, role = (k.take(first[order]).tolist() for k in keys)
        # Work outside the steps is amortized over all steps of the capture, not the selected ones.
        steps = tl.n_all_windows / n_dev
        return {
            "exposed_ms_per_device": exposed_ps / 1e9,
            "steps": round(steps),
            "amortized_ms_per_step": exposed_ps / steps / 1e9 if steps else 0.0,
            "kinds": [k for k in dict.fromkeys(collective) if k],
            "sync_kinds": sorted({c for c, r in zip(collective, role, strict=True) if r == ""}),
            "ops": [
                {
                    "op": o,
                    "collective": c,
                    "count_per_device": int(n) / n_dev,
                    "exposed_ms_per_device": int(e) / n_dev / 1e9,
                    "sync": r == "",
                }
                for o, c, r, n, e in zip(
                    op,
                    collective,
                    role,
                    count[order].tolist(),
                    exposed[order].tolist(),
                    strict=True,
                )
            ],
        }

    def _copy_recs(
        self,
        copies: Table,
        windows: Table,
        copy_ms: float,
        compute_ms: float,
        step_ms: float,
        tl: Timeline,
    ) -> list[Recommendation]:
        """Two fixes for exposed copies, each with the saving it can reach: issuing them
        earlier hides at most the compute there is to hide them behind; moving fewer bytes
        removes the wait itself."""
        top = _top_ops(copies, tl)
        top = top.take(np.arange(min(5, top.n)))
        top = top.take(top.array("exposed_ms_per_step") >= 0.01 * max(copy_ms, 1e-12))
        ops_text = ", ".join(f"{r['op']} {r['exposed_ms_per_step']:.3f} ms" for r in top.records())
        ops = top.strings("op").tolist()
        is_tpu = bool(copies.strings("kind").eq(schema.KIND_ASYNC_COPY).any())
        what = (
            "async copies (copy-start/copy-done: host offload or memory-space moves)"
            if is_tpu
            else "memcpys"
        )
        workload = fixes.workload_of(tl)
        hide_ms = min(copy_ms, compute_ms)
        hide = Advice(
            KIND_EXPOSED_ASYNC_COPY,
            title="Exposed copies: issue "
            + ("host-offload copies" if is_tpu else "memcpys")
            + " early enough for compute to hide them",
            evidence=(
                f"{copy_ms:.3f} ms per step waiting on {what} with no compute beside them; "
                f"top: {ops_text}. Overlap can hide at most the {compute_ms:.3f} ms of compute "
                "per step there is to hide them behind"
            ),
            fix=fixes.hide_copies(workload),
            savings_ms=hide_ms,
            ops=ops,
            values={"exposed_copy_ms_per_step": copy_ms, "compute_ms_per_step": compute_ms},
        )
        moved = _copy_traffic(copies, windows, tl)
        traffic = (
            f"; {moved['copies_per_step']:g} copies per step move {moved['gb_per_copy']:.2f} GB "
            f"each at a median {moved['median_gbps']:.1f} GB/s"
            if moved
            else ""
        )
        remove = Advice(
            KIND_REDUCE_COPIES,
            title="Transfer less: "
            + ("host-offload copies" if is_tpu else "memcpys")
            + " hold up every step",
            evidence=f"{copy_ms:.3f} ms per step waiting on {what}{traffic}; top: {ops_text}",
            fix=fixes.reduce_copies(workload),
            savings_ms=copy_ms,
            ops=ops,
            values={"exposed_copy_ms_per_step": copy_ms, **moved},
        )
        return [advice.recommendation(self.name, step_ms, "medium") for advice in (hide, remove)]


def _copy_traffic(copies: Table, windows: Table, tl: Timeline) -> dict[str, float]:
    """Bytes per async copy and the bandwidth each window achieved (TPU; {} without data)."""
    if not windows.n:
        return {}
    starts = copies.take(copies.strings("async_role").eq("start"))
    op = starts.strings("op")
    size_by_op: dict[str, float] = {}
    nbytes = starts.array("bytes_accessed")
    codes = op.codes
    for code in distinct(codes).tolist():
        values = nbytes[codes == code]
        values = values[~np.isnan(values)]
        size_by_op[op.values[code]] = median(values) if len(values) else float("nan")
    copy_windows = windows.take(windows.strings("kind").eq("copy"))
    size = np.array(
        [size_by_op.get(name, float("nan")) for name in copy_windows.strings("op").tolist()],
        dtype="float64",
    )
    dur = copy_windows.array("dur_ps").astype("float64")
    ok = np.isfinite(size) & (size > 0) & (dur > 0)
    if not ok.any():
        return {}
    return {
        "copies_per_step": round(float(ok.sum()) / max(tl.n_windows, 1), 3),
        "gb_per_copy": median(size[ok]) / 1e9,
        # bytes per picosecond x 1000 is GB/s.
        "median_gbps": median(size[ok] / dur[ok]) * 1000.0,
    }


def _async_kind(collective: str, category: str) -> str:
    """The kind of an `Async XLA Ops` window: its collective, else its category less the
    ``-start``/``-done`` suffix (``all-gather-start`` -> all-gather, ``copy-start`` -> copy)."""
    if collective:
        return collective
    base = re.sub(r"-(start|done)$", "", category.strip())
    return base or "copy"


# The columns of the non-compute ops the analyzer measures (with exposed_ps added).
_EXPOSURE_STRINGS = ("op", "hlo_text", "kind", "collective", "async_role")
_EXPOSURE_COLUMNS = (*_EXPOSURE_STRINGS, "start_ps", "dur_ps", "bytes_accessed")


def _of_kind(view: DeviceView, rows: np.ndarray, kind: str, keep: bool = True) -> np.ndarray:
    """The rows among ``rows`` of the device's ops whose kind is ``kind`` (``keep``) or is not.
    No pass over the rows where the kinds the device's ops can have answer alone (a TPU
    device's ops' kinds are per metadata row: most devices run no collective)."""
    kinds = view.ops.strings("kind")
    wanted = np.zeros(len(kinds.values) + 1, dtype=bool)  # per code, and code -1 last
    if (code := kinds.code(kind)) >= 0:
        wanted[code] = True
    if not keep:
        wanted = ~wanted
    reachable = _reachable(kinds, wanted)
    if not reachable.any():
        return rows[:0]
    if reachable.all():
        return rows
    return rows[kinds.take(rows).per_row(wanted)]


def _reachable(strings: Strings, per_code: np.ndarray) -> np.ndarray:
    """``per_code`` (one value per code of ``strings``, and one for code -1) of each value the
    column's index can point to, found without reading the rows (a TPU op's strings: one
    per metadata row)."""
    return per_code[strings.mapping] if strings.mapping is not None else per_code


def _exposure(tl: Timeline, rows: dict[tuple[str, int], np.ndarray]) -> Table:
    """The non-compute ops among ``rows`` of each device, with ``exposed_ps``: their time in
    the device's exposed collective (collectives) or other (copies) set, the part no compute
    covered. One table over the devices, in device order."""
    parts: list[Table] = []
    for view in tl.devices:
        picked = rows.get(view.key)
        if picked is None or not len(picked):
            continue
        # Only the non-compute ops are copied: a step's collectives and copies are few.
        picked = _of_kind(view, picked, schema.KIND_COMPUTE, keep=False)
        if not len(picked):
            continue
        ops = view.ops.select(_EXPOSURE_COLUMNS).take(picked)
        start = ops.array("start_ps")
        end = start + ops.array("dur_ps")
        is_coll = ops.strings("kind").eq(schema.KIND_COLLECTIVE)
        exposed = np.where(
            is_coll,
            measure_in(view.sets.collective, start, end),
            measure_in(view.sets.other, start, end),
        )
        part: dict[str, Column] = {
            "host": Strings.constant(view.host, ops.n),
            "device": np.full(ops.n, view.device, dtype=np.int64),
            **{name: ops.strings(name) for name in _EXPOSURE_STRINGS},
            "start_ps": start,
            "dur_ps": ops.array("dur_ps"),
            "bytes_accessed": ops.array("bytes_accessed").astype("float64"),
            "exposed_ps": exposed,
        }
        parts.append(Table(part))
    if parts:
        return stack(parts)
    empty = np.zeros(0, dtype=np.int64)
    none = Strings(empty, ())
    numbers = ("start_ps", "dur_ps", "bytes_accessed", "exposed_ps")
    return Table(
        {
            "host": none,
            "device": empty,
            **dict.fromkeys(_EXPOSURE_STRINGS, none),
            **dict.fromkeys(numbers, empty),
        }
    )


def _top_ops(ops: Table, tl: Timeline) -> Table:
    """Ops by exposed time, per step per device."""
    n = max(tl.n_windows, 1)
    keys = [ops.strings(c) for c in ("op", "collective", "async_role")]
    group, first = group_index(keys)
    count = np.bincount(group, minlength=len(first))
    dur = sum_by(group, len(first), ops.array("dur_ps"))
    exposed = sum_by(group, len(first), ops.array("exposed_ps"))
    order = np.argsort(-(exposed / n / 1e9), kind="stable")
    return Table(
        {
            "op": keys[0].take(first[order]),
            "collective": keys[1].take(first[order]),
            "async_role": keys[2].take(first[order]),
            "ms_per_step": (dur / n / 1e9)[order],
            "exposed_ms_per_step": (exposed / n / 1e9)[order],
            "count_per_step": (count / n)[order],
        }
    )


def _async_windows(tl: Timeline) -> Table:
    """One row per async window (start to done) that starts in a selected step.

    A device's windows come from its `Async XLA Ops` line when it has one, else
    from pairing its ``-start``/``-done`` ops, each start with the next matching done
    (as XProf does: on the v6e profile only TPU:0 has the line).
    """
    parts: list[Table] = []
    for view in tl.devices:
        found = _async_line(view) or _pair_async(view)
        if found is None:
            continue
        op, kind, s, e = found
        inside = np.flatnonzero(window_of(s, view.windows.start_ps, view.windows.end_ps) >= 0)
        s, e = s[inside], e[inside]
        covered = measure_in(view.sets.compute, s, e)
        part: dict[str, Column] = {
            "host": Strings.constant(view.host, len(inside)),
            "device": np.full(len(inside), view.device, dtype=np.int64),
            "op": op.take(inside),
            "kind": kind.take(inside),
            "start_ps": s,
            "dur_ps": e - s,
            "overlap_pct": 100.0 * covered / np.maximum(e - s, 1),
        }
        parts.append(Table(part))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        none = Strings(empty, ())
        return Table(
            {
                "host": none,
                "device": empty,
                "op": none,
                "kind": none,
                "start_ps": empty,
                "dur_ps": empty,
                "overlap_pct": np.zeros(0),
                "class": none,
            }
        )
    windows = stack(parts)
    fraction = windows.array("overlap_pct") / 100.0
    # overlap_class, vectorised: 0 hidden, 1 exposed, 2 partial.
    classes = np.where(fraction >= HIDDEN_MIN, 0, np.where(fraction <= EXPOSED_MAX, 1, 2))
    names = ("hidden", "exposed", "partial")
    return Table({**windows, "class": Strings(classes.astype(np.int32), names).compact()})


# A device's async windows: start op, kind, start and end.
_Windows = tuple[Strings, Strings, np.ndarray, np.ndarray]


def _async_line(view: DeviceView) -> _Windows | None:
    """The windows of the device's `Async XLA Ops` line, in the line's order; None without."""
    table = view.tables.async_ops
    if not table.n:
        return None
    start = table.array("start_ps")
    collective, category = table.strings("collective"), table.strings("category")
    # The kind of each (collective, category) pair, worked out once per pair.
    pairs, first = group_index([collective, category])
    names = [
        _async_kind(c, cat)
        for c, cat in zip(
            collective.take(first).tolist(), category.take(first).tolist(), strict=True
        )
    ]
    codes, values = factorize(names)
    kind = Strings(pairs, values, codes)
    return table.strings("op"), kind, start, start + table.array("dur_ps")


def _pair_async(view: DeviceView) -> _Windows | None:
    """Async windows from ``-start``/``-done`` op pairs of the selected ops: each start to
    the end of the next done of the same name (``x-start.3`` with ``x-done.3``)."""
    role = view.ops.strings("async_role")
    if role.code("start") < 0 or role.code("done") < 0:
        return None  # no async op at all: nothing to take out of the device's ops
    ops = view.selected_ops("op", "collective", "async_role", "start_ps", "dur_ps")
    found = pair_async(ops)
    if found is None:
        return None
    rows, end = found
    collective = ops.strings("collective").take(rows)
    kind_names = [c or "copy" for c in collective.values]
    codes, values = factorize(kind_names)
    kind = Strings(collective.codes, values, codes)
    return ops.strings("op").take(rows), kind, ops.array("start_ps")[rows], end


def _async_summary(windows: Table) -> dict[str, Any]:
    if not windows.n:
        return {"windows": 0, "hidden": 0, "partial": 0, "exposed": 0, "by_kind": {}}

    def counts(rows: np.ndarray) -> dict[str, Any]:
        classes = windows.strings("class").take(rows)
        overlap = windows.array_at("overlap_pct", rows)
        dur = windows.array_at("dur_ps", rows)
        return {
            "windows": len(rows),
            "hidden": int(classes.eq("hidden").sum()),
            "partial": int(classes.eq("partial").sum()),
            "exposed": int(classes.eq("exposed").sum()),
            # Weighted by window length: the share of async time compute covered.
            "overlap_pct": float((overlap * dur).sum() / max(int(dur.sum()), 1)),
            "mean_window_overlap_pct": float(overlap.mean()),
        }

    out = counts(np.arange(windows.n))
    out["hidden_min_pct"] = 100 * HIDDEN_MIN
    out["exposed_max_pct"] = 100 * EXPOSED_MAX
    kind = windows.strings("kind").compact()
    out["by_kind"] = {
        name: counts(np.flatnonzero(kind.eq(name))) for name in sorted(set(kind.values))
    }
    return out


# --------------------------------------------------------------------------- per collective

# Bus-bandwidth factors (nccl-tests doc/PERFORMANCE.md, also TraceLens's): what each rank
# sends over its links per byte of the collective's buffer, for a group of n.
_BUS_FACTORS = {
    "all-reduce": lambda n: 2.0 * (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
}


def bus_factor(kind: str, n: int) -> float:
    """busbw / algbw for a collective of ``kind`` over ``n`` devices (1 for a permute, a
    send/recv, a broadcast, or a group of one)."""
    factor = _BUS_FACTORS.get(kind)
    return factor(n) if factor is not None and n > 1 else 1.0


# Waiting dominates a collective's time from this share on; a device that arrives last at
# least this often is the one the others wait for.
WAIT_DOMINATES_PCT = 50.0
LAST_ARRIVER_MIN_SHARE = 0.5
# A link used below this share of its peak moves data "far below" what it can.
LOW_LINK_PCT = 50.0

COLLECTIVE_METRICS = (
    "ms_per_step",
    "wait_ms_per_step",
    "transfer_ms_per_step",
    "wait_pct",
    "wait_source",
    "interconnect_peak_gbps",
)
_COLLECTIVE_COLUMNS = (
    "op",
    "kind",
    "bytes",
    "group_size",
    "count_per_step",
    "ms_per_step",
    "exposed_ms_per_step",
    "wait_ms",
    "transfer_ms",
    "algbw_gbps",
    "busbw_gbps",
    "link_peak_pct",
    "arrival_spread_ms",
    "last_arriver",
    "last_arriver_pct",
)


@dataclass(eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class _Occurrences:
    """Every execution of a collective op in the selected steps, over the devices."""

    device: np.ndarray  # position in tl.devices
    host: list[str]  # by position in tl.devices
    op: list[str]
    kind: list[str]
    role: list[str]
    step: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    wait: np.ndarray  # ps waiting for peers; NaN where the device records no waits
    facts: list[HloCollective | None]

    @property
    def n(self) -> int:
        return len(self.op)


def _facts(tl: Timeline) -> dict[str, dict[tuple[str, str], HloCollective]]:
    """The collectives of each host's HLO protos, by (proto key, op)."""
    protos: dict[str, dict[str, bytes]] = getattr(tl.profile, "hlo_protos", None) or {}
    return {host: collective_facts(by_name) for host, by_name in protos.items()}


def _fact_of(
    facts: dict[tuple[str, str], HloCollective],
    keys: dict[str, str],
    module: str,
    program: str,
    op: str,
    hlo_text: str,
) -> HloCollective | None:
    """An op's collective facts: from its program's HLO proto, else its HLO text (TPU)."""
    key = keys.get(program) or keys.get(module)
    if key is not None and (key, op) in facts:
        return facts[key, op]
    if " = " in hlo_text:
        nbytes, group, dtype = text_collective(hlo_text)
        return HloCollective(op, nbytes, group, dtype=dtype)
    return None


def _occurrences(tl: Timeline) -> _Occurrences:
    # The HLO protos are decoded only for a profile with collectives in its steps.
    present = any(len(_of_kind(v, v.selected, schema.KIND_COLLECTIVE)) for v in tl.devices)
    facts = _facts(tl) if present else {}
    keys_by_host: dict[str, dict[str, str]] = {}
    for host, by_key in facts.items():
        keys: dict[str, str] = {}
        for proto_key, _ in by_key:
            split = split_module_name(proto_key)
            name, program = split if split else (proto_key, "")
            if program:
                keys.setdefault(program, proto_key)
            keys.setdefault(name, proto_key)
        keys_by_host[host] = keys
    parts: dict[str, list[Any]] = {
        name: [] for name in ("device", "op", "kind", "role", "step", "start", "dur", "wait")
    }
    fact_list: list[HloCollective | None] = []
    for position, view in enumerate(tl.devices):
        rows = _of_kind(view, view.selected, schema.KIND_COLLECTIVE)
        if not len(rows):
            continue
        ops = view.ops.select(
            ("op", "collective", "async_role", "module", "program_id", "hlo_text", "line")
        ).take(rows)
        start = view.ops.array_at("start_ps", rows)
        dur = view.ops.array_at("dur_ps", rows)
        index = window_of(start, view.windows.start_ps, view.windows.end_ps)
        wait = _waits_in(view, ops.strings("line"), start, start + dur)
        host_facts = facts.get(view.host, {})
        host_keys = keys_by_host.get(view.host, {})
        names = ops.strings("op").tolist()
        modules = ops.strings("module").tolist()
        programs = ops.strings("program_id").tolist()
        texts = ops.strings("hlo_text").tolist()
        cache: dict[tuple[str, str, str], HloCollective | None] = {}
        for name, module, program, text in zip(names, modules, programs, texts, strict=True):
            key = (name, module, program)
            if key not in cache:
                cache[key] = _fact_of(host_facts, host_keys, module, program, name, text)
            fact_list.append(cache[key])
        parts["device"].append(np.full(len(rows), position, dtype=np.int64))
        parts["op"] += names
        parts["kind"] += ops.strings("collective").tolist()
        parts["role"] += ops.strings("async_role").tolist()
        parts["step"].append(view.windows.step[index])
        parts["start"].append(start)
        parts["dur"].append(dur)
        parts["wait"].append(wait)
    return _Occurrences(
        device=_stack_ints(parts["device"]),
        host=[v.host for v in tl.devices],
        op=parts["op"],
        kind=parts["kind"],
        role=parts["role"],
        step=_stack_ints(parts["step"]),
        start=_stack_ints(parts["start"]),
        dur=_stack_ints(parts["dur"]),
        wait=np.concatenate(parts["wait"]) if parts["wait"] else np.zeros(0),
        facts=fact_list,
    )


def _stack_ints(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


def _waits_in(view: DeviceView, line: Strings, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The time each op spent in the device's wait events (Rendezvous) on its own line; NaN
    for every op where the device records none."""
    waits = view.tables.waits
    if waits is None or not waits.n:
        return np.full(len(start), np.nan)
    out = np.zeros(len(start), dtype=np.float64)
    wait_line = waits.strings("line").tolist()
    wait_start = waits.array("start_ps")
    wait_dur = waits.array("dur_ps")
    names = line.tolist()
    for name in set(names):
        on = np.array([w == name for w in wait_line], dtype=bool)
        order = np.argsort(wait_start[on], kind="stable")
        s, d = wait_start[on][order], wait_dur[on][order]
        total = np.concatenate([[0], np.cumsum(d)])
        rows = np.array([n == name for n in names], dtype=bool)
        lo = np.searchsorted(s, start[rows], side="left")
        hi = np.searchsorted(s, end[rows], side="left")
        out[rows] = total[hi] - total[lo]
    return out


@dataclass
class _Instance:
    """One collective as the group executes it: the same op, step and occurrence on each
    device."""

    op: str
    devices: list[int]
    starts: list[int]

    @property
    def spread_ps(self) -> int:
        return max(self.starts) - min(self.starts)

    @property
    def last(self) -> int:
        return self.devices[int(np.argmax(self.starts))]


def _instances(occ: _Occurrences) -> tuple[list[_Instance], np.ndarray]:
    """The instances of the arrivals (every row but the -done halves), and each row's
    instance index (-1 for a done half)."""
    order = np.lexsort((occ.start, occ.step, occ.device))
    seen: dict[tuple[int, str, int], int] = {}
    # Hosts' clocks are not aligned: an instance is matched among one host's devices.
    by_key: dict[tuple[str, str, int, int], int] = {}
    instances: list[_Instance] = []
    of_row = np.full(occ.n, -1, dtype=np.int64)
    for row in order.tolist():
        if occ.role[row] == "done":
            continue
        device, op, step = int(occ.device[row]), occ.op[row], int(occ.step[row])
        k = seen.get((device, op, step), 0)
        seen[device, op, step] = k + 1
        key = (occ.host[device], op, step, k)
        at = by_key.get(key)
        if at is None:
            at = by_key[key] = len(instances)
            instances.append(_Instance(op, [], []))
        instances[at].devices.append(device)
        instances[at].starts.append(int(occ.start[row]))
        of_row[row] = at
    return instances, of_row


def _peer_waits(occ: _Occurrences, instances: list[_Instance], of_row: np.ndarray) -> np.ndarray:
    """Each row's wait for its peers: the recorded waits where the device has them, else
    how much later the last device of its instance started (at most the op's own time)."""
    wait = occ.wait.copy()
    missing = np.isnan(wait)
    if missing.any():
        latest = np.array([max(i.starts) for i in instances] + [0], dtype=np.int64)
        arrival = latest[of_row]  # of_row -1 (a done half) reads the trailing 0
        late = np.clip(arrival - occ.start, 0, occ.dur).astype(np.float64)
        wait[missing] = np.where(of_row[missing] >= 0, late[missing], 0.0)
    return wait


def collective_table(
    tl: Timeline, exposed_by_op: dict[str, float], async_windows: Table | None = None
) -> tuple[Table, dict[str, Any], dict[str, Any]]:
    """One row per collective op (see README, Collectives), the totals over them, and what the
    advice needs (per-op facts, instances). ``async_windows`` (start to done)
    give an async collective's bandwidth."""
    window_ps: dict[str, tuple[int, int]] = {}  # start op -> (windows, their total ps)
    if async_windows is not None and async_windows.n:
        names = async_windows.strings("op").tolist()
        for op, dur in zip(names, async_windows.array("dur_ps").tolist(), strict=True):
            count, total = window_ps.get(op, (0, 0))
            window_ps[op] = (count + 1, total + int(dur))
    occ = _occurrences(tl)
    n_windows = max(tl.n_windows, 1)
    names = [v.name for v in tl.devices]
    if not occ.n:
        totals = dict.fromkeys(COLLECTIVE_METRICS)
        totals["interconnect_peak_gbps"] = _link_peak_gbps(tl)
        return _empty_collective_table(), totals, {"rows": [], "device_wait_ms": []}
    instances, of_row = _instances(occ)
    wait = _peer_waits(occ, instances, of_row)
    peak = _link_peak_gbps(tl)
    rows: list[dict[str, Any]] = []
    for op in dict.fromkeys(occ.op):
        at = np.array([o == op for o in occ.op], dtype=bool)
        first = int(np.flatnonzero(at)[0])
        kind = occ.kind[first] or "other"
        fact = occ.facts[first]
        dur = float(occ.dur[at].sum())
        waited = float(wait[at].sum())
        transfer = max(dur - waited, 0.0)
        group = _group_size(fact, op, occ, tl)
        nbytes = fact.bytes if fact is not None else float("nan")
        # nccl-tests counts a reduce-scatter's buffer as its input: n times its result.
        buffer = nbytes * (group or 1) if kind == "reduce-scatter" else nbytes
        sync = occ.role[first] == ""
        count = int(at.sum())
        moved = np.isfinite(buffer) and buffer > 0
        algbw = buffer * count / transfer * 1000.0 if sync and transfer > 0 and moved else None
        if not sync and moved and op in window_ps and window_ps[op][1] > 0:
            # An async collective moves its data from its start to its done: the window.
            algbw = buffer * window_ps[op][0] / window_ps[op][1] * 1000.0
        busbw = algbw * bus_factor(kind, group) if algbw is not None and group else None
        mine = [instances[i] for i in set(of_row[at].tolist()) if i >= 0]
        grouped = [i for i in mine if len(i.devices) > 1]
        spread = float(np.mean([i.spread_ps for i in grouped])) / 1e9 if grouped else None
        last, share = _most_often([i.last for i in grouped])
        rows.append(
            {
                "op": op,
                "kind": kind,
                "bytes": nbytes,
                "group_size": group,
                "count_per_step": count / n_windows,
                "ms_per_step": dur / n_windows / 1e9,
                "exposed_ms_per_step": exposed_by_op.get(op, 0.0),
                "wait_ms": waited / n_windows / 1e9,
                "transfer_ms": transfer / n_windows / 1e9,
                "algbw_gbps": algbw,
                "busbw_gbps": busbw,
                "link_peak_pct": 100.0 * busbw / peak if busbw is not None and peak else None,
                "arrival_spread_ms": spread,
                "last_arriver": names[last] if last is not None else "",
                "last_arriver_pct": 100.0 * share if last is not None else None,
                "_fact": fact,
                "_last_device": last,
                "_instances": len(grouped),
                "_last_count": round(share * len(grouped)) if last is not None else 0,
            }
        )
    rows.sort(key=lambda r: -r["ms_per_step"])
    total_ms = sum(r["ms_per_step"] for r in rows)
    wait_ms = sum(r["wait_ms"] for r in rows)
    recorded = bool((~np.isnan(occ.wait)).any())
    totals = {
        "ms_per_step": total_ms,
        "wait_ms_per_step": wait_ms,
        "transfer_ms_per_step": total_ms - wait_ms,
        "wait_pct": 100.0 * wait_ms / total_ms if total_ms > 0 else None,
        "wait_source": "rendezvous" if recorded else "arrival_spread",
        "interconnect_peak_gbps": peak,
    }
    per_device_wait = np.zeros(len(tl.devices))
    np.add.at(per_device_wait, occ.device, wait)
    # How late each device arrives, summed over the instances it joins: its start less the
    # instance's median start. Random jitter averages out; a device that is late every time
    # (more work before the collective) keeps its lateness, which is what the others wait.
    lateness = np.zeros(len(tl.devices))
    for instance in instances:
        if len(instance.devices) > 1:
            middle = float(np.median(instance.starts))
            for device, start in zip(instance.devices, instance.starts, strict=True):
                lateness[device] += start - middle
    windows = np.array([max(len(v.windows), 1) for v in tl.devices], dtype=np.float64)
    extra = {
        "rows": rows,
        "device_wait_ms": per_device_wait / windows / 1e9,
        "device_lateness_ms": lateness / windows / 1e9,
    }
    table = Table(
        {
            "op": Strings.from_list([r["op"] for r in rows]),
            "kind": Strings.from_list([r["kind"] for r in rows]),
            **{
                name: np.array(
                    [np.nan if r[name] is None else r[name] for r in rows], dtype=np.float64
                )
                for name in _COLLECTIVE_COLUMNS
                if name not in ("op", "kind", "group_size", "last_arriver")
            },
            "group_size": np.array(
                [np.nan if r["group_size"] is None else r["group_size"] for r in rows],
                dtype=np.float64,
            ),
            "last_arriver": Strings.from_list([r["last_arriver"] for r in rows]),
        }
    ).select(_COLLECTIVE_COLUMNS)
    return table, totals, extra


def _group_size(fact: HloCollective | None, op: str, occ: _Occurrences, tl: Timeline) -> int | None:
    """Devices per group: the HLO's, every analysed device for empty groups, a -done half's
    from its -start; None where nothing says."""
    if fact is not None and fact.group_size == EVERY_DEVICE:
        return tl.n_devices
    if fact is not None and fact.group_size:
        return fact.group_size
    partner = re.sub(r"-done(\.\d+)?$", r"-start\1", op)
    if partner != op and partner in occ.op:
        return _group_size(occ.facts[occ.op.index(partner)], partner, occ, tl)
    return None


def _most_often(values: list[int]) -> tuple[int | None, float]:
    if not values:
        return None, 0.0
    counts = np.bincount(np.array(values))
    best = int(np.argmax(counts))
    return best, float(counts[best]) / len(values)


def _link_peak_gbps(tl: Timeline) -> float | None:
    """The per-direction interconnect peak of the analysed chips (the chip table), or None."""
    for view in tl.devices:
        spec = lookup(view.chip)
        if spec is not None and math.isfinite(spec.interconnect_gbps):
            return spec.interconnect_per_direction_gbps
    return None


def collective_columns() -> Table:
    """The per-collective table with no rows."""
    return _empty_collective_table()


def _empty_collective_table() -> Table:
    empty = np.zeros(0)
    none = Strings(np.zeros(0, dtype=np.int64), ())
    columns: dict[str, Any] = {name: empty for name in _COLLECTIVE_COLUMNS}
    columns |= {"op": none, "kind": none, "last_arriver": none}
    return Table(columns)


def _last_arriver(extra: dict[str, Any]) -> dict[str, Any] | None:
    """The device that arrives last most often at the collective with the most waiting."""
    rows = [r for r in extra.get("rows", []) if r["_instances"]]
    if not rows:
        return None
    worst = max(rows, key=lambda r: r["wait_ms"])
    return {
        "op": worst["op"],
        "device": worst["last_arriver"],
        "count": worst["_last_count"],
        "of": worst["_instances"],
    }


def _runs_more(tl: Timeline, position: int) -> tuple[str, list[str]]:
    """What device ``position`` runs more of than the median device: its compute ops with the
    largest excess self time per step, as text and names."""
    per_device: list[dict[str, float]] = []
    for view in tl.devices:
        ops = view.ops.select(("op", "kind", "self_ps")).take(view.selected)
        compute = ops.take(ops.strings("kind").eq(schema.KIND_COMPUTE))
        keys = [compute.strings("op")]
        group, first = group_index(keys)
        total = sum_by(group, len(first), compute.array("self_ps"))
        windows = max(len(view.windows), 1)
        per_device.append(
            {
                name: float(t) / windows / 1e9
                for name, t in zip(keys[0].take(first).tolist(), total.tolist(), strict=True)
            }
        )
    mine = per_device[position]
    others = [d for i, d in enumerate(per_device) if i != position]
    excess = {
        op: ms - median([d.get(op, 0.0) for d in others]) for op, ms in mine.items() if others
    }
    top = sorted((op for op in excess if excess[op] > 0), key=lambda op: -excess[op])[:5]
    more_ms = float(sum(value for value in excess.values() if value > 0))
    if not top:
        return "", []
    text = f"{more_ms:.3f} ms more compute per step, " + ", ".join(
        f"{op} +{excess[op]:.3f} ms" for op in top
    )
    return text, top


# --------------------------------------------------------------------------- megascale

# Advise on DCN collectives when their stall is at least this share of the step.
DCN_STALL_MIN_PCT = 5.0


def _megascale(tl: Timeline) -> list[list[megascale.Occurrence]]:
    """Per analysed device, its megascale occurrences whose send starts in a selected
    window (see tpuperf/megascale.py); empty where no device has DCN host transfers."""
    out: list[list[megascale.Occurrence]] = []
    for view in tl.devices:
        ops = view.ops
        category = ops.strings("category")
        dcn_codes = np.array(
            [schema.is_dcn_category(c) for c in category.values] + [False], dtype=bool
        )
        rows = (
            np.flatnonzero(category.per_row(dcn_codes))
            if _reachable(category, dcn_codes).any()
            else np.zeros(0, dtype=np.int64)
        )
        if not len(rows):
            out.append([])
            continue
        from tpuperf import megascale  # DCN host transfers' reader: where a device has them

        names = ops.strings("op").take(rows).tolist()
        texts = ops.strings("hlo_text").take(rows).tolist()
        starts = ops.array("start_ps")[rows].tolist()
        durs = ops.array("dur_ps")[rows].tolist()
        occ = megascale.occurrences(
            megascale.DcnOp(n, t, int(s), int(d))
            for n, t, s, d in zip(names, texts, starts, durs, strict=True)
        )
        w = view.windows
        out.append(
            [
                o
                for o in occ
                if bool(((w.start_ps <= o.send_start_ps) & (o.send_start_ps < w.end_ps)).any())
            ]
        )
    return out if any(out) else []


def _megascale_table(per_device: list[list[megascale.Occurrence]]) -> Table:
    from tpuperf import megascale

    rows = megascale.summarize(per_device)
    columns: dict[str, Any] = {}
    for name in megascale.COLUMNS:
        values = [r[name] for r in rows]
        if values and isinstance(values[0], str):
            uniq = tuple(str(v) for v in dict.fromkeys(values))
            codes = np.array([uniq.index(v) for v in values], dtype=np.int32)
            columns[name] = Strings(codes, uniq)
        else:
            columns[name] = np.asarray(values, dtype=np.int64 if name == "occurrences" else float)
    return Table(columns)


def _megascale_metrics(
    per_device: list[list[megascale.Occurrence]], tl: Timeline
) -> dict[str, Any]:
    every = [o for device in per_device for o in device]
    stall = sum(o.stall_ps for o in every)
    done = sum(o.done_ps for o in every)
    observed = sum(o.observed_ps for o in every)
    return {
        "collectives": len({o.rendezvous for o in every}),
        "stall_ms_per_step": tl.per_step(stall) / 1e9,
        "done_stall_ms_per_step": tl.per_step(done) / 1e9,
        "observed_ms_per_step": tl.per_step(observed) / 1e9,
        "stall_pct": savings_pct(tl.per_step(stall) / 1e9, tl.mean_window_ps / 1e9),
    }
