"""tpuperf.render.plain: the plain console draws, byte for byte, what the rich console it
stands for draws, for every listing of ``info`` and ``ops`` and the report of ``analyze`` at
several widths, and hands rich what only rich draws that way (characters wider or narrower
than a cell in a line to wrap, control characters, tabs)."""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from tests.conftest import CPU_FIXTURE, SHARED_PROFILES
from tpuperf import output
from tpuperf.render import listings
from tpuperf.render.plain import _ONE_CELL, Line, Numbered, Panel, PlainConsole, cells

_PROFILES = [
    CPU_FIXTURE,
    SHARED_PROFILES / "tpu" / "v6e_4chip_inference.xplane.pb",
    SHARED_PROFILES / "gpu" / "mi300_jax_te_fused_attn.xplane.pb",
    SHARED_PROFILES / "gpu" / "v100_8gpu_tf_training.xplane.pb",
]
_LOADED: dict[Path, Any] = {}


def _rich(buffer: io.StringIO, width: int) -> Console:
    """The console :func:`tpuperf.output.console` makes on a pipe."""
    console = Console(
        file=buffer,
        width=width,
        highlight=False,
        soft_wrap=False,
        color_system="auto",
        markup=False,
    )
    return output.guarded(console)


def _both(draw: Callable[[Any], None], width: int) -> tuple[str, str, bool]:
    """(what rich draws, what the plain console draws, whether it asked rich for help)."""
    drawn = io.StringIO()
    draw(_rich(drawn, width))
    plain = io.StringIO()
    made: list[Console] = []

    def rich_console() -> Console:
        made.append(_rich(plain, width))
        return made[0]

    draw(PlainConsole(plain, width, rich_console))
    return drawn.getvalue(), plain.getvalue(), bool(made)


def _profile(path: Path) -> Any:
    if not path.exists():
        pytest.skip(f"{path} not available")
    if path not in _LOADED:
        from tpuperf.profiles import load

        _LOADED[path] = load(path)
    return _LOADED[path]


def _ops(table: Any, by: str, console: Any, wide: bool, per_device: bool) -> None:
    listings.render_ops(table, by, console, wide=wide, per_device=per_device)


@pytest.mark.parametrize("path", _PROFILES, ids=lambda p: p.name.split(".")[0])
@pytest.mark.parametrize("width", [36, 80, 132, None], ids=["36", "80", "132", "wide"])
def test_info_and_ops_are_drawn_as_rich_draws_them(path: Path, width: int | None) -> None:
    from tpuperf.inventory import describe
    from tpuperf.opstats import aggregate_table

    profile = _profile(path)
    info = describe(profile)
    wide = width is None
    draws: list[Callable[[Any], None]] = [lambda c: listings.render_info(info, c, wide=wide)]
    for by in ("program_op", "op", "category", "module"):
        for per_device in (False, True):
            table = aggregate_table(profile, by=by, per_device=per_device, top=30)
            draws.append(functools.partial(_ops, table, by, wide=wide, per_device=per_device))
    scopes = aggregate_table(profile, by="scope")
    draws.append(lambda c: listings.render_scope_ops(scopes, "scope", c, wide=wide))
    plain_only = 0
    for draw in draws:
        drawn, plain, helped = _both(draw, width or 80)
        assert plain == drawn
        plain_only += not helped
    if width != 36:  # at 36 columns a path is longer than a line: rich folds it
        assert plain_only == len(draws)


@pytest.mark.parametrize("path", _PROFILES, ids=lambda p: p.name.split(".")[0])
@pytest.mark.parametrize("width", [36, 80, 132, None], ids=["36", "80", "132", "wide"])
def test_an_analyze_report_is_drawn_as_rich_draws_it(path: Path, width: int | None) -> None:
    from tpuperf.analysis import analyze
    from tpuperf.render.terminal import render_report

    report = analyze(_profile(path))
    drawn, plain, helped = _both(
        lambda c: render_report(report, c, wide=width is None), width or 80
    )
    assert plain == drawn
    assert "╭─ tpuperf analyze" in plain and "Recommendations" in plain
    if width != 36:  # at 36 columns the box's title is shortened past what fits: rich draws it
        assert not helped


