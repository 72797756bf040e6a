"""A command's parameters as declared, and the command line read against them without typer.

A command module declares each parameter once, as a default in the signature of its
``command``: ``Option(default, *names, help=...)`` or ``Argument(default, help=...)``, which
take the arguments of ``typer.Option`` and ``typer.Argument`` and keep them (this module
imports neither typer nor click). The typer application registers the command with them
made typer's own (:func:`for_typer`): typer draws its help, completes and parses with them.

A command line of the plain forms (``--name value``, ``--name=value``, ``-n value``, a flag,
positional arguments; values of type str, int, float, bool, a list of str or a format) is
read here directly (:func:`parse`), to the values typer would have called the command with:
importing typer and click takes longer than the rest of a small ``tpuperf info``. Anything
else (help, an unknown or malformed option, a missing argument, a value typer would convert
or refuse) is left to typer, which answers it as it always has.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import field
from typing import Any

from tpuperf._dataclasses import dataclass
from tpuperf.output import Format


@dataclass(frozen=True, eq=False)
class Param:
    """An ``Option`` or ``Argument`` as declared: typer's arguments, kept until the command is
    registered; ``formats``: the formats a ``--format`` option offers (its values)."""

    argument: bool
    default: Any
    names: tuple[str, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    formats: tuple[Format, ...] = ()

    def typer(self) -> Any:
        """The same parameter as ``typer.Option`` or ``typer.Argument``."""
        import typer

        make = typer.Argument if self.argument else typer.Option
        return make(self.default, *self.names, **self.settings)


def Option(default: Any, *names: str, **settings: Any) -> Any:
    """An option: ``typer.Option``'s arguments, kept (:class:`Param`)."""
    return Param(False, default, names, settings)


def Argument(default: Any, **settings: Any) -> Any:
    """A positional argument: ``typer.Argument``'s arguments, kept (:class:`Param`)."""
    return Param(True, default, (), settings)


def for_typer(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` as typer registers it: each declared parameter made typer's own, and a
    ``--format`` option annotated with an enum of the formats it offers (so that typer checks,
    lists and completes only those)."""
    from enum import Enum

    signature = inspect.signature(function)
    annotations = dict(function.__annotations__)
    parameters = []
    for name, parameter in signature.parameters.items():
        declared = parameter.default
        if isinstance(declared, Param):
            if declared.formats:
                subset = Enum(  # type: ignore[misc]
                    f"{function.__module__.rsplit('.', 1)[-1].capitalize()}Format",
                    {f.name: f.value for f in declared.formats},
                    type=str,
                )
                annotations[name] = subset | None
            parameter = parameter.replace(default=declared.typer())
        parameters.append(parameter)

    @functools.wraps(function)
    def registered(**values: Any) -> Any:
        return function(**values)

    registered.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    registered.__annotations__ = annotations
    return registered


# Annotations the direct reading knows (as written in the source, or as objects).
_TYPES = {"str": str, "int": int, "float": float, "bool": bool, "list[str]": list}
_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def annotation_text(annotation: Any) -> str:
    """A parameter's annotation as written, without ``| None`` (``str``, ``list[str]``), from
    the source's text or the annotation object."""
    if isinstance(annotation, str):
        text = annotation
    elif isinstance(annotation, type):
        text = annotation.__name__
    else:  # str | None, list[str]
        text = str(annotation)
    return text.removesuffix(" | None")


def _value_type(annotation: Any) -> type | None:
    return _TYPES.get(annotation_text(annotation))


def parse(function: Callable[..., Any], args: list[str]) -> dict[str, Any] | None:
    """The keyword arguments typer would call ``function`` with for the command line
    ``args`` (what follows the command's name); None where typer must read it (see the
    module's docstring): every case read here is one typer reads the same way."""
    options: dict[str, tuple[str, Param, type]] = {}
    arguments: list[str] = []
    values: dict[str, Any] = {}
    for name, parameter in inspect.signature(function).parameters.items():
        declared = parameter.default
        if not isinstance(declared, Param) or set(declared.settings) - {
            "help",
            "metavar",
            "show_default",
        }:
            return None  # declared otherwise (a callback, a prompt, ...): typer's to read
        kind = _value_type(parameter.annotation) if not declared.formats else Format
        if kind is None:
            return None
        if (kind is bool and declared.default is not False) or (
            kind is list and declared.default is not None
        ):
            return None  # a flag on by default, a list with values by default
        if declared.argument:
            if kind is not str or declared.default is not ...:
                return None
            arguments.append(name)
            continue
        if any("/" in n or not n.startswith("-") for n in declared.names):
            return None
        for option_name in declared.names:
            options[option_name] = (name, declared, kind)
        values[name] = declared.default
    positional: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("-") or word == "-":
            positional.append(word)
            continue
        option_name, equals, attached = word.partition("=")
        if not word.startswith("--") and equals:  # -f=json: the value would be "=json"
            return None
        found = options.get(option_name)
        if found is None:
            return None  # --help, --, -n5, an unknown option: typer says what it is
        name, declared, kind = found
        if kind is bool:
            if equals:
                return None
            values[name] = True
            continue
        if not equals:
            if i == len(args):
                return None
            attached = args[i]
            i += 1
        if attached.startswith("-"):
            return None  # typer would take it as the value; let it say so
        converted = _converted(attached, kind, declared)
        if converted is None:
            return None
        if kind is list:  # repeated: each value (none given: the default, None)
            values[name] = [*(values[name] or ()), converted]
        else:
            values[name] = converted
    if len(positional) != len(arguments):
        return None
    values |= dict(zip(arguments, positional, strict=True))
    return values


def _converted(text: str, kind: type, declared: Param) -> Any:
    """``text`` as a value of ``kind``, as click converts it; None where this module does not
    convert it the same way (typer does, or refuses it)."""
    if kind is Format:
        offered = {f.value: f for f in declared.formats}
        return offered.get(text)
    if kind is int:
        return int(text) if _INT.fullmatch(text) else None
    if kind is float:
        return float(text) if _FLOAT.fullmatch(text) else None
    return text
