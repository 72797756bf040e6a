"""Columnar tables the engine computes with: numpy arrays, no pandas.

A :class:`Table` is a set of equally long columns. A column is a numpy array, or one of two
encoded kinds that keep repeated values once:

- :class:`Strings`: repeated strings, like a pandas Categorical, as small integer codes into
  unique values. Many string columns of one table can share one large ``index`` array (the
  op events' metadata rows, say): each column then adds only a small ``mapping`` from index
  to code, so eleven string columns of two million ops cost 8 MB, not 88.
- :class:`Lookup`: numbers stored once per ``index`` value (an op's FLOPs, per metadata row),
  read as ``values[index]``.

The pandas DataFrames of the Python API (``Profile.ops``, ...) are built from these on first
use (:func:`to_pandas`); the commands never need them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from tpuperf import kernels
from tpuperf._dataclasses import dataclass

CATEGORY = "category"


# Records that hold arrays (these, Intervals, the timeline's, the scopes', the decoder's and
# the device clock's records) are dataclasses with eq=False: each is equal only to itself.
# The __eq__ a dataclass generates compares the fields, which for arrays raises (their `==`
# is elementwise), and each method a dataclass generates is compiled as its module is
# imported, by every command (Python 3.11: 0.1-0.2 ms a method).
@dataclass(frozen=True, eq=False)
class Strings:
    """Strings as codes: the value of row i is ``values[mapping[index[i]]]``.

    ``values`` are unique. ``mapping`` is None when ``index`` already holds the codes.
    """

    index: np.ndarray  # integer, one per row
    values: tuple[str, ...]
    mapping: np.ndarray | None = None  # index value -> code

    @classmethod
    def from_values(cls, per_index: Sequence[str], index: np.ndarray) -> Strings:
        """A column whose row i is ``per_index[index[i]]`` (``per_index`` may repeat values)."""
        codes, values = factorize(per_index)
        return cls(np.asarray(index), values, codes)

    @classmethod
    def from_list(cls, strings: Sequence[str]) -> Strings:
        codes, values = factorize(strings)
        return cls(codes, values)

    @classmethod
    def constant(cls, value: str, n: int) -> Strings:
        return cls(np.zeros(n, dtype=np.int8), (value,))

    def __len__(self) -> int:
        return len(self.index)

    @property
    def codes(self) -> np.ndarray:
        """One code per row (into ``values``)."""
        if self.mapping is None:
            return self.index
        return self.mapping[self.index]

    def code(self, value: str) -> int:
        """The code of ``value``, or -1 when no row has it."""
        try:
            return self.values.index(value)
        except ValueError:
            return -1

    def eq(self, value: str) -> np.ndarray:
        """A mask of the rows whose value is ``value``."""
        return self.isin([value])

    def isin(self, values: Iterable[str]) -> np.ndarray:
        wanted = np.zeros(len(self.values) + 1, dtype=bool)
        for value in values:
            code = self.code(value)
            if code >= 0:
                wanted[code] = True
        return self.per_row(wanted)

    def per_row(self, per_code: np.ndarray) -> np.ndarray:
        """``per_code[code]`` of each row: one value per code (``values``) read out per row,
        through the index without making the codes first."""
        if self.mapping is None:
            return per_code[self.index]
        return per_code[self.mapping][self.index]

    def take(self, rows: np.ndarray) -> Strings:
        return Strings(self.index[rows], self.values, self.mapping)

    def tolist(self) -> list[str]:
        values = np.array(self.values, dtype=object)
        return values[self.codes].tolist() if len(values) else [""] * len(self)

    def __iter__(self) -> Iterator[str]:
        return iter(self.tolist())

    def compact(self) -> Strings:
        """The same strings with only the values some row uses, codes in their own array."""
        codes = self.codes
        used = np.flatnonzero(np.bincount(codes, minlength=len(self.values)))
        if len(used) == len(self.values):  # every value in use (an op table's names): as is
            return Strings(codes.astype(np.int32), self.values)
        remap = np.full(len(self.values), -1, dtype=np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        return Strings(remap[codes], tuple(map(self.values.__getitem__, used.tolist())))


@dataclass(frozen=True, eq=False)  # holds arrays: equal only to itself (see Strings)
class Lookup:
    """Numbers stored once per ``index`` value: row i is ``values[index[i]]``."""

    index: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.index)

    def array(self) -> np.ndarray:
        return self.values[self.index]

    def take(self, rows: np.ndarray) -> Lookup:
        return Lookup(self.index[rows], self.values)


Column = np.ndarray | Strings | Lookup


def factorize(strings: Sequence[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    """(codes, unique values in order of first appearance) of ``strings`` (int32 codes)."""
    return kernels.factorize(strings)


def concat_strings(parts: Sequence[Strings]) -> Strings:
    """One Strings column of ``parts`` in order, with unique values."""
    if len(parts) == 1:
        return parts[0]
    # Every part's values numbered at once, in order of first appearance over the parts
    # (kernels.factorize); a part's codes then go through its slice of those numbers.
    numbers, values = factorize([value for part in parts for value in part.values])
    codes = []
    start = 0
    for part in parts:
        end = start + len(part.values)
        remap = np.zeros(end - start + 1, np.int32)
        remap[:-1] = numbers[start:end]
        codes.append(remap[part.codes])
        start = end
    return Strings(np.concatenate(codes) if codes else np.zeros(0, np.int32), values)


def stack(tables: Sequence[Table]) -> Table:
    """The rows of one or more ``tables`` with the columns of the first, one table after the
    other (per-device tables into one)."""
    first = tables[0]
    return Table(
        {
            name: concat_strings([t.strings(name) for t in tables])
            if isinstance(column, Strings)
            else np.concatenate([t.array(name) for t in tables])
            for name, column in first.items()
        }
    )


class Table(Mapping[str, Column]):
    """Named columns of one length; read-only (``with_columns`` makes a new one)."""

    def __init__(self, columns: Mapping[str, Column], n: int | None = None) -> None:
        self._columns = dict(columns)
        lengths = {len(c) for c in self._columns.values()}
        if n is None:
            n = lengths.pop() if lengths else 0
        if lengths - {n}:
            raise ValueError(f"columns of different lengths: {sorted(lengths)} (table of {n})")
        self._n = n

    def __getitem__(self, name: str) -> Column:
        return self._columns[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    @property
    def n(self) -> int:
        """The number of rows."""
        return self._n

    def array(self, name: str) -> np.ndarray:
        """A numeric column as a numpy array (a Lookup read out)."""
        column = self._columns[name]
        if isinstance(column, Lookup):
            return column.array()
        if isinstance(column, Strings):
            raise TypeError(f"column {name!r} holds strings; use .strings()")
        return column

    def array_at(self, name: str, rows: np.ndarray | slice) -> np.ndarray:
        """``array(name)[rows]`` without reading out the rest of a Lookup column (a view of a
        plain column where ``rows`` is a slice)."""
        column = self._columns[name]
        if isinstance(column, Lookup):
            return column.values[column.index[rows]]
        if isinstance(column, Strings):
            raise TypeError(f"column {name!r} holds strings; use .strings()")
        return column[rows]

    def nansum_at(self, name: str, rows: np.ndarray) -> float | None:
        """The sum of a float column at ``rows``, NaN skipped; None when every value is NaN
        (or there are no rows). A Lookup column is summed per distinct value, counting rows
        once rather than reading each row's value out."""
        column = self._columns[name]
        if isinstance(column, Lookup):
            counts = np.bincount(column.index[rows], minlength=len(column.values))
            values = column.values.astype(np.float64, copy=False)
            known = ~np.isnan(values) & (counts > 0)
            return float(np.dot(counts[known], values[known])) if known.any() else None
        values = self.array_at(name, rows).astype(np.float64, copy=False)
        known = ~np.isnan(values)
        return float(values[known].sum()) if known.any() else None

    def strings(self, name: str) -> Strings:
        column = self._columns[name]
        if not isinstance(column, Strings):
            raise TypeError(f"column {name!r} does not hold strings")
        return column

    def take(self, rows: np.ndarray | slice) -> Table:
        """The rows ``rows`` (indices, a boolean mask or a slice: views of the columns, not
        copies), in that order. Columns that share an index (a TPU op's names and costs all
        index its metadata row) share it taken."""
        if isinstance(rows, slice):
            n = len(range(*rows.indices(self.n)))
        else:
            if rows.dtype == bool:
                rows = np.flatnonzero(rows)
            n = len(rows)
        taken: dict[int, np.ndarray] = {}

        def index_of(index: np.ndarray) -> np.ndarray:
            if id(index) not in taken:
                taken[id(index)] = index[rows]
            return taken[id(index)]

        columns: dict[str, Column] = {}
        for name, column in self._columns.items():
            if isinstance(column, np.ndarray):
                columns[name] = column[rows]
            elif isinstance(column, Strings):
                columns[name] = Strings(index_of(column.index), column.values, column.mapping)
            else:
                columns[name] = Lookup(index_of(column.index), column.values)
        return Table(columns, n)

    def with_columns(self, **columns: Column) -> Table:
        return Table({**self._columns, **columns}, self._n)

    def select(self, names: Iterable[str]) -> Table:
        return Table({name: self._columns[name] for name in names}, self._n)

    def plain(self, name: str) -> list[Any]:
        """One column as plain Python values (NaN stays NaN)."""
        return _plain(self._columns[name])

    def rows(self) -> list[list[Any]]:
        """The rows as lists of plain Python values (NaN stays NaN)."""
        columns = [_plain(column) for column in self._columns.values()]
        return [list(row) for row in zip(*columns, strict=True)] if columns else []

    def records(self) -> list[dict[str, Any]]:
        names = list(self._columns)
        return [dict(zip(names, row, strict=True)) for row in self.rows()]

    def to_pandas(self, dtypes: Mapping[str, str] | None = None) -> Any:
        """A pandas DataFrame; strings become Categoricals (``string`` where ``dtypes`` says)."""
        import pandas as pd

        data: dict[str, Any] = {}
        for name, column in self._columns.items():
            dtype = (dtypes or {}).get(name)
            data[name] = to_pandas(column, dtype)
        return pd.DataFrame(data, copy=False) if data else pd.DataFrame(index=range(self._n))


