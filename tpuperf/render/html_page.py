"""Render a :class:`~tpuperf.analysis.Report` as one self-contained HTML page.

The page holds everything it shows: styles, the data, and Plotly's JavaScript
(a partial bundle with the trace types drawn here, tpuperf/_plotly/), so it opens offline and
can be attached to a bug. A Content-Security-Policy in the page forbids every
network request; a browser blocks any that something would try, and says so in
its console.

Nothing here computes analysis: everything comes from the report (summary with its
split by pass, recommendations, top ops with where the code made them, the roofline
analyzer's op table and peaks, the per-step and per-device breakdowns, op categories, and
the scope tree, drawn as an icicle), which computes what only this page shows when the page
first asks for it.

Profile strings (op, module, host, scope names, source paths) are untrusted. They
reach the page in two ways, each escaped for where it lands: HTML text and attributes
through :func:`html.escape`, control characters written out; chart labels the same
way (Plotly reads its labels as a small subset of HTML and turns entities back into
literal text), inside JSON whose ``<``, ``>`` and ``&`` are written as ``\\u`` escapes, so no
string can close the ``<script>`` element that carries it.
"""

from __future__ import annotations

import functools
import html
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tpuperf.errors import TpuperfError
from tpuperf.output import visible
from tpuperf.render.fit import display_name, shorten_apart
from tpuperf.render.text import SEGMENTS, fmt_bytes, fmt_ms, fmt_pct, workload_text

if TYPE_CHECKING:
    from tpuperf.analysis import Report

# The split of step time: (breakdown column, label, colour), in stack order; the same
# segments as the terminal's bar (compute, exposed collective, exposed copy, idle).
_COLOURS = {"green": "#2ca02c", "red": "#d62728", "yellow": "#e0a500", "grey50": "#9e9e9e"}
_BREAKDOWN = [
    (column, label, _COLOURS[style])
    for column, (_, label, style, _) in zip(
        ("compute_ps", "exposed_collective_ps", "other_ps", "no_op_ps"), SEGMENTS, strict=True
    )
]

# Plotly's default palette, for op categories on the roofline.
_CATEGORY_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)

# No request of any kind leaves the page: scripts and styles are inline, images data: URIs.
_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; font-src data:"
)

# Div ids of the charts (tests find the plots by them).
STEPS_CHART = "steps-chart"
DEVICES_CHART = "devices-chart"
ROOFLINE_CHART = "roofline-chart"
SCOPES_CHART = "scopes-chart"
MEMORY_CHART = "memory-chart"
# The peak's split by buffer kind: (kind, label, colour).
_MEMORY_KINDS = (
    ("parameter", "parameters", "#4c78a8"),
    ("output", "outputs", "#72b7b2"),
    ("temporary", "temporaries", "#f58518"),
    ("constant", "constants", "#b279a2"),
)

# Pass -> colour, in the order passes are listed (the terminal tree's colours).
PASS_COLOURS = {
    "forward": "#2ca02c",
    "backward": "#b0279b",
    "optimizer": "#e0a500",
    "other": "#9e9e9e",
}
_ROOT_COLOUR = "#dde2e8"
# Scope trees deeper than this show this many levels at once (a click on a node zooms in).
_ICICLE_LEVELS = 6


def render_html(report: Report) -> str:
    """The whole report as one HTML document (text)."""
    plotly_js = _plotly_js()
    figures: dict[str, dict[str, Any]] = {}
    body = [
        _header(report),
        _cards(report),
        _steps_section(report, figures),
        _devices_section(report, figures),
        _roofline_section(report, figures),
        _recommendations_section(report),
        _top_ops_section(report),
        _host_section(report),
        _scopes_section(report, figures),
        _memory_section(report, figures),
        _notes_section(report),
    ]
    title = f"tpuperf report: {report.source}" if report.source else "tpuperf report"
    from tpuperf import __version__

    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f'<meta name="generator" content="tpuperf {_e(__version__)}">',
            f"<title>{_e(title)}</title>",
            f"<style>{_STYLE}</style>",
            "</head>",
            "<body>",
            "<main>",
            *body,
            f"<footer>Made by tpuperf {_e(__version__)} with Plotly.js (inlined). "
            "This page makes no network requests.</footer>",
            "</main>",
            f"<script>{plotly_js}</script>",
            f"<script>const FIGURES = {_script_json(figures)};\n{_SCRIPT}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )


@functools.cache  # 1.2 MB, read and checked once per process (tests render many pages)
def _plotly_js() -> str:
    """plotly.js with only the trace types the page draws (scatter, bar, icicle), built by
    tpuperf/_plotly/build.js: the full bundle (maps, 3-D, WebGL) made a page of 4.8 MB."""
    # Beside the package's modules (importlib.resources took 23 ms to import).
    js = _PLOTLY_JS.read_text(encoding="utf-8")
    if _SCRIPT_END.search(js):  # it would end the <script> element that carries it
        raise TpuperfError("this plotly.js cannot be inlined: it contains '</script'")
    return js


_PLOTLY_JS = Path(__file__).resolve().parent.parent / "_plotly" / "plotly-tpuperf.min.js"
_SCRIPT_END = re.compile("</script", re.IGNORECASE)


# --------------------------------------------------------------------------- escaping


def _e(value: Any) -> str:
    """Text for HTML content or a quoted attribute, control characters written out
    (``\\x1b``): a page printed to a terminal must not clear it, and a browser shows them."""
    text = str(value)
    if not _ESCAPED.search(text):  # most names and every number: as they are
        return text
    return html.escape(visible(text), quote=True)


def _e_all(values: list[Any]) -> list[str]:
    """:func:`_e` of each of ``values``: at once where none of them has a character to escape
    (most columns of names, every column of numbers)."""
    texts = [str(value) for value in values]
    if not _ESCAPED.search("".join(texts)):
        return texts
    return [_e(text) for text in texts]