@pytest.mark.parametrize("path", _PROFILES, ids=lambda p: p.name.split(".")[0])
@pytest.mark.parametrize("width", [36, 80, 132, None], ids=["36", "80", "132", "wide"])
def test_a_scope_tree_is_drawn_as_rich_draws_it(path: Path, width: int | None) -> None:
    from tpuperf.render.tree import render_tree
    from tpuperf.scopes import tree_report

    profile = _profile(path)
    for depth, min_pct in ((None, 0.0), (2, 1.0)):
        document = tree_report(profile, depth, min_pct)
        drawn, plain, helped = _both(
            lambda c, d=document: render_tree(d, c, wide=width is None), width or 80
        )
        assert plain == drawn
        assert plain.startswith("Scope tree ")
        if width != 36:  # at 36 columns a path is longer than a line: rich folds it
            assert not helped


def _node(name: str, kind: str, ms: float, children: list[dict[str, Any]]) -> dict[str, Any]:
    passes = {"forward": ms / 2, "backward": ms / 4, "optimizer": ms / 4, "other": 0.0}
    source = "/a/long/path/to/model.py:123" if kind == "op" else ""
    return {
        "name": name,
        "kind": kind,
        "ms_per_step": ms,
        "pct": ms,
        "passes": passes,
        "source": source,
        "children": children,
        "hidden": 0,
    }


@pytest.mark.parametrize("width", [20, 36, 80], ids=["20", "36", "80"])
def test_a_scope_tree_of_names_only_rich_fits_is_drawn_as_rich_draws_it(width: int) -> None:
    """Names of wide characters, markup, a tree deeper than its name column and a time
    wider than its own: the plain console draws what fits, rich the rest, the same."""
    from tpuperf.render.tree import render_tree

    deepest = _node("mul", "op", 1.0, [])
    for level in range(12):  # guides wider than the name column at the narrow widths
        deepest = _node(f"layer_{level}", "scope", 1.0, [deepest])
    children = [
        _node("漢字の層" * 6, "scope", 20.0, [_node("dot_general", "op", 20.0, [])]),
        _node("[bold]not markup[/bold]", "scope", 30.0, []),
        _node("slow", "op", 123456789.0, []),
        deepest,
    ]
    root = _node("(all)", "root", 100.0, children)
    document = {"source": "s", "windows": 1, "depth": None, "min_pct": 0.0, "tree": root}
    for wide in (False, True):
        drawn, plain, _ = _both(lambda c, w=wide: render_tree(document, c, wide=w), width)
        assert plain == drawn
        assert not wide or "[bold]not markup[/bold]" in plain  # as written, whole


@pytest.mark.parametrize(
    ("line", "soft_wrap", "plain"),
    [
        (Line("fits in the width"), False, True),
        (Line("host ").append("tpu-0", "cyan").append(" 1.2 MB"), False, True),
        (Line(""), False, True),
        (Line("x" * 30 + " and more words past the width"), False, True),
        (Line("x" * 40 + " a word longer than the width"), False, True),
        (Line("one cell each — é █ " * 4), False, True),
        (Line("x" * 30 + " and more words past the width"), True, True),
        (Line("two\nlines"), False, True),
        (Line("an escape \x1b[2J in a name"), False, False),
        (Line("a\ttab"), False, False),
        (Line("wide 漢字漢字漢字漢字漢字漢字漢字漢字"), False, False),
        (Line("an accent written apart: e\u0301 " * 3), False, False),
        (Line("wide 漢字"), False, True),
    ],
)
def test_a_line_is_written_as_rich_writes_it(line: Line, soft_wrap: bool, plain: bool) -> None:
    drawn, written, helped = _both(lambda c: c.print(line, soft_wrap=soft_wrap), 32)
    assert written == drawn
    assert helped is not plain


def test_several_renderables_blank_lines_and_other_options() -> None:
    def draw(console: Any) -> None:
        console.print()
        console.print(Line("one"), Line("two"))
        console.print(Line("dim", style="dim"))
        console.print("[b]a string[/b] :smile:", markup=False, soft_wrap=True)
        console.print(Line("end"), end="|\n")

    drawn, written, helped = _both(draw, 40)
    assert written == drawn
    assert written.startswith("\none two\ndim\n[b]a string[/b]")
    assert helped


@pytest.mark.parametrize(
    ("environ", "stream", "plain"),
    [
        ({}, io.StringIO(), True),
        ({"FORCE_COLOR": "1"}, io.StringIO(), False),
        ({}, io.TextIOWrapper(io.BytesIO(), encoding="latin-1"), False),
    ],
)
def test_the_console_of_a_pipe_is_plain_where_rich_would_draw_plain_text(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], stream: Any, plain: bool
) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    console = output.console(stream)
    assert isinstance(console, PlainConsole) is plain
    assert output.console(stream, color=True).color_system is not None


