"""tpuperf's ``dataclass``: the standard library's, without compiling a method at import.

CPython (before 3.13) writes each method a dataclass generates as source text and compiles it:
0.2-0.3 ms a method here, 0.8 ms a class, 1.4 ms a frozen one (six methods). tpuperf holds its
data in dataclasses, and a command imports 50-60 of them: 35 ms of a 0.2-0.3 s command.

This ``dataclass`` lets the standard one read the fields (``fields``, ``replace``, ``asdict``,
``is_dataclass`` and ``__match_args__`` work as before) and generate nothing; every class then
gets functions made without compiling: one ``__init__`` for its fields (their defaults and
factories, ``__post_init__``; its signature and globals as the generated one's), a frozen class's
``__setattr__`` and ``__delattr__``, and the same ``__repr__``, ``__eq__`` and ``__hash__``,
written once, which read a class's fields through one ``operator.attrgetter`` made for it.
They answer what the generated ones would (tests/test_dataclasses.py compares the two on every
kind of class tpuperf defines). A class that inherits from another dataclass gets its frozen
methods from the standard library, which checks the two agree. Type checkers see
``dataclasses.dataclass`` itself. tpuperf's modules import ``dataclass`` from here.
"""

from __future__ import annotations

import dataclasses
import inspect
import reprlib
import sys
import types
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError
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


