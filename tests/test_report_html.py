"""`tpuperf report`: the self-contained HTML report, opened in headless Chromium.

Each page is loaded the way a person opens an attached file: no console errors, no
request beyond the file itself, one roofline point per op of the roofline's op table,
one bar per analysed step, and screenshots to look at, kept in test-artifacts/report/.
Without a chromium binary these tests skip; the checks that need no browser still run.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from browser import chromium_path, visit
from conftest import CPU_FIXTURE, REPO, shared_profile
from hypothesis import given
from hypothesis import strategies as st

from fixtures.generate import _xspace, generate, generate_scoped, write_run
from fixtures.hostile import _steady, _tpu_plane
from tpuperf import _xspace_schema as xpb
from tpuperf.analysis import analyze
from tpuperf.cli import main
from tpuperf.config import AnalysisConfig
from tpuperf.profiles import load
from tpuperf.render.html_page import (
    DEVICES_CHART,
    ROOFLINE_CHART,
    SCOPES_CHART,
    STEPS_CHART,
    render_html,
)
from tpuperf.render.terminal import fmt_ms, fmt_pct
from tpuperf.schema import PASSES
from tpuperf.timeline import build_timeline

ARTIFACTS = REPO / "test-artifacts" / "report"

needs_chromium = pytest.mark.skipif(
    chromium_path() is None,
    reason="no chromium binary (Debian: apt-get install chromium); .ci/run installs it",
)

# What the tests count in the page, evaluated after the charts are drawn.
ROOFLINE_POINTS = (
    f"document.querySelectorAll('#{ROOFLINE_CHART} .scatterlayer .points path.point').length"
)
STEP_BARS = (
    f"Array.from(document.querySelectorAll('#{STEPS_CHART} .barlayer .trace'))"
    ".map(t => t.querySelectorAll('.point').length)"
)
DEVICE_BARS = (
    f"Array.from(document.querySelectorAll('#{DEVICES_CHART} .barlayer .trace'))"
    ".map(t => t.querySelectorAll('.point').length)"
)
DEVICE_LABELS = (
    f"Array.from(document.querySelectorAll('#{DEVICES_CHART} .yaxislayer-above .ytick text'))"
    ".map(t => t.textContent)"
)
SCRIPTS = "document.querySelectorAll('script').length"
TOP_OPS_CELLS = (
    "Array.from(document.querySelectorAll('#top-ops-table tbody tr'))"
    ".map(r => Array.from(r.cells).map(c => c.textContent))"
)
# Hover the first op of each roofline trace and read the hover label.
HOVER_ROOFLINE = f"""(() => {{
  const div = document.getElementById('{ROOFLINE_CHART}');
  const out = [];
  div.data.forEach((trace, curve) => {{
    if (trace.mode !== 'markers') return;
    Plotly.Fx.hover(div, [{{curveNumber: curve, pointNumber: 0}}]);
    out.push(div.querySelector('.hoverlayer').textContent);
  }});
  Plotly.Fx.unhover(div);
  return out;
}})()"""
# Hover every roofline point whose label holds NEEDLE and read the hover labels.
HOVER_MATCHING = f"""(() => {{
  const div = document.getElementById('{ROOFLINE_CHART}');
  const out = [];
  div.data.forEach((trace, curve) => {{
    (trace.text || []).forEach((text, point) => {{
      if (!text.includes('NEEDLE')) return;
      Plotly.Fx.hover(div, [{{curveNumber: curve, pointNumber: point}}]);
      out.push(div.querySelector('.hoverlayer').textContent);
    }});
  }});
  Plotly.Fx.unhover(div);
  return out;
}})()"""
# Sort the top-ops table by time/step (a click on its header), then read that column.
SORTED_TIMES = """(() => {
  const th = Array.from(document.querySelectorAll('#top-ops-table th'))
    .find(h => h.textContent.startsWith('time/step'));
  th.click(); th.click();  // largest first, then smallest first
  return Array.from(document.querySelectorAll('#top-ops-table tbody tr'))
    .map(r => parseFloat(r.cells[th.cellIndex].dataset.sort));
})()"""


def _open(page: Path, tmp_path: Path, name: str, *extra: str, element: str = ROOFLINE_CHART) -> Any:
    """Visit ``page``; check that it made no request and logged no error; keep screenshots
    (of the page, and of the chart ``element``)."""
    shots = {f"#{element}": tmp_path / f"{name}-{element}.png"}
    result = visit(
        page,
        screenshot=tmp_path / f"{name}.png",
        expressions=(ROOFLINE_POINTS, STEP_BARS, DEVICE_BARS, SCRIPTS, *extra),
        element_screenshots=shots,
    )
    assert result.console_errors == []
    assert result.dialogs == []
    # The one request is the page itself: no script, style, font or image from anywhere.
    assert result.requests == [page.resolve().as_uri()]
    assert (tmp_path / f"{name}.png").stat().st_size > 10_000
    # Two scripts: Plotly and the page's own (nothing a profile string could have added).
    assert result.values[SCRIPTS] == 2
    # Kept where a person (or CI, as artifacts) can look at them after the run.
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for shot in (tmp_path / f"{name}.png", *shots.values()):
        shutil.copyfile(shot, ARTIFACTS / shot.name)
    return result


def _report(source: Path, **config: Any) -> Any:
    return analyze(load(source), config=AnalysisConfig(**config))


@needs_chromium
def test_report_of_a_multi_host_training_run(tmp_path: Path) -> None:
    run_dir, truth = write_run("straggler", tmp_path / "run", steps=8)
    page = tmp_path / "straggler.html"
    assert main(["report", str(run_dir), "-o", str(page), "--top", "12"]) == 0
    report = _report(run_dir, top_ops=12)
    result = _open(
        page, tmp_path, "straggler", DEVICE_LABELS, HOVER_ROOFLINE, TOP_OPS_CELLS, SORTED_TIMES
    )
    values = result.values

    ops = report.results["roofline"].tables["ops"]
    assert ops.n > 10
    assert values[ROOFLINE_POINTS] == ops.n
    # Four stacked parts (compute, exposed collective, exposed copy, idle), a bar per step each.
    steps = report.summary["steps_analyzed"]
    assert steps == len(truth.step_time_ps) - 1  # warm-up left out
    assert values[STEP_BARS] == [steps] * 4
    devices = len(truth.devices)
    assert values[DEVICE_BARS] == [devices] * 4
    # The straggler the generator made is the one the chart marks.
    host, device = truth.straggler
    marked = [label for label in values[DEVICE_LABELS] if "straggler" in label]
    assert marked == [f"{host}/device:{device} · straggler (medium confidence)"]

    # Hover names the op, its program, time per step, intensity, FLOP/s, bandwidth and
    # efficiency, as the roofline's op table has them.
    hovers = values[HOVER_ROOFLINE]
    assert hovers
    records = {r["op"]: r for r in ops.records()}
    for text in hovers:
        op = next(name for name in records if text.startswith(name))
        row = records[op]
        assert f"module {row['module']}" in text
        assert "time/step" in text and "FLOP/byte" in text
        assert f"{row['achieved_tflops']:.3g} TFLOP/s" in text
        assert f"{row['achieved_gbps']:.4g} GB/s" in text
        assert f"efficiency {row['efficiency_pct']:.1f}%" in text

    # The top-ops table is the report's, and sorts by a click on a header.
    rows = values[TOP_OPS_CELLS]
    assert [r[0] for r in rows] == report.top_ops.strings("op").tolist()
    times = values[SORTED_TIMES]
    assert times == sorted(times)
    assert sorted(times) == sorted(report.top_ops.array("ms_per_step").tolist())


@needs_chromium
def test_report_of_the_real_v6e_profile(tmp_path: Path) -> None:
    source = shared_profile("tpu/v6e_4chip_inference.xplane.pb")
    page = tmp_path / "v6e.html"
    assert main(["analyze", str(source), "--format", "html", "-o", str(page)]) == 0
    report = _report(source)
    result = _open(page, tmp_path, "v6e", "document.querySelector('#summary').textContent")
    values = result.values
    assert values[ROOFLINE_POINTS] == report.results["roofline"].tables["ops"].n
    assert values[STEP_BARS] == [report.summary["steps_analyzed"]] * 4
    assert values[DEVICE_BARS] == [report.summary["devices"]] * 4
    summary = values["document.querySelector('#summary').textContent"]
    assert "TPU v6 Lite" in summary
    assert f"{report.summary['peak_tflops']:g} TFLOP/s" in summary
    assert "from profile" in summary


def _figures(text: str) -> dict[str, Any]:
    """The page's chart figures (the JSON its script draws)."""
    found = re.search(r"const FIGURES = (\{.*?\});\n", text, re.S)
    assert found is not None
    figures: dict[str, Any] = json.loads(found.group(1))
    return figures


