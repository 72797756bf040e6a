"""The op table (tpuperf/opstats.py, `tpuperf ops`) on a generated profile, against the
generator's ground truth: how often each op ran, the time per category and per device."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fixtures.generate import write_run
from tpuperf.errors import UsageError
from tpuperf.opstats import aggregate, aggregate_table
from tpuperf.profiles import Profile, load


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Profile, Any]:
    run_dir, truth = write_run("collective_training", tmp_path_factory.mktemp("opstats"))
    return load(str(run_dir)), truth


def _column(table: Any, key: str, value: str) -> dict[Any, Any]:
    keys = table.strings(key).tolist()
    return dict(zip(keys, table.array(value).tolist(), strict=True))


def test_occurrences_by_op_are_the_truths(run) -> None:
    profile, truth = run
    table = aggregate_table(profile, by="op")
    assert _column(table, "op", "occurrences") == truth.notes["op_counts"]
    # Most total time first; the average is the total over the occurrences.
    total = table.array("total_time_ms")
    assert (np.diff(total) <= 0).all()
    assert table.array("avg_time_us") == pytest.approx(total * 1000 / table.array("occurrences"))
    assert float(table.array("time_pct").sum()) == pytest.approx(100.0)


def test_time_by_category_is_the_truths(run) -> None:
    profile, truth = run
    table = aggregate_table(profile, by="category")
    expected = {k: v / 1e9 for k, v in truth.notes["op_time_by_category_ps"].items()}
    assert _column(table, "category", "total_time_ms") == pytest.approx(expected, rel=1e-12)
    # The pandas form of the Python API is the same table.
    frame = aggregate(profile, by="category")
    assert frame["total_time_ms"].tolist() == table.array("total_time_ms").tolist()


def test_per_device_rows_count_each_devices_ops(run) -> None:
    profile, truth = run
    table = aggregate_table(profile, by="op", per_device=True)
    hosts = table.strings("host").tolist()
    devices = table.array("device").tolist()
    occurrences = table.array("occurrences").tolist()
    pct = table.array("time_pct").tolist()
    for dev in truth.devices:
        keys = enumerate(zip(hosts, devices, strict=True))
        rows = [i for i, key in keys if key == (dev.host, dev.device)]
        assert sum(occurrences[i] for i in rows) == dev.ops
        assert sum(pct[i] for i in rows) == pytest.approx(100.0)  # of the device's op time
    top = aggregate_table(profile, by="op", per_device=True, top=3)
    keys = list(zip(top.strings("host").tolist(), top.array("device").tolist(), strict=True))
    assert sorted(set(keys)) == sorted((d.host, d.device) for d in truth.devices)
    assert all(keys.count(key) == 3 for key in set(keys))


def test_sort_keys_order_the_rows(run) -> None:
    profile, _ = run
    by_count = aggregate_table(profile, by="op", sort="occurrences")
    assert (np.diff(by_count.array("occurrences")) <= 0).all()
    by_name = aggregate_table(profile, by="op", sort="name")
    names = by_name.strings("op").tolist()
    assert names == sorted(names)
    assert aggregate_table(profile, by="op", top=2).n == 2


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"by": "colour"}, "--by colour: choose one of"),
        ({"sort": "colour"}, "--sort colour: choose one of"),
    ],
)
def test_bad_options_are_usage_errors(run, kw: dict[str, str], message: str) -> None:
    profile, _ = run
    with pytest.raises(UsageError, match=message):
        aggregate_table(profile, **kw)
