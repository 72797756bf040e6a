"""Every kernel of tpuperf.kernels gives the same result in C and in numpy.

One parametrised test runs each kernel through both implementations on generated inputs:
well-formed XSpace bytes (event records with every kind of stat, repeated and unknown
fields, fields of the wrong wire type), the same bytes truncated or with bytes flipped, empty
inputs and spans outside the buffer. Both must return the same arrays (dtype, shape and
bytes) or raise the same error with the same message. A kernel without a case here fails
test_every_kernel_has_a_parity_case.
"""

from __future__ import annotations

import collections
import inspect
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests._wire import len_field, tag, varint
from tests.conftest import SHARED_PROFILES, shared_profile
from tpuperf import kernels, xspace
from tpuperf.kernels import _numpy
from tpuperf.kernels.wire import DecodeError

needs_c = pytest.mark.skipif(
    not kernels.native_built(), reason="the C module (tpuperf/_wire_native.c) is not built"
)
# The implementations here: both where C is built (the hand-computed tests run on each).
BUILT = [name for name in kernels.IMPLEMENTATIONS if name == "numpy" or kernels.native_built()]

SEEDS = 300

# --------------------------------------------------------------------------- wire bytes


def big(rng: random.Random) -> int:
    """A varint value: small mostly, sometimes up to 2**64 - 1 (negative as int64)."""
    return rng.choice([rng.randrange(200), rng.randrange(1 << 40), rng.randrange(1 << 64)])


def stat_payload(rng: random.Random) -> bytes:
    """An XStat: an id (1..5, sometimes none or repeated) and value fields of any kind, in
    any order, sometimes several, sometimes of the wrong wire type or unknown."""
    out = b""
    for _ in range(rng.randrange(4)):
        choice = rng.randrange(10)
        if choice < 3:
            out += tag(1, 0) + varint(rng.randrange(1, 6))
        elif choice == 3:
            out += tag(2, 1) + rng.randbytes(8)
        elif choice in (4, 5):
            out += tag(rng.choice([3, 4, 7]), 0) + varint(big(rng))
        elif choice == 6:
            text = rng.choice([b"name", "\u00e9t\u00e9".encode(), b"\xff\xfe bad", b""])
            out += len_field(rng.choice([5, 6]), text)
        elif choice == 7:  # a value field number with another wire type: not that field
            out += len_field(rng.choice([3, 4, 7]), b"xy")
        elif choice == 8:
            out += tag(9, 0) + varint(big(rng))
        else:
            out += tag(8, 5) + rng.randbytes(4)
    if rng.random() < 0.7:
        out = tag(1, 0) + varint(rng.randrange(1, 6)) + out
    return out


def event_payload(rng: random.Random) -> bytes:
    fields = [tag(1, 0) + varint(rng.randrange(1, 50))]
    fields.append(tag(2, 0) + varint(big(rng)))
    if rng.random() < 0.9:
        fields.append(tag(3, 0) + varint(big(rng)))
    fields += [len_field(4, stat_payload(rng)) for _ in range(rng.randrange(4))]
    if rng.random() < 0.2:
        fields.append(tag(5, 0) + varint(3))
    if rng.random() < 0.2:
        fields.append(tag(2, 0) + varint(big(rng)))  # repeated: the last one wins
    if rng.random() < 0.1:
        fields.append(tag(12, 1) + rng.randbytes(8))
    rng.shuffle(fields)
    return b"".join(fields)


def corrupt(rng: random.Random, data: bytes, low: int, high: int) -> tuple[bytes, int]:
    """``data`` with one fault between ``low`` and ``high`` (or none), and its new end."""
    if high <= low or rng.random() < 0.5:
        return data, len(data)
    at = rng.randrange(low, high)
    fault = rng.randrange(3)
    if fault == 0:  # truncated
        return data[:at], at
    if fault == 1:  # a flipped byte
        flipped = data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
        return flipped, len(data)
    ten = b"\xff" * 11  # a varint longer than 10 bytes
    return data[:at] + ten + data[at:], len(data) + len(ten)


def line_run(rng: random.Random) -> tuple[bytes, int, int]:
    """Bytes holding a run of event records from ``first``: a line's other fields before
    and after, the records possibly corrupted; (data, first, stop)."""
    before = len_field(2, b"XLA Ops") + tag(1, 0) + varint(7)
    records = b"".join(len_field(4, event_payload(rng)) for _ in range(rng.randrange(6)))
    after = len_field(11, b"ops") if rng.random() < 0.5 else b""
    data, stop = corrupt(rng, before + records + after, len(before), len(before) + len(records))
    first = len(before)
    if rng.random() < 0.05:
        first = rng.randrange(len(data) + 1)  # anywhere: not at a record, or at the end
    if rng.random() < 0.03:
        return b"", 0, 0
    if rng.random() < 0.03:
        stop = len(data) + 5  # past the buffer
    return data, first, min(stop, len(data)) if rng.random() < 0.97 else stop


# --------------------------------------------------------------------------- cases


def _event_records(rng: random.Random) -> tuple[Any, ...]:
    return line_run(rng)


def _int_events(rng: random.Random) -> tuple[Any, ...]:
    data, first, stop = line_run(rng)
    n_columns = rng.randrange(5)
    n_wanted = rng.randrange(6) if n_columns else 0
    ids = [rng.randrange(0, 7) for _ in range(n_wanted)]
    columns = [rng.randrange(n_columns) for _ in range(n_wanted)]
    keep = rng.randrange(-1, n_columns) if n_columns else -1
    # The events expected (what sizes C's columns): none, too few, or about right.
    expected = rng.choice([0, 1, rng.randrange(64)])
    return (
        data,
        first,
        stop,
        np.array(ids, np.int64),
        np.array(columns, np.int64),
        n_columns,
        keep,
        expected,
    )


