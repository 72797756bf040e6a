"""Render a :class:`~tpuperf.analysis.Report` as Markdown (for PRs, issues and notebooks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpuperf.render.text import (
    fmt_ms,
    fmt_pct,
    md_code,
    md_text,
    memory_text,
    peaks_text,
    workload_text,
)

if TYPE_CHECKING:
    from tpuperf.analysis import Report


def _passes(passes: dict[str, Any] | None) -> str:
    if passes is None:
        return "no scope information in this profile"
    return ", ".join(
        f"{name} {fmt_ms(v['ms_per_step'])} ({fmt_pct(v['pct'])})" for name, v in passes.items()
    )


def _where(row: dict[str, Any]) -> str:
    path = "/".join(p for p in (row.get("scope"), row.get("primitive")) if p)
    source = str(row.get("source") or "").rsplit("/", 1)[-1]
    return " ".join(p for p in (f"`{md_code(path)}`" if path else "", md_text(source)) if p)


def render_markdown(report: Report) -> str:
    s = report.summary
    st = s.get("step_time_ms") or {}
    out = [f"# tpuperf analyze: {md_text(report.source or 'profile')}", ""]
    known = peaks_text(s)
    peaks = f"{known} ({s['peaks_source']})" if known is not None else "unknown"
    rows = [
        ("Chip", f"{s.get('chip') or 'unknown'} ({s.get('platform')})"),
        ("Peaks", peaks),
        ("Devices", f"{s.get('devices')} on {s.get('hosts')} host(s)"),
        ("Workload", workload_text(s.get("workload"))),
        (
            "Steps",
            f"{s['steps_analyzed']} analysed ({s['step_source']}), {s['steps_excluded']} left out"
            if s.get("step_source")
            else "none found",
        ),
        (
            "Step time",
            f"median {fmt_ms(st.get('median'))}, mean {fmt_ms(st.get('mean'))}, "
            f"p90 {fmt_ms(st.get('p90'))}",
        ),
        ("Compute", fmt_pct(s.get("compute_pct"))),
        ("Exposed collective", fmt_pct(s.get("exposed_collective_pct"))),
        ("Exposed copy", fmt_pct(s.get("exposed_copy_pct"))),
        ("Idle", fmt_pct(s.get("idle_pct"))),
        ("No op", fmt_pct(s.get("no_op_pct"))),
        ("FLOP utilization", fmt_pct(s.get("flops_utilization_pct"))),
        ("MFU", fmt_pct(s.get("mfu_pct"))),
        ("Passes", _passes(s.get("passes"))),
        ("Memory", memory_text(s) or "no buffer assignment in this profile"),
    ]
    out += ["| | |", "|---|---|", *(f"| {k} | {md_text(v)} |" for k, v in rows), ""]

    if report.top_ops.n:
        records = report.top_ops.records()
        code = any(_where(r) for r in records)
        out += [
            "## Top ops",
            "",
            "| op | program | kind | time/step | % busy | count/step | bound | roofline eff. |"
            + (" code |" if code else ""),
            "|---|---|---|---:|---:|---:|---|---:|" + ("---|" if code else ""),
        ]
        for r in records:
            out.append(
                f"| `{md_code(r['op'])}` | {md_text(r['module'])} | {r['kind']} | "
                f"{fmt_ms(r['ms_per_step'])} | "
                f"{fmt_pct(r['pct_of_busy'])} | {r['count_per_step']:.3g} | {r['bound'] or ''} | "
                f"{fmt_pct(r['efficiency_pct'])} |" + (f" {_where(r)} |" if code else "")
            )
        out.append("")

    out += ["## Recommendations", ""]
    if not report.recommendations:
        out += ["None: nothing in this profile stands out.", ""]
    for i, rec in enumerate(report.recommendations, 1):
        out += [
            f"### {i}. {md_text(rec.title)} (`{rec.kind}`)",
            "",
            f"**Saves up to {fmt_ms(rec.est_savings_ms)} per step ({rec.est_savings_pct:.1f}%)**, "
            f"confidence {rec.confidence}.",
            "",
            f"- Evidence: {md_text(rec.evidence)}",
        ]
        platform = report.platform.lower()
        fixes = [(platform, rec.fix[platform])] if platform in rec.fix else list(rec.fix.items())
        out += [f"- Fix ({k.upper()}): {v}" for k, v in fixes]
        out.append("")

    notes = [f"{n}: {note}" for n, r in report.results.items() for note in r.notes]
    notes += [f"analyzer {n} failed: {e}" for n, e in report.errors.items()]
    if notes:
        out += ["## Notes", "", *(f"- {md_text(n)}" for n in dict.fromkeys(notes)), ""]
    return "\n".join(out)