def _section(text: str, anchor: str) -> str:
    section = text[text.index(f'<section id="{anchor}">') :]
    return section[: section.index("</section>")]


def test_report_where_no_op_has_flops_draws_no_roofline(tmp_path: Path) -> None:
    """Ops that record bytes but no FLOPs have no place on log axes: the section names them and
    draws no chart (this page was an internal error: the axes' range of no point)."""
    path = tmp_path / "no_flops.xplane.pb"
    plane = _tpu_plane(
        0,
        ["fusion.0", "fusion.1"],
        _steady(ops=2),
        op_stats=lambda i: [("hlo_category", "loop fusion"), ("bytes_accessed", 1000 + i)],
    )
    path.write_bytes(_xspace([plane], "host"))
    report = _report(path)
    ops = report.results["roofline"].tables["ops"]
    assert sorted(ops.strings("op").tolist()) == ["fusion.0", "fusion.1"]
    assert not (ops.array("flops") > 0).any()
    text = render_html(report)
    assert ROOFLINE_CHART not in _figures(text)
    section = _section(text, "roofline")
    assert "2 op(s) with no FLOPs or no bytes cannot be placed" in section
    assert "fusion.0" in section and "fusion.1" in section
    assert "no chart is drawn" in section
    # The other charts are still there, and the CLI writes the page.
    assert STEPS_CHART not in _figures(text)  # no steps in this profile: said in a note
    page = tmp_path / "no_flops.html"
    assert main(["report", str(path), "-o", str(page)]) == 0
    assert "no chart is drawn" in page.read_text()


