"""A GPU device plane's ops: the kernels of its ``Stream #N`` lines, each named and classified
by the ``hlo_op``/``hlo_module`` stats it carries, and grouped into module executions by the
host launch that ran them (:class:`HostExecutions`).

:func:`kernel_ops` (op rows from events labelled by stats) also builds XLA:CPU's ops from host
thread lines (:mod:`tpuperf.build_cpu`), where ops name their run and device themselves.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from tpuperf._dataclasses import dataclass
from tpuperf.columns import Lookup, Strings, Table, concat_strings
from tpuperf.schema import KIND_COLLECTIVE, KIND_COMPUTE, KIND_MEMCPY
from tpuperf.tables import (
    EMPTY_MODULES,
    EMPTY_WAITS,
    LATEST_PS,
    NO_ROWS,
    OP_COST_COLUMNS,
    OP_STRING_COLUMNS,
    classify_op,
    empty_ops,
    op_base,
    self_time,
)
from tpuperf.xspace import Line, Plane

if TYPE_CHECKING:
    from tpuperf.hlo_collectives import HloCollective

_GPU_STREAM_PREFIX = "Stream #"
_GPU_COLLECTIVE_KERNEL = re.compile(r"nccl|rccl", re.IGNORECASE)
_GPU_COLLECTIVE_KINDS = (
    ("allreduce", "all-reduce"),
    ("allgather", "all-gather"),
    ("reducescatter", "reduce-scatter"),
    ("alltoall", "all-to-all"),
    ("sendrecv", "send-recv"),
    ("broadcast", "collective-broadcast"),
)
_GPU_MEMCPY = re.compile(r"^(memcpy|memset)", re.IGNORECASE)
NO_RUN_ID = -(2**63)  # run ids can be negative


def _gpu_classify(kernel: str, hlo_op: str | None, line_name: str) -> tuple[str, str, str]:
    if _GPU_COLLECTIVE_KERNEL.search(kernel):
        squashed = kernel.lower().replace("_", "").replace("-", "")
        for needle, kind in _GPU_COLLECTIVE_KINDS:
            if needle in squashed:
                return KIND_COLLECTIVE, kind, ""
        return KIND_COLLECTIVE, "other", ""
    if _GPU_MEMCPY.match(kernel) or "Memcpy" in line_name or "Memset" in line_name:
        return KIND_MEMCPY, "", ""
    if hlo_op:
        return classify_op(hlo_op)
    return KIND_COMPUTE, "", ""


# Host events that run one XLA program on one device: JAX 0.8's ``<module>:XLA GPU module``
# and the ``XlaModule:#hlo_module=...#`` annotation of other versions.
_HOST_EXECUTION_SUFFIX = ":XLA GPU module"
_HOST_EXECUTION_PREFIX = "XlaModule:"


@dataclass
class HostExecutions:
    """Which host program execution launched each GPU kernel.

    A kernel carries the ``correlation_id`` of its host launch event; the launch
    lies inside the host event that ran the program (``jit_f:XLA GPU module``),
    one per call and device. Back-to-back calls of one jitted function are
    separate executions, which kernel order alone cannot tell apart.
    """

    correlation: np.ndarray  # correlation ids of the launch events, sorted
    launch_ps: np.ndarray  # their host-clock starts, same order
    threads: list[tuple[np.ndarray, np.ndarray]]  # per host line: executions' starts, ends

    @classmethod
    def none(cls) -> HostExecutions:
        return cls(NO_ROWS, NO_ROWS, [])

    @classmethod
    def of(cls, plane: Plane | None) -> HostExecutions:
        correlation: list[np.ndarray] = []
        launch: list[np.ndarray] = []
        threads: list[tuple[np.ndarray, np.ndarray]] = []
        if plane is None or not plane.stat_ids("correlation_id"):
            return cls.none()
        is_execution = np.array(
            [
                n.endswith(_HOST_EXECUTION_SUFFIX) or n.startswith(_HOST_EXECUTION_PREFIX)
                for n in plane.metadata.names
            ]
            + [False],
            dtype=bool,
        )
        for line in plane.lines:
            if not len(line):
                continue
            events = line.int_events(("correlation_id",))
            ids = events.stats["correlation_id"]
            start = events.start_ps(line.timestamp_ns)
            has = ids >= 0
            if has.any():
                correlation.append(ids[has])
                launch.append(start[has])
            rows = plane.metadata.rows(events.metadata_id)
            executions = np.flatnonzero(is_execution[np.where(rows < 0, -1, rows)])
            if len(executions):
                exec_start = start[executions]
                order = np.argsort(exec_start, kind="stable")
                end = exec_start + events.duration_ps[executions]
                threads.append((exec_start[order], end[order]))
        ids = np.concatenate(correlation) if correlation else NO_ROWS
        times = np.concatenate(launch) if launch else NO_ROWS
        order = np.argsort(ids, kind="stable")
        return cls(ids[order], times[order], threads)

    def of_kernels(self, correlation_ids: np.ndarray) -> np.ndarray:
        """The execution index of each kernel (by its correlation id) on the host thread that
        launched most of them; NO_RUN_ID where the profile does not say."""
        out = np.full(len(correlation_ids), NO_RUN_ID, dtype=np.int64)
        if not len(self.correlation) or not self.threads:
            return out
        where = np.searchsorted(self.correlation, correlation_ids)
        where = np.minimum(where, len(self.correlation) - 1)
        found = self.correlation[where] == correlation_ids
        launch = self.launch_ps[where]
        best, best_hits = None, 0
        for start, end in self.threads:
            index = np.searchsorted(start, launch, side="right") - 1
            hits = found & (index >= 0) & (launch < end[np.maximum(index, 0)])
            if hits.sum() > best_hits:
                best, best_hits = (index, hits), int(hits.sum())
        if best is not None:
            index, hits = best
            out[hits] = index[hits]
        return out


def stream_ops(
    plane: Plane, module_names: dict[str, str], executions: HostExecutions
) -> tuple[Table, Table, int]:
    lines = [line for line in plane.lines if line.name.startswith(_GPU_STREAM_PREFIX) and len(line)]
    found = kernel_ops(plane, lines, module_names, executions)
    modules = module_runs(found.ops, found.execution) if found.ops.n else EMPTY_MODULES
    return found.ops, modules, found.untimed


# Events of XLA:CPU inside a collective while it waits for its peers to arrive.
_WAIT_EVENTS = ("Rendezvous",)


@dataclass
class KernelOps:
    ops: Table
    execution: np.ndarray  # per op: its run (run_id, or the launching host execution)
    ordinal: np.ndarray  # per op: device_ordinal, -1 where the event does not say
    waits: Table  # schema "waits" less host and device
    waits_ordinal: np.ndarray  # per wait: the device_ordinal of the op it lies in
    untimed: int = 0  # events left out: their times are past what int64 picoseconds hold


def kernel_ops(
    plane: Plane,
    lines: list[Line],
    module_names: dict[str, str],
    executions: HostExecutions | None,
    facts: dict[tuple[str, str], HloCollective] | None = None,
) -> KernelOps:
    """Op rows from events that carry ``hlo_op``/``hlo_module`` stats (or, on GPU, any kernel).

    ``executions`` is given for GPU planes; on host threads (XLA:CPU) ops say their
    execution themselves, with a ``run_id`` stat, and their device with ``device_ordinal``;
    the Rendezvous events nested in their collectives are the waits. Events are grouped by
    what names them (kernel, op, module, program, TF op), and each distinct group is named
    and classified once (by the HLO opcode in ``facts`` where it has the op), so the cost per
    event is a few array operations.
    """
    gpu = executions is not None
    columns: dict[str, list[Strings]] = {name: [] for name in OP_STRING_COLUMNS}
    numbers: dict[str, list[np.ndarray]] = {
        "start_ps": [],
        "dur_ps": [],
        "self_ps": [],
        "execution": [],
        "ordinal": [],
    }
    waits: dict[str, list[Any]] = {"line": [], "start_ps": [], "dur_ps": [], "ordinal": []}
    untimed = 0
    is_wait = np.array([n in _WAIT_EVENTS for n in plane.metadata.names] + [False], dtype=bool)
    for line in lines:
        hlo_codes, hlo_values = line.stat_codes("hlo_op")
        idx = np.arange(len(line)) if gpu else np.flatnonzero(hlo_codes >= 0)
        timed = _timed(line.start_ps[idx], line.duration_ps[idx])
        if not timed.all():
            untimed += len(idx) - int(timed.sum())
            idx = idx[timed]
        if not len(idx):
            continue
        named = [plane.metadata.rows(line.metadata_id[idx])]
        stats = [line.stat_codes(name) for name in ("hlo_module", "program_id", "tf_op")]
        named += [hlo_codes[idx], *(codes[idx] for codes, _ in stats)]
        group, groups = _distinct_rows(named)
        labels = _kernel_labels(
            plane,
            line.name,
            groups,
            [hlo_values, *(values for _, values in stats)],
            module_names,
            gpu,
            facts or {},
        )
        for name, per_group in labels.items():
            columns[name].append(Strings.from_values(per_group, group))
        columns["line"].append(Strings.constant(line.name, len(idx)))
        columns["source"].append(Strings.constant("", len(idx)))
        if executions is not None:
            correlation = np.asarray(line.stat("correlation_id", -1))
            execution = (
                executions.of_kernels(correlation[idx])
                if correlation.dtype.kind in "iu"
                else np.full(len(idx), NO_RUN_ID, dtype=np.int64)
            )
        else:
            run_ids = np.asarray(line.stat("run_id", NO_RUN_ID))
            execution = (
                run_ids[idx]
                if run_ids.dtype.kind in "iu"
                else np.full(len(idx), NO_RUN_ID, dtype=np.int64)
            )
        start = line.start_ps[idx]
        dur = line.duration_ps[idx]
        numbers["start_ps"].append(start)
        numbers["dur_ps"].append(dur)
        numbers["self_ps"].append(self_time(start, dur))
        numbers["execution"].append(execution)
        ordinal = np.full(len(idx), -1, dtype=np.int64)
        if not gpu:
            ordinals = np.asarray(line.stat("device_ordinal", -1))
            if ordinals.dtype.kind in "iu":
                ordinal = ordinals[idx].astype(np.int64)
            rows = plane.metadata.rows(line.metadata_id)
            _line_waits(
                line, is_wait[np.where(rows < 0, -1, rows)], start, start + dur, ordinal, waits
            )
        numbers["ordinal"].append(ordinal)
        line.release()
    if not columns["op"]:
        return KernelOps(empty_ops(), NO_ROWS, NO_ROWS, EMPTY_WAITS, NO_ROWS, untimed)

    def joined(name: str) -> np.ndarray:
        return np.concatenate(numbers[name]).astype(np.int64, copy=False)

    strings = {name: concat_strings(parts) for name, parts in columns.items()}
    n = len(strings["op"])
    nan = Lookup(np.zeros(n, dtype=np.int8), np.array([np.nan]))
    table = Table(
        {
            **{name: strings[name] for name in OP_STRING_COLUMNS[:9]},
            "start_ps": joined("start_ps"),
            "dur_ps": joined("dur_ps"),
            "self_ps": joined("self_ps"),
            **dict.fromkeys(OP_COST_COLUMNS, nan),
            "tf_op": strings["tf_op"],
            "source": strings["source"],
            "step": np.full(n, -1, dtype=np.int64),
        }
    )
    wait_table = EMPTY_WAITS
    if waits["line"]:
        wait_table = Table(
            {
                "line": concat_strings(waits["line"]),
                "start_ps": np.concatenate(waits["start_ps"]),
                "dur_ps": np.concatenate(waits["dur_ps"]),
            }
        )
    return KernelOps(
        table,
        joined("execution"),
        joined("ordinal"),
        wait_table,
        np.concatenate(waits["ordinal"]) if waits["ordinal"] else NO_ROWS,
        untimed,
    )


def _timed(start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Which host-clock events have times to use: start within +-LATEST_PS and a duration
    from 0 to LATEST_PS, so that their ends, and differences of them, stay in int64 (a start
    near the int64 limit made self time overflow)."""
    return (start > -LATEST_PS) & (start < LATEST_PS) & (dur >= 0) & (dur < LATEST_PS)


