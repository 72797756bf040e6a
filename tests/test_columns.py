"""tpuperf.columns against pandas, the reference its grouping and takes stand in for."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tpuperf.columns import (
    Lookup,
    Strings,
    Table,
    distinct,
    first_rows,
    group_index,
    median,
    percentile,
    sorted_codes,
    stack,
    sum_by,
)

NAMES = ["fusion.1", "fusion.2", "all-reduce", "copy-start", ""]


def _reference(frame: pd.DataFrame, by: list[str]) -> tuple[np.ndarray, np.ndarray]:
    grouped = frame.groupby(by, sort=False, dropna=False)
    group = grouped.ngroup().to_numpy()
    first = np.array([rows[0] for rows in grouped.indices.values()])
    order = np.argsort([group[f] for f in first])
    return group, first[order]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    rows=st.lists(st.integers(0, 9), min_size=1, max_size=300),
    op_names=st.lists(st.sampled_from(NAMES), min_size=10, max_size=10),
    modules=st.lists(st.sampled_from(["jit_a", "jit_b"]), min_size=10, max_size=10),
)
def test_group_index_of_strings_sharing_an_index(
    rows: list[int], op_names: list[str], modules: list[str]
) -> None:
    """Ten metadata rows, some with the same names: grouped by the names, not by the row."""
    index = np.array(rows, dtype=np.int32)
    op = Strings.from_values(op_names, index)
    module = Strings.from_values(modules, index)
    assert op.index is module.index  # the shared-index path
    group, first = group_index([module, op])
    frame = pd.DataFrame({"module": module.tolist(), "op": op.tolist()})
    ref_group, ref_first = _reference(frame, ["module", "op"])
    assert group.tolist() == ref_group.tolist()
    assert first.tolist() == ref_first.tolist()
    # The same answer without a shared index (codes of their own).
    alone = group_index([Strings.from_list(module.tolist()), Strings.from_list(op.tolist())])
    assert alone[0].tolist() == group.tolist() and alone[1].tolist() == first.tolist()


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    keys=st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 10**12)), min_size=1, max_size=200)
)
def test_group_index_of_integers(keys: list[tuple[int, int]]) -> None:
    small = np.array([k[0] for k in keys])
    large = np.array([k[1] for k in keys])  # a wide range: the sorting path
    group, first = group_index([small, large])
    ref_group, ref_first = _reference(pd.DataFrame({"a": small, "b": large}), ["a", "b"])
    assert group.tolist() == ref_group.tolist() and first.tolist() == ref_first.tolist()


def test_take_keeps_a_shared_index_shared() -> None:
    index = np.array([2, 0, 1, 2, 2], dtype=np.int32)
    table = Table(
        {
            "op": Strings.from_values(["a", "b", "c"], index),
            "module": Strings.from_values(["m", "m", "n"], index),
            "flops": Lookup(index, np.array([1.0, 2.0, 3.0])),
            "dur": np.arange(5),
        }
    )
    taken = table.take(np.array([3, 1, 4]))
    assert taken.strings("op").index is taken.strings("module").index
    assert taken.strings("op").tolist() == ["c", "a", "c"]
    assert taken.strings("module").tolist() == ["n", "m", "n"]
    assert taken.array("flops").tolist() == [3.0, 1.0, 3.0]
    assert taken.array("dur").tolist() == [3, 1, 4]


def test_sum_by_is_exact_for_large_integers() -> None:
    group = np.array([0, 1, 0, 1])
    values = np.array([2**60, 1, 2**60, 3], dtype=np.int64)
    assert sum_by(group, 2, values).tolist() == [2**61, 4]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-(2**62), 2**62), max_size=60)
    | st.lists(st.integers(0, 300), max_size=60),
    st.sampled_from(["int64", "int32", "uint64"]),
)
def test_distinct_equals_numpy_unique(values: list[int], dtype: str) -> None:
    """Counting (small non-negative ids) and sorting give np.unique's values and dtype."""
    if dtype != "int64":
        values = [v % 2**31 for v in values]
    array = np.array(values, dtype=dtype)
    got, want = distinct(array), np.unique(array)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_distinct_of_floats_keeps_one_nan() -> None:
    got = distinct(np.array([3.0, np.nan, 1.0, np.nan, 3.0]))
    np.testing.assert_array_equal(got, np.unique(np.array([3.0, np.nan, 1.0, np.nan, 3.0])))
    assert len(got) == 3