# What _e changes: the characters html.escape escapes and the control characters of visible.
_ESCAPED = re.compile(r"[&<>\"'\x00-\x1f\x7f-\x9f]")


def _script_json(value: Any) -> str:
    """JSON to place inside a <script> element: no string in it can end the element."""
    text = json.dumps(_plain(value), allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _plain(value: Any) -> Any:
    """Plain JSON types; NaN and infinities become null (Plotly leaves such points out)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biu" or (value.dtype.kind == "f" and np.isfinite(value).all()):
            return value.tolist()  # plain already: at once
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _number(value: Any) -> float | None:
    if type(value) is float:  # most values: at once
        return value if math.isfinite(value) else None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _small_pct(value: Any) -> str:
    """A percentage; under 0.1% with two figures (the terminal's one decimal reads 0.0%)."""
    f = _number(value)
    return f"{f:.2g}%" if f is not None and 0 < f < 0.1 else fmt_pct(f)


def _g(value: Any, digits: int = 3) -> str:
    f = _number(value)
    return "-" if f is None else f"{f:.{digits}g}"


def _g_all(values: list[Any], digits: int = 3) -> list[str]:
    """:func:`_g` of each of ``values`` (a float formatted in place, the rest as _g does)."""
    spec = f".{digits}g"
    return [
        format(v, spec) if type(v) is float and math.isfinite(v) else _g(v, digits) for v in values
    ]


# --------------------------------------------------------------------------- sections


def _header(report: Report) -> str:
    return (
        "<header><h1>tpuperf report</h1>"
        f'<p class="source">{_e(report.source or "profile")}</p></header>'
    )


def _card(label: str, value: str, detail: str = "") -> str:
    return (
        f'<div class="card"><div class="label">{_e(label)}</div>'
        f'<div class="value">{value}</div>'
        + (f'<div class="detail">{detail}</div>' if detail else "")
        + "</div>"
    )


def _cards(report: Report) -> str:
    s = report.summary
    st = s.get("step_time_ms") or {}
    if s.get("peak_tflops") is not None and s.get("peak_hbm_gbps") is not None:
        peaks = f"{s['peak_tflops']:g} TFLOP/s<br>{s['peak_hbm_gbps']:g} GB/s"
        peaks_detail = f"from {_e(s.get('peaks_source'))}"
    else:
        peaks = '<span class="warn">unknown</span>'
        peaks_detail = "pass <code>--peak-tflops</code> and <code>--peak-hbm-gbps</code>"
    if s.get("step_source"):
        step_value = _e(fmt_ms(st.get("median")))
        step_detail = (
            f"median of {s['steps_analyzed']} steps ({_e(s['step_source'])}); "
            f"p90 {_e(fmt_ms(st.get('p90')))}, mean {_e(fmt_ms(st.get('mean')))}; "
            f"{s.get('steps_excluded', 0)} left out"
        )
    else:
        step_value = "no steps"
        step_detail = f"window {_e(fmt_ms(s.get('window_ms')))} per device (first to last op)"
    util = s.get("flops_utilization_pct")
    cards = [
        _card("Chip", _e(s.get("chip") or "unknown"), _e(s.get("platform") or "")),
        _card("Peaks", peaks, peaks_detail),
        _card(
            "Devices",
            str(s.get("devices")),
            f"on {s.get('hosts')} host(s); {_e(workload_text(s.get('workload')))}",
        ),
        _card("Step time", step_value, step_detail),
        _card(
            "FLOP utilization",
            _e(_small_pct(util)),
            f"MFU {_e(_small_pct(s.get('mfu_pct')))}" if s.get("mfu_pct") is not None else "",
        ),
    ]
    passes = s.get("passes")
    if passes is not None:
        cards.append(_passes_card(passes))
    return (
        '<section id="summary"><div class="cards">'
        + "".join(cards)
        + "</div>"
        + _split_bar(s)
        + "</section>"
    )


def _passes_card(passes: dict[str, dict[str, Any]]) -> str:
    """Op time of the analysed steps by pass: the largest as the value, a bar of the split,
    and each pass's time per step and share."""
    shares = {name: _number(v.get("pct")) or 0.0 for name, v in passes.items()}
    top = max(shares, key=lambda name: shares[name])
    bar = "".join(
        f'<span style="width:{max(share, 0.0):.3f}%;background:{PASS_COLOURS.get(name, "#777")}" '
        f'title="{_e(name)} {_e(fmt_pct(share))}"></span>'
        for name, share in shares.items()
    )
    rows = "".join(
        f'<span class="pass-row" data-pass="{_e(name)}"><i style="background:'
        f'{PASS_COLOURS.get(name, "#777")}"></i>{_e(name)} '
        f"<b>{_e(fmt_ms(v.get('ms_per_step')))}</b> ({_e(fmt_pct(v.get('pct')))})</span>"
        for name, v in passes.items()
    )
    return (
        '<div class="card" id="passes-card"><div class="label">Op time by pass</div>'
        f'<div class="value">{_e(top)} {_e(fmt_pct(shares[top]))}</div>'
        f'<div class="minibar">{bar}</div><div class="detail">{rows}</div></div>'
    )


def _split_bar(summary: dict[str, Any]) -> str:
    """The compute / exposed collective / exposed copy / idle split of step time, as the
    terminal shows it (a bar of shares, no axes)."""
    parts = []
    legend = []
    for (key, label, _, _), (_, _, colour) in zip(SEGMENTS, _BREAKDOWN, strict=True):
        value = _number(summary.get(key)) or 0.0
        parts.append(
            f'<span style="width:{max(value, 0.0):.3f}%;background:{colour}" '
            f'title="{_e(label)} {_e(fmt_pct(value))}"></span>'
        )
        legend.append(
            f'<span class="key"><i style="background:{colour}"></i>{_e(label)} '
            f"<b>{_e(fmt_pct(summary.get(key)))}</b></span>"
        )
    return (
        '<div class="split"><div class="label">Where step time goes (mean over devices)</div>'
        f'<div class="bar">{"".join(parts)}</div><div class="legend">{"".join(legend)}</div></div>'
    )


# A legend in one row above the plot, and room above it for Plotly's toolbar, which sits at
# the figure's top right and covered the last legend entries at 800 pixels.
_LEGEND_ABOVE = {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "traceorder": "normal"}
_TOP_MARGIN = 64


def _section(anchor: str, title: str, *content: str) -> str:
    return f'<section id="{anchor}"><h2>{_e(title)}</h2>' + "".join(content) + "</section>"


def _note(text: str) -> str:
    return f'<p class="note">{text}</p>'


def _steps_section(report: Report, figures: dict[str, Any]) -> str:
    breakdown = report.step_breakdown
    if not breakdown.windows:
        return _section("steps", "Steps", _note("No device ran ops in the analysed windows."))
    if breakdown.step_source is None:
        return _section(
            "steps",
            "Steps",
            _note(
                "No steps in this profile (no Steps line, step markers or repeated module): "
                "each device's window is its first to last op, split as in the summary above."
            ),
        )
    numbers = breakdown.steps
    traces = []
    for column, label, colour in _BREAKDOWN:
        traces.append(
            {
                "type": "bar",
                "name": label,
                "x": numbers,
                "y": breakdown.ms[column],
                "marker": {"color": colour},
                "hovertemplate": f"{_e(label)} %{{y:.4g}} ms<extra></extra>",
            }
        )
    figures[STEPS_CHART] = {
        "data": traces,
        "layout": {
            "barmode": "stack",
            "bargap": 0.15 if len(numbers) < 200 else 0.0,
            "hovermode": "x unified",
            "xaxis": {"title": {"text": "step"}, "tickformat": "d"},
            "yaxis": {"title": {"text": "ms (mean over devices)"}, "rangemode": "tozero"},
            "legend": _LEGEND_ABOVE,
            "margin": {"t": _TOP_MARGIN, "r": 20, "b": 50, "l": 70},
            "height": 360,
        },
    }
    excluded = report.summary.get("steps_excluded") or 0
    return _section(
        "steps",
        "Per-step breakdown",
        _note(
            f"One bar per analysed step ({len(numbers)}, from {_e(breakdown.step_source)}"
            + (f"; {excluded} left out as warm-up or outside --steps" if excluded else "")
            + "): where each step's time went, averaged over devices. An outlier step stands "
            "out as a taller bar."
        ),
        f'<div class="chart" id="{STEPS_CHART}"></div>',
    )


def _devices_section(report: Report, figures: dict[str, Any]) -> str:
    views = report.device_breakdowns
    if len(views) < 2:
        return ""
    stragglers = {s.key: s for s in report.stragglers}
    # The straggler verdict's confidence (low with few steps or devices that run different work).
    confidence = report.straggler_confidence
    # The category values are shown too (in the unified hover's title): escaped as labels.
    names = [_e(v.name) for v in views]
    labels = []
    for view in views:
        straggler = stragglers.get(view.key)
        if straggler is None:
            labels.append(_e(view.name))
        else:
            labels.append(_straggler_label(view.name, confidence))
    traces = []
    for column, label, colour in _BREAKDOWN:
        ms = [view.ms[column] for view in views]
        traces.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": label,
                "y": names,
                "x": ms,
                "marker": {"color": colour},
                "hovertemplate": f"{_e(label)} %{{x:.4g}} ms<extra></extra>",
            }
        )
    height = 110 + len(views) * (26 if len(views) <= 32 else 14)
    figures[DEVICES_CHART] = {
        "data": traces,
        "layout": {
            "barmode": "stack",
            "hovermode": "y unified",
            "xaxis": {"title": {"text": "ms per step (mean over the device's steps)"}},
            "yaxis": {
                "autorange": "reversed",
                "tickmode": "array",
                "tickvals": names,
                "ticktext": labels,
                "automargin": True,
            },
            "legend": _LEGEND_ABOVE,
            "margin": {"t": _TOP_MARGIN, "r": 20, "b": 50, "l": 20},
            "height": height,
        },
    }
    if stragglers:
        found = "; ".join(
            f"{_e(host)}/device:{device} computes {_e(fmt_ms(s.compute_ms_per_step))} per step "
            f"against a median of {_e(fmt_ms(s.median_compute_ms_per_step))} "
            f"(modified z {s.z:.1f})"
            for (host, device), s in stragglers.items()
        )
        text = f"Straggler (confidence {confidence}): {found}."
    else:
        text = (
            "No straggler: devices spend about the same time computing. A straggler shows as a "
            "longer compute bar, and the others as longer exposed collectives (they wait for it)."
        )
    return _section(
        "devices",
        "Per-device breakdown",
        _note(text),
        f'<div class="chart" id="{DEVICES_CHART}"></div>',
    )