def _stats(rng: random.Random) -> tuple[Any, ...]:
    payloads = [stat_payload(rng) for _ in range(rng.randrange(8))]
    data = b"".join(payloads)
    ends = np.cumsum([len(p) for p in payloads], dtype=np.int64)
    starts = ends - np.array([len(p) for p in payloads], dtype=np.int64)
    data, _ = corrupt(rng, data, 0, len(data))
    if len(starts) and rng.random() < 0.1:
        starts[rng.randrange(len(starts))] = rng.choice([-3, len(data) + 2])
    return data, starts, ends


def _scan_fields(rng: random.Random) -> tuple[Any, ...]:
    message = b"".join(
        rng.choice([len_field(1, event_payload(rng)), tag(2, 0) + varint(big(rng))])
        for _ in range(rng.randrange(6))
    )
    if rng.random() < 0.1:
        message += tag(0, 0) + b"\x01"  # field number 0
    if rng.random() < 0.1:
        message += tag(3, 3)  # wire type 3 (a group): not read
    data, stop = corrupt(rng, message, 0, len(message))
    return data, 0, stop if rng.random() < 0.97 else stop + 1


def any_field(rng: random.Random) -> bytes:
    """A field of any number (one- and multi-byte tags) and wire type, sometimes one that
    protobuf rejects (field number 0, wire types 3, 4, 6, 7)."""
    number = rng.choice([1, 2, 3, 5, 15, 16, 300, 1 << 28, rng.randrange(1, 1 << 61)])
    choice = rng.randrange(12)
    if choice < 4:
        return tag(number, 0) + varint(big(rng))
    if choice < 7:
        return len_field(number, rng.choice([b"", b"ab", stat_payload(rng)]))
    if choice == 7:
        return tag(number, 1) + rng.randbytes(8)
    if choice == 8:
        return tag(number, 5) + rng.randbytes(4)
    if choice == 9 and rng.random() < 0.3:
        return tag(0, rng.choice([0, 2])) + b"\x01"
    if choice == 10 and rng.random() < 0.3:
        return tag(number, rng.choice([3, 4, 6, 7]))
    return tag(rng.randrange(1, 4), 0) + varint(rng.randrange(3))


def _message_fields(rng: random.Random) -> tuple[Any, ...]:
    """Messages of any fields back to back (events, stats, ...), sometimes with faults;
    spans sometimes empty, reversed, overlapping or outside the buffer."""
    makers = [
        event_payload,
        stat_payload,
        lambda r: b"".join(any_field(r) for _ in range(4)),
        # 80 sound fields: more rounds than C keeps at hand, and many (key, round) pairs
        lambda r: b"".join(
            r.choice(
                [tag(r.randrange(1, 300), 0) + varint(big(r)), len_field(r.randrange(1, 40), b"")]
            )
            for _ in range(80)
        ),
    ]
    payloads = [rng.choice(makers)(rng) for _ in range(rng.randrange(10))]
    data = b"".join(payloads)
    ends = np.cumsum([len(p) for p in payloads], dtype=np.int64)
    starts = ends - np.array([len(p) for p in payloads], dtype=np.int64)
    for _ in range(rng.choice([1, 1, 2, 3])):  # faults in several messages: which one is told
        data, _ = corrupt(rng, data, 0, len(data))
    ends = np.minimum(ends, len(data)) if rng.random() < 0.9 else ends
    if len(starts) and rng.random() < 0.1:
        i = rng.randrange(len(starts))
        starts[i] = rng.choice([-3, 0, len(data) + 2, int(ends[i])])
    return np.frombuffer(data, np.uint8) if rng.random() < 0.5 else data, starts, ends


def _texts(rng: random.Random) -> tuple[Any, ...]:
    data = rng.choice([b"plain ascii names", "caf\u00e9 \u4e2d".encode(), b"\xff\xfe\x80 bad"])
    spans = sorted(rng.randrange(len(data) + 1) for _ in range(2 * rng.randrange(6)))
    starts, stops = np.array(spans[::2], np.int64), np.array(spans[1::2], np.int64)
    if len(starts) and rng.random() < 0.1:
        stops[-1] = len(data) + 1
    return data, starts, stops


# What a profile's name columns hold (strings, unicode, ids that print alike), values equal
# across types (1, 1.0 and True are one key of a dict), tuples (op classes) and None.
_FACTOR_POOL = ["fusion.1", "fusion.1 ", "caf\u00e9", "", "1", 1, 1.0, True, 2, None, ("a", 1)]


def _factorize(rng: random.Random) -> tuple[Any, ...]:
    values = [rng.choice(_FACTOR_POOL) for _ in range(rng.randrange(30))]
    if values and rng.random() < 0.1:
        values[rng.randrange(len(values))] = ["unhashable"]  # a TypeError in both
    return (values if rng.random() < 0.5 else tuple(values),)


def _kind_runs(rng: random.Random) -> tuple[Any, ...]:
    n = rng.randrange(12)
    gaps = [rng.choice([0, 0, 1, 5, -2 if rng.random() < 0.1 else 3]) for _ in range(n)]
    durations = [rng.choice([0, 1, 4, 10]) for _ in range(n)]
    starts, at = [], 0
    for gap, duration in zip(gaps, durations, strict=True):
        starts.append(at + gap)
        at = starts[-1] + duration
    ends = [s + d for s, d in zip(starts, durations, strict=True)]
    kinds = [rng.randrange(-1, 4) for _ in range(n)]
    return np.array(starts, np.int64), np.array(ends, np.int64), np.array(kinds, np.int8), 3


def _apart(rng: random.Random) -> tuple[Any, ...]:
    starts, ends, _, _ = _kind_runs(rng)
    if len(starts) and rng.random() < 0.1:
        ends = ends[:-1]  # columns of different lengths: an error in both
    return starts, ends