def _plain(column: Column) -> list[Any]:
    if isinstance(column, Strings):
        return column.tolist()
    if isinstance(column, Lookup):
        return column.array().tolist()
    return column.tolist()


def to_pandas(column: Column, dtype: str | None = None) -> Any:
    """One column as pandas wants it: a Categorical (or a ``string`` array) or an ndarray."""
    import pandas as pd

    if isinstance(column, Strings):
        if dtype == "string":
            return pd.array(column.tolist(), dtype="string")
        compact = column.compact() if len(column.values) else column
        return pd.Categorical.from_codes(
            compact.codes.astype(np.int32, copy=False), categories=list(compact.values)
        )
    if isinstance(column, Lookup):
        return column.array()
    if dtype not in (None, CATEGORY, "string") and column.dtype != np.dtype(dtype):
        return column.astype(dtype)
    return column


def from_pandas(series: Any) -> Column:
    """A pandas Series as a column: categoricals and strings as Strings, numbers as arrays."""
    import pandas as pd

    if isinstance(series.dtype, pd.CategoricalDtype):
        codes = series.cat.codes.to_numpy()
        categories = [str(c) for c in series.cat.categories]
        if (codes < 0).any():  # NaN: the empty string
            categories.append("")
            codes = np.where(codes < 0, len(categories) - 1, codes)
        return Strings(codes.astype(np.int32), tuple(categories)).compact()
    if series.dtype == object or pd.api.types.is_string_dtype(series.dtype):
        return Strings.from_list(["" if v is None or v is pd.NA else str(v) for v in series])
    return series.to_numpy()