def _straggler_label(name: str, confidence: str) -> str:
    """A straggler's axis label with its confidence; the alarm colour only when the evidence
    holds (high: red, medium: amber), a low-confidence one in the plain text colour."""
    text = f"{_e(name)} · straggler ({_e(confidence)} confidence)"
    colour = {"high": _COLOURS["red"], "medium": _COLOURS["yellow"]}.get(confidence)
    if colour is None:
        return f"<i>{text}</i>"
    return f'<span style="color:{colour}"><b>{text}</b></span>'


def _roofline_section(report: Report, figures: dict[str, Any]) -> str:
    title = "Roofline"
    result = report.results.get("roofline")
    if result is None:
        return _section(
            "roofline", title, _note("The roofline analyzer was not run (see --analyzer).")
        )
    if result.error:
        return _section(
            "roofline", title, _note(f"The roofline analyzer failed: {_e(result.error)}")
        )
    peaks = report.roofline_peaks
    ops = report.roofline_ops
    notes = []
    if not peaks.known and ops is not None and ops.n:  # without per-op costs, peaks would not help
        missing = peaks.missing_flags
        notes.append(
            _note(
                f'<span class="warn">Peaks unknown</span> for chip '
                f"{_e(peaks.chip or 'unknown')}: the profile records no peak FLOP/s or HBM "
                "bandwidth and the chip table has no entry for it, so there are no roofs, bounds "
                f"or efficiencies. Pass {' and '.join(f'<code>{m}</code>' for m in missing)} "
                "(dense bf16 TFLOP/s, HBM GB/s): <code>tpuperf report PROFILE "
                "--peak-tflops TFLOPS --peak-hbm-gbps GBPS</code>."
            )
        )
    if ops is None or not ops.n:
        notes.append(
            _note(
                "This profile records no per-op FLOPs or bytes (GPU and CPU profiles usually do "
                "not), so there is no op to place on a roofline."
            )
        )
        return _section("roofline", title, *notes)

    categories = report.op_categories
    # The columns the hover texts and categories read, each as a list once.
    columns = {name: ops.plain(name) if name in ops else [None] * ops.n for name in _HOVER}
    intensity = ops.array("intensity_flop_per_byte")
    achieved = ops.array("achieved_tflops")
    placeable = np.isfinite(intensity) & (intensity > 0) & np.isfinite(achieved) & (achieved > 0)
    left_out = int((~placeable).sum())
    if left_out:
        notes.append(
            _note(
                f"{left_out} op(s) with no FLOPs or no bytes cannot be placed on log axes: "
                + ", ".join(_e(columns["op"][i]) for i in np.flatnonzero(~placeable)[:10])
                + ("…" if left_out > 10 else "")
            )
        )
    if not placeable.any():
        notes.append(
            _note(
                "No op has both FLOPs and bytes accessed, so none can be placed on a log-log "
                "roofline: no chart is drawn."
            )
        )
        return _section("roofline", title, *notes)
    ms = ops.array("ms_per_step")
    max_ms = float(ms.max()) if len(ms) else 1.0
    by_category: dict[str, list[int]] = {}
    for i, key in enumerate(zip(columns["module"], columns["op"], strict=True)):
        by_category.setdefault(categories.get(key, "") or "other", []).append(i)
    traces: list[dict[str, Any]] = []
    hovers = _hovers(columns)
    ordered = sorted(by_category, key=lambda c: -float(ms[by_category[c]].sum()))
    for n, category in enumerate(ordered):
        rows = [i for i in by_category[category] if placeable[i]]
        if not rows:
            continue
        category_html = _e(category)
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": category_html,
                "x": intensity[rows],
                "y": achieved[rows],
                "text": [hovers[i][0] + category_html + hovers[i][1] for i in rows],
                "hovertemplate": "%{text}<extra></extra>",
                "marker": {
                    "size": ms[rows],
                    "sizemode": "area",
                    "sizeref": 2.0 * max_ms / 30.0**2 if max_ms > 0 else 1.0,
                    "sizemin": 4,
                    "color": _CATEGORY_COLOURS[n % len(_CATEGORY_COLOURS)],
                    "opacity": 0.8,
                    "line": {"width": 0.5, "color": "#333"},
                },
            }
        )
    x_values = intensity[placeable]
    y_values = achieved[placeable]
    x_lo, x_hi = float(x_values.min()) / 3, float(x_values.max()) * 3
    y_lo, y_hi = float(y_values.min()) / 3, float(y_values.max()) * 3
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    if peaks.known:
        peak = float(peaks.peak_tflops)  # type: ignore[arg-type]
        bandwidth_tflops_per_intensity = float(peaks.peak_hbm_gbps) / 1000.0  # type: ignore[arg-type]
        ridge = float(peaks.ridge_flop_per_byte)  # type: ignore[arg-type]
        x_lo, x_hi = min(x_lo, ridge / 30), max(x_hi, ridge * 30)
        y_lo, y_hi = min(y_lo, x_lo * bandwidth_tflops_per_intensity), max(y_hi, peak * 2)
        roof_x = [x_lo, ridge, x_hi]
        roof_y = [x_lo * bandwidth_tflops_per_intensity, peak, peak]
        traces.insert(
            0,
            {
                "type": "scatter",
                "mode": "lines",
                "name": "roofline",
                "x": roof_x,
                "y": roof_y,
                "line": {"color": "#222", "width": 2},
                "hoverinfo": "skip",
            },
        )
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": ridge,
                "x1": ridge,
                "y0": 0,
                "y1": 1,
                "line": {"color": "#888", "width": 1, "dash": "dot"},
            }
        )
        middle = math.sqrt(x_lo * ridge)  # halfway up the HBM roof, on log axes
        annotations += [
            {
                "x": math.log10(ridge),
                "y": 0.02,
                "xref": "x",
                "yref": "paper",
                "xanchor": "left",
                "yanchor": "bottom",
                "text": f" ridge point {ridge:.0f} FLOP/byte",
                "showarrow": False,
                "font": {"size": 11, "color": "#555"},
            },
            {
                "x": math.log10(x_hi),
                "y": math.log10(peak),
                "xref": "x",
                "yref": "y",
                "xanchor": "right",
                "yanchor": "bottom",
                "text": f"compute roof {peak:g} TFLOP/s",
                "showarrow": False,
                "font": {"size": 11},
            },
            {
                "x": math.log10(middle),
                "y": math.log10(middle * bandwidth_tflops_per_intensity),
                "xref": "x",
                "yref": "y",
                "xanchor": "left",
                "yanchor": "top",
                "text": f"  HBM roof {peaks.peak_hbm_gbps:g} GB/s",
                "showarrow": False,
                "font": {"size": 11},
            },
        ]
    figures[ROOFLINE_CHART] = {
        "data": traces,
        "layout": {
            "xaxis": {
                "type": "log",
                "title": {"text": "operational intensity (FLOP/byte)"},
                "range": [math.log10(x_lo), math.log10(x_hi)],
                "dtick": 1,
            },
            "yaxis": {
                "type": "log",
                "title": {"text": "achieved TFLOP/s"},
                "range": [math.log10(y_lo), math.log10(y_hi)],
                "dtick": 1,
            },
            "shapes": shapes,
            "annotations": annotations,
            "legend": {"title": {"text": "op category"}, "itemsizing": "constant"},
            "hovermode": "closest",
            "margin": {"t": 20, "r": 20, "b": 50, "l": 70},
            "height": 520,
        },
    }
    source = (
        f"Peaks {peaks.peak_tflops:g} TFLOP/s and {peaks.peak_hbm_gbps:g} GB/s for "
        f"{_e(peaks.chip or 'this chip')}, from {_e(peaks.tflops_source)}"
        + (f" and {_e(peaks.hbm_source)}" if peaks.hbm_source != peaks.tflops_source else "")
        + ". "
        if peaks.known
        else ""
    )
    return _section(
        "roofline",
        title,
        _note(
            source
            + f"Every op with FLOPs and bytes ({int(placeable.sum())}) is a point: area by its "
            "time per step, colour by its HLO category. Hover for the numbers."
        ),
        *notes,
        f'<div class="chart" id="{ROOFLINE_CHART}"></div>',
    )


