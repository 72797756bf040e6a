"""The op table (tpuperf/opstats.py, `tpuperf ops`) on a generated profile, against the
generator's ground truth: how often each op ran, the time per category and per device."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fixtures.generate import write_run
from tests.conftest import shared_profile
from tpuperf.columns import Lookup, Strings, Table
from tpuperf.errors import UsageError
from tpuperf.opstats import GROUPINGS, _part_by_index, _part_by_row, aggregate, aggregate_table
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


# --------------------------------------------------------------------------- by index


def _comparable(value: Any) -> Any:
    """A part's arrays as (dtype, bytes), its strings as lists: equal to the bit."""
    if isinstance(value, np.ndarray):
        return value.dtype.str, value.tobytes()
    if isinstance(value, Strings):
        return value.tolist(), value.values
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    return value


def _parts_agree(ops: Table) -> None:
    for by, key in GROUPINGS.items():
        labels = [c for c in ("category",) if c not in key] + (
            ["module"] if "program_id" in key else []
        )
        by_index = _part_by_index(ops, key, labels, by)
        assert by_index is not None, by  # the columns share an index: the fast way is taken
        by_row = _part_by_row(ops, key, labels, by)
        assert list(by_index) == list(by_row)
        for name in by_row:
            assert _comparable(by_index[name]) == _comparable(by_row[name]), (by, name)


@pytest.mark.parametrize(
    "profile", ["tpu/v6e_4chip_inference.xplane.pb", "collective_training", "memory_bound"]
)
def test_groups_by_index_are_the_groups_by_row(
    profile: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """On TPU tables (names and costs per metadata row) the per-index way gives what the
    per-op way gives, to the bit, for every grouping."""
    if profile.endswith(".pb"):
        loaded = load(str(shared_profile(profile)))
    else:
        loaded = load(str(write_run(profile, tmp_path_factory.mktemp(profile))[0]))
    tables = [d.ops for d in loaded.device_tables if d.ops.n]
    assert tables
    for ops in tables:
        _parts_agree(ops)


@pytest.mark.parametrize("seed", range(30))
def test_float_sums_by_index_add_in_the_ops_order(seed: int) -> None:
    """Costs whose sums round (1e16 + 1.0 + ...: the order of the additions shows in the
    last bits), NaN, -0.0, in random op orders over a few metadata rows: the per-index way
    adds them op by op as the per-op way does, to the bit."""
    rng = np.random.default_rng(seed)
    n_meta, n = int(rng.integers(1, 12)), int(rng.integers(1, 300))
    index = rng.integers(0, n_meta, n).astype(np.int32)
    # metadata rows repeat names, so that several rows are one group
    names = [f"op{int(i)}" for i in rng.integers(0, max(1, n_meta // 2), n_meta)]
    pool = np.array([np.nan, -0.0, 1e16, 1.0, 0.1, 3e-5, 2.0**60, -7.25])
    flops = rng.choice(pool, n_meta) * rng.choice([1.0, 3.0], n_meta)
    bytes_accessed = rng.choice(pool, n_meta)

    def strings(per_row: list[str]) -> Strings:
        return Strings.from_values(per_row, index)

    ops = Table(
        {
            "program_id": strings([f"p{i % 2}" for i in range(n_meta)]),
            "op": strings(names),
            "category": strings([f"c{i % 3}" for i in range(n_meta)]),
            "module": strings([f"m{i % 2}" for i in range(n_meta)]),
            "dur_ps": rng.integers(0, 2**40, n),
            "self_ps": rng.integers(-5, 2**40, n),
            "flops": Lookup(index, flops),
            "bytes_accessed": Lookup(index, bytes_accessed),
        }
    )
    _parts_agree(ops)
