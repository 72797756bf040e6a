"""Megascale (multislice) DCN collectives: slack, stall, observed time, required bandwidth.

A collective between TPU slices crosses the data-center network (DCN) as host transfers:
``send``, ``recv``, ``send-done``, ``recv-done`` ops with ``hlo_category`` "host send" or
"host recv", tied together by the ``_xla_host_transfer_rendezvous`` frontend attribute (or,
on ops without it, the ``channel_id`` of one that had it), and typed by
``_xla_megascale_transfer_type``. The definitions are XProf's Megascale Stats tool's
(openxla/xprof ``xprof/convert/xspace_to_dcn_slack_analysis.cc``,
``process_megascale_dcn.cc``, ``docs/megascale_stats.md``), measured per device:

- an occurrence runs from its ``send`` start to its ``recv-done`` end (observed duration);
- stall: the time in the occurrence's own send, recv, send-done and recv-done ops;
- slack: the ``recv-done`` start minus the ``send`` start, less the time of every DCN op
  (of any rendezvous, the send itself included) that ran in between;
- bytes over the network, from the ``recv-done`` result size s and the group size n:
  ONE_TO_ONE s (n is 1), ALL_GATHER s(n-1)/n, ALL_REDUCE 2s(n-1)/n, ALL_TO_ALL s(n-1)/n,
  REDUCE_SCATTER s(n-1);
- required bandwidth: bytes / slack, in Gbit/s.

Per rendezvous the slack, stall and observed duration are means over its occurrences.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import field
from typing import Any

import numpy as np

from tpuperf import hlo_patterns
from tpuperf._dataclasses import dataclass
from tpuperf.hlo_collectives import element_bytes, text_collective
from tpuperf.schema import is_dcn_category

OPCODES = ("send", "recv", "send-done", "recv-done")


@dataclass(frozen=True)
class DcnOp:
    """One execution of a DCN host-transfer op on a device."""

    op: str  # the op's name (send.3, recv-done.3)
    hlo_text: str
    start_ps: int
    dur_ps: int


@dataclass(frozen=True)
class Occurrence:
    """One send ... recv-done of a rendezvous on one device."""

    rendezvous: str
    transfer_type: str
    send_op: str
    recv_op: str
    send_start_ps: int
    slack_ps: int
    observed_ps: int
    stall_ps: int
    done_ps: int  # the part of the stall in send-done and recv-done (waiting on the network)
    network_bytes: float  # NaN where the group size or the shape is unknown


@dataclass
class _State:
    start_ps: int | None = None
    overlap_ps: int = 0
    stall_ps: int = 0
    done_ps: int = 0
    send_op: str = ""
    transfer_type: str = ""
    group_size: int | None = None


def opcode(op: str, hlo_text: str) -> str:
    """send, recv, send-done or recv-done from the instruction text, else from the op name."""
    match = hlo_patterns.INSTRUCTION.match(hlo_text)
    if match and match.group(2) in OPCODES:
        return match.group(2)
    base = re.sub(r"\.\d+$", "", op).replace("_", "-")
    return base if base in OPCODES else ""


def result_bytes(hlo_text: str) -> float:
    """The bytes of an instruction's result (tuple elements summed, tokens 0), as XProf
    sizes the recv-done buffer; NaN where the text does not say."""
    match = hlo_patterns.INSTRUCTION.match(hlo_text)
    if not match:
        return float("nan")
    total = 0.0
    for dtype, dims in hlo_patterns.ARRAY.findall(match.group(1)):
        if dtype == "token":
            continue
        size = element_bytes(dtype)
        if size is None:
            return float("nan")
        total += math.prod(int(d) for d in dims.split(",") if d) * size
    return total


def network_bytes(recv_bytes: float, group_size: int | None, transfer_type: str) -> float:
    """XProf's bytes transmitted over the network for one occurrence."""
    if transfer_type == "ONE_TO_ONE":
        return recv_bytes
    if not group_size:
        return float("nan")
    n = group_size
    factor = {
        "ALL_GATHER": (n - 1) / n,
        "ALL_REDUCE": 2 * (n - 1) / n,
        "ALL_TO_ALL": (n - 1) / n,
        "REDUCE_SCATTER": float(n - 1),
    }.get(transfer_type)
    return recv_bytes * factor if factor is not None else float("nan")


def required_gbps(nbytes: float, slack_ps: float) -> float:
    """Bytes over the slack, in Gbit/s (XProf's unit); NaN without bytes or slack."""
    if not slack_ps > 0 or not math.isfinite(nbytes):
        return float("nan")
    return nbytes * 8 / (slack_ps / 1e12) / 1e9