# The roofline table's columns an op's hover text reads.
_HOVER = (
    "op",
    "module",
    "ms_per_step",
    "count_per_step",
    "intensity_flop_per_byte",
    "achieved_tflops",
    "achieved_gbps",
    "efficiency_pct",
    "bound",
)


def _hovers(columns: dict[str, list[Any]]) -> list[tuple[str, str]]:
    """Each op's hover text, from ``columns`` (:data:`_HOVER`, each a list), as the text
    before its category and the text after it: made a column at a time (thousands of ops)."""
    ops, modules, bounds = (_e_all(columns[name]) for name in ("op", "module", "bound"))
    times = _e_all([fmt_ms(v) for v in columns["ms_per_step"]])
    counts = _g_all(columns["count_per_step"])
    intensities = _g_all(columns["intensity_flop_per_byte"])
    flops = _g_all(columns["achieved_tflops"])
    bandwidths = _g_all(columns["achieved_gbps"], 4)
    efficiencies = [_number(v) for v in columns["efficiency_pct"]]
    before = [f"<b>{op}</b><br>module {module} · " for op, module in zip(ops, modules, strict=True)]
    numbers = zip(times, counts, intensities, flops, bandwidths, efficiencies, bounds, strict=True)
    after = [
        f"<br>time/step {time}, run {count}x per step<br>intensity {intensity} FLOP/byte"
        f"<br>achieved {tflops} TFLOP/s, {gbps} GB/s"
        + ("" if pct is None else f"<br>efficiency {pct:.1f}% of the roof ({bound}-bound)")
        for time, count, intensity, tflops, gbps, pct, bound in numbers
    ]
    return list(zip(before, after, strict=True))


