"""README documents every command and every JSON field the commands write (STYLE.md item 9)."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import CPU_FIXTURE, REPO
from tpuperf.cli import COMMANDS, main

README = (REPO / "README.md").read_text()


def _documented(name: str) -> bool:
    """Named in code style: `name` alone, or opening a `name {...}` / `name (...)` span."""
    return re.search(rf"`{re.escape(name)}[` ]", README) is not None


@pytest.mark.parametrize("command", [name for name, _ in COMMANDS])
def test_every_command_is_in_readme_and_has_an_example(capsys, command: str) -> None:
    assert f"tpuperf {command}" in README
    assert main([command, "--help"]) == 0
    assert "Example" in capsys.readouterr().out


def _json(capsys, *args: str) -> dict:  # type: ignore[type-arg]
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def _keys(objects: list[dict]) -> set[str]:  # type: ignore[type-arg]
    return {key for obj in objects for key in obj}


def test_info_fields_are_documented(capsys) -> None:
    info = _json(capsys, "info", str(CPU_FIXTURE), "--format", "json")
    fields = set(info) | _keys(info["hosts"]) | _keys(info["devices"]) | _keys(info["lines"])
    fields |= set(info["time_span"]) | _keys(info["steps"])
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"


def test_ops_fields_are_documented(capsys) -> None:
    document = _json(capsys, "ops", str(CPU_FIXTURE), "--format", "json", "--per-device")
    fields = set(document) | _keys(document["rows"])
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"


def test_analyze_fields_are_documented(capsys) -> None:
    report = _json(capsys, "analyze", str(CPU_FIXTURE), "--format", "json")
    fields = set(report) | set(report["summary"]) | set(report["summary"]["step_time_ms"])
    fields |= _keys(report["recommendations"]) | _keys(report["top_ops"])
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"


def _nested_keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _nested_keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _nested_keys(v)}
    return set()


def test_diff_fields_are_documented(capsys) -> None:
    document = _json(capsys, "diff", str(CPU_FIXTURE), str(CPU_FIXTURE), "--format", "json")
    fields = _nested_keys({k: v for k, v in document.items() if k != "tool"}) | set(document)
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"


@pytest.mark.parametrize("by", ["scope", "source", "pass"])
def test_ops_by_scope_fields_are_documented(capsys, by: str) -> None:
    document = _json(capsys, "ops", str(CPU_FIXTURE), "--format", "json", "--by", by)
    assert document["rows"], "the CPU fixture has scope data"
    missing = sorted(f for f in _keys(document["rows"]) if not _documented(f))
    assert not missing, f"README does not document {missing}"


def test_tree_fields_are_documented(capsys) -> None:
    document = _json(capsys, "tree", str(CPU_FIXTURE), "--format", "json")
    nodes, stack = [], [document["tree"]]
    while stack:
        nodes.append(stack.pop())
        stack.extend(nodes[-1]["children"])
    fields = set(document) | _keys(nodes) | _keys([n["passes"] for n in nodes])
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"


def test_scope_table_columns_are_documented() -> None:
    from tpuperf.schema import PASSES, SCOPES

    missing = sorted(c for c in (*SCOPES, *PASSES) if not _documented(c))
    assert not missing, f"README does not document {missing}"


def test_collective_fields_are_documented(capsys) -> None:
    from tpuperf.analyzers.collectives import COLLECTIVE_METRICS

    coll = str(REPO / "fixtures" / "data" / "coll_fsdp.xplane.pb")
    document = _json(capsys, "ops", coll, "--format", "json", "--by", "collective")
    assert document["rows"], "the FSDP capture has collectives"
    report = _json(capsys, "analyze", coll, "--format", "json", "--analyzer", "collectives")
    collectives = report["analyzers"]["collectives"]
    fields = _keys(document["rows"]) | set(collectives["tables"]["collectives"]["columns"])
    # The metrics of the per-collective table (the analyzer's older ones are in Definitions).
    added = {"last_arriver", *(t for t in COLLECTIVE_METRICS if t != "ms_per_step")}
    assert added <= set(collectives["metrics"])
    fields |= added | set(collectives["metrics"]["last_arriver"])
    fields |= {r["kind"] for r in report["recommendations"]}
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"


def test_memory_fields_are_documented(capsys) -> None:
    from tests.conftest import REPO as _REPO

    path = _REPO / "fixtures" / "data" / "memory_cnn.xplane.pb"
    document = _json(capsys, "memory", str(path), "--format", "json")
    programs = document["programs"]
    fields = set(document) | _keys(programs) | _keys([b for p in programs for b in p["buffers"]])
    fields |= _keys([s for p in programs for s in p["by_scope"]]) | _keys(document["allocators"])
    fields |= _keys([p["split_bytes"] for p in programs])
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"


def test_memory_allocator_fields_are_documented(capsys) -> None:
    from tests.conftest import SHARED_PROFILES

    path = SHARED_PROFILES / "tpu" / "v6e_4chip_inference.xplane.pb"
    if not path.exists():
        pytest.skip(f"{path} not available")
    document = _json(capsys, "memory", str(path), "--format", "json")
    missing = sorted(f for f in _keys(document["allocators"]) if not _documented(f))
    assert document["allocators"] and not missing, f"README does not document {missing}"


def test_host_fields_are_documented(capsys) -> None:
    host = REPO / "fixtures" / "data" / "host_markers.xplane.pb"
    document = _json(capsys, "host", str(host), "--format", "json")
    fields = set(document) | set(document["input"]) | _keys(document["events"])
    fields |= _keys(document["input"]["input_ops"]) | set(document["iteration_time_ms"])
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"