def _union_length(rng: random.Random) -> tuple[Any, ...]:
    """Runs of intervals in order of start (overlapping, nested, touching, empty, within and
    across runs); sometimes a run out of order (None), more runs than MAX_RUNS (None) or a
    run whose ends are one short (an error)."""
    runs = []
    for _ in range(rng.choice([0, 1, 2, rng.randrange(1, 9), kernels.MAX_RUNS + 1])):
        starts = sorted(rng.randrange(-20, 60) for _ in range(rng.randrange(12)))
        runs.append((starts, [s + rng.randrange(-3, 25) for s in starts]))
    fault = rng.random()
    if runs and runs[0][0] and fault < 0.1:
        runs[0] = (runs[0][0][::-1], runs[0][1][::-1])
    elif runs and runs[-1][0] and fault < 0.15:
        runs[-1] = (runs[-1][0], runs[-1][1][:-1])
    elif runs and fault < 0.2:  # the largest start, then an earlier one: out of order too
        top = np.iinfo(np.int64).max
        runs[-1] = (runs[-1][0] + [top, top - 5], runs[-1][1] + [top, top])
    return (runs,)


def _search_sorted(rng: random.Random) -> tuple[Any, ...]:
    a = sorted(rng.randrange(-5, 20) for _ in range(rng.randrange(30)))  # repeats too
    v = [rng.randrange(-8, 24) for _ in range(rng.randrange(30))]
    if rng.random() < 0.5:  # in runs in increasing order, as windows' edges come
        v = sorted(v[: len(v) // 2]) + sorted(v[len(v) // 2 :])
    side = rng.choice(
        ["left", "right", "left", "right", "middle" if rng.random() < 0.2 else "left"]
    )
    return np.array(a, np.int64), np.array(v, np.int64), side


def _gap_sums(rng: random.Random) -> tuple[Any, ...]:
    n = rng.randrange(12)
    bounds = sorted(rng.randrange(-(2**62), 2**62) for _ in range(2 * n))
    starts, ends = np.array(bounds[::2], np.int64), np.array(bounds[1::2], np.int64)
    cuts = sorted(rng.randrange(max(n, 1)) for _ in range(rng.randrange(6)))
    if cuts and rng.random() < 0.1:
        cuts[rng.randrange(len(cuts))] = rng.choice([-1, n + 1])
    return starts, ends, np.array(cuts, np.int64), rng.choice([1, 2**40, 2**62])


def _first_rows(rng: random.Random) -> tuple[Any, ...]:
    n_codes = rng.randrange(20)
    codes = [rng.randrange(max(n_codes, 1)) for _ in range(rng.randrange(30))]
    if codes and rng.random() < 0.1:
        codes[rng.randrange(len(codes))] = rng.choice([-1, n_codes])
    return np.array(codes, rng.choice([np.int32, np.int64])), n_codes


def _dense_groups(rng: random.Random) -> tuple[Any, ...]:
    size = rng.randrange(1, 20)
    keys = [rng.randrange(size) for _ in range(rng.randrange(30))]
    if keys and rng.random() < 0.1:
        keys[rng.randrange(len(keys))] = rng.choice([-1, size])
    return np.array(keys, np.int64), size


def _group_sums(rng: random.Random) -> tuple[Any, ...]:
    n_groups = rng.randrange(1, 8)
    n = rng.randrange(40)
    groups = [rng.randrange(n_groups) for _ in range(n)]
    if groups and rng.random() < 0.1:
        groups[rng.randrange(n)] = rng.choice([-1, n_groups])
    scale = rng.choice([1000, 2**62])
    values = [rng.randrange(-scale, scale) for _ in range(n)]
    dtype = rng.choice([np.int32, np.int64])
    return np.array(groups, dtype), np.array(values, np.int64), n_groups


def _group_sums_into(rng: random.Random) -> tuple[Any, ...]:
    """As _group_sums, half of them added to sums already there (into: wrapping sums; now and
    then of another length, an error)."""
    groups, values, n_groups = _group_sums(rng)
    if rng.random() < 0.5:
        return groups, values, n_groups
    length = n_groups if rng.random() < 0.9 else n_groups + 1
    into = np.array([rng.randrange(-(2**63), 2**63) for _ in range(length)], np.int64)
    return groups, values, n_groups, into


def _roofline_sums(rng: random.Random) -> tuple[Any, ...]:
    keys, dur, size = _group_sums(rng)  # keys of int32 or int64, some outside; wrapping sums

    def per_key() -> np.ndarray:  # fractions (the order of the sums shows), inf, NaN
        return np.array(
            [
                rng.choice([rng.uniform(0, 1e6), 1.5, float("inf"), float("nan")])
                for _ in range(size)
            ]
        )

    return keys, size, dur, per_key(), per_key(), per_key()


def _group_totals(rng: random.Random) -> tuple[Any, ...]:
    groups, values, n_groups = _group_sums(rng)
    columns = tuple(
        np.array([rng.randrange(-(2**63), 2**63) for _ in values], np.int64)
        for _ in range(rng.randrange(4))
    )
    return groups, (values, *columns), n_groups


def _floats(rng: random.Random, n: int) -> np.ndarray:
    """Floats of every kind a sum meets: NaN (skipped), -0.0, infinities, values that round."""
    pool = [float("nan"), -0.0, 0.0, float("inf"), -float("inf"), 1e16, 1.0, 0.1, -3.5, 2.0**-1074]
    values = [rng.choice(pool) if rng.random() < 0.5 else rng.uniform(-1e6, 1e6) for _ in range(n)]
    return np.array(values, np.float64)


def _group_nansums(rng: random.Random) -> tuple[Any, ...]:
    """Rows as they are, or read through an index (sometimes one outside the entries)."""
    groups, _, n_groups = _group_sums(rng)
    columns = tuple(_floats(rng, len(groups)) for _ in range(rng.randrange(4)))
    if rng.random() < 0.5:
        return groups, columns, n_groups
    index = [rng.randrange(len(groups)) for _ in range(rng.randrange(30))] if len(groups) else []
    if index and rng.random() < 0.1:
        index[rng.randrange(len(index))] = rng.choice([-1, len(groups)])
    return groups, columns, n_groups, np.array(index, rng.choice([np.int32, np.int64]))


def _bootstrap_medians(rng: random.Random) -> tuple[Any, ...]:
    """Rows of values of every kind (ties, -0.0, infinities, NaN) and replicates' counts of
    draws; sometimes counts that do not add up to the steps (None), a negative count (None)
    or counts of another number of steps (an error)."""
    n = rng.choice([1, 2, 3, 4, rng.randrange(1, 40), rng.randrange(128, 200)])  # (C: a floor)
    samples = np.array([_floats(rng, n) for _ in range(rng.randrange(4))]).reshape(-1, n)
    draws = [[rng.randrange(n) for _ in range(n)] for _ in range(rng.randrange(1, 6))]
    counts = np.array([np.bincount(d, minlength=n) for d in draws], np.int64)
    fault = rng.random()
    if fault < 0.05:
        counts[0, 0] += 1
    elif fault < 0.08:
        counts[0, 0] -= n + 1
        counts[0, -1] += n + 1
    elif fault < 0.1:
        counts = counts[:, :-1] if n > 1 else counts[:, :0]
    return samples, counts


CASES: dict[str, Callable[[random.Random], tuple[Any, ...]]] = {
    "event_records": _event_records,
    "skip_records": _event_records,
    "extent": _event_records,
    "int_events": _int_events,
    "stats": _stats,
    "scan_fields": _scan_fields,
    "message_fields": _message_fields,
    "texts": _texts,
    "factorize": _factorize,
    "kind_runs": _kind_runs,
    "apart": _apart,
    "union_length": _union_length,
    "search_sorted": _search_sorted,
    "gap_sums": _gap_sums,
    "dense_groups": _dense_groups,
    "first_rows": _first_rows,
    "counts": _first_rows,
    "group_sums": _group_sums_into,
    "roofline_sums": _roofline_sums,
    "group_totals": _group_totals,
    "group_nansums": _group_nansums,
    "bootstrap_medians": _bootstrap_medians,
}


# --------------------------------------------------------------------------- parity


def _comparable(value: Any) -> Any:
    """Arrays as (dtype, shape, bytes): equal bit for bit (NaNs and -0.0 too)."""
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return type(value).__name__, [_comparable(v) for v in value]
    if isinstance(value, dict):  # in order: the keys' order is part of the result
        return "dict", [(key, _comparable(v)) for key, v in value.items()]
    return value


def _outcome(name: str, implementation: str, args: tuple[Any, ...]) -> Any:
    # Each implementation on its own copy of the arrays: a kernel may add into one it is given.
    args = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
    with kernels.use(implementation):
        try:
            return "result", _comparable(getattr(kernels, name)(*args))
        except (DecodeError, ValueError, TypeError) as exc:
            return "error", type(exc).__name__, str(exc)


@needs_c
@pytest.mark.parametrize("name", kernels.KERNELS)
def test_c_and_numpy_agree(name: str) -> None:
    faults = 0
    for seed in range(SEEDS):
        args = CASES[name](random.Random(f"{name} {seed}"))
        in_c = _outcome(name, "native", args)
        assert _outcome(name, "numpy", args) == in_c, f"seed {seed}: {args!r}"
        faults += in_c[0] == "error" or in_c == ("result", None)
    # The cases reach both results and faults (an error, or None where the kernel says "not
    # this way"): a generator that stopped making either would pass without testing them.
    assert 0 < faults < SEEDS, faults


def test_every_kernel_has_a_parity_case() -> None:
    assert set(CASES) == set(kernels.KERNELS)
    public = {
        name
        for name, value in vars(kernels).items()
        if inspect.isfunction(value)
        and value.__module__ == kernels.__name__
        and not name.startswith("_")
    }
    helpers = {"numpy_asked", "load", "implementation", "native_built", "use"}
    assert public - helpers == set(kernels.KERNELS)


@needs_c
@pytest.mark.parametrize("name", kernels.KERNELS)
def test_both_implementations_have_each_kernel_with_one_signature(name: str) -> None:
    in_c = inspect.signature(getattr(kernels.load("native"), name))
    assert inspect.signature(getattr(_numpy, name)) == in_c


@pytest.mark.parametrize("implementation", BUILT)
def test_group_sums_equal_a_loop_and_add_into_sums_given_or_leave_them(
    implementation: str,
) -> None:
    """Sums per group wrap as int64 sums do; given sums, the values are added to them in place
    (the same array back), and a group outside adds nothing to them."""

    def wrapped(x: int) -> int:
        return (x + 2**63) % 2**64 - 2**63

    rng = random.Random("group sums")
    added = untouched = 0
    with kernels.use(implementation):
        for _ in range(SEEDS):
            groups, values, n_groups = _group_sums(rng)
            pairs = list(zip(groups.tolist(), values.tolist(), strict=True))
            inside = all(0 <= g < n_groups for g, _ in pairs)
            start = [rng.randrange(-(2**63), 2**63) for _ in range(n_groups)]
            want = [wrapped(s + sum(v for g, v in pairs if g == k)) for k, s in enumerate(start)]
            found = kernels.group_sums(groups, values, n_groups)
            into = np.array(start, np.int64)
            got = kernels.group_sums(groups, values, n_groups, into=into)
            if inside:
                assert found is not None and found.tolist() == [
                    wrapped(w - s) for w, s in zip(want, start, strict=True)
                ]
                assert got is into and into.tolist() == want
                added += 1
            else:
                assert found is None and got is None and into.tolist() == start
                untouched += 1
    assert added and untouched


@pytest.mark.parametrize("implementation", BUILT)
def test_apart_search_sorted_gap_sums_first_rows_and_counts_equal_a_loop(
    implementation: str,
) -> None:
    """The interval and group kernels of the timeline against plain loops over the same
    generated cases as the parity test (empty, one interval, touching, wrapping sums)."""
    rng = random.Random("reference")
    with kernels.use(implementation):
        for _ in range(SEEDS):
            starts, ends = (c.tolist() for c in _apart(rng))
            if len(starts) == len(ends):
                expected = all(e > s for s, e in zip(starts, ends, strict=True)) and all(
                    starts[i] > ends[i - 1] for i in range(1, len(starts))
                )
                assert kernels.apart(np.array(starts, np.int64), np.array(ends, np.int64)) is (
                    expected
                )
            a, v, side = _search_sorted(rng)
            if side in ("left", "right"):
                found = kernels.search_sorted(a, v, side)
                before = (lambda x, y: x <= y) if side == "right" else (lambda x, y: x < y)
                assert found.dtype == np.int64
                assert found.tolist() == [sum(before(x, y) for x in a.tolist()) for y in v.tolist()]
            s, e, cuts, short_ps = _gap_sums(rng)
            if all(0 <= c <= max(len(s) - 1, 0) for c in cuts.tolist()):
                gaps = [
                    int(b) - int(a) for a, b in zip(e[:-1].tolist(), s[1:].tolist(), strict=True)
                ]
                length, count = kernels.gap_sums(s, e, cuts, short_ps)
                for c, got_length, got_count in zip(cuts.tolist(), length, count, strict=True):
                    short = [g for g in gaps[:c] if g < short_ps]
                    wrapped = (sum(short) + 2**63) % 2**64 - 2**63  # as int64 sums wrap
                    assert (int(got_length), int(got_count)) == (wrapped, len(short))
            codes, n_codes = _first_rows(rng)
            got = kernels.first_rows(codes, n_codes)
            counted = kernels.counts(codes, n_codes)
            listed = codes.tolist()
            if any(not 0 <= c < n_codes for c in listed):
                assert got is None and counted is None
            else:
                assert counted is not None and counted.dtype == np.int64
                assert counted.tolist() == [listed.count(k) for k in range(n_codes)]
                assert got is not None and got.dtype == np.int64
                assert got.tolist() == [
                    listed.index(k) if k in listed else len(listed) for k in range(n_codes)
                ]


@pytest.mark.parametrize("implementation", BUILT)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("bad", [-1, 3, 2**31 - 1])
def test_first_rows_checks_the_codes_after_every_code_is_seen(
    implementation: str, dtype: type, bad: int
) -> None:
    """Once every code has its first row the rest are still read: a code outside the range
    far after them (a step's ops, then many steps) answers None, as in the first rows."""
    codes = np.tile(np.arange(3, dtype=dtype), 1000)
    with kernels.use(implementation):
        found = kernels.first_rows(codes, 3)
        assert found is not None and found.tolist() == [0, 1, 2]
        codes[-1] = bad
        assert kernels.first_rows(codes, 3) is None
        codes[-1], codes[1] = 2, bad
        assert kernels.first_rows(codes, 3) is None


@pytest.mark.parametrize("implementation", BUILT)
def test_factorize_numbers_values_in_order_of_first_appearance(implementation: str) -> None:
    """factorize against a plain loop: each value's code is the place of the first value
    equal to it among those met before (a list's index), the values kept are those first
    ones, the codes int32."""
    rng = random.Random("factorize reference")
    with kernels.use(implementation):
        for _ in range(SEEDS):
            (values,) = _factorize(rng)
            if any(isinstance(v, list) for v in values):
                with pytest.raises(TypeError, match="unhashable"):
                    kernels.factorize(values)
                continue
            unique: list[Any] = []
            expected = []
            for value in values:
                if value not in unique:
                    unique.append(value)
                expected.append(unique.index(value))
            codes, found = kernels.factorize(values)
            assert codes.dtype == np.int32 and codes.tolist() == expected
            assert type(found) is tuple and len(found) == len(unique)
            assert all(a is b for a, b in zip(found, unique, strict=True))  # the first ones


@pytest.mark.parametrize("implementation", BUILT)
def test_roofline_sums_add_op_by_op_in_row_order(implementation: str) -> None:
    """roofline_sums against a loop adding each op's values to its group, in row order, as
    Python floats (the additions np.bincount makes), and its durations as wrapping int64."""
    rng = random.Random("roofline reference")
    with kernels.use(implementation):
        for _ in range(SEEDS):
            keys, size, dur, flops, nbytes, ideal = _roofline_sums(rng)
            got = kernels.roofline_sums(keys, size, dur, flops, nbytes, ideal)
            listed = keys.tolist()
            if any(not 0 <= k < size for k in listed):
                assert got is None
                continue
            order = list(dict.fromkeys(listed))  # keys in order of first appearance
            sums = {k: [0, 0.0, 0.0, 0.0] for k in order}
            for key, d in zip(listed, dur.tolist(), strict=True):
                lost = float(d) - float(ideal[key])
                sums[key][0] += d
                sums[key][1] += float(flops[key])
                sums[key][2] += float(nbytes[key])
                sums[key][3] += lost if not lost < 0 else 0.0
            assert got is not None
            first, dur_sum, flops_sum, bytes_sum, lost_sum = got
            assert first.tolist() == [listed.index(k) for k in order]
            assert dur_sum.tolist() == [(sums[k][0] + 2**63) % 2**64 - 2**63 for k in order]
            for column, at in ((flops_sum, 1), (bytes_sum, 2), (lost_sum, 3)):
                assert column.dtype == np.float64
                expected = np.array([sums[k][at] for k in order], dtype=np.float64)
                assert column.tobytes() == expected.tobytes()  # NaN and all, bit for bit


def test_a_malformed_record_raises_the_same_decode_error_in_both() -> None:
    """A record whose length runs past the line: both name the fault and its byte."""
    data = len_field(4, tag(1, 0) + varint(5))[:-1]  # the record's last byte cut off
    for implementation in BUILT:
        with kernels.use(implementation), pytest.raises(DecodeError) as caught:
            kernels.event_records(data, 0, len(data))
        assert str(caught.value) == (
            "an event record runs past the end of its line (truncated file?), at byte 2"
        )


def test_int_events_reads_the_chosen_stats() -> None:
    """Values computed by hand: stat 3 into column 0, stat 4 into column 1; a later stat of
    an event wins, a double is no integer, the event without stat 3 is left out by keep."""
    events = [
        [tag(1, 0) + varint(3), tag(4, 0) + varint(10)],
        [tag(1, 0) + varint(3), tag(4, 0) + varint(11)],
        [tag(1, 0) + varint(4), tag(2, 1) + bytes(8)],
    ]
    payloads = [
        tag(2, 0) + varint(100 * i) + b"".join(len_field(4, b"".join(s)) for s in [stats])
        for i, stats in enumerate(events)
    ]
    payloads[0] += len_field(4, tag(1, 0) + varint(3) + tag(3, 0) + varint(12))
    data = b"".join(len_field(4, p) for p in payloads)
    ids, columns = np.array([3, 4], np.int64), np.array([0, 1], np.int64)
    for implementation in BUILT:
        with kernels.use(implementation):
            run_end, found = kernels.int_events(data, 0, len(data), ids, columns, 2)
            assert run_end == len(data)
            assert found[1].tolist() == [0, 100, 200]
            assert found[3].tolist() == [12, 11, kernels.MISSING]
            assert found[4].tolist() == [kernels.MISSING] * 3
            _, kept = kernels.int_events(data, 0, len(data), ids, columns, 2, keep_column=0)
            assert kept[1].tolist() == [0, 100]


def test_message_fields_reads_each_key_round_by_round() -> None:
    """Values computed by hand: two messages, each key's entries in the order of the rounds
    (first fields of both messages, then the second ones), keys in the order first met (by
    round, then wire type, then number); a length-delimited value is its payload's start."""
    first = tag(1, 0) + varint(300) + len_field(2, b"ab") + tag(1, 0) + varint(7)
    second = tag(2, 2) + varint(1) + b"x" + tag(1, 0) + varint(5) + tag(20, 1) + bytes(8)
    data = first + second
    starts = np.array([0, len(first), len(data)], np.int64)
    stops = np.array([len(first), len(data), len(data)], np.int64)
    for implementation in BUILT:
        with kernels.use(implementation):
            fields = kernels.message_fields(data, starts, stops)
        as_lists = {key: [column.tolist() for column in value] for key, value in fields.items()}
        assert list(as_lists) == [1 * 8 + 0, 2 * 8 + 2, 20 * 8 + 1]
        # first: 08 ac02 | 12 02 'ab' | 08 07 (bytes 0-8); second: 12 01 'x' | 08 05 | a101 ...
        assert as_lists[8] == [[0, 1, 0], [300, 5, 7], [3, 14, 9]]
        assert as_lists[18] == [[1, 0], [11, 5], [12, 7]]  # round 0 of message 1 first
        assert as_lists[161] == [[1], [0], [24]]


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (tag(1, 0) + varint(1) + tag(0, 0) + b"\x01", "field number 0 (not an XSpace protobuf)"),
        (tag(1, 0) + varint(1) + len_field(2, b"abc")[:-1] + tag(3, 0), "a field runs past"),
    ],
)
def test_message_fields_names_the_fault_and_its_byte(message: bytes, error: str) -> None:
    """The fault's field starts at byte 2 (after the first field); the message ends one byte
    early in the second case, so its length-delimited field runs past it."""
    stop = len(message) - 1 if error.startswith("a field") else len(message)
    for implementation in BUILT:
        with kernels.use(implementation), pytest.raises(DecodeError) as caught:
            kernels.message_fields(message, np.array([0], np.int64), np.array([stop], np.int64))
        assert str(caught.value).startswith(error)
        assert str(caught.value).endswith(", at byte 2")