def _recommendations_section(report: Report) -> str:
    if not report.recommendations:
        return _section(
            "recommendations",
            "Recommendations",
            _note("None: nothing in this profile stands out."),
        )
    items = []
    platform = (report.platform or "").lower()
    for rec in report.recommendations:
        fixes = [(platform, rec.fix[platform])] if platform in rec.fix else list(rec.fix.items())
        fix_html = "".join(
            f'<p class="fix"><b>Fix ({_e(label.upper())}):</b> {_e(text)}</p>'
            for label, text in fixes
        )
        ops = (
            '<p class="ops"><b>Ops:</b> '
            + ", ".join(f"<code>{_e(op)}</code>" for op in rec.ops)
            + "</p>"
            if rec.ops
            else ""
        )
        items.append(
            "<li>"
            f'<div class="rec-head"><span class="rec-title">{_e(rec.title)}</span>'
            f'<span class="badge">{_e(rec.kind)}</span></div>'
            f'<p class="savings">saves up to <b>{_e(fmt_ms(rec.est_savings_ms))} per step '
            f"({rec.est_savings_pct:.1f}%)</b>, confidence {_e(rec.confidence)} "
            f'<span class="dim">({_e(rec.analyzer)})</span></p>'
            f'<p class="evidence"><b>Evidence:</b> {_e(rec.evidence)}</p>'
            f"{ops}{fix_html}"
            "</li>"
        )
    return _section(
        "recommendations",
        "Recommendations, ranked by the time they would save",
        '<ol class="recs">' + "".join(items) + "</ol>",
    )


# (column, header, numeric, format)
_TOP_OPS_COLUMNS: list[tuple[str, str, bool, Any]] = [
    ("op", "op", False, str),
    ("module", "program", False, str),
    ("kind", "kind", False, str),
    ("ms_per_step", "time/step", True, fmt_ms),
    ("pct_of_busy", "% of busy", True, fmt_pct),
    ("count_per_step", "count/step", True, lambda v: _g(v)),
    ("bound", "bound", False, lambda v: v or ""),
    ("efficiency_pct", "roofline eff.", True, fmt_pct),
]