# --------------------------------------------------------------------------- grouping


def group_index(keys: Sequence[Strings | np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Group rows by ``keys`` (Strings or integer arrays), groups in order of first appearance.

    Returns (group of each row, first row of each group), like pandas' groupby(sort=False).
    Linear in the rows when the keys' combined range is small (the usual case: op names and
    modules have few distinct values), else by sorting. Strings that share one index (a TPU
    op's names, by metadata row) are grouped by that index first, then its few distinct
    values by their strings.
    """
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    first_key = keys[0]
    mappings = [
        k.mapping
        for k in keys
        if isinstance(k, Strings)
        and isinstance(first_key, Strings)
        and k.index is first_key.index
        and k.mapping is not None
    ]
    if (
        isinstance(first_key, Strings)
        and len(mappings) == len(keys)
        and first_key.index.dtype.kind in "iu"
        and int(first_key.index.min()) >= 0
    ):
        shared = first_key.index.astype(np.int64, copy=False)
        by_index, first = _dense_groups(shared, int(shared.max()) + 1)
        distinct = shared[first]
        merged, first_of = group_index([m[distinct] for m in mappings if m is not None])
        return merged[by_index], first[first_of]
    combined = np.zeros(n, dtype=np.int64)
    size = 1
    for key in keys:
        if isinstance(key, Strings):
            codes, width = key.codes, len(key.values) + 1
        else:
            codes = sorted_codes(key)[1]
            width = int(codes.max()) + 2 if len(codes) else 1
        combined = combined * width + codes
        size *= width
    if size <= 4 * n + 1024:
        return _dense_groups(combined, size)
    _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[inverse.reshape(-1)], first[order]


def index_groups(columns: list[Strings]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows grouped by ``columns``, groups in order of first appearance (as
    :func:`group_index`), as (index, group of each index value, first row of each group):
    row i is in group ``group[index[i]]``. Where the columns share one index (a TPU op's
    names, by metadata row) it is that index, and nothing is made per row: sums per group
    can be summed per index value first (``sum_by(group, n, sum_by(index, len(group), x))``).
    """
    shared = columns[0].index
    mappings = [c.mapping for c in columns if c.index is shared and c.mapping is not None]
    first_op = (
        kernels.first_rows(shared, min(len(m) for m in mappings))
        if len(shared) and len(mappings) == len(columns) and shared.dtype in (np.int32, np.int64)
        else None
    )
    if first_op is not None:  # (None: an index value that names no row of the mappings)
        # The index values in use in order of first appearance, then their names grouped.
        used = np.flatnonzero(first_op < len(shared))
        ordered = used[np.argsort(first_op[used], kind="stable")]
        merged, first_of = group_index([m[ordered] for m in mappings])
        group = np.zeros(int(used[-1]) + 1, dtype=np.int64)  # up to the largest value used
        group[ordered] = merged
        return shared, group, first_op[ordered][first_of]
    group, first = group_index(columns)
    # 4 bytes an op, as a TPU op's metadata row
    return group.astype(np.int32), np.arange(len(first), dtype=np.int64), first


def median(values: Any, overwrite: bool = False) -> float:
    """``np.median`` of a 1-d sequence, to the last bit (the mean of the two middle values when
    their count is even; NaN when any value is NaN or there are none), without the import of
    ``numpy.ma`` that ``np.median`` makes on first use (10-15 ms of every command).

    Integers are partitioned as they are, 4-10x faster than as doubles, and only the middle
    values converted: rounding to a double keeps the order, so the result is the same. With
    ``overwrite`` (np.median's overwrite_input), an array the caller drops after is
    partitioned in place instead of copied."""
    a = np.asarray(values).reshape(-1)
    if a.dtype.kind not in "iu":
        a = a.astype(np.float64, copy=False)
    n = len(a)
    if n == 0 or (a.dtype.kind == "f" and np.isnan(a).any()):
        return float("nan")
    k = n // 2
    kth = k if n % 2 else (k - 1, k)
    if overwrite and a.flags.writeable:
        a.partition(kth)
        part = a
    else:
        part = np.partition(a, kth)
    return float(part[k]) if n % 2 else (float(part[k - 1]) + float(part[k])) / 2


def percentile(values: Any, q: float) -> float:
    """``np.percentile(values, q)`` of a 1-d sequence (linear interpolation), to the last bit,
    without the ``numpy.ma`` import that its ``np.unique`` makes."""
    a = np.asarray(values, dtype=np.float64).reshape(-1)
    n = len(a)
    if n == 0 or np.isnan(a).any():
        return float("nan")
    at = (n - 1) * (q / 100)
    if at >= n - 1:
        return float(a.max())
    if at <= 0:
        return float(a.min())
    below = int(at)
    gamma = at - below
    part = np.partition(a, (below, below + 1))
    low, high = float(part[below]), float(part[below + 1])
    # numpy's interpolation: from the nearer end, so that gamma 1 gives the upper value exactly
    return high - (high - low) * (1 - gamma) if gamma >= 0.5 else low + (high - low) * gamma


def sorted_codes(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values sorted, the position of each value among them): what
    ``np.unique(values, return_inverse=True)`` gives for a 1-d array, without its import of
    ``numpy.ma`` and, for small integers, without its sort."""
    values = np.asarray(values).reshape(-1)
    found = distinct(values)
    return found, np.searchsorted(found, values).astype(np.intp, copy=False)


def as_run(rows: np.ndarray) -> np.ndarray | slice:
    """Rows in increasing order without repeats (a timeline's selected ops and leaves) as a
    slice where they are one run first .. last, which the first and last then tell: columns
    read at it are views rather than copies as long as the table (on a TPU op line the
    selected steps' ops are, as a rule, every op from the first selected step on)."""
    if len(rows) and int(rows[-1]) - int(rows[0]) + 1 == len(rows):
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


def first_rows(codes: np.ndarray, n_codes: int) -> np.ndarray:
    """The first row holding each code 0 .. n_codes - 1; ``len(codes)`` for a code no row has
    (codes outside that range: ValueError)."""
    codes = np.asarray(codes)
    if codes.dtype not in (np.int32, np.int64):
        codes = codes.astype(np.int64)
    first = kernels.first_rows(codes, n_codes)
    if first is None:
        raise ValueError(f"first_rows: a code outside [0, {n_codes})")
    return first


def distinct(values: Any) -> np.ndarray:
    """The distinct values of a 1-d array, sorted (``np.unique`` without its options).

    Small non-negative integers (ids, codes, metadata rows: nearly every caller) are counted
    in one pass instead of sorted; the rest are sorted.
    """
    values = np.asarray(values).reshape(-1)
    if not len(values):
        return values.copy()
    if values.dtype.kind in "iu":
        low, high = int(values.min()), int(values.max())
        if low >= 0 and high <= 4 * len(values) + 1024:
            counts = np.bincount(values.astype(np.intp, copy=False), minlength=high + 1)
            return np.flatnonzero(counts).astype(values.dtype)
    ordered = np.sort(values, kind="stable")
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    if ordered.dtype.kind == "f":  # every NaN is one value, as np.unique makes it
        nan = np.isnan(ordered)
        keep[1:] &= ~(nan[1:] & nan[:-1])
    return ordered[keep]


def _dense_groups(combined: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`group_index` of keys already packed into ``combined`` (0 <= key < ``size``)."""
    return kernels.dense_groups(combined, size)


def code_counts(codes: np.ndarray, size: int = 0) -> np.ndarray:
    """``np.bincount(codes, minlength=size)`` of an index (int32 as a rule: the kernel counts
    it as it is, where bincount makes an int64 copy of it first: 20 ms for the 5.2 million
    ops of a device at 1.8 GB)."""
    if codes.dtype in (np.int32, np.int64):
        found = kernels.counts(codes, max(size, int(codes.max()) + 1 if len(codes) else 0))
        if found is not None:
            return found
    return np.bincount(codes, minlength=size)


def sum_by(group: np.ndarray, n_groups: int, values: np.ndarray) -> np.ndarray:
    """Sums of ``values`` per group (integer sums stay exact integers)."""
    values, group = np.asarray(values), np.asarray(group)
    if values.dtype == np.int64 and group.dtype in (np.int32, np.int64):
        # int64 sums, exact (and wrapping past int64 as add.at below does).
        sums = kernels.group_sums(group, values, n_groups)
        if sums is not None:
            return sums
    if values.dtype.kind in "iub":
        as_float = values.astype(np.float64)
        if float(np.abs(as_float).sum()) < 2.0**53:  # every partial sum is exact in a double
            return np.bincount(group, weights=as_float, minlength=n_groups).astype(np.int64)
        out = np.zeros(n_groups, dtype=np.int64)
        np.add.at(out, group, values.astype(np.int64))
        return out
    return np.bincount(group, weights=values, minlength=n_groups)


def sum_by_min_count(group: np.ndarray, n_groups: int, values: np.ndarray) -> np.ndarray:
    """Sums of float ``values`` per group skipping NaN, NaN where a group has none (pandas'
    ``sum(min_count=1)``): each group's values added in row order from 0.0, as numpy's
    bincount adds them (kernels.group_nansums does it in one pass)."""
    values, group = np.asarray(values), np.asarray(group)
    if values.dtype == np.float64 and group.dtype in (np.int32, np.int64):
        found = kernels.group_nansums(group, (values,), n_groups)
        if found is not None:
            sums, counts = found[0]
            return np.where(counts > 0, sums, np.nan)
    present = ~np.isnan(values)
    sums = np.bincount(group[present], weights=values[present], minlength=n_groups)
    counts = np.bincount(group[present], minlength=n_groups)
    return np.where(counts > 0, sums, np.nan)


# --------------------------------------------------------------------------- Arrow


def to_arrow(table: Table) -> Any:
    """A Table as a pyarrow Table: strings dictionary-encoded, Lookups read out."""
    import pyarrow as pa

    arrays = []
    for name in table:
        column = table[name]
        if isinstance(column, Strings):
            arrays.append(
                pa.DictionaryArray.from_arrays(
                    pa.array(column.codes.astype(np.int32)),
                    pa.array(list(column.values), pa.string()),
                )
            )
        else:
            arrays.append(pa.array(table.array(name)))
    return pa.table(arrays, names=list(table))


def from_arrow(arrow: Any) -> Table:
    """A pyarrow Table as a Table (dictionary columns become Strings)."""
    import pyarrow as pa

    columns: dict[str, Column] = {}
    for name in arrow.column_names:
        chunked = arrow.column(name).combine_chunks()
        if pa.types.is_dictionary(chunked.type):
            codes = chunked.indices.to_numpy(zero_copy_only=False).astype(np.int32)
            values = tuple(str(v) for v in chunked.dictionary.to_pylist())
            columns[name] = Strings(codes, values)
        elif pa.types.is_string(chunked.type) or pa.types.is_large_string(chunked.type):
            columns[name] = Strings.from_list([str(v) for v in chunked.to_pylist()])
        else:
            columns[name] = chunked.to_numpy(zero_copy_only=False)
    return Table(columns, n=arrow.num_rows)