REAL = sorted(
    str(p.relative_to(SHARED_PROFILES)) for p in SHARED_PROFILES.glob("*/*.xplane.pb")
) or ["tpu/v6e_4chip_inference.xplane.pb"]


@needs_c
@pytest.mark.parametrize("relative", REAL)
def test_message_fields_agree_on_every_message_of_a_real_profile(
    relative: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every call the decoder makes on a real profile (metadata, map entries, plane headers,
    memory breakdowns), and every length-delimited payload of its planes but the lines read
    as messages, four levels deep (names and other text too: real bytes that are no message),
    give the same fields or the same error in C and numpy; so do the decoder's calls on
    copies with a byte flipped or a message cut short."""
    data = shared_profile(relative).read_bytes()
    calls: list[tuple[Any, np.ndarray, np.ndarray]] = []
    reader = kernels.message_fields

    def recording(buf: Any, starts: Any, stops: Any) -> kernels.Fields:
        calls.append((buf, np.array(starts, np.int64), np.array(stops, np.int64)))
        return reader(buf, starts, stops)

    monkeypatch.setattr(kernels, "message_fields", recording)
    space = xspace.decode(data)
    for plane in space.planes:
        plane.metadata_memory_breakdown()
    monkeypatch.undo()
    assert len(calls) >= 3 * len(space.planes)
    fields_read = 0
    for args in calls:
        in_c = _outcome("message_fields", "native", args)
        assert _outcome("message_fields", "numpy", args) == in_c
        fields_read += sum(len(rows) for _, rows, _ in kernels.message_fields(*args).values())
    assert fields_read > 1000
    # The same calls on damaged copies: a byte of a message flipped, or its span cut short.
    rng = random.Random(relative)
    faults = 0
    for buf, starts, stops in calls:
        spans = np.flatnonzero(stops > starts)
        if not len(spans):
            continue
        for _ in range(5):
            i = int(spans[rng.randrange(len(spans))])
            damaged, cut = bytearray(buf), stops.copy()
            if rng.random() < 0.5:
                damaged[rng.randrange(int(starts[i]), int(stops[i]))] = rng.randrange(256)
            else:
                cut[i] = rng.randrange(int(starts[i]), int(stops[i]))
            in_c = _outcome("message_fields", "native", (bytes(damaged), starts, cut))
            assert _outcome("message_fields", "numpy", (bytes(damaged), starts, cut)) == in_c
            faults += in_c[0] == "error"
    assert faults > 0
    # Each plane's length-delimited payloads (lines left out: their events are the other
    # kernels'), then theirs, per field key, as messages.
    batches = []
    top_number, top_wire, _, top_start, top_stop = kernels.scan_fields(data, 0, len(data))
    planes = (top_number == 1) & (top_wire == 2)
    for start, stop in zip(top_start[planes], top_stop[planes], strict=True):
        number, wire, _, value_start, value_stop = kernels.scan_fields(data, start, stop)
        for key in set(number[(wire == 2) & (number != 3)].tolist()):
            pick = (wire == 2) & (number == key)
            batches.append((value_start[pick], value_stop[pick]))
    outcomes: collections.Counter[str] = collections.Counter()
    for _ in range(4):
        deeper = []
        for starts, stops in batches:
            in_c = _outcome("message_fields", "native", (data, starts, stops))
            assert _outcome("message_fields", "numpy", (data, starts, stops)) == in_c
            outcomes[in_c[0]] += 1
            if in_c[0] == "result":
                found = kernels.message_fields(data, starts, stops)
                deeper += [(s, e) for key, (_, s, e) in found.items() if key & 7 == 2]
        batches = deeper
    assert outcomes["result"] > len(space.planes)


def _plain_totals(groups: list[int], columns: list[list[int]], n_groups: int) -> Any:
    """group_totals as a loop over the rows: first row, rows, sums wrapped to int64."""
    first, counts = [len(groups)] * n_groups, [0] * n_groups
    sums = [[0] * n_groups for _ in columns]
    for row, group in enumerate(groups):
        first[group] = min(first[group], row)
        counts[group] += 1
        for column, total in zip(columns, sums, strict=True):
            total[group] = (total[group] + column[row] + 2**63) % 2**64 - 2**63
    return first, counts, sums


def _plain_nansums(groups: list[int], values: list[float], n_groups: int) -> Any:
    """group_nansums of one column as a loop over the rows: NaN skipped, added in row order
    from 0.0."""
    sums, counts = [0.0] * n_groups, [0] * n_groups
    for group, value in zip(groups, values, strict=True):
        if value == value:
            sums[group] += value
            counts[group] += 1
    return sums, counts


@pytest.mark.parametrize("implementation", BUILT)
@pytest.mark.parametrize("seed", range(40))
def test_group_totals_and_nansums_equal_a_loop_over_the_rows(
    implementation: str, seed: int
) -> None:
    rng = random.Random(f"plain {seed}")
    # empty, one group, every row NaN, and random cases
    n_groups = 1 if seed % 4 == 1 else rng.randrange(1, 6)
    n = 0 if seed % 4 == 0 else rng.randrange(1, 30)
    groups = [rng.randrange(n_groups) for _ in range(n)]
    columns = [[rng.randrange(-(2**63), 2**63) for _ in range(n)] for _ in range(2)]
    nan = seed % 4 == 2
    values = [float("nan") if nan or rng.random() < 0.3 else rng.uniform(-1e3, 1e3) for _ in groups]
    values = [-0.0 if rng.random() < 0.1 else v for v in values]
    # a Lookup: a value and a group per entry, rows read through an index
    index = [rng.randrange(n) for _ in range(rng.randrange(40))] if n else []
    dtype = np.int32 if seed % 2 else np.int64
    with kernels.use(implementation):
        totals = kernels.group_totals(
            np.array(groups, dtype), tuple(np.array(c, np.int64) for c in columns), n_groups
        )
        by_row = kernels.group_nansums(
            np.array(groups, dtype), (np.array(values, np.float64),), n_groups
        )
        by_index = kernels.group_nansums(
            np.array(groups, dtype),
            (np.array(values, np.float64), -np.array(values, np.float64)),
            n_groups,
            np.array(index, dtype),
        )
    assert totals is not None and by_row is not None and by_index is not None
    first, counts, sums = _plain_totals(groups, columns, n_groups)
    assert totals[0].tolist() == first and totals[1].tolist() == counts
    assert [s.tolist() for s in totals[2]] == sums
    rows = [groups[i] for i in index]
    for found, (plain_groups, plain_values) in zip(
        [*by_row, *by_index],
        [(groups, values), (rows, [values[i] for i in index]), (rows, [-values[i] for i in index])],
        strict=True,
    ):
        plain_sums, plain_counts = _plain_nansums(plain_groups, plain_values, n_groups)
        # to the bit: -0.0 and 0.0 told apart
        assert found[0].tobytes() == np.array(plain_sums, np.float64).tobytes()
        assert found[1].tolist() == plain_counts


@pytest.mark.parametrize("implementation", BUILT)
def test_group_totals_and_nansums_refuse_a_group_outside(implementation: str) -> None:
    with kernels.use(implementation):
        for groups in ([0, 2], [-1, 0]):
            at = np.array(groups, np.int64)
            assert kernels.group_totals(at, (np.zeros(2, np.int64),), 2) is None
            assert kernels.group_nansums(at, (np.zeros(2),), 2) is None
            inside = np.array([0, 1], np.int64)
            assert kernels.group_nansums(inside, (np.zeros(2),), 2, at) is None


@needs_c
def test_rank_values_are_numpys_partition_at_the_ranks() -> None:
    """Where each row's bootstrap medians start (kernels/_c.py ``_floors``): each row's value
    at each rank of its values in order, as numpy's partition gives it (NaN after every
    number; -0.0 as 0.0), for rows of thousands of values in the orders that make a
    partition slow or fast: sorted, reversed, a saw, organ pipes, long runs of ties, zeros and
    a few values, a diff's kind; and rows of every kind of float at random ranks. Ranks out
    of order or outside a row are refused."""
    from tpuperf.kernels import _c

    rng = np.random.default_rng(7)
    n = 5834
    saw = np.tile(np.arange(97.0), n // 97 + 1)[:n]
    rows = [
        np.sort(rng.random(n)),
        np.sort(rng.random(n))[::-1],
        saw,
        np.concatenate([np.arange(n // 2), np.arange(n - n // 2)[::-1]]).astype(float),
        rng.integers(0, 3, n).astype(float),
        np.where(rng.random(n) < 0.3, 0.0, np.where(rng.random(n) < 0.6, 4.0, rng.random(n))),
        np.where(rng.random(n) < 0.1, -0.0, rng.standard_normal(n)),
        np.where(rng.random(n) < 0.05, np.nan, rng.random(n)),
        np.where(rng.random(n) < 0.01, np.inf, rng.random(n)),
    ]
    ranks = np.array([0, 1, (n - 1) // 2 - 3 * 77, (n - 1) // 2, n // 2, n // 2, n - 300, n - 1])
    cases = [(np.array(rows), ranks)]
    draw = random.Random("rank values")
    for _ in range(SEEDS):
        m = draw.choice([1, 2, 3, draw.randrange(1, 40), draw.randrange(40, 300)])
        floats = np.array([_floats(draw, m) for _ in range(draw.randrange(1, 5))])
        cases.append((floats, np.array(sorted(draw.randrange(m) for _ in range(4)))))
    for samples, at in cases:
        found = _c._rank_values(samples, at)
        want = 0.0 + np.partition(samples, at, axis=1)[:, at]
        assert found.tobytes() == want.tobytes()
    for bad in ([2, 1], [n], [-1]):
        with pytest.raises(ValueError, match="ascending ranks"):
            _c._rank_values(np.array(rows), np.array(bad))


def _assert_medians_are_numpys(implementation: str, samples: Any, index: Any) -> None:
    """The kernel's medians of the draws (``index``: each replicate's steps) are numpy's
    median of the gathered rows x replicates x steps array, to the bit."""
    n = samples.shape[1]
    counts = np.array([np.bincount(row, minlength=n) for row in index], np.int64)
    with kernels.use(implementation), np.errstate(invalid="ignore"):
        found = kernels.bootstrap_medians(samples, counts)
        expected = np.median(samples[:, index], axis=2)
    assert found is not None
    assert found.tobytes() == expected.tobytes()


@pytest.mark.parametrize("implementation", BUILT)
@pytest.mark.parametrize("seed", range(30))
def test_bootstrap_medians_equal_numpys_median_of_the_draws(implementation: str, seed: int) -> None:
    """Each replicate's median equals numpy's median of the values it draws (the gathered
    rows x replicates x steps array that diffing made before the kernel), to the bit: even
    and odd step counts, one step, ties, -0.0 (a median of -0.0 is 0.0, as numpy's mean makes
    it), infinities (a middle pair of -inf and inf is NaN) and NaN drawn or not drawn."""
    rng = random.Random(f"medians {seed}")
    n = [1, 2, 3, 4][seed] if seed < 4 else rng.randrange(1, 60)
    samples = np.array([_floats(rng, n) for _ in range(rng.randrange(1, 8))])
    if seed % 3 == 0:  # no NaN at all: every median a number
        samples[np.isnan(samples)] = 0.0
    index = np.array([[rng.randrange(n) for _ in range(n)] for _ in range(rng.randrange(1, 40))])
    _assert_medians_are_numpys(implementation, samples, index)


@pytest.mark.parametrize("implementation", BUILT)
@pytest.mark.parametrize("seed", range(8))
def test_bootstrap_medians_of_thousands_of_steps_equal_numpys(
    implementation: str, seed: int
) -> None:
    """Thousands of steps: the C loop sorts each row only as far as its replicates' walk takes
    it (a block of values selected, then sorted, again where the walk goes on): numpy's
    medians to the bit, for distinct values, long runs of ties, few distinct values, NaN and
    infinities, and a replicate that draws only the smallest values (its walk from the
    smallest value goes through many blocks)."""
    rng = random.Random(f"long medians {seed}")
    n = rng.choice([1000, 2501, 5834])
    rows = [
        [rng.uniform(0, 1) for _ in range(n)],
        [float(rng.randrange(3)) for _ in range(n)],
        [2.0 if rng.random() < 0.7 else rng.uniform(0, 4) for _ in range(n)],
        _floats(rng, n).tolist(),
        sorted(rng.uniform(0, 1) for _ in range(n))[:: 1 if seed % 2 else -1],
    ]
    samples = np.array(rows)
    if seed % 2 == 0:
        samples[np.isnan(samples)] = 0.5
    index = np.array([[rng.randrange(n) for _ in range(n)] for _ in range(rng.randrange(2, 8))])
    smallest = np.argsort(samples[0], kind="stable")[: max(n // 32, 1)]
    index[0] = [smallest[rng.randrange(len(smallest))] for _ in range(n)]
    _assert_medians_are_numpys(implementation, samples, index)


@pytest.mark.parametrize("implementation", BUILT)
@pytest.mark.parametrize("seed", range(24))
def test_bootstrap_medians_from_a_floor_equal_numpys(implementation: str, seed: int) -> None:
    """Over 128 steps the C loop starts each row at its floor, from each replicate's draws
    below it and up to it (products of matrices, or added in C where few). The medians stay
    numpy's, to the bit: rows where most steps take the same time (the floor's level holds a
    middle rank), with few or many steps below it, rows of every kind of float, and
    replicates whose draws below the floor pass the middle (they draw only the smallest
    values), so that their row starts from its smallest value again."""
    rng = random.Random(f"floor medians {seed}")
    n = rng.choice([128, 129, rng.randrange(128, 700)])
    level = rng.choice([0.0, 5.0, -0.0, float("inf")])
    rows = []
    for _ in range(rng.randrange(1, 6)):
        kind = rng.random()
        if kind < 0.3:  # a level more than half the steps, others above and below it
            rows.append([level if rng.random() < 0.6 else rng.uniform(-9, 9) for _ in range(n)])
        elif kind < 0.5:  # a level, and a few steps below it (the C loop adds their draws)
            below = [level - rng.uniform(1, 9) for _ in range(n)]
            rows.append([level if rng.random() < 0.96 else x for x in below])
        elif kind < 0.7:
            rows.append([float(rng.randrange(4)) for _ in range(n)])  # ties everywhere
        else:
            rows.append(_floats(rng, n).tolist())
    samples = np.array(rows)
    if seed % 3 == 0:
        samples[np.isnan(samples)] = 1.0
    index = np.array([[rng.randrange(n) for _ in range(n)] for _ in range(rng.randrange(2, 60))])
    smallest = np.argsort(samples[0], kind="stable")[: max(n // 32, 1)]
    index[0] = [smallest[rng.randrange(len(smallest))] for _ in range(n)]  # below any floor
    _assert_medians_are_numpys(implementation, samples, index)
