"""Where op time goes in the model's code: name scopes, passes and source lines.

Every XLA op carries the JAX name-scope path of the code that made it (``tf_op`` on TPU,
``op_name`` in the HLO protos of GPU and CPU profiles), for example
``jit(train_step)/jit(main)/transpose(jvp(MLP))/Dense_0/dot_general``, and the source line.
This module turns that into one row per op (program, op) — the scope table,
:data:`tpuperf.schema.SCOPES` — and sums op time by scope, pass and source line.

Where it comes from, per device:

- TPU: the op's own ``tf_op`` and ``source`` stats (the profiler's per-op metadata; a
  ``tf_op`` ends in ``:op_type``, dropped here).
- GPU and CPU: the HLO module of the op's program (the ``Hlo Proto`` stats of the
  ``/host:metadata`` plane), the instruction named as the op: its ``metadata.op_name`` and
  ``source_file``/``source_line``, or the innermost frame of its ``stack_frame_id`` in the
  module's stack frame index (newer XLA). A fusion without metadata of its own takes that of
  its fused computation's root. Where no HLO module names the op, its ``tf_op`` stat is used
  when it is a path (has a ``/``).

A path is split at ``/`` (outside parentheses) into levels, the last being the primitive
(``dot_general``). Transformation wrappers are recognised and peeled off a level:
``transpose(jvp(MLP))`` is the level ``MLP`` under the transforms ``transpose`` and ``jvp``.
Program wrappers (``jit(f)``, ``pjit(f)``, ``pmap(f)``) stay levels, so ``jit(relu)`` inside a
step is a level of its own; JAX's ``jit(main)`` (the lowered top function) is dropped. So the
forward and the backward ops of one layer fall in the same scope, told apart by their pass:

- ``backward``: under ``transpose(...)`` (the transposed, gradient computation);
- ``forward``: under ``jvp(...)``, ``vjp(...)`` or ``linearize(...)``, or any scoped op of a
  program that has no backward op (inference, or a jitted function without gradients);
- ``optimizer``: scoped ops of a program with backward ops, outside the differentiated function
  (the parameter update, and any other work of the training step around ``grad``);
- ``other``: ops without a scope (async copies, kernels no HLO op names), or whose path is a bare
  name and no function (``x``: XLA's layout change of the argument ``x``).

Ops outside every scope are counted in one of two groups, by the tree, ``ops --by scope`` and
``ops --by source`` alike (:func:`tree_path`, :func:`scope_label`): (top level) when their path
is their primitive alone, (no scope) without a path.

Nothing here runs unless scope data is asked for: :func:`scopes` builds the table on first use
and keeps it with the profile.
"""

from __future__ import annotations

import functools
import re
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from tpuperf import kernels, schema
from tpuperf._dataclasses import dataclass
from tpuperf.columns import Lookup, Strings, Table, index_groups, sum_by
from tpuperf.schema import PASS_BACKWARD, PASS_FORWARD, PASS_OPTIMIZER, PASS_OTHER, PASSES
from tpuperf.tables import collective_of

if TYPE_CHECKING:
    from tpuperf.config import AnalysisConfig
    from tpuperf.profiles import Profile
    from tpuperf.tables import DeviceTables
    from tpuperf.timeline import DeviceSelection, Selection

# The two groups of ops outside every scope, as the tree, `ops --by scope` and `ops --by source`
# all name them (each a node of the tree's first level, a row of depth 1):
NO_SCOPE = "(no scope)"  # ops without a name-scope path (async copies, kernels no op names)
TOP_LEVEL = "(top level)"  # ops whose path is their primitive alone (`x`: an argument's layout)

ORIGIN_OP_METADATA = "op_metadata"
ORIGIN_HLO_PROTO = "hlo_proto"