class _Factory:
    """The default of a field a factory makes, as a signature shows it (``= <factory>``)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _init(cls: Any, fields: tuple[dataclasses.Field[Any], ...], frozen: bool) -> Any:
    """The ``__init__`` dataclass would generate for ``fields``: each given (by position or
    name) or else its default or a new value of its factory, set in field order (a frozen
    class's through ``object.__setattr__``), then ``__post_init__()`` where the class has one."""
    names = tuple(f.name for f in fields)
    # (name, default, factory) of each field, those without either first (_check)
    fill = tuple((f.name, f.default, f.default_factory) for f in fields)
    fill_of = {name: i for i, name in enumerate(names)}
    n_required = sum(default is MISSING and factory is MISSING for _, default, factory in fill)
    assign = object.__setattr__ if frozen else setattr
    post_init = hasattr(cls, "__post_init__")
    n = len(names)
    call = f"{cls.__qualname__}.__init__()"
    unset = MISSING  # (a name of its own: the function runs in the class's module, below)

    # What the fields after the first k take, for each k: (name, default) pairs, or None where
    # a factory makes one.
    defaults_after = [
        None if any(f is not MISSING for _, _, f in fill[k:]) else [(m, d) for m, d, _ in fill[k:]]
        for k in range(n + 1)
    ]

    required = frozenset(names[:n_required])

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs and not args and kwargs.keys() <= fill_of.keys() and required <= kwargs.keys():
            # every field named or left to its default: most calls by name
            for name, default, factory in fill:
                if name in kwargs:
                    assign(self, name, kwargs[name])
                else:
                    assign(self, name, default if factory is unset else factory())
        else:
            if kwargs or not n_required <= len(args) <= n:
                args = _bound(args, kwargs)
            for i, value in enumerate(args):
                assign(self, names[i], value)
            rest = defaults_after[len(args)]
            if rest is None:
                for name, default, factory in fill[len(args) :]:
                    assign(self, name, default if factory is unset else factory())
            else:
                for name, default in rest:
                    assign(self, name, default)
        if post_init:
            self.__post_init__()

    def _bound(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The values of the fields up to the last one given, in field order (the rest take
        their defaults); TypeError as a call of the generated ``__init__`` raises it."""
        if len(args) > n:
            raise TypeError(
                f"{call} takes {n + 1} positional arguments but {len(args) + 1} were given"
            )
        values = dict(zip(names, args, strict=False))
        for name, value in kwargs.items():
            if name not in fill_of:
                raise TypeError(f"{call} got an unexpected keyword argument {name!r}")
            if name in values:
                raise TypeError(f"{call} got multiple values for argument {name!r}")
            values[name] = value
        missing = [name for name in names[:n_required] if name not in values]
        if missing:
            listed = ", ".join(map(repr, missing))
            raise TypeError(f"{call} missing {len(missing)} required argument(s): {listed}")
        last = max(map(fill_of.__getitem__, values), default=-1)
        return tuple(
            values[name] if name in values else default if factory is unset else factory()
            for name, default, factory in fill[: last + 1]
        )

    module = sys.modules.get(cls.__module__)
    if module is not None:  # the generated one's globals: its annotations' names resolve there
        __init__ = types.FunctionType(
            __init__.__code__, vars(module), "__init__", None, __init__.__closure__
        )
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    empty = inspect.Parameter.empty
    shown_defaults = [
        default if default is not MISSING else _FACTORY if factory is not MISSING else empty
        for _, default, factory in fill
    ]
    __init__.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            *(
                inspect.Parameter(
                    f.name,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=shown,
                    annotation=f.type,
                )
                for f, shown in zip(fields, shown_defaults, strict=True)
            ),
        ],
        return_annotation=None,
        __validate_parameters__=False,
    )
    return __init__


def _frozen(cls: Any, names: frozenset[str]) -> tuple[Any, Any]:
    """The ``__setattr__`` and ``__delattr__`` of a frozen dataclass: a field (or, on the class
    itself, any attribute) cannot be set or deleted; a subclass's own attributes can."""

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    for method in (__setattr__, __delattr__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
    return __setattr__, __delattr__


def _dataclass(cls: Any, frozen: bool, eq: bool) -> Any:
    # What dataclass's hash rule reads, before dataclass() touches the class: a __hash__ the
    # class body wrote (Python writes None for a body that defines __eq__ alone).
    body_hash = cls.__dict__.get("__hash__", dataclasses.MISSING)
    explicit_hash = not (
        body_hash is dataclasses.MISSING or (body_hash is None and "__eq__" in cls.__dict__)
    )
    own = set(cls.__dict__)
    documented = bool(cls.__dict__.get("__doc__"))
    # A class with dataclass bases: the standard library checks that they and it are all
    # frozen or none, and makes its frozen methods.
    inherits = any(hasattr(base, "__dataclass_fields__") for base in cls.__mro__[1:])
    theirs_frozen = frozen and inherits
    if not documented:  # (written below; dataclass would read the signature of no __init__)
        cls.__doc__ = cls.__name__
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=theirs_frozen)
    fields = dataclasses.fields(cls)
    _check(cls, fields)
    params = cls.__dataclass_params__
    params.init, params.repr, params.eq, params.frozen = True, True, eq, frozen
    if "__init__" not in own:
        cls.__init__ = _init(cls, fields, frozen)
    if not documented:
        cls.__doc__ = _doc(cls, own)
    if frozen and not theirs_frozen:
        for name in ("__setattr__", "__delattr__"):
            if name in own:
                raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
        cls.__setattr__, cls.__delattr__ = _frozen(cls, frozenset(f.name for f in fields))
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


def _doc(cls: Any, own: set[str]) -> str:
    """The doc of a class without one, as dataclass writes it: the class's signature."""
    if "__init__" not in own:  # this module's: its signature at hand, less ``self``
        shown = list(cls.__init__.__signature__.parameters.values())[1:]
        return f"{cls.__name__}({', '.join(map(str, shown))})"
    try:
        return cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
    except (TypeError, ValueError):
        return str(cls.__name__)


def _check(cls: Any, fields: tuple[dataclasses.Field[Any], ...]) -> None:
    """What dataclass checks as it generates ``__init__``, and what this one does not make:
    fields out of ``__init__`` or keyword-only, and init-only variables."""
    for f in cls.__dataclass_fields__.values():
        if f not in fields and "InitVar" in str(f.type):
            raise TypeError(f"{cls.__name__}.{f.name}: tpuperf's dataclass has no InitVar")
    seen_default = False
    for f in fields:
        if not f.init or getattr(f, "kw_only", False):
            raise TypeError(f"{cls.__name__}.{f.name}: tpuperf's dataclass sets every field")
        if f.default is not MISSING or f.default_factory is not MISSING:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")


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
