"""tpuperf: read XLA profiles, find what to fix first, and by how much.

The public names are few::

    profile = tpuperf.load("gs://bucket/logdir")   # -> Profile (pandas tables)
    report = tpuperf.analyze(profile)               # -> Report (ranked recommendations)
    change = tpuperf.diff("base/", "new/")           # -> DiffReport (what changed, and where)
    memory = tpuperf.memory_report("run/")          # -> MemoryReport (peak HBM per program)

They are imported on first use, so ``import tpuperf`` (and ``tpuperf --help``)
stays light.
"""

from __future__ import annotations

import importlib

# typing itself is not imported: `import tpuperf` and `tpuperf --version` need nothing of it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0.dev0"

_EXPORTS = {
    "load": "tpuperf.profiles",
    "Profile": "tpuperf.profiles",
    "analyze": "tpuperf.analysis",
    "diff": "tpuperf.diffing",
    "memory_report": "tpuperf.memory_plan",
    "DiffReport": "tpuperf.diffing",
    "Report": "tpuperf.analysis",
    "capture": "tpuperf.capturing",
    "profile_steps": "tpuperf.capturing",
    "scan": "tpuperf.scanning",
    "TpuperfError": "tpuperf.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tpuperf' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
