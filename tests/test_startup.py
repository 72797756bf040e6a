"""What each command imports: ``--version`` and ``--help`` nothing but tpuperf, a command only its
own module, and the help drawn without rich is the page typer draws.

Startup time is measured by benchmarks, never in a test; what is imported is what decides it,
and that is checked here, in a fresh interpreter per case.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

from tests.conftest import CPU_FIXTURE, REPO, command_imports, top_level


@pytest.mark.parametrize(
    ("args", "code"), [(["--version"], 0), (["--help"], 0), (["-h"], 0), ([], 2)]
)
def test_version_and_help_import_only_tpuperf(args: list[str], code: int) -> None:
    exit_code, out, modules = command_imports(*args)
    assert exit_code == code
    assert out.strip()
    # Not typer, click, rich, numpy, nor the standard library's typing or inspect.
    assert top_level(modules) == {"tpuperf"}, sorted(modules)


def test_a_command_imports_only_its_own_command_module() -> None:
    code, out, modules = command_imports("info", str(CPU_FIXTURE), "--format", "json")
    assert code == 0 and json.loads(out)["schema_version"] == 1
    commands = {m for m in modules if m.startswith("tpuperf.cli.")}
    assert {m.rpartition(".")[2] for m in commands if not m.rpartition(".")[2].startswith("_")} == {
        "info"
    }
    # The help's layout is drawn without rich (typer's rich help imports rich.markdown).
    code, out, modules = command_imports("info", "--help")
    assert code == 0 and "Usage: tpuperf info" in out
    assert "rich" not in top_level(modules)


@pytest.mark.parametrize("columns", ["80", "100", "60"])
def test_top_level_help_is_the_page_typer_draws(
    monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    """``tpuperf --help`` reads the commands' docstrings from their source: it is the page the
    typer application draws from the commands it builds."""
    import typer

    from tpuperf.cli import _root, app
    from tpuperf.cli._help import format_help

    monkeypatch.setenv("COLUMNS", columns)
    group = typer.main.get_command(app)
    ctx = group.make_context("tpuperf", ["info"], resilient_parsing=True)
    drawn = format_help(group, ctx)
    assert _root.page() == drawn
    rows = [line[2:] for line in drawn.splitlines() if line.startswith("│ ")]
    names = [row.split()[0] for row in rows if row[:1].isalpha()]
    assert names == [name for name, _ in _root.COMMANDS]


def test_summaries_are_the_docstrings_first_paragraphs() -> None:
    import importlib

    from tpuperf.cli import _root

    expected = [
        (name, _root.reflow(importlib.import_module(module).command.__doc__).split("\n\n")[0])
        for name, module in _root.COMMANDS
    ]
    assert _root.summaries() == expected


def test_summaries_without_sources_to_read_come_from_the_modules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import re

    from tpuperf.cli import _root

    read = _root.summaries()
    monkeypatch.setattr(_root, "_DOCSTRING", re.compile(r"(?!)(.)"))  # never matches
    assert _root.summaries() == read
    monkeypatch.setattr(_root.os.path, "dirname", lambda _: "/nonexistent")
    assert _root.summaries() == read


def test_cleandoc_is_inspects() -> None:
    import importlib

    from tpuperf.cli import _root
    from tpuperf.cli._help import cleandoc

    docs = [importlib.import_module(m).command.__doc__ or "" for _, m in _root.COMMANDS]
    docs += ["", "one", "\n  two\n    three\n\n  four\n\n", "\tx\n\ty"]
    for doc in docs:
        assert cleandoc(doc) == inspect.cleandoc(doc)


@pytest.mark.parametrize(
    ("text", "width", "lines"),
    [
        ("a bb ccc dddd", 6, ["a bb", "ccc", "dddd"]),
        ("    indented line", 14, ["    indented", "line"]),
        ("x abcdefghij y", 4, ["x", "abcd", "efgh", "ij y"]),
        ("one\n\ntwo", 80, ["one", "", "two"]),
    ],
)
def test_wrap_breaks_where_the_next_word_does_not_fit(
    text: str, width: int, lines: list[str]
) -> None:
    from tpuperf.cli._help import wrap

    assert wrap(text, width) == lines


def test_json_and_a_table_on_a_pipe_need_no_rich() -> None:
    """JSON needs no renderer; a table on a pipe is plain text, which tpuperf.render.plain
    writes itself (tests/test_render_plain.py holds it to what rich draws)."""
    code, out, modules = command_imports("info", str(CPU_FIXTURE), "--format", "json")
    assert code == 0 and "rich" not in top_level(modules)
    code, out, modules = command_imports("ops", str(CPU_FIXTURE), "--format", "json")
    assert code == 0 and json.loads(out)["rows"] and "rich" not in top_level(modules)
    code, out, modules = command_imports("ops", str(CPU_FIXTURE))
    assert code == 0 and out.splitlines()[0].split()[0] == "op"
    assert "rich" not in top_level(modules)
    code, out, modules = command_imports("info", str(CPU_FIXTURE))
    assert code == 0 and "Devices" in out and "rich" not in top_level(modules)
    code, out, modules = command_imports("tree", str(CPU_FIXTURE))
    assert code == 0 and "Scope tree" in out and "rich" not in top_level(modules)


@pytest.mark.parametrize(
    "args",
    [
        ["info", "--format", "json"],
        ["info"],
        ["ops", "--top", "3", "-f", "csv"],
        ["ops", "--by", "category"],
        ["analyze", "-f", "json", "--top", "5"],
        ["tree", "--format=json"],
        ["--debug", "info", "-f", "json"],
    ],
)
def test_a_plain_command_line_is_read_without_typer(args: list[str]) -> None:
    """typer and click are imported to draw help and to say what is wrong with a command
    line, not to run one (tpuperf.cli._params reads it)."""
    where = args.index("--debug") + 2 if "--debug" in args else 1
    line = [*args[:where], str(CPU_FIXTURE), *args[where:]]
    code, out, modules = command_imports(*line)
    assert code == 0 and out.strip()
    assert not {"typer", "click"} & top_level(modules), line


def test_help_and_usage_errors_are_typers() -> None:
    code, out, modules = command_imports("ops", "--help")
    assert code == 0 and "Usage: tpuperf ops" in out and "typer" in top_level(modules)
    code, out, modules = command_imports("ops", str(CPU_FIXTURE), "--top", "x")
    assert code == 2 and "typer" in top_level(modules)


@pytest.mark.parametrize("command", ["analyze", "tree", "host", "memory", "diff"])
def test_json_needs_no_rich(command: str) -> None:
    """A command imports its table's renderer (and rich) only to draw the table."""
    profiles = [str(CPU_FIXTURE)] * (2 if command == "diff" else 1)
    code, out, modules = command_imports(command, *profiles, "-f", "json")
    assert code == 0 and json.loads(out)["schema_version"] == 1
    assert "rich" not in top_level(modules), command


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "-f", "json"],
        ["memory", "-f", "json"],
        ["ops", "--by", "scope", "-f", "json"],
        ["tree", "-f", "json"],
    ],
)
def test_hlo_protos_are_read_without_protobuf(args: list[str]) -> None:
    """Scopes, collectives and the memory plan read the profile's HLO protos from the wire
    (tpuperf._hlo_schema): the protobuf runtime is for writing profiles."""
    code, out, modules = command_imports(args[0], str(CPU_FIXTURE), *args[1:])
    assert code == 0 and json.loads(out)["schema_version"] == 1
    assert "tpuperf._hlo_schema" in modules, args
    assert "google" not in top_level(modules), args


