"""roofline: achieved FLOP/s and GB/s per op and per program against the chip's roofs."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from tpuperf.analyzers import fixes
from tpuperf.analyzers.base import (
    KIND_LOW_COMPUTE_UTILIZATION,
    KIND_MEMORY_BOUND,
    AnalysisConfig,
    Analyzer,
    AnalyzerResult,
    Recommendation,
    savings_pct,
)
from tpuperf.roofline import chips
from tpuperf.roofline import model as rl

from tpuperf import kernels
from tpuperf.columns import Lookup, Strings, Table, as_run, distinct, group_index, sum_by
from tpuperf.timeline import DeviceView, Timeline, window_of
from tpuperf.workload import Workload


class RooflineAnalyzer(Analyzer):
    name = "roofline"
    summary = "Per-op and per-program FLOP/s, GB/s, intensity, bound and roofline efficiency; MFU."
    requires: ClassVar[dict[str, list[str]]] = {
        "devices": ["host", "device", "chip", "peak_tflops", "peak_hbm_gbps"],
        "ops": [
            "host",
            "device",
            "module",
            "op",
            "kind",
            "start_ps",
            "dur_ps",
            "self_ps",
            "flops",
            "model_flops",
            "bytes_accessed",
        ],
        "modules": ["host", "device", "module", "start_ps", "dur_ps"],
    }

    def analyze(self, timeline: Timeline, config: AnalysisConfig) -> AnalyzerResult:
        tl = timeline
        result = AnalyzerResult(self.name, notes=list(tl.notes))
        peaks_by_device = tl.peaks
        peaks = rl.common_peaks(peaks_by_device)
        if peaks is None:
            result.metrics = {"peaks": None}
            result.notes.append("no device ran ops: nothing to put on a roofline")
            return result
        metrics: dict[str, Any] = {
            "peaks": {
                "chip": peaks.chip or None,
                "peak_tflops": peaks.peak_tflops,
                "peak_hbm_gbps": peaks.peak_hbm_gbps,
                "tflops_source": peaks.tflops_source,
                "hbm_source": peaks.hbm_source,
                "ridge_flop_per_byte": (
                    rl.ridge_point(peaks.peak_tflops, peaks.peak_hbm_gbps)  # type: ignore[arg-type]
                    if peaks.known
                    else None
                ),
            }
        }
        result.metrics = metrics
        costed, leaves = _costed(tl, peaks_by_device)
        counted = int(costed.array("count").sum()) if costed.n else 0
        metrics["ops_with_costs_pct"] = 100.0 * counted / leaves if leaves else None
        # One reason, the one that applies: without per-op costs, peaks would not help.
        if not costed.n:
            result.notes.append(
                "this profile records no per-op FLOPs or bytes (GPU and CPU profiles usually do "
                "not): no per-op roofline"
            )
        elif not peaks.known:
            missing = peaks.missing_flags
            result.notes.append(
                f"peaks unknown for chip {peaks.chip or 'unknown'!r}: the profile records no peak "
                "FLOP/s or HBM bandwidth and the chip table has no entry for it, so there is no "
                f"roofline, bound or utilization. Pass {' and '.join(missing)} "
                "(dense bf16 TFLOP/s, HBM GB/s) to get one."
            )
        metrics.update(rl.utilization(tl, peaks_by_device))
        if not costed.n:
            return result

        per_op = self._per_op(costed, tl, peaks)
        result.tables["ops"] = per_op
        result.tables["programs"] = self._per_program(tl, costed, peaks)
        if not peaks.known or "bound" not in per_op:
            return result
        bound = per_op.strings("bound")
        for kind in (rl.BOUND_MEMORY, rl.BOUND_COMPUTE):
            rows = bound.eq(kind)
            metrics[f"{kind}_bound_ms_per_step"] = float(per_op.array_at("ms_per_step", rows).sum())
            metrics[f"{kind}_bound_lost_ms_per_step"] = float(
                per_op.array_at("lost_ms_per_step", rows).sum()
            )
        step_ms = tl.mean_window_ps / 1e9
        mem = per_op.take(bound.eq(rl.BOUND_MEMORY))
        if mem.array("lost_ms_per_step").sum() > 0:
            result.recommendations.append(
                self._memory_rec(mem, peaks, step_ms, fixes.workload_of(tl))
            )
        comp = per_op.take(bound.eq(rl.BOUND_COMPUTE))
        if comp.array("lost_ms_per_step").sum() > 0:
            result.recommendations.append(
                self._compute_rec(comp, peaks, step_ms, metrics, fixes.workload_of(tl))
            )
        return result

    def _per_op(self, costed: Table, tl: Timeline, peaks: chips.Peaks) -> Table:
        """One row per (module, op): totals over selected steps and devices, on the roofline."""
        n = max(tl.n_windows, 1)
        dur = costed.array("dur_ps")
        flops, nbytes = costed.array("flops"), costed.array("bytes_accessed")
        table = Table(
            {
                "module": costed["module"],
                "op": costed["op"],
                "dur_ps": dur,
                "flops": flops,
                "bytes_accessed": nbytes,
                **rl.roofline_columns(flops, nbytes, dur, peaks.peak_tflops, peaks.peak_hbm_gbps),
                "ms_per_step": dur / n / 1e9,
                "lost_ms_per_step": costed.array("lost_ps") / n / 1e9,
                "count_per_step": costed.array("count") / n,
            }
        )
        return table.take(np.argsort(-table.array("ms_per_step"), kind="stable"))

    def _per_program(self, tl: Timeline, costed: Table, peaks: chips.Peaks) -> Table:
        """One row per module: its FLOPs and bytes over the time its executions took."""
        module = costed.strings("module")
        names = sorted(set(module.tolist()))
        index = {name: i for i, name in enumerate(names)}
        of_row = np.array([index[m] for m in module.tolist()], dtype=np.int64)
        k = len(names)
        flops_a = np.bincount(of_row, weights=costed.array("flops"), minlength=k)
        bytes_a = np.bincount(of_row, weights=costed.array("bytes_accessed"), minlength=k)
        op_ps = sum_by(of_row, k, costed.array("dur_ps"))
        # The executions of each module that start in a selected window, over all devices.
        run_ps = np.zeros(k, dtype=np.int64)
        runs = np.zeros(k, dtype=np.int64)
        seen = np.zeros(k, dtype=bool)
        for view in tl.devices:
            modules = view.tables.modules
            if not modules.n:
                continue
            inside = window_of(
                modules.array("start_ps"), view.windows.start_ps, view.windows.end_ps
            )
            rows = np.flatnonzero(inside >= 0)
            name = modules.strings("module").take(rows)
            of_value = np.array([index.get(v, -1) for v in name.values] + [-1], dtype=np.int64)
            which = of_value[name.codes] if len(rows) else np.zeros(0, dtype=np.int64)
            known = which >= 0
            run_ps += sum_by(which[known], k, modules.array_at("dur_ps", rows)[known])
            counts = np.bincount(which[known], minlength=k)
            runs += counts
            seen |= counts > 0
        # Without module executions (some GPU/CPU profiles) the ops' own time stands in.
        dur_ps = np.where(seen, run_ps, op_ps)
        columns: dict[str, Any] = {
            "module": Strings.from_list(names),
            "flops": flops_a,
            "bytes_accessed": bytes_a,
            "dur_ps": dur_ps,
            "executions": runs,
            **rl.roofline_columns(flops_a, bytes_a, dur_ps, peaks.peak_tflops, peaks.peak_hbm_gbps),
        }
        if peaks.peak_tflops is not None:
            columns["flops_utilization_pct"] = (
                100.0 * columns["achieved_tflops"] / peaks.peak_tflops
            )
        table = Table(columns)
        return table.take(np.argsort(-dur_ps, kind="stable"))

    def _memory_rec(
        self, mem: Table, peaks: chips.Peaks, step_ms: float, workload: Workload
    ) -> Recommendation:
        lost_ms = float(mem.array("lost_ms_per_step").sum())
        time_ms = float(mem.array("ms_per_step").sum())
        top = _top(mem, "lost_ms_per_step", 5)
        gbps = float(mem.array("bytes_accessed").sum() / mem.array("dur_ps").sum() * 1000.0)
        ops_text = ", ".join(
            f"{r['op']} {r['ms_per_step']:.3f} ms at {r['achieved_gbps']:.0f} GB/s"
            for r in top.records()
        )
        return Recommendation(
            analyzer=self.name,
            kind=KIND_MEMORY_BOUND,
            title="Memory-bound ops run below HBM bandwidth",
            evidence=(
                f"{mem.n} memory-bound ops take {time_ms:.3f} ms per step at {gbps:.0f} GB/s "
                f"({100 * gbps / peaks.peak_hbm_gbps:.0f}% of {peaks.peak_hbm_gbps:.0f} GB/s); at "  # type: ignore[operator]
                f"full bandwidth they would take {time_ms - lost_ms:.3f} ms. Top: {ops_text}"
            ),
            fix=fixes.memory_bound(workload),
            est_savings_ms=lost_ms,
            est_savings_pct=savings_pct(lost_ms, step_ms),
            confidence="medium",
            ops=top.strings("op").tolist(),
            values={
                "memory_bound_ms_per_step": time_ms,
                "achieved_gbps": gbps,
                "peak_hbm_gbps": peaks.peak_hbm_gbps,
            },
        )

    def _compute_rec(
        self,
        comp: Table,
        peaks: chips.Peaks,
        step_ms: float,
        metrics: dict[str, Any],
        workload: Workload,
    ) -> Recommendation:
        lost_ms = float(comp.array("lost_ms_per_step").sum())
        time_ms = float(comp.array("ms_per_step").sum())
        top = _top(comp, "lost_ms_per_step", 5)
        tflops = float(comp.array("flops").sum() / comp.array("dur_ps").sum())
        ops_text = ", ".join(
            f"{r['op']} {r['ms_per_step']:.3f} ms at {r['achieved_tflops']:.0f} TFLOP/s"
            for r in top.records()
        )
        util = metrics.get("flops_utilization_pct")
        return Recommendation(
            analyzer=self.name,
            kind=KIND_LOW_COMPUTE_UTILIZATION,
            title="Compute-bound ops run below peak FLOP/s",
            evidence=(
                f"{comp.n} compute-bound ops take {time_ms:.3f} ms per step at {tflops:.0f} "
                f"TFLOP/s ({100 * tflops / peaks.peak_tflops:.0f}% of {peaks.peak_tflops:.0f}); "  # type: ignore[operator]
                f"at peak they would take {time_ms - lost_ms:.3f} ms"
                + (f"; program FLOP utilization {util:.1f}%" if util is not None else "")
                + f". Top: {ops_text}"
            ),
            fix=fixes.compute_bound(workload),
            est_savings_ms=lost_ms,
            est_savings_pct=savings_pct(lost_ms, step_ms),
            # FLOP counts are XLA's estimates and peaks are rarely reachable: a loose bound.
            confidence="low",
            ops=top.strings("op").tolist(),
            values={"compute_bound_ms_per_step": time_ms, "achieved_tflops": tflops},
        )


def _top(table: Table, column: str, n: int) -> Table:
    """The ``n`` rows with the largest ``column``, largest first."""
    order = np.argsort(-table.array(column), kind="stable")
    return table.take(order[:n])


def _costed(tl: Timeline, peaks_by_device: dict[tuple[str, int], chips.Peaks]) -> tuple[Table, int]:
    """The leaf compute ops of the selected windows that record FLOPs or bytes, summed per
    (module, op) over all devices (in order of first appearance): count, dur_ps, flops,
    bytes_accessed, and lost_ps, the time they lose against the roofline of their device's
    peaks (never negative, costs being estimates); and how many leaf ops there were."""
    names: list[tuple[Strings, Strings]] = []  # each device's groups' (module, op)
    sums: list[tuple[np.ndarray, ...]] = []  # and their sums
    leaves = 0
    for view in tl.devices:
        leaves += len(view.leaves)
        device = _device_sums(view, peaks_by_device.get(view.key))
        if device is not None:
            names.append(device[0])
            sums.append(device[1])
    ids, module, op = _number_groups(names)
    n = len(module)
    totals = (
        np.zeros(n, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
        np.zeros(n),
        np.zeros(n),
        np.zeros(n),
    )
    for at, device_sums in zip(ids, sums, strict=True):  # device by device, as always added
        for total, column in zip(totals, device_sums, strict=True):
            total[at] += column  # a device's groups are distinct: no index repeats
    count, dur_ps, flops_sum, bytes_sum, lost_sum = totals
    return (
        Table(
            {
                "module": Strings.from_list(module),
                "op": Strings.from_list(op),
                "count": count,
                "dur_ps": dur_ps,
                "flops": flops_sum,
                "bytes_accessed": bytes_sum,
                "lost_ps": lost_sum,
            }
        ),
        leaves,
    )


def _number_groups(
    names: list[tuple[Strings, Strings]],
) -> tuple[list[np.ndarray], list[str], list[str]]:
    """Number the (module, op) groups of every device over all devices, in order of first
    appearance (device by device, each device's groups in their order): each device's
    groups' numbers, and each number's module and op. Only the distinct names are hashed; the
    pairs are numbered as integers."""
    if not names:
        return [], [], []
    module_ids: dict[str, int] = {}
    op_ids: dict[str, int] = {}
    module_of = np.concatenate([_ids(module, module_ids) for module, _ in names])
    op_of = np.concatenate([_ids(op, op_ids) for _, op in names])
    pair = module_of * len(op_ids) + op_of  # one integer per (module, op)
    size = len(module_ids) * len(op_ids)
    number, first = (
        kernels.dense_groups(pair, size)
        if size <= 4 * len(pair) + 1024
        else group_index([module_of, op_of])
    )
    splits = np.cumsum([len(module) for module, _ in names])[:-1]
    module_names = np.array(list(module_ids), dtype=object)
    op_names = np.array(list(op_ids), dtype=object)
    return (
        np.split(number, splits),
        module_names[module_of[first]].tolist(),
        op_names[op_of[first]].tolist(),
    )


def _ids(strings: Strings, ids: dict[str, int]) -> np.ndarray:
    """Each row's number in ``ids`` (a string's number, numbering new strings as they come)."""
    new = [value for value in strings.values if value not in ids]  # (values are distinct)
    ids.update(zip(new, range(len(ids), len(ids) + len(new)), strict=True))
    per_code = np.fromiter(map(ids.__getitem__, strings.values), np.int64, len(strings.values))
    return per_code[strings.codes]


def _device_sums(
    view: DeviceView, peak: chips.Peaks | None
) -> tuple[tuple[Strings, Strings], tuple[np.ndarray, ...]] | None:
    """One device's costed leaf ops summed per (module, op), groups in order of first
    appearance: the groups' module and op, and per group (count, dur_ps, flops,
    bytes_accessed, lost_ps); None when no leaf op is costed.

    On TPU an op's names and costs are stored once per metadata row (one shared index), and
    a (module, op) is one metadata row as a rule: then the costs and the ideal time are read
    once per group, and only durations and lost time per op. The sums are, to the last bit,
    those of adding the ops' values one by one in row order (np.bincount).
    """
    ops, rows = view.ops, view.leaves
    by_row = _by_metadata_row(ops)
    count: np.ndarray
    if by_row is None:
        flops = ops.array_at("flops", rows).astype("float64", copy=False)
        nbytes = ops.array_at("bytes_accessed", rows).astype("float64", copy=False)
        costed = ~np.isnan(flops) | ~np.isnan(nbytes)
        if not costed.all():
            rows, flops, nbytes = rows[costed], flops[costed], nbytes[costed]
    else:
        index, flops_v, bytes_v = by_row
        count_v = view.leaf_counts(index, len(flops_v))
        costed_v = ~np.isnan(flops_v) | ~np.isnan(bytes_v)
        if not costed_v[count_v > 0].all():
            rows = rows[costed_v[index[rows]]]
            count_v = np.bincount(index[rows], minlength=len(flops_v))
    if not len(rows):
        return None
    # flops and nbytes: one value per group when each group is one metadata row, else per op.
    per_group = by_row is not None and _names_distinct(ops, np.flatnonzero(count_v))
    known = peak is not None and peak.known  # else no roofline to lose time against
    lost_sum: np.ndarray
    if per_group:
        # Grouped by metadata row and summed in one pass over the leaves (views of the
        # columns where they are one run of ops): the costs and the ideal time are read per
        # metadata row, the durations and the time lost per op.
        ideal_v = np.full(len(flops_v), np.inf)  # no cost the peaks can use: nothing lost
        if known:
            ideal = rl.ideal_time_ps(flops_v, bytes_v, peak.peak_tflops, peak.peak_hbm_gbps)  # type: ignore[union-attr,arg-type]
            ideal_v[~np.isnan(ideal)] = ideal[~np.isnan(ideal)]
        run = as_run(rows)
        sums = kernels.roofline_sums(
            index[run],
            len(flops_v),
            ops.array_at("dur_ps", run),
            np.nan_to_num(flops_v),
            np.nan_to_num(bytes_v),
            ideal_v,
        )
        if sums is None:  # pragma: no cover - a shared index names rows of its values
            raise IndexError("an op's metadata row is outside its table")
        first, dur_sum, flops_sum, bytes_sum, lost_sum = sums
        k = len(first)
        count = count_v[index[rows[first]]]
        if not known:
            lost_sum = np.zeros(k)
    else:
        named = ops.select(("module", "op")).take(rows)  # their shared index stays shared
        group, first = group_index([named.strings("module"), named.strings("op")])
        k = len(first)
        dur = ops.array_at("dur_ps", rows)
        if by_row is not None:
            flops, nbytes = flops_v[index[rows]], bytes_v[index[rows]]
        count = np.bincount(group, minlength=k)
        flops_sum = np.bincount(group, weights=np.nan_to_num(flops), minlength=k)
        bytes_sum = np.bincount(group, weights=np.nan_to_num(nbytes), minlength=k)
        if known:
            ideal = rl.ideal_time_ps(flops, nbytes, peak.peak_tflops, peak.peak_hbm_gbps)  # type: ignore[union-attr,arg-type]
            ideal[np.isnan(ideal)] = np.inf  # no cost the peaks can use: nothing lost
            lost = dur - ideal
            np.clip(lost, 0, None, out=lost)
            lost_sum = np.bincount(group, weights=lost, minlength=k)
        else:
            lost_sum = np.zeros(k)
        dur_sum = sum_by(group, k, dur)
    keys = (ops.strings("module").take(rows[first]), ops.strings("op").take(rows[first]))
    return keys, (count, dur_sum, flops_sum, bytes_sum, lost_sum)


def _names_distinct(ops: Table, meta: np.ndarray) -> bool:
    """Whether the metadata rows ``meta`` all have different (module, op) names: then grouping
    ops by metadata row is grouping them by name."""
    module, op = ops.strings("module"), ops.strings("op")
    if module.mapping is None or op.mapping is None:
        return False
    width = len(op.values) + 1
    pair = module.mapping[meta].astype(np.int64) * width + op.mapping[meta] + 1
    return len(distinct(pair)) == len(meta)


def _by_metadata_row(ops: Table) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(the shared index, FLOPs and bytes per index value as float64) when the ops' module,
    op, flops and bytes_accessed all read one shared index (TPU: the metadata row); else
    None."""
    module, op = ops["module"], ops["op"]
    flops, nbytes = ops["flops"], ops["bytes_accessed"]
    if not (
        isinstance(module, Strings)
        and isinstance(op, Strings)
        and isinstance(flops, Lookup)
        and isinstance(nbytes, Lookup)
        and module.mapping is not None
        and module.index is op.index is flops.index is nbytes.index
    ):
        return None
    return (
        flops.index,
        flops.values.astype("float64", copy=False),
        nbytes.values.astype("float64", copy=False),
    )