# --------------------------------------------------------------------------- scopes

ICICLE_SLICES = f"document.querySelectorAll('#{SCOPES_CHART} g.slice').length"
ICICLE_LABELS = (
    f"Array.from(document.querySelectorAll('#{SCOPES_CHART} g.slice text')).map(t => t.textContent)"
)
PASSES_CARD = "document.querySelector('#passes-card').textContent"
TOP_OPS_HEAD = "Array.from(document.querySelectorAll('#top-ops-table th')).map(h => h.textContent)"
SOURCE_TITLES = (
    "Array.from(document.querySelectorAll('#top-ops-table tbody tr'))"
    ".map(r => r.cells[r.cells.length - 1].title)"
)


def _icicle_paths(figure: dict[str, Any]) -> dict[str, int]:
    """Each icicle node's scope path (labels of its ancestors, the root left out) -> value."""
    trace = figure["data"][0]
    assert trace["type"] == "icicle" and trace["branchvalues"] == "total"
    index = {node_id: i for i, node_id in enumerate(trace["ids"])}
    out = {}
    for i in range(len(trace["ids"])):
        names, j = [], i
        while trace["parents"][j]:
            names.append(trace["labels"][j])
            j = index[trace["parents"][j]]
        out["/".join(reversed(names))] = trace["values"][i]
    assert len(out) == len(trace["ids"])  # no two nodes at one path
    return out


def _check_code_columns(report: Any, rows: list[list[str]], head: list[str]) -> None:
    """The top-ops table's scope / pass / source cells are the report's."""
    assert head[-3:] == ["scope / primitive", "pass", "source"]
    for row, record in zip(rows, report.top_ops.records(), strict=True):
        path = "/".join(p for p in (record["scope"], record["primitive"]) if p)
        assert row[-3:] == [path, record["pass"], record["source"].rsplit("/", 1)[-1]]