@pytest.mark.parametrize(
    "profile", ["cpu_fixture", "tpu/v6e_4chip_inference", "gpu/mi300_jax_conv"]
)
def test_a_small_profile_imports_only_what_its_commands_use(profile: str) -> None:
    """info, ops, analyze (tables on a pipe) and analyze --format json: no rich, no protobuf,
    no pathlib (urllib.parse and ipaddress come with it: paths are strings), no numpy.ma
    (which np.unique and np.median import on first use, 20 ms). analyze as JSON: not the
    findings' types that only renderers read. A TPU profile: not the GPU kernels' reader.
    None of them (no DCN host transfers): not the multislice collectives' reader."""
    from tests.conftest import shared_profile

    cpu = profile == "cpu_fixture"
    path = str(CPU_FIXTURE if cpu else shared_profile(f"{profile}.xplane.pb"))
    for args in (["info"], ["ops"], ["analyze", "-f", "json"], ["analyze"]):
        code, out, modules = command_imports(args[0], path, *args[1:], "--no-cache")
        assert code == 0 and out.strip()
        assert not {"rich", "google", "pathlib", "urllib"} & top_level(modules), args
        assert args != ["analyze"] or "Recommendations" in out
        if args == ["analyze", "-f", "json"]:  # what only renderers read
            assert "tpuperf.findings" not in modules
        assert "numpy.ma" not in modules, args
        assert not profile.startswith("tpu") or "tpuperf.build_gpu" not in modules, args
        assert "tpuperf.megascale" not in modules, args


