"""XLA:CPU's devices, for profiles without device planes: ops run on ``/host:CPU`` thread
lines (:func:`tpuperf.build_gpu.kernel_ops`), one device per ``device_ordinal``."""

from __future__ import annotations

from typing import Any

import numpy as np

from tpuperf.columns import distinct
from tpuperf.tables import (
    EMPTY_ASYNC,
    DeviceTables,
    untimed_warning,
)
from tpuperf.xspace import Plane

HOST_PLANE = "/host:CPU"  # where XLA:CPU's ops run


def _cpu_device_row(host: str, device: int, n_ops: int) -> dict[str, Any]:
    return {
        "host": host,
        "device": device,
        "plane": HOST_PLANE,
        "kind": "CPU",
        "core": "CPU",
        "chip": "CPU",
        "peak_tflops": np.nan,
        "peak_hbm_gbps": np.nan,
        "memory_bytes": np.nan,
        "ops": n_ops,
    }


# Stats of the host's program launch that say how many devices it ran on.
_ADDRESSABLE_DEVICES = "num_addressable_devices"


def host_devices(
    host: str, plane: Plane, module_names: dict[str, str], protos: dict[str, bytes]
) -> tuple[list[DeviceTables], list[str]]:
    """XLA:CPU's devices: their ops run on host threads, each event naming its device with a
    ``device_ordinal`` stat; one device per ordinal, each with its own modules and waits.
    Without ordinals every op is device 0, with a warning where the launches say that more
    than one device ran."""
    addressable = _max_stat(plane, _ADDRESSABLE_DEVICES)
    # Only host threads with XLA ops on them: the others are skipped without decoding them.
    lines = [line for line in plane.lines if len(line) and plane.stat_ids("hlo_op")]
    # The kernel reader of GPU streams, and HLO protos: CPU profiles only.
    from tpuperf.build_gpu import kernel_ops, module_runs
    from tpuperf.hlo_collectives import collective_facts

    facts = collective_facts(protos) if protos else {}
    found = kernel_ops(plane, lines, module_names, None, facts)
    if not found.ops.n:
        return [], [untimed_warning(host, found.untimed)] if found.untimed else []
    warnings = []
    ordinal = found.ordinal
    if not (ordinal >= 0).any():
        ordinal = np.zeros(found.ops.n, dtype=np.int64)
        if addressable > 1:
            warnings.append(
                f"{host}: the XLA ops of {addressable} CPU devices carry no device_ordinal: "
                "they are one timeline (device 0), so per-device times and overlap are merged"
            )
    elif (ordinal < 0).any():
        warnings.append(
            f"{host}: {int((ordinal < 0).sum())} XLA op(s) carry no device_ordinal; they are "
            "counted on device 0"
        )
        ordinal = np.where(ordinal < 0, 0, ordinal)
    devices = []
    for number in distinct(ordinal).tolist():  # without np.unique's numpy.ma (20 ms)
        rows = np.flatnonzero(ordinal == number)
        ops = found.ops.take(rows)
        waits = found.waits.take(np.flatnonzero(found.waits_ordinal == number))
        devices.append(
            DeviceTables(
                host,
                int(number),
                _cpu_device_row(host, int(number), ops.n),
                ops,
                module_runs(ops, found.execution[rows]),
                EMPTY_ASYNC,
                waits=waits,
            )
        )
    devices[0].untimed = found.untimed  # the host's events: counted once, on its first device
    return devices, warnings


def _max_stat(plane: Plane, name: str) -> int:
    """The largest integer value of stat ``name`` on the plane's events (0 without any)."""
    if not plane.stat_ids(name):
        return 0
    best = 0
    for line in plane.lines:
        if not len(line):
            continue
        values = np.asarray(line.stat(name, -1))
        if values.dtype.kind in "iu" and len(values):
            best = max(best, int(values.max()))
    return best