def _check_passes_card(report: Any, text: str) -> None:
    passes = report.summary["passes"]
    for name in PASSES:
        value = passes[name]
        assert f"{name} {fmt_ms(value['ms_per_step'])} ({fmt_pct(value['pct'])})" in text


@needs_chromium
def test_report_of_a_scoped_run_draws_the_scope_tree(tmp_path: Path) -> None:
    """The icicle of a generated run with known scopes: one box per node of the scope tree,
    each as long as the time the truth gives its scope; the pass card and the top ops' code
    columns are the report's."""
    run = generate_scoped(steps=4, devices=2)
    source = tmp_path / "tpu-host-0.xplane.pb"
    source.write_bytes(run.xspaces["tpu-host-0"])
    truth = run.truth.notes["scopes"]
    page = tmp_path / "scoped.html"
    # Every step analysed: the tree is over the report's step windows, which then hold every
    # op but the init call before the first step.
    assert main(["report", str(source), "--warmup", "0", "-o", str(page)]) == 0
    report = _report(source, top_ops=25, warmup_steps=0)  # as `report` (--top 25)

    steps_ops = {n: o for n, o in truth["ops"].items() if not n.startswith("init_")}
    paths = _icicle_paths(_figures(page.read_text())[SCOPES_CHART])
    assert paths[""] == sum(o["time_ps"] for o in steps_ops.values())  # the root
    for scope, time_ps in truth["scope_time_ps"].items():
        if not scope.startswith("jit(init)"):
            assert paths[scope] == time_ps, scope
    assert "jit(init)" not in paths
    assert paths["(no scope)"] == truth["pass_time_ps"]["other"]
    leaves: dict[str, int] = {}
    for o in steps_ops.values():
        if o["levels"]:
            leaf = "/".join([*o["levels"], o["primitive"]])
            leaves[leaf] = leaves.get(leaf, 0) + o["time_ps"]
    for leaf, time_ps in leaves.items():
        assert paths[leaf] == time_ps, leaf
    deepest = max(len(p.split("/")) for p in paths)

    result = _open(
        page,
        tmp_path,
        "scoped",
        ICICLE_SLICES,
        ICICLE_LABELS,
        PASSES_CARD,
        TOP_OPS_CELLS,
        TOP_OPS_HEAD,
        SOURCE_TITLES,
        element=SCOPES_CHART,
    )
    values = result.values
    # Six levels show at once (root, jit(train_step), Transformer, Block_0, Attention, softmax),
    # and the seventh as unlabelled boxes: every node is drawn.
    assert deepest == 6
    assert values[ICICLE_SLICES] == len(paths)
    assert {"Transformer", "Block_0", "Block_1", "MLP", "Attention", "adam"} <= set(
        values[ICICLE_LABELS]
    )
    _check_passes_card(report, values[PASSES_CARD])
    _check_code_columns(report, values[TOP_OPS_CELLS], values[TOP_OPS_HEAD])
    assert values[SOURCE_TITLES] == report.top_ops.strings("source").tolist()


@needs_chromium
def test_report_of_the_real_cpu_capture_draws_its_scope_tree(tmp_path: Path) -> None:
    page = tmp_path / "cpu.html"
    assert main(["report", str(CPU_FIXTURE), "-o", str(page)]) == 0
    report = _report(CPU_FIXTURE, top_ops=25)
    profile = load(CPU_FIXTURE)
    paths = _icicle_paths(_figures(page.read_text())[SCOPES_CHART])
    # Against the profile's own data: op self time, all of it and that of jit(train_step).
    scopes = profile.scopes
    in_step = set(
        scopes.index[scopes["scope"].astype(str).str.startswith("jit(train_step)")].tolist()
    )
    from tpuperf import scopes as sc

    data = sc.scopes(profile)
    total = step = 0
    # The ops of the step windows the report analyses (warm-up left out), as analyze counts.
    for view in build_timeline(profile, AnalysisConfig()).devices:
        rows = data.rows_at(view.key, view.selected)
        self_ps = view.ops.array_at("self_ps", view.selected)
        total += int(self_ps.sum())
        in_scope = [r in in_step for r in rows.tolist()]
        step += int(self_ps[in_scope].sum())
    assert paths[""] == total
    assert paths["jit(train_step)"] == step > 0.9 * total
    result = _open(
        page,
        tmp_path,
        "cpu",
        ICICLE_SLICES,
        PASSES_CARD,
        TOP_OPS_CELLS,
        TOP_OPS_HEAD,
        element=SCOPES_CHART,
    )
    values = result.values
    assert values[ICICLE_SLICES] == len(paths)  # three levels: all drawn
    assert report.summary["passes"]["backward"]["pct"] > 30  # a training step
    _check_passes_card(report, values[PASSES_CARD])
    _check_code_columns(report, values[TOP_OPS_CELLS], values[TOP_OPS_HEAD])


