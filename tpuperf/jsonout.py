"""Plain JSON values, and the one version of every JSON document and row layout.

The core (reports, scan rows, the cache) uses these to build its JSON forms; the output
layer (:mod:`tpuperf.output`) renders and writes them.
"""

from __future__ import annotations

import json
import math
import sys
from json import encoder
from typing import Any

# Bump on any change to a JSON document or row layout that could break a reader. One number
# for all of them: `analyze`, `info`, `ops`, `analyzers` JSON; `scan` rows (ndjson, CSV,
# Parquet metadata).
SCHEMA_VERSION = 1

# The exact types of a JSON scalar, and of a key, as :func:`clean` returns them.
_SCALARS = frozenset({str, int, float, bool, type(None)})
_KEYS = frozenset({str})


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
        if _KEYS.issuperset(map(type, value)) and _SCALARS.issuperset(map(type, value.values())):
            return _clean_scalars(value)  # a table's row
        return {str(k): clean(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [clean(v) for v in value]
    return _clean_other(value)


def _clean_scalars(row: dict[str, Any]) -> dict[str, Any]:
    """:func:`clean` of a dict of str keys and exact scalar values: a copy, NaN and the
    infinities as None, without a call per value."""
    if all(map(math.isfinite, filter(float.__instancecheck__, row.values()))):
        return dict(row)
    return {k: None if type(v) is float and not math.isfinite(v) else v for k, v in row.items()}


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


# --------------------------------------------------------------------------- text


def dumps(value: Any, indent: int | str | None = 2) -> str:
    """``json.dumps(value, indent=indent, allow_nan=False)``: the same text, or the same error.

    With an indent, Python's json encodes in pure Python, one generator step per value: a
    tenth of a second for an op table's 3,000 rows. Here each container whose values are
    all plain scalars (a table's row, a list of numbers) is encoded by json's own C encoder
    in one call, its items separated by a comma, a newline and the indent, which is the text
    the indented encoder writes for them; only the containers around them are walked here.
    Anything but exact str, int, float, bool, None, dict (with str keys), list and tuple,
    and every error (NaN, a cycle), goes to json.dumps itself, which then gives the text or
    raises as it does.
    """
    if _make_encoder is None or type(indent) is not int:  # json's C encoder not built; no indent
        return json.dumps(value, indent=indent, allow_nan=False)
    try:
        parts: list[str] = []
        _Indented(" " * indent, parts).write(value, 0)
        return "".join(parts)
    except Exception:  # json.dumps raises what it raises, or gives the text
        return json.dumps(value, indent=indent, allow_nan=False)


_make_encoder = encoder.c_make_encoder  # type: ignore[attr-defined]  # None without C
_encode_key = encoder.encode_basestring_ascii


class _NotPlain(Exception):
    """A value :func:`dumps` leaves to json.dumps."""


def _not_plain(value: Any) -> Any:
    raise _NotPlain


class _Indented:
    """The indented JSON text of a value, into ``parts`` (see :func:`dumps`)."""

    def __init__(self, step: str, parts: list[str]) -> None:
        self.step = step
        self.parts = parts
        self._flat: dict[int, Any] = {}

    def flat(self, level: int) -> Any:
        """json's C encoder of a container whose items sit at ``level``: its text is the
        container's on one line, items separated by ``,`` + newline + the level's indent."""
        encode = self._flat.get(level)
        if encode is None:
            separator = ",\n" + self.step * level
            # (markers, default, encoder, indent, key_separator, item_separator, sort_keys,
            # skipkeys, allow_nan): no markers, as a flat container holds no container.
            encode = _make_encoder(
                None, _not_plain, _encode_key, None, ": ", separator, False, False, False
            )
            self._flat[level] = encode
        return encode

    def write(self, value: Any, level: int) -> None:
        kind = type(value)
        parts = self.parts
        if kind is dict:
            if not value:
                parts.append("{}")
                return
            if not _KEYS.issuperset(map(type, value)):
                raise _NotPlain
            if _SCALARS.issuperset(map(type, value.values())):
                self._flat_container(value, level)
                return
            inner = "\n" + self.step * (level + 1)
            parts.append("{")
            separator = inner
            for key, item in value.items():
                parts.append(separator + _encode_key(key) + ": ")
                self.write(item, level + 1)
                separator = "," + inner
            parts.append("\n" + self.step * level + "}")
        elif kind is list or kind is tuple:
            if not value:
                parts.append("[]")
                return
            if _SCALARS.issuperset(map(type, value)):
                self._flat_container(value, level)
                return
            inner = "\n" + self.step * (level + 1)
            parts.append("[")
            separator = inner
            for item in value:
                parts.append(separator)
                self.write(item, level + 1)
                separator = "," + inner
            parts.append("\n" + self.step * level + "]")
        elif kind in _SCALARS:
            parts.append("".join(self.flat(level)(value, 0)))
        else:
            raise _NotPlain

    def _flat_container(self, value: Any, level: int) -> None:
        """A non-empty container of scalars: its one-line text from the C encoder, opened
        onto a line of its own for each item."""
        text = "".join(self.flat(level + 1)(value, 0))
        pad = "\n" + self.step * (level + 1)
        self.parts.append(text[0] + pad + text[1:-1] + "\n" + self.step * level + text[-1])
