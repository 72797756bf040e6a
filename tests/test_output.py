"""The output layer and the CLI around it: files (atomic, parents made, the umask's mode),
formats, messages, --debug and its exit codes, --version, help at 80 columns, the decoder
and file size in `info`, and the install's C-module check."""

from __future__ import annotations

import gzip
import importlib
import importlib.util
import inspect
import io
import itertools
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import CPU_FIXTURE, REPO, Cli
from tpuperf import __version__, output
from tpuperf.cli import COMMANDS, main


@pytest.fixture
def umask_022() -> Any:
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --------------------------------------------------------------------------- the writer


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_write_atomic_makes_parents_and_follows_the_umask(
    tmp_path: Path, umask: int, mode: int
) -> None:
    target = tmp_path / "a" / "b" / "out.json"
    old = os.umask(umask)
    try:
        output.write_atomic(target, "text")
    finally:
        os.umask(old)
    assert target.read_text() == "text"
    assert _mode(target) == mode
    assert [p.name for p in target.parent.iterdir()] == ["out.json"]


def test_write_atomic_keeps_the_old_file_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    target.write_text("old")

    def fail(handle: Any) -> None:
        handle.write(b"half of a new fi")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        output.write_atomic(target, fail)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]  # no temporary file left


@pytest.mark.parametrize("data", ["text", lambda handle: handle.write(b"text")])
def test_write_atomic_writes_into_a_named_pipe_or_a_device(tmp_path: Path, data: Any) -> None:
    """`-o /dev/null`, or `-o /dev/stdout` on a pipe: the output goes into the file, which stays
    what it is (renaming a temporary file over it would replace the device with a file)."""
    import threading

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()), daemon=True)
    reader.start()
    output.write_atomic(pipe, data)
    reader.join(10)
    assert received == [b"text"]
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]  # no temporary file beside it
    output.write_atomic(os.devnull, "nothing")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def _unwritable(tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A place -o cannot write, and the reason the error should give."""
    (tmp_path / "a_file").write_text("kept")
    if case == "a directory":
        (tmp_path / "out").mkdir()
        return tmp_path / "out", "it is a directory"
    if case == "under a file":
        return tmp_path / "a_file" / "x.json", f"{tmp_path / 'a_file'} is a file, not a directory"
    if case == "deeper under a file":
        return (
            tmp_path / "a_file" / "sub" / "x.json",
            f"{tmp_path / 'a_file'} is a file, not a directory",
        )
    if case == "no permission":  # the tests may run as root, where chmod does not stop a write
        real_open = os.open

        def refuse(path: Any, *args: Any, **kwargs: Any) -> int:
            if str(path).endswith(".tmp"):
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(output.os, "open", refuse)
        return tmp_path / "x.json", f"permission denied ({tmp_path})"
    assert case == "/proc"
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc")
    return Path("/proc/x.json"), "files cannot be created in /proc"


_UNWRITABLE = ["a directory", "under a file", "deeper under a file", "no permission", "/proc"]


@pytest.mark.parametrize("case", _UNWRITABLE)
def test_an_unwritable_output_is_one_line_and_exit_6(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    from tpuperf.errors import CannotWrite

    target, reason = _unwritable(tmp_path, case, monkeypatch)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, out, err = cli("info", str(CPU_FIXTURE), "-f", "json", "-o", str(target))
    assert (code, out) == (CannotWrite.exit_code, "")
    assert err.splitlines() == [f"tpuperf: error: cannot write {target}: {reason}"]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no temporary, nothing made
    assert (tmp_path / "a_file").read_text() == "kept"


def test_a_full_disk_is_a_cannot_write_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from tpuperf.errors import CannotWrite

    target = tmp_path / "rows.csv"
    target.write_text("old")

    class Full(io.BytesIO):
        def write(self, data: Any) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    def render(handle: Any) -> None:  # a renderer writing through the handle it is given
        handle.write(b"a,b\n")

    monkeypatch.setattr(output.os, "fdopen", lambda fd, mode: (os.close(fd), Full())[1])
    with pytest.raises(CannotWrite, match=r"cannot write .*rows.csv: no space left on device"):
        output.write_atomic(target, render)
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["rows.csv"]


def test_errors_of_the_renderer_are_not_write_errors(tmp_path: Path) -> None:
    from tpuperf.errors import CannotWrite

    def render(handle: Any) -> None:  # reading a missing input while writing
        handle.write(b"x")
        (tmp_path / "missing.xplane.pb").read_bytes()

    with pytest.raises(FileNotFoundError) as raised:
        output.write_atomic(tmp_path / "out.json", render)
    assert not isinstance(raised.value, CannotWrite)
    assert list(tmp_path.iterdir()) == []


def test_write_atomic_to_an_fsspec_url() -> None:
    import fsspec

    output.write_atomic("memory://results/rows.csv", b"a,b\n1,2\n")
    assert fsspec.filesystem("memory").cat("/results/rows.csv") == b"a,b\n1,2\n"


# --------------------------------------------------------------------------- -o everywhere

# (command line, file name, how to read the file back): each writes into a directory that
# does not exist yet.
_OUTPUTS = [
    (["info", str(CPU_FIXTURE)], "info.txt", lambda p: "Devices" in p.read_text()),
    (["info", str(CPU_FIXTURE)], "info.json", lambda p: json.loads(p.read_text())["devices"]),
    (["ops", str(CPU_FIXTURE)], "ops.txt", lambda p: "ynn_fusion.3" in p.read_text()),
    (["ops", str(CPU_FIXTURE)], "ops.csv", lambda p: pd.read_csv(p)["occurrences"].sum() == 272),
    (
        ["ops", str(CPU_FIXTURE)],
        "ops.parquet",
        lambda p: pd.read_parquet(p)["occurrences"].sum() == 272,
    ),
    (["analyze", str(CPU_FIXTURE)], "report.txt", lambda p: "Recommendations" in p.read_text()),
    (["analyze", str(CPU_FIXTURE)], "report.md", lambda p: p.read_text().startswith("# ")),
    (["analyze", str(CPU_FIXTURE)], "report.json", lambda p: json.loads(p.read_text())["summary"]),
    (["analyzers"], "analyzers.json", lambda p: json.loads(p.read_text())["analyzers"]),
    (["analyzers"], "analyzers.txt", lambda p: "roofline" in p.read_text()),
    (
        ["scan", str(CPU_FIXTURE), "--no-cache", "-j", "1"],
        "rows.txt",
        lambda p: "cpu" in p.read_text(),
    ),
    (
        ["scan", str(CPU_FIXTURE), "--no-cache", "-j", "1"],
        "rows.ndjson",
        lambda p: json.loads(p.read_text())["steps"] == 7,
    ),
    (
        ["scan", str(CPU_FIXTURE), "--no-cache", "-j", "1"],
        "rows.json",
        lambda p: [r["steps"] for r in json.loads(p.read_text())["rows"]] == [7],
    ),
    (
        ["scan", str(CPU_FIXTURE), "--no-cache", "-j", "1"],
        "rows.parquet",
        lambda p: pd.read_parquet(p)["steps"].tolist() == [7],
    ),
]


@pytest.mark.parametrize(
    ("args", "name", "check"), _OUTPUTS, ids=[f"{a[0]}-{n}" for a, n, _ in _OUTPUTS]
)
def test_output_into_a_missing_directory(
    cli: Cli,
    tmp_path: Path,
    umask_022: None,
    args: list[str],
    name: str,
    check: Any,
) -> None:
    target = tmp_path / "new" / "dir" / name
    code, out, err = cli(*args, "-o", str(target))
    assert code == 0, err
    assert out == ""
    assert f"tpuperf: wrote {target}" in err.splitlines()
    assert check(target)
    assert _mode(target) == 0o644
    assert [p.name for p in target.parent.iterdir()] == [name]


def test_the_suffix_chooses_the_format_and_an_explicit_format_wins(
    cli: Cli, tmp_path: Path
) -> None:
    assert cli("ops", str(CPU_FIXTURE), "-o", str(tmp_path / "a.json"))[0] == 0
    assert json.loads((tmp_path / "a.json").read_text())["by"] == "program_op"
    assert cli("ops", str(CPU_FIXTURE), "-f", "csv", "-o", str(tmp_path / "b.json"))[0] == 0
    assert (tmp_path / "b.json").read_text().startswith("program_id,op,")


@pytest.mark.parametrize(
    ("args", "name", "offered"),
    [
        (["diff", str(CPU_FIXTURE), str(CPU_FIXTURE)], "d.parquet", "table, json or md"),
        (["info", str(CPU_FIXTURE)], "i.md", "table or json"),
        (["ops", str(CPU_FIXTURE)], "o.ndjson", "table, json, csv or parquet"),
        (["analyzers"], "a.csv", "table or json"),
    ],
)
def test_a_suffix_naming_a_format_not_offered_is_a_usage_error(
    cli: Cli, tmp_path: Path, args: list[str], name: str, offered: str
) -> None:
    target = tmp_path / name
    code, out, err = cli(*args, "-o", str(target))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"tpuperf: error: -o {target}: {args[0]} writes {offered}; use -f to choose"
    ]
    assert not target.exists()
    # -f says what is meant: a table under that name.
    assert cli(*args, "-f", "table", "-o", str(target))[0] == 0
    assert "─" in target.read_text()


@pytest.mark.parametrize("name", ["info.txt", "info.log", "info", "info.out"])
def test_text_suffixes_and_no_suffix_get_the_table(cli: Cli, tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    assert cli("info", str(CPU_FIXTURE), "-o", str(target))[0] == 0
    assert target.read_text().startswith(str(CPU_FIXTURE))  # the table's first line


def test_text_files_are_plain_at_the_file_width(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")  # forces colour on pipes, never on files
    target = tmp_path / "report.txt"
    assert cli("analyze", str(CPU_FIXTURE), "-o", str(target))[0] == 0
    lines = target.read_text().splitlines()
    assert "\x1b[" not in target.read_text()
    assert max(len(line) for line in lines) == output.FILE_WIDTH  # the panel's width


def test_a_binary_format_needs_a_file(cli: Cli) -> None:
    code, out, err = cli("ops", str(CPU_FIXTURE), "-f", "parquet")
    assert code == 2 and out == ""
    assert "-o FILE.parquet" in err


def test_a_format_a_command_does_not_offer_is_a_usage_error(
    cli: Cli,
) -> None:
    code, _, err = cli("info", str(CPU_FIXTURE), "-f", "csv")
    assert code == 2
    assert "'csv' is not one of 'table', 'json'" in err


def test_every_format_has_a_renderer() -> None:
    assert set(output.RENDERERS) == set(output.Format)


def test_csv_and_ndjson_render_from_rows() -> None:
    rows = output.Rows(["a", "b"], [{"a": 1, "b": float("nan")}, {"a": 2, "b": 0.1}])
    csv_view = output.View(rows=lambda: rows)
    buffer = io.BytesIO()
    output.RENDERERS[output.Format.csv](csv_view, output.Destination(buffer))
    assert buffer.getvalue() == b"a,b\n1,\n2,0.1\n"
    rows = output.Rows(["a", "b"], [{"a": 1, "b": float("nan")}])
    buffer = io.BytesIO()
    output.RENDERERS[output.Format.ndjson](
        output.View(rows=lambda: rows), output.Destination(buffer)
    )
    assert buffer.getvalue() == b'{"a":1,"b":null}\n'


def test_json_documents_share_one_schema_version(cli: Cli) -> None:
    from tpuperf import analysis, scanning

    versions = {
        json.loads(cli(*args, "-f", "json")[1])["schema_version"]
        for args in (["info", str(CPU_FIXTURE)], ["ops", str(CPU_FIXTURE)], ["analyzers"])
    }
    assert versions == {output.SCHEMA_VERSION} == {analysis.SCHEMA_VERSION, scanning.SCHEMA_VERSION}


def test_scan_json_is_one_document_of_the_rows(cli: Cli, tmp_path: Path) -> None:
    from fixtures.generate import write_pair

    write_pair("slower_fusion", tmp_path)
    args = ["scan", str(CPU_FIXTURE), str(tmp_path), "--no-cache", "-j", "1"]
    code, out, _ = cli(*args, "-f", "json")
    assert code == 0
    document = json.loads(out)
    assert list(document) == ["schema_version", "rows"]
    assert document["schema_version"] == output.SCHEMA_VERSION
    ndjson = [json.loads(line) for line in cli(*args, "-f", "ndjson")[1].splitlines()]
    assert document["rows"] == ndjson and len(ndjson) == 3
    assert out == output.json_text({"rows": ndjson})  # written row by row, the same text


# --------------------------------------------------------------------------- messages, exit codes


def test_messages_are_one_style(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli(
        "ops", str(CPU_FIXTURE), "--by", "op", "-f", "csv", "-o", str(tmp_path / "x.csv")
    )
    assert code == 0
    assert err.splitlines() == [f"tpuperf: wrote {tmp_path / 'x.csv'}"]


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["info", "/nonexistent/profile.xplane.pb"], 4),
        (["scan", str(CPU_FIXTURE), "--fail-on", "idle_pct>>1"], 2),
        (["ops", str(CPU_FIXTURE), "--top", "0"], 2),
    ],
)
def test_debug_keeps_the_exit_code_and_shows_the_traceback(
    cli: Cli, args: list[str], code: int
) -> None:
    plain_code, _, plain_err = cli(*args)
    debug_code, _, debug_err = cli("--debug", *args)
    assert plain_code == debug_code == code
    assert "Traceback" not in plain_err
    assert "Traceback (most recent call last)" in debug_err
    assert plain_err.splitlines()[-1] == debug_err.splitlines()[-1]


def test_version(cli: Cli) -> None:
    assert cli("--version") == (0, f"tpuperf {__version__}\n", "")
    code, out, _ = cli("--help")
    assert code == 0 and f"tpuperf {__version__}" in out


@pytest.mark.parametrize("command", ["", *(name for name, _ in COMMANDS)])
def test_help_reads_at_80_columns(cli: Cli, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = cli(*([command] if command else []), "--help")
    assert code == 0
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert "<bool>" not in out and "``" not in out
    if not command:
        return
    doc = importlib.import_module(dict(COMMANDS)[command]).command.__doc__
    # Prose reflows: within a paragraph of the description, a line ends only where the next
    # word would not fit (the docstring's hard line breaks are gone).
    start = next(i for i, line in enumerate(lines) if line.startswith(" Usage:")) + 2
    end = next(i for i, line in enumerate(lines) if line.strip() == "Example:")
    paragraph: list[str] = []
    for line in [*lines[start:end], ""]:
        if line.strip():
            paragraph.append(line.rstrip())
            continue
        for this, following in itertools.pairwise(paragraph):
            assert len(this) + 1 + len(following.split()[0]) > 78, (this, following)
        paragraph = []
    # Example lines are kept whole and indented.
    examples = [line.strip() for line in doc.splitlines() if line.strip().startswith("tpuperf ")]
    assert examples
    for example in examples:
        assert f"     {example}" in out, example
    # Every line of the Example block (continuation lines too) is one line of the help at 80
    # columns, as written: none wraps and leaves a piece at column 1.
    block = inspect.cleandoc(doc).split("Example:", 1)[1]
    shown = [line.rstrip() for line in lines]
    for line in (x.rstrip() for x in block.splitlines() if x.strip()):
        assert " " + line in shown, f"{command}: example line wraps at 80 columns: {line!r}"
    # Choices never break inside a word: formats are listed in the help text.
    if "--format" in out:
        assert "FORMAT" in out and not re.search(r"<[a-z|]*\n", out)


# --------------------------------------------------------------------------- info


def test_info_says_which_decoder(cli: Cli) -> None:
    from tpuperf import kernels

    info = json.loads(cli("info", str(CPU_FIXTURE), "-f", "json")[1])
    assert info["decoder"] == kernels.implementation()
    with kernels.use("numpy"):
        info = json.loads(cli("info", str(CPU_FIXTURE), "-f", "json")[1])
        assert info["decoder"] == "numpy"
        assert "decoder numpy" in cli("info", str(CPU_FIXTURE))[1]


def test_info_of_a_gzip_file_says_the_size_is_decompressed(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = CPU_FIXTURE.read_bytes()
    path = tmp_path / "host.xplane.pb.gz"
    path.write_bytes(gzip.compress(raw))
    host = json.loads(cli("info", str(path), "-f", "json")[1])["hosts"][0]
    assert host["size_bytes"] == len(raw)
    assert host["file_bytes"] == path.stat().st_size < len(raw)
    assert host["gzip"] is True
    plain = json.loads(cli("info", str(CPU_FIXTURE), "-f", "json")[1])["hosts"][0]
    assert plain["size_bytes"] == plain["file_bytes"] == len(raw) and plain["gzip"] is False
    monkeypatch.setenv("COLUMNS", "120")
    text = cli("info", str(path))[1]
    stored = path.stat().st_size
    assert stored < 1e5  # a file of tens of kB: "0.0 MB" said nothing
    assert f"{_three_digits(len(raw))} decompressed (gzip file {_three_digits(stored)})" in text
    assert " kB)" in text


def _three_digits(size_bytes: int) -> str:
    """A size as info writes it: kB, MB or GB with 3 significant digits."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        value = float(f"{size_bytes / scale:.3g}")
        if value >= 1:
            return f"{value:#.3g}".rstrip(".") + f" {unit}"
    return f"{size_bytes} B"


# --------------------------------------------------------------------------- install


def _setup_module(monkeypatch: pytest.MonkeyPatch) -> Any:
    pytest.importorskip("setuptools")
    import setuptools

    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: None)
    spec = importlib.util.spec_from_file_location("tpuperf_setup", REPO / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(module: Any, tmp_path: Path) -> Any:
    from setuptools import Distribution

    dist = Distribution({"name": "tpuperf", "ext_modules": [module.NATIVE]})
    command = module.BuildNative(dist)
    command.build_lib = str(tmp_path / "lib")
    command.build_temp = str(tmp_path / "temp")
    command.ensure_finalized()
    return command


def test_a_c_module_that_does_not_build_stops_the_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    module = _setup_module(monkeypatch)
    monkeypatch.delenv("TPUPERF_NO_NATIVE", raising=False)
    monkeypatch.setenv("CC", "false")  # a compiler that always fails
    monkeypatch.chdir(REPO)
    with pytest.raises(RuntimeError, match="TPUPERF_NO_NATIVE=1"):
        _build(module, tmp_path).run()


def test_tpuperf_no_native_installs_without_the_c_module(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    module = _setup_module(monkeypatch)
    monkeypatch.setenv("TPUPERF_NO_NATIVE", "1")
    monkeypatch.setenv("CC", "false")
    monkeypatch.chdir(REPO)
    _build(module, tmp_path).run()
    assert not list(tmp_path.rglob("*.so"))


def test_the_install_holds_every_package() -> None:
    """``pip install .`` copies only the packages pyproject.toml lists; an editable install
    maps the whole folder, so a package missing from the list failed only once installed
    (tpuperf.kernels did: every command that read a profile stopped on an ImportError)."""
    tomllib = pytest.importorskip("tomllib")
    setup = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {"tpuperf": "tpuperf", **setup["package-dir"]}
    on_disk = set()
    for package, folder in folders.items():
        for init in (REPO / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO / folder).parts
            on_disk.add(".".join((package, *parts)))
    assert on_disk == set(setup["packages"])


def test_cli_module_runs_as_a_script() -> None:
    import subprocess

    result = subprocess.run(
        [sys.executable, "-m", "tpuperf", "--version"], capture_output=True, text=True, cwd=REPO
    )
    assert result.returncode == 0 and result.stdout == f"tpuperf {__version__}\n"


@pytest.mark.parametrize("args", [["ops"], ["ops", "-f", "json"], ["ops", "-f", "csv"]])
def test_a_closed_stdout_ends_quietly(args: list[str]) -> None:
    """`tpuperf ... | head -1`: the reader is gone before the output is written (a pipe whose
    reading end is closed, so every write fails as it would once head exits)."""
    import subprocess

    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "tpuperf", args[0], str(CPU_FIXTURE), *args[1:]],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
    finally:
        os.close(write)
    assert (result.returncode, result.stderr) == (141, "")


@pytest.mark.parametrize("command", ["info", "ops", "analyze", "analyzers", "scan", "diff"])
def test_table_commands_take_wide(cli: Cli, command: str) -> None:
    code, out, _ = cli(command, "--help")
    assert code == 0 and re.search(r"--wide\s+Full names and every column", out)


def test_analyzers_wide_shows_every_column(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from tpuperf.analyzers import base

    monkeypatch.setenv("COLUMNS", "80")
    narrow = cli("analyzers")[1].splitlines()
    wide = cli("analyzers", "--wide")[1].splitlines()
    assert narrow[0].split() == ["analyzer", "summary"] and "(--wide shows origin)" in narrow
    assert wide[0].split() == ["analyzer", "origin", "summary"]
    for name, analyzer in base.available().items():  # one line each, the summary whole
        assert any(line.split()[0] == name and analyzer.summary in line for line in wide)


def test_report_refuses_a_suffix_of_another_format(tmp_path: Path, capsys) -> None:
    """``report -o x.json`` would have written HTML under a JSON name."""
    target = tmp_path / "x.json"
    assert main(["report", str(CPU_FIXTURE), "-o", str(target)]) == 2
    assert "report writes html" in capsys.readouterr().err
    assert not target.exists()
