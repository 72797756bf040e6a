"""Compare two runs: what changed between BASE and NEW, with its noise, and whether the code or
the machine changed it.

``diff(base, new)`` analyses each side exactly as ``tpuperf analyze`` does
(:func:`tpuperf.analysis.analyze`, same step selection) and compares the two: their summaries,
every op of the analysed steps, their categories and their recommendations. A side may be
several runs (profiles); their per-step samples are pooled. Renderers only format the
:class:`DiffReport`.

**Pairing.** Ops are renumbered when a program is recompiled (``fusion.123`` becomes
``fusion.140``, and ``fusion.123`` may now name another op), so they are paired by the first
rule that holds (:data:`MATCH_RULES`), with each op's name-scope path and source line from the
one scope table (:func:`tpuperf.scopes.scopes`: ``tf_op`` on TPU, the HLO protos elsewhere):

1. ``name``: same module and op name, unless the two disagree on the HLO category, the scope
   path or the source line where both record one (then the name was reused);
2. ``scope_shape``: same scope path, HLO category and shape (the HLO text without the op's own
   name and its operands' names, which a recompilation renumbers too; on GPU and CPU, where the
   op's HLO text is its name, the instruction's opcode and shapes from the HLO proto);
3. ``source``: same source line, HLO category and scope path.

Under rules 2 and 3 several ops can share a key (one source line, many fusions); they are
paired in order of first execution. What stays unpaired is ``added`` or ``removed``.

**Noise.** Every delta has a 95% percentile-bootstrap interval (:data:`BOOTSTRAP_REPLICATES`
resamples of each side's per-step samples with a fixed seed, so a diff is deterministic) and is
``significant`` when the interval excludes 0.

**Code or machine.** Each program is fingerprinted on each side (:func:`program_fingerprints`).
The common factor is the median ratio NEW/BASE of op time over the ops whose code did not
change (every paired op of identical programs; else the paired ops of the same shape); an op is
``changed`` when its change beyond that factor is significant (and at least SAME_PCT %).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any

import numpy as np

from tpuperf import _threads, hlo_patterns, jsonout, kernels
from tpuperf._dataclasses import dataclass
from tpuperf.columns import Strings, Table, code_counts, group_index, median
from tpuperf.config import AnalysisConfig
from tpuperf.kernels.wire import read_varint

if TYPE_CHECKING:
    from tpuperf.analysis import Report
    from tpuperf.profiles import Profile

SCHEMA_VERSION = jsonout.SCHEMA_VERSION

MATCH_RULES = ("name", "scope_shape", "source")
OP_STATUSES = ("changed", "same", "added", "removed")
RECOMMENDATION_STATUSES = ("appeared", "went_away", "changed", "same")
VERDICTS = ("faster", "slower", "no_change")
ATTRIBUTIONS = ("environment", "code", "mixed")

# A time (or saving) that moved by less than this share, or by less than SAME_FLOOR_MS per
# step, is `same` whatever its interval: too small to act on.
SAME_PCT = 1.0
SAME_FLOOR_MS = 1e-4

# The intervals: a percentile bootstrap of each side's per-step samples, resampled
# independently (steps of two runs are not paired), with a fixed seed so that the same inputs
# give the same intervals.
CONFIDENCE = 0.95
BOOTSTRAP_REPLICATES = 1000
BOOTSTRAP_SEED = 20260101
# The common factor is the median over at most this many ops (those with the most time): a
# median over more moves by less than its interval, and the bootstrap stays small.
FACTOR_MAX_OPS = 1000
# `code` when the ops that changed beyond the common factor make at least this share of the
# change in op time (the rest: the factor's); `mixed` below it.
CODE_SHARE = 0.8
# In an identical program an op is changed only when the factor did not move and the op is an
# outlier among the ops around it: |log(ratio / factor)| over this many robust standard
# deviations (Iglewicz and Hoaglin's modified z-score rule).
OUTLIER_Z = 3.5
_SAMPLE_BYTES = 1 << 20  # of per-step sums turned into samples at once (_run_part)
_CHUNK_OPS = 4096  # ops per block of bootstrap means (a block is this x replicates floats)
# Bootstrap medians of more than this many draws (ops x steps x replicates) take every core.
_PARALLEL_MEDIANS = 50_000_000
_PARALLEL_ROWS = 1_000_000  # values of a side's samples whose rows' medians go to threads

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
# A step time's change with its interval (ms, and % of before) and whether it excludes 0.
INTERVAL_FIELDS = ("ci_low", "ci_high", "ci_low_pct", "ci_high_pct")
STEP_FIELDS = (*DELTA_FIELDS, *INTERVAL_FIELDS)
POINT_FIELDS = ("before", "after", "delta")  # a percentage: the change in points
FACTOR_FIELDS = ("ratio", "ci_low", "ci_high", "ops")

# The documented JSON layout (README, "tpuperf diff --format json"); tests hold the output to it.
TOP_LEVEL_FIELDS = (
    "schema_version",
    "tool",
    "base",
    "new",
    "summary",
    "programs",
    "ops",
    "categories",
    "recommendations",
    "memory",
    "warnings",
)
RUN_FIELDS = (
    "source",
    "runs",
    "platform",
    "chip",
    "hosts",
    "devices",
    "step_source",
    "steps_analyzed",
    "jax_version",
    "jaxlib_version",
)
PROGRAM_FIELDS = ("module", "base_fingerprint", "new_fingerprint", "identical")
OP_COLUMNS = (
    "op",
    "base_op",
    "module",
    "category",
    "kind",
    "status",
    "match",
    "base_scope",
    "new_scope",
    "ms_per_step_before",
    "ms_per_step_after",
    "delta_ms",
    "delta_pct",
    "delta_ci_low_ms",
    "delta_ci_high_ms",
    "significant",
    "beyond_factor_ms",
    "beyond_factor_ci_low_ms",
    "beyond_factor_ci_high_ms",
    "count_per_step_before",
    "count_per_step_after",
)
# The op table's text columns: those before its first number.
_OP_STRINGS = OP_COLUMNS[: OP_COLUMNS.index("ms_per_step_before")]
CATEGORY_COLUMNS = ("category", "ms_per_step_before", "ms_per_step_after", "delta_ms", "delta_pct")
# Each program's peak device memory before and after, in GiB (tpuperf/memory_plan.py).
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
    shape: dict[str, Any] = {"step_time_ms": dict.fromkeys(STEP_STATS, STEP_FIELDS)}
    for name, _ in SPLIT:
        shape[f"{name}_ms"] = DELTA_FIELDS
        shape[f"{name}_pct"] = POINT_FIELDS
    shape["flops_utilization_pct"] = POINT_FIELDS
    shape["mfu_pct"] = POINT_FIELDS
    shape["peak_hbm_gib"] = DELTA_FIELDS
    shape["common_factor"] = FACTOR_FIELDS
    shape["change_ms"] = ("environment", "code")
    shape["programs"] = ("identical", "different")
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


# What `--fail-on` can test: every number of the summary, by its dotted path...
GATE_FIELDS = tuple(_flatten_names(SUMMARY_SHAPE))
# ...and its words: the verdict, the attribution, and whether each step time moved
# (`true`/`false`).
GATE_TEXT_FIELDS = (
    "verdict",
    "attribution",
    *(f"step_time_ms.{stat}.significant" for stat in STEP_STATS),
)
# A gate on one of these trips only when the change is significant (unless told otherwise):
# field -> the summary's `significant` that judges it.
SIGNIFICANCE_OF = {
    f"step_time_ms.{stat}.{leaf}": f"step_time_ms.{stat}.significant"
    for stat in STEP_STATS
    for leaf in ("delta", "delta_pct")
}


@dataclass
class DiffReport:
    """BASE and NEW's reports and what changed between them.

    ``ops``, ``categories`` and ``recommendations`` are columnar tables (:data:`OP_COLUMNS`,
    :data:`CATEGORY_COLUMNS`, :data:`RECOMMENDATION_COLUMNS`), largest absolute change first;
    ``.to_pandas()`` gives a DataFrame. ``base`` and ``new`` are the first run's report of each
    side; ``base_reports`` and ``new_reports`` all of them.
    """

    base: Report
    new: Report
    summary: dict[str, Any]
    ops: Table
    categories: Table
    recommendations: Table
    warnings: list[str] = field(default_factory=list)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # "base"/"new" -> RUN_FIELDS
    programs: list[dict[str, Any]] = field(default_factory=list)  # PROGRAM_FIELDS
    base_reports: list[Report] = field(default_factory=list)
    new_reports: list[Report] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)  # MEMORY_FIELDS, per program

    def gate_row(self) -> dict[str, Any]:
        """The summary flattened to :data:`GATE_FIELDS` (``step_time_ms.median.delta_pct``) and
        :data:`GATE_TEXT_FIELDS` (booleans as ``true``/``false``)."""
        row = _flatten(jsonout.clean(self.summary))
        return {
            name: ("true" if row[name] else "false") if isinstance(row[name], bool) else row[name]
            for name in (*GATE_FIELDS, *GATE_TEXT_FIELDS)
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (README, "tpuperf diff"): plain types, no NaN or Infinity."""
        from tpuperf import __version__

        ops = self.ops.records()
        for row in ops:  # absent in JSON is null, not an empty string
            for name in ("base_op", "match", "base_scope", "new_scope"):
                row[name] = row[name] or None
            row["significant"] = bool(row["significant"])
        return jsonout.clean(
            {
                "schema_version": SCHEMA_VERSION,
                "tool": {"name": "tpuperf", "version": __version__},
                "base": self.runs.get("base", {}),
                "new": self.runs.get("new", {}),
                "summary": self.summary,
                "programs": self.programs,
                "ops": ops,
                "categories": self.categories.records(),
                "recommendations": self.recommendations.records(),
                "memory": self.memory,
                "warnings": self.warnings,
            }
        )

    def to_json(self, indent: int | None = 2) -> str:
        return jsonout.dumps(self.to_dict(), indent)

    def stored(self) -> dict[str, Any]:
        """The comparison as the cache keeps it: every field but the runs' reports, which
        the cache keeps apart (each run's analysis); :meth:`from_stored` makes it again."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in _REPORT_FIELDS
        }

    @classmethod
    def from_stored(
        cls, values: dict[str, Any], base_reports: list[Report], new_reports: list[Report]
    ) -> DiffReport:
        """The comparison :meth:`stored` gave ``values`` of, of these runs' reports."""
        return cls(
            base=base_reports[0],
            new=new_reports[0],
            base_reports=base_reports,
            new_reports=new_reports,
            **values,
        )


