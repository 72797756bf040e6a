"""The view of a profile every built-in analyzer starts from (DESIGN.md, Definitions).

It picks the devices and step windows to analyse (host filter, ``--steps``,
warm-up), and splits each device's time into disjoint sets:

- compute: time in compute ops;
- exposed collective: time in collective ops (sync, and the ``-start``/``-done``
  halves of async ones) not covered by compute on any line of the device;
- other: async copies and memcpys covered by neither;
- idle: the window less all of these (busy = their union).

On one op line, ops overlap only by nesting (a ``while`` around its body), so
there the inner, more specific kind wins (collective, then other, over
compute). Across lines (GPU streams, CPU threads) compute wins, which is what
makes NCCL time hidden behind a compute stream not exposed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from tpuperf.analyzers import _intervals as iv

from tpuperf import schema
from tpuperf.errors import UsageError

if TYPE_CHECKING:
    from tpuperf.analyzers.base import AnalysisConfig

    from tpuperf.profile import Profile

SOURCE_OP_SPAN = "op_span"  # no steps: the window is the device's first to last op

_OTHER_KINDS = (schema.KIND_ASYNC_COPY, schema.KIND_MEMCPY)


@dataclass
class DeviceSets:
    compute: iv.Intervals
    collective: iv.Intervals  # exposed: not covered by compute
    other: iv.Intervals  # not covered by compute or collectives
    busy: iv.Intervals


@dataclass
class Timeline:
    devices: pd.DataFrame  # host, device, chip, kind, peak_tflops, peak_hbm_gbps
    windows: pd.DataFrame  # host, device, step, start_ps, end_ps: the selected windows
    ops: pd.DataFrame  # ops of those devices that start in a selected window; step reassigned
    breakdown: pd.DataFrame  # one row per window, see _breakdown
    sets: dict[tuple[str, int], DeviceSets]
    step_source: str  # one of schema.STEP_SOURCES, or SOURCE_OP_SPAN
    steps_selected: list[int]
    steps_excluded: list[int]  # warm-up steps, or steps outside --steps
    notes: list[str] = field(default_factory=list)

    @property
    def has_steps(self) -> bool:
        return self.step_source != SOURCE_OP_SPAN

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    @property
    def step_time_ps(self) -> np.ndarray:
        """Step durations, one per step number: the slowest device's window for that step."""
        if self.windows.empty:
            return np.empty(0)
        dur = self.windows["end_ps"] - self.windows["start_ps"]
        return dur.groupby(self.windows["step"]).max().to_numpy(dtype="float64")

    @property
    def median_step_ps(self) -> float:
        values = self.step_time_ps
        return float(np.median(values)) if len(values) else 0.0

    def per_step(self, total_ps: float) -> float:
        """A total over all analysed windows and devices, as ps per step per device."""
        n = len(self.windows)
        return total_ps / n if n else 0.0


def device_key(key: Any) -> tuple[str, int]:
    """A (host, device) groupby key as plain types."""
    return str(key[0]), int(key[1])


def stats_ms(values_ps: np.ndarray) -> dict[str, Any]:
    """median, mean, p90 (linear interpolation), min, max in ms, and count."""
    values = np.asarray(values_ps, dtype="float64")
    if len(values) == 0:
        return {"median": None, "mean": None, "p90": None, "min": None, "max": None, "count": 0}
    ms = values / 1e9
    return {
        "median": float(np.median(ms)),
        "mean": float(np.mean(ms)),
        "p90": float(np.percentile(ms, 90)),
        "min": float(ms.min()),
        "max": float(ms.max()),
        "count": len(ms),
    }


def timeline(profile: Profile, config: AnalysisConfig) -> Timeline:
    """The shared view, computed once per (profile, config) and kept in ``config.memo``."""
    key = f"timeline:{id(profile)}"
    cached = config.memo.get(key)
    if cached is not None and cached[0] is profile:
        return cached[1]
    result = _build(profile, config)
    config.memo[key] = (profile, result)
    return result