def test_values_at_rows_of_lookup_and_plain_columns() -> None:
    """array_at and nansum_at read a Lookup column at some rows as its read-out array would."""
    index = np.array([0, 2, 1, 2, 3, 0], dtype=np.int32)
    values = np.array([1.5, np.nan, 4.0, np.nan])
    table = Table({"lookup": Lookup(index, values), "plain": values[index]})
    rows = np.array([1, 2, 3, 5])
    for name in ("lookup", "plain"):
        np.testing.assert_array_equal(table.array_at(name, rows), values[index][rows])
        assert table.nansum_at(name, rows) == 4.0 + np.nan_to_num(np.nan) + 4.0 + 1.5
        assert table.nansum_at(name, np.array([2], dtype=np.int64)) is None  # only NaN
        assert table.nansum_at(name, np.zeros(0, dtype=np.int64)) is None


def test_stack_puts_the_rows_of_tables_one_after_another() -> None:
    """stack() against pandas.concat of the same tables' frames: strings of different
    vocabularies, plain arrays and a Lookup column (read out), the first table's columns."""
    first = Table(
        {
            "op": Strings.from_list(["fusion.1", "copy", "fusion.1"]),
            "dur_ps": np.array([5, 7, 9], dtype=np.int64),
            "flops": Lookup(np.array([1, 0, 1], dtype=np.int32), np.array([2.0, np.nan])),
        }
    )
    second = Table(
        {
            "op": Strings.from_list(["all-reduce", "fusion.1"]),
            "dur_ps": np.array([11, 13], dtype=np.int64),
            "flops": np.array([3.0, 4.0]),
        }
    )
    got = stack([first, second])
    want = pd.concat([first.to_pandas(), second.to_pandas()], ignore_index=True)
    assert list(got) == ["op", "dur_ps", "flops"]
    assert got.strings("op").tolist() == want["op"].astype(str).tolist()
    np.testing.assert_array_equal(got.array("dur_ps"), want["dur_ps"].to_numpy())
    np.testing.assert_array_equal(got.array("flops"), want["flops"].to_numpy())
    assert stack([first]).strings("op").tolist() == ["fusion.1", "copy", "fusion.1"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), max_size=12),
    st.lists(st.integers(-10, 1_500), max_size=400),
    st.booleans(),
)
def test_window_of_equals_a_search_per_time(
    gaps: list[tuple[int, int]], times: list[int], ordered: bool
) -> None:
    """Sorted or not, many times or few: each time's window is the one that holds it."""
    from tpuperf.step_windows import window_of

    starts, ends, at = [], [], 0
    for gap, length in gaps:  # disjoint windows, sorted, some empty, some touching
        starts.append(at + gap)
        ends.append(at + gap + length)
        at = ends[-1]
    values = np.array(sorted(times) if ordered else times, dtype=np.int64)
    expected = [
        next((w for w, (s, e) in enumerate(zip(starts, ends, strict=True)) if s <= t < e), -1)
        for t in values.tolist()
    ]
    got = window_of(values, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))
    assert got.tolist() == expected


_NAME = st.one_of(
    st.integers(0, 10**20).map(str),  # numbers, some past int64's 18 digits
    st.text(alphabet="0123456789 x٣", max_size=6),  # blanks, letters, an Arabic-Indic digit
)


@given(st.lists(_NAME, max_size=30), st.booleans())
@settings(max_examples=300, deadline=None)
def test_decimal_names_read_as_int_reads_them(names: list[str], numbers_only: bool) -> None:
    from tpuperf.build import _decimal_names

    if numbers_only:  # the fast path: every name a number
        names = [n for n in names if n.isdecimal() and len(n) <= 18]
    rows = np.arange(len(names), dtype=np.int64) * 3
    kept, numbers = _decimal_names(rows, names)
    expected = [
        (r, int(n))
        for r, n in zip(rows.tolist(), names, strict=True)
        if n.isdecimal() and len(n) <= 18
    ]
    assert kept.tolist() == [r for r, _ in expected]
    assert numbers.tolist() == [v for _, v in expected]
    assert numbers.dtype == np.int64


