"""Plain JSON values, and the one version of every JSON document and row layout.

The core (reports, scan rows, the cache) uses these to build its JSON forms; the output
layer (:mod:`tpuperf.output`) renders and writes them.
"""

from __future__ import annotations

import math
import sys
from typing import Any

# Bump on any change to a JSON document or row layout that could break a reader. One number
# for all of them: `analyze`, `info`, `ops`, `analyzers` JSON; `scan` rows (ndjson, CSV,
# Parquet metadata).
SCHEMA_VERSION = 1


def clean(value: Any) -> Any:
    """``value`` as plain JSON types: numpy scalars and arrays become Python ones, and
    NaN, Infinity and pandas' NA become None. Other objects become their ``str``."""
    kind = type(value)
    # The plain types first, by exact type: a report holds tens of thousands of values.
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is dict:
        return {str(k): clean(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [clean(v) for v in value]
    return _clean_other(value)


def _clean_other(value: Any) -> Any:
    """:func:`clean` of anything but the exact plain types: subclasses, numpy, pandas."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    numpy = sys.modules.get("numpy")  # numpy values exist only where numpy was imported
    if numpy is not None:
        if isinstance(value, numpy.ndarray):
            return [clean(v) for v in value.tolist()]
        if isinstance(value, numpy.generic):
            value = value.item()
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if _is_pandas_missing(value):
        return None
    return str(value)


def _is_pandas_missing(value: Any) -> bool:
    """pandas' NA and NaT, without importing pandas when nothing else has."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and (value is pandas.NA or value is pandas.NaT)