# The fields of a DiffReport that hold the runs' reports.
_REPORT_FIELDS = ("base", "new", "base_reports", "new_reports")


def diff(
    base: str | os.PathLike[str] | Profile | Sequence[str | os.PathLike[str] | Profile],
    new: str | os.PathLike[str] | Profile | Sequence[str | os.PathLike[str] | Profile],
    config: AnalysisConfig | None = None,
    steps: str | tuple[int | None, int | None] | None = None,
    host: str | None = None,
) -> DiffReport:
    """Analyse ``base`` and ``new`` (each a profile, anything :func:`tpuperf.load` reads, or a
    list of them: several runs of one side, pooled) as ``tpuperf analyze`` does, with the same
    ``config``, ``steps`` and ``host``, and compare them."""
    from tpuperf.profiles import load

    def profiles(side: Any) -> list[Profile]:
        items = list(side) if isinstance(side, (list, tuple)) else [side]
        return [p if not isinstance(p, (str, os.PathLike)) else load(p) for p in items]

    return compare_runs(profiles(base), profiles(new), config, steps, host)


def compare_runs(
    base: Sequence[Profile],
    new: Sequence[Profile],
    config: AnalysisConfig | None = None,
    steps: str | tuple[int | None, int | None] | None = None,
    host: str | None = None,
) -> DiffReport:
    """The :class:`DiffReport` of BASE's and NEW's runs (one profile or several per side)."""
    if not base or not new:
        raise ValueError("each side needs at least one profile")
    return compare_sides(side(base, config, steps, host), side(new, config, steps, host))


def versions(profile: Profile) -> dict[str, str]:
    """The jax and jaxlib versions a profile records (``jax_version``, ``jaxlib_version``),
    comma-separated when its hosts differ; absent when none records one."""
    out: dict[str, str] = {}
    for key in _VERSION_KEYS:
        seen = sorted({h.versions[key] for h in profile.hosts if h.versions.get(key)})
        if seen:
            out[key] = ", ".join(seen)
    return out


# --------------------------------------------------------------------------- one side


@dataclass(eq=False)  # of arrays (see tpuperf.columns)
class Side:
    """One side of a diff: the reports of its runs and what the diff pools from them.

    ``ops`` has one row per (module, op) of any run (the attributes of Report.ops, ``scope``,
    ``source`` from the scope table and ``shape``), ``samples`` its self time per step per
    device in ms, one column per analysed step of every run, ``step_ms`` the step times of every
    run, and ``programs`` each module's fingerprint."""

    reports: list[Report]
    ops: Table
    samples: np.ndarray  # (ops, steps) float64, ms
    step_ms: np.ndarray
    summary: dict[str, Any]  # the pooled summary, as Report.summary names its values
    programs: dict[str, str]
    versions: dict[str, str]

    @functools.cached_property
    def typical(self) -> np.ndarray:
        """Each op's typical time per step (ms): the median of its per-step samples, which a
        step that a busy machine stretched (a preempted thread) does not move; its mean per
        step where there are no samples. Found once: the common factor and the op diff both
        read it."""
        if self.samples.shape[1] == 0:
            return self.ops.array("ms_per_step") if self.ops.n else np.zeros(0)
        return _row_medians(self.samples)


def _row_medians(samples: np.ndarray) -> np.ndarray:
    """``np.median(samples, axis=1)``; a large array's rows in blocks side by side (numpy's
    partition lets go of the GIL: 3,000 ops x 5,200 steps, 0.2 s -> 0.1 s)."""
    return _by_rows(
        lambda block: np.asarray(np.median(block, axis=1)),
        samples,
        samples.size >= _PARALLEL_ROWS,
        "tpuperf-median",
    )


def _by_rows(
    found_of: Callable[[np.ndarray], np.ndarray], samples: np.ndarray, parallel: bool, name: str
) -> np.ndarray:
    """``found_of(samples)``, of whose rows each row's result is its own: with ``parallel``,
    the rows in a block a core, side by side in threads named ``name`` (numpy and the
    kernels let go of the GIL), put back in order."""
    workers = min(os.cpu_count() or 1, len(samples))
    if not parallel or workers < 2:
        return found_of(samples)
    with _threads.pool(workers, name) as pool:
        return np.concatenate(list(pool.map(found_of, np.array_split(samples, workers))))


def side(
    profiles: Sequence[Profile],
    config: AnalysisConfig | None = None,
    steps: str | tuple[int | None, int | None] | None = None,
    host: str | None = None,
    reports: Sequence[Report | None] | None = None,
) -> Side:
    """Analyse each profile as ``tpuperf analyze`` does and pool them into one :class:`Side`.
    ``reports``: a profile's report where the caller has it already (the cache kept one),
    analysed under this config; None for one to analyse here."""
    from tpuperf.analysis import analyze
    from tpuperf.config import parse_steps
    from tpuperf.timeline import build_timeline

    config = config if config is not None else AnalysisConfig()
    if steps is not None:
        config = dataclasses.replace(
            config, steps=parse_steps(steps) if isinstance(steps, str) else steps
        )
    if host is not None:
        config = dataclasses.replace(config, host=host)
    runs = []
    for profile, given in zip(profiles, reports or [None] * len(profiles), strict=True):
        report = given if given is not None else analyze(profile, config=config)
        # The timeline analyze just built (build_timeline keeps it for the same config).
        runs.append((profile, report, build_timeline(profile, config)))
    return _pool([_run_part(*run) for run in runs], [r for _, r, _ in runs], profiles)


