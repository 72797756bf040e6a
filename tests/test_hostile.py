"""Hostile and damaged inputs (issue 10): every one is answered with a result or one clean error
line (exit 4), the C and numpy decoders accept and reject the same inputs with the same
message, and no string from a profile reaches a terminal, a CSV cell or Markdown as it is.

- tests/regressions/: one small file per cause the fuzz campaign found (written by
  ``python -m fixtures.hostile tests/regressions``); expected.json holds each file's exit code
  and error, checked on both decoders.
- fixtures/hostile.py: well-formed XSpaces with hostile content, all through every command.
- hypothesis: damaged copies of the real profiles (fixtures/mutate.py) through both decoders.

The longer campaign (2,000+ inputs) is benchmarks/fuzz_campaign.py, run by hand.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.hostile import COMMANDS, HOSTILE_NAMES, cases, judge
from fixtures.mutate import KINDS, mutate
from tests.conftest import CPU_FIXTURE, SHARED_PROFILES
from tpuperf import kernels
from tpuperf.cli import main
from tpuperf.errors import BadProfile
from tpuperf.output import csv_text_cell, visible

# An overflow in numpy is a wrong number shown as a right one: an error here.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

REGRESSIONS = Path(__file__).resolve().parent / "regressions"
EXPECTED = json.loads((REGRESSIONS / "expected.json").read_text())
DECODERS = ["C", "numpy"]
SOURCES = [CPU_FIXTURE, *sorted(SHARED_PROFILES.rglob("*.xplane.pb"))]


@contextlib.contextmanager
def decoder(name: str) -> Iterator[None]:
    """Decode with the C module or with numpy for the duration."""
    if name == "C" and not kernels.native_built():
        pytest.skip("the C decoder is not built here")
    with kernels.use("native" if name == "C" else "numpy"):
        yield


def run(args: list[str]) -> tuple[int, bytes, str]:
    """``tpuperf ARGS`` in this process at 80 columns: (exit code, stdout bytes, stderr)."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    out.flush()
    return code, raw.getvalue(), err.getvalue()


def answered(command: str, path: Path) -> tuple[str, int, str]:
    """Run ``command`` on ``path``; fail unless the answer is ok or one clean error line."""
    args = COMMANDS[command]
    code, stdout, stderr = run([args[0], str(path), *args[1:]])
    outcome, cause = judge(command, code, stdout, stderr)
    assert outcome in ("ok", "clean error"), f"{command} {path.name}: {outcome}: {cause}"
    return outcome, code, stderr


@pytest.fixture(autouse=True)
def _eighty_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


# --------------------------------------------------------------------------- regression files


def test_regression_files_are_the_ones_fixtures_write(tmp_path: Path) -> None:
    from fixtures.hostile import write_regressions

    names = write_regressions(str(tmp_path))
    assert sorted(EXPECTED) == names
    for name in names:
        assert (tmp_path / name).read_bytes() == (REGRESSIONS / name).read_bytes(), name


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("which", DECODERS)
def test_regression_file(name: str, which: str) -> None:
    expected = EXPECTED[name]
    with decoder(which):
        for command in COMMANDS:
            _, code, stderr = answered(command, REGRESSIONS / name)
            assert code == expected["exit"], (command, stderr)
            if code:
                assert expected["error"] in stderr, (command, stderr)


# --------------------------------------------------------------------------- hostile content

HOSTILE = cases(0)


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("hostile")
    for name, data in HOSTILE:
        (directory / f"{name}.xplane.pb").write_bytes(data)
    return directory


@pytest.mark.parametrize("name", [name for name, _ in HOSTILE])
def test_hostile_profile_through_every_command(hostile_dir: Path, name: str) -> None:
    with decoder("C"):
        outcomes = {c: answered(c, hostile_dir / f"{name}.xplane.pb")[1] for c in COMMANDS}
    assert len(set(outcomes.values())) == 1, outcomes  # all read it, or none
    with decoder("numpy"):
        assert answered("analyze json", hostile_dir / f"{name}.xplane.pb")[1] == outcomes["info"]


