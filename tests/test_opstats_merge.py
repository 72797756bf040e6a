"""The op table's merge of the devices' groups (tpuperf/opstats.py) on a real multi-device
TPU profile, against a pandas groupby of the same ops: sums, NaN rules, the category with the
most time (first appearance on a tie) and the programs of each op."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.conftest import shared_profile
from tpuperf.opstats import aggregate_table
from tpuperf.profiles import load


@pytest.fixture(scope="module")
def ops() -> tuple[Any, pd.DataFrame]:
    profile = load(str(shared_profile("tpu/v6e_4chip_inference.xplane.pb")))
    frames = []
    for device in profile.device_tables:
        table = device.ops
        if not table.n:
            continue
        frame = pd.DataFrame(
            {c: table.strings(c).tolist() for c in ("program_id", "op", "category", "module")}
        )
        for c in ("dur_ps", "self_ps", "flops", "bytes_accessed"):
            frame[c] = table.array(c)
        frame["device"] = device.device
        frames.append(frame)
    assert len(frames) > 1  # a merge over devices
    return profile, pd.concat(frames, ignore_index=True)


def _dominant(frame: pd.DataFrame, key: list[str], label: str) -> dict[Any, str]:
    """Per group, the label value with most time; the first appearing on a tie."""
    time = frame.groupby([*key, label], sort=False)["dur_ps"].sum().reset_index()
    best = time.loc[time.groupby(key, sort=False)["dur_ps"].idxmax()]
    return {tuple(r[:-2]): r[-2] for r in best.itertuples(index=False)}


def _name(k: Any, key: list[str]) -> tuple[Any, ...]:
    return tuple(k) if len(key) > 1 else (k,)


@pytest.mark.parametrize("by", ["program_op", "op", "category", "module", "program"])
def test_merged_groups_are_the_groupby(ops, by: str) -> None:
    profile, frame = ops
    key = {
        "program_op": ["program_id", "op"],
        "op": ["op"],
        "category": ["category"],
        "module": ["module"],
        "program": ["program_id"],
    }[by]
    table = aggregate_table(profile, by=by)
    expected = frame.groupby(key, sort=False)
    names = list(zip(*(table.strings(c).tolist() for c in key), strict=True))
    counts = expected.size()
    assert sorted(names) == sorted(_name(k, key) for k in counts.index)
    at = {name: i for i, name in enumerate(names)}
    sums = expected[["dur_ps", "self_ps"]].sum()
    flops = expected["flops"].sum(min_count=1)
    nbytes = expected["bytes_accessed"].sum(min_count=1)
    for k in counts.index:
        i = at[_name(k, key)]
        assert table.array("occurrences")[i] == counts[k]
        assert table.array("total_time_ms")[i] == sums.loc[k, "dur_ps"] / 1e9
        assert table.array("self_time_ms")[i] == sums.loc[k, "self_ps"] / 1e9
        for column, want in (("flops", flops[k]), ("bytes_accessed", nbytes[k])):
            got = float(table.array(column)[i])
            assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, rel=1e-12)
    labels = [c for c in ("category",) if c not in key] + (
        ["module"] if "program_id" in key else []
    )
    for label in labels:
        dominant = _dominant(frame, key, label)
        got = dict(zip(names, table.strings(label).tolist(), strict=True))
        assert got == dominant
    if by == "op":
        programs = frame.groupby("op", sort=False)["program_id"].nunique()
        got = dict(zip(names, table.array("programs").tolist(), strict=True))
        assert got == {(k,): v for k, v in programs.items()}
    assert (np.diff(table.array("total_time_ms")) <= 0).all()
