"""Golden outputs: `analyze`, `ops`, `info` and `scan` JSON on every real profile and every
generated scenario, compared with files reviewed and committed in tests/golden/.

The files were taken just before the columnar engine replaced the pandas one, after the
accuracy fixes, so this test holds the engine to the numbers it replaced. When a change is
meant to move numbers, regenerate them and review the diff:

    pytest tests/test_golden.py --update-golden

Each runs twice: cold (``--no-cache``: decoded from the file) and warm (the decoded tables
served from the cache, decoding made impossible), so the cache never moves a number; `analyze`
a third time, served (its report read back from the cache, analysing made impossible).

Floats are compared to a relative 1e-9 (summation order may differ); everything else
exactly. Paths are reduced to file names; the tool version and the decoder in use (which
depend on the install, not on the profile) are dropped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tpuperf.analysis
from fixtures.generate import SCENARIOS, write_run
from tests.conftest import CPU_FIXTURE, SHARED_PROFILES, Cli, shared_profile
from tpuperf import cache as cache_mod
from tpuperf.cli import main

GOLDEN = Path(__file__).resolve().parent / "golden"

REAL = [
    "tpu/v6e_4chip_inference.xplane.pb",
    "gpu/v100_8gpu_tf_training.xplane.pb",
    "gpu/mi300_jax_gemm.xplane.pb",
    "gpu/mi300_jax_elementwise.xplane.pb",
    "gpu/mi300_jax_conv.xplane.pb",
    "gpu/mi300_jax_te_fused_attn.xplane.pb",
]

# (name, arguments after the profile path)
COMMANDS = [
    ("analyze", ["analyze", "--format", "json"]),
    ("analyze_all_steps", ["analyze", "--format", "json", "--warmup", "0"]),
    ("ops", ["ops", "--format", "json"]),
    ("ops_by_op", ["ops", "--format", "json", "--by", "op"]),
    ("ops_per_device", ["ops", "--format", "json", "--by", "category", "--per-device"]),
    ("info", ["info", "--format", "json"]),
]


# Fields that say how tpuperf is installed rather than what the profile holds.
_INSTALL_FIELDS = ("tool", "decoder", "decoder_reason")


def _normalise(value: Any, root: str) -> Any:
    if isinstance(value, dict):
        return {k: _normalise(v, root) for k, v in value.items() if k not in _INSTALL_FIELDS}
    if isinstance(value, list):
        return [_normalise(v, root) for v in value]
    if isinstance(value, str) and root and root in value:
        return value.replace(root, "<profiles>")
    return value


def _run(cli: Cli, args: list[str], root: str) -> Any:
    return _normalise(cli.json(*args), root)


MODES = ["cold", "warm", "served"]

# (command, arguments, mode): every command cold and warm, analyze served too.
RUNS = [
    pytest.param(command, args, mode, id=f"{command}-{mode}")
    for command, args in COMMANDS
    for mode in MODES
    if mode != "served" or args[0] == "analyze"
]


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module's warm runs: each profile is decoded into it once."""
    return tmp_path_factory.mktemp("golden-cache")


def _must_not_decode(*args: object) -> None:
    raise AssertionError("a warm run decoded its profile instead of reading the cache")


def _run_mode(
    cli: Cli,
    args: list[str],
    root: str,
    mode: str,
    warm_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    """The command's JSON, decoded from the file (cold) or served from the cache (warm)."""
    if mode == "cold":
        return _run(cli, [*args, "--no-cache"], root)
    monkeypatch.setenv("TPUPERF_CACHE_DIR", str(warm_cache))
    cache_mod.load(args[1], cache=cache_mod.Cache(warm_cache))  # stores it, if not yet there
    monkeypatch.setattr(cache_mod, "decode_host", _must_not_decode)
    if mode == "served":
        _run(cli, args, root)  # stores the report, if not yet there
        monkeypatch.setattr(tpuperf.analysis, "analyze", _must_not_analyze)
    return _run(cli, args, root)


def _must_not_analyze(*args: object, **kwargs: object) -> None:
    raise AssertionError("a served run analysed its profile instead of reading the cache")


def _same(got: Any, want: Any, where: str = "") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict), where
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for key in want:
            _same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: length"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool) and isinstance(got, (int, float)):
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9), f"{where}: {got} != {want}"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def _check(request: pytest.FixtureRequest, name: str, document: Any) -> None:
    path = GOLDEN / f"{name}.json"
    if request.config.getoption("--update-golden"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
        return
    if not path.exists():
        pytest.fail(f"no golden file {path.name}: run pytest {__file__} --update-golden")
    _same(document, json.loads(path.read_text()), name)


@pytest.fixture(scope="module")
def scenario_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("golden")
    return {
        scenario: write_run(scenario, root / scenario, run_name="run", seed=0, steps=6)[0]
        for scenario in SCENARIOS
    }


Golden = Callable[[list[str], Path, Path, str, str], None]


@pytest.fixture
def golden(
    request: pytest.FixtureRequest,
    cli: Cli,
    warm_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Golden:
    """``golden(args, profile, root, mode, name)``: run ``tpuperf ARGS[0] PROFILE ARGS[1:]``
    in ``mode`` (cold or warm) and check its JSON, paths under ``root`` written <profiles>,
    against the golden file ``name``."""

    def check(args: list[str], profile: Path, root: Path, mode: str, name: str) -> None:
        arguments = [args[0], str(profile), *args[1:]]
        document = _run_mode(cli, arguments, str(root), mode, warm_cache, monkeypatch)
        _check(request, name, document)

    return check


@pytest.mark.parametrize("relative", REAL)
@pytest.mark.parametrize(("command", "args", "mode"), RUNS)
def test_real_profiles(
    golden: Golden, relative: str, command: str, args: list[str], mode: str
) -> None:
    name = f"{Path(relative).name.split('.')[0]}.{command}"
    golden(args, shared_profile(relative), SHARED_PROFILES, mode, name)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize(("command", "args", "mode"), RUNS)
def test_generated_scenarios(
    golden: Golden,
    scenario_runs: dict[str, Path],
    scenario: str,
    command: str,
    args: list[str],
    mode: str,
) -> None:
    run_dir = scenario_runs[scenario]
    golden(args, run_dir, run_dir.parents[2], mode, f"scenario_{scenario}.{command}")


@pytest.mark.parametrize(("command", "args", "mode"), RUNS)
def test_cpu_fixture(golden: Golden, command: str, args: list[str], mode: str) -> None:
    golden(args, CPU_FIXTURE, CPU_FIXTURE.parent, mode, f"cpu_train_steps.{command}")


def test_scan(
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    scenario_runs: dict[str, Path],
    tmp_path: Path,
) -> None:
    # Every scenario's host files and a corrupt one, in one scan, rows by path.
    for scenario, run_dir in scenario_runs.items():
        for host_file in sorted(run_dir.glob("*.xplane.pb")):
            (tmp_path / f"{scenario}.{host_file.name}").write_bytes(host_file.read_bytes())
    (tmp_path / "corrupt.xplane.pb").write_bytes(b"\x0a\xff\xff\xff\x0fnot an xspace")
    out = tmp_path / "rows.ndjson"
    code = main(
        [
            "scan",
            str(tmp_path),
            "--out",
            str(out),
            "--format",
            "ndjson",
            "--no-cache",
            "--workers",
            "1",
        ]
    )
    capsys.readouterr()
    assert code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    rows = sorted((_normalise(r, str(tmp_path)) for r in rows), key=lambda r: r["path"])
    for row in rows:
        row.pop("seconds", None)
        row.pop("tpuperf_version", None)
    _check(request, "scan", rows)
