"""tpuperf's ``dataclass`` (tpuperf/_dataclasses.py) against the standard library's: the same
class, defined by each, answers the same (construction, repr, ==, hash, frozen, fields,
replace, signature and doc) on the same values."""

from __future__ import annotations

import dataclasses
import inspect
import pathlib
import re
import typing
from dataclasses import FrozenInstanceError, dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import pytest

from tpuperf._dataclasses import dataclass as ours

OPTIONS = [{}, {"frozen": True}, {"eq": False}, {"frozen": True, "eq": False}]


def _define(decorator: Any, shape: str) -> type:
    """A class of ``shape``, defined with ``decorator`` (the same body for both)."""
    if shape == "fields":

        class Fields:
            a: int
            b: str = "x"
            c: list[int] = field(default_factory=list)
            d: float | None = None
            e: Fraction | None = None  # a name of this module's only
            limit: ClassVar[int] = 3

        return decorator(Fields)
    if shape == "hidden":

        class Hidden:
            a: int
            secret: str = field(default="s", repr=False)
            ignored: int = field(default=0, compare=False)
            unhashed: int = field(default=0, hash=False)
            hashed: int = field(default=0, compare=False, hash=True)

        return decorator(Hidden)
    if shape == "one":

        class One:
            a: int

        return decorator(One)
    if shape == "none":

        class Empty:
            pass

        return decorator(Empty)
    if shape == "own":

        class Own:
            a: int

            def __repr__(self) -> str:
                return f"own {self.a}"

            def __eq__(self, other: object) -> bool:
                return isinstance(other, Own) and other.a % 2 == self.a % 2

        return decorator(Own)
    if shape == "own_hash":

        class OwnHash:
            a: int

            def __hash__(self) -> int:
                return 7

        return decorator(OwnHash)
    if shape == "post_init":

        class PostInit:
            a: int
            seen: list[int] = field(default_factory=list)

            def __post_init__(self) -> None:
                self.seen.append(self.a)

        return decorator(PostInit)
    if shape == "child":

        class Base:
            a: int
            b: str = "x"

        class Child(decorator(Base)):  # type: ignore[misc]
            c: int = 0

        return decorator(Child)
    raise AssertionError(shape)


SHAPES = ["fields", "hidden", "one", "none", "own", "own_hash", "post_init", "child"]
VALUES: dict[str, list[dict[str, Any]]] = {
    "fields": [
        {"a": 1},
        {"a": 1, "b": "y", "c": [1, 2], "d": 0.5},
        {"a": 1, "c": [1, 2], "d": 0.5, "b": "y"},
        {"a": 2, "d": 0.5},
    ],
    "hidden": [
        {"a": 1},
        {"a": 1, "secret": "t", "ignored": 5},
        {"a": 1, "unhashed": 2},
        {"a": 1, "hashed": 9},
        {"a": 2},
    ],
    "one": [{"a": 1}, {"a": 1}, {"a": -1}],
    "none": [{}, {}],
    "own": [{"a": 1}, {"a": 3}, {"a": 2}],
    "own_hash": [{"a": 1}, {"a": 2}],
    "post_init": [{"a": 1}, {"a": 2}],
    "child": [{"a": 1}, {"a": 1, "b": "y", "c": 2}, {"c": 3, "a": 2}],
}


def _hash(obj: Any) -> Any:
    """The object's hash: its value, "identity" (object's own), or the error raised."""
    try:
        value = hash(obj)
    except TypeError as exc:
        return str(exc)
    return "identity" if value == object.__hash__(obj) else value


# Calls that no class of the shapes takes (too many arguments, an unknown name, one given twice,
# one missing; none, which only the class without fields takes): each raises TypeError from
# either dataclass.
_BAD_CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    ((1, 2, 3, 4, 5, 6, 7), {}),
    ((), {"zz": 1}),
    ((1,), {"a": 1}),
    ((), {"b": "y"}),
]


def _error(cls: type, *args: Any, **kwargs: Any) -> str | None:
    """The type of the error ``cls(*args, **kwargs)`` raises (None where it makes one)."""
    try:
        cls(*args, **kwargs)
    except Exception as exc:
        return type(exc).__name__
    return None