def _line_waits(
    line: Line,
    is_wait: np.ndarray,  # per event of the line
    op_start: np.ndarray,
    op_end: np.ndarray,
    op_ordinal: np.ndarray,
    out: dict[str, list[Any]],
) -> None:
    """The wait events of a host thread line that lie inside one of its ops, with that op's
    device; appended to ``out``'s columns."""
    found = np.flatnonzero(is_wait)
    if not len(found):
        return
    start = line.start_ps[found]
    end = start + line.duration_ps[found]
    # The op each wait lies in: the last op to start at or before it (ops on a thread are in
    # order; a wait in none of them is not a collective's).
    order = np.argsort(op_start, kind="stable")
    at = np.searchsorted(op_start[order], start, side="right") - 1
    inside = at >= 0
    owner = order[np.maximum(at, 0)]
    inside &= op_end[owner] >= end
    if not inside.any():
        return
    out["line"].append(Strings.constant(line.name, int(inside.sum())))
    out["start_ps"].append(start[inside].astype(np.int64))
    out["dur_ps"].append((end - start)[inside].astype(np.int64))
    out["ordinal"].append(op_ordinal[owner[inside]])


def _distinct_rows(codes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(group of each row, the distinct rows) of parallel code columns (each >= -1).

    The codes of a row are packed into one int64 (mixed radix) so that one sort of
    integers finds the groups; a sort of rows is many times slower.
    """
    shifted = [np.asarray(c, dtype=np.int64) + 1 for c in codes]
    radices = [int(c.max()) + 1 if len(c) else 1 for c in shifted]
    if float(np.prod(np.array(radices, dtype=np.float64))) >= 2.0**62:
        distinct, group = np.unique(np.stack(shifted, axis=1), axis=0, return_inverse=True)
        return group.reshape(-1), distinct - 1
    key = np.zeros(len(shifted[0]), dtype=np.int64)
    for column, radix in zip(shifted, radices, strict=True):
        key = key * radix + column
    keys, group = np.unique(key, return_inverse=True)
    rows = np.empty((len(keys), len(shifted)), dtype=np.int64)
    for i in range(len(shifted) - 1, -1, -1):
        keys, rows[:, i] = np.divmod(keys, radices[i])
    return group.reshape(-1), rows - 1


def _kernel_labels(
    plane: Plane,
    line_name: str,
    groups: np.ndarray,
    values: list[list[Any]],
    module_names: dict[str, str],
    gpu: bool,
    facts: dict[tuple[str, str], HloCollective],
) -> dict[str, list[str]]:
    """The string columns of each group of events: a group is (metadata row, and codes of
    ``hlo_op``, ``hlo_module``, ``program_id``, ``tf_op`` into ``values``; -1 if absent)."""
    hlo_values, module_values, program_values, tf_values = values
    names = plane.metadata.names
    out: dict[str, list[str]] = {
        name: [] for name in ("module", "program_id", "op", "hlo_text", "tf_op", "category")
    }
    out |= {"kind": [], "collective": [], "async_role": []}
    for row, hlo_code, module_code, program_code, tf_code in groups.tolist():
        kernel = names[row] if row >= 0 else ""
        hlo = hlo_values[hlo_code] if hlo_code >= 0 else None
        hlo = hlo if isinstance(hlo, str) else None
        program = program_values[program_code] if program_code >= 0 else None
        module = module_values[module_code] if module_code >= 0 else None
        if not isinstance(module, str) or not module:
            module = module_names.get(str(program), "") if program is not None else ""
        tf_op = tf_values[tf_code] if tf_code >= 0 else None
        fact = facts.get((f"{module}({program})", hlo or kernel)) if facts else None
        kind, collective, role = (
            _gpu_classify(kernel, hlo, line_name)
            if gpu
            else classify_op(hlo or kernel, fact.opcode if fact else "")
        )
        op = hlo or kernel
        out["module"].append(module)
        out["program_id"].append(str(program) if program is not None else "")
        out["op"].append(op)
        out["hlo_text"].append(kernel)
        out["tf_op"].append(tf_op if isinstance(tf_op, str) else "")
        out["category"].append(_derived_category(op, kind))
        out["kind"].append(kind)
        out["collective"].append(collective)
        out["async_role"].append(role)
    return out


def _derived_category(op: str, kind: str) -> str:
    if kind == KIND_MEMCPY:
        return "memcpy"
    return op_base(op) or kind


def module_runs(ops: Table, execution: np.ndarray) -> Table:
    """Module executions on a device.

    Ops are grouped by the execution the profile records for them (``run_id`` on
    XLA:CPU, the launching host execution on GPU): one execution per (module,
    execution), even when its ops ran on several threads or streams. Ops whose
    execution is unknown join the one before them. Without any recorded
    execution, an execution is a run of consecutive ops, by start, of one module.
    """
    module = ops.strings("module")
    has_module = ~module.eq("")
    if not has_module.any():
        return EMPTY_MODULES
    start_all = ops.array("start_ps")
    candidates = np.flatnonzero(has_module)
    order = candidates[np.argsort(start_all[candidates], kind="stable")]
    codes = module.codes[order]
    execution = execution[order]
    known = execution != NO_RUN_ID
    if known.any():
        # Forward-fill the unknown ones (leading ones take the first known execution).
        source = np.where(known, np.arange(len(known)), -1)
        source = np.maximum.accumulate(source)
        source[source < 0] = int(np.flatnonzero(known)[0])
        pairs = np.stack([codes.astype(np.int64), execution[source]], axis=1)
        _, first_seen, run_index = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
        run_index = run_index.reshape(-1)
    else:
        new_run = np.ones(len(codes), dtype=bool)
        new_run[1:] = codes[1:] != codes[:-1]
        run_index = np.cumsum(new_run) - 1
        first_seen = np.flatnonzero(new_run)
    start = start_all[order]
    end = start + ops.array_at("dur_ps", order)
    n_runs = int(run_index.max()) + 1
    run_start = np.full(n_runs, np.iinfo(np.int64).max, dtype=np.int64)
    run_end = np.full(n_runs, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(run_start, run_index, start)
    np.maximum.at(run_end, run_index, end)
    # The runs in order of their key (as np.unique sorts), then by start.
    first_seen = np.asarray(first_seen)
    firsts = order[first_seen]
    by_start = np.argsort(run_start, kind="stable")
    return Table(
        {
            "module": ops.strings("module").take(firsts[by_start]),
            "program_id": ops.strings("program_id").take(firsts[by_start]),
            "start_ps": run_start[by_start],
            "dur_ps": (run_end - run_start)[by_start],
        }
    )
