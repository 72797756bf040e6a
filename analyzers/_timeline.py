"""The view of a profile every built-in analyzer starts from (DESIGN.md, Definitions).

It picks the devices and step windows to analyse (host filter, ``--steps``,
warm-up), and splits each device's time into disjoint sets:

- compute: time in compute ops;
- exposed collective: time in collective ops (sync, and the ``-start``/``-done``
  halves of async ones) not covered by compute on any line of the device;
- other: async copies and memcpys covered by neither;
- idle: the window less busy time. Busy is the union of all op time on TPU and
  CPU, and compute-kernel time only on GPU (DESIGN.md: "compute streams"), so a
  GPU's idle time includes time when only NCCL kernels or memcpys run;
- no-op: the window less every op, whatever its kind. Idle gaps are classified on
  this set, so a gap means nothing at all ran (the same as idle on TPU).

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
from tpuperf.steps import module_period_steps, window_of

if TYPE_CHECKING:
    from tpuperf.analyzers.base import AnalysisConfig

    from tpuperf.profile import Profile

SOURCE_OP_SPAN = "op_span"  # no steps: the window is the device's first to last op

_OTHER_KINDS = (schema.KIND_ASYNC_COPY, schema.KIND_MEMCPY)
_OP_COLUMNS = [
    "host",
    "device",
    "line",
    "module",
    "op",
    "hlo_text",
    "kind",
    "collective",
    "async_role",
    "start_ps",
    "dur_ps",
    "self_ps",
    "flops",
    "model_flops",
    "bytes_accessed",
]


@dataclass
class DeviceSets:
    compute: iv.Intervals
    collective: iv.Intervals  # exposed: not covered by compute
    other: iv.Intervals  # not covered by compute or collectives
    busy: iv.Intervals  # DESIGN.md's busy: all ops (TPU, CPU) or compute kernels (GPU)
    occupied: iv.Intervals  # any op at all


@dataclass
class Timeline:
    devices: pd.DataFrame  # host, device, chip, kind, peak_tflops, peak_hbm_gbps
    windows: pd.DataFrame  # host, device, step, start_ps, end_ps: the selected windows
    all_windows: pd.DataFrame  # the same, warm-up and unselected steps included
    ops: pd.DataFrame  # ops of those devices that start in a selected window; step reassigned
    breakdown: pd.DataFrame  # one row per window, see _breakdown
    # The same columns over each device's first-to-last op (step -1): XProf's window.
    span: pd.DataFrame
    # Per device, time in its span but outside every step (warm-up steps count as inside).
    outside: pd.DataFrame
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
    def mean_window_ps(self) -> float:
        """The mean window (step) length per device: the denominator of every per-step share.

        Savings are totals per window per device, so their share of a step uses the same
        average; with synchronous steps it equals the mean step time.
        """
        n = len(self.windows)
        return float((self.windows["end_ps"] - self.windows["start_ps"]).sum()) / n if n else 0.0

    def outside_ops(self, profile_ops: pd.DataFrame) -> pd.DataFrame:
        """Ops of the analysed devices that start outside every step (setup, one-off calls)."""
        if not self.has_steps:
            return profile_ops.iloc[0:0]
        parts = []
        ops = profile_ops
        for (host, device), win in self.all_windows.groupby(["host", "device"]):
            dev = ops[((ops["host"] == host) & (ops["device"] == device)).to_numpy()]
            index = window_of(
                dev["start_ps"].to_numpy(dtype="int64"),
                win["start_ps"].to_numpy(dtype="int64"),
                win["end_ps"].to_numpy(dtype="int64"),
            )
            parts.append(dev[index < 0])
        return pd.concat(parts, ignore_index=True) if parts else profile_ops.iloc[0:0]

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
            {str(h) for h in profile.ops["host"].unique()}
            | {str(h) for h in profile.devices["host"].unique()}
        )
        if host not in hosts:
            raise UsageError(
                f"--host {host!r} is not in this profile; its hosts: {', '.join(hosts)}"
            )
        ops = ops[(ops["host"] == host).to_numpy()]
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


def _steps_table(profile: Profile) -> tuple[pd.DataFrame, str]:
    steps = profile.steps
    if steps.empty:
        steps = module_period_steps(profile.modules)  # a Profile built without steps
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
    # Only the analysed devices' ops, and only the columns the built-in analyzers read.
    keep = np.zeros(len(profile.ops), dtype=bool)
    for host, group in devices.groupby("host"):
        keep |= (
            (profile.ops["host"] == host) & profile.ops["device"].isin(group["device"])
        ).to_numpy()
    ops = profile.ops.loc[keep, _OP_COLUMNS].reset_index(drop=True)
    ops["end_ps"] = ops["start_ps"] + ops["dur_ps"]

    steps, source = _steps_table(profile)
    if source == "module_period" and profile.steps.empty:
        notes.append("no Steps line or step markers: steps are the periods of the dominant module")
    selected: list[int] = []
    excluded: list[int] = []
    spans = ops.groupby(["host", "device"], observed=True).agg(
        start_ps=("start_ps", "min"), end_ps=("end_ps", "max")
    )
    span_win = _frame(
        [
            (str(h), int(d), -1, int(r["start_ps"]), int(r["end_ps"]))
            for (h, d), r in spans.iterrows()
        ]
    )
    if source != SOURCE_OP_SPAN:
        numbers = sorted(int(n) for n in steps["step"].unique())
        selected, excluded = _select_steps(numbers, config, notes)
        host_level = source == "step_marker"
        win = _step_windows(steps[steps["step"].isin(selected)], devices, host_level)
        all_win = _step_windows(steps, devices, host_level)
        stepless = sorted(
            set(zip(devices["host"], devices["device"], strict=True))
            - set(zip(all_win["host"], all_win["device"], strict=True))
        )
        if stepless:
            # A device with ops but no steps of its own (a GPU that only ran memcpys) has no
            # window to measure; averaging it in as 100% idle would misstate the others.
            has_steps = [
                (h, d) not in set(stepless)
                for h, d in zip(devices["host"], devices["device"], strict=True)
            ]
            devices = devices[has_steps].reset_index(drop=True)
            notes.append(
                "left out devices with ops but no steps: "
                + ", ".join(f"{h}/device:{d}" for h, d in stepless)
            )
    else:
        win = span_win
        all_win = span_win
        if len(ops):
            notes.append("no steps in this profile: each device's window is its first to last op")

    sets: dict[tuple[str, int], DeviceSets] = {}
    kinds = {
        (str(h), int(d)): str(k)
        for h, d, k in zip(devices["host"], devices["device"], devices["kind"], strict=True)
    }
    rows, span_rows, outside_rows = [], [], []
    selected_ops = []
    micro_ps = int(config.micro_gap_us * 1e6)
    for (host, device), dev_ops in ops.groupby(["host", "device"], observed=True, sort=True):
        key = (str(host), int(device))
        dev_sets = _device_sets(dev_ops, gpu=kinds.get(key) == "GPU")
        sets[key] = dev_sets
        dev_win = win[(win["host"] == key[0]) & (win["device"] == key[1])]
        if dev_win.empty:
            continue
        rows.append(_breakdown(dev_sets, dev_win, micro_ps))
        selected_ops.append(_steps_of(dev_ops, dev_win))
        dev_span = span_win[(span_win["host"] == key[0]) & (span_win["device"] == key[1])]
        span_bd = _breakdown(dev_sets, dev_span, micro_ps)
        span_rows.append(span_bd)
        dev_all = all_win[(all_win["host"] == key[0]) & (all_win["device"] == key[1])]
        outside_rows.append(_outside(span_bd, _breakdown(dev_sets, dev_all, micro_ps)))
    breakdown = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    span = pd.concat(span_rows, ignore_index=True) if span_rows else pd.DataFrame()
    outside = pd.concat(outside_rows, ignore_index=True) if outside_rows else pd.DataFrame()
    # One copy of the selected ops for all devices, rather than one per device.
    if selected_ops:
        rows_of = np.concatenate([rows_ for rows_, _ in selected_ops])
        sel = ops.iloc[rows_of].reset_index(drop=True)
        sel["step"] = np.concatenate([steps_ for _, steps_ in selected_ops])
    else:
        sel = ops.iloc[0:0]
    return Timeline(
        devices=devices,
        windows=win,
        all_windows=all_win,
        ops=sel,
        breakdown=breakdown,
        span=span,
        outside=outside,
        sets=sets,
        step_source=source,
        steps_selected=selected,
        steps_excluded=excluded,
        notes=notes,
    )


_WINDOW_COLUMNS = ["host", "device", "step", "start_ps", "end_ps"]


def _frame(rows: list[tuple[str, int, int, int, int]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=_WINDOW_COLUMNS)
    return frame.astype(
        {
            "host": "object",
            "device": "int64",
            "step": "int64",
            "start_ps": "int64",
            "end_ps": "int64",
        }
    ).sort_values(["host", "device", "start_ps"], ignore_index=True)


def _step_windows(steps: pd.DataFrame, devices: pd.DataFrame, host_level: bool) -> pd.DataFrame:
    """Each analysed device's step windows.

    Host step markers (``host_level``) apply to every device of their host; steps
    from a device's own Steps line or module periods apply to that device only.
    """
    rows: list[tuple[str, int, int, int, int]] = []
    for host, device in zip(devices["host"], devices["device"], strict=True):
        own = steps[(steps["host"] == host) & (steps["device"] == device)]
        if own.empty and host_level:
            # Host-level step markers: every device of the host shares them.
            own = (
                steps[steps["host"] == host]
                .groupby("step", as_index=False)
                .agg(start_ps=("start_ps", "min"), end_ps=("end_ps", "max"))
            )
        rows.extend(
            (str(host), int(device), int(n), int(s), int(e))
            for n, s, e in zip(own["step"], own["start_ps"], own["end_ps"], strict=True)
        )
    return _frame(rows)


def _outside(span: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Span totals less step totals: what happened on the device outside every step."""
    out = span[["host", "device"]].copy()
    for col in (
        "step_ps",
        "compute_ps",
        "exposed_collective_ps",
        "other_ps",
        "busy_ps",
        "no_op_ps",
    ):
        # Steps can reach past the first or last op; time there is not "outside".
        out[col] = np.maximum(span[col].to_numpy() - int(steps[col].sum()), 0)
    return out.rename(columns={"step_ps": "outside_ps"})


