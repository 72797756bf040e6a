"""collectives: exposed collective time by kind, async overlap, exposed async copies."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import numpy as np
from tpuperf.analyzers import fixes
from tpuperf.analyzers.base import (
    KIND_EXPOSED_ASYNC_COPY,
    KIND_EXPOSED_COLLECTIVE,
    KIND_REDUCE_COPIES,
    AnalysisConfig,
    Analyzer,
    AnalyzerResult,
    Recommendation,
    savings_pct,
)
from tpuperf.analyzers.steps import modified_z

from tpuperf import schema
from tpuperf.async_windows import pair_async
from tpuperf.columns import (
    Strings,
    Table,
    concat_strings,
    distinct,
    factorize,
    group_index,
    median,
    sum_by,
)
from tpuperf.timeline import DeviceView, Timeline, measure_in, window_of

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

# replica_groups={{0,1,2,3},{4,5,6,7}} (explicit) or replica_groups=[2,4]<=[8] (iota).
_GROUPS_EXPLICIT = re.compile(r"replica_groups=\{\{([^}]*)\}")
_GROUPS_IOTA = re.compile(r"replica_groups=\[(\d+),(\d+)\]")

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
    match = _GROUPS_EXPLICIT.search(hlo_text)
    if match:
        return len([x for x in match.group(1).split(",") if x.strip()])
    match = _GROUPS_IOTA.search(hlo_text)
    if match:
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
        if coll.n:
            result.tables["collective_ops"] = _top_ops(coll, tl)
        if windows.n:
            result.tables["async_windows"] = windows
        if copies.n:
            result.tables["copy_ops"] = _top_ops(copies, tl)

        step_ms = tl.mean_window_ps / 1e9
        outside = self._outside(tl)
        metrics["outside_steps"] = outside or None
        rec = self._collective_rec(coll, by_kind, outside, step_ms, config, tl)
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
    ) -> Recommendation | None:
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
        # Overlap hides a collective behind compute, so it saves at most the compute there is.
        hideable_ms = min(in_step_ms, compute_ms)
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

    def _outside(self, tl: Timeline) -> dict[str, Any]:
        """Exposed collectives on the devices but outside every step (setup, one-off calls)."""
        if not tl.has_steps or not tl.devices:
            return {}
        exposed_ps = float(np.mean([v.outside["exposed_collective_ps"] for v in tl.devices]))
        if exposed_ps <= 0:
            return {}
        rows = {}
        for view in tl.devices:
            outside = tl.outside_rows(view)
            kind = view.ops.strings("kind").take(outside)
            rows[view.key] = outside[kind.eq(schema.KIND_COLLECTIVE)]
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
        hide_ms = min(copy_ms, compute_ms)
        hide = Recommendation(
            analyzer=self.name,
            kind=KIND_EXPOSED_ASYNC_COPY,
            title="Exposed copies: issue "
            + ("host-offload copies" if is_tpu else "memcpys")
            + " early enough for compute to hide them",
            evidence=(
                f"{copy_ms:.3f} ms per step waiting on {what} with no compute beside them; "
                f"top: {ops_text}. Overlap can hide at most the {compute_ms:.3f} ms of compute "
                "per step there is to hide them behind"
            ),
            fix=fixes.hide_copies(fixes.workload_of(tl)),
            est_savings_ms=hide_ms,
            est_savings_pct=savings_pct(hide_ms, step_ms),
            confidence="medium",
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
        remove = Recommendation(
            analyzer=self.name,
            kind=KIND_REDUCE_COPIES,
            title="Transfer less: "
            + ("host-offload copies" if is_tpu else "memcpys")
            + " hold up every step",
            evidence=f"{copy_ms:.3f} ms per step waiting on {what}{traffic}; top: {ops_text}",
            fix=fixes.reduce_copies(fixes.workload_of(tl)),
            est_savings_ms=copy_ms,
            est_savings_pct=savings_pct(copy_ms, step_ms),
            confidence="medium",
            ops=ops,
            values={"exposed_copy_ms_per_step": copy_ms, **moved},
        )
        return [hide, remove]


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


def _exposure(tl: Timeline, rows: dict[tuple[str, int], np.ndarray]) -> Table:
    """The non-compute ops among ``rows`` of each device, with ``exposed_ps``: their time in
    the device's exposed collective (collectives) or other (copies) set, the part no compute
    covered. One table over the devices, in device order."""
    hosts: list[Strings] = []
    device: list[np.ndarray] = []
    strings: dict[str, list[Strings]] = {name: [] for name in _EXPOSURE_STRINGS}
    numbers: dict[str, list[np.ndarray]] = {
        "start_ps": [],
        "dur_ps": [],
        "bytes_accessed": [],
        "exposed_ps": [],
    }
    for view in tl.devices:
        picked = rows.get(view.key)
        if picked is None or not len(picked):
            continue
        # Only the non-compute ops are copied: a step's collectives and copies are few.
        picked = picked[~view.ops.strings("kind").take(picked).eq(schema.KIND_COMPUTE)]
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
        hosts.append(Strings.constant(view.host, ops.n))
        device.append(np.full(ops.n, view.device, dtype=np.int64))
        for name in _EXPOSURE_STRINGS:
            strings[name].append(ops.strings(name))
        numbers["start_ps"].append(start)
        numbers["dur_ps"].append(ops.array("dur_ps"))
        numbers["bytes_accessed"].append(ops.array("bytes_accessed").astype("float64"))
        numbers["exposed_ps"].append(exposed)
    empty = np.zeros(0, dtype=np.int64)
    return Table(
        {
            "host": concat_strings(hosts) if hosts else Strings(empty, ()),
            "device": np.concatenate(device) if device else empty,
            **{
                name: concat_strings(parts) if parts else Strings(empty, ())
                for name, parts in strings.items()
            },
            **{name: np.concatenate(parts) if parts else empty for name, parts in numbers.items()},
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
    hosts: list[Strings] = []
    parts: dict[str, list[Any]] = {
        name: [] for name in ("device", "op", "kind", "start_ps", "dur_ps", "overlap_pct")
    }
    for view in tl.devices:
        found = _async_line(view) or _pair_async(view)
        if found is None:
            continue
        op, kind, s, e = found
        inside = np.flatnonzero(window_of(s, view.windows.start_ps, view.windows.end_ps) >= 0)
        s, e = s[inside], e[inside]
        covered = measure_in(view.sets.compute, s, e)
        hosts.append(Strings.constant(view.host, len(inside)))
        parts["device"].append(np.full(len(inside), view.device, dtype=np.int64))
        parts["op"].append(op.take(inside))
        parts["kind"].append(kind.take(inside))
        parts["start_ps"].append(s)
        parts["dur_ps"].append(e - s)
        parts["overlap_pct"].append(100.0 * covered / np.maximum(e - s, 1))
    if not hosts:
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
    overlap = np.concatenate(parts["overlap_pct"])
    fraction = overlap / 100.0
    # overlap_class, vectorised: 0 hidden, 1 exposed, 2 partial.
    classes = np.where(fraction >= HIDDEN_MIN, 0, np.where(fraction <= EXPOSED_MAX, 1, 2))
    return Table(
        {
            "host": concat_strings(hosts),
            "device": np.concatenate(parts["device"]),
            "op": concat_strings(parts["op"]),
            "kind": concat_strings(parts["kind"]),
            "start_ps": np.concatenate(parts["start_ps"]),
            "dur_ps": np.concatenate(parts["dur_ps"]),
            "overlap_pct": overlap,
            "class": Strings(classes.astype(np.int32), ("hidden", "exposed", "partial")).compact(),
        }
    )


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