def test_report_without_scope_information_says_so_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "no_scopes.xplane.pb"
    path.write_bytes(_xspace([_tpu_plane(0, ["fusion.0", "fusion.1"], _steady(ops=2))], "host"))
    report = _report(path)
    assert report.summary["passes"] is None
    text = render_html(report)
    section = _section(text, "scopes")
    assert section.count('<p class="note">') == 1
    assert "No scope information in this profile" in section
    assert SCOPES_CHART not in _figures(text) and SCOPES_CHART not in section
    assert "passes-card" not in text
    assert "scope / primitive" not in _section(text, "top-ops")


def test_report_without_peaks_says_how_to_pass_them(tmp_path: Path) -> None:
    run_dir, _ = write_run("collective_training", tmp_path / "run", steps=4)
    report = _report(run_dir)
    # The same report, as it would be for a chip whose peaks nobody knows.
    peaks = dict(report.results["roofline"].metrics["peaks"])
    peaks.update(peak_tflops=None, peak_hbm_gbps=None, ridge_flop_per_byte=None)
    roofline = dataclasses.replace(
        report.results["roofline"], metrics={**report.results["roofline"].metrics, "peaks": peaks}
    )
    unknown = dataclasses.replace(
        report,
        results={**report.results, "roofline": roofline},
        summary={**report.summary, "peak_tflops": None, "peak_hbm_gbps": None},
    )
    text = render_html(unknown)
    section = text[text.index('<section id="roofline">') :]
    section = section[: section.index("</section>")]
    assert "Peaks unknown" in section
    assert "<code>--peak-tflops</code> and <code>--peak-hbm-gbps</code>" in section
    # No roof is drawn: the figure has the op points only.
    figures = json.loads(re.search(r"const FIGURES = (\{.*?\});\n", text, re.S).group(1))  # type: ignore[union-attr]
    roofline_figure = figures[ROOFLINE_CHART]
    assert all(trace["mode"] == "markers" for trace in roofline_figure["data"])
    assert sum(len(t["x"]) for t in roofline_figure["data"]) == roofline.tables["ops"].n


def test_report_without_op_costs_gives_only_that_reason(tmp_path: Path) -> None:
    """The CPU capture records no per-op FLOPs: peak flags would not help, so the roofline
    section says only that (it told the user to pass them first)."""
    page = tmp_path / "cpu.html"
    assert main(["report", str(CPU_FIXTURE), "-o", str(page)]) == 0
    section = _section(page.read_text(), "roofline")
    assert "records no per-op FLOPs or bytes" in section
    assert "Peaks unknown" not in section and "--peak-tflops" not in section


# --------------------------------------------------------------------------- hostile strings

SCRIPT_OP = "<script>alert(1)</script>"
MARKUP_OP = "[bold red]x[/]"
HOSTILE_HOST = "<img src=x onerror=alert(2)>"


