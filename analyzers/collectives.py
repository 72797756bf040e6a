"""collectives: exposed collective time by kind, async overlap, exposed async copies."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd
from tpuperf.analyzers import _intervals as iv
from tpuperf.analyzers import _timeline
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

if TYPE_CHECKING:
    from tpuperf.profile import Profile

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

    def analyze(self, profile: Profile, config: AnalysisConfig) -> AnalyzerResult:
        tl = _timeline.timeline(profile, config)
        result = AnalyzerResult(self.name, notes=list(tl.notes))
        bd = tl.breakdown
        if bd.empty:
            result.metrics = {"exposed_collective_pct": None}
            return result
        dev = bd.groupby(["host", "device"], sort=True)[
            ["step_ps", "exposed_collective_ps", "compute_ps", "other_ps"]
        ].sum()
        exposed_pct = float((100.0 * dev["exposed_collective_ps"] / dev["step_ps"]).mean())
        ops = self._op_exposure(tl, tl.ops)
        coll = ops[ops["kind"] == schema.KIND_COLLECTIVE]
        by_kind = self._by_kind(coll, tl)
        windows = self._async_windows(profile, tl)
        copies = ops[ops["kind"].isin([schema.KIND_ASYNC_COPY, schema.KIND_MEMCPY])]
        copy_ms = tl.per_step(float(dev["other_ps"].sum())) / 1e9
        total_coll_ps = float(coll["dur_ps"].sum())
        metrics: dict[str, Any] = {
            "exposed_collective_pct": exposed_pct,
            "exposed_collective_ms_per_step": tl.per_step(float(dev["exposed_collective_ps"].sum()))
            / 1e9,
            "collective_ms_per_step": tl.per_step(total_coll_ps) / 1e9,
            # On GPU this is the NCCL/RCCL kernel time that compute kernels hid.
            "collective_overlapped_pct": (
                100.0 * (1 - float(coll["exposed_ps"].sum()) / total_coll_ps)
                if total_coll_ps > 0
                else None
            ),
            "by_kind": by_kind,
            "async": self._async_summary(windows),
            "exposed_copy_ms_per_step": copy_ms,
            "exposed_copy_pct": float((100.0 * dev["other_ps"] / dev["step_ps"]).mean()),
        }
        result.metrics = metrics
        if not coll.empty:
            result.tables["collective_ops"] = _top_ops(coll, tl)
        if not windows.empty:
            result.tables["async_windows"] = windows
        if not copies.empty:
            result.tables["copy_ops"] = _top_ops(copies, tl)

        step_ms = tl.mean_window_ps / 1e9
        outside = self._outside(profile, tl)
        metrics["outside_steps"] = outside or None
        rec = self._collective_rec(bd, coll, by_kind, outside, step_ms, config, tl)
        if rec is not None:
            result.recommendations.append(rec)
        if copy_ms > 0 and not copies.empty:
            compute_ms = tl.per_step(float(dev["compute_ps"].sum())) / 1e9
            result.recommendations.extend(
                self._copy_recs(copies, windows, copy_ms, compute_ms, step_ms, tl)
            )
        return result

    def _op_exposure(self, tl: _timeline.Timeline, ops: pd.DataFrame) -> pd.DataFrame:
        """Non-compute ``ops`` with ``exposed_ps``: their time in the device's exposed
        collective or other set (the part no compute covered)."""
        parts = []
        for (host, device), group in ops.groupby(["host", "device"], observed=True, sort=False):
            sets = tl.sets.get((str(host), int(device)))
            if sets is None:
                continue
            group = group[group["kind"] != schema.KIND_COMPUTE].copy()
            if group.empty:
                continue
            s = group["start_ps"].to_numpy(dtype="int64")
            e = s + group["dur_ps"].to_numpy(dtype="int64")
            exposed_coll = iv.measure_in(sets.collective, s, e)
            exposed_other = iv.measure_in(sets.other, s, e)
            group["exposed_ps"] = np.where(
                group["kind"] == schema.KIND_COLLECTIVE, exposed_coll, exposed_other
            )
            parts.append(group)
        if not parts:
            out = ops.iloc[0:0].copy()
            out["exposed_ps"] = pd.Series(dtype="int64")
            return out
        out = pd.concat(parts, ignore_index=True)
        for col in ("kind", "collective", "async_role", "op"):
            out[col] = out[col].astype(str)
        return out

    def _by_kind(self, coll: pd.DataFrame, tl: _timeline.Timeline) -> dict[str, Any]:
        out: dict[str, Any] = {}
        n_windows = len(tl.windows)
        step_ps = float(tl.breakdown["step_ps"].sum())
        for kind, group in coll.groupby("collective", sort=True):
            kind = str(kind) or "other"
            sizes = sorted(
                {
                    s
                    for s in (replica_group_size(str(t)) for t in group["hlo_text"].unique())
                    if s is not None
                }
            )
            out[kind] = {
                "exposed_ms_per_step": float(group["exposed_ps"].sum()) / n_windows / 1e9,
                "exposed_pct": 100.0 * float(group["exposed_ps"].sum()) / step_ps
                if step_ps
                else 0.0,
                "ms_per_step": float(group["dur_ps"].sum()) / n_windows / 1e9,
                "ops_per_step": len(group) / n_windows,
                "sync_ops_per_step": int((group["async_role"] == "").sum()) / n_windows,
                "async_ops_per_step": int((group["async_role"] != "").sum()) / n_windows,
                "replica_group_sizes": sizes,
            }
        return out

    def _async_windows(self, profile: Profile, tl: _timeline.Timeline) -> pd.DataFrame:
        """One row per async window (start to done) that starts in a selected step.

        A device's windows come from its `Async XLA Ops` line when it has one, else
        from pairing its ``-start``/``-done`` ops, device by device (as XProf does:
        on the v6e profile only TPU:0 has the line).
        """
        frame = profile.async_ops.copy()
        frame["host"] = frame["host"].astype(str)
        frame["end_ps"] = frame["start_ps"] + frame["dur_ps"]
        frame["kind"] = [
            _async_kind(c, cat)
            for c, cat in zip(
                frame["collective"].astype(str), frame["category"].astype(str), strict=True
            )
        ]
        frame["op"] = frame["op"].astype(str)
        frame = frame[["host", "device", "op", "kind", "start_ps", "end_ps", "dur_ps"]]
        with_line = set(zip(frame["host"], frame["device"], strict=True))
        paired = _pair_async(tl.ops)
        if not paired.empty:
            without_line = [
                (h, d) not in with_line
                for h, d in zip(paired["host"], paired["device"], strict=True)
            ]
            frame = pd.concat([frame, paired[without_line]], ignore_index=True)
        if frame.empty:
            return pd.DataFrame(columns=["host", "device", "op", "kind", "start_ps", "dur_ps"])
        rows = []
        for (host, device), group in frame.groupby(["host", "device"], sort=True):
            sets = tl.sets.get((str(host), int(device)))
            win = tl.windows[(tl.windows["host"] == host) & (tl.windows["device"] == device)]
            if sets is None or win.empty:
                continue
            s = group["start_ps"].to_numpy(dtype="int64")
            e = group["end_ps"].to_numpy(dtype="int64")
            ws = win["start_ps"].to_numpy(dtype="int64")
            we = win["end_ps"].to_numpy(dtype="int64")
            idx = np.searchsorted(ws, s, side="right") - 1
            inside = idx >= 0
            inside[inside] = s[inside] < we[idx[inside]]
            covered = iv.measure_in(sets.compute, s, e)
            length = np.maximum(e - s, 1)
            part = pd.DataFrame(
                {
                    "host": str(host),
                    "device": int(device),
                    "op": group["op"].to_numpy(),
                    "kind": group["kind"].to_numpy(),
                    "start_ps": s,
                    "dur_ps": e - s,
                    "overlap_pct": 100.0 * covered / length,
                }
            )[inside]
            rows.append(part)
        if not rows:
            return pd.DataFrame(columns=["host", "device", "op", "kind", "start_ps", "dur_ps"])
        out = pd.concat(rows, ignore_index=True)
        out["class"] = [overlap_class(f / 100.0) for f in out["overlap_pct"]]
        return out

    def _async_summary(self, windows: pd.DataFrame) -> dict[str, Any]:
        if windows.empty:
            return {"windows": 0, "hidden": 0, "partial": 0, "exposed": 0, "by_kind": {}}

        def counts(frame: pd.DataFrame) -> dict[str, Any]:
            classes = frame["class"].value_counts()
            return {
                "windows": len(frame),
                "hidden": int(classes.get("hidden", 0)),
                "partial": int(classes.get("partial", 0)),
                "exposed": int(classes.get("exposed", 0)),
                # Weighted by window length: the share of async time compute covered.
                "overlap_pct": float(
                    (frame["overlap_pct"] * frame["dur_ps"]).sum() / max(frame["dur_ps"].sum(), 1)
                ),
                "mean_window_overlap_pct": float(frame["overlap_pct"].mean()),
            }

        out = counts(windows)
        out["hidden_min_pct"] = 100 * HIDDEN_MIN
        out["exposed_max_pct"] = 100 * EXPOSED_MAX
        out["by_kind"] = {str(k): counts(g) for k, g in windows.groupby("kind", sort=True)}
        return out

    def _collective_rec(
        self,
        bd: pd.DataFrame,
        coll: pd.DataFrame,
        by_kind: dict[str, Any],
        outside: dict[str, Any],
        step_ms: float,
        config: AnalysisConfig,
        tl: _timeline.Timeline,
    ) -> Recommendation | None:
        dev = bd.groupby(["host", "device"], sort=True)[
            ["compute_ps", "exposed_collective_ps"]
        ].mean()
        z = modified_z(dev["compute_ps"].to_numpy(dtype="float64"))
        straggling = bool((z > config.straggler_z).any())
        slow_name = ""
        if straggling:
            # The others' extra collective time is waiting for the straggler, which overlap cannot
            # hide; the straggler's own exposed collective time is the transfer itself.
            slow = int(np.argmax(z))
            in_step_ms = float(dev["exposed_collective_ps"].iloc[slow]) / 1e9
            compute_ms = float(dev["compute_ps"].iloc[slow]) / 1e9
            host, device = _timeline.device_key(dev.index[slow])
            slow_name = f"{host}/device:{device}"
        else:
            in_step_ms = float(dev["exposed_collective_ps"].mean()) / 1e9
            compute_ms = float(dev["compute_ps"].mean()) / 1e9
        outside_ms = outside.get("amortized_ms_per_step") or 0.0
        # Overlap hides a collective behind compute, so it saves at most the compute there is.
        hideable_ms = min(in_step_ms, compute_ms)
        exposed_ms = hideable_ms + outside_ms
        if in_step_ms + outside_ms <= 0:
            return None
        parts, op_names = [], []
        kinds: list[str] = []
        if in_step_ms > 0:
            top = _top_ops(coll, tl).head(5)
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
            top = top[top["exposed_ms_per_step"] >= 0.01 * top["exposed_ms_per_step"].sum()]
            ops_text = ", ".join(f"{r.op} {r.exposed_ms_per_step:.3f} ms" for r in top.itertuples())
            if straggling:
                median_ms = float(dev["exposed_collective_ps"].median()) / 1e9
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
            op_names += [str(o) for o in top["op"] if str(o)]
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
            fix={
                "tpu": (
                    "Let XLA overlap collectives with compute (LIBTPU_INIT_ARGS) — "
                    + (tpu or "--xla_tpu_enable_async_collective_fusion=true")
                    + (
                        f". The {', '.join(sync)} {'runs' if len(sync) == 1 else 'run'} "
                        "synchronously: shard so the reduction can "
                        "be pipelined with compute (FSDP/ZeRO-style sharding, gradient "
                        "accumulation), batch small reductions into one, or reduce their size "
                        "(bf16)."
                        if sync
                        else ""
                    )
                ),
                "gpu": (
                    "--xla_gpu_enable_latency_hiding_scheduler=true "
                    + (gpu + " " if gpu else "")
                    + "--xla_gpu_all_reduce_combine_threshold_bytes=134217728 (combine small "
                    "collectives); make sure NCCL runs on its own stream "
                    "(--xla_gpu_enable_highest_priority_async_stream=true)."
                ),
            },
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

    def _outside(self, profile: Profile, tl: _timeline.Timeline) -> dict[str, Any]:
        """Exposed collectives on the devices but outside every step (setup, one-off calls)."""
        if not tl.has_steps or tl.outside.empty:
            return {}
        exposed_ps = float(tl.outside["exposed_collective_ps"].mean())
        if exposed_ps <= 0:
            return {}
        ops = tl.outside_ops(profile.ops)
        ops = self._op_exposure(tl, ops[(ops["kind"] == schema.KIND_COLLECTIVE).to_numpy()])
        n_dev = max(tl.n_devices, 1)
        table = (
            ops.groupby(["op", "collective", "async_role"], sort=False)
            .agg(count=("dur_ps", "size"), exposed_ps=("exposed_ps", "sum"))
            .reset_index()
            .sort_values("exposed_ps", ascending=False)
        )
        # Work outside the steps is amortized over all steps of the capture, not the selected ones.
        steps = len(tl.all_windows) / n_dev
        return {
            "exposed_ms_per_device": exposed_ps / 1e9,
            "steps": round(steps),
            "amortized_ms_per_step": exposed_ps / steps / 1e9 if steps else 0.0,
            "kinds": [str(k) for k in dict.fromkeys(table["collective"]) if str(k)],
            "sync_kinds": sorted(
                {str(r.collective) for r in table.itertuples() if r.async_role == ""}
            ),
            "ops": [
                {
                    "op": str(r.op),
                    "collective": str(r.collective),
                    "count_per_device": r.count / n_dev,
                    "exposed_ms_per_device": r.exposed_ps / n_dev / 1e9,
                    "sync": r.async_role == "",
                }
                for r in table.itertuples()
            ],
        }

    def _copy_recs(
        self,
        copies: pd.DataFrame,
        windows: pd.DataFrame,
        copy_ms: float,
        compute_ms: float,
        step_ms: float,
        tl: _timeline.Timeline,
    ) -> list[Recommendation]:
        """Two fixes for exposed copies, each with the saving it can reach: issuing them
        earlier hides at most the compute there is to hide them behind; moving fewer bytes
        removes the wait itself."""
        top = _top_ops(copies, tl).head(5)
        top = top[top["exposed_ms_per_step"] >= 0.01 * max(copy_ms, 1e-12)]
        ops_text = ", ".join(f"{r.op} {r.exposed_ms_per_step:.3f} ms" for r in top.itertuples())
        ops = [str(o) for o in top["op"]]
        is_tpu = (copies["kind"] == schema.KIND_ASYNC_COPY).any()
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
            fix={
                "tpu": (
                    "Start the transfers earlier so compute covers them: in the "
                    "`jax.checkpoint` policy offload activations that are used much later "
                    "(`offload_src`/`offload_dst`), and let the scheduler move copy-start up "
                    "(`--xla_tpu_enable_latency_hiding_scheduler=true`)."
                ),
                "gpu": (
                    "Issue host<->device copies ahead of the step on their own stream: "
                    "`jax.device_put` of the next batch before the current step, pinned host "
                    "memory, and no `jax.device_get` or `.item()` inside the step."
                ),
            },
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
            fix={
                "tpu": (
                    "Offload less: in the `jax.checkpoint` policy, move names from "
                    "`offloadable`/`offload_src` back to saveable (or use "
                    "`jax.checkpoint_policies.dots_with_no_batch_dims_saveable`), keep "
                    "serving caches in HBM, and offload in bf16 rather than f32."
                ),
                "gpu": (
                    "Move fewer bytes between host and device: keep the data on the device "
                    "across steps, transfer in bf16, and drop copies of results the step "
                    "does not need on the host."
                ),
            },
            est_savings_ms=copy_ms,
            est_savings_pct=savings_pct(copy_ms, step_ms),
            confidence="medium",
            ops=ops,
            values={"exposed_copy_ms_per_step": copy_ms, **moved},
        )
        return [hide, remove]


def _copy_traffic(
    copies: pd.DataFrame, windows: pd.DataFrame, tl: _timeline.Timeline
) -> dict[str, float]:
    """Bytes per async copy and the bandwidth each window achieved (TPU; {} without data)."""
    if windows.empty or "bytes_accessed" not in copies:
        return {}
    starts = copies[(copies["async_role"] == "start").to_numpy()]
    sizes = starts.groupby("op", observed=True)["bytes_accessed"].median()
    copy_windows = windows[windows["kind"] == "copy"]
    size = copy_windows["op"].map(sizes).to_numpy(dtype="float64")
    dur = copy_windows["dur_ps"].to_numpy(dtype="float64")
    ok = np.isfinite(size) & (size > 0) & (dur > 0)
    if not ok.any():
        return {}
    return {
        "copies_per_step": round(float(ok.sum()) / max(len(tl.windows), 1), 3),
        "gb_per_copy": float(np.median(size[ok])) / 1e9,
        # bytes per picosecond x 1000 is GB/s.
        "median_gbps": float(np.median(size[ok] / dur[ok])) * 1000.0,
    }


def _async_kind(collective: str, category: str) -> str:
    """The kind of an `Async XLA Ops` window: its collective, else its category less the
    ``-start``/``-done`` suffix (``all-gather-start`` -> all-gather, ``copy-start`` -> copy)."""
    if collective:
        return collective
    base = re.sub(r"-(start|done)$", "", category.strip())
    return base or "copy"


def _top_ops(ops: pd.DataFrame, tl: _timeline.Timeline) -> pd.DataFrame:
    """Ops by exposed time, per step per device."""
    n = max(len(tl.windows), 1)
    grouped = ops.groupby(["op", "collective", "async_role"], sort=False).agg(
        count=("dur_ps", "size"), dur_ps=("dur_ps", "sum"), exposed_ps=("exposed_ps", "sum")
    )
    out = grouped.reset_index()
    out["ms_per_step"] = out.pop("dur_ps") / n / 1e9
    out["exposed_ms_per_step"] = out.pop("exposed_ps") / n / 1e9
    out["count_per_step"] = out.pop("count") / n
    return out.sort_values("exposed_ms_per_step", ascending=False, ignore_index=True)


def _pair_async(ops: pd.DataFrame) -> pd.DataFrame:
    """Async windows from ``-start``/``-done`` op pairs: each start to the next matching done."""
    starts = ops[(ops["async_role"] == "start").to_numpy()]
    dones = ops[(ops["async_role"] == "done").to_numpy()]
    if starts.empty or dones.empty:
        return pd.DataFrame()
    s = pd.DataFrame(
        {
            "host": starts["host"].astype(str).to_numpy(),
            "device": starts["device"].to_numpy(),
            "op": starts["op"].astype(str).to_numpy(),
            "key": starts["op"].astype(str).str.replace("-start", "-done", regex=False).to_numpy(),
            "kind": np.where(
                starts["collective"].astype(str) != "", starts["collective"].astype(str), "copy"
            ),
            "start_ps": starts["start_ps"].to_numpy(dtype="int64"),
        }
    )
    d = pd.DataFrame(
        {
            "host": dones["host"].astype(str).to_numpy(),
            "device": dones["device"].to_numpy(),
            "key": dones["op"].astype(str).to_numpy(),
            "done_ps": dones["start_ps"].to_numpy(dtype="int64"),
            "end_ps": (dones["start_ps"] + dones["dur_ps"]).to_numpy(dtype="int64"),
        }
    )
    paired = pd.merge_asof(
        s.sort_values("start_ps"),
        d.sort_values("done_ps"),
        left_on="start_ps",
        right_on="done_ps",
        by=["host", "device", "key"],
        direction="forward",
    ).dropna(subset=["end_ps"])
    paired["end_ps"] = paired["end_ps"].astype("int64")
    paired["dur_ps"] = paired["end_ps"] - paired["start_ps"]
    return paired[["host", "device", "op", "kind", "start_ps", "end_ps", "dur_ps"]]
