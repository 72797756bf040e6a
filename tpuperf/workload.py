"""What ran: the framework, the platform and whether it trained, read once from the profile.

The analyzers choose each recommendation's fix from this one descriptor (see
``tpuperf/analyzers/fixes.py``), so a TensorFlow profile gets no JAX-only flag, an inference
run no gradient-checkpointing advice and an XLA:CPU run no CUDA advice.

- framework: ``tensorflow`` when the profile has TensorFlow's own lines (``TensorFlow Ops``,
  ``TensorFlow Name Scope``, the executor's ``tf_Compute`` threads), ``jax`` when a host
  records a jax version or its programs are named as JAX names them (``jit_f``, ``pmap_f``;
  name scopes ``jit(f)/...``), ``pytorch`` for PyTorch/XLA's ``SyncTensorsGraph`` programs,
  else ``unknown``.
- platform: the kind of the devices that ran ops (TPU, GPU or CPU); on GPU, ``vendor``
  (``nvidia``, ``amd``) from the chip name.
- training: True when an op belongs to the backward pass (the scope table, DESIGN.md's
  definition: ops under ``transpose(...)``), False when ops have scope information and none
  is backward, None (unknown) without scope information.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tpuperf._dataclasses import dataclass
from tpuperf.schema import PASS_BACKWARD

if TYPE_CHECKING:
    from tpuperf.profiles import Profile
    from tpuperf.scopes import Scopes

FRAMEWORK_JAX = "jax"
FRAMEWORK_TENSORFLOW = "tensorflow"
FRAMEWORK_PYTORCH = "pytorch"
FRAMEWORK_UNKNOWN = "unknown"
FRAMEWORKS = (FRAMEWORK_JAX, FRAMEWORK_TENSORFLOW, FRAMEWORK_PYTORCH, FRAMEWORK_UNKNOWN)

# Lines only TensorFlow's runtime writes (JAX on CPU has `tf_XLAEigen` threads: not these).
_TF_LINES = re.compile(r"^(TensorFlow Ops|TensorFlow Name Scope|tf_Compute/|tf_data_)")
_JAX_PROGRAMS = re.compile(r"^(jit|pjit|pmap|xmap)_")
_JAX_SCOPES = re.compile(r"^(jit|pjit|pmap|xmap)\(")
_PYTORCH_PROGRAMS = re.compile(r"^SyncTensorsGraph")


@dataclass(frozen=True)
class Workload:
    platform: str  # TPU, GPU, CPU (or unknown)
    framework: str = FRAMEWORK_UNKNOWN  # one of FRAMEWORKS
    training: bool | None = None  # None: no scope information to tell
    vendor: str = ""  # GPU: nvidia, amd; "" elsewhere or unknown

    def to_dict(self) -> dict[str, Any]:
        return {
            "framework": self.framework,
            "platform": self.platform,
            "vendor": self.vendor or None,
            "training": self.training,
        }


def detect(profile: Profile, scope_data: Scopes | None = None) -> Workload:
    """The workload of ``profile``; ``scope_data`` (its scope table) tells training from
    inference: without it, that stays unknown."""
    platform = profile.platform
    vendor = ""
    if platform == "GPU":
        chips = " ".join(str(d.row.get("chip") or "") for d in profile.device_tables).lower()
        vendor = "amd" if ("amd" in chips or "gfx" in chips) else ("nvidia" if chips else "")
    training = None
    if scope_data is not None and scope_data.has_scopes:
        training = bool(scope_data.table.strings("pass").eq(PASS_BACKWARD).any())
    return Workload(platform, _framework(profile, scope_data), training, vendor)


def _framework(profile: Profile, scope_data: Scopes | None) -> str:
    lines = set(profile.line_table.strings("line").values)
    if any(_TF_LINES.match(line) for line in lines):
        return FRAMEWORK_TENSORFLOW
    if any("jax" in key for h in profile.hosts for key in h.versions):
        return FRAMEWORK_JAX
    programs: set[str] = set()
    for device in profile.device_tables:
        if device.ops.n:
            programs.update(device.ops.strings("module").values)
        if device.modules.n:
            programs.update(device.modules.strings("module").values)
    if any(_JAX_PROGRAMS.match(p) for p in programs):
        return FRAMEWORK_JAX
    if any(_PYTORCH_PROGRAMS.match(p) for p in programs):
        return FRAMEWORK_PYTORCH
    if scope_data is not None and any(
        _JAX_SCOPES.match(s) for s in scope_data.table.strings("name_scope").values
    ):
        return FRAMEWORK_JAX
    return FRAMEWORK_UNKNOWN
