"""Machine-readable output: JSON without NaN or Infinity, and files written atomically."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

SCHEMA_VERSION = 1


def clean(value: Any) -> Any:
    """``value`` as plain JSON types: numpy scalars and arrays become Python ones, and
    NaN, Infinity and pandas' NA become None. Other objects become their ``str``."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return [clean(v) for v in value.tolist()]
    if isinstance(value, np.generic):
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
    import sys

    pandas = sys.modules.get("pandas")
    return pandas is not None and (value is pandas.NA or value is pandas.NaT)


def csv_text(table: Any) -> str:
    """A Table as CSV text: a header line, then one line per row (NaN as an empty cell)."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(list(table))
    for row in table.rows():
        writer.writerow(["" if isinstance(v, float) and math.isnan(v) else v for v in row])
    return buffer.getvalue()


def write_parquet(table: Any, handle: BinaryIO) -> None:
    """A Table as Parquet (strings dictionary-encoded), through pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tpuperf.columns import Strings

    arrays = []
    for name in table:
        column = table[name]
        if isinstance(column, Strings):
            arrays.append(pa.array(column.tolist(), type=pa.string()))
        else:
            arrays.append(pa.array(table.array(name)))
    pq.write_table(pa.table(arrays, names=list(table)), handle)


def dumps(document: dict[str, Any]) -> str:
    """JSON text of ``document``; ``schema_version`` first."""
    ordered = {"schema_version": SCHEMA_VERSION, **document}
    return json.dumps(clean(ordered), indent=2, allow_nan=False) + "\n"


def write_atomic(path: str | os.PathLike[str], write: Callable[[BinaryIO], None]) -> None:
    """Write a file through ``write(handle)`` under a temporary name, then rename it into place.

    An interrupted or failed write leaves the old file (or none), never half a file.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        # mkstemp makes the file private (0600); a report is for sharing: the usual mode.
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    data = text.encode("utf-8")
    write_atomic(path, lambda handle: _write_all(handle, data))


def _write_all(handle: BinaryIO, data: bytes) -> None:
    handle.write(data)