def _top_ops_section(report: Report) -> str:
    top = report.top_ops
    if not top.n:
        return _section("top-ops", "Top ops", _note("No op ran in the analysed windows."))
    records = top.records()
    # Where the model's code made each op, when the profile says it for any of them.
    code = any(r.get("scope") or r.get("primitive") or r.get("source") for r in records)
    headers = [(header, numeric) for _, header, numeric, _ in _TOP_OPS_COLUMNS]
    if code:
        headers += [(header, False) for header in _CODE_HEADERS]
    head = "".join(
        f'<th data-type="{"number" if numeric else "text"}" title="sort">{_e(header)}</th>'
        for header, numeric in headers
    )
    # Names as the terminal writes them (a 700-character Eigen kernel is `Eigen: half =
    # half(float)`), told apart where they would read the same; the whole name on hover.
    names = shorten_apart([display_name(str(r["op"])) for r in records], _OP_NAME_CHARS)
    rows = []
    for record, name in zip(records, names, strict=True):
        cells = []
        for column, _, numeric, fmt in _TOP_OPS_COLUMNS:
            value = record[column]
            if column == "op":
                cells.append(f'<td class="name" title="{_e(value)}">{_e(name)}</td>')
            elif numeric:
                number = _number(value)
                sort = "" if number is None else repr(number)
                cells.append(f'<td class="num" data-sort="{sort}">{_e(fmt(value))}</td>')
            elif column in _SHORT_TEXT:
                cells.append(f'<td class="short">{_e(fmt(value))}</td>')
            else:
                cells.append(f"<td>{_e(fmt(value))}</td>")
        if code:
            cells += _code_cells(record)
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return _section(
        "top-ops",
        "Top ops (self time per step per device)",
        _note(
            "Click a column to sort."
            + (
                " Scope is the op's name-scope path and primitive; source the line of the "
                "model's code that made it (hover for the whole path)."
                if code
                else ""
            )
        ),
        # A name too long for the page scrolls the table, not the page.
        f'<div class="table-wrap"><table class="sortable" id="top-ops-table"><thead><tr>{head}'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>",
    )


def _host_section(report: Report) -> str:
    """What the host ran while the devices were idle (tpuperf host): the idle analyzer's
    host_events table, its first rows; nothing when the profile has no host events."""
    table = report.host_events
    if table is None or not table.n:
        return ""
    records = table.records()[:15]
    head = "".join(
        f"<th>{_e(h)}</th>"
        for h in ("host event", "kind", "where", "idle ms / iteration", "calls / iteration")
    )
    rows = "".join(
        "<tr>"
        f'<td>{_e(r["name"])}</td><td class="short">{_e(r["kind"])}</td>'
        f"<td>{_e(r['where'] or '-')}</td>"
        f'<td class="num">{_e(_g(r["idle_ms_per_iteration"]))}</td>'
        f'<td class="num">{_e(_g(r["calls_per_iteration"]))}</td>'
        "</tr>"
        for r in records
    )
    return _section(
        "host",
        "Host while the devices were idle",
        _note(
            "Host events ranked by the device-idle time they overlap per iteration (a step's "
            "start to the next step's start); Python functions by their self time as the "
            "innermost user frame. `tpuperf host` shows them all."
        ),
        f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>",
    )


# Text columns of a few short words, kept on one line (names wrap anywhere instead).
_SHORT_TEXT = ("kind", "bound")
# Op names longer than this are written short (see _top_ops_section); about two lines of
# the op column on an 800-pixel screen.
_OP_NAME_CHARS = 60

# The top-ops table's columns of where the code made an op (see _code_cells).
_CODE_HEADERS = ("scope / primitive", "pass", "source")


def _code_cells(record: dict[str, Any]) -> list[str]:
    """A top op's scope and primitive, pass, and source line (the file's name and line in the
    cell, its whole path on hover)."""
    path = "/".join(p for p in (record.get("scope"), record.get("primitive")) if p)
    source = str(record.get("source") or "")
    return [
        # A line may break after each level (<wbr> adds no text).
        f'<td class="code">{_e(path).replace("/", "/<wbr>")}</td>',
        f'<td class="short">{_e(record.get("pass") or "")}</td>',
        f'<td class="code" title="{_e(source)}">{_e(source.rsplit("/", 1)[-1])}</td>',
    ]