def test_hostile_names_are_written_out_in_tables(hostile_dir: Path) -> None:
    """An op named with an escape sequence shows as text (``\\x1b[2J``) in every table."""
    path = hostile_dir / "op_name_0.xplane.pb"
    shown = visible(HOSTILE_NAMES[0])
    assert shown.startswith("\\x1b[2J")
    for command in ("ops", "analyze"):
        code, stdout, _ = run([command, str(path), "--wide"])
        assert code == 0 and shown in stdout.decode()
    code, stdout, _ = run(["info", str(hostile_dir / "hostname_1.xplane.pb"), "--wide"])
    assert code == 0 and visible(HOSTILE_NAMES[1]) in stdout.decode()


def test_rich_markup_in_names_is_shown_as_it_is(hostile_dir: Path) -> None:
    for i in (2, 3, 4):  # [link=...], [bold red]x[/], [/x] unbalanced
        code, stdout, _ = run(["ops", str(hostile_dir / f"op_name_{i}.xplane.pb"), "--wide"])
        assert code == 0 and HOSTILE_NAMES[i] in stdout.decode()


@pytest.mark.parametrize(
    "args",
    [
        ["info"],
        ["ops"],
        ["tree"],
        ["analyze"],
        ["analyze", "-f", "md"],
        ["diff", "{path}"],
        ["scan"],
        ["export", "-f", "perfetto", "-o", "{out}/t.pftrace"],
        ["report", "-o", "{out}/r.html"],
    ],
    ids=lambda args: "-".join(a for a in args if "{" not in a),
)
def test_rich_markup_in_a_path_is_printed_as_it_is(tmp_path: Path, args: list[str]) -> None:
    """A file under a directory named ``[`` has ``[/]`` in its path: it ended in
    ``internal error: MarkupError`` (the spinner and the consoles read it as markup)."""
    path = tmp_path / "[" / "]p.xplane.pb"
    path.parent.mkdir()
    path.write_bytes(CPU_FIXTURE.read_bytes())
    argv = [a.replace("{path}", str(path)).replace("{out}", str(tmp_path)) for a in args]
    code, stdout, stderr = run([argv[0], str(path), *argv[1:]])
    assert code == 0, stderr
    assert "error:" not in stderr
    if args[0] in ("info", "tree", "analyze", "scan", "diff") and "md" not in args:  # named
        assert "[/]p" in stdout.decode()
    missing = path.with_name("]missing.xplane.pb")
    code, _, stderr = run(["info", str(missing)])
    assert (code, stderr) == (4, f"tpuperf: error: {missing}: no such file or directory\n")


def test_gpu_times_near_the_int64_limit_are_unknown_with_one_note(hostile_dir: Path) -> None:
    """Kernels ending past the int64 limit made self time overflow (numpy's RuntimeWarning on
    stderr, an error here): they are left out, and one line says how many."""
    path = hostile_dir / "gpu_times_near_int64_limit.xplane.pb"
    code, stdout, stderr = run(["ops", str(path), "--format", "json"])
    assert code == 0
    rows = json.loads(stdout)["rows"]
    assert sum(row["occurrences"] for row in rows) == 20  # of 24 kernels: the 4 late ones are out
    assert sum(row["total_time_ms"] for row in rows) == pytest.approx(20 * 5e-3)
    assert stderr.splitlines() == [
        "tpuperf: note: gpu_times_near_int64_limit: device 0: 4 op events with times past "
        "what int64 picoseconds hold left out (their times are unknown)"
    ]


def test_csv_cells_never_start_a_formula(hostile_dir: Path) -> None:
    for i, name in enumerate(HOSTILE_NAMES[5:9], 5):  # =HYPERLINK, +cmd, -2+3, @SUM
        code, stdout, _ = run(["ops", str(hostile_dir / f"op_name_{i}.xplane.pb"), "-f", "csv"])
        assert code == 0
        ops = [row["op"] for row in csv.DictReader(io.StringIO(stdout.decode()))]
        assert "'" + name in ops and name not in ops


