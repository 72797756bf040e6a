"""The patterns that read XLA's HLO instruction text, in one table for every module that reads
it: ``hlo_collectives`` (what a collective moves), ``megascale`` (DCN host transfers),
``analyzers.collectives`` (replica groups) and ``diffing`` (an op's shape without its names).

An instruction reads ``%all-reduce.1 = f32[1024]{0} all-reduce(%x), channel_id=3,
replica_groups=[2,4]<=[8], to_apply=%add``.
"""

from __future__ import annotations

import re

# Its result shape and opcode (a ROOT instruction too).
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.+?)\s+([\w\-]+)\(")
# The `%name = ` it starts with, and the %names of its operands and called computations.
OWN_NAME = re.compile(r"^\s*(?:ROOT\s+)?%[^\s=]+\s*=\s*")
OPERAND = re.compile(r"%[A-Za-z_][\w.\-]*")
# An array in a shape: its element type (fp8 types such as f8e4m3fn included) and dimensions.
ARRAY = re.compile(r"\b([a-z]+\d*(?:e\d+m\d+\w*)?)\[([\d,]*)\]")
# Replica groups: explicit {{0,1,2,3},{4,5,6,7}}, iota [2,4]<=[8], or by mesh axes.
GROUPS_EXPLICIT = re.compile(r"replica_groups=\{\{([\d,\s]*)\}")
GROUPS_IOTA = re.compile(r"replica_groups=\[(\d+),(\d+)\]<=")
GROUPS_MESH = re.compile(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}")
PAIRS = re.compile(r"source_target_pairs=\{((?:\{\d+,\d+\},?)*)\}")
CHANNEL = re.compile(r"channel_id=(\d+)")
# Frontend attributes of a DCN host transfer.
RENDEZVOUS = re.compile(r'_xla_host_transfer_rendezvous="?([^",}]+)"?')
TRANSFER_TYPE = re.compile(r'_xla_megascale_transfer_type="?([A-Z_]+)"?')
