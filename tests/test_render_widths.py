"""Every command's terminal output, on every profile, at widths 80, 100, 120 and 200 (and
``--wide``): no line wider than the width, the identifying column present and non-empty in
every row (whole, or shortened to pieces of the name in order), rows on one line, and the
numbers whole and equal to the JSON's.

The 80-column outputs are also compared with reviewed files in tests/golden_text/, taken
through the CLI as a user sees them on a pipe at COLUMNS=80; regenerate them with

    pytest tests/test_render_widths.py --update-golden

and read the diff.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from tests._tables import check_table, is_shortening, key_cell, tables
from tests.conftest import CPU_FIXTURE, REPO, SHARED_PROFILES, Cli
from tpuperf.cli import main
from tpuperf.render.text import fmt_ms

GOLDEN_TEXT = Path(__file__).resolve().parent / "golden_text"
WIDTHS = [80, 100, 120, 200, None]  # None: --wide

# Every profile: the CPU fixture, and every real one in ../shared/profiles (when present).
PROFILES = [CPU_FIXTURE] + (
    sorted(SHARED_PROFILES.rglob("*.xplane.pb")) if SHARED_PROFILES.exists() else []
)
IDS = [p.name.split(".")[0] for p in PROFILES]


class Data:
    """What the commands show for one profile, computed once."""

    def __init__(self, path: Path) -> None:  # a file or a run directory
        from tpuperf.analysis import analyze
        from tpuperf.inventory import describe
        from tpuperf.opstats import aggregate_table
        from tpuperf.profiles import load

        profile = load(str(path))
        self.info = json.loads(json.dumps(describe(profile)))
        self.ops = aggregate_table(profile)
        self.ops_by_op = aggregate_table(profile, by="op")
        self.ops_per_device = aggregate_table(profile, by="category", per_device=True, top=3)
        self.report = analyze(profile)


_DATA: dict[Any, Data] = {}
# A generated training run too: several hosts, collectives (the report's collectives table).
SCENARIO = "collective_training"


@pytest.fixture(params=[*PROFILES, SCENARIO], ids=[*IDS, SCENARIO])
def data(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Data:
    key = request.param
    if key not in _DATA:
        path = key
        if key == SCENARIO:
            from fixtures.generate import write_run

            path = write_run(SCENARIO, tmp_path_factory.mktemp(SCENARIO), seed=0, steps=6)[0]
        _DATA[key] = Data(path)
    return _DATA[key]


@pytest.fixture(params=WIDTHS, ids=[str(w or "wide") for w in WIDTHS])
def width(request: pytest.FixtureRequest) -> int | None:
    """The width each table test renders at (None: --wide)."""
    return request.param  # type: ignore[no-any-return]


def _render(draw: Callable[[Console, bool], None], width: int | None) -> list[str]:
    buffer = io.StringIO()
    draw(Console(file=buffer, width=width or 80, color_system=None), width is None)
    lines = buffer.getvalue().splitlines()
    if width is not None:
        wide = [line for line in lines if cell_len(line) > width]
        assert not wide, f"{len(wide)} line(s) wider than {width}: {wide[:3]}"
    return lines


def _one(lines: list[str], header: str, first_column: bool = False) -> Any:
    found = [t for t in tables(lines, header) if not first_column or t.key_at == 0]
    assert len(found) == 1, f"{len(found)} tables with a {header!r} column"
    return found[0]


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (1234.56, "1,235 ms"),
        (123.4, "123 ms"),
        (12.345678, "12.35 ms"),
        (1.0, "1.00 ms"),
        (0.1234, "123.4 us"),
        (None, "-"),
        (float("nan"), "-"),
    ],
)
def test_milliseconds_are_printed_with_three_significant_places(ms: float, text: str) -> None:
    """The rule the tables below are checked with (fmt_ms, as test_terminal uses it): three
    significant places or more, microseconds under 1 ms, '-' for no value."""
    assert fmt_ms(ms) == text


def test_info(data: Data, width: int | None) -> None:
    from tpuperf.render.listings import render_info

    lines = _render(lambda c, wide: render_info(data.info, c, wide=wide), width)
    shown = [r for r in data.info["lines"] if r["events"]][:40]
    # Each table: its key column, its rows, and the count every row shows.
    for key, rows, count in (("chip", data.info["devices"], "ops"), ("line", shown, "events")):
        keys, counts = [r[key] for r in rows], [[f"{r[count]:,}"] for r in rows]
        check_table(lines, _one(lines, key), keys, counts, width)


@pytest.mark.parametrize("by", ["program_op", "op"])
def test_ops(data: Data, width: int | None, by: str) -> None:
    from tpuperf.render.listings import render_ops

    table = data.ops if by == "program_op" else data.ops_by_op
    lines = _render(lambda c, wide: render_ops(table, by, c, wide=wide), width)
    records = table.records()
    check_table(
        lines,
        _one(lines, "op"),
        [r["op"] for r in records],
        [[f"{r['total_time_ms']:,.3f}", f"{r['occurrences']:,}"] for r in records],
        width,
    )


def test_ops_per_device_prints_one_table_per_device(data: Data, width: int | None) -> None:
    from tpuperf.render.listings import render_ops

    table = data.ops_per_device
    lines = _render(
        lambda c, wide: render_ops(table, "category", c, wide=wide, per_device=True), width
    )
    devices: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for record in table.records():
        devices.setdefault((record["host"], record["device"]), []).append(record)
    found = tables(lines, "category")
    assert len(found) == len(devices)
    for (host, device), one, rows in zip(
        sorted(devices), found, [devices[k] for k in sorted(devices)], strict=True
    ):
        title = next(
            line for line in lines[max(0, one.rule - 3) : one.rule][::-1] if "device" in line
        )
        assert title == f"{host} device {device}"
        check_table(
            lines,
            one,
            [r["category"] for r in rows],
            [[f"{r['total_time_ms']:,.3f}", f"{r['time_pct']:,.1f}"] for r in rows],
            width,
        )


def test_analyze(data: Data, width: int | None) -> None:
    from tpuperf.render.terminal import render_report

    report = data.report
    lines = _render(lambda c, wide: render_report(report, c, wide=wide), width)
    top = report.top_ops.records()
    if top:
        check_table(
            lines,
            _one(lines, "op", first_column=True),
            [r["op"] for r in top],
            [[fmt_ms(r["ms_per_step"])] for r in top],
            width,
        )
    collectives = report.results.get("collectives")
    by_kind = collectives.metrics.get("by_kind") if collectives else None
    if by_kind:
        check_table(
            lines,
            _one(lines, "kind", first_column=True),
            list(by_kind),
            [[fmt_ms(m["exposed_ms_per_step"])] for m in by_kind.values()],
            width,
        )
    for i, rec in enumerate(report.recommendations, 1):
        assert any(line.startswith(f"{i}. ") for line in lines)
        assert any(f"({rec.est_savings_pct:.1f}%)" in line for line in lines)


def test_analyzers(width: int | None) -> None:
    from tpuperf.analyzers import base

    from tpuperf.render.listings import render_analyzers

    rows = [
        {"name": name, "summary": a.summary, "origin": "built-in"}
        for name, a in base.available().items()
    ]
    lines = _render(lambda c, wide: render_analyzers(rows, c, wide=wide), width)
    check_table(
        lines,
        _one(lines, "analyzer"),
        [r["name"] for r in rows],
        [[] for _ in rows],
        width,
        multiline=True,
    )


@pytest.fixture(scope="module")
def scan_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("scan") / "rows.ndjson"
    assert main(["scan", *map(str, PROFILES), "--no-cache", "--workers", "1", "-o", str(out)]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def _scan_number(value: float) -> str:
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def test_scan(scan_rows: list[dict[str, Any]], width: int | None) -> None:
    from tpuperf.render.listings import render_scan

    lines = _render(lambda c, wide: render_scan(scan_rows, c, wide=wide), width)
    check_table(
        lines,
        _one(lines, "profile"),
        [r["path"] if width is None else f"{r['run']}/{r['host']}" for r in scan_rows],
        [
            [_scan_number(r["step_time_ms.median"])]
            if r["step_time_ms.median"] is not None and math.isfinite(r["step_time_ms.median"])
            else []
            for r in scan_rows
        ],
        width,
    )


@pytest.fixture(scope="module")
def pair_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Scan rows of base/ and new/, two logdirs holding a run of the same name."""
    from fixtures.generate import write_pair

    root = tmp_path_factory.mktemp("pair")
    write_pair("recompiled", root)
    out = root / "rows.ndjson"
    assert main(["scan", str(root), "--no-cache", "--workers", "1", "-o", str(out)]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_scan_tells_runs_of_one_name_apart(
    pair_rows: list[dict[str, Any]], width: int | None
) -> None:
    from tpuperf.render.listings import render_scan

    rows = pair_rows
    assert [(r["run"], r["host"]) for r in rows] == [("recompiled", "tpu-host-0")] * 2
    lines = _render(lambda c, wide: render_scan(rows, c, wide=wide), width)
    found = _one(lines, "profile")
    cells = [key_cell(line, found.key_at) for line in lines[found.rule + 1 : found.rule + 3]]
    if width is None:
        assert cells == [r["path"] for r in rows]
        return
    assert cells[0] != cells[1]
    for cell, side in zip(cells, ("base", "new"), strict=True):
        assert cell.startswith(f"{side}/") and cell.endswith("/recompiled/tpu-host-0"), cell
        assert is_shortening(cell, f"{side}/plugins/profile/recompiled/tpu-host-0")


def test_scan_labels_are_the_shortest_distinguishing_ends() -> None:
    from tpuperf.render.listings import scan_labels

    def row(path: str, host: str = "h") -> dict[str, Any]:
        return {"path": path, "run": path.rstrip("/").split("/")[-2 if host else -1], "host": host}

    rows = [
        row("/logs/a/plugins/profile/r1/h.xplane.pb"),
        row("/logs/b/plugins/profile/r1/h.xplane.pb"),
        row("/logs/b/plugins/profile/r2/h.xplane.pb"),  # the only r2/h: stays run/host
        row("/x/deep/r3/h.xplane.pb"),
        row("/y/deep/r3/h.xplane.pb.gz"),  # differs where its name is read: deep/ is shared
        row("gs://bucket/p/r4/", host=""),  # --per-run rows, named by their run
        row("gs://other/p/r4/", host=""),
    ]
    assert scan_labels(rows) == [
        "a/plugins/profile/r1/h",
        "b/plugins/profile/r1/h",
        "r2/h",
        "x/deep/r3/h",
        "y/deep/r3/h",
        "bucket/p/r4",
        "other/p/r4",
    ]
    assert scan_labels(rows, wide=True) == [r["path"] for r in rows]


def test_paths_keep_whole_components_and_where_they_differ() -> None:
    from tpuperf.render.fit import shorten, shorten_apart

    path = "base/plugins/profile/recompiled/tpu-host-0"
    assert shorten(path, 37) == "base/…/profile/recompiled/tpu-host-0"
    assert shorten(path, 20) == "base/…/tpu-host-0"
    # Two paths that differ in a component shortening would leave out.
    pair = ["logs/a/plugins/profile/r1/h", "logs/b/plugins/profile/r1/h"]
    assert [shorten(p, 18) for p in pair] == ["…/profile/r1/h"] * 2
    assert shorten_apart(pair, 18) == ["…/a/…/profile/r1/h", "…/b/…/profile/r1/h"]
    assert shorten_apart(pair, 27) == pair


# TensorFlow's Eigen kernels as the V100 profile names them (one assignment of each shape).
_MAP = "Eigen::TensorMap<Eigen::Tensor<{}, 1, 1, long>, 16, Eigen::MakePointer>"
_EIGEN = (
    "void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<Eigen::TensorAssignOp<{dst}, "
    "{src} const> const, Eigen::GpuDevice>, long>(Eigen::TensorEvaluator<...>, long)"
)


def _eigen(dst: str, src: str) -> str:
    return _EIGEN.format(dst=_MAP.format(dst), src=src)


@pytest.mark.parametrize(
    ("name", "compact"),
    [
        (
            _eigen(
                "Eigen::half",
                f"Eigen::TensorConversionOp<Eigen::half, {_MAP.format('float const')} const>",
            ),
            "Eigen: half = half(float)",
        ),
        (
            _eigen(
                "bool",
                "Eigen::TensorCwiseUnaryOp<Eigen::internal::scalar_right<bool, Eigen::half, "
                "Eigen::internal::greater_equal<Eigen::half>, false>, "
                f"{_MAP.format('Eigen::half const')} const>",
            ),
            "Eigen: bool = greater_equal(half, c)",
        ),
        (
            _eigen(
                "float",
                "Eigen::TensorCwiseBinaryOp<Eigen::internal::scalar_product_op<float, float>, "
                f"{_MAP.format('float const')} const, {_MAP.format('float const')} const>",
            ),
            "Eigen: float = product(float, float)",
        ),
        (
            _eigen(
                "float",
                "Eigen::TensorBroadcastingOp<Eigen::array<int, 2ul> const, "
                f"{_MAP.format('float const')} const>",
            ),
            "Eigen: float = Broadcasting(array<int, 2>, float)",
        ),
        (
            "void k::Fill<k::Uniform<k::Philox, Eigen::half> >(int*, long)",
            "Fill<Uniform<Philox, half>>",
        ),
        ("fusion.123", "fusion.123"),
        ("jit(<lambda>)/Dense_0", "jit(<lambda>)/Dense_0"),
        ("operator<", "operator<"),  # unbalanced: as it is
    ],
)
def test_compact_name_writes_templates_short(name: str, compact: str) -> None:
    from tpuperf.render.fit import compact_name, display_name

    assert compact_name(display_name(name)) == compact


def test_v100_kernels_are_told_apart_at_80_columns() -> None:
    """Each of the V100 profile's Eigen kernels shows, at 80 columns, what it computes (its
    functor, or the types a conversion goes between), and no two rows read the same."""
    from tpuperf.opstats import aggregate_table
    from tpuperf.profiles import load
    from tpuperf.render.listings import render_ops

    path = SHARED_PROFILES / "gpu" / "v100_8gpu_tf_training.xplane.pb"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    table = aggregate_table(load(str(path)))
    lines = _render(lambda c, wide: render_ops(table, "program_op", c, wide=wide), 80)
    found = _one(lines, "op")
    names = [r["op"] for r in table.records()]
    cells = [key_cell(line, found.key_at) for line in lines[found.rule + 1 :][: len(names)]]
    assert len(set(cells)) == len(cells) == len(names) > 10
    for name, cell in zip(names, cells, strict=True):
        assert "TensorMap" not in cell and "MakePointer" not in cell
        # What the kernel computes, read from its raw name independently of the renderer.
        functors = re.findall(r"internal::(?:scalar_(\w+?)_op|(greater_equal))<", name)
        for functor in {a or b for a, b in functors}:
            assert functor in cell, (functor, cell)
        conversion = re.search(r"ConversionOp<(?:Eigen::)?(\w+), .*?Tensor<(?:Eigen::)?(\w+)", name)
        if conversion:
            assert f"{conversion[1]}({conversion[2]})" in cell, cell


# --------------------------------------------------------------------------- golden text


def _golden_commands(path: Path) -> list[tuple[str, list[str]]]:
    return [
        ("info", ["info", str(path)]),
        ("ops", ["ops", str(path), "--top", "15"]),
        ("ops_per_device", ["ops", str(path), "--by", "category", "--per-device", "--top", "3"]),
        ("analyze", ["analyze", str(path)]),
        ("ops_scope", ["ops", str(path), "--by", "scope", "--top", "15"]),
        ("tree", ["tree", str(path)]),
        ("diff", ["diff", str(path), str(path)]),
    ]


@pytest.mark.parametrize("width", [80, 100, 120, 200])
@pytest.mark.parametrize("path", PROFILES, ids=IDS)
def test_scope_tree_and_diff_fit(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, path: Path, width: int
) -> None:
    """ops --by scope|source, tree and diff: no line wider than the terminal."""
    monkeypatch.setenv("COLUMNS", str(width))
    for args in (
        ["ops", str(path), "--by", "scope"],
        ["ops", str(path), "--by", "source"],
        ["tree", str(path), "--min-pct", "0"],
        ["diff", str(path), str(path), "--top", "30"],
    ):
        lines = _cli_text(cli, args).splitlines()
        wide = [line for line in lines if cell_len(line) > width]
        assert not wide, f"{args[0]} {args[-1]}: {len(wide)} line(s) wider than {width}: {wide[:2]}"


def _relative(path: Path) -> tuple[Path, Path]:
    """The directory to run in, and the profile's path from there (outputs name it)."""
    if path == CPU_FIXTURE:
        return REPO, path.relative_to(REPO)
    return SHARED_PROFILES.parent, path.relative_to(SHARED_PROFILES.parent)


def _cli_text(cli: Cli, args: list[str]) -> str:
    code, text, _ = cli(*args)
    assert code == 0, args
    # The decoder depends on the install, not on the profile.
    text = text.replace(
        "decoder numpy (the C module is not built: slower, same results)",
        "decoder C module (tpuperf._wire_native)",
    )
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def _check_golden(request: pytest.FixtureRequest, name: str, text: str) -> None:
    path = GOLDEN_TEXT / f"{name}.txt"
    lines = text.splitlines()
    assert all(cell_len(line) <= 80 for line in lines), name
    if request.config.getoption("--update-golden"):
        GOLDEN_TEXT.mkdir(exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        pytest.fail(f"no golden text {path.name}: run pytest {__file__} --update-golden")
    assert text == path.read_text(), f"{name}: the output changed; see --update-golden"


def _must_not_decode(*args: object) -> None:
    raise AssertionError("a warm run decoded its profile instead of reading the cache")


@pytest.mark.parametrize("mode", ["cold", "warm"])
@pytest.mark.parametrize("path", PROFILES, ids=IDS)
def test_golden_text_at_80_columns(
    request: pytest.FixtureRequest,
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    path: Path,
    mode: str,
) -> None:
    """Each text golden decoded from the file (cold) and served from the cache (warm)."""
    from tpuperf import cache as cache_mod

    monkeypatch.setenv("COLUMNS", "80")
    root, relative = _relative(path)
    monkeypatch.chdir(root)
    if mode == "warm":
        cache_mod.load(relative)  # into the test's cache (TPUPERF_CACHE_DIR)
        monkeypatch.setattr(cache_mod, "decode_host", _must_not_decode)
    for command, args in _golden_commands(relative):
        text = _cli_text(cli, args if mode == "warm" else [*args, "--no-cache"])
        _check_golden(request, f"{path.name.split('.')[0]}.{command}", text)


def test_golden_text_scan_and_analyzers(
    request: pytest.FixtureRequest,
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    _check_golden(request, "analyzers", _cli_text(cli, ["analyzers"]))
    if not SHARED_PROFILES.exists():
        pytest.skip(f"real profiles not available ({SHARED_PROFILES} is absent)")
    monkeypatch.chdir(SHARED_PROFILES.parent)
    text = _cli_text(cli, ["scan", "profiles", "--no-cache", "--workers", "1"])
    _check_golden(request, "scan", text)
    assert re.search(r"tpu/v6e_4chip_inference\s+784\.3", text)


# Fit.print draws its tables line by line (fit._Lines): rich's Table laid each cell out on its
# own, seconds for the thousands of rows of `tpuperf ops` on a large profile. The lines must
# be the bytes rich's Table draws, in colour too.
_CELLS = st.sampled_from(
    [
        "fusion.1",
        "loop fusion",
        "a" * 50,
        "x/y/z/a/long/path/name",
        "é漢字",
        "",
        "-",
        "  lead",
        "12  ",
        "Eigen<int, float>",
        "tab\there",
        "line\nbreak",
        "\x1b[31mred",
    ]
)


def _drawn(layout: Any, rows: list[list[str]], styles: Any, colour: bool, lines: bool) -> str:
    from tpuperf import output
    from tpuperf.render import fit as fit_mod

    buffer = io.StringIO()
    console = output.console(buffer, width=80, color=colour)
    if lines:
        layout.print(console, rows, title="title", styles=styles)
    else:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(fit_mod._Lines, "of", classmethod(lambda cls, *args: None))
            layout.print(console, rows, title="title", styles=styles)
    return buffer.getvalue()


@settings(max_examples=150, deadline=None)
@given(
    spec=st.lists(
        st.tuples(
            st.sampled_from(["text", "number", "number"]),
            st.sampled_from(["op", "category", "total ms", "peak HBM GB/s", "n"]),
            st.integers(0, 5),
        ),
        max_size=5,
    ),
    cells=st.data(),
    width=st.sampled_from([16, 40, 60, 80, 120, None]),
    colour=st.booleans(),
)
def test_tables_drawn_line_by_line_are_what_rich_draws(
    spec: list[tuple[str, str, int]], cells: Any, width: int | None, colour: bool
) -> None:
    from tpuperf.render.fit import Column, _Lines, fit

    columns = [Column("name", "key")] + [Column(h, k, drop=d) for k, h, d in spec]  # type: ignore[arg-type]
    numbers = st.floats(0, 1e9).map(lambda v: f"{v:,.2f}")
    n_rows = cells.draw(st.integers(0, 6))
    rows = [
        [cells.draw(numbers if c.kind == "number" else _CELLS) for c in columns]
        for _ in range(n_rows)
    ]
    styles = cells.draw(
        st.none()
        | st.lists(
            st.sampled_from([None, "green", "dim", "bold on blue"]),
            min_size=n_rows,
            max_size=n_rows,
        )
    )
    layout = fit(columns, rows, width)
    assert _Lines.of(layout, rows, styles) is not None  # names are shortened, numbers fit
    drawn = _drawn(layout, rows, styles, colour, lines=True)
    assert drawn == _drawn(layout, rows, styles, colour, lines=False)


def test_tables_rich_draws_alone() -> None:
    """A prose column (it wraps) or a cell wider than its column is drawn by rich's Table."""
    from tpuperf.render.fit import Column, Fit, _Lines

    prose = Fit([Column("name", "key"), Column("summary", "prose")], [10, 30])
    assert _Lines.of(prose, [["a", "b"]], None) is None
    narrow = Fit([Column("name", "key"), Column("n")], [10, 3])
    assert _Lines.of(narrow, [["a", "1,234"]], None) is None
    assert _Lines.of(narrow, [["a", "123"]], None) is not None


_NAMES = st.lists(
    st.text(alphabet=st.sampled_from(["a", "Z", "_", ".", "/", ":", "<", ">", "(", " ", "é"]))
    | st.sampled_from(
        ["void ns::Kernel<half>(int)", "void k<int>(float)", "fusion.12", "a::b", "\x1b[2J"]
    ),
    max_size=8,
)


@given(_NAMES, st.integers(min_value=0, max_value=30))
@settings(max_examples=300, deadline=None)
def test_a_column_of_names_is_shown_as_each_name_alone_would_be(
    names: list[str], width: int
) -> None:
    """display_names and shorten_all take whole columns at once where nothing changes: the
    same cells as display_name and shorten of each name; shorten_apart of names that all fit
    leaves them as they are."""
    from tpuperf.render.fit import display_name, display_names, shorten, shorten_all, shorten_apart

    shown = display_names(names)
    assert shown == [display_name(name) for name in names]
    assert shorten_all(shown, width) == [shorten(name, width) for name in shown]
    if all(len(name) <= width and name.isascii() and name.isprintable() for name in shown):
        assert shorten_apart(shown, width) == shown


def test_a_column_of_numbers_is_formatted_at_once_as_one_by_one() -> None:
    from tpuperf.render.listings import _cells

    for values in ([1, 22, 4_000_000], [1.5, 2.25, 1e6], [1.5, None, float("nan"), 3.0], []):
        for spec in (",", ",.3f", ",.1f"):
            if spec == "," or all(isinstance(v, float) for v in values):
                expected = ["-" if v is None or v != v else format(v, spec) for v in values]
                assert _cells(values, spec) == expected
    assert _cells([1.0, None], lambda v: f"<{v}>") == ["<1.0>", "-"]