@given(
    st.lists(
        st.text(alphabet=" abc-/:;.,", min_size=0, max_size=14),
        min_size=1,
        max_size=12,
    ),
    st.integers(min_value=8, max_value=40),
)
@settings(max_examples=300, deadline=None)
def test_lines_are_wrapped_as_rich_wraps_them(words: list[str], width: int) -> None:
    line = Line(" ".join(words))
    drawn, written, _ = _both(lambda c: c.print(line), width)
    assert written == drawn


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.text(
            alphabet=st.sampled_from(["a", "Z", " ", "-", "1", ".", "\t", "\n", "é", "中", "\x1b"])
        ),
        max_size=8,
    ),
    st.integers(0, 8),
    st.booleans(),
)
def test_a_columns_cells_are_justified_as_one_by_one(
    texts: list[str], width: int, right: bool
) -> None:
    """fit's column of cells justified at once (printable ASCII by str.rjust/ljust) is each
    cell justified on its own, None where one of them is (too wide, a tab, a line break)."""
    from tpuperf.render.fit import _justified_all, justified

    one_by_one = [justified(text, width, right) for text in texts]
    assert _justified_all(texts, width, right) == (None if None in one_by_one else one_by_one)


# Text of one-cell characters (ASCII and not), spaces and line breaks, in words up to a line long.
_ONE_CELL_TEXT = st.text(alphabet=st.sampled_from(["a", "Z", "1", "-", " ", " ", "é", "—", "█"]))


@given(
    st.lists(st.text(alphabet=" ab-é—█", max_size=30), min_size=1, max_size=8),
    st.integers(min_value=1, max_value=40),
)
@settings(max_examples=300, deadline=None)
def test_lines_of_one_cell_characters_are_wrapped_and_folded_as_rich_does(
    words: list[str], width: int
) -> None:
    line = Line(" ".join(words))
    drawn, written, helped = _both(lambda c: c.print(line), width)
    assert written == drawn
    assert not helped


@given(
    st.lists(_ONE_CELL_TEXT | st.just("\n"), min_size=1, max_size=6),
    st.text(alphabet="ab -—", max_size=20),
    st.integers(min_value=1, max_value=50),
)
@settings(max_examples=300, deadline=None)
def test_a_panel_is_drawn_as_rich_draws_it(parts: list[str], title: str, width: int) -> None:
    body = Line()
    for i, part in enumerate(parts):
        body.append(part, "bold" if i % 2 else None)
    drawn, written, helped = _both(lambda c: c.print(Panel(body, title)), width)
    assert written == drawn
    drawn_title = len(title) + 2 if title else 0  # a space each side; rich draws no empty one
    assert helped is (width <= 4 or drawn_title > width - 4)


@given(
    st.lists(_ONE_CELL_TEXT, min_size=1, max_size=5),
    st.sampled_from(["1.", "10."]),
    st.integers(min_value=1, max_value=50),
)
@settings(max_examples=300, deadline=None)
def test_a_numbered_grid_is_drawn_as_rich_draws_it(
    texts: list[str], number: str, width: int
) -> None:
    lines = [Line(text, "bold" if i == 0 else None) for i, text in enumerate(texts)]
    grid = Numbered(number, lines, width=len(number) + 1, style="bold")
    drawn, written, _ = _both(lambda c: c.print(grid), width)
    assert written == drawn


def test_a_line_extended_by_another_is_drawn_as_the_texts_appended() -> None:
    """In colour, as the rich texts it stands for: one appended to the other."""
    from rich.text import Text

    line = Line("a", "bold").append("b")
    line.extend(Line("c", "dim").append("d", "red"))
    text = Text("a", "bold").append("b")
    text.append(Text("c", "dim").append("d", "red"))
    drawn = []
    for item in (line, text):
        buffer = io.StringIO()
        Console(file=buffer, width=20, force_terminal=True, color_system="standard").print(item)
        drawn.append(buffer.getvalue())
    assert drawn[0] == drawn[1]
    assert "\x1b[" in drawn[0] and line.plain == "abcd"


def test_the_characters_measured_without_rich_are_one_cell_as_rich_measures_them() -> None:
    from rich.cells import cell_len

    assert all(cell_len(char) == 1 for char in _ONE_CELL)
    for text in ("╭─ a — b … ─╮", "██▓▒░ x", "é — 漢字", "e\u0301"):
        assert cells(text) == cell_len(text)