def _hostile_run(logdir: Path) -> Path:
    """collective_training on two chips with two ops and the host renamed to strings that
    would run or restyle if a renderer took them as HTML or rich markup."""
    run = generate("collective_training", steps=4, devices=2)
    renames = {"convolution_fusion.0": SCRIPT_OP, "loop_add_fusion.6": MARKUP_OP}
    run_dir = logdir / "plugins" / "profile" / "hostile"
    run_dir.mkdir(parents=True)
    for data in run.xspaces.values():
        space = xpb.XSpace.FromString(data)
        found = set()
        for plane in space.planes:
            for metadata in plane.event_metadata.values():
                if metadata.display_name in renames:
                    found.add(metadata.display_name)
                    new = renames[metadata.display_name]
                    metadata.name = metadata.name.replace(metadata.display_name, new, 1)
                    metadata.display_name = new
        assert found == set(renames)
        (run_dir / f"{HOSTILE_HOST}.xplane.pb").write_bytes(space.SerializeToString())
    return run_dir


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _hostile_run(tmp_path_factory.mktemp("hostile"))


def test_profile_strings_are_escaped_in_the_html_source(hostile: Path) -> None:
    report = _report(hostile, top_ops=40)
    ops = set(report.top_ops.strings("op").tolist())
    assert {SCRIPT_OP, MARKUP_OP} <= ops  # the renamed ops are in the report ...
    text = render_html(report)
    for raw in (SCRIPT_OP, HOSTILE_HOST, "<img", "alert(1)</script>"):
        assert raw not in text  # ... but never as markup in the page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text  # HTML text
    # Inside the JSON of the charts: HTML-escaped for Plotly's labels, then \u-escaped.
    assert "\\u0026lt;script\\u0026gt;alert(1)" in text


@needs_chromium
def test_profile_strings_show_as_literal_text_in_the_browser(hostile: Path, tmp_path: Path) -> None:
    page = tmp_path / "hostile.html"
    assert main(["report", str(hostile), "-o", str(page), "--top", "40"]) == 0
    hover = HOVER_MATCHING.replace("NEEDLE", "alert(1)")
    result = _open(page, tmp_path, "hostile", TOP_OPS_CELLS, DEVICE_LABELS, hover)
    values = result.values
    ops = [row[0] for row in values[TOP_OPS_CELLS]]
    assert SCRIPT_OP in ops and MARKUP_OP in ops
    assert all(label.startswith(f"{HOSTILE_HOST}/device:") for label in values[DEVICE_LABELS])
    assert values[DEVICE_LABELS]
    # The op's hover label starts with its name, as text.
    assert [text.split("module")[0] for text in values[hover]] == [SCRIPT_OP]


def test_profile_strings_show_as_literal_text_in_the_terminal(
    hostile: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["analyze", str(hostile), "--top", "40"]) == 0
    out = capsys.readouterr().out
    assert SCRIPT_OP in out
    assert MARKUP_OP in out
    assert main(["ops", str(hostile)]) == 0
    out = capsys.readouterr().out
    assert SCRIPT_OP in out and MARKUP_OP in out
    assert main(["info", str(hostile)]) == 0
    assert HOSTILE_HOST in capsys.readouterr().out


def test_a_low_confidence_straggler_is_labelled_without_alarm(tmp_path: Path) -> None:
    """mi300_jax_conv: device 0 computes most (modified z 8.0) but runs other work than the
    rest and has 4 steps, so the analyzer's confidence is low: its label says so, not in red.
    The generated straggler (8 steps, the same program everywhere) is medium: amber."""
    from tpuperf.render import html_page as html

    cases = [
        (shared_profile("gpu/mi300_jax_conv.xplane.pb"), ("mi300_jax_conv", 0), "low", None),
        (
            write_run("straggler", tmp_path / "run", steps=8)[0],
            ("tpu-host-1", 2),
            "medium",
            html._COLOURS["yellow"],
        ),
    ]
    for source, (host, device), confidence, colour in cases:
        report = _report(source)
        rec = next(r for r in report.results["steps"].recommendations if r.kind == "straggler")
        assert rec.confidence == confidence
        page = html.render_html(report)
        labels = _figures(page)[DEVICES_CHART]["layout"]["yaxis"]["ticktext"]
        marked = [label for label in labels if "straggler" in label]
        assert len(marked) == 1
        assert f"{host}/device:{device} · straggler ({confidence} confidence)" in marked[0]
        assert html._COLOURS["red"] not in marked[0]
        assert (colour in marked[0]) if colour else ("color" not in marked[0])
        assert f"Straggler (confidence {confidence})" in _section(page, "devices")
    # The alarm colour is kept for a verdict the evidence holds.
    assert html._COLOURS["red"] in html._straggler_label("h/device:1", "high")