# Wrappers peeled off a level (recorded in `transforms`); program wrappers stay levels.
_TRANSFORMS = frozenset(
    {
        "jvp",
        "vjp",
        "linearize",
        "transpose",
        "vmap",
        "xmap",
        "remat",
        "checkpoint",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_vjp_call_jaxpr",
        "shard_map",
    }
)
_PROGRAMS = frozenset({"jit", "pjit", "pmap", "xla_pmap"})
_FORWARD_TRANSFORMS = frozenset({"jvp", "vjp", "linearize"})
_BACKWARD_TRANSFORMS = frozenset({"transpose"})
_LOWERED_MAIN = "jit(main)"
_WRAPPER = re.compile(r"([A-Za-z_][\w.]*)\((.*)\)", re.DOTALL)
_OP_SUFFIX = re.compile(r"\.\d+$")


# --------------------------------------------------------------------------- paths


@dataclass(frozen=True)
class ScopePath:
    """A name-scope path, read: its levels (wrappers peeled), primitive and transforms."""

    levels: tuple[str, ...]
    primitive: str
    transforms: tuple[str, ...]  # outermost first, each once

    @property
    def scope(self) -> str:
        return "/".join(self.levels)


def split_levels(path: str) -> list[str]:
    """``a/f(b/c)/d`` -> ``["a", "f(b/c)", "d"]``: split at ``/`` outside parentheses."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, char in enumerate(path):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        elif char == "/" and depth == 0:
            parts.append(path[start:i])
            start = i + 1
    parts.append(path[start:])
    return [p for p in parts if p]


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _peel(level: str, transforms: list[str]) -> str:
    """The level without its transformation wrappers (added to ``transforms``); a program
    wrapper (``jit(f)``) is kept whole."""
    while True:
        match = _WRAPPER.fullmatch(level)
        if match is None or not _balanced(match.group(2)):
            return level
        head, inner = match.groups()
        if head in _PROGRAMS or head not in _TRANSFORMS:
            return level
        if head not in transforms:
            transforms.append(head)
        level = inner


@functools.lru_cache(maxsize=65536)
def parse_path(path: str) -> ScopePath:
    """Read a name-scope path (``op_name`` / ``tf_op`` without its ``:type``)."""
    parts = split_levels(path.strip())
    if not parts:
        return ScopePath((), "", ())
    transforms: list[str] = []
    levels = []
    for part in parts[:-1]:
        level = _peel(part, transforms)
        if level and level != _LOWERED_MAIN:
            levels.append(level)
    primitive = _peel(parts[-1], transforms)
    if _is_program(primitive):  # an op of the call itself (a copy of its result): no primitive
        if primitive != _LOWERED_MAIN:
            levels.append(primitive)
        primitive = ""
    return ScopePath(tuple(levels), primitive, tuple(transforms))


def _is_program(level: str) -> bool:
    match = _WRAPPER.fullmatch(level)
    return match is not None and match.group(1) in _PROGRAMS and _balanced(match.group(2))


def strip_op_type(tf_op: str) -> str:
    """``jit(f)/jit(main)/add:`` -> ``jit(f)/jit(main)/add``; TensorFlow's ``a/MatMul:MatMul``
    -> ``a/MatMul``: a TPU ``tf_op`` is the op name, a colon and the op type."""
    head, colon, tail = tf_op.rpartition(":")
    if colon and "/" not in tail and "(" not in tail:
        return head
    return tf_op


def split_source(text: str) -> tuple[str, int]:
    """``path/file.py:29`` -> (``path/file.py``, 29); (text, 0) without a line number."""
    head, colon, tail = text.rpartition(":")
    if colon and tail.strip().isdecimal() and len(tail.strip()) <= 18:
        return head, int(tail)
    return text, 0


def source_text(file: str, line: int) -> str:
    if not file:
        return ""
    return f"{file}:{line}" if line > 0 else file


# --------------------------------------------------------------------------- HLO protos


@dataclass(frozen=True)
class _OpMeta:
    name_scope: str
    source_file: str
    source_line: int


def hlo_op_metadata(data: bytes, wanted: set[str]) -> dict[str, _OpMeta]:
    """The metadata of the instructions named in ``wanted`` of a serialized ``xla.HloProto``.

    Raises the protobuf runtime's error when ``data`` is not one."""
    from tpuperf import _hlo_schema

    module = _hlo_schema.read(data).hlo_module
    computations = {c.id: c for c in module.computations}
    frames = module.stack_frame_index
    found: dict[str, _OpMeta] = {}
    for computation in module.computations:
        for instruction in computation.instructions:
            if instruction.name in wanted:
                found[instruction.name] = _instruction_meta(instruction, computations, frames)
    return found