@given(
    st.lists(
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=False, width=64), st.integers(-(2**62), 2**62)
        ),
        max_size=40,
    )
)
@settings(max_examples=400, deadline=None)
def test_median_equals_numpy_median_bit_for_bit(values: list[float]) -> None:
    import warnings

    floats = np.array(values, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns on no values
        expected = float(np.median(floats))
    got = median(floats)
    assert (np.isnan(got) and np.isnan(expected)) or got == expected
    integers = np.array([int(v) for v in values if v == v and abs(v) < 2**62], dtype=np.int64)
    if len(integers):
        assert median(integers) == float(np.median(integers))
        # Partitioned in place where asked: the same median, the same values (reordered).
        scratch = integers.copy()
        assert median(scratch, overwrite=True) == float(np.median(integers))
        assert sorted(scratch.tolist()) == sorted(integers.tolist())
    scratch = floats.copy()
    got = median(scratch, overwrite=True)
    assert (np.isnan(got) and np.isnan(expected)) or got == expected


_FINITE = st.floats(
    allow_nan=False, allow_infinity=False, width=64, min_value=-1e300, max_value=1e300
)


@given(
    st.lists(st.one_of(_FINITE, st.integers(-(2**40), 2**40).map(float)), max_size=40),
    st.sampled_from([0, 10, 25, 50, 75, 90, 99, 100]),
    st.booleans(),
)
@settings(max_examples=400, deadline=None)
def test_percentile_equals_numpy_percentile_bit_for_bit(
    values: list[float], q: int, with_nan: bool
) -> None:
    import warnings

    if with_nan:
        values = [*values, float("nan")]
    array = np.array(values, dtype=np.float64)
    got = percentile(array, q)
    if not len(array):
        assert np.isnan(got)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = float(np.percentile(array, q))
    assert (np.isnan(got) and np.isnan(expected)) or got == expected


@given(
    st.lists(st.integers(-5, 2**40), max_size=50)
    | st.lists(st.floats(allow_infinity=False, width=64), max_size=50)
)
@settings(max_examples=300, deadline=None)
def test_sorted_codes_and_first_rows_equal_numpy_unique(values: list[float]) -> None:
    array = np.array(values)
    found, codes = sorted_codes(array)
    expected, first, inverse = np.unique(array, return_index=True, return_inverse=True)
    np.testing.assert_array_equal(found, expected)  # NaN equal to NaN here
    assert codes.tolist() == inverse.reshape(-1).tolist()
    assert first_rows(codes, len(found)).tolist() == first.tolist()


@given(st.lists(st.integers(0, 40), max_size=200), st.integers(0, 20))
@settings(max_examples=300, deadline=None)
def test_dense_groups_in_c_equal_numpy(keys: list[int], spare: int) -> None:
    import pytest

    from tpuperf import kernels
    from tpuperf.columns import _dense_groups

    if not kernels.native_built():
        pytest.skip("the C module (tpuperf/_wire_native.c) is not built")
    combined = np.array(keys, dtype=np.int64)
    size = max(keys, default=0) + 1 + spare
    with kernels.use("native"):
        with_c = _dense_groups(combined, size)
    with kernels.use("numpy"):
        with_numpy = _dense_groups(combined, size)
    assert with_c[0].tolist() == with_numpy[0].tolist()
    assert with_c[1].tolist() == with_numpy[1].tolist()


@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(-(2**62), 2**62)), max_size=60),
    st.sampled_from(["int32", "int64"]),
    st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_sum_by_in_c_equals_numpy(
    pairs: list[tuple[int, int]], group_dtype: str, big: bool
) -> None:
    """Group sums in C equal numpy's, exact below 2**53 and wrapping past int64 alike."""
    import pytest

    from tpuperf import kernels

    if not kernels.native_built():
        pytest.skip("the C module (tpuperf/_wire_native.c) is not built")
    group = np.array([g for g, _ in pairs], dtype=group_dtype)
    values = np.array([v if big else v % 1000 for _, v in pairs], dtype=np.int64)
    with kernels.use("native"):
        with_c = sum_by(group, 7, values)
    with kernels.use("numpy"):
        with_numpy = sum_by(group, 7, values)
    assert with_c.dtype == with_numpy.dtype == np.int64
    assert with_c.tolist() == with_numpy.tolist()
