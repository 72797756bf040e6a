"""tpuperf's ``dataclass``: the standard library's, at half the cost of defining a class.

CPython (before 3.13) writes each method a dataclass generates as source text and compiles it:
0.2 ms a method here, 0.8 ms a class, 1.4 ms a frozen one (six methods). tpuperf holds its data
in dataclasses, and a command imports 50-60 of them: 35 ms of a 0.2-0.3 s command.

This ``dataclass`` lets the standard one generate ``__init__`` (and a frozen class's
``__setattr__`` and ``__delattr__``), and gives every class the same ``__repr__``, ``__eq__``
and ``__hash__``: functions written once, which read a class's fields through one
``operator.attrgetter`` made for it. They answer what the generated ones would, as fast
(tests/test_dataclasses.py compares the two on every kind of class tpuperf defines). The class
is a dataclass in every other way (``fields``, ``replace``, ``asdict`` and ``is_dataclass``
read it as before), and type checkers see ``dataclasses.dataclass`` itself. tpuperf's modules
import ``dataclass`` from here.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The values of ``names`` of an object, as one tuple (as dataclass's methods make it)."""
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    if not names:
        return lambda obj: ()
    return attrgetter(*names)


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={value!r}" for name, value in self._dataclass_repr(self))
    return f"{self.__class__.__qualname__}({shown})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        values = self.__class__._dataclass_compare
        return values(self) == values(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(self.__class__._dataclass_hash(self))


def _named(names: tuple[str, ...]) -> Callable[[Any], list[tuple[str, Any]]]:
    values = _getter(names)
    return lambda obj: list(zip(names, values(obj), strict=True))


def _dataclass(cls: Any, frozen: bool, eq: bool) -> Any:
    # What dataclass's hash rule reads, before dataclass() touches the class: a __hash__ the
    # class body wrote (Python writes None for a body that defines __eq__ alone).
    body_hash = cls.__dict__.get("__hash__", dataclasses.MISSING)
    explicit_hash = not (
        body_hash is dataclasses.MISSING or (body_hash is None and "__eq__" in cls.__dict__)
    )
    own = set(cls.__dict__)
    cls = dataclasses.dataclass(cls, frozen=frozen, eq=False, repr=False)
    fields = dataclasses.fields(cls)
    if "__repr__" not in own:
        cls._dataclass_repr = staticmethod(_named(tuple(f.name for f in fields if f.repr)))
        cls.__repr__ = _repr
    if not eq:
        return cls
    if "__eq__" not in own:
        cls._dataclass_compare = staticmethod(_getter(tuple(f.name for f in fields if f.compare)))
        cls.__eq__ = _eq
    if explicit_hash:
        return cls
    if frozen:
        hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
        cls._dataclass_hash = staticmethod(_getter(hashed))
        cls.__hash__ = _hash
    else:
        cls.__hash__ = None  # mutable and compared: unhashable, as dataclass makes it
    return cls


if TYPE_CHECKING:
    from dataclasses import dataclass
else:

    def dataclass(cls=None, /, *, frozen=False, eq=True):
        """``@dataclass``, ``@dataclass(frozen=True)``, ``@dataclass(eq=False)``, as the
        standard library's."""
        if cls is None:
            return lambda c: _dataclass(c, frozen, eq)
        return _dataclass(cls, frozen, eq)


__all__ = ["dataclass"]