def _instruction_meta(instruction: Any, computations: dict[int, Any], frames: Any) -> _OpMeta:
    metadata = op_metadata(instruction, computations)
    return _OpMeta(metadata.op_name, *source_of(metadata, frames))


def op_metadata(instruction: Any, computations: dict[int, Any]) -> Any:
    """The ``OpMetadata`` an HLO instruction's scope and source are read from: its own, or,
    for a fusion (or call) without any, its computation's root's (the root is the last
    instruction; else the last one that has any). ``computations``: the module's by id."""
    metadata = instruction.metadata
    if not metadata.op_name:
        for computation_id in instruction.called_computation_ids:
            called = computations.get(computation_id)
            if called is None:
                continue
            for inner in reversed(called.instructions):
                if inner.metadata.op_name:
                    metadata = inner.metadata
                    break
            if metadata.op_name:
                break
    return metadata


def source_of(metadata: Any, frames: Any) -> tuple[str, int]:
    """The file and line of an ``OpMetadata``: its own, else its stack frame's in the
    module's stack frame index ``frames``."""
    file, line = metadata.source_file, metadata.source_line
    if not file and metadata.stack_frame_id:
        file, line = _frame_location(frames, metadata.stack_frame_id)
    return file, int(line)


def _frame_location(index: Any, frame_id: int) -> tuple[str, int]:
    """File and line of a stack frame (1-based ids, as the index stores them)."""
    try:
        frame = index.stack_frames[frame_id - 1]
        location = index.file_locations[frame.file_location_id - 1]
        return index.file_names[location.file_name_id - 1], int(location.line)
    except IndexError:
        return "", 0


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True, eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class Scopes:
    """The scope table of a profile and, per device, the scope row of each of its ops."""

    table: Table  # schema.SCOPES' columns, one row per (module, program_id, op)
    levels: tuple[tuple[str, ...], ...]  # each row's levels
    # (host, device) -> the row of each op: on TPU by the ops' metadata row (the index their
    # names share), so that it costs nothing per op
    device_rows: dict[tuple[str, int], Lookup]
    windows: dict[tuple[str, int], int]  # (host, device) -> step windows (1 without steps)
    notes: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return self.table.n

    @property
    def has_scopes(self) -> bool:
        """Whether any op has a name-scope path or a source line."""
        return bool((~self.table.strings("scope_origin").eq("")).any() if self.table.n else False)

    def rows(self, device: DeviceTables) -> np.ndarray:
        """The row of each of the device's ops."""
        return self.device_rows[(device.host, device.device)].array()

    def rows_at(self, key: tuple[str, int], ops: np.ndarray) -> np.ndarray:
        """The rows of the ops ``ops`` of device ``key`` ((host, device))."""
        found = self.device_rows[key]
        return found.values[found.index[ops]]

    def sums_at(self, view: DeviceSelection, column: str) -> np.ndarray:
        """Per scope row, the sum of the int64 ``column`` over the selected ops of ``view``:
        summed per value of the device's op index first (a TPU op's metadata row, a few
        thousand; :meth:`DeviceSelection.selected_sums`, which the op table reads too), then per
        row, so that no row number is read out per op. Integers: exact in any order."""
        found = self.device_rows[view.key]
        per_index = view.selected_sums(found.index, len(found.values), column)
        return sum_by(found.values, self.n, per_index)

    def counts_at(self, view: DeviceSelection) -> np.ndarray:
        """Per scope row, how many of the selected ops of ``view`` it has (counted per value
        of the op index first, as :meth:`sums_at`)."""
        found = self.device_rows[view.key]
        per_index = view.selected_counts(found.index, len(found.values))
        return sum_by(found.values, self.n, per_index)

    def pass_codes(self) -> np.ndarray:
        """Each row's pass as an index into :data:`schema.PASSES`."""
        passes = self.table.strings("pass")
        lookup = np.array([PASSES.index(p) for p in passes.values], dtype=np.int64)
        return lookup[passes.codes] if len(lookup) else np.zeros(0, dtype=np.int64)


