"""tpuperf's op table against XProf's own `hlo_stats` tool, run on the same real profile.

Runs when the `xprof` package is installed (it is in the `dev` extra); the recorded XProf
numbers in tests/test_load.py are checked always.
"""

from __future__ import annotations

import json

import pytest

import tpuperf
from tests.conftest import shared_profile
from tpuperf.opstats import aggregate


def _xprof_hlo_stats(path) -> dict[tuple[str, str], dict[str, float]]:  # type: ignore[no-untyped-def]
    raw_to_tool_data = pytest.importorskip("xprof.convert.raw_to_tool_data")
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "hlo_stats", {})
    table = json.loads(data)
    columns = [c["id"] for c in table["cols"]]
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for row in table["rows"]:
        values = dict(zip(columns, (cell["v"] if cell else None for cell in row["c"]), strict=True))
        rows[(str(int(values["program_id"])), values["hlo_op_name"])] = values
    return rows


@pytest.mark.parametrize(
    "relative",
    ["tpu/v6e_4chip_inference.xplane.pb", "gpu/mi300_jax_elementwise.xplane.pb"],
)
def test_ops_equal_xprof_hlo_stats(relative, tmp_path) -> None:
    # XProf caches what it computes beside the profile: give it a copy in a scratch folder.
    path = shared_profile(relative)
    copy = tmp_path / path.name
    copy.write_bytes(path.read_bytes())
    xprof = _xprof_hlo_stats(copy)
    # One row per (program, op), as hlo_stats: the default grouping.
    table = aggregate(tpuperf.load(path))
    ours = table[table["program_id"] != ""].set_index(["program_id", "op"])
    assert set(ours.index) == set(xprof)
    for key, row in xprof.items():
        assert ours.loc[key, "occurrences"] == row["occurrences"], key
        assert ours.loc[key, "total_time_ms"] * 1e3 == pytest.approx(row["total_time"], rel=1e-3), (
            key
        )
        assert ours.loc[key, "self_time_ms"] * 1e3 == pytest.approx(
            row["total_self_time"], rel=1e-3
        ), key