def _analysed_devices(profile: Profile, host: str | None) -> pd.DataFrame:
    ops = profile.ops
    if host is not None:
        hosts = sorted(
            set(profile.ops["host"].astype(str)) | set(profile.devices["host"].astype(str))
        )
        if host not in hosts:
            raise UsageError(
                f"--host {host!r} is not in this profile; its hosts: {', '.join(hosts)}"
            )
        ops = ops[ops["host"].astype(str) == host]
    pairs = ops.groupby(["host", "device"], observed=True).size().reset_index()[["host", "device"]]
    pairs["host"] = pairs["host"].astype(str)
    info = profile.devices.copy()
    info["host"] = info["host"].astype(str)
    info = info.drop_duplicates(["host", "device"])
    merged = pairs.merge(info, on=["host", "device"], how="left")
    # SparseCores run their own programs beside the TensorCore; their idle time is not the chip's.
    merged = merged[merged["core"].astype("string").fillna("") != "SparseCore"]
    for col, default in (("chip", ""), ("kind", profile.platform)):
        merged[col] = merged[col].astype("string").fillna(default)
    return merged[["host", "device", "chip", "kind", "peak_tflops", "peak_hbm_gbps"]].reset_index(
        drop=True
    )


def module_period_steps(modules: pd.DataFrame) -> pd.DataFrame:
    """Steps from the period of each device's dominant module (DESIGN.md, Step, last resort).

    Step i is [start_i, start_{i+1}) of the dominant module's executions; the
    last one lasts the median period.
    """
    rows = []
    if modules.empty:
        return pd.DataFrame(columns=["host", "device", "step", "start_ps", "end_ps", "source"])
    for key, group in modules.groupby(["host", "device"], observed=True):
        host, device = device_key(key)
        totals = group.groupby("module", observed=True)["dur_ps"].sum()
        dominant = totals.idxmax()
        runs = group[group["module"] == dominant].sort_values("start_ps")
        starts = runs["start_ps"].to_numpy(dtype="int64")
        if len(starts) >= 2:
            period = int(np.median(np.diff(starts)))
            ends = np.append(starts[1:], starts[-1] + period)
        else:
            ends = starts + runs["dur_ps"].to_numpy(dtype="int64")
        for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
            rows.append((host, device, i, int(s), int(e), "module_period"))
    return pd.DataFrame(rows, columns=["host", "device", "step", "start_ps", "end_ps", "source"])


def _steps_table(profile: Profile) -> tuple[pd.DataFrame, str]:
    steps = profile.steps
    if steps.empty:
        steps = module_period_steps(profile.modules)
    if steps.empty:
        return steps, SOURCE_OP_SPAN
    steps = steps.copy()
    steps["host"] = steps["host"].astype(str)
    sources = steps["source"].astype(str)
    # Mixed sources on one profile: prefer the best one present (DESIGN.md order).
    source = next(s for s in (*schema.STEP_SOURCES, sources.iloc[0]) if (sources == s).any())
    return steps[sources == source], source


def _select_steps(
    numbers: list[int], config: AnalysisConfig, notes: list[str]
) -> tuple[list[int], list[int]]:
    if config.steps is not None:
        lo, hi = config.steps
        keep = [n for n in numbers if (lo is None or n >= lo) and (hi is None or n < hi)]
        if not keep:
            shown = f"{numbers[0]}..{numbers[-1]}" if numbers else "none"
            raise UsageError(
                f"--steps {'' if lo is None else lo}:{'' if hi is None else hi} selects no step; "
                f"this profile has steps {shown}"
            )
        return keep, [n for n in numbers if n not in set(keep)]
    warmup = max(int(config.warmup_steps), 0)
    if warmup and len(numbers) > warmup:
        return numbers[warmup:], numbers[:warmup]
    if warmup and numbers:
        notes.append(
            f"only {len(numbers)} step(s): kept all, warm-up ({warmup} step(s)) not left out"
        )
    return numbers, []