_CACHE: weakref.WeakKeyDictionary[Any, Scopes] = weakref.WeakKeyDictionary()


def scopes(profile: Profile) -> Scopes:
    """The profile's :class:`Scopes`, built on first use and kept with the profile."""
    found = _CACHE.get(profile)
    if found is None:
        found = _build(profile)
        _CACHE[profile] = found
    return found


def scope_table(profile: Profile) -> Table:
    """The scope table (:data:`tpuperf.schema.SCOPES`), as columns."""
    return scopes(profile).table


def frame(profile: Profile) -> Any:
    """The scope table as a pandas DataFrame (``Profile.scopes``)."""
    table = scope_table(profile)
    frame_ = table.to_pandas(schema.SCOPES)
    return frame_.astype({c: t for c, t in schema.SCOPES.items() if str(frame_[c].dtype) != t})


def _windows(device: DeviceTables) -> int:
    return max(device.steps.n, 1) if device.steps is not None else 1


def _build(profile: Profile) -> Scopes:
    # Each device's op groups (module, program id, op), one row per identity over all
    # devices, in order of first appearance: the groups of every device are numbered at
    # once (kernels.factorize), not one at a time.
    named: list[tuple[str, str, str]] = []  # every device's groups, one after another
    stat_tf_op: list[str] = []  # and their stats
    stat_source: list[str] = []
    seen_as: list[tuple[str, bool]] = []  # per device: (host, scope from the op's stats?)
    grouped: list[tuple[tuple[str, int], np.ndarray, np.ndarray, slice]] = []
    device_rows: dict[tuple[str, int], Lookup] = {}
    windows: dict[tuple[str, int], int] = {}
    for device in profile.device_tables:
        ops = device.ops
        key = (device.host, device.device)
        windows[key] = _windows(device)
        if not ops.n:
            device_rows[key] = Lookup(np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32))
            continue
        columns = [ops.strings(c) for c in ("module", "program_id", "op")]
        index, group, first = index_groups(columns)
        tf_ops, sources = ops.strings("tf_op"), ops.strings("source")
        # TPU ops carry their scope as per-op metadata; elsewhere the HLO protos say it.
        own = device.row["kind"] == "TPU" and any(tf_ops.values)
        grouped.append((key, index, group, slice(len(named), len(named) + len(first))))
        named.extend(zip(*(c.take(first).tolist() for c in columns), strict=True))
        stat_tf_op.extend(tf_ops.take(first).tolist())
        stat_source.extend(sources.take(first).tolist())
        seen_as.extend([(device.host, own)] * len(first))
    rows, unique = kernels.factorize(named)
    identities: list[tuple[str, str, str]] = list(unique)
    device_rows.update((key, Lookup(index, rows[at][group])) for key, index, group, at in grouped)
    found = kernels.first_rows(rows, len(identities))
    assert found is not None  # rows are in range: factorize made them
    at_first = found.tolist()
    raw = [(stat_tf_op[i], stat_source[i]) for i in at_first]  # from the op's own stats
    first_seen = [seen_as[i] for i in at_first]  # (host, from the op's stats?)
    metas, notes = _hlo_metadata(profile, identities, first_seen)
    name_scopes, files, lines, origins = [], [], [], []
    for row, (tf_op, source) in enumerate(raw):
        _, own = first_seen[row]
        meta = metas.get(row)
        if own or meta is None:
            path = strip_op_type(tf_op)
            if not own and "/" not in path:  # a GPU kernel's annotation, not a scope path
                path = ""
            file, line = split_source(source) if source else ("", 0)
            origin = ORIGIN_OP_METADATA if (path or file) else ""
        else:
            path, file, line = meta.name_scope, meta.source_file, meta.source_line
            origin = ORIGIN_HLO_PROTO if (path or file) else ""
        name_scopes.append(path)
        files.append(file)
        lines.append(line)
        origins.append(origin)
    parsed = [parse_path(p) for p in name_scopes]
    passes = _passes(identities, parsed)
    table = Table(
        {
            "module": Strings.from_list([i[0] for i in identities]),
            "program_id": Strings.from_list([i[1] for i in identities]),
            "op": Strings.from_list([i[2] for i in identities]),
            "name_scope": Strings.from_list(name_scopes),
            "scope": Strings.from_list([p.scope for p in parsed]),
            "depth": np.array([len(p.levels) for p in parsed], dtype=np.int64),
            "primitive": Strings.from_list([p.primitive for p in parsed]),
            "transforms": Strings.from_list([",".join(p.transforms) for p in parsed]),
            "pass": Strings.from_list(passes),
            "source_file": Strings.from_list(files),
            "source_line": np.array(lines, dtype=np.int64),
            "source": Strings.from_list(
                [source_text(f, n) for f, n in zip(files, lines, strict=True)]
            ),
            "scope_origin": Strings.from_list(origins),
        },
        n=len(identities),
    )
    return Scopes(
        table=table,
        levels=tuple(p.levels for p in parsed),
        device_rows=device_rows,
        windows=windows,
        notes=tuple(notes),
    )