@pytest.mark.parametrize(("given", "kept"), [(None, "1"), ("4", "4")])
def test_openblas_starts_one_thread_unless_told(given: str | None, kept: str) -> None:
    """numpy's OpenBLAS starts a thread per core as it loads; the CLI asks for one (before
    numpy is imported), unless the user set OPENBLAS_NUM_THREADS."""
    import os

    child = (
        "import os, sys; from tpuperf.cli import main; code = main(sys.argv[1:]); "
        "print(code, os.environ['OPENBLAS_NUM_THREADS'], file=sys.stderr)"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run(
        [sys.executable, "-c", child, "info", str(CPU_FIXTURE), "-f", "json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert done.stderr.split()[-2:] == ["0", kept], done.stderr


def test_the_spinner_is_drawn_on_a_terminal_only() -> None:
    """The "reading PATH" spinner goes to stderr when it is a terminal (rich draws it); on a
    pipe nothing is drawn, and rich is not imported for it."""
    import os
    import pty

    main, child = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tpuperf", "info", str(CPU_FIXTURE), "-f", "json"],
            stdout=subprocess.PIPE,
            stderr=child,
            cwd=REPO,
            env={**os.environ, "TERM": "xterm"},
        )
        os.close(child)
        drawn = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the terminal's other end is closed: all is read
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(main)
    assert done.returncode == 0 and json.loads(done.stdout)["schema_version"] == 1
    assert f"reading {CPU_FIXTURE}".encode() in drawn
    piped = subprocess.run(
        [sys.executable, "-m", "tpuperf", "info", str(CPU_FIXTURE), "-f", "json"],
        capture_output=True,
        cwd=REPO,
    )
    assert piped.returncode == 0 and piped.stderr == b""


# --------------------------------------------------------------------------- the load path


@pytest.mark.parametrize(
    "rows",
    [[0], [2, 2, 0, 1, 0, -1], [-1, -1], [3, 1, 3, 1, 0, 2, 4, 4]],
)
def test_host_event_names_are_coded_as_from_list_codes_them(rows: list[int]) -> None:
    """hostview's names and thread lines: the values in the order the rows first show them, as
    ``Strings.from_list`` makes them, with names that repeat across planes made one."""
    import numpy as np

    from tpuperf.columns import Strings
    from tpuperf.hostview import _first_seen

    known = ["b", "a", "b", "c", ""]  # "b" twice: two planes name the same event
    found = _first_seen(known, np.array(rows))
    expected = Strings.from_list([known[i] for i in rows])
    assert found.values == expected.values
    assert found.codes.tolist() == expected.codes.tolist()


@pytest.mark.parametrize("profile", ["cpu_fixture", "tpu/v6e_4chip_inference"])
def test_a_small_profile_starts_no_thread_pool(profile: str) -> None:
    """Decoding, hashing and analysing a profile under tpuperf._threads.PARALLEL_BYTES /
    PARALLEL_OPS happens in the calling thread: concurrent.futures (and logging, which it
    imports) is not even imported, on a first command (decoded, hashed, stored) nor a second
    (read from the cache)."""
    from tests.conftest import shared_profile

    path = str(CPU_FIXTURE if profile == "cpu_fixture" else shared_profile(f"{profile}.xplane.pb"))
    for args in (["info"], ["ops"], ["analyze", "-f", "json"], ["analyze", "--no-cache"]):
        code, out, modules = command_imports(args[0], path, *args[1:])
        assert code == 0 and out.strip()
        assert not {"concurrent", "logging"} & top_level(modules), args


def test_a_command_served_from_the_cache_loads_no_openssl_and_writes_nothing() -> None:
    """A first command hashes the file's content with xxhash, not hashlib (which loads
    OpenSSL), and writes its entry without tempfile (or pathlib). A second command on an
    unchanged profile hashes only its keys (the interpreter's own SHA-256), decodes nothing
    and writes no entry: neither hash library, the decoder (tpuperf.xspace, tpuperf.build),
    tempfile nor shutil is imported."""
    path = str(CPU_FIXTURE)
    code, _, first = command_imports("info", path, "-f", "json")
    assert code == 0 and "xxhash" in first  # the file's content was hashed, the entry written
    assert not {"hashlib", "_hashlib"} & first
    # The entry's folder is made without tempfile (and shutil, bz2, lzma with it).
    assert not {"tempfile", "shutil", "pathlib"} & first
    for args in (["info", "-f", "json"], ["ops"], ["analyze", "-f", "json"]):
        code, out, modules = command_imports(args[0], path, *args[1:])
        assert code == 0 and out.strip()
        unused = {"hashlib", "_hashlib", "xxhash", "tpuperf.xspace", "tpuperf.build"}
        unused |= {"tempfile", "shutil"}
        assert not unused & modules, args