# --------------------------------------------------------------------------- issue 22: layout

# Whether the top-ops table scrolls sideways: (its width, the width it has).
TABLE_WIDTHS = (
    "(() => { const w = document.querySelector('#top-ops .table-wrap');"
    " return [w.scrollWidth, w.clientWidth]; })()"
)
# Per chart, the legend entries that Plotly's toolbar (at the figure's top right) covers.
TOOLBAR_OVER_LEGEND = """(() => Array.from(document.querySelectorAll('.js-plotly-plot'))
  .map(plot => {
    const bar = plot.querySelector('.modebar').getBoundingClientRect();
    return [plot.id, Array.from(plot.querySelectorAll('.legend .traces')).filter(t => {
      const r = t.getBoundingClientRect();
      return r.left < bar.right && bar.left < r.right && r.top < bar.bottom && bar.top < r.bottom;
    }).map(t => t.textContent)];
  }))()"""


def _top_ops_cells(text: str) -> list[tuple[str, str]]:
    """(title, text) of each op cell of the top-ops table."""
    import html as html_module

    table = _section(text, "top-ops")
    return [
        (html_module.unescape(title), html_module.unescape(shown))
        for title, shown in re.findall(r'<td class="name" title="([^"]*)">([^<]*)</td>', table)
    ]


def test_top_ops_show_compact_kernel_names_with_the_whole_name_on_hover(tmp_path: Path) -> None:
    """The v100 page showed raw 300-700-character Eigen kernel names, rows 5-8 lines tall:
    the names are the terminal's (`Eigen: half = half(float)`), the whole one on hover."""
    from tpuperf.render.fit import display_name, shorten_apart

    source = shared_profile("gpu/v100_8gpu_tf_training.xplane.pb")
    page = tmp_path / "v100.html"
    assert main(["report", str(source), "-o", str(page)]) == 0
    report = _report(source, top_ops=25)  # as `tpuperf report` (its --top)
    cells = _top_ops_cells(page.read_text())
    names = [str(r["op"]) for r in report.top_ops.records()]
    assert [title for title, _ in cells] == names
    assert [shown for _, shown in cells] == shorten_apart([display_name(n) for n in names], 60)
    assert max(len(n) for n in names) > 300 and max(len(s) for _, s in cells) <= 60
    shown = dict((shown, title) for title, shown in cells)
    assert shown["Eigen: half = half(float)"].startswith("void Eigen::internal::EigenMetaKernel")


def test_page_inlines_a_plotly_with_only_the_trace_types_it_draws(tmp_path: Path) -> None:
    """The page was 4.8 MB with Plotly's whole bundle (maps, 3-D, WebGL) inlined."""
    for profile in ("gpu/v100_8gpu_tf_training.xplane.pb", "tpu/v6e_4chip_inference.xplane.pb"):
        page = tmp_path / "page.html"
        assert main(["report", str(shared_profile(profile)), "-o", str(page)]) == 0
        text = page.read_text()
        assert len(text.encode()) < 1_500_000, profile
        types = {t.get("type", "scatter") for f in _figures(text).values() for t in f["data"]}
        assert types <= {"scatter", "bar", "icicle"}, types  # what tpuperf/_plotly/build.js has
    bundle = (REPO / "tpuperf" / "_plotly" / "plotly-tpuperf.min.js").read_text()
    assert bundle.startswith("/* plotly.js 4.1.1 (MIT, see LICENSE): core, bar, icicle */")
    assert (REPO / "tpuperf" / "_plotly" / "LICENSE").read_text().startswith("MIT License")