# Collectives that reduce gradients (tpuperf.tables.COLLECTIVES kinds).
_GRADIENT_REDUCTIONS = ("all-reduce", "reduce-scatter")


def _passes(identities: list[tuple[str, str, str]], parsed: list[ScopePath]) -> list[str]:
    """Each op's pass (see the module docstring)."""
    backward = {
        identity[:2] for identity, p in zip(identities, parsed, strict=True) if is_backward(p)
    }
    out = []
    for identity, p in zip(identities, parsed, strict=True):
        found = pass_of(p, identity[:2] in backward)
        if found == PASS_OPTIMIZER and collective_of(identity[2]) in _GRADIENT_REDUCTIONS:
            # A gradient reduction written after jax.grad (pmean, psum) has no transpose in
            # its scope, but it finishes the backward pass: the optimizer starts after it.
            found = PASS_BACKWARD
        out.append(found)
    return out


def is_backward(path: ScopePath) -> bool:
    """Whether a path is under ``transpose(...)``: an op of the backward pass."""
    return bool(_BACKWARD_TRANSFORMS.intersection(path.transforms))


def pass_of(path: ScopePath, program_has_backward: bool) -> str:
    """The pass of an op with this path, in a program that has backward ops or not (see the
    module docstring); the memory view gives the buffers an op defines the same pass."""
    if not path.levels:  # no scope, or a bare argument name ("x": a layout change of input x)
        return PASS_OTHER
    if is_backward(path):
        return PASS_BACKWARD
    if _FORWARD_TRANSFORMS.intersection(path.transforms):
        return PASS_FORWARD
    return PASS_OPTIMIZER if program_has_backward else PASS_FORWARD


def _hlo_metadata(
    profile: Profile,
    identities: list[tuple[str, str, str]],
    first_seen: list[tuple[str, bool]],
) -> tuple[dict[int, _OpMeta], list[str]]:
    """Metadata from the HLO protos for the rows whose device has no per-op scope stats,
    joined by program id (else module name) and op name."""
    protos: dict[str, dict[str, bytes]] = getattr(profile, "hlo_protos", None) or {}
    wanted: dict[tuple[str, str], dict[str, list[int]]] = {}  # (host, proto) -> op -> rows
    notes: list[str] = []
    index = {host: _proto_index(by_name) for host, by_name in protos.items()}
    for row, ((module, program_id, op), (host, own)) in enumerate(
        zip(identities, first_seen, strict=True)
    ):
        if own or not op or host not in index:
            continue
        by_program, by_module = index[host]
        proto = by_program.get(program_id) if program_id else None
        if proto is None:
            proto = by_module.get(module)
        if proto is None:
            continue
        wanted.setdefault((host, proto), {}).setdefault(op, []).append(row)
    if wanted:
        from tpuperf import _hlo_schema

        _hlo_schema.expect(sum(len(protos[host][proto]) for host, proto in wanted))
    found: dict[int, _OpMeta] = {}
    for (host, proto), ops in wanted.items():
        try:
            metas = hlo_op_metadata(protos[host][proto], set(ops))
        except Exception as exc:  # a damaged module costs its scopes, not the command
            notes.append(f"{host}: HLO module {proto} could not be read ({type(exc).__name__})")
            continue
        for op, rows in ops.items():
            meta = metas.get(op)
            if meta is not None:
                for row in rows:
                    found[row] = meta
    return found, notes


