"""Render ``tpuperf host`` (:func:`tpuperf.hostview.report`) for a terminal with rich.

Names come from the profile, so they go in as Text, never as markup.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from tpuperf.render.fit import Column, fit
from tpuperf.render.text import fmt_ms, fmt_pct


def render_host(document: dict[str, Any], console: Console, wide: bool = False) -> None:
    width = None if wide else console.width
    it = document.get("iteration_time_ms") or {}
    st = document.get("step_time_ms") or {}
    head = Text()
    head.append("Iterations ", style="bold")
    if it.get("median") is not None:
        head.append(
            f"{document['iterations']} (step start to next step start): median "
            f"{fmt_ms(it['median'])}; step {fmt_ms(st.get('median'))}"
        )
    else:
        head.append("none")
    console.print(head)
    if document.get("idle_ms_per_iteration") is not None:
        console.print(
            Text(
                f"Device idle {fmt_ms(document['idle_ms_per_iteration'])} per iteration; "
                f"user code explains {fmt_ms(document['explained_ms_per_iteration'])}\n"
                f"  between steps {fmt_ms(document['between_steps_idle_ms_per_iteration'])} "
                f"(outside steps {fmt_ms(document['outside_steps_idle_ms_per_iteration'])})"
            )
        )
    verdict = document.get("input")
    if verdict:
        source = (
            "input events overlap"
            if verdict["source"] == "input_events"
            else "data-loading code overlaps"
        )
        console.print(
            Text(
                f"Input: {verdict['classification']}: {source} "
                f"{fmt_ms(verdict['input_ms_per_iteration'])} of device idle per iteration "
                f"({fmt_pct(verdict['input_pct_of_iteration'])} of the iteration)"
            )
        )
    xprof = document.get("xprof_input_pipeline")
    if xprof:
        console.print(Text(f"XProf's input-pipeline verdict: {xprof['input_conclusion']}"))
    rows = [
        [
            r["name"],
            r["kind"],
            r["where"] or "-",
            fmt_ms(r["idle_ms_per_iteration"]),
            fmt_ms(r["outside_steps_ms_per_iteration"]),
            f"{r['calls_per_iteration']:.2f}",
            fmt_ms(r["ms_per_call"]),
        ]
        for r in document["events"]
    ]
    if rows:
        columns = [
            Column("host event", "key"),
            Column("kind", "text", drop=2),
            Column("where", "text", drop=1),
            Column("idle/iter"),
            Column("outside/iter", drop=3),
            Column("calls/iter", drop=4),
            Column("per call", drop=5),
        ]
        console.print()
        fit(columns, rows, width).print(
            console, rows, title="Host events while the devices were idle (ranked)"
        )
    for note in document.get("notes", []):
        console.print(Text(f"note: {note}", style="dim"))