@dataclass
class _RunPart:
    """One run's share of a side: its ops (keys and attributes), their self time per step,
    its steps, windows and programs."""

    keys: list[tuple[str, str]]  # (module, op), as Report.ops orders them
    attributes: list[dict[str, str]]
    self_ps: np.ndarray  # per op, over all windows
    counts: np.ndarray  # executions per op, over all windows
    samples: np.ndarray  # (ops, steps) ms per step per device
    step_ps: np.ndarray
    windows: int
    programs: dict[str, str]


_ATTRIBUTES = ("kind", "category", "hlo_text")


def _run_part(profile: Profile, report: Report, tl: Any) -> _RunPart:
    ops = report.ops
    keys = list(
        zip(_strings(ops, "module"), _strings(ops, "op"), strict=True)
    )  # Report.ops: one row per (module, op)
    index = {key: i for i, key in enumerate(keys)}
    code = _code_of(profile, keys)
    attributes = [
        {
            "kind": k,
            "category": c,
            "scope": code[i][0],
            "source": code[i][1],
            # CPU ops' HLO text is their own name, which says nothing of their shape.
            "shape": code[i][2] or (shape_key(h) if h != keys[i][1] else ""),
        }
        for i, (k, c, h) in enumerate(zip(*(_strings(ops, a) for a in _ATTRIBUTES), strict=True))
    ]
    step_numbers = sorted(tl.steps_selected) if tl.has_steps else [-1]
    column = {s: j for j, s in enumerate(step_numbers)}
    numbers = np.array(step_numbers, dtype=np.int64)  # ascending, as the timeline selects them
    # Per (op, step) cell, self time summed over the devices, added in place: whole
    # picoseconds, exact in any order (a bincount per device made an ops x steps array of
    # its own and added it: 140 MB a device at 1.8 GB; numpy's add.at, 0.3 s a side there).
    # Ops of no row of the report's are added to a spare row past the last, not kept.
    n_steps = len(step_numbers)
    totals = np.zeros((len(keys) + 1) * n_steps, dtype=np.int64)
    devices_per_step = np.zeros(n_steps, dtype=np.float64)
    ran: dict[str, set[tuple[str, str]]] = {}  # module -> (host, program id) of what ran
    for view in tl.devices:
        for s in view.windows.step.tolist():
            devices_per_step[column.get(s if tl.has_steps else -1, 0)] += 1
        selected = view.selected_ops("module", "op", "program_id", "self_ps")
        if not selected.n:
            continue
        module, op = selected.strings("module"), selected.strings("op")
        programs = selected.strings("program_id")
        # Every op here starts in a selected window: each window's column, searched once.
        if tl.has_steps:
            cols = view.of_selected(np.searchsorted(numbers, view.windows.step))
        else:
            cols = np.zeros(selected.n, dtype=np.int64)
        codes, row_of, pairs = _rows_and_programs(module, op, programs, index)
        cell_of = np.where(row_of >= 0, row_of, len(keys)) * n_steps  # (per code: few)
        cells = cell_of[codes] + cols
        self_ps = selected.array("self_ps").astype(np.int64, copy=False)
        added = kernels.group_sums(cells, self_ps, len(totals), into=totals)
        assert added is not None  # every cell is one of the table's (the spare row's too)
        for m, p in pairs:
            ran.setdefault(m, set()).add((view.host, p))
    # Each cell's time per device in ms, written over its sums a block of rows at a time: at
    # 1.8 GB a second array of them would be 140 MB more, each page of it faulted in afresh.
    cells_ps = totals[: len(keys) * n_steps].reshape(len(keys), n_steps)
    samples = cells_ps.view(np.float64)
    per_device = np.maximum(devices_per_step, 1.0)
    block = max(_SAMPLE_BYTES // (8 * max(n_steps, 1)), 1)  # rows
    for first in range(0, len(keys), block):
        rows = slice(first, first + block)
        samples[rows] = cells_ps[rows] / per_device / 1e9  # (the block read before written)
    step_ps = tl.step_time_ps if tl.has_steps else np.zeros(0)
    return _RunPart(
        keys=keys,
        attributes=attributes,
        self_ps=ops.array("self_ps").astype(np.float64) if ops.n else np.zeros(0),
        counts=(ops.array("count_per_step") * max(tl.n_windows, 1) if ops.n else np.zeros(0)),
        samples=samples,
        step_ps=np.asarray(step_ps, dtype=np.float64),
        windows=max(tl.n_windows, 1),
        programs=program_fingerprints(profile, ran, tl, keys, attributes),
    )


def _rows_and_programs(
    module: Strings, op: Strings, program: Strings, index: dict[tuple[str, str], int]
) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str]]]:
    """Each op's row in ``index`` (by its (module, op); -1 where it has none), as a code per
    op and the row of each code (``row_of[codes]``), and the distinct (module, program)
    pairs of the ops. Where the three columns share one index (a TPU op's names, by
    metadata row), the codes are that index, and the rows and pairs come from the index
    values in use, found in one count, rather than from grouping every op twice."""
    shared = module.index
    if (
        op.index is shared
        and program.index is shared
        and all(s.mapping is not None for s in (module, op, program))
        and shared.dtype.kind in "iu"
    ):
        used = np.flatnonzero(code_counts(shared, len(module.mapping)))  # type: ignore[arg-type]
        names = [
            [s.values[c] for c in s.mapping[used].tolist()]  # type: ignore[index]
            for s in (module, op, program)
        ]
        row_of = np.full(len(module.mapping), -1, dtype=np.int64)  # type: ignore[arg-type]
        row_of[used] = [index.get(key, -1) for key in zip(names[0], names[1], strict=True)]
        return shared, row_of, list(dict.fromkeys(zip(names[0], names[2], strict=True)))
    group, first = group_index([module, op])
    row_of = np.array(
        [index.get(k, -1) for k in zip(module.take(first), op.take(first), strict=True)],
        dtype=np.int64,
    )
    _, firsts = group_index([module, program])
    return group, row_of, list(zip(module.take(firsts), program.take(firsts), strict=True))