def _proto_index(by_name: dict[str, bytes]) -> tuple[dict[str, str], dict[str, str]]:
    """(program id -> proto key, module name -> proto key) of a host's HLO protos, whose keys
    are ``name(program_id)``; the first of several same-named modules wins."""
    from tpuperf.tables import split_module_name

    by_program: dict[str, str] = {}
    by_module: dict[str, str] = {}
    for key in by_name:
        split = split_module_name(key)
        name, program_id = split if split else (key, "")
        if program_id:
            by_program.setdefault(program_id, key)
        by_module.setdefault(name, key)
    return by_program, by_module


# --------------------------------------------------------------------------- time


@dataclass(frozen=True, eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class ScopeTime:
    """Op time per scope row: over all devices, or of one device."""

    occurrences: np.ndarray  # int64, per scope row
    time_ps: np.ndarray  # int64: the ops' self time (nested ops are not counted twice)
    windows: int  # step windows the time is over (device-steps; 1 per device without steps)


def scope_time(
    profile: Profile, device: DeviceTables | None = None, timeline: Selection | None = None
) -> ScopeTime:
    """Occurrences and op self time per scope row, of ``device`` or of every device.

    With ``timeline``, the ops ``analyze`` counts: those of its analysed devices that start in
    its selected step windows (warm-up left out, devices without steps of their own left out),
    over those windows. Without, every op of the capture over every step window."""
    data = scopes(profile)
    n = data.n
    occurrences = np.zeros(n, dtype=np.int64)
    time_ps = np.zeros(n, dtype=np.int64)
    windows = 0
    if timeline is not None:
        for view in timeline.devices:
            if device is not None and view.key != (device.host, device.device):
                continue
            occurrences += data.counts_at(view)
            time_ps += data.sums_at(view, "self_ps")
            windows += len(view.windows)
        return ScopeTime(occurrences, time_ps, max(windows, 1))
    for d in [device] if device is not None else profile.device_tables:
        if not d.ops.n:
            continue
        rows = data.rows(d)
        occurrences += np.bincount(rows, minlength=n)
        time_ps += sum_by(rows, n, d.ops.array("self_ps"))
        windows += data.windows[(d.host, d.device)]
    return ScopeTime(occurrences, time_ps, max(windows, 1))


def op_base(op: str) -> str:
    return _OP_SUFFIX.sub("", op.lstrip("%"))


def tree_path(data: Scopes, row: int) -> tuple[tuple[str, ...], str]:
    """Where a scope row sits in the tree: its scope levels and its leaf, the primitive. An op
    outside every scope is under one of two nodes: (top level) when its path is its primitive
    alone, (no scope) without a path (its leaf: the op's base name)."""
    table = data.table
    return _placed(data.levels[row], _value(table, "primitive", row), _value(table, "op", row))


def _placed(levels: tuple[str, ...], primitive: str, op: str) -> tuple[tuple[str, ...], str]:
    """Where an op of these scope levels, primitive and name sits (see :func:`tree_path`)."""
    if levels:
        return levels, primitive
    if primitive:
        return (TOP_LEVEL,), primitive
    return (NO_SCOPE,), op_base(op) or "?"


def scope_label(data: Scopes, row: int) -> str:
    """The scope an op is counted in: its levels joined by ``/``, or (top level), (no scope)."""
    return "/".join(tree_path(data, row)[0])


def _value(table: Table, column: str, row: int) -> str:
    strings = table.strings(column)
    return strings.values[int(strings.codes[row])] if len(strings.values) else ""


def scope_tree(profile: Profile, timeline: Selection | None = None) -> dict[str, Any]:
    """The scope tree of the profile's op time, as plain data (for renderers and JSON): with
    ``timeline``, of the ops and step windows ``analyze`` counts (see :func:`scope_time`).

    Each node: ``name``, ``kind`` (``root``, ``scope``, ``op`` for a primitive leaf, ``none``
    for the nodes of ops outside every scope, (no scope) and (top level)), ``path`` (levels
    joined by ``/``), ``depth``,
    ``time_ps`` and ``self_ps`` (op self time over the capture: all of the node, and its own
    ops outside its sub-scopes), ``ms_per_step`` and ``self_ms_per_step`` (the same over the
    step windows of every device: per step per device), ``pct`` (of all op time),
    ``occurrences``, ``passes`` (ms per step by pass), ``source`` (the source line with the
    most time in the node) and ``children``, most time first.
    """
    data = scopes(profile)
    times = scope_time(profile, timeline=timeline)
    pass_of = data.table.strings("pass").tolist()
    source_of = data.table.strings("source").tolist()
    primitives = data.table.strings("primitive").tolist()
    op_names = data.table.strings("op").tolist()
    root = _Node("(all)", "root", ())
    scope_nodes: dict[tuple[str, ...], _Node] = {(): root}  # each scope path's node
    # Each row's time goes to the node it ends at; nodes then take their children's sums
    # (_Node.total), so a row is added once, not once per level above it.
    rows = np.flatnonzero(times.occurrences).tolist()
    for row, time_ps, count in zip(
        rows, times.time_ps[rows].tolist(), times.occurrences[rows].tolist(), strict=True
    ):
        levels, leaf = _placed(data.levels[row], primitives[row], op_names[row])
        node = scope_nodes.get(levels)
        if node is None:
            node = _scope_node(scope_nodes, levels)
        node.self_ps += time_ps
        if leaf:  # ops of a call itself have no primitive: their time is the scope's own
            node = node.child(leaf, "op", (*levels, leaf))
            node.self_ps += time_ps
        node.add(time_ps, count, pass_of[row], source_of[row])
    root.total()
    return root.to_dict(times.windows, max(root.time_ps, 1))


def _scope_node(scope_nodes: dict[tuple[str, ...], _Node], levels: tuple[str, ...]) -> _Node:
    """The node of the scope path ``levels``, made with those above it as needed."""
    parent = scope_nodes.get(levels[:-1]) or _scope_node(scope_nodes, levels[:-1])
    depth = len(levels) - 1
    kind = "none" if not depth and levels[0] in (NO_SCOPE, TOP_LEVEL) else "scope"
    node = scope_nodes[levels] = parent.child(levels[-1], kind, levels)
    return node


@dataclass
class _Node:
    name: str
    kind: str
    levels: tuple[str, ...]
    time_ps: int = 0
    self_ps: int = 0
    occurrences: int = 0

    def __post_init__(self) -> None:
        self.children: dict[tuple[str, str], _Node] = {}
        self.passes: dict[str, int] = dict.fromkeys(PASSES, 0)
        self.sources: dict[str, int] = {}

    def child(self, name: str, kind: str, levels: tuple[str, ...]) -> _Node:
        key = (name, kind)
        node = self.children.get(key)
        if node is None:
            node = self.children[key] = _Node(name, kind, levels)
        return node

    def add(self, time_ps: int, count: int, pass_: str, source: str) -> None:
        self.time_ps += time_ps
        self.occurrences += count
        self.passes[pass_] += time_ps
        if source:
            self.sources[source] = self.sources.get(source, 0) + time_ps

    def total(self) -> None:
        """Add each child's sums, once its own are whole, to this node's own."""
        for child in self.children.values():
            child.total()
            self.time_ps += child.time_ps
            self.occurrences += child.occurrences
            for pass_, time_ps in child.passes.items():
                self.passes[pass_] += time_ps
            sources = self.sources
            for source, time_ps in child.sources.items():
                sources[source] = sources.get(source, 0) + time_ps

    def to_dict(self, windows: int, total_ps: int) -> dict[str, Any]:
        children = sorted(self.children.values(), key=lambda n: (-n.time_ps, n.name))
        source = max(self.sources.items(), key=lambda kv: (kv[1], kv[0]))[0] if self.sources else ""
        return {
            "name": self.name,
            "kind": self.kind,
            "path": "/".join(self.levels),
            "depth": len(self.levels),
            "time_ps": self.time_ps,
            "self_ps": self.self_ps,
            "ms_per_step": self.time_ps / windows / 1e9,
            "self_ms_per_step": self.self_ps / windows / 1e9,
            "pct": 100.0 * self.time_ps / total_ps,
            "occurrences": self.occurrences,
            "passes": {p: t / windows / 1e9 for p, t in self.passes.items()},
            "source": source,
            "children": [c.to_dict(windows, total_ps) for c in children],
        }


def prune_tree(
    node: dict[str, Any], depth: int | None = None, min_pct: float = 0.0
) -> dict[str, Any]:
    """The tree without nodes deeper than ``depth`` (scope levels; op leaves count as one
    level below their scope) or taking less than ``min_pct`` of all op time. What is cut stays
    in its ancestors' time; ``hidden`` counts the children a node lost."""
    kept = []
    hidden = 0
    for child in node["children"]:
        if (depth is not None and child["depth"] > depth) or child["pct"] < min_pct:
            hidden += 1
            continue
        kept.append(prune_tree(child, depth, min_pct))
    return {**node, "children": kept, "hidden": hidden}


def tree_report(
    profile: Profile,
    depth: int | None = None,
    min_pct: float = 0.0,
    config: AnalysisConfig | None = None,
) -> dict[str, Any]:
    """The document ``tpuperf tree`` shows and writes as JSON: ``source``, ``platform``,
    ``scoped`` (whether any op has scope information), ``windows`` (the step windows the
    per-step times are over), ``step_source``, ``steps_analyzed`` and ``steps_excluded`` (the
    steps of those windows, chosen as ``analyze`` chooses them under ``config``: warm-up left
    out by default), ``depth``, ``min_pct``, ``notes`` (HLO modules that could not be read)
    and ``tree`` (:func:`scope_tree` over those windows, pruned by :func:`prune_tree`)."""
    from tpuperf.config import AnalysisConfig
    from tpuperf.timeline import SOURCE_OP_SPAN, select_steps

    data = scopes(profile)
    # the windows and ops analyze selects, without the time sets (most of the timeline's work)
    timeline = select_steps(profile, config if config is not None else AnalysisConfig())
    return {
        "source": profile.source,
        "platform": profile.platform,
        "scoped": data.has_scopes,
        "windows": max(timeline.n_windows, 1),  # (the windows scope_time counts over)
        "step_source": timeline.step_source if timeline.step_source != SOURCE_OP_SPAN else None,
        "steps_analyzed": len(timeline.steps_selected),
        "steps_excluded": len(timeline.steps_excluded),
        "depth": depth,
        "min_pct": min_pct,
        "notes": list(data.notes),
        "tree": prune_tree(scope_tree(profile, timeline), depth, min_pct),
    }


# What each grouping of op time by the model's code groups by, as the one line says it.
_GROUPINGS = {"scope": "scope", "pass": "pass", "source": "source line"}


def no_scopes_message(source: str, by: str = "scope") -> str:
    """The one line said for a profile whose ops carry no scope information, naming the
    grouping asked for (``scope``, ``pass`` or ``source``)."""
    return (
        f"{source}: no scope information (its ops carry no tf_op/source metadata and no HLO "
        f"module of the profile names them); nothing to group by {_GROUPINGS.get(by, by)}"
    )
