"""The optional C module (``tpuperf/_wire_native.c``): the decoder's hot loops and the interval
sets of a device. None where it is not built, or where ``TPUPERF_DECODER=numpy`` asks for the
numpy code that does the same everywhere (tests run both)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING


def numpy_asked() -> bool:
    """Whether ``TPUPERF_DECODER=numpy`` asks for the numpy code where the C module is built."""
    return os.environ.get("TPUPERF_DECODER", "").strip().lower() == "numpy"


def _load() -> ModuleType | None:
    if numpy_asked():
        return None
    try:
        return importlib.import_module("tpuperf._wire_native")
    except ImportError:  # pragma: no cover - depends on the build
        return None


if TYPE_CHECKING:
    # The checker reads the module's signatures from _wire_native.pyi: every call site is
    # checked against them (at run time it may be None, as below).
    from tpuperf import _wire_native as native
else:
    native = _load()
