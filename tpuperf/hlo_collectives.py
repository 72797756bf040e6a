"""What each collective of an HLO module moves and among how many devices: read from the
module's serialized ``xla.HloProto`` (the metadata plane's ``Hlo Proto`` stats) or from an op's
HLO text (the TPU event metadata's name)."""

from __future__ import annotations

import math
import re
from typing import Any

from tpuperf import hlo_patterns
from tpuperf._dataclasses import dataclass
from tpuperf.tables import collective_of

# Bytes per element of xla.PrimitiveType values (xla/xla_data.proto): PRED 1, S8 2, S16 3,
# S32 4, S64 5, U8 6, U16 7, U32 8, U64 9, F16 10, F32 11, F64 12, C64 15, BF16 16, C128 18,
# S4 21, U4 22, and the 8-bit floats 19, 20, 23-25, 28, 29, 31. TUPLE 13, OPAQUE 14 and
# TOKEN 17 hold no data of their own.
_ELEMENT_BYTES: dict[int, float] = {
    1: 1,
    2: 1,
    3: 2,
    4: 4,
    5: 8,
    6: 1,
    7: 2,
    8: 4,
    9: 8,
    10: 2,
    11: 4,
    12: 8,
}
_ELEMENT_BYTES |= {15: 8, 16: 2, 18: 16, 21: 0.5, 22: 0.5}
_ELEMENT_BYTES |= dict.fromkeys((19, 20, 23, 24, 25, 28, 29, 31), 1)
# The same by the name HLO text prints.
_TEXT_ELEMENT_BYTES: dict[str, float] = {
    "pred": 1,
    "s8": 1,
    "u8": 1,
    "s16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
}
_TEXT_ELEMENT_BYTES |= {"s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8}
_TEXT_ELEMENT_BYTES |= {"c128": 16, "s4": 0.5, "u4": 0.5}


def element_bytes(dtype: str) -> float | None:
    """Bytes of one element of an HLO element type (every fp8 type 1); None when unknown."""
    return _TEXT_ELEMENT_BYTES.get(dtype, 1 if "f8" in dtype else None)


@dataclass(frozen=True)
class HloCollective:
    """What one collective instruction moves and among how many devices."""

    opcode: str  # all-reduce, all-gather-start, ...
    bytes: float  # of its result (the gathered or reduced buffer); NaN when unknown
    # Devices per replica group; EVERY_DEVICE when the groups are empty (all devices take
    # part); None when the instruction does not say (a -done half: its -start says).
    group_size: int | None
    dtype: str = ""  # the element type of its result (f32, bf16, ...); "mixed" or "" unknown
    sliced: bool = False  # its result is only sliced afterwards (a reduce-scatter would do)
    operand: int = -1  # the instruction id of its first operand (-1: unknown)


# xla.PrimitiveType values by the name HLO text prints, for the dtypes advice names.
_ELEMENT_NAMES = {1: "pred", 4: "s32", 5: "s64", 10: "f16", 11: "f32", 12: "f64", 16: "bf16"}
# Ops that pass a value through unchanged, which a slice may follow.
_PASS_THROUGH = {"get-tuple-element", "bitcast", "copy", "reshape"}
_SLICES = {"slice", "dynamic-slice"}


def hlo_collectives(data: bytes) -> dict[str, HloCollective]:
    """The collective instructions of a serialized ``xla.HloProto``, by name: opcode, the
    bytes and element type of the result, the replica-group size (explicit groups, iota
    groups, mesh axes or permute pairs), whether the result is only sliced afterwards, and
    its first operand. Raises the protobuf runtime's error when ``data`` is not one."""
    from tpuperf import _hlo_schema

    module = _hlo_schema.read(data).hlo_module
    slicing: set[int] | None = None  # the computations that slice a parameter, once needed
    out = {}
    for computation in module.computations:
        collectives = [i for i in computation.instructions if collective_of(i.opcode)]
        if not collectives:  # (most: a single device's programs have none)
            continue
        if slicing is None:
            slicing = {c.id for c in module.computations if _slices_a_parameter(c)}
        users: dict[int, list[Any]] = {}
        for instruction in computation.instructions:
            for operand in instruction.operand_ids:
                users.setdefault(int(operand), []).append(instruction)
        for instruction in collectives:
            shape = instruction.shape
            if instruction.opcode.endswith("-start") and len(shape.tuple_shapes) >= 2:
                shape = shape.tuple_shapes[1]  # (operands, result, ...): the result
            types = {_ELEMENT_NAMES.get(int(t), "") for t in _element_types(shape)}
            out[instruction.name] = HloCollective(
                instruction.opcode,
                _proto_bytes(shape),
                _proto_group_size(instruction),
                dtype=types.pop() if len(types) == 1 else ("mixed" if types else ""),
                sliced=_only_sliced(int(instruction.id), users, slicing),
                operand=int(instruction.operand_ids[0]) if len(instruction.operand_ids) else -1,
            )
    return out


def _element_types(shape: Any) -> list[int]:
    if len(shape.tuple_shapes):
        return [t for s in shape.tuple_shapes for t in _element_types(s)]
    return [int(shape.element_type)]


def _slices_a_parameter(computation: Any) -> bool:
    """Whether a (fused) computation slices one of its parameters."""
    parameters = {int(i.id) for i in computation.instructions if i.opcode == "parameter"}
    return any(
        i.opcode in _SLICES and len(i.operand_ids) and int(i.operand_ids[0]) in parameters
        for i in computation.instructions
    )


def _only_sliced(start: int, users: dict[int, list[Any]], slicing: set[int]) -> bool:
    """Whether every use of instruction ``start``'s value, through pass-through ops, is a slice
    (or a fusion that slices it): the reduced buffer is only needed in part."""
    seen, frontier, uses = {start}, [start], 0
    while frontier:
        for user in users.get(frontier.pop(), []):
            uses += 1
            if user.opcode in _PASS_THROUGH:
                if int(user.id) not in seen:
                    seen.add(int(user.id))
                    frontier.append(int(user.id))
            elif user.opcode in _SLICES or (
                user.opcode == "fusion" and slicing.intersection(user.called_computation_ids)
            ):
                continue
            else:
                return False
    return uses > 0


def _proto_bytes(shape: Any) -> float:
    if len(shape.tuple_shapes):
        return float(sum(_proto_bytes(s) for s in shape.tuple_shapes))
    size = _ELEMENT_BYTES.get(int(shape.element_type))
    if size is None:
        return 0.0 if int(shape.element_type) in (13, 14, 17) else float("nan")
    return float(math.prod(int(d) for d in shape.dimensions) * size)


EVERY_DEVICE = 0  # HloCollective.group_size of empty replica groups


def _proto_group_size(instruction: Any) -> int | None:
    mesh = instruction.mesh_device_list
    if len(mesh.mesh.axes):
        sizes = [int(a.size) for a in mesh.mesh.axes]
        picked = [int(a.mesh_axis_index) for a in mesh.axes] or list(range(len(sizes)))
        return math.prod(sizes[i] for i in picked if 0 <= i < len(sizes))
    devices = instruction.collective_device_list
    if devices.iota_replica_group_list.num_devices_per_group:
        return int(devices.iota_replica_group_list.num_devices_per_group)
    groups = devices.replica_groups or instruction.replica_groups
    if len(groups) and len(groups[0].replica_ids):
        return len(groups[0].replica_ids)
    if len(instruction.source_target_pairs):
        pairs = instruction.source_target_pairs
        return len({p.source for p in pairs} | {p.target for p in pairs})
    return None if instruction.opcode.endswith("-done") else EVERY_DEVICE


def text_collective(hlo_text: str) -> tuple[float, int | None, str]:
    """(result bytes, replica-group size, element type) of a collective from its HLO text
    (``%all-reduce.1 = f32[1024]{0} all-reduce(...), replica_groups=[2,4]<=[8]``); NaN and None
    where the text does not say, EVERY_DEVICE for empty replica groups."""
    match = hlo_patterns.INSTRUCTION.match(hlo_text)
    nbytes = float("nan")
    dtype = ""
    if match:
        shape, opcode = match.groups()
        arrays = hlo_patterns.ARRAY.findall(shape)
        if opcode.endswith("-start") and shape.startswith("(") and len(arrays) >= 2:
            arrays = arrays[1:2]  # (operand, result, ...): the result
        sizes = [element_bytes(t) for t, _ in arrays]
        types = {t for t, _ in arrays}
        dtype = types.pop() if len(types) == 1 else ("mixed" if types else "")
        if arrays and None not in sizes:
            nbytes = float(
                sum(
                    math.prod(int(d) for d in dims.split(",") if d) * (size or 0)
                    for (_, dims), size in zip(arrays, sizes, strict=True)
                )
            )
    return nbytes, _text_group_size(hlo_text), dtype


def _text_group_size(hlo_text: str) -> int | None:
    if match := hlo_patterns.GROUPS_EXPLICIT.search(hlo_text):
        return len([x for x in match.group(1).split(",") if x.strip()])
    if match := hlo_patterns.GROUPS_IOTA.search(hlo_text):
        return int(match.group(2))
    if match := hlo_patterns.GROUPS_MESH.search(hlo_text):
        sizes = dict(re.findall(r"'?([\w.]+)'?\s*=\s*(\d+)", match.group(1)))
        picked = re.findall(r"'?([\w.]+)'?", match.group(2)) or list(sizes)
        return math.prod(int(sizes[a]) for a in picked if a in sizes)
    if match := hlo_patterns.PAIRS.search(hlo_text):
        ids = re.findall(r"\d+", match.group(1))
        return len(set(ids)) or None
    if "replica_groups={}" in hlo_text:
        return EVERY_DEVICE
    return None


def collective_facts(protos: dict[str, bytes]) -> dict[tuple[str, str], HloCollective]:
    """Every collective of a host's HLO protos by (proto key ``name(program_id)``, op); a
    damaged proto adds nothing."""
    if protos:
        from tpuperf import _hlo_schema

        _hlo_schema.expect(sum(map(len, protos.values())))
    out: dict[tuple[str, str], HloCollective] = {}
    for key, data in protos.items():
        try:
            found = hlo_collectives(data)
        except Exception:  # a damaged module costs its collectives' facts, not the command
            continue
        for name, fact in found.items():
            out[key, name] = fact
    return out
