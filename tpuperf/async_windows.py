"""Async windows paired from a device's ``-start``/``-done`` ops.

A TPU's async windows are the events of its ``Async XLA Ops`` line when it has one; a device
without that line (on the v6e profile only TPU:0 has it) has them as op pairs on its op line:
each ``x-start.3`` runs to the end of the next ``x-done.3`` (XProf pairs them so too). The
collectives analyzer and the Perfetto export both read them from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tpuperf.columns import distinct

if TYPE_CHECKING:
    from tpuperf.columns import Table


def pair_async(ops: Table) -> tuple[np.ndarray, np.ndarray] | None:
    """The windows of ``ops`` (columns ``op``, ``async_role``, ``start_ps``, ``dur_ps``): the
    rows of their start ops, in order of start, and where each ends (the end of its done);
    None when no start has a done."""
    role = ops.strings("async_role")
    start_rows = np.flatnonzero(role.eq("start"))
    done_rows = np.flatnonzero(role.eq("done"))
    if not len(start_rows) or not len(done_rows):
        return None
    start_all = ops.array("start_ps")
    start_rows = start_rows[np.argsort(start_all[start_rows], kind="stable")]
    names = ops.strings("op")
    start_ps = start_all[start_rows]
    done_start = start_all[done_rows]
    done_end = done_start + ops.array("dur_ps")[done_rows]
    start_codes = names.codes[start_rows]
    done_codes = names.codes[done_rows]
    end = np.full(len(start_rows), -1, dtype=np.int64)
    for code in distinct(start_codes).tolist():  # np.unique would import numpy.ma
        partner = names.code(names.values[code].replace("-start", "-done"))
        if partner < 0:
            continue
        asks = np.flatnonzero(start_codes == code)
        rows = np.flatnonzero(done_codes == partner)
        if not len(rows):
            continue
        rows = rows[np.argsort(done_start[rows], kind="stable")]
        at = np.searchsorted(done_start[rows], start_ps[asks], side="left")
        found = at < len(rows)
        end[asks[found]] = done_end[rows[at[found]]]
    paired = np.flatnonzero(end >= 0)
    if not len(paired):
        return None
    return start_rows[paired], end[paired]