def _build(profile: Profile, config: AnalysisConfig) -> Timeline:
    notes: list[str] = []
    devices = _analysed_devices(profile, config.host)
    keys = set(zip(devices["host"], devices["device"], strict=True))
    ops = profile.ops.copy()
    ops["host"] = ops["host"].astype(str)
    if len(ops):
        ops = ops[[k in keys for k in zip(ops["host"], ops["device"], strict=True)]]
    ops["end_ps"] = ops["start_ps"] + ops["dur_ps"]

    steps, source = _steps_table(profile)
    if source == "module_period" and profile.steps.empty:
        notes.append("no Steps line or step markers: steps are the periods of the dominant module")
    windows = []
    selected: list[int] = []
    excluded: list[int] = []
    if source != SOURCE_OP_SPAN:
        numbers = sorted(int(n) for n in steps["step"].unique())
        selected, excluded = _select_steps(numbers, config, notes)
        chosen = steps[steps["step"].isin(selected)]
        for host, device in zip(devices["host"], devices["device"], strict=True):
            own = chosen[(chosen["host"] == host) & (chosen["device"] == device)]
            if own.empty:
                # Host-level step markers: every device of the host shares them.
                own = (
                    chosen[chosen["host"] == host]
                    .groupby("step", as_index=False)
                    .agg(start_ps=("start_ps", "min"), end_ps=("end_ps", "max"))
                )
            if own.empty:
                continue
            windows.append(
                pd.DataFrame(
                    {
                        "host": host,
                        "device": int(device),
                        "step": own["step"].to_numpy(dtype="int64"),
                        "start_ps": own["start_ps"].to_numpy(dtype="int64"),
                        "end_ps": own["end_ps"].to_numpy(dtype="int64"),
                    }
                )
            )
    else:
        spans = ops.groupby(["host", "device"], observed=True).agg(
            start_ps=("start_ps", "min"), end_ps=("end_ps", "max")
        )
        for (host, device), row in spans.iterrows():
            windows.append(
                pd.DataFrame(
                    {
                        "host": [host],
                        "device": [int(device)],
                        "step": [-1],
                        "start_ps": [int(row["start_ps"])],
                        "end_ps": [int(row["end_ps"])],
                    }
                )
            )
        if len(ops):
            notes.append("no steps in this profile: each device's window is its first to last op")
    if windows:
        win = pd.concat(windows, ignore_index=True)
    else:
        win = pd.DataFrame(
            {
                "host": pd.Series(dtype="object"),
                "device": pd.Series(dtype="int64"),
                "step": pd.Series(dtype="int64"),
                "start_ps": pd.Series(dtype="int64"),
                "end_ps": pd.Series(dtype="int64"),
            }
        )
    win = win.sort_values(["host", "device", "start_ps"], ignore_index=True)

    sets: dict[tuple[str, int], DeviceSets] = {}
    rows = []
    selected_ops = []
    micro_ps = int(config.micro_gap_us * 1e6)
    for (host, device), dev_ops in ops.groupby(["host", "device"], observed=True, sort=True):
        key = (str(host), int(device))
        dev_sets = _device_sets(dev_ops)
        sets[key] = dev_sets
        dev_win = win[(win["host"] == key[0]) & (win["device"] == key[1])]
        if dev_win.empty:
            continue
        rows.append(_breakdown(dev_sets, dev_win, micro_ps))
        selected_ops.append(_assign_steps(dev_ops, dev_win))
    breakdown = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    sel = pd.concat(selected_ops, ignore_index=True) if selected_ops else ops.iloc[0:0]
    return Timeline(
        devices=devices,
        windows=win,
        ops=sel,
        breakdown=breakdown,
        sets=sets,
        step_source=source,
        steps_selected=selected,
        steps_excluded=excluded,
        notes=notes,
    )


