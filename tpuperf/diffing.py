"""Compare two runs: what changed between BASE and NEW, with ops matched across recompilations.

``diff(base, new)`` analyses each side exactly as ``tpuperf analyze`` does
(:func:`tpuperf.report.analyze`, same step selection) and compares the two reports: their
summaries, every op of the analysed steps (``Report.ops``), their categories and their
recommendations. Nothing is measured twice; renderers only format the :class:`DiffReport`.

Ops are renumbered when a program is recompiled (``fusion.123`` becomes ``fusion.140``, and
``fusion.123`` may now name another op), so they are paired by the first rule that holds
(:data:`MATCH_RULES`):

1. ``name``: same module and op name, unless the two disagree on the HLO category, the name
   scope (``tf_op``) or the source line where both record one (then the name was reused);
2. ``scope_shape``: same name scope, HLO category and shape (the HLO text without the op's own
   name and its operands' names, which a recompilation renumbers too);
3. ``source``: same source line and HLO category.

Under rules 2 and 3 several ops can share a key (one source line, many fusions); they are
paired in order of first execution. What stays unpaired is ``added`` or ``removed``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tpuperf import jsonout
from tpuperf.columns import Strings, Table
from tpuperf.config import AnalysisConfig

if TYPE_CHECKING:
    from tpuperf.profile import Profile
    from tpuperf.report import Report

SCHEMA_VERSION = jsonout.SCHEMA_VERSION

MATCH_RULES = ("name", "scope_shape", "source")
OP_STATUSES = ("changed", "same", "added", "removed")
RECOMMENDATION_STATUSES = ("appeared", "went_away", "changed", "same")

# A time (or saving) that moved by less than this share, or by less than SAME_FLOOR_MS per
# step, is `same`: run-to-run noise, not a change.
SAME_PCT = 1.0
SAME_FLOOR_MS = 1e-4

# The step time split, as the summary's (name, Report.summary percentage): each is reported in
# ms per step (`<name>_ms`) and in points of step time (`<name>_pct`).
SPLIT = (
    ("compute", "compute_pct"),
    ("exposed_collective", "exposed_collective_pct"),
    ("exposed_copy", "exposed_copy_pct"),
    ("idle", "idle_pct"),
)
STEP_STATS = ("median", "mean", "p90")
DELTA_FIELDS = ("before", "after", "delta", "delta_pct")  # a time: ms, and the change in %
POINT_FIELDS = ("before", "after", "delta")  # a percentage: the change in points

# The documented JSON layout (README, "tpuperf diff --format json"); tests hold the output to it.
TOP_LEVEL_FIELDS = (
    "schema_version",
    "tool",
    "base",
    "new",
    "summary",
    "ops",
    "categories",
    "recommendations",
    "memory",
    "warnings",
)
RUN_FIELDS = (
    "source",
    "platform",
    "chip",
    "hosts",
    "devices",
    "step_source",
    "steps_analyzed",
    "jax_version",
    "jaxlib_version",
)
OP_COLUMNS = (
    "op",
    "base_op",
    "module",
    "category",
    "kind",
    "status",
    "match",
    "ms_per_step_before",
    "ms_per_step_after",
    "delta_ms",
    "delta_pct",
    "count_per_step_before",
    "count_per_step_after",
)
CATEGORY_COLUMNS = ("category", "ms_per_step_before", "ms_per_step_after", "delta_ms", "delta_pct")
# Each program's peak device memory before and after, in GiB (tpuperf/memory.py).
MEMORY_FIELDS = ("module", "peak_gib_before", "peak_gib_after", "delta", "delta_pct")
RECOMMENDATION_COLUMNS = (
    "kind",
    "analyzer",
    "title",
    "status",
    "est_savings_ms_before",
    "est_savings_ms_after",
    "delta_ms",
    "est_savings_pct_before",
    "est_savings_pct_after",
)
_VERSION_KEYS = ("jax_version", "jaxlib_version")  # as the profiles record them


def _summary_shape() -> dict[str, Any]:
    """The summary's nesting: name -> the fields of its leaf object, or a nested dict."""
    shape: dict[str, Any] = {"step_time_ms": dict.fromkeys(STEP_STATS, DELTA_FIELDS)}
    for name, _ in SPLIT:
        shape[f"{name}_ms"] = DELTA_FIELDS
        shape[f"{name}_pct"] = POINT_FIELDS
    shape["flops_utilization_pct"] = POINT_FIELDS
    shape["mfu_pct"] = POINT_FIELDS
    shape["peak_hbm_gib"] = DELTA_FIELDS
    shape["ops"] = OP_STATUSES
    shape["recommendations"] = RECOMMENDATION_STATUSES
    shape["warnings"] = ()
    return shape