def _answers(cls: type, values: list[dict[str, Any]]) -> dict[str, Any]:
    objects = [cls(**v) for v in values]
    out: dict[str, Any] = {
        "repr": [repr(o).replace(cls.__qualname__, "C") for o in objects],
        "eq": [[x == y for y in objects] for x in objects],
        "ne": [[x != y for y in objects] for x in objects],
        "eq_other": [o == object() for o in objects],
        "hashable": cls.__hash__ is not None,
        "fields": [(f.name, f.repr, f.compare, f.hash) for f in dataclasses.fields(cls)],
        "match_args": getattr(cls, "__match_args__", None),
        "frozen": cls.__dataclass_params__.frozen,  # type: ignore[attr-defined]
        "params": repr(cls.__dataclass_params__).replace(  # type: ignore[attr-defined]
            f"order=False,unsafe_hash=False,frozen={cls.__dataclass_params__.frozen}",
            "",  # type: ignore[attr-defined]
        ),
        "signature": str(inspect.signature(cls)),
        "hints": typing.get_type_hints(cls.__init__),
        "doc": cls.__doc__.replace(cls.__name__, "C") if cls.__doc__ else None,
        "positional": [
            repr(cls(*v.values())) == repr(o) for v, o in zip(values, objects, strict=True)
        ],
        "errors": [_error(cls, *a, **k) for a, k in _BAD_CALLS],
    }
    if out["hashable"]:
        out["hash"] = [_hash(o) for o in objects]
    first = objects[0]
    try:
        first.a = 5  # type: ignore[attr-defined]
        out["set"] = "set"
    except FrozenInstanceError:
        out["set"] = "frozen"
    for name, attribute in (("set_other", "other"), ("delete", "a")):
        try:
            if name == "delete":
                delattr(first, attribute)
            else:
                setattr(first, attribute, 1)
            out[name] = "done"
        except (FrozenInstanceError, AttributeError) as exc:
            out[name] = type(exc).__name__
    first = cls(**values[0])
    if dataclasses.fields(cls):
        changed = dataclasses.replace(first, a=8)
        out["replace"] = repr(changed).replace(cls.__qualname__, "C")
    return out


@pytest.mark.parametrize(
    "options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain"
)
@pytest.mark.parametrize("shape", SHAPES)
def test_a_class_answers_as_the_standard_dataclass_makes_it(
    shape: str, options: dict[str, bool]
) -> None:
    mine = _define(ours(**options), shape)
    theirs = _define(dataclass(**options), shape)  # type: ignore[call-overload]
    assert dataclasses.is_dataclass(mine)
    assert _answers(mine, VALUES[shape]) == _answers(theirs, VALUES[shape])


def test_a_recursive_value_shows_its_recursion_as_the_standard_dataclass_does() -> None:
    def define(decorator: Any) -> Any:
        class Node:
            children: list[Any]

        return decorator(Node)

    shown = []
    for decorator in (ours, dataclass):
        node = define(decorator)([])
        node.children.append(node)
        shown.append(repr(node))
    assert shown[0] == shown[1]
    assert shown[0].endswith(".Node(children=[...])")


def test_a_bare_dataclass_is_mutable_compared_and_unhashable() -> None:
    @ours
    class Point:
        x: int
        y: int = 0

    p = Point(1)
    p.y = 2
    assert repr(p).endswith(".Point(x=1, y=2)")
    assert p == Point(1, 2) and p != Point(1, 3)
    assert Point.__hash__ is None
    with pytest.raises(TypeError, match="unhashable"):
        hash(p)


def test_tpuperf_makes_its_dataclasses_with_its_own() -> None:
    """One way to define a dataclass in the package: the standard ``dataclass`` there would
    pay the cost tpuperf/_dataclasses.py saves (tests and benchmarks, which no command
    imports, use the standard one)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    standard = re.compile(
        r"^\s*(@dataclasses\.dataclass\b|from dataclasses import .*\bdataclass\b)"
    )
    found = []
    for folder in ("tpuperf", "analyzers", "roofline"):
        for path in sorted((root / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if standard.match(line) and path.name != "_dataclasses.py":
                    found.append(f"{path.relative_to(root)}:{number}")
    assert found == []


@pytest.mark.parametrize("base_frozen", [False, True])
@pytest.mark.parametrize("child_frozen", [False, True])
@pytest.mark.parametrize("child_decorator", ["ours", "standard"])
def test_a_subclass_of_one_of_its_dataclasses_is_checked_as_the_standard_library_checks_it(
    base_frozen: bool, child_frozen: bool, child_decorator: str
) -> None:
    """Frozen and not frozen do not mix along a class's dataclass bases: either decorator on
    the subclass of one of tpuperf's dataclasses raises where the standard library raises for
    its own base, and makes the same class where it does not."""

    def define(base_decorator: Any) -> Any:
        class Base:
            a: int

        class Child(base_decorator(frozen=base_frozen)(Base)):  # type: ignore[misc]
            b: int = 0

        decorate = ours if child_decorator == "ours" else dataclass
        try:
            made = decorate(frozen=child_frozen)(Child)  # type: ignore[call-overload]
        except TypeError as exc:
            return str(exc)
        child = made(1, 2)
        try:
            child.b = 3
        except FrozenInstanceError:
            return (repr(child).split(".")[-1], "frozen")
        return (repr(child).split(".")[-1], child.b)

    assert define(ours) == define(dataclass)


def test_a_field_without_a_default_after_one_with_a_default_is_refused_as_by_the_standard_one():
    def define(decorator: Any) -> str:
        class Late:
            a: int = 0
            b: int

        try:
            decorator(Late)
        except TypeError as exc:
            return str(exc)
        return "made"

    assert define(ours) == define(dataclass) == "non-default argument 'b' follows default argument"
