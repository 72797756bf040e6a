"""What a profile holds, as plain data: hosts, devices, lines, time span, steps, warnings."""

from __future__ import annotations

from typing import Any

from tpuperf.profile import Profile


def describe(profile: Profile) -> dict[str, Any]:
    """A JSON-ready description of ``profile`` (the data behind ``tpuperf info``)."""
    devices = profile.devices
    ops = profile.ops
    steps = profile.steps
    span: dict[str, Any] = {"start_ps": None, "end_ps": None, "duration_ms": None}
    if len(ops):
        start = int(ops["start_ps"].min())
        end = int((ops["start_ps"] + ops["dur_ps"]).max())
        span = {"start_ps": start, "end_ps": end, "duration_ms": (end - start) / 1e9}
    step_rows = []
    if len(steps):
        for (host, device), group in steps.groupby(["host", "device"], observed=True):
            step_rows.append(
                {
                    "host": str(host),
                    "device": int(device),
                    "count": len(group),
                    "source": str(group["source"].iat[0]),
                    "first": int(group["step"].min()),
                    "last": int(group["step"].max()),
                }
            )
    return {
        "source": profile.source,
        "platform": profile.platform,
        "hosts": [
            {
                "host": h.host,
                "path": h.path,
                "size_bytes": h.size_bytes,
                "hostnames": h.hostnames,
                "versions": h.versions,
                "capture_start_ns": h.capture_start_ns,
                "capture_stop_ns": h.capture_stop_ns,
            }
            for h in profile.hosts
        ],
        "devices": [
            {
                "host": str(row.host),
                "device": int(row.device),
                "plane": row.plane,
                "kind": str(row.kind),
                "core": str(row.core),
                "chip": row.chip,
                "peak_tflops": float(row.peak_tflops),
                "peak_hbm_gbps": float(row.peak_hbm_gbps),
                "ops": int(row.ops),
            }
            for row in devices.itertuples(index=False)
        ],
        "lines": [
            {"host": str(r.host), "plane": r.plane, "line": r.line, "events": int(r.events)}
            for r in profile.lines.itertuples(index=False)
        ],
        "time_span": span,
        "steps": step_rows,
        "warnings": list(profile.warnings),
    }