def test_markdown_carries_no_html_or_links_from_the_profile(hostile_dir: Path) -> None:
    """Op names sit in code spans (where nothing is markup) and are escaped everywhere else."""
    import re

    for case, name in (("op_name_12", "<script>"), ("op_name_2", "[link=")):
        code, stdout, _ = run(["analyze", str(hostile_dir / f"{case}.xplane.pb"), "-f", "md"])
        text = stdout.decode()
        assert code == 0 and f"`{name}" in text  # the top ops table shows it whole
        prose = re.sub(r"`[^`\n]*`", "", text)
        assert name not in prose, [line for line in prose.splitlines() if name in line]


def test_visible_and_csv_cells() -> None:
    assert visible("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert visible("tab\there\nline\rcr\x9bcsi\x7f") == "tab\\there\\nline\\rcr\\x9bcsi\\x7f"
    assert visible("plain ünïcode — ok") == "plain ünïcode — ok"
    assert [csv_text_cell(t) for t in ("=1+1", "+x", "-2", "@SUM(A1)", "\tx", "ok")] == [
        "'=1+1",
        "'+x",
        "'-2",
        "'@SUM(A1)",
        "'\tx",
        "ok",
    ]


# --------------------------------------------------------------------------- damaged profiles


def _outcome(data: bytes) -> tuple[Any, ...]:
    """What reading ``data`` gives: the kind of error (``not a readable XSpace profile``, ...;
    with several faults the decoders, which walk the messages in different orders, may each
    name another), or per device its op count and time sum."""
    from tpuperf.profiles import read_host

    try:
        part = read_host("fuzz", "fuzz", data)
    except BadProfile as exc:
        return ("bad", str(exc).split(": ")[1])
    return (
        "ok",
        part.lines.n,
        tuple(
            (d.device, d.ops.n, int(d.ops.array("start_ps").sum()) if d.ops.n else 0)
            for d in part.devices
        ),
    )


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    source=st.sampled_from(SOURCES),
    kind=st.sampled_from([k for k in KINDS if "gzip" not in k]),
    seed=st.integers(0, 2**32 - 1),
)
def test_decoders_agree_on_damaged_profiles(source: Path, kind: str, seed: int) -> None:
    """Both decoders read a damaged profile alike, or reject it with the same BadProfile."""
    _, data = mutate(source.read_bytes(), random.Random(seed), kind)
    with decoder("C"):
        native = _outcome(data)
    with decoder("numpy"):
        assert _outcome(data) == native


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    source=st.sampled_from(SOURCES),
    kind=st.sampled_from(KINDS),
    seed=st.integers(0, 2**32 - 1),
    command=st.sampled_from(sorted(COMMANDS)),
)
def test_damaged_profiles_through_the_cli(
    tmp_path_factory: pytest.TempPathFactory, source: Path, kind: str, seed: int, command: str
) -> None:
    _, data = mutate(source.read_bytes(), random.Random(seed), kind)
    path = tmp_path_factory.mktemp("damaged") / (
        "profile.xplane.pb.gz" if data[:2] == b"\x1f\x8b" else "profile.xplane.pb"
    )
    path.write_bytes(data)
    with decoder("C"):
        answered(command, path)


# --------------------------------------------------------------------------- one long stream


def test_one_gpu_stream_of_many_kernels(tmp_path: Path) -> None:
    """20,000 kernels on one stream: every event an op, named by its hlo_op (the path whose cost
    was quadratic; the 500k-event figure is in the issue's note)."""
    from fixtures.large import write_gpu_stream
    from tpuperf.opstats import aggregate_table
    from tpuperf.profiles import load

    write_gpu_stream(tmp_path / "stream.xplane.pb", 20_000, kinds=50)
    table = aggregate_table(load(str(tmp_path / "stream.xplane.pb")), by="op")
    assert int(table.array("occurrences").sum()) == 20_000
    assert sorted(table.strings("op").tolist()) == sorted(f"fusion.{k}" for k in range(50))
    assert set(table.array("occurrences").tolist()) == {400}