def _device_sets(dev_ops: pd.DataFrame) -> DeviceSets:
    kind = dev_ops["kind"].astype(str).to_numpy()
    start = dev_ops["start_ps"].to_numpy(dtype="int64")
    end = dev_ops["end_ps"].to_numpy(dtype="int64")
    line = dev_ops["line"].astype(str).to_numpy()
    comp_parts, coll_parts, other_parts = [], [], []
    for name in np.unique(line):
        on = line == name
        coll = iv.union(
            start[on & (kind == schema.KIND_COLLECTIVE)], end[on & (kind == schema.KIND_COLLECTIVE)]
        )
        is_other = on & np.isin(kind, _OTHER_KINDS)
        other = iv.subtract(iv.union(start[is_other], end[is_other]), coll)
        is_comp = on & (kind == schema.KIND_COMPUTE)
        comp = iv.subtract(iv.subtract(iv.union(start[is_comp], end[is_comp]), coll), other)
        comp_parts.append(comp)
        coll_parts.append(coll)
        other_parts.append(other)
    compute = iv.merge(*comp_parts)
    collective = iv.subtract(iv.merge(*coll_parts), compute)
    other = iv.subtract(iv.subtract(iv.merge(*other_parts), compute), collective)
    busy = iv.merge(compute, collective, other)
    return DeviceSets(compute, collective, other, busy)


def _breakdown(sets: DeviceSets, win: pd.DataFrame, micro_ps: int) -> pd.DataFrame:
    ws = win["start_ps"].to_numpy(dtype="int64")
    we = win["end_ps"].to_numpy(dtype="int64")
    out = win[["host", "device", "step", "start_ps", "end_ps"]].copy().reset_index(drop=True)
    out["step_ps"] = we - ws
    out["compute_ps"] = iv.measure_in(sets.compute, ws, we)
    out["exposed_collective_ps"] = iv.measure_in(sets.collective, ws, we)
    out["other_ps"] = iv.measure_in(sets.other, ws, we)
    out["busy_ps"] = iv.measure_in(sets.busy, ws, we)
    out["idle_ps"] = out["step_ps"] - out["busy_ps"]
    leading = iv.first_inside(sets.busy, ws, we) - ws
    trailing = np.where(out["busy_ps"] > 0, we - iv.last_inside(sets.busy, ws, we), 0)
    out["leading_idle_ps"] = leading
    out["trailing_idle_ps"] = trailing
    out["interior_idle_ps"] = out["idle_ps"] - leading - trailing
    micro = np.zeros(len(ws), dtype="int64")
    micro_n = np.zeros(len(ws), dtype="int64")
    macro_n = np.zeros(len(ws), dtype="int64")
    busy = sets.busy
    for i, (s, e) in enumerate(zip(ws, we, strict=True)):
        i0 = np.searchsorted(busy.ends, s, side="right")
        i1 = np.searchsorted(busy.starts, e, side="left")
        if i1 - i0 < 2:
            continue
        gaps = np.clip(busy.starts[i0 + 1 : i1], s, e) - np.clip(busy.ends[i0 : i1 - 1], s, e)
        gaps = gaps[gaps > 0]
        small = gaps < micro_ps
        micro[i] = gaps[small].sum()
        micro_n[i] = small.sum()
        macro_n[i] = (~small).sum()
    out["micro_idle_ps"] = micro
    out["micro_gaps"] = micro_n
    out["macro_gaps"] = macro_n
    return out


def _assign_steps(dev_ops: pd.DataFrame, win: pd.DataFrame) -> pd.DataFrame:
    """The ops that start inside a window, with ``step`` set to that window's step."""
    ws = win["start_ps"].to_numpy(dtype="int64")
    we = win["end_ps"].to_numpy(dtype="int64")
    start = dev_ops["start_ps"].to_numpy(dtype="int64")
    idx = np.searchsorted(ws, start, side="right") - 1
    inside = idx >= 0
    inside[inside] = start[inside] < we[idx[inside]]
    out = dev_ops[inside].copy()
    out["step"] = win["step"].to_numpy(dtype="int64")[idx[inside]]
    return out
