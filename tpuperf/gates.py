"""``--fail-on`` gates: ``FIELD OP VALUE`` thresholds over a flat row of named values.

One grammar and one parser for every command that gates a pipeline (``tpuperf scan`` over its
rows, ``tpuperf diff`` over its deltas); each command says which fields it has.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any

from tpuperf._dataclasses import dataclass
from tpuperf.errors import UsageError

_GATE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(>=|<=|==|!=|>|<)\s*(.*?)\s*$")

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}


@dataclass(frozen=True)
class Gate:
    """A ``--fail-on`` threshold: ``field op value``; a row trips it when the comparison holds."""

    text: str
    field: str
    op: str
    value: float | str

    def known(self, row: dict[str, Any]) -> bool:
        """Whether ``row`` has this gate's value (null and NaN are unknown): a gate on an
        unknown value is not evaluated, and passes; commands say so in a note."""
        actual = row.get(self.field)
        return not (actual is None or (isinstance(actual, float) and math.isnan(actual)))

    def trips(self, row: dict[str, Any]) -> bool:
        """Whether ``row`` trips this gate; an unknown value (:meth:`known`) never does."""
        return self.known(row) and bool(_COMPARE[self.op](row[self.field], self.value))


def parse_gate(
    text: str, numeric: Sequence[str], strings: Sequence[str] = (), example: str = "idle_pct>20"
) -> Gate:
    """Parse ``FIELD OP VALUE`` where FIELD is one of ``numeric`` or ``strings``.

    Numeric fields take > >= < <= == != and a number; text fields == or != and a word
    (quotes optional: ``error!=''``). A malformed expression or an unknown field is a
    :class:`UsageError` that lists the valid fields.
    """
    valid = f"numeric fields: {', '.join(numeric)}"
    if strings:
        valid += f"; text fields (== and != only): {', '.join(strings)}"
    match = _GATE.match(text)
    if not match:
        raise UsageError(
            f"--fail-on {text!r}: expected FIELD OP VALUE, e.g. {example} "
            "(OP: > >= < <= == !=); " + valid
        )
    name, op, raw = match.groups()
    if name in numeric:
        try:
            return Gate(text, name, op, float(raw))
        except ValueError:
            raise UsageError(
                f"--fail-on {text!r}: {name} is numeric; {raw!r} is not a number; " + valid
            ) from None
    if name in strings:
        if op not in ("==", "!="):
            raise UsageError(f"--fail-on {text!r}: {name} is text; use == or !=; " + valid)
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            raw = raw[1:-1]
        return Gate(text, name, op, raw)
    raise UsageError(f"--fail-on {text!r}: no field {name!r}; {valid}")
