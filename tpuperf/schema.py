"""Columns and dtypes of every table a :class:`~tpuperf.profiles.Profile` holds.

This module is the one place that says what the tables look like. The decoder's
output is checked against it (:func:`validate`), analyzers name the columns they
read from it, and README documents it.

Conventions: times are integer picoseconds (``*_ps``, int64), absolute within a
host (``line.timestamp_ns * 1000 + event.offset_ps``). Repeated strings are
``category``. Costs that a platform does not record (FLOPs on most GPU
profiles) are NaN, never zero.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpuperf.errors import TpuperfError

if TYPE_CHECKING:
    import pandas as pd

CATEGORY = "category"

# Values of ops.kind.
KIND_COMPUTE = "compute"
KIND_COLLECTIVE = "collective"
KIND_ASYNC_COPY = "async_copy"  # TPU copy-start / copy-done (host offload, ...)
KIND_MEMCPY = "memcpy"  # GPU memcpy / memset
OP_KINDS = (KIND_COMPUTE, KIND_COLLECTIVE, KIND_ASYNC_COPY, KIND_MEMCPY)

# What the category of a DCN host transfer (a multislice collective's send or recv, read by
# tpuperf/megascale.py) contains.
DCN_CATEGORIES = ("host send", "host recv")


def is_dcn_category(category: str) -> bool:
    return any(c in category for c in DCN_CATEGORIES)


# Values of steps.source, in DESIGN.md's order of preference.
STEP_SOURCES = ("steps_line", "step_marker", "module_period")

# Values of scopes.pass (the rules are in tpuperf/scopes.py).
PASS_FORWARD = "forward"
PASS_BACKWARD = "backward"  # under transpose(...)
PASS_OPTIMIZER = "optimizer"  # a training step's work outside the differentiated function
PASS_OTHER = "other"  # ops without a scope
PASSES = (PASS_FORWARD, PASS_BACKWARD, PASS_OPTIMIZER, PASS_OTHER)

TABLES: dict[str, dict[str, str]] = {
    # One row per device plane (TPU TensorCore or SparseCore, GPU) or, for a
    # CPU-only profile, one CPU pseudo-device per host.
    "devices": {
        "host": CATEGORY,
        "device": "int64",  # N of /device:TPU:N; unique within a host
        "plane": "string",  # the plane name
        "kind": CATEGORY,  # TPU, GPU or CPU
        "core": CATEGORY,  # TensorCore, SparseCore, GPU or CPU
        "chip": "string",  # device_type_string, or a name derived from plane stats
        "peak_tflops": "float64",  # dense peak, TFLOP/s; NaN when the plane does not say
        "peak_hbm_gbps": "float64",  # GB/s (1e9 bytes/s); NaN when unknown
        "memory_bytes": "float64",
        "ops": "int64",  # op rows on this device
    },
    # One row per op execution on a device op line.
    "ops": {
        "host": CATEGORY,
        "device": "int64",
        "line": CATEGORY,  # "XLA Ops", "Stream #7(Compute)", a host thread, ...
        "module": CATEGORY,  # HLO module (program) name
        "program_id": CATEGORY,
        "op": CATEGORY,  # short HLO op name (fusion.12); kernel name when no HLO op is known
        "hlo_text": CATEGORY,  # full HLO instruction when recorded, else the kernel name
        "category": CATEGORY,  # hlo_category on TPU; derived elsewhere
        "kind": CATEGORY,  # one of OP_KINDS
        "collective": CATEGORY,  # all-reduce, all-gather, ... or "" for none
        "async_role": CATEGORY,  # "start", "done" or ""
        "start_ps": "int64",
        "dur_ps": "int64",
        "self_ps": "int64",  # dur_ps less the time of op events nested inside
        "flops": "float64",
        "model_flops": "float64",
        "bytes_accessed": "float64",
        "hbm_read_bytes": "float64",
        "hbm_write_bytes": "float64",
        "vmem_read_bytes": "float64",
        "vmem_write_bytes": "float64",
        "cmem_read_bytes": "float64",
        "cmem_write_bytes": "float64",
        "tf_op": CATEGORY,
        "source": CATEGORY,
        "step": "int64",  # step number the op starts in; -1 outside every step
    },
    # XLA module (program) executions from the `XLA Modules` line (TPU) or the
    # hlo_module spans of kernels (GPU, CPU).
    "modules": {
        "host": CATEGORY,
        "device": "int64",
        "module": CATEGORY,
        "program_id": CATEGORY,
        "start_ps": "int64",
        "dur_ps": "int64",
    },
    # Events of the `Async XLA Ops` line: the windows of async ops on TPU.
    "async_ops": {
        "host": CATEGORY,
        "device": "int64",
        "op": CATEGORY,  # the start op (all-gather-start.3)
        "done_op": CATEGORY,  # the matching done op, from the hlo_op stat
        "category": CATEGORY,
        "collective": CATEGORY,
        "start_ps": "int64",
        "dur_ps": "int64",
    },
    # Waiting for peers inside collectives: XLA:CPU's Rendezvous events (nested in the
    # collective op on the same host thread). Empty on platforms that do not record them.
    "waits": {
        "host": CATEGORY,
        "device": "int64",
        "line": CATEGORY,  # the host thread of the collective it lies in
        "start_ps": "int64",
        "dur_ps": "int64",
    },
    "steps": {
        "host": CATEGORY,
        "device": "int64",
        "step": "int64",
        "start_ps": "int64",
        "end_ps": "int64",
        "source": CATEGORY,  # one of STEP_SOURCES
    },
    # Every line of every plane, for `tpuperf info`.
    "lines": {
        "host": CATEGORY,
        "plane": "string",
        "line": "string",
        "events": "int64",
        "first_ps": "int64",
        "last_ps": "int64",
    },
}

# The scope table (``Profile.scopes``, built on first use by tpuperf/scopes.py): one row per op
# of a program, where the model's code made it. Join it to ``ops`` on (module, program_id, op).
SCOPES: dict[str, str] = {
    "module": CATEGORY,
    "program_id": CATEGORY,
    "op": CATEGORY,
    "name_scope": CATEGORY,  # the path as recorded: tf_op (TPU) or the HLO op_name
    "scope": CATEGORY,  # its levels, transformation wrappers and jit(main) removed, "/"-joined
    "depth": "int64",  # the number of levels
    "primitive": CATEGORY,  # the last element of the path (dot_general)
    "transforms": CATEGORY,  # the wrappers seen, outermost first: "transpose,jvp"
    "pass": CATEGORY,  # one of PASSES
    "source_file": CATEGORY,
    "source_line": "int64",  # 0 when unknown
    "source": CATEGORY,  # "file:line", "" when unknown
    "scope_origin": CATEGORY,  # op_metadata, hlo_proto, or "" (no scope information)
}


def empty(table: str) -> pd.DataFrame:
    """An empty DataFrame with ``table``'s columns and dtypes."""
    import pandas as pd

    columns = TABLES[table]
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in columns.items()})


def conform(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    """Return ``frame`` with exactly ``table``'s columns, in order, cast to their dtypes."""
    columns = TABLES[table]
    missing = [name for name in columns if name not in frame.columns]
    if missing:
        raise TpuperfError(f"internal: table {table!r} lacks columns {missing}")
    frame = frame.loc[:, list(columns)]
    changes = {name: dtype for name, dtype in columns.items() if str(frame[name].dtype) != dtype}
    return frame.astype(changes) if changes else frame


def validate(table: str, frame: pd.DataFrame) -> None:
    """Raise when ``frame`` does not have ``table``'s columns and dtypes exactly."""
    columns = TABLES[table]
    if list(frame.columns) != list(columns):
        raise TpuperfError(
            f"internal: table {table!r} has columns {list(frame.columns)}, expected {list(columns)}"
        )
    for name, dtype in columns.items():
        actual = str(frame[name].dtype)
        if actual != dtype:
            raise TpuperfError(f"internal: {table}.{name} is {actual}, expected {dtype}")