def _device_sets(dev_ops: pd.DataFrame, gpu: bool) -> DeviceSets:
    # Comparisons on the categorical columns: no per-row strings for million-op profiles.
    is_coll_all = (dev_ops["kind"] == schema.KIND_COLLECTIVE).to_numpy()
    is_other_all = dev_ops["kind"].isin(_OTHER_KINDS).to_numpy()
    is_comp_all = (dev_ops["kind"] == schema.KIND_COMPUTE).to_numpy()
    start = dev_ops["start_ps"].to_numpy(dtype="int64")
    end = dev_ops["end_ps"].to_numpy(dtype="int64")
    line = pd.factorize(dev_ops["line"])[0]
    comp_parts, coll_parts, other_parts = [], [], []
    for code in np.unique(line):
        on = line == code
        is_coll = on & is_coll_all
        coll = iv.union(start[is_coll], end[is_coll])
        is_other = on & is_other_all
        other = iv.subtract(iv.union(start[is_other], end[is_other]), coll)
        is_comp = on & is_comp_all
        comp = iv.subtract(iv.subtract(iv.union(start[is_comp], end[is_comp]), coll), other)
        comp_parts.append(comp)
        coll_parts.append(coll)
        other_parts.append(other)
    compute = iv.merge(*comp_parts)
    collective = iv.subtract(iv.merge(*coll_parts), compute)
    other = iv.subtract(iv.subtract(iv.merge(*other_parts), compute), collective)
    occupied = iv.merge(compute, collective, other)
    return DeviceSets(compute, collective, other, compute if gpu else occupied, occupied)


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
    occupied_ps = iv.measure_in(sets.occupied, ws, we)
    out["no_op_ps"] = out["step_ps"] - occupied_ps
    leading = iv.first_inside(sets.occupied, ws, we) - ws
    trailing = np.where(occupied_ps > 0, we - iv.last_inside(sets.occupied, ws, we), 0)
    out["leading_idle_ps"] = leading
    out["trailing_idle_ps"] = trailing
    out["interior_idle_ps"] = out["no_op_ps"] - leading - trailing
    micro, micro_n, macro_n = iv.interior_gaps(sets.occupied, ws, we, micro_ps)
    out["micro_idle_ps"] = micro
    out["micro_gaps"] = micro_n
    out["macro_gaps"] = macro_n
    return out


def _steps_of(dev_ops: pd.DataFrame, win: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Rows (index labels) of the ops that start inside a window, and that window's step."""
    index = window_of(
        dev_ops["start_ps"].to_numpy(dtype="int64"),
        win["start_ps"].to_numpy(dtype="int64"),
        win["end_ps"].to_numpy(dtype="int64"),
    )
    inside = index >= 0
    return dev_ops.index.to_numpy()[inside], win["step"].to_numpy(dtype="int64")[index[inside]]
