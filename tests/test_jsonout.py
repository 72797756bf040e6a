"""tpuperf.jsonout.dumps writes the text of json.dumps(value, indent=N, allow_nan=False), to
the character, or raises its error: on every golden JSON document, on the report of a real
profile, and on random nested values (unicode, control characters, huge integers, -0.0,
1e16, empty containers, NaN)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import CPU_FIXTURE, shared_profile
from tpuperf import jsonout

GOLDEN = Path(__file__).resolve().parent / "golden"


def _outcome(write: Any, value: Any, indent: Any = 2) -> tuple[str, ...]:
    try:
        return ("text", write(value, indent))
    except (TypeError, ValueError, RecursionError) as exc:
        return ("error", type(exc).__name__, str(exc))


def _json_dumps(value: Any, indent: Any) -> str:
    return json.dumps(value, indent=indent, allow_nan=False)


def _same(value: Any, indent: Any = 2) -> None:
    assert _outcome(jsonout.dumps, value, indent) == _outcome(_json_dumps, value, indent)


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.json")), ids=lambda p: p.name)
def test_every_golden_document_is_written_as_json_writes_it(path: Path) -> None:
    document = json.loads(path.read_text())
    for indent in (2, 4):
        assert jsonout.dumps(document, indent) == json.dumps(document, indent=indent)
    # the goldens are json.dumps(document, indent=1) + a newline (tests/test_golden.py)
    assert jsonout.dumps(document, 1) + "\n" == path.read_text()


@pytest.mark.parametrize(
    "profile", [CPU_FIXTURE, "tpu/v6e_4chip_inference.xplane.pb", "gpu/mi300_jax_gemm.xplane.pb"]
)
def test_a_reports_json_is_json_dumps_text(profile: Any) -> None:
    from tpuperf.analysis import analyze

    path = profile if isinstance(profile, Path) else shared_profile(profile)
    report = analyze(str(path))
    for indent in (2, 4, 0, None):
        assert report.to_json(indent) == json.dumps(
            report.to_dict(), indent=indent, allow_nan=False
        )


# Scalars of every kind json writes differently: escapes, non-ASCII, surrogates, huge and
# negative integers, -0.0, floats whose repr switches to an exponent, NaN and infinities.
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([-0.0, 0.0, 1e16, 1e-7, 123456789012345678.0, 5e-324, 1.7976931348623157e308]),
    st.text(),
    st.text(alphabet=st.characters(max_codepoint=0x1F) | st.sampled_from('"\\/\u2028\ud800é中😀')),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=5), inner, max_size=5),
    ),
    max_leaves=40,
)
# The machine the tests run on is shared: generating nested values may be slow there.
RANDOM = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@RANDOM
@given(VALUES, st.sampled_from([2, 0, 1, 4]))
def test_random_values_are_written_as_json_writes_them(value: Any, indent: int) -> None:
    _same(value, indent)


@RANDOM
@given(VALUES, st.sampled_from([math.nan, math.inf, -math.inf, object(), {1: 2}, b"x"]))
def test_what_json_refuses_or_converts_is_what_json_does(value: Any, odd: Any) -> None:
    """A value that is not plain JSON anywhere in a document: the same error (NaN, an object)
    or the same text (json writes an int key as a string)."""
    _same([value, {"odd": odd}])
    _same({"a": [value, [odd]]})


@pytest.mark.parametrize(
    "value",
    [
        {},
        [],
        [[]],
        {"a": {}, "b": [], "c": [{}]},
        (1, (2, 3)),
        "\x00\x1f\u2028é",
        2**4000,
        [True, False, None, 1, 1.0, -0.0, 1e16],
        {"rows": [{"op": "fusion.1", "flops": 1e16}, {"op": "é", "flops": None}]},
    ],
)
def test_edge_values(value: Any) -> None:
    _same(value)


def test_a_cycle_and_deep_nesting_raise_as_json_does() -> None:
    cycle: list[Any] = [1]
    cycle.append(cycle)
    assert _outcome(jsonout.dumps, cycle) == (
        "error",
        "ValueError",
        "Circular reference detected",
    )
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    assert _outcome(jsonout.dumps, deep)[:2] == _outcome(_json_dumps, deep, 2)[:2]


@RANDOM
@given(VALUES)
def test_clean_of_plain_values_is_the_value_with_null_for_nan(value: Any) -> None:
    """clean's fast path for a row (a dict of scalars) gives what its walk gives."""
    row = {"a": value, "nan": math.nan, "inf": -math.inf, "x": 1.5} if value is not None else {}
    cleaned = jsonout.clean(row)
    assert cleaned == {k: jsonout.clean(v) for k, v in row.items()}
    assert cleaned is not row


def test_plain_documents_are_written_without_json_dumps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path writes a plain document itself (json.dumps is only its fallback)."""
    document = json.loads((GOLDEN / "cpu_train_steps.analyze.json").read_text())
    want = json.dumps(document, indent=2)

    def refuse(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("json.dumps was called")

    monkeypatch.setattr(json, "dumps", refuse)
    assert jsonout.dumps(document) == want