def _scopes_section(report: Report, figures: dict[str, Any]) -> str:
    """The scope tree as an icicle: each node a box as long as its op time, under its parent,
    coloured by the pass with most of its time (as ``tpuperf tree``)."""
    title = "Time by model code"
    tree = report.scope_tree
    if tree is None or not tree["children"]:
        return _section(
            "scopes",
            title,
            _note(
                "No scope information in this profile: its ops carry no name-scope path or "
                "source line, so there is no scope tree and no forward/backward split."
            ),
        )
    ids: list[str] = []
    labels: list[str] = []
    parents: list[str] = []
    values: list[int] = []
    colours: list[str] = []
    hovers: list[str] = []
    depth = 0
    stack: list[tuple[dict[str, Any], str, int]] = [(tree, "", 0)]
    while stack:  # depth first, children most time first (as the tree lists them)
        node, parent, level = stack.pop()
        node_id = f"n{len(ids)}"
        ids.append(node_id)
        labels.append(_e(node["name"]) if node["kind"] != "root" else "all ops")
        parents.append(parent)
        values.append(int(node["time_ps"]))
        colours.append(_pass_colour(node) if node["kind"] != "root" else _ROOT_COLOUR)
        hovers.append(_scope_hover(node))
        depth = max(depth, level)
        stack.extend((child, node_id, level + 1) for child in reversed(node["children"]))
    figures[SCOPES_CHART] = {
        "data": [
            {
                "type": "icicle",
                "ids": ids,
                "labels": labels,
                "parents": parents,
                "values": values,
                # A node's time includes its children's: boxes nest, the rest is its own ops.
                "branchvalues": "total",
                "marker": {"colors": colours, "line": {"color": "#fff", "width": 1}},
                "customdata": hovers,
                "hovertemplate": "%{customdata}<extra></extra>",
                "textinfo": "label",
                "maxdepth": min(depth + 1, _ICICLE_LEVELS),
                "sort": False,
            }
        ],
        "layout": {
            "margin": {"t": 10, "r": 10, "b": 10, "l": 10},
            "height": 140 + 60 * min(depth + 1, _ICICLE_LEVELS),
        },
    }
    key = "".join(
        f'<span class="key"><i style="background:{colour}"></i>{_e(name)}</span>'
        for name, colour in PASS_COLOURS.items()
    )
    windows = "per step per device" if report.summary.get("step_source") else "per device"
    total = _e(fmt_ms(tree["ms_per_step"]))
    return _section(
        "scopes",
        title,
        _note(
            f"Op time by JAX name scope, as <code>tpuperf tree</code> shows it: {total} of op time "
            f"{windows} over the whole capture. Each box is as long as its time "
            "and sits under the scope around it; primitives are the leaves. Colour: the pass "
            "with most of the node's time. Click a box to zoom in, the top bar to zoom out."
        ),
        f'<div class="legend passes-key">{key}</div>',
        f'<div class="chart" id="{SCOPES_CHART}"></div>',
    )


def _pass_colour(node: dict[str, Any]) -> str:
    passes = node.get("passes") or {}
    if not passes or not any(passes.values()):
        return PASS_COLOURS["other"]
    return PASS_COLOURS.get(max(passes, key=lambda p: passes[p]), PASS_COLOURS["other"])


def _scope_hover(node: dict[str, Any]) -> str:
    lines = [f"<b>{_e(node['path'] or node['name'])}</b>"]
    lines.append(
        f"{_e(fmt_ms(node['ms_per_step']))} per step ({node['pct']:.1f}% of op time), "
        f"run {node['occurrences']:,}x"
    )
    if node["self_ps"] and node["children"]:
        lines.append(f"its own ops: {_e(fmt_ms(node['self_ms_per_step']))} per step")
    split = [
        f"{_e(name)} {_e(fmt_ms(ms))}" for name, ms in (node.get("passes") or {}).items() if ms
    ]
    if split:
        lines.append(" · ".join(split))
    if node.get("source"):
        lines.append(f"source {_e(node['source'])}")
    return "<br>".join(lines)


def _memory_section(report: Report, figures: dict[str, Any]) -> str:
    """The largest program's peak device memory: a bar of its split by kind against the
    capacity, the bytes live at the peak by scope and pass, and the bytes in use along its
    schedule (from the memory analyzer's metrics)."""
    memory = report.memory_peak
    if memory is None:
        return _section(
            "memory",
            "Memory",
            _note(
                "No buffer assignment in this profile (no HLO modules with one), or the "
                "memory analyzer did not run."
            ),
        )
    peak = memory.peak_bytes
    capacity = memory.capacity_bytes
    whole = max(capacity or peak, 1)
    parts, legend = [], []
    for kind, label, colour in _MEMORY_KINDS:
        value = memory.split_bytes.get(kind, 0)
        parts.append(
            f'<span style="width:{100.0 * value / whole:.3f}%;background:{colour}" '
            f'title="{_e(label)} {_e(fmt_bytes(value))}"></span>'
        )
        legend.append(
            f'<span class="key"><i style="background:{colour}"></i>{_e(label)} '
            f"<b>{_e(fmt_bytes(value))}</b></span>"
        )
    of = (
        f"of {_e(fmt_bytes(capacity))} ({_e(memory.capacity_source)}), headroom "
        f"{_e(fmt_pct(memory.headroom_pct))}"
        if capacity
        else "of an unknown capacity"
    )
    bar = (
        f'<div class="split"><div class="label">{_e(memory.peak_program)}: peak '
        f"{_e(fmt_bytes(peak))} {of}</div>"
        f'<div class="bar">{"".join(parts)}</div><div class="legend">{"".join(legend)}</div></div>'
    )
    rows = "".join(
        f"<tr><td>{_e(r['scope'])}</td><td>{_e(fmt_bytes(r['bytes']))}</td>"
        f"<td>{r['buffers']}</td><td>"
        + ", ".join(f"{_e(name)} {_e(fmt_bytes(v))}" for name, v in r["passes"].items() if v)
        + "</td></tr>"
        for r in memory.by_scope
    )
    table = (
        "<table><thead><tr><th>scope</th><th>live at the peak</th><th>buffers</th>"
        f"<th>by pass</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    curve = memory.curve_bytes
    content = [bar, table]
    if curve:
        figures[MEMORY_CHART] = {
            "data": [
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": "in use",
                    "y": [v / (1 << 30) for v in curve],
                    "line": {"color": "#f58518"},
                    "hovertemplate": "%{y:.4g} GiB<extra></extra>",
                }
            ],
            "layout": {
                "xaxis": {"title": {"text": "schedule (heap simulator events, sampled)"}},
                "yaxis": {"title": {"text": "GiB in use"}, "rangemode": "tozero"},
                "margin": {"t": 20, "r": 20, "b": 50, "l": 70},
                "height": 300,
            },
        }
        content.append(f'<div class="chart" id="{MEMORY_CHART}"></div>')
    return _section(
        "memory",
        "Memory",
        _note(
            "The largest program's peak device memory (see tpuperf memory for every program): "
            "its allocations by kind, the bytes live at the peak by the scope that made them, "
            "and the bytes in use along its schedule."
        ),
        *content,
    )


