"""What a profile holds, as plain data: hosts, devices, lines, time span, steps, warnings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tpuperf.profiles import Profile
from tpuperf.roofline import chips
from tpuperf.step_windows import SOURCE_MODULE_PERIOD, program_label

if TYPE_CHECKING:
    from tpuperf.tables import DeviceTables


def describe(profile: Profile) -> dict[str, Any]:
    """A JSON-ready description of ``profile`` (the data behind ``tpuperf info``)."""
    devices = profile.device_tables
    span: dict[str, Any] = {"start_ps": None, "end_ps": None, "duration_ms": None}
    starts = [int(d.ops.array("start_ps").min()) for d in devices if d.ops.n]
    if starts:
        start = min(starts)
        end = max(
            int((d.ops.array("start_ps") + d.ops.array("dur_ps")).max()) for d in devices if d.ops.n
        )
        span = {"start_ps": start, "end_ps": end, "duration_ms": (end - start) / 1e9}
    step_rows = []
    for d in sorted(devices, key=lambda d: (d.host, d.device)):
        steps = d.steps
        if steps is None or not steps.n:
            continue
        numbers = steps.array("step")
        step_rows.append(
            {
                "host": d.host,
                "device": d.device,
                "count": steps.n,
                "source": steps.strings("source").tolist()[0],
                # Steps from module periods come from one program: which one.
                "program": (
                    program_label(d.modules)
                    if steps.strings("source").tolist()[0] == SOURCE_MODULE_PERIOD
                    else None
                ),
                "first": int(numbers.min()),
                "last": int(numbers.max()),
            }
        )
    lines = profile.line_table
    return {
        "source": profile.source,
        "platform": profile.platform,
        "decoder": decoder(),
        "decoder_reason": decoder_reason(),
        "hosts": [
            {
                "host": h.host,
                "path": h.path,
                "size_bytes": h.size_bytes,
                **_file_facts(h.path),
                "hostnames": h.hostnames,
                "versions": h.versions,
                "capture_start_ns": h.capture_start_ns,
                "capture_stop_ns": h.capture_stop_ns,
            }
            for h in profile.hosts
        ],
        "devices": [_device(d) for d in devices],
        "lines": [
            {"host": host, "plane": plane, "line": line, "events": int(events)}
            for host, plane, line, events in zip(
                lines.strings("host").tolist(),
                lines.strings("plane").tolist(),
                lines.strings("line").tolist(),
                np.asarray(lines.array("events")).tolist(),
                strict=True,
            )
        ],
        "time_span": span,
        "steps": step_rows,
        "warnings": list(profile.warnings),
    }


def _device(d: DeviceTables) -> dict[str, Any]:
    # The peaks every command uses (analyze, report, scan): the profile's, else the chip
    # table's, resolved in the one place that says where each came from.
    peaks = chips.resolve_peaks(
        str(d.row["chip"] or "") or None, d.row["peak_tflops"], d.row["peak_hbm_gbps"]
    )
    return {
        "host": d.host,
        "device": d.device,
        "plane": d.row["plane"],
        "kind": d.row["kind"],
        "core": d.row["core"],
        "chip": d.row["chip"],
        "peak_tflops": peaks.peak_tflops,
        "peak_hbm_gbps": peaks.peak_hbm_gbps,
        "peaks_source": peaks.source,
        "ops": int(d.row["ops"]),
    }


def decoder() -> str:
    """Which decoder reads profiles in this install: ``native`` (the C module
    tpuperf._wire_native) or ``numpy`` (the fallback where the C module is not built)."""
    from tpuperf import kernels

    return kernels.implementation()


def decoder_reason() -> str | None:
    """Why the numpy decoder reads profiles (None with the C one): asked for, or no C module."""
    from tpuperf import kernels

    if kernels.implementation() == "native":
        return None
    return (
        "chosen by TPUPERF_DECODER=numpy" if kernels.numpy_asked() else "the C module is not built"
    )


def _file_facts(url: str) -> dict[str, Any]:
    """``file_bytes`` (the file as stored) and ``gzip`` (whether it is compressed, when
    ``size_bytes`` is the decompressed size); None when the file cannot be asked again."""
    from tpuperf.sources import file_facts

    try:
        size, gzip = file_facts(url)
    except (OSError, ValueError, ImportError):
        return {"file_bytes": None, "gzip": None}
    return {"file_bytes": size, "gzip": gzip}