def occurrences(ops: Iterable[DcnOp]) -> list[Occurrence]:
    """One device's DCN ops in start order, tracked as XProf's DcnTracker does."""
    states: dict[str, _State] = {}
    channels: dict[str, str] = {}
    out: list[Occurrence] = []
    for dcn in sorted(ops, key=lambda o: o.start_ps):
        code = opcode(dcn.op, dcn.hlo_text)
        if not code:
            continue
        channel_match = hlo_patterns.CHANNEL.search(dcn.hlo_text)
        channel = channel_match.group(1) if channel_match else ""
        rendezvous_match = hlo_patterns.RENDEZVOUS.search(dcn.hlo_text)
        if rendezvous_match:
            rendezvous = rendezvous_match.group(1)
            channels[channel] = rendezvous
        elif channel in channels:
            rendezvous = channels[channel]
        else:
            continue  # an op whose send/recv was not seen
        state = states.setdefault(rendezvous, _State())
        state.stall_ps += dcn.dur_ps
        if code.endswith("-done"):
            state.done_ps += dcn.dur_ps
        if code == "send":
            type_match = hlo_patterns.TRANSFER_TYPE.search(dcn.hlo_text)
            state.start_ps = dcn.start_ps
            state.overlap_ps = 0
            state.stall_ps = dcn.dur_ps
            state.done_ps = 0
            state.send_op = dcn.op
            state.transfer_type = type_match.group(1) if type_match else ""
            state.group_size = 1 if state.transfer_type == "ONE_TO_ONE" else _group(dcn.hlo_text)
        elif code == "recv-done" and state.start_ps is not None:
            out.append(
                Occurrence(
                    rendezvous=rendezvous,
                    transfer_type=state.transfer_type,
                    send_op=state.send_op,
                    recv_op=dcn.op,
                    send_start_ps=state.start_ps,
                    slack_ps=dcn.start_ps - state.start_ps - state.overlap_ps,
                    observed_ps=dcn.start_ps + dcn.dur_ps - state.start_ps,
                    stall_ps=state.stall_ps,
                    done_ps=state.done_ps,
                    network_bytes=network_bytes(
                        result_bytes(dcn.hlo_text), state.group_size, state.transfer_type
                    ),
                )
            )
        for other in states.values():
            other.overlap_ps += dcn.dur_ps
    return out


def _group(hlo_text: str) -> int | None:
    size = text_collective(hlo_text)[1]
    return size if size and size > 0 else None


@dataclass
class Summary:
    """One rendezvous over its occurrences on every device."""

    rendezvous: str
    transfer_type: str
    send_op: str
    recv_op: str
    occurrences: int = 0
    slack_ps: list[int] = field(default_factory=list)
    observed_ps: list[int] = field(default_factory=list)
    stall_ps: list[int] = field(default_factory=list)
    network_bytes: float = float("nan")

    def row(self) -> dict[str, Any]:
        n = self.occurrences
        slack = sum(self.slack_ps) / n
        stall = sum(self.stall_ps) / n
        return {
            "rendezvous": self.rendezvous,
            "transfer_type": self.transfer_type,
            "send_op": self.send_op,
            "recv_op": self.recv_op,
            "occurrences": n,
            "slack_ms": slack / 1e9,
            "observed_ms": sum(self.observed_ps) / n / 1e9,
            "stall_ms": stall / 1e9,
            "total_stall_ms": sum(self.stall_ps) / 1e9,
            "bytes": self.network_bytes,
            "required_gbps": required_gbps(self.network_bytes, slack),
        }


COLUMNS = (
    "rendezvous",
    "transfer_type",
    "send_op",
    "recv_op",
    "occurrences",
    "slack_ms",
    "observed_ms",
    "stall_ms",
    "total_stall_ms",
    "bytes",
    "required_gbps",
)


def summarize(per_device: Sequence[Sequence[Occurrence]]) -> list[dict[str, Any]]:
    """One row per rendezvous, by total stall (most first)."""
    by_name: dict[str, Summary] = {}
    for device in per_device:
        for occ in device:
            s = by_name.setdefault(
                occ.rendezvous,
                Summary(occ.rendezvous, occ.transfer_type, occ.send_op, occ.recv_op),
            )
            s.occurrences += 1
            s.slack_ps.append(occ.slack_ps)
            s.observed_ps.append(occ.observed_ps)
            s.stall_ps.append(occ.stall_ps)
            s.network_bytes = occ.network_bytes
    rows = [s.row() for s in by_name.values()]
    rows.sort(key=lambda r: (-r["total_stall_ms"], r["rendezvous"]))
    return rows


def rendezvous_names(device_tables: Iterable[Any]) -> set[str]:
    """The DCN rendezvous named by the host-transfer ops of a profile's devices
    (``Profile.device_tables``); empty where it has none."""
    names: set[str] = set()
    for tables in device_tables:
        category = tables.ops.strings("category")
        if not any(is_dcn_category(c) for c in category.values):
            continue
        wanted = [is_dcn_category(c) for c in category.values] + [False]
        rows = category.per_row(np.asarray(wanted, dtype=bool))
        for text in set(tables.ops.strings("hlo_text").take(rows).tolist()):
            if match := hlo_patterns.RENDEZVOUS.search(text):
                names.add(match.group(1))
    return names