def _code_of(profile: Profile, keys: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """Per (module, op): its scope path and source line from the scope table, and its shape
    from its program's HLO proto (empty where the profile has none)."""
    from tpuperf.scopes import scopes

    table = scopes(profile).table
    found: dict[tuple[str, str], tuple[str, str, str]] = {}
    if table.n:
        columns = [table.strings(c).tolist() for c in ("module", "program_id", "op")]
        paths, sources = table.strings("name_scope").tolist(), table.strings("source").tolist()
        for module, program_id, op, path, source in zip(*columns, paths, sources, strict=True):
            found.setdefault((module, op), (path, source, program_id))
    shapes = _proto_shapes(profile, {program for _, _, program in found.values()})
    out = []
    for key in keys:
        path, source, program_id = found.get(key, ("", "", ""))
        out.append((path, source, shapes.get(program_id, {}).get(key[1], "")))
    return out


def _protos(profile: Profile) -> dict[str, bytes]:
    """Program id -> serialized ``xla.HloProto`` of every host's HLO protos (the first host
    that has a program wins: every host compiles the same one)."""
    from tpuperf.tables import split_module_name

    out: dict[str, bytes] = {}
    for by_name in (getattr(profile, "hlo_protos", None) or {}).values():
        for name, data in by_name.items():
            split = split_module_name(name)
            if split:
                out.setdefault(split[1], data)
    return out


def _proto_shapes(profile: Profile, programs: set[str]) -> dict[str, dict[str, str]]:
    """Program id -> op -> its shape key from the HLO proto (opcode, result and operand
    shapes); programs whose proto cannot be read have none."""
    protos = _protos(profile)
    out: dict[str, dict[str, str]] = {}
    for program in programs:
        data = protos.get(program)
        if data is None:
            continue
        try:
            out[program] = instruction_shapes(data)
        except ValueError:  # a damaged proto costs the shapes, not the diff
            continue
    return out


# --------------------------------------------------------------------------- HLO protos
#
# Read at the wire level: the fingerprint needs the module's fields as they are serialized
# (less the ones a rerun changes), and shapes need three fields of each instruction.

_HLO_MODULE = 1  # HloProto.hlo_module
_MODULE_ID, _MODULE_SCHEDULE, _MODULE_COMPUTATIONS = 5, 7, 3  # HloModuleProto
_COMPUTATION_INSTRUCTIONS = 2  # HloComputationProto.instructions
# HloInstructionProto: name, opcode, shape, id, operand_ids
_INSTR_NAME, _INSTR_OPCODE, _INSTR_SHAPE, _INSTR_ID, _INSTR_OPERANDS = 1, 2, 3, 35, 36


def wire_fields(data: bytes) -> list[tuple[int, int, bytes | int]]:
    """The top-level fields of a protobuf message: (number, wire type, bytes or integer)."""
    out: list[tuple[int, int, bytes | int]] = []
    i = 0
    while i < len(data):
        tag, i = read_varint(data, i, len(data))
        number, kind = tag >> 3, tag & 7
        if kind == 0:
            value, i = read_varint(data, i, len(data))
            out.append((number, kind, value))
        elif kind == 2:
            length, i = read_varint(data, i, len(data))
            if i + length > len(data):
                raise ValueError("truncated field")
            out.append((number, kind, data[i : i + length]))
            i += length
        elif kind in (1, 5):
            size = 8 if kind == 1 else 4
            out.append((number, kind, data[i : i + size]))
            i += size
        else:
            raise ValueError(f"unsupported wire type {kind}")
    return out


def _module_bytes(hlo_proto: bytes) -> bytes:
    for number, kind, value in wire_fields(hlo_proto):
        if number == _HLO_MODULE and kind == 2 and isinstance(value, bytes):
            return value
    raise ValueError("no hlo_module in the HLO proto")


def hlo_fingerprint(hlo_proto: bytes) -> str:
    """A fingerprint of a serialized ``xla.HloProto``'s module: a hash of its fields, less its
    id (a counter of the process that compiled it) and with its schedule's entries sorted (a
    map, serialized in hash-map order, which differs from one run of a program to the next)."""
    digest = hashlib.sha256()
    for number, kind, value in wire_fields(_module_bytes(hlo_proto)):
        if number == _MODULE_ID:
            continue
        if number == _MODULE_SCHEDULE and isinstance(value, bytes):
            entries = sorted(repr(f).encode() for f in wire_fields(value))
            value = b"".join(entries)
        digest.update(f"{number}:{kind}:".encode())
        digest.update(value if isinstance(value, bytes) else str(value).encode())
    return digest.hexdigest()[:16]


def instruction_shapes(hlo_proto: bytes) -> dict[str, str]:
    """Instruction name -> ``opcode result-shape <- operand shapes`` of a serialized
    ``xla.HloProto`` (shapes as hashes of their ``ShapeProto``): what an op computes, without
    the names and ids a recompilation renumbers."""
    out: dict[str, str] = {}
    for number, _, computation in wire_fields(_module_bytes(hlo_proto)):
        if number != _MODULE_COMPUTATIONS or not isinstance(computation, bytes):
            continue
        instructions = []
        shape_of: dict[int, str] = {}
        for inner, _, instruction in wire_fields(computation):
            if inner != _COMPUTATION_INSTRUCTIONS or not isinstance(instruction, bytes):
                continue
            name = opcode = shape = ""
            ident = 0
            operands: list[int] = []
            for f, kind, value in wire_fields(instruction):
                if f == _INSTR_NAME and isinstance(value, bytes):
                    name = value.decode(errors="replace")
                elif f == _INSTR_OPCODE and isinstance(value, bytes):
                    opcode = value.decode(errors="replace")
                elif f == _INSTR_SHAPE and isinstance(value, bytes):
                    shape = hashlib.sha256(value).hexdigest()[:12]
                elif f == _INSTR_ID and isinstance(value, int):
                    ident = value
                elif f == _INSTR_OPERANDS:
                    operands += _packed(value) if kind == 2 else [int(value)]  # type: ignore[arg-type]
            shape_of[ident] = shape
            instructions.append((name, opcode, shape, operands))
        for name, opcode, shape, operands in instructions:
            inputs = ",".join(shape_of.get(o, "?") for o in operands)
            out[name] = f"{opcode} {shape} <- {inputs}"
    return out


def _packed(value: bytes | int) -> list[int]:
    if isinstance(value, int):
        return [value]
    out, i = [], 0
    while i < len(value):
        number, i = read_varint(value, i, len(value))
        out.append(number)
    return out


def program_fingerprints(
    profile: Profile,
    ran: dict[str, set[tuple[str, str]]],
    tl: Any,
    keys: list[tuple[str, str]],
    attributes: list[dict[str, str]],
) -> dict[str, str]:
    """Module -> fingerprint of the programs of that name that ran in the analysed steps.

    A program's fingerprint is, in order of preference: its program id on TPU (XLA's
    fingerprint of the program: a recompiled program gets a new one), a hash of its HLO proto
    (:func:`hlo_fingerprint`; GPU and CPU, whose program ids are counters), or a hash of its
    ops' shapes and categories. Several programs of one name give one fingerprint of theirs."""
    tpu_hosts = {view.host for view in tl.devices if view.kind == "TPU"}
    protos = _protos(profile)
    by_module: dict[str, list[str]] = {}
    for module, programs in ran.items():
        prints: set[str] = set()
        for host, program_id in programs:
            data = protos.get(program_id) if program_id else None
            if host in tpu_hosts and program_id:
                prints.add(program_id)
            elif data is not None:
                try:
                    prints.add(hlo_fingerprint(data))
                except ValueError:
                    prints.add("")
            else:
                prints.add("")
        by_module[module] = sorted(prints)
    out: dict[str, str] = {}
    for module, found in by_module.items():
        if "" in found:  # no fingerprint recorded: the module's ops say what it is
            ops = sorted(
                f"{op}\t{a['category']}\t{a['shape']}"
                for (m, op), a in zip(keys, attributes, strict=True)
                if m == module
            )
            found = sorted({*found, _hash("\n".join(ops))} - {""})
        out[module] = found[0] if len(found) == 1 else _hash(",".join(found))
    return out


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _pool(parts: list[_RunPart], reports: list[Report], profiles: Sequence[Profile]) -> Side:
    """One side from its runs: ops by (module, op) in order of first execution, their self
    time per step over every run's windows, samples side by side."""
    index: dict[tuple[str, str], int] = {}
    attributes: list[dict[str, str]] = []
    for part in parts:
        for key, attrs in zip(part.keys, part.attributes, strict=True):
            if key not in index:
                index[key] = len(attributes)
                attributes.append(attrs)
    n = len(index)
    self_ps = np.zeros(n)
    counts = np.zeros(n)
    widths = [part.samples.shape[1] for part in parts]
    if len(parts) == 1 and len(parts[0].keys) == n:
        samples = parts[0].samples  # one run: its rows are the side's, in order
    else:  # each run's steps side by side, its ops at their rows (zero where it has none)
        samples = np.zeros((n, sum(widths)))
    first = 0  # the part's first column of samples
    for part, width in zip(parts, widths, strict=True):
        rows = np.array([index[k] for k in part.keys], dtype=np.int64)
        self_ps[rows] += part.self_ps
        counts[rows] += part.counts
        if samples is not part.samples:
            samples[rows, first : first + width] = part.samples
        first += width
    windows = sum(part.windows for part in parts)
    keys = list(index)
    ops = Table(
        {
            "module": Strings.from_list([m for m, _ in keys]),
            "op": Strings.from_list([o for _, o in keys]),
            **{
                name: Strings.from_list([a[name] for a in attributes])
                for name in ("kind", "category", "scope", "source", "shape")
            },
            "order": np.arange(n, dtype=np.int64),
            "ms_per_step": self_ps / windows / 1e9,
            "count_per_step": counts / windows,
        },
        n=n,
    )
    programs: dict[str, str] = {}
    for part in parts:
        for module, fingerprint in part.programs.items():
            seen = programs.get(module)
            programs[module] = (
                fingerprint
                if seen in (None, fingerprint)
                else ",".join(sorted({*seen.split(","), fingerprint}))
            )
    found: dict[str, set[str]] = {}
    for profile in profiles:
        for name, value in versions(profile).items():
            found.setdefault(name, set()).update(value.split(", "))
    return Side(
        reports=reports,
        ops=ops,
        samples=samples,
        step_ms=np.concatenate([p.step_ps for p in parts]) / 1e9,
        summary=_pooled_summary(reports, np.concatenate([p.step_ps for p in parts])),
        programs=programs,
        versions={k: ", ".join(sorted(v)) for k, v in found.items()},
    )


def _pooled_summary(reports: list[Report], step_ps: np.ndarray) -> dict[str, Any]:
    """Report.summary for one run; for several, step times from every run's steps and the
    shares averaged over runs by their windows."""
    if len(reports) == 1:
        return reports[0].summary
    from tpuperf.timeline import stats_ms

    out = dict(reports[0].summary)
    windows = [float(_number(r.summary.get("window_ms")) or 0.0) for r in reports]
    total = sum(windows)
    for key in (*(k for _, k in SPLIT), "flops_utilization_pct", "mfu_pct"):
        values = [_number(r.summary.get(key)) for r in reports]
        known = [(v, w) for v, w in zip(values, windows, strict=True) if v is not None]
        weight = sum(w for _, w in known)
        out[key] = sum(v * w for v, w in known) / weight if known and weight else None
    out["window_ms"] = total
    out["steps_analyzed"] = sum(int(r.summary.get("steps_analyzed") or 0) for r in reports)
    out["step_time_ms"] = stats_ms(step_ps) if len(step_ps) else reports[0].summary["step_time_ms"]
    return out


# --------------------------------------------------------------------------- the comparison


def compare_sides(base: Side, new: Side) -> DiffReport:
    """The :class:`DiffReport` of two sides (:func:`side`)."""
    runs = {"base": _run(base), "new": _run(new)}
    programs = _programs(base.programs, new.programs)
    identical = {p["module"] for p in programs if p["identical"]}
    boot = _Bootstrap(base.samples.shape[1], new.samples.shape[1])
    pairs = match_ops(_op_list(base.ops), _op_list(new.ops))
    factor = _common_factor(base, new, pairs, identical, boot)
    ops = _op_diff(base, new, pairs, factor, boot, identical)
    categories = _category_diff(ops)
    recommendations = _recommendation_diff(base.reports[0], new.reports[0])
    warnings = provenance_warnings(runs["base"], runs["new"])
    summary = _summary(base.summary, new.summary)
    _step_intervals(summary["step_time_ms"], base.step_ms, new.step_ms, boot)
    statuses = ops.strings("status").tolist()
    summary["verdict"] = _verdict(summary["step_time_ms"]["median"])
    summary["change_ms"] = change_split(ops, factor)
    summary["attribution"] = _attribution(programs, statuses, factor, summary["change_ms"])
    summary["common_factor"] = {
        "ratio": factor.ratio,
        "ci_low": factor.low,
        "ci_high": factor.high,
        "ops": factor.ops,
    }
    summary["programs"] = {
        "identical": len(identical),
        "different": len(programs) - len(identical),
    }
    summary["ops"] = _counts(statuses, OP_STATUSES)
    summary["recommendations"] = _counts(
        recommendations.strings("status").tolist(), RECOMMENDATION_STATUSES
    )
    summary["warnings"] = len(warnings)
    return DiffReport(
        base.reports[0],
        new.reports[0],
        summary,
        ops,
        categories,
        recommendations,
        warnings,
        runs,
        programs,
        base.reports,
        new.reports,
        memory_diff(base.summary, new.summary),
    )


def compare(
    base: Report,
    new: Report,
    base_versions: dict[str, str] | None = None,
    new_versions: dict[str, str] | None = None,
) -> DiffReport:
    """The :class:`DiffReport` of two reports alone, without their profiles: no per-step
    samples (so no intervals: nothing is significant) and no programs' fingerprints."""
    return compare_sides(_report_side(base, base_versions), _report_side(new, new_versions))


def _report_side(report: Report, found: dict[str, str] | None) -> Side:
    ops = report.ops
    n = ops.n
    keys = list(zip(_strings(ops, "module"), _strings(ops, "op"), strict=True))
    table = Table(
        {
            "module": Strings.from_list([m for m, _ in keys]),
            "op": Strings.from_list([o for _, o in keys]),
            "kind": Strings.from_list(_strings(ops, "kind")),
            "category": Strings.from_list(_strings(ops, "category")),
            "scope": Strings.from_list(_strings(ops, "tf_op")),
            "source": Strings.from_list(_strings(ops, "source")),
            "shape": Strings.from_list([shape_key(h) for h in _strings(ops, "hlo_text")]),
            "order": np.arange(n, dtype=np.int64),
            "ms_per_step": _array(ops, "ms_per_step"),
            "count_per_step": _array(ops, "count_per_step"),
        },
        n=n,
    )
    return Side([report], table, np.zeros((n, 0)), np.zeros(0), report.summary, {}, found or {})


def _run(side: Side) -> dict[str, Any]:
    s = side.summary
    first = side.reports[0]
    return {
        "source": ", ".join(r.source for r in side.reports),
        "runs": len(side.reports),
        "platform": first.platform,
        "chip": s.get("chip"),
        "hosts": s.get("hosts"),
        "devices": s.get("devices"),
        "step_source": s.get("step_source"),
        "steps_analyzed": s.get("steps_analyzed"),
        "jax_version": side.versions.get("jax_version"),
        "jaxlib_version": side.versions.get("jaxlib_version"),
    }


def _programs(base: dict[str, str], new: dict[str, str]) -> list[dict[str, Any]]:
    """Every module that ran on either side, with its fingerprint on each (null where it did
    not run) and whether the two are the same program."""
    out = []
    for module in sorted({*base, *new}):
        b, n = base.get(module), new.get(module)
        out.append(
            {
                "module": module,
                "base_fingerprint": b,
                "new_fingerprint": n,
                "identical": b is not None and b == n,
            }
        )
    return out


# --------------------------------------------------------------------------- statistics


class _Bootstrap:
    """Resampling weights of each side's steps: replicate r of a side's per-step samples has
    mean ``samples @ weights[r]`` (a multinomial draw of its steps, divided by their count).
    One fixed seed for every diff: the same inputs give the same intervals."""

    def __init__(self, n_base: int, n_new: int) -> None:
        rng = np.random.default_rng(BOOTSTRAP_SEED)
        self.n = (n_base, n_new)
        self.index = tuple(
            rng.integers(0, max(n, 1), (BOOTSTRAP_REPLICATES, max(n, 1))) for n in self.n
        )
        # (replicates, steps): how many times each replicate draws each step, counted at once
        # (replicate r's draws offset by r x steps: a bincount a replicate took 0.1 s at 1.8 GB)
        self.counts = tuple(
            _draws(index, max(n, 1)) for index, n in zip(self.index, self.n, strict=True)
        )
        self.weights = tuple(
            counts.T / max(n, 1) for counts, n in zip(self.counts, self.n, strict=True)
        )  # (steps, replicates)
        # Each side's bootstrap medians, by the row of its samples (see medians_at).
        self._medians: tuple[dict[int, np.ndarray], dict[int, np.ndarray]] = ({}, {})

    @property
    def usable(self) -> bool:
        """Whether each side has the two steps an interval needs."""
        return min(self.n) >= 2

    def means(self, samples: np.ndarray, which: int) -> np.ndarray:
        """(rows, replicates): the bootstrap means of each row of ``samples``."""
        return samples @ self.weights[which]

    def medians(self, samples: np.ndarray, which: int) -> np.ndarray:
        """(rows, replicates): the bootstrap medians of each row of ``samples`` (numpy's median
        of ``samples[:, index]``, without making that rows x replicates x steps array). Rows
        are independent: a large diff's go to a thread per core (the kernel lets go of the
        GIL), in blocks, put back in order."""
        counts = self.counts[which]

        def medians_of(block: np.ndarray) -> np.ndarray:
            found = kernels.bootstrap_medians(block, counts)
            assert found is not None  # each replicate draws each side's steps
            return found

        parallel = samples.size * len(counts) >= _PARALLEL_MEDIANS
        return _by_rows(medians_of, samples, parallel, "tpuperf-bootstrap")

    def medians_at(
        self, samples: np.ndarray, rows: np.ndarray, which: int, keep: bool = False
    ) -> np.ndarray:
        """(len(rows), replicates): :meth:`medians` of ``samples[rows]``, the samples of side
        ``which``. With ``keep``, the rows made are kept for the next call, which takes them
        rather than making them again: a diff asks for its common factor's ops, then for
        every paired op, the factor's among them. A row's medians are its own, whatever rows
        are made with it. Without ``keep``, the array given is the caller's own, to change in
        place (kept rows in it are copies)."""
        kept = self._medians[which]
        wanted = rows.tolist()
        if not wanted:
            return np.zeros((0, BOOTSTRAP_REPLICATES))
        missing = [row for row in dict.fromkeys(wanted) if row not in kept]
        found = self.medians(samples[missing], which) if missing else np.zeros((0, 0))
        if missing == wanted:  # every row new, once each, in order: the block itself
            out = found
        else:
            made = dict(zip(missing, found, strict=True))
            # Row by row into one array (np.stack of 3,000 rows: 50 ms, this 6 ms).
            out = np.empty((len(wanted), BOOTSTRAP_REPLICATES))
            for i, row in enumerate(wanted):
                out[i] = made[row] if row in made else kept[row]
        if keep:
            found.flags.writeable = False  # rows of it are given out again
            kept.update(zip(missing, found, strict=True))
        else:
            kept.clear()  # taken: the next rows asked for are others
        return out


def _draws(index: np.ndarray, n: int) -> np.ndarray:
    """(replicates, n) int64: how many times each row of ``index`` holds each of 0 .. n - 1."""
    offsets = (np.arange(len(index), dtype=np.int64) * n)[:, None]
    counted = np.bincount((index + offsets).ravel(), minlength=len(index) * n)
    return counted.astype(np.int64, copy=False).reshape(len(index), n)


def interval(
    replicates: np.ndarray, axis: int = -1, in_place: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval (:data:`CONFIDENCE`) of bootstrap replicates. ``in_place``:
    the replicates are the caller's to reorder along ``axis`` (sorted there, not copied)."""
    tail = 100.0 * (1.0 - CONFIDENCE) / 2.0
    if np.isnan(replicates).any():
        low, high = np.nanpercentile(replicates, [tail, 100.0 - tail], axis=axis)
        return low, high
    # nanpercentile takes the rows one by one (a Python call each: 0.2 s for the 3,000 ops of
    # a large diff); without a NaN, the rows sorted once give every row's percentiles at once,
    # read off at their ranks (percentile would copy the sorted rows and partition them again:
    # 3,000 x 1,000 replicates, 12 ms more). A percentile is of the values alone, in any order.
    if in_place:
        replicates.sort(axis=axis)
        ordered = replicates
    else:
        ordered = np.sort(replicates, axis=axis)
    return sorted_percentile(ordered, tail, axis), sorted_percentile(ordered, 100.0 - tail, axis)


def sorted_percentile(ordered: np.ndarray, q: float, axis: int = -1) -> np.ndarray:
    """``np.percentile(ordered, q, axis=axis)`` of values sorted along ``axis`` (none NaN), to
    the last bit: numpy's linear method, between the values at the ranks either side of
    (n - 1) x q / 100, the nearer one's weight found as numpy finds it."""
    below, above, weight = _percentile_ranks(ordered.shape[axis], q)
    return _lerp(np.take(ordered, below, axis=axis), np.take(ordered, above, axis=axis), weight)


def _percentile_ranks(n: int, q: float) -> tuple[int, int, float]:
    """The ranks (0: the smallest) of the two of ``n`` sorted values between which numpy's
    linear method finds percentile ``q``, and the upper one's weight, as numpy finds them."""
    at = (n - 1) * (q / 100)
    if at >= n - 1:  # numpy takes the last value on both sides (and a weight past the end)
        return n - 1, n - 1, at + 1.0
    below = math.floor(at)
    return below, below + 1, at - below


def _lerp(a: np.ndarray, b: np.ndarray, weight: float) -> np.ndarray:
    """The value ``weight`` of the way from ``a`` to ``b``, in numpy's arithmetic for
    percentiles: from ``b`` back where the weight is a half or more."""
    step = b - a
    if weight >= 0.5:
        return np.asarray(b - step * (1.0 - weight))
    return np.asarray(a + step * weight)


def excludes_zero(low: float | None, high: float | None) -> bool:
    return low is not None and high is not None and (low > 0.0 or high < 0.0)


_STATISTICS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "median": lambda x: np.median(x, axis=1),
    "mean": lambda x: x.mean(axis=1),
    "p90": lambda x: np.percentile(x, 90, axis=1),
}


def _replicates(stat: str, values: np.ndarray, boot: _Bootstrap, which: int) -> np.ndarray:
    """(replicates,): :data:`_STATISTICS` ``stat`` of the values each bootstrap replicate of
    side ``which`` draws, to the last bit. The median and the 90th percentile come from the
    values sorted once and each replicate's count of draws of each, where numpy partitions
    every replicate's draws (1,000 x steps values: 0.6 s of a diff at 1.8 GB); the mean, and
    any statistic of values with a NaN, of the draws themselves."""
    plain = values.dtype == np.float64 and not np.isnan(values).any()
    if plain and stat == "median":
        return boot.medians(np.ascontiguousarray(values)[None, :], which)[0]
    if plain and stat == "p90":
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        # (steps, replicates): each replicate's draws of the values up to each, in value order
        # (summed down the steps, each step's row of replicates at once: 60 ms at 5,200 steps,
        # against 105 ms along each replicate's row)
        drawn = np.ascontiguousarray(boot.counts[which].T)[order]
        np.cumsum(drawn, axis=0, out=drawn)
        below, above, weight = _percentile_ranks(len(values), 90.0)
        # A replicate's value at rank k (0: its smallest draw) is the first its draws pass k at.
        a, b = (ordered[(drawn <= rank).sum(axis=0)] for rank in (below, above))
        return _lerp(a, b, weight)
    return _STATISTICS[stat](values[boot.index[which]])


def _step_intervals(
    out: dict[str, dict[str, Any]],
    base_ms: np.ndarray,
    new_ms: np.ndarray,
    boot: _Bootstrap | None = None,
) -> None:
    """Add to each step statistic's delta its interval (ms and % of before) and
    ``significant``, from the step times of each side. ``boot``: the ops' bootstrap, taken
    where it draws as many steps a side as there are step times (the same seed makes the
    same draws: 0.2 s of a diff at 1.8 GB made them again)."""
    if boot is None or boot.n != (len(base_ms), len(new_ms)):
        boot = _Bootstrap(len(base_ms), len(new_ms))
    for stat, entry in out.items():
        entry.update(dict.fromkeys(INTERVAL_FIELDS))
        entry["significant"] = False
        if not boot.usable or entry["delta"] is None:
            continue
        before = _replicates(stat, base_ms, boot, 0)
        after = _replicates(stat, new_ms, boot, 1)
        low, high = interval(after - before)
        entry["ci_low"], entry["ci_high"] = float(low), float(high)
        with np.errstate(divide="ignore", invalid="ignore"):
            pct = np.where(before > 0, 100.0 * (after - before) / before, np.nan)
        if np.isfinite(pct).all():
            low_pct, high_pct = interval(pct)
            entry["ci_low_pct"], entry["ci_high_pct"] = float(low_pct), float(high_pct)
        entry["significant"] = excludes_zero(entry["ci_low"], entry["ci_high"])


def _verdict(median_entry: dict[str, Any]) -> str:
    """``faster`` or ``slower`` when the median step time moved significantly, else
    ``no_change``."""
    if not median_entry.get("significant"):
        return "no_change"
    return "slower" if (median_entry["delta"] or 0.0) > 0 else "faster"


@dataclass(frozen=True)
class _Factor:
    """The common factor: the median ratio NEW/BASE of op time over the ops whose code did not
    change, its interval and its bootstrap replicates (for the ops' changes beyond it)."""

    ratio: float | None
    low: float | None
    high: float | None
    ops: int
    replicates: np.ndarray | None  # (replicates,)
    # The robust standard deviation (1.4826 x MAD) of log(op ratio / factor) over those ops:
    # how unevenly the machine moved ops whose code did not change.
    spread: float = 0.0

    @property
    def significant(self) -> bool:
        """Whether the factor's interval excludes 1 (the environment moved op times)."""
        return self.low is not None and self.high is not None and (self.low > 1 or self.high < 1)


def _common_factor(
    base: Side, new: Side, pairs: list[_Pair], identical: set[str], boot: _Bootstrap
) -> _Factor:
    """The median ratio of op time over the paired ops of identical programs; where no program
    is identical, over the paired ops whose shape is the same on both sides (their code did
    not change: what moves them is the machine); the :data:`FACTOR_MAX_OPS` with the most
    time."""
    ms_b, ms_n = base.typical, new.typical
    paired = [(b, n) for b, n, _ in pairs if b is not None and n is not None]
    timed = [(b, n) for b, n in paired if ms_b[b.index] > 0 and ms_n[n.index] > 0]
    same_program = [(b, n) for b, n in timed if b.module in identical]
    same_shape = [(b, n) for b, n in timed if b.shape and b.shape == n.shape]
    chosen = same_program or same_shape or timed
    if not chosen:
        return _Factor(None, None, None, 0, None)
    chosen.sort(key=lambda p: -(ms_b[p[0].index] + ms_n[p[1].index]))
    chosen = chosen[:FACTOR_MAX_OPS]
    rows_b = np.array([b.index for b, _ in chosen])
    rows_n = np.array([n.index for _, n in chosen])
    ratios_now = ms_n[rows_n] / ms_b[rows_b]
    ratio = median(ratios_now)
    deviations = np.log(ratios_now / ratio)
    spread = 1.4826 * median(np.abs(deviations - median(deviations)))
    if not boot.usable:
        return _Factor(ratio, None, None, len(chosen), None, spread)
    # Kept: the op diff takes these ops' medians again, among every paired op's.
    medians_b = _side_medians(base, rows_b, boot, 0, keep=True)
    medians_n = _side_medians(new, rows_n, boot, 1, keep=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(medians_b > 0, medians_n / medians_b, np.nan)
    with warnings.catch_warnings():
        # A replicate that draws no step of a run with these ops (pooled runs of other
        # programs) has no ratio: its factor is NaN, left out of the interval below.
        warnings.simplefilter("ignore", RuntimeWarning)
        replicates = np.nanmedian(ratios, axis=0)
    low, high = interval(replicates)
    return _Factor(ratio, float(low), float(high), len(chosen), replicates, spread)


def change_split(ops: Table, factor: _Factor) -> dict[str, float]:
    """The change in op time per step split in two (ms): ``environment``, the common factor
    applied to every paired op's time, and ``code``, what changed, added and removed ops moved
    beyond it."""
    ratio = factor.ratio if factor.ratio is not None else 1.0
    states = ops.strings("status").tolist()
    before, after = ops.array("ms_per_step_before"), ops.array("ms_per_step_after")
    environment = code = 0.0
    for state, b, a in zip(states, before.tolist(), after.tolist(), strict=True):
        if state in ("same", "changed"):
            environment += (ratio - 1.0) * b
        if state == "changed":
            code += a - ratio * b
        elif state == "added":
            code += a
        elif state == "removed":
            code -= b
    return {"environment": environment, "code": code}


def _attribution(
    programs: list[dict[str, Any]], statuses: list[str], factor: _Factor, split: dict[str, float]
) -> str:
    """``environment`` when every program is identical (the code cannot be the cause), or no
    op changed beyond the common factor (none added or removed); ``code`` when the factor did
    not move (its interval holds 1) or the ops that changed beyond it make at least
    CODE_SHARE of the change; else ``mixed``."""
    if programs and all(p["identical"] for p in programs):
        return "environment"
    if not any(s in ("changed", "added", "removed") for s in statuses):
        return "environment"
    if not factor.significant:
        return "code"
    code, environment = abs(split["code"]), abs(split["environment"])
    return "code" if code >= CODE_SHARE * (code + environment) else "mixed"


# --------------------------------------------------------------------------- summary


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
        "verdict": None,
        "attribution": None,
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


def shape_key(hlo_text: str) -> str:
    """An op's shape as matching uses it: its HLO text without its own name (``%fusion.3 =``)
    and without the names of its operands and called computations, which a recompilation
    renumbers too (nor channel ids); a kernel name (GPU) stays as it is."""
    text = hlo_patterns.OWN_NAME.sub("", hlo_text, count=1)
    return hlo_patterns.CHANNEL.sub("channel_id=", hlo_patterns.OPERAND.sub("%", text)).strip()


@dataclass(frozen=True)
class _Op:
    index: int
    module: str
    name: str
    category: str
    scope: str  # the name-scope path (scope table), "" when none is recorded
    shape: str
    source: str
    order: int


_Pair = tuple["_Op | None", "_Op | None", str]


def _op_list(ops: Table) -> list[_Op]:
    if not ops.n:
        return []
    columns = [ops.strings(c).tolist() for c in ("module", "op", "category", "scope", "shape")]
    source, order = ops.strings("source").tolist(), ops.array("order").tolist()
    return [
        _Op(i, m, o, c, t, h, s, n)
        for i, (m, o, c, t, h, s, n) in enumerate(zip(*columns, source, order, strict=True))
    ]


def _agree(x: str, y: str) -> bool:
    """Two recorded values agree when equal, or when either side records none."""
    return not (x and y) or x == y


def _same_op(a: _Op, b: _Op) -> bool:
    """Whether two same-named ops are one op: a name reused for another op (a recompilation
    renumbers) shows in its category, or its scope path or source line where both record one."""
    return a.category == b.category and _agree(a.scope, b.scope) and _agree(a.source, b.source)


def match_ops(base: Sequence[_Op], new: Sequence[_Op]) -> list[_Pair]:
    """Pairs (base op, new op, rule) by :data:`MATCH_RULES` in turn; an op left unpaired comes
    with None on the other side and an empty rule."""
    pairs: list[_Pair] = []
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
        ("scope_shape", lambda op: (op.scope, op.category, op.shape) if op.shape else None),
        ("source", lambda op: (op.source, op.category, op.scope) if op.source else None),
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
    pairs: list[_Pair],
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


def _side_means(side: Side, rows: np.ndarray, boot: _Bootstrap, which: int) -> np.ndarray:
    """(len(rows), replicates) bootstrap means of the ops at ``rows`` (-1: absent, zeros),
    in blocks of _CHUNK_OPS ops."""
    out = np.zeros((len(rows), BOOTSTRAP_REPLICATES))
    present = np.flatnonzero(rows >= 0)
    for start in range(0, len(present), _CHUNK_OPS):
        block = present[start : start + _CHUNK_OPS]
        out[block] = boot.means(side.samples[rows[block]], which)
    return out


def _side_medians(
    side: Side, rows: np.ndarray, boot: _Bootstrap, which: int, keep: bool = False
) -> np.ndarray:
    """(len(rows), replicates) bootstrap medians of the ops at ``rows`` (-1: absent, zeros);
    ``keep``: see :meth:`_Bootstrap.medians_at` (without it, the array is the caller's own)."""
    present = np.flatnonzero(rows >= 0)
    if len(present) == len(rows):
        return boot.medians_at(side.samples, rows, which, keep)
    out = np.zeros((len(rows), BOOTSTRAP_REPLICATES))
    if len(present):
        out[present] = boot.medians_at(side.samples, rows[present], which, keep)
    return out


def false_discovery(p_values: np.ndarray, rate: float = 1.0 - CONFIDENCE) -> np.ndarray:
    """Which of ``p_values`` the Benjamini-Hochberg procedure calls changes at false discovery
    ``rate``: the k smallest, for the largest k whose p is at most rate x k / m."""
    m = len(p_values)
    order = np.argsort(p_values, kind="stable")
    passed = np.flatnonzero(p_values[order] <= rate * np.arange(1, m + 1) / m)
    found = np.zeros(m, dtype=bool)
    if len(passed):
        found[order[: passed[-1] + 1]] = True
    return found


def _p_values(replicates: np.ndarray) -> np.ndarray:
    """Two-sided bootstrap p-values of "no change", per row: twice the share of replicates on
    the far side of 0."""
    below = (replicates <= 0).mean(axis=1)
    above = (replicates >= 0).mean(axis=1)
    return np.minimum(1.0, 2.0 * np.minimum(below, above))


def _op_diff(
    base: Side,
    new: Side,
    pairs: list[_Pair],
    factor: _Factor,
    boot: _Bootstrap,
    identical: set[str],
) -> Table:
    ms_b, ms_n = base.ops.array("ms_per_step"), new.ops.array("ms_per_step")
    count_b, count_n = base.ops.array("count_per_step"), new.ops.array("count_per_step")
    kind_b, kind_n = _strings(base.ops, "kind"), _strings(new.ops, "kind")
    rows_b = np.array([b.index if b else -1 for b, _, _ in pairs], dtype=np.int64)
    rows_n = np.array([n.index if n else -1 for _, n, _ in pairs], dtype=np.int64)
    before = np.where(rows_b >= 0, ms_b[np.maximum(rows_b, 0)] if len(ms_b) else 0.0, 0.0)
    after = np.where(rows_n >= 0, ms_n[np.maximum(rows_n, 0)] if len(ms_n) else 0.0, 0.0)
    ratio = factor.ratio if factor.ratio is not None else 1.0
    # The change beyond the factor is judged on each op's typical (median) time per step.
    typ_b, typ_n = base.typical, new.typical
    med_b = np.where(rows_b >= 0, typ_b[np.maximum(rows_b, 0)] if len(typ_b) else 0.0, 0.0)
    med_n = np.where(rows_n >= 0, typ_n[np.maximum(rows_n, 0)] if len(typ_n) else 0.0, 0.0)
    beyond = med_n - ratio * med_b
    paired = (rows_b >= 0) & (rows_n >= 0)
    nan = np.full(len(pairs), np.nan)
    low, high, beyond_low, beyond_high = nan, nan.copy(), nan.copy(), nan.copy()
    changed = np.zeros(len(pairs), dtype=bool)
    if boot.usable and len(pairs):
        # Each (ops x replicates) array below is made once and changed in place: a diff makes
        # several of 24 MB, at any profile size, and a new one is a new 24 MB to fault in.
        means = _side_means(new, rows_n, boot, 1)
        means -= _side_means(base, rows_b, boot, 0)
        low, high = interval(means, in_place=True)
        both = np.flatnonzero(paired)
        if len(both):
            medians_b = _side_medians(base, rows_b[both], boot, 0)
            replicates = _side_medians(new, rows_n[both], boot, 1)
            if factor.replicates is not None:
                medians_b *= factor.replicates
            replicates -= medians_b  # NEW's medians less the factor's share of BASE's
            # (sorted in place: the p-values below count replicates, in any order)
            beyond_low[both], beyond_high[both] = interval(replicates, in_place=True)
            # Significant beyond the factor, over every paired op at once: of 60 ops at 95%
            # each, three would "change" by chance alone (Benjamini-Hochberg keeps the share
            # of such false changes among the changed ops at 5%).
            changed[both] = false_discovery(_p_values(replicates))
    rows: list[dict[str, Any]] = []
    with np.errstate(divide="ignore", invalid="ignore"):
        deviation = np.abs(np.log(med_n / (ratio * med_b)))
    for i, (b, n, rule) in enumerate(pairs):
        shown = n or b
        assert shown is not None
        if b is None or n is None:
            state = "added" if b is None else "removed"
        elif status(ratio * med_b[i], med_n[i]) == "same":
            state = "same"  # too small to act on, significant or not
        elif n.module in identical and (
            factor.significant or deviation[i] <= OUTLIER_Z * factor.spread
        ):
            # The code is the same. A machine that moved op times (the factor moved) moves
            # them unevenly, by many times for ops a busy core preempts; and an op off the
            # factor by no more than the others are is the machine's doing too.
            state = "same"
        elif boot.usable:
            state = "changed" if changed[i] else "same"
        else:  # no steps to judge the noise by: any change large enough
            state = "changed"
        rows.append(
            {
                "op": shown.name,
                "base_op": b.name if b else "",
                "module": shown.module,
                "category": shown.category,
                "kind": kind_n[n.index] if n else kind_b[b.index] if b else "",
                "status": state,
                "match": rule,
                "base_scope": b.scope if b else "",
                "new_scope": n.scope if n else "",
                "ms_per_step_before": float(before[i]),
                "ms_per_step_after": float(after[i]),
                "delta_ms": float(after[i] - before[i]),
                "delta_pct": (
                    100.0 * float(after[i] - before[i]) / float(before[i])
                    if before[i]
                    else math.nan
                ),
                "delta_ci_low_ms": float(low[i]),
                "delta_ci_high_ms": float(high[i]),
                "significant": excludes_zero(float(low[i]), float(high[i])),
                "beyond_factor_ms": float(beyond[i]) if paired[i] else math.nan,
                "beyond_factor_ci_low_ms": float(beyond_low[i]),
                "beyond_factor_ci_high_ms": float(beyond_high[i]),
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
    table = _table(rows, OP_COLUMNS, strings=_OP_STRINGS)
    significant = np.array([r["significant"] for r in rows], dtype=bool)
    return table.with_columns(significant=significant)


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
