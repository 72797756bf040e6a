"""tpuperf.cli._params: a command line read directly gives the command the values typer gives
it, for every command and every form of each option; what it does not read, typer does."""

from __future__ import annotations

import inspect
import itertools
from typing import Any

import pytest

from tpuperf.cli._params import Param, annotation_text, parse
from tpuperf.cli._root import COMMANDS

# A value of each type the direct reading knows.
_SAMPLES = {"str": "abc", "int": "7", "float": "2.5", "list[str]": "x"}
_OTHER = {"str": "def", "int": "08", "float": "1e3"}


def _module(name: str) -> Any:
    import importlib

    return importlib.import_module(dict(COMMANDS)[name])


def _typer_values(command: Any, args: list[str]) -> dict[str, Any]:
    """The values typer calls ``command`` with for ``args``: ``command``'s declaration
    registered, as the CLI registers it, on a function that keeps what it is given."""
    import typer

    from tpuperf.cli._params import for_typer

    given: dict[str, Any] = {}

    def keep(**values: Any) -> None:
        given.update(values)

    keep.__signature__ = inspect.signature(command)  # type: ignore[attr-defined]
    keep.__annotations__ = dict(command.__annotations__)
    keep.__wrapped__ = command  # type: ignore[attr-defined]  # its globals name the types
    keep.__module__ = command.__module__
    app = typer.Typer(add_completion=False)
    app.command()(for_typer(keep))
    app(args, standalone_mode=False, prog_name="tpuperf")
    return given


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """Enum members (typer's enum of a command's formats) as their values."""
    return {k: getattr(v, "value", v) for k, v in values.items()}


def _declared(command: Any) -> list[tuple[str, Param, str]]:
    """Each parameter: name, declaration, annotation as text."""
    return [
        (name, parameter.default, annotation_text(parameter.annotation))
        for name, parameter in inspect.signature(command).parameters.items()
    ]


def _command_lines(command: Any) -> list[list[str]]:
    """Command lines using every option of ``command`` in each of its forms: alone, all
    together, before and after the arguments, given twice."""
    declared = _declared(command)
    arguments = [f"P{i}" for i, (_, p, _) in enumerate(declared) if p.argument]
    words: list[list[str]] = []
    for _, param, annotation in declared:
        if param.argument:
            continue
        for option in param.names:
            if param.formats:
                words += [[option, f.value] for f in param.formats]
                if option.startswith("--"):
                    words.append([f"{option}={param.formats[-1].value}"])
            elif annotation == "bool":
                words.append([option])
            elif annotation in _SAMPLES:
                words.append([option, _SAMPLES[annotation]])
                if option.startswith("--"):
                    words.append([f"{option}={_SAMPLES[annotation]}"])
                if annotation == "list[str]":
                    words.append([option, "x", option, "y"])
                else:  # given twice: the last one counts
                    words.append([option, _SAMPLES[annotation], option, _OTHER[annotation]])
    lines = [arguments]
    for chosen in words:
        lines += [[*arguments, *chosen], [*chosen, *arguments]]
    lines.append([*arguments, *itertools.chain.from_iterable(words)])
    return lines


@pytest.mark.parametrize("name", [name for name, _ in COMMANDS])
def test_values_read_directly_are_the_values_typer_gives(name: str) -> None:
    command = _module(name).command
    lines = _command_lines(command)
    read = 0
    for args in lines:
        values = parse(command, args)
        if values is not None:
            read += 1
            assert _plain(values) == _plain(_typer_values(command, args)), args
    if name in {"info", "ops", "analyze", "tree", "report", "host", "memory", "diff"}:
        assert read == len(lines), f"{name}: {len(lines) - read} command lines left to typer"


@pytest.mark.parametrize(
    "args",
    [
        ["P", "--help"],
        ["-h", "P"],
        ["P", "--bogus"],
        ["P", "-n5"],  # click takes a short option's value glued on; left to it
        ["P", "--top=x"],
        ["P", "--top", "1.5"],
        ["P", "--top"],
        [],
        ["P", "Q"],
        ["--", "P"],
        ["P", "--by", "-x"],
        ["P", "--per-device=1"],
        ["P", "--format", "JSON"],
        ["P", "--format", "md"],  # not a format of ops
        ["P", "-f=json"],
    ],
)
def test_what_is_not_read_directly_is_left_to_typer(args: list[str]) -> None:
    assert parse(_module("ops").command, args) is None


def test_a_command_runs_without_typer(tmp_path: Any) -> None:
    """The direct reading ran the command: its output, and no typer in sys.modules."""
    import json

    from tests.conftest import CPU_FIXTURE, command_imports

    code, out, modules = command_imports("ops", str(CPU_FIXTURE), "-n", "2", "--format=json")
    assert code == 0 and "typer" not in modules and "click" not in modules
    assert len(json.loads(out)["rows"]) == 2
