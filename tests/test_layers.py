"""The pipeline's layering (shared/DESIGN.md), checked from the source: each stage imports only
the stages below it.

Imports are read from the AST, wherever they sit (a lazy import inside a function is still a
dependency); those under ``if TYPE_CHECKING:`` are left out, since they name types for the
checker and never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Installed package name -> its folder in the repository (pyproject's package-dir).
PACKAGES = {
    "tpuperf": REPO / "tpuperf",
    "tpuperf.analyzers": REPO / "analyzers",
    "tpuperf.roofline": REPO / "roofline",
}
# What a renderer may not import: the model stages. It formats a Report (or a DiffReport, ...)
# and computes nothing.
MODEL_STAGES = (
    "tpuperf.timeline",
    "tpuperf.scopes",
    "tpuperf.columns",
    "tpuperf.tables",
    "tpuperf.build",  # and build_tpu, build_gpu, build_cpu: the builders of the tables
    "tpuperf.hlo_collectives",
    "tpuperf.xspace",
    "tpuperf.analyzers",
)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, root in PACKAGES.items():
        for path in sorted(root.rglob("*.py")):
            parts = [p for p in path.relative_to(root).with_suffix("").parts if p != "__init__"]
            if package == "tpuperf" and parts and parts[0] in ("analyzers", "roofline"):
                continue
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _type_checking_blocks(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            ids.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return ids


def _imported(name: str, path: Path) -> Iterator[str]:
    """Every module name ``name`` imports at run time (``from a import b`` gives ``a``
    and ``a.b``)."""
    tree = ast.parse(path.read_text())
    typing_only = _type_checking_blocks(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value


def _project_module(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        deps = {_project_module(m) for m in _imported(name, path)}
        graph[name] = {d for d in deps if d is not None and d != name}
    return graph


GRAPH = _graph()


def _is_command(name: str) -> bool:
    """A module of one CLI command (``tpuperf.cli.ops``), not a shared helper (``_common``)."""
    return name.startswith("tpuperf.cli.") and not name.rpartition(".")[2].startswith("_")


def _violations() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for name, deps in GRAPH.items():
        for dep in deps:
            if name.startswith("tpuperf.render.") and dep.startswith(MODEL_STAGES):
                found.add((name, dep))
            if _is_command(name) and _is_command(dep):
                found.add((name, dep))
    return found


def test_renderers_and_commands_import_downward_only() -> None:
    assert _violations() == set()


def test_no_import_cycle() -> None:
    """Tarjan's strongly connected components of the import graph: none larger than one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert cycles == []


def test_typer_only_in_the_cli() -> None:
    users = {
        name
        for name, path in MODULES.items()
        if any(m.split(".")[0] == "typer" for m in _imported(name, path))
    }
    assert users and all(u.startswith("tpuperf.cli") for u in users), sorted(users)


def test_the_c_module_is_chosen_in_one_place() -> None:
    users = {
        name
        for name, path in MODULES.items()
        if any(m == "tpuperf._wire_native" for m in _imported(name, path))
    }
    assert users == {"tpuperf.kernels._c"}


def test_the_kernels_are_picked_in_one_place() -> None:
    """Only tpuperf.kernels chooses between the C kernels and their numpy twins: call sites
    import the package, never an implementation."""
    for implementation in ("tpuperf.kernels._c", "tpuperf.kernels._numpy"):
        users = {
            name
            for name, path in MODULES.items()
            if any(m == implementation for m in _imported(name, path))
        }
        assert users == {"tpuperf.kernels"}, (implementation, sorted(users))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from tpuperf.scopes import tree\n", {"tpuperf.scopes", "tpuperf.scopes.tree"}),
        ("from . import columns\n", {"tpuperf.render", "tpuperf.render.columns"}),
        ("from ..timeline import x\n", {"tpuperf.timeline", "tpuperf.timeline.x"}),
        ("if TYPE_CHECKING:\n    from tpuperf.timeline import T\n", set()),
        ("def f():\n    import tpuperf.tables\n", {"tpuperf.tables"}),
        ("importlib.import_module('tpuperf._wire_native')\n", {"tpuperf._wire_native"}),
    ],
)
def test_imports_are_read_as_python_resolves_them(
    tmp_path: Path, source: str, expected: set[str]
) -> None:
    path = tmp_path / "mod.py"
    path.write_text(source)
    assert set(_imported("tpuperf.render.mod", path)) == expected


# Modules that serve one command or one analyzer carry its name (`cli/memory.py` parses the
# command, `render/memory.py` draws it, `analyzers/memory.py` is the analyzer); they may share a
# name with each other, and with nothing else.
FAMILIES = ("tpuperf.cli.", "tpuperf.render.", "tpuperf.analyzers.")


def test_module_names_say_which_module() -> None:
    """A module's name alone tells which module it is: no two pipeline modules share a name,
    none takes a command's or an analyzer's name, and none shadows the standard library."""
    import sys
    from collections import defaultdict

    modules = {name: path for name, path in MODULES.items() if path.name != "__init__.py"}
    by_name: dict[str, list[str]] = defaultdict(list)
    for name in modules:
        by_name[name.rpartition(".")[2]].append(name)
    shared = {
        base: sorted(names)
        for base, names in by_name.items()
        if len(names) > 1 and not all(n.startswith(FAMILIES) for n in names)
    }
    assert shared == {}
    stdlib = sorted(n for n in modules if n.rpartition(".")[2] in sys.stdlib_module_names)
    assert stdlib == []
