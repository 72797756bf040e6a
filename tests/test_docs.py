"""README documents every command and every JSON field the commands write (STYLE.md item 9)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import CPU_FIXTURE, REPO, Cli
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


def _keys(objects: list[dict]) -> set[str]:  # type: ignore[type-arg]
    return {key for obj in objects for key in obj}


def test_info_fields_are_documented(cli: Cli) -> None:
    info = cli.json("info", str(CPU_FIXTURE), "--format", "json")
    fields = set(info) | _keys(info["hosts"]) | _keys(info["devices"]) | _keys(info["lines"])
    fields |= set(info["time_span"]) | _keys(info["steps"])
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"


def test_ops_fields_are_documented(cli: Cli) -> None:
    document = cli.json("ops", str(CPU_FIXTURE), "--format", "json", "--per-device")
    fields = set(document) | _keys(document["rows"])
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"


def test_analyze_fields_are_documented(cli: Cli) -> None:
    report = cli.json("analyze", str(CPU_FIXTURE), "--format", "json")
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


def test_diff_fields_are_documented(cli: Cli) -> None:
    document = cli.json("diff", str(CPU_FIXTURE), str(CPU_FIXTURE), "--format", "json")
    fields = _nested_keys({k: v for k, v in document.items() if k != "tool"}) | set(document)
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"


@pytest.mark.parametrize("by", ["scope", "source", "pass"])
def test_ops_by_scope_fields_are_documented(cli: Cli, by: str) -> None:
    document = cli.json("ops", str(CPU_FIXTURE), "--format", "json", "--by", by)
    assert document["rows"], "the CPU fixture has scope data"
    missing = sorted(f for f in _keys(document["rows"]) if not _documented(f))
    assert not missing, f"README does not document {missing}"


def test_tree_fields_are_documented(cli: Cli) -> None:
    document = cli.json("tree", str(CPU_FIXTURE), "--format", "json")
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


def test_collective_fields_are_documented(cli: Cli) -> None:
    from tpuperf.analyzers.collectives import COLLECTIVE_METRICS

    coll = str(REPO / "fixtures" / "data" / "coll_fsdp.xplane.pb")
    document = cli.json("ops", coll, "--format", "json", "--by", "collective")
    assert document["rows"], "the FSDP capture has collectives"
    report = cli.json("analyze", coll, "--format", "json", "--analyzer", "collectives")
    collectives = report["analyzers"]["collectives"]
    fields = _keys(document["rows"]) | set(collectives["tables"]["collectives"]["columns"])
    # The metrics of the per-collective table (the analyzer's older ones are in Definitions).
    added = {"last_arriver", *(t for t in COLLECTIVE_METRICS if t != "ms_per_step")}
    assert added <= set(collectives["metrics"])
    fields |= added | set(collectives["metrics"]["last_arriver"])
    fields |= {r["kind"] for r in report["recommendations"]}
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"


def test_memory_fields_are_documented(cli: Cli) -> None:
    from tests.conftest import REPO as _REPO

    path = _REPO / "fixtures" / "data" / "memory_cnn.xplane.pb"
    document = cli.json("memory", str(path), "--format", "json")
    programs = document["programs"]
    fields = set(document) | _keys(programs) | _keys([b for p in programs for b in p["buffers"]])
    fields |= _keys([s for p in programs for s in p["by_scope"]]) | _keys(document["allocators"])
    fields |= _keys([p["split_bytes"] for p in programs])
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"


def test_memory_allocator_fields_are_documented(cli: Cli) -> None:
    from tests.conftest import SHARED_PROFILES

    path = SHARED_PROFILES / "tpu" / "v6e_4chip_inference.xplane.pb"
    if not path.exists():
        pytest.skip(f"{path} not available")
    document = cli.json("memory", str(path), "--format", "json")
    missing = sorted(f for f in _keys(document["allocators"]) if not _documented(f))
    assert document["allocators"] and not missing, f"README does not document {missing}"


def test_host_fields_are_documented(cli: Cli) -> None:
    host = REPO / "fixtures" / "data" / "host_markers.xplane.pb"
    document = cli.json("host", str(host), "--format", "json")
    fields = set(document) | set(document["input"]) | _keys(document["events"])
    fields |= _keys(document["input"]["input_ops"]) | set(document["iteration_time_ms"])
    missing = sorted(f for f in fields if not _documented(f))
    assert not missing, f"README does not document {missing}"


# --------------------------------------------------------------------------- README vs CLI


def _cli() -> dict[str, Any]:
    import typer

    from tpuperf.cli import app

    return dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def _options(command: Any) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


def _format_choices(command: Any) -> tuple[str, ...]:
    for param in command.params:
        if "--format" in param.opts:
            return tuple(getattr(param.type, "choices", None) or ("perfetto",))
    return ()


def _examples() -> list[tuple[str, bool]]:
    """Every command line README shows as an example, and whether it is an inline span:
    indented code lines starting with ``tpuperf`` (continued lines joined) and inline
    ``tpuperf ...`` spans that are commands, not synopses (no ``[``, ``|`` or ``...``)."""
    lines, current = [], ""
    for line in README.splitlines():
        if current:
            current += " " + line.strip()
        elif line.startswith("    tpuperf "):
            current = line.strip()
        else:
            continue
        if current.endswith("\\"):
            current = current[:-1].rstrip()
            continue
        lines.append((current, False))
        current = ""
    spans = re.findall(r"`(tpuperf [a-z][^`]*)`", README)
    lines += [(s, True) for s in spans if not any(mark in s for mark in ("[", "|", "..."))]
    return lines


def test_readme_examples_parse_on_the_cli() -> None:
    """Each example's command exists and takes its options and values: click parses the line
    as `tpuperf` would, so an unknown option, a bad value or a missing argument fails. An
    inline span may leave out the profile (`tpuperf ops --by scope`)."""
    import shlex

    from typer._click.exceptions import MissingParameter

    commands = _cli()
    examples = _examples()
    assert len(examples) > 20
    for example, inline in examples:
        words = shlex.split(example, comments=True)[1:]
        command = commands.get(words[0])
        assert command is not None, f"README: {example}: no command {words[0]!r}"
        for profiles in range(3 if inline else 1):  # `tpuperf diff --format json`: two
            try:
                with command.make_context(f"tpuperf {words[0]}", ["P"] * profiles + words[1:]):
                    break
            except MissingParameter:
                continue
        else:
            raise AssertionError(f"README: {example}: an argument is missing")


def test_readme_synopses_name_only_options_the_commands_take() -> None:
    """`tpuperf diff BASE NEW [--format table|json|md] ...`: every option and format named."""
    commands = _cli()
    synopses = re.findall(r"^(tpuperf [a-z]+ .*)$", README, re.M)
    synopses += re.findall(r"`(tpuperf [a-z]+ [^`]*\[[^`]*)`", README)
    assert len(synopses) >= 5
    for synopsis in synopses:
        command = commands[synopsis.split()[1]]
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", synopsis):
            assert option in _options(command), f"README: {synopsis}: {option}"
        for choices in re.findall(r"--format ([a-z|]+)", synopsis):
            assert set(choices.split("|")) <= set(_format_choices(command)), synopsis


def test_readme_output_options_are_the_commands_own() -> None:
    """The Output paragraph: which command offers which format, and `--wide` (README said
    `report` takes `--format html`; it has no --format)."""
    commands = _cli()
    paragraph = README[README.index("- `--format` / `-f` chooses") :]
    paragraph = paragraph[: paragraph.index("\n- `-o FILE`")]
    claims = re.findall(r"((?:`\w+`(?:, | and )?)+) \(((?:`\w+`(?:, )?)+)\)", paragraph)
    offered = {}
    for formats, names in claims:
        for name in re.findall(r"`(\w+)`", names):
            offered.setdefault(name, set()).update(re.findall(r"`(\w+)`", formats))
    assert offered.keys() >= {"analyze", "diff", "ops", "scan"}, offered
    for name, formats in offered.items():
        assert formats <= set(_format_choices(commands[name])), (name, formats)
    wide = re.search(r"`--wide`\s+\(every command that draws a table: ([^)]*)\)", README)
    assert wide is not None
    for name in re.findall(r"`(\w+)`", wide.group(1)):
        assert "--wide" in _options(commands[name]), name


def test_the_layout_section_names_every_core_module_and_only_real_ones() -> None:
    """README's "How the code is laid out" matches the tree: every path it names exists, and
    every module of the package is named (directly or through its folder)."""
    section = README[README.index("## How the code is laid out") :]
    section = section[: section.index("\n## ")]
    named = set(re.findall(r"`((?:tpuperf|analyzers|roofline)/[\w./]*)`", section))
    assert all((REPO / path).exists() for path in named), sorted(
        p for p in named if not (REPO / p).exists()
    )
    folders = {p for p in named if p.endswith("/")}
    modules = {
        str(path.relative_to(REPO))
        for path in (REPO / "tpuperf").glob("*.py")
        if path.name not in ("__init__.py", "__main__.py")
    }
    # ... and every package inside it (tpuperf/kernels/, tpuperf/render/, ...).
    modules |= {
        str(path.parent.relative_to(REPO)) + "/"
        for path in (REPO / "tpuperf").glob("*/__init__.py")
    }
    missing = sorted(m for m in modules - named if not m.startswith(tuple(folders)))
    assert not missing, f"README's layout does not place {missing}"