SUMMARY_SHAPE = _summary_shape()


def _flatten_names(shape: dict[str, Any], prefix: str = "") -> list[str]:
    names: list[str] = []
    for key, value in shape.items():
        if isinstance(value, dict):
            names += _flatten_names(value, f"{prefix}{key}.")
        elif value:
            names += [f"{prefix}{key}.{leaf}" for leaf in value]
        else:
            names.append(f"{prefix}{key}")
    return names


# What `--fail-on` can test: every number of the summary, by its dotted path.
GATE_FIELDS = tuple(_flatten_names(SUMMARY_SHAPE))


@dataclass
class DiffReport:
    """BASE and NEW's reports and what changed between them.

    ``ops``, ``categories`` and ``recommendations`` are columnar tables (:data:`OP_COLUMNS`,
    :data:`CATEGORY_COLUMNS`, :data:`RECOMMENDATION_COLUMNS`), largest absolute change first;
    ``.to_pandas()`` gives a DataFrame.
    """

    base: Report
    new: Report
    summary: dict[str, Any]
    ops: Table
    categories: Table
    recommendations: Table
    warnings: list[str] = field(default_factory=list)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # "base"/"new" -> RUN_FIELDS
    memory: list[dict[str, Any]] = field(default_factory=list)  # MEMORY_FIELDS, per program

    def gate_row(self) -> dict[str, Any]:
        """The summary flattened to :data:`GATE_FIELDS` (``step_time_ms.median.delta_pct``)."""
        return _flatten(jsonout.clean(self.summary))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (README, "tpuperf diff"): plain types, no NaN or Infinity."""
        from tpuperf import __version__

        ops = self.ops.records()
        for row in ops:  # absent in JSON is null, not an empty string
            row["base_op"] = row["base_op"] or None
            row["match"] = row["match"] or None
        return jsonout.clean(
            {
                "schema_version": SCHEMA_VERSION,
                "tool": {"name": "tpuperf", "version": __version__},
                "base": self.runs.get("base", {}),
                "new": self.runs.get("new", {}),
                "summary": self.summary,
                "ops": ops,
                "categories": self.categories.records(),
                "recommendations": self.recommendations.records(),
                "memory": self.memory,
                "warnings": self.warnings,
            }
        )

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


def diff(
    base: str | os.PathLike[str] | Profile,
    new: str | os.PathLike[str] | Profile,
    config: AnalysisConfig | None = None,
    steps: str | tuple[int | None, int | None] | None = None,
    host: str | None = None,
) -> DiffReport:
    """Analyse ``base`` and ``new`` (profiles, or anything :func:`tpuperf.load` reads) as
    ``tpuperf analyze`` does, with the same ``config``, ``steps`` and ``host``, and compare them."""
    from tpuperf.profile import load
    from tpuperf.report import analyze

    profiles = [p if not isinstance(p, (str, os.PathLike)) else load(p) for p in (base, new)]
    reports = [analyze(p, config=config, steps=steps, host=host) for p in profiles]
    return compare(reports[0], reports[1], *(versions(p) for p in profiles))


def versions(profile: Profile) -> dict[str, str]:
    """The jax and jaxlib versions a profile records (``jax_version``, ``jaxlib_version``),
    comma-separated when its hosts differ; absent when none records one."""
    out: dict[str, str] = {}
    for key in _VERSION_KEYS:
        seen = sorted({h.versions[key] for h in profile.hosts if h.versions.get(key)})
        if seen:
            out[key] = ", ".join(seen)
    return out


def compare(
    base: Report,
    new: Report,
    base_versions: dict[str, str] | None = None,
    new_versions: dict[str, str] | None = None,
) -> DiffReport:
    """The :class:`DiffReport` of two reports (``versions`` from :func:`versions`)."""
    runs = {
        "base": _run(base, base_versions or {}),
        "new": _run(new, new_versions or {}),
    }
    ops = _op_diff(base.ops, new.ops)
    categories = _category_diff(ops)
    recommendations = _recommendation_diff(base, new)
    warnings = provenance_warnings(runs["base"], runs["new"])
    summary = _summary(base.summary, new.summary)
    summary["ops"] = _counts(ops.strings("status").tolist(), OP_STATUSES)
    summary["recommendations"] = _counts(
        recommendations.strings("status").tolist(), RECOMMENDATION_STATUSES
    )
    summary["warnings"] = len(warnings)
    memory = memory_diff(base.summary, new.summary)
    return DiffReport(base, new, summary, ops, categories, recommendations, warnings, runs, memory)


# --------------------------------------------------------------------------- summary


def _run(report: Report, found: dict[str, str]) -> dict[str, Any]:
    s = report.summary
    return {
        "source": report.source,
        "platform": report.platform,
        "chip": s.get("chip"),
        "hosts": s.get("hosts"),
        "devices": s.get("devices"),
        "step_source": s.get("step_source"),
        "steps_analyzed": s.get("steps_analyzed"),
        "jax_version": found.get("jax_version"),
        "jaxlib_version": found.get("jaxlib_version"),
    }


def _number(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def delta(before: Any, after: Any) -> dict[str, float | None]:
    """``before``, ``after``, ``delta`` and ``delta_pct`` (of ``before``; null when it is 0)."""
    b, a = _number(before), _number(after)
    change = a - b if a is not None and b is not None else None
    pct = 100.0 * change / b if change is not None and b else None
    return {"before": b, "after": a, "delta": change, "delta_pct": pct}


def points(before: Any, after: Any) -> dict[str, float | None]:
    """A percentage's ``before``, ``after`` and ``delta`` in points."""
    b, a = _number(before), _number(after)
    return {"before": b, "after": a, "delta": a - b if a is not None and b is not None else None}


