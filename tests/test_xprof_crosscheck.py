"""tpuperf's op table against XProf's own `hlo_stats` tool, run on the same real profile.

Runs when the `xprof` package is installed (it is in the `dev` extra); the recorded XProf
numbers in tests/test_load.py are checked always.
"""

from __future__ import annotations

import json

import pytest

import tpuperf
from tpuperf.opstats import aggregate


def _xprof_hlo_stats(path) -> dict[str, dict[str, float]]:  # type: ignore[no-untyped-def]
    raw_to_tool_data = pytest.importorskip("xprof.convert.raw_to_tool_data")
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "hlo_stats", {})
    table = json.loads(data)
    columns = [c["id"] for c in table["cols"]]
    rows: dict[str, dict[str, float]] = {}
    for row in table["rows"]:
        values = dict(zip(columns, (cell["v"] if cell else None for cell in row["c"]), strict=True))
        rows[values["hlo_op_name"]] = values
    return rows


def test_ops_equal_xprof_hlo_stats(v6e, tmp_path) -> None:
    # XProf caches what it computes beside the profile: give it a copy in a scratch folder.
    copy = tmp_path / v6e.name
    copy.write_bytes(v6e.read_bytes())
    xprof = _xprof_hlo_stats(copy)
    ours = aggregate(tpuperf.load(v6e).ops, by="op").set_index("op")
    assert set(ours.index) == set(xprof)
    for op, row in xprof.items():
        assert ours.loc[op, "occurrences"] == row["occurrences"], op
        assert ours.loc[op, "total_time_ms"] * 1e3 == pytest.approx(row["total_time"], rel=1e-3), op
        assert ours.loc[op, "self_time_ms"] * 1e3 == pytest.approx(
            row["total_self_time"], rel=1e-3
        ), op