def _notes_section(report: Report) -> str:
    items = [
        f'<li class="error">analyzer {_e(n)} failed: {_e(e)}</li>' for n, e in report.errors.items()
    ]
    seen = set(report.notes)
    for name, result in report.results.items():
        for note in result.notes:
            if note not in seen:
                seen.add(note)
                items.append(f"<li>{_e(name)}: {_e(note)}</li>")
    items += [f"<li>{_e(note)}</li>" for note in report.notes]
    if not items:
        return ""
    return _section("notes", "Notes", "<ul>" + "".join(items) + "</ul>")


_STYLE = """
:root { --fg:#1d232b; --dim:#5b6573; --line:#dde2e8; --bg:#f6f8fa; --accent:#1f6feb; }
* { box-sizing: border-box; }
body { margin:0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica,
       Arial, sans-serif; color:var(--fg); background:#fff; }
main { max-width: 1240px; margin: 0 auto; padding: 20px 28px 40px; }
header h1 { margin: 0; font-size: 22px; }
header .source { margin: 2px 0 16px; color: var(--dim); font-family: ui-monospace, monospace;
                 word-break: break-all; }
h2 { font-size: 17px; margin: 28px 0 6px; padding-top: 8px; border-top: 1px solid var(--line); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(180px, 1fr)); gap: 10px; }
.card { background: var(--bg); border: 1px solid var(--line); border-radius: 8px;
        padding: 10px 12px; }
.card .label { color: var(--dim); font-size: 12px; text-transform: uppercase;
               letter-spacing: .04em; }
.card .value { font-size: 20px; font-weight: 600; margin: 2px 0; overflow-wrap: anywhere; }
.card .detail { color: var(--dim); font-size: 12px; }
.split { margin-top: 14px; }
.split .label { color: var(--dim); font-size: 12px; margin-bottom: 4px; }
.split .bar { display: flex; height: 22px; border-radius: 4px; overflow: hidden;
              border: 1px solid var(--line); background: #fff; }
.split .legend { margin-top: 6px; display: flex; flex-wrap: wrap; gap: 16px; }
.minibar { display: flex; height: 8px; border-radius: 3px; overflow: hidden; margin: 4px 0; }
.pass-row { display: block; }
.pass-row i, .passes-key .key i { display: inline-block; width: 10px; height: 10px;
    border-radius: 2px; margin-right: 5px; vertical-align: -1px; }
.passes-key { display: flex; flex-wrap: wrap; gap: 16px; margin: 2px 0 6px; }
table.sortable td.short { white-space: nowrap; }
td.code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
.split .key i { display: inline-block; width: 11px; height: 11px; border-radius: 2px;
                margin-right: 5px; vertical-align: -1px; }
.note { color: var(--dim); margin: 4px 0 8px; }
.warn { color: #b35900; font-weight: 600; }
.chart { width: 100%; min-height: 200px; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px;
       background: var(--bg); padding: 0 3px; border-radius: 3px; overflow-wrap: anywhere; }
ol.recs { padding-left: 22px; }
ol.recs li { margin-bottom: 14px; }
.rec-head { display: flex; gap: 10px; align-items: baseline; flex-wrap: wrap; }
.rec-title { font-weight: 600; font-size: 15px; }
.badge { background: #eef3fb; color: var(--accent); border-radius: 10px; padding: 0 8px;
         font-size: 12px; }
.savings, .evidence, .fix, .ops { margin: 3px 0; }
.savings b { color: #1a7f37; }
.dim { color: var(--dim); }
table.sortable { border-collapse: collapse; width: 100%; font-size: 13px; }
table.sortable th, table.sortable td { padding: 5px 8px; border-bottom: 1px solid var(--line);
                                       text-align: left; overflow-wrap: anywhere; }
.table-wrap { overflow-x: auto; }
table.sortable th { cursor: pointer; background: var(--bg); user-select: none;
                    overflow-wrap: normal; }
table.sortable th[data-dir="asc"]::after { content: " \\25B2"; }
table.sortable th[data-dir="desc"]::after { content: " \\25BC"; }
table.sortable td.num { text-align: right; font-variant-numeric: tabular-nums;
                        white-space: nowrap; }
@media (max-width: 900px) { table.sortable th, table.sortable td { padding: 5px 5px; } }
#notes li.error { color: #b42318; }
footer { margin-top: 36px; color: var(--dim); font-size: 12px; }
"""

_SCRIPT = """
(function () {
  const config = {displaylogo: false, responsive: true};
  const drawn = Object.keys(FIGURES).map(function (id) {
    const figure = FIGURES[id];
    return Plotly.newPlot(id, figure.data, figure.layout, config);
  });
  Promise.all(drawn).then(function () { document.body.dataset.ready = "1"; });

  function key(cell, numeric) {
    if (!numeric) { return cell.textContent; }
    const value = parseFloat(cell.dataset.sort);
    return isNaN(value) ? -Infinity : value;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th").forEach(function (th, column) {
      th.addEventListener("click", function () {
        const numeric = th.dataset.type === "number";
        // First click: numbers largest first, text A to Z; then each click reverses.
        const previous = th.dataset.dir;
        const dir = previous ? (previous === "asc" ? "desc" : "asc") : (numeric ? "desc" : "asc");
        table.querySelectorAll("th").forEach(function (other) { delete other.dataset.dir; });
        th.dataset.dir = dir;
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        rows.sort(function (a, b) {
          const x = key(a.cells[column], numeric), y = key(b.cells[column], numeric);
          const order = numeric ? x - y : String(x).localeCompare(String(y));
          return dir === "asc" ? order : -order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
})();
"""