def _window_ms(summary: dict[str, Any]) -> float | None:
    """The mean window per step per device: the summary's window over its iterations (its
    steps in a summary without them; one window, the op span, when the run has no steps)."""
    window = _number(summary.get("window_ms"))
    count = (summary.get("iteration_time_ms") or {}).get("count") or summary.get("steps_analyzed")
    return window / max(int(count or 0), 1) if window else None


def _summary(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    st_b, st_n = base.get("step_time_ms") or {}, new.get("step_time_ms") or {}
    out: dict[str, Any] = {
        "step_time_ms": {k: delta(st_b.get(k), st_n.get(k)) for k in STEP_STATS},
    }
    win_b, win_n = _window_ms(base), _window_ms(new)
    for name, key in SPLIT:
        pct_b, pct_n = _number(base.get(key)), _number(new.get(key))
        out[f"{name}_ms"] = delta(
            pct_b * win_b / 100.0 if pct_b is not None and win_b is not None else None,
            pct_n * win_n / 100.0 if pct_n is not None and win_n is not None else None,
        )
        out[f"{name}_pct"] = points(pct_b, pct_n)
    for key in ("flops_utilization_pct", "mfu_pct"):
        out[key] = points(base.get(key), new.get(key))
    out["peak_hbm_gib"] = delta(base.get("peak_hbm_gib"), new.get("peak_hbm_gib"))
    return out


def memory_diff(base: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """Each program's peak device memory before and after (GiB), paired by module name
    (program ids change with every recompilation), largest change first."""
    before = base.get("program_peak_gib") or {}
    after = new.get("program_peak_gib") or {}
    rows = [
        {
            "module": module,
            "peak_gib_before": before.get(module),
            "peak_gib_after": after.get(module),
            **{
                k: v
                for k, v in delta(before.get(module), after.get(module)).items()
                if k in ("delta", "delta_pct")
            },
        }
        for module in sorted(set(before) | set(after))
    ]
    return sorted(rows, key=lambda r: -abs(r["delta"] or 0.0))


def _counts(statuses: Iterable[str], names: Sequence[str]) -> dict[str, int]:
    counts = dict.fromkeys(names, 0)
    for status in statuses:
        counts[status] += 1
    return counts


def _flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, dict):
            out.update(_flatten(item, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = item
    return out


def provenance_warnings(base: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Why the two runs may not be comparable: chip, devices, hosts, step source, versions."""
    checks: tuple[tuple[str, tuple[str, ...], str, Callable[[dict[str, Any]], str]], ...] = (
        (
            "chip",
            ("chip", "platform"),
            "ran on",
            lambda r: f"{r['chip'] or 'an unknown chip'} ({r['platform']})",
        ),
        ("device count", ("devices",), "analysed", lambda r: f"{r['devices']} device(s)"),
        ("host count", ("hosts",), "analysed", lambda r: f"{r['hosts']} host(s)"),
        (
            "step source",
            ("step_source",),
            "took its steps from",
            lambda r: r["step_source"] or "no steps",
        ),
    )
    out = []
    for label, keys, verb, say in checks:
        if any(base[k] != new[k] for k in keys):
            out.append(
                f"{label} differs: BASE {verb} {say(base)}, NEW {say(new)}; "
                "the runs may not be comparable"
            )
    for key in _VERSION_KEYS:
        if base[key] and new[key] and base[key] != new[key]:
            name = key.removesuffix("_version")
            out.append(f"{name} differs: BASE {base[key]}, NEW {new[key]}")
    return out


# --------------------------------------------------------------------------- ops

_OWN_NAME = re.compile(r"^\s*(?:ROOT\s+)?%[^\s=]+\s*=\s*")
_OPERAND = re.compile(r"%[A-Za-z_][\w.\-]*")
_CHANNEL = re.compile(r"channel_id=\d+")


def shape_key(hlo_text: str) -> str:
    """An op's shape as matching uses it: its HLO text without its own name (``%fusion.3 =``)
    and without the names of its operands and called computations, which a recompilation
    renumbers too (nor channel ids); a kernel name (GPU) stays as it is."""
    text = _OWN_NAME.sub("", hlo_text, count=1)
    return _CHANNEL.sub("channel_id=", _OPERAND.sub("%", text)).strip()


@dataclass(frozen=True)
class _Op:
    index: int
    module: str
    name: str
    category: str
    tf_op: str
    shape: str
    source: str
    order: int


def _op_list(ops: Table) -> list[_Op]:
    if not ops.n:
        return []
    columns = [ops.strings(c).tolist() for c in ("module", "op", "category", "tf_op")]
    hlo, source = ops.strings("hlo_text").tolist(), ops.strings("source").tolist()
    order = ops.array("order").tolist()
    return [
        _Op(i, m, o, c, t, shape_key(h), s, n)
        for i, (m, o, c, t, h, s, n) in enumerate(zip(*columns, hlo, source, order, strict=True))
    ]


def _same_op(a: _Op, b: _Op) -> bool:
    """Whether two same-named ops are one op: a name reused for another op (a recompilation
    renumbers) shows in its category, or its scope or source line where both record one."""
    if a.category != b.category:
        return False
    return all(not (x and y) or x == y for x, y in ((a.tf_op, b.tf_op), (a.source, b.source)))


def match_ops(base: Sequence[_Op], new: Sequence[_Op]) -> list[tuple[_Op | None, _Op | None, str]]:
    """Pairs (base op, new op, rule) by :data:`MATCH_RULES` in turn; an op left unpaired comes
    with None on the other side and an empty rule."""
    pairs: list[tuple[_Op | None, _Op | None, str]] = []
    by_name = {(op.module, op.name): op for op in new}
    left_base: list[_Op] = []
    taken: set[int] = set()
    for op in base:
        other = by_name.get((op.module, op.name))
        if other is not None and _same_op(op, other):
            pairs.append((op, other, "name"))
            taken.add(other.index)
        else:
            left_base.append(op)
    left_new = [op for op in new if op.index not in taken]
    rules: list[tuple[str, Callable[[_Op], tuple[str, ...] | None]]] = [
        ("scope_shape", lambda op: (op.tf_op, op.category, op.shape) if op.shape else None),
        ("source", lambda op: (op.source, op.category) if op.source else None),
    ]
    for rule, key in rules:
        left_base, left_new = _pair_by(key, rule, left_base, left_new, pairs)
    pairs += [(op, None, "") for op in left_base]
    pairs += [(None, op, "") for op in left_new]
    return pairs


def _pair_by(
    key: Callable[[_Op], tuple[str, ...] | None],
    rule: str,
    base: list[_Op],
    new: list[_Op],
    pairs: list[tuple[_Op | None, _Op | None, str]],
) -> tuple[list[_Op], list[_Op]]:
    """Pair ops with one key, in order of first execution; return those left on each side."""
    waiting: dict[tuple[str, ...], list[_Op]] = {}
    for op in sorted(new, key=lambda op: op.order):
        k = key(op)
        if k is not None:
            waiting.setdefault(k, []).append(op)
    left_base = []
    taken: set[int] = set()
    for op in sorted(base, key=lambda op: op.order):
        k = key(op)
        candidates = waiting.get(k) if k is not None else None
        if candidates:
            other = candidates.pop(0)
            pairs.append((op, other, rule))
            taken.add(other.index)
        else:
            left_base.append(op)
    return left_base, [op for op in new if op.index not in taken]


def status(before: float, after: float) -> str:
    """``same`` when a per-step time moved by less than SAME_PCT % or SAME_FLOOR_MS."""
    change = abs(after - before)
    if change < SAME_FLOOR_MS or (before > 0 and 100.0 * change / before < SAME_PCT):
        return "same"
    return "changed"


def _op_diff(base: Table, new: Table) -> Table:
    pairs = match_ops(_op_list(base), _op_list(new))
    ms_b, ms_n = _array(base, "ms_per_step"), _array(new, "ms_per_step")
    count_b, count_n = _array(base, "count_per_step"), _array(new, "count_per_step")
    kind_b, kind_n = _strings(base, "kind"), _strings(new, "kind")
    rows: list[dict[str, Any]] = []
    for b, n, rule in pairs:
        before = float(ms_b[b.index]) if b else 0.0
        after = float(ms_n[n.index]) if n else 0.0
        shown = n or b
        assert shown is not None
        rows.append(
            {
                "op": shown.name,
                "base_op": b.name if b else "",
                "module": shown.module,
                "category": shown.category,
                "kind": kind_n[n.index] if n else kind_b[b.index] if b else "",
                "status": (
                    "added" if b is None else "removed" if n is None else status(before, after)
                ),
                "match": rule,
                "ms_per_step_before": before,
                "ms_per_step_after": after,
                "delta_ms": after - before,
                "delta_pct": 100.0 * (after - before) / before if before else math.nan,
                "count_per_step_before": float(count_b[b.index]) if b else 0.0,
                "count_per_step_after": float(count_n[n.index]) if n else 0.0,
                "_order": (n.order if n else math.inf, b.order if b else math.inf),
            }
        )
    rows.sort(
        key=lambda r: (
            -abs(r["delta_ms"]),
            -max(r["ms_per_step_before"], r["ms_per_step_after"]),
            r["_order"],
        )
    )
    return _table(
        rows, OP_COLUMNS, strings=("op", "base_op", "module", "category", "kind", "status", "match")
    )


def _category_diff(ops: Table) -> Table:
    totals: dict[str, list[float]] = {}
    for category, before, after in zip(
        ops.strings("category").tolist(),
        ops.array("ms_per_step_before").tolist(),
        ops.array("ms_per_step_after").tolist(),
        strict=True,
    ):
        total = totals.setdefault(category, [0.0, 0.0])
        total[0] += before
        total[1] += after
    rows: list[dict[str, Any]] = [
        {
            "category": category,
            "ms_per_step_before": before,
            "ms_per_step_after": after,
            "delta_ms": after - before,
            "delta_pct": 100.0 * (after - before) / before if before else math.nan,
        }
        for category, (before, after) in totals.items()
    ]
    rows.sort(key=lambda r: (-abs(r["delta_ms"]), -r["ms_per_step_after"]))
    return _table(rows, CATEGORY_COLUMNS, strings=("category",))


def _recommendation_diff(base: Report, new: Report) -> Table:
    """Recommendations paired by (analyzer, kind), in rank order."""
    waiting: dict[tuple[str, str], list[Any]] = {}
    for rec in new.recommendations:
        waiting.setdefault((rec.analyzer, rec.kind), []).append(rec)
    pairs: list[tuple[Any, Any]] = []
    for rec in base.recommendations:
        candidates = waiting.get((rec.analyzer, rec.kind))
        pairs.append((rec, candidates.pop(0) if candidates else None))
    pairs += [(None, rec) for recs in waiting.values() for rec in recs]
    rows: list[dict[str, Any]] = []
    for b, n in pairs:
        shown = n or b
        before = (_number(b.est_savings_ms) or 0.0) if b else 0.0
        after = (_number(n.est_savings_ms) or 0.0) if n else 0.0
        rows.append(
            {
                "kind": shown.kind,
                "analyzer": shown.analyzer,
                "title": shown.title,
                "status": "appeared"
                if b is None
                else "went_away"
                if n is None
                else status(before, after),
                "est_savings_ms_before": before,
                "est_savings_ms_after": after,
                "delta_ms": after - before,
                "est_savings_pct_before": (_number(b.est_savings_pct) or 0.0) if b else 0.0,
                "est_savings_pct_after": (_number(n.est_savings_pct) or 0.0) if n else 0.0,
            }
        )
    rows.sort(key=lambda r: -abs(r["delta_ms"]))
    return _table(rows, RECOMMENDATION_COLUMNS, strings=("kind", "analyzer", "title", "status"))


def _array(table: Table, name: str) -> np.ndarray:
    return table.array(name) if table.n else np.zeros(0)


def _strings(table: Table, name: str) -> list[str]:
    return table.strings(name).tolist() if table.n else []


def _table(rows: list[dict[str, Any]], names: Sequence[str], strings: Sequence[str]) -> Table:
    return Table(
        {
            name: Strings.from_list([r[name] for r in rows])
            if name in strings
            else np.array([r[name] for r in rows], dtype=np.float64)
            for name in names
        },
        n=len(rows),
    )