def test_a_plotly_that_would_end_its_script_element_is_not_inlined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tpuperf.errors import TpuperfError
    from tpuperf.render import html_page

    bundle = tmp_path / "plotly.min.js"
    monkeypatch.setattr(html_page, "_PLOTLY_JS", bundle)
    try:
        for text, inlined in (("var a = '</ScRiPt >';", False), ("var a = '<script>';", True)):
            bundle.write_text(text)
            html_page._plotly_js.cache_clear()
            if inlined:
                assert html_page._plotly_js() == text
            else:
                with pytest.raises(TpuperfError, match="cannot be inlined"):
                    html_page._plotly_js()
    finally:
        html_page._plotly_js.cache_clear()


@given(st.text(alphabet=st.characters(max_codepoint=0x2FF)) | st.integers() | st.floats())
def test_text_in_the_page_is_escaped_and_its_control_characters_written_out(value: Any) -> None:
    import html

    from tpuperf.output import visible
    from tpuperf.render.html_page import _e

    assert _e(value) == html.escape(visible(str(value)), quote=True)


_CELL = (
    st.text(alphabet=st.characters(max_codepoint=0x2FF))
    | st.integers()
    | st.floats()
    | st.none()
    | st.sampled_from(["fusion.1", "a<b>&'\"", "\x1b[2J", "1e3", ""])
)


@given(st.lists(_CELL, max_size=8), st.integers(min_value=1, max_value=6))
def test_a_column_of_cells_is_escaped_and_formatted_as_each_cell_alone(
    values: list[Any], digits: int
) -> None:
    """The roofline's hover texts are made a column at a time (_e_all, _g_all): the same
    text as each value alone, with nothing to escape or with something."""
    from tpuperf.render.html_page import _e, _e_all, _g, _g_all

    assert _e_all(values) == [_e(value) for value in values]
    assert _g_all(values, digits) == [_g(value, digits) for value in values]


def test_figure_data_is_plain_json_with_no_number_that_is_not_finite() -> None:
    import numpy as np

    from tpuperf.render.html_page import _plain

    values = {
        "ints": np.array([1, 2], dtype=np.int64),
        "flags": np.array([True, False]),
        "floats": np.array([[0.5, 2.0], [1.0, 3.0]]),
        "gaps": np.array([1.5, np.nan, np.inf, -np.inf]),
        "text": ("a", np.float32(0.25), np.int64(3), float("nan")),
    }
    assert _plain(values) == {
        "ints": [1, 2],
        "flags": [True, False],
        "floats": [[0.5, 2.0], [1.0, 3.0]],
        "gaps": [1.5, None, None, None],
        "text": ["a", 0.25, 3, None],
    }
    assert all(type(v) is int for v in _plain(values)["ints"])


@needs_chromium
@pytest.mark.parametrize(
    ("profile", "width"),
    [
        ("tpu/v6e_4chip_inference.xplane.pb", 1400),
        ("tpu/v6e_4chip_inference.xplane.pb", 800),
        ("gpu/v100_8gpu_tf_training.xplane.pb", 800),
    ],
)
def test_page_fits_the_screen_and_the_toolbar_covers_no_legend(
    tmp_path: Path, profile: str, width: int
) -> None:
    """At 1,400 pixels the source column needed a sideways scroll; at 800 the time columns
    were off-screen and Plotly's toolbar covered a legend entry."""
    page = tmp_path / "page.html"
    assert main(["report", str(shared_profile(profile)), "-o", str(page)]) == 0
    name = f"{Path(profile).name.split('_')[0]}-{width}"
    result = visit(
        page,
        screenshot=tmp_path / f"{name}.png",
        expressions=(TABLE_WIDTHS, TOOLBAR_OVER_LEGEND),
        element_screenshots={"#top-ops": tmp_path / f"{name}-top-ops.png"},
        width=width,
    )
    assert result.console_errors == []
    scroll_width, client_width = result.values[TABLE_WIDTHS]
    assert scroll_width <= client_width
    covered = dict(result.values[TOOLBAR_OVER_LEGEND])
    assert covered and all(entries == [] for entries in covered.values()), covered
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for shot in (tmp_path / f"{name}.png", tmp_path / f"{name}-top-ops.png"):
        shutil.copyfile(shot, ARTIFACTS / shot.name)
