"""`tpuperf info`, `tpuperf ops`, `--help`, and every bad input: exit codes and one-line errors."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fixtures.generate import generate, write_run
from tests.conftest import CPU_FIXTURE, REPO, Cli, shared_profile


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from tpuperf.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('jax', 'xprof', 'ray', 'gcsfs', 'pandas') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert "HEAVY []" in result.stdout
    for command in ("info", "ops"):
        assert command in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["info", "{profile}", "--format", "json"],
        ["analyze", "{profile}", "--format", "json"],
        ["scan", "{profile}", "--no-cache", "-j", "1", "--format", "ndjson"],
    ],
    ids=["info", "analyze", "scan"],
)
def test_hot_path_needs_no_pandas(args: list[str], tmp_path: Path) -> None:
    """info, analyze and scan run on the columnar tables: pandas is for the Python API only."""
    out = tmp_path / "out.txt"
    code = (
        "import sys\n"
        "from tpuperf.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        "print('RC', rc, [m for m in ('pandas',) if m in sys.modules], file=sys.stderr)\n"
    )
    argv = [a.replace("{profile}", str(CPU_FIXTURE)) for a in args]
    result = subprocess.run(
        [sys.executable, "-c", code, *argv, "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    assert "RC 0 []" in result.stderr
    assert out.stat().st_size > 0


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not os.confstr("CS_GNU_LIBC_VERSION"),
    reason="tunes glibc's malloc only",
)
def test_cli_tunes_glibc_malloc() -> None:
    """Every setting of keep_freed_memory is accepted by glibc (mallopt returns 1 for each)."""
    code = "from tpuperf._malloc import keep_freed_memory; print(keep_freed_memory())"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert result.stdout.strip() == "True"


@pytest.mark.parametrize("command", ["info", "ops"])
def test_command_help_has_an_example(cli: Cli, command: str) -> None:
    code, out, _ = cli(command, "--help")
    assert code == 0
    assert "Example" in out and f"tpuperf {command}" in out


def test_info_json_on_v6e(cli: Cli, v6e) -> None:
    code, out, _ = cli("info", str(v6e), "--format", "json")
    assert code == 0
    info = json.loads(out)
    assert info["schema_version"] == 1
    devices = info["devices"]
    assert len(devices) == 4
    for device in devices:
        assert {"host", "device", "kind", "chip", "peak_tflops", "peak_hbm_gbps"} <= set(device)
        assert device["kind"] == "TPU"
        assert device["peak_tflops"] == 918.0
        assert round(device["peak_hbm_gbps"], 2) == 1637.99
    assert {s["source"] for s in info["steps"]} == {"module_period"}


@pytest.mark.parametrize(
    "relative",
    [
        "gpu/v100_8gpu_tf_training.xplane.pb",
        "gpu/mi300_jax_conv.xplane.pb",
        "gpu/mi300_jax_te_fused_attn.xplane.pb",
        "tpu/v6e_4chip_inference.xplane.pb",
    ],
)
def test_info_shows_the_peaks_analyze_uses(cli: Cli, relative: str) -> None:
    """One peak resolution for every command: info's peaks and their source are analyze's
    (the V100 plane records no FLOP peak; the chip table's 125 TFLOP/s is the one used)."""
    path = shared_profile(relative)
    code, out, _ = cli("info", str(path), "--format", "json")
    assert code == 0
    devices = [d for d in json.loads(out)["devices"] if d["ops"]]
    code, out, _ = cli("analyze", str(path), "--format", "json")
    assert code == 0
    summary = json.loads(out)["summary"]
    for device in devices:
        assert device["peak_tflops"] == summary["peak_tflops"]
        assert device["peak_hbm_gbps"] == pytest.approx(summary["peak_hbm_gbps"])
        assert device["peaks_source"] == summary["peaks_source"]
    if relative.startswith("gpu/v100"):
        assert summary["peak_tflops"] == 125.0  # roofline/chips.py: V100 fp16 tensor peak
        assert devices[0]["peak_hbm_gbps"] == pytest.approx(898.048)  # the plane's own stat
        assert devices[0]["peaks_source"] == "chip_table+profile"
        code, out, _ = cli("info", str(path))
        assert "125.0" in out.split("Devices")[1].split("steps:")[0]


def test_info_peak_unknown_to_profile_and_table_is_null(cli: Cli) -> None:
    path = shared_profile("gpu/mi300_jax_te_fused_attn.xplane.pb")
    code, out, _ = cli("info", str(path), "--format", "json")
    assert code == 0
    devices = json.loads(out)["devices"]
    # Devices 1-7 name no chip and record no peaks: nothing to resolve them from.
    assert [d["peak_tflops"] for d in devices[1:]] == [None] * 7
    assert {d["peaks_source"] for d in devices[1:]} == {"unknown"}


def test_info_table_on_cpu_fixture(cli: Cli) -> None:
    code, out, _ = cli("info", str(CPU_FIXTURE))
    assert code == 0
    assert "CPU" in out
    assert "steps: 8 per device on 1 device(s), from step_marker" in out


def test_ops_json_rows(cli: Cli, v6e) -> None:
    code, out, _ = cli("ops", str(v6e), "--by", "op", "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert document["schema_version"] == 1
    rows = {row["op"]: row for row in document["rows"]}
    assert len(rows) == 17
    for row in rows.values():
        assert {
            "op",
            "category",
            "occurrences",
            "total_time_ms",
            "self_time_ms",
            "flops",
            "bytes_accessed",
        } <= set(row)
    assert rows["copy-done.4"]["occurrences"] == 400
    assert rows["copy-done.4"]["total_time_ms"] == pytest.approx(77_773.2157, rel=1e-3)
    assert rows["all-reduce"]["flops"] == 12 * 1342177280


def test_ops_by_category_per_device_top(cli: Cli, tmp_path) -> None:
    run_dir, truth = write_run("collective_training", tmp_path)
    code, out, _ = cli(
        "ops",
        str(run_dir),
        "--by",
        "category",
        "--per-device",
        "--top",
        "3",
        "--format",
        "json",
    )
    assert code == 0
    rows = json.loads(out)["rows"]
    assert len(rows) == 3 * len(truth.devices)
    per_device = pd.DataFrame(rows).groupby("device")["time_pct"].sum()
    assert (per_device <= 100.0 + 1e-9).all()


def test_ops_csv_and_parquet_files(cli: Cli, tmp_path) -> None:
    csv_path = tmp_path / "ops.csv"
    parquet_path = tmp_path / "ops.parquet"
    assert cli("ops", str(CPU_FIXTURE), "--format", "csv", "-o", str(csv_path))[0] == 0
    assert cli("ops", str(CPU_FIXTURE), "--format", "parquet", "-o", str(parquet_path))[0] == 0
    from_csv = pd.read_csv(csv_path)
    from_parquet = pd.read_parquet(parquet_path)
    assert from_csv["occurrences"].sum() == from_parquet["occurrences"].sum() == 272
    assert not list(tmp_path.glob(".*.tmp"))


def test_ops_by_program_and_module(cli: Cli) -> None:
    code, out, _ = cli("ops", str(CPU_FIXTURE), "--by", "module", "--format", "json")
    assert code == 0
    rows = json.loads(out)["rows"]
    assert [r["module"] for r in rows] == ["jit_train_step"]
    assert rows[0]["occurrences"] == 272
    code, out, _ = cli("ops", str(CPU_FIXTURE), "--by", "program", "--format", "json")
    assert json.loads(out)["rows"][0]["program_id"] == "16"


def test_parquet_needs_output(cli: Cli) -> None:
    code, _, err = cli("ops", str(CPU_FIXTURE), "--format", "parquet")
    assert code == 2
    assert "-o" in err


def test_unknown_format_is_usage_error(cli: Cli) -> None:
    code, _, err = cli("info", str(CPU_FIXTURE), "--format", "xml")
    assert code == 2
    assert "'xml' is not one of 'table', 'json'" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["analyze", str(CPU_FIXTURE), "--foo"], "no such option: --foo"),
        (["analyze", str(CPU_FIXTURE), "-f", "csv"], "'csv' is not one of 'table', 'json'"),
        (["ops", str(CPU_FIXTURE), "--top", "abc"], "'abc' is not a valid int"),
        (["nosuch"], "no such command 'nosuch'"),
    ],
)
def test_click_usage_errors_are_one_line_with_the_hint(
    cli: Cli, args: list[str], message: str
) -> None:
    """README: every message is one line ``tpuperf: error: ...``; click's four-line usage
    block becomes its message and the hint where to look."""
    code, out, err = cli(*args)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("tpuperf: error: "), err
    assert message in err
    command = args[0] if args[0] != "nosuch" else ""
    assert f"see '{' '.join(['tpuperf', command]).strip()} -h'" in err


# --------------------------------------------------------------------------- bad input


def _bad_inputs(tmp_path):  # type: ignore[no-untyped-def]
    empty_dir = tmp_path / "empty_dir"
    empty_dir.mkdir()
    (empty_dir / "notes.txt").write_text("hello")
    empty = tmp_path / "empty.xplane.pb"
    empty.write_bytes(b"")
    data = CPU_FIXTURE.read_bytes()
    truncated = tmp_path / "truncated.xplane.pb"
    truncated.write_bytes(data[: len(data) // 2])
    random_bytes = tmp_path / "random.xplane.pb"
    random_bytes.write_bytes(bytes(range(256)) * 40)
    trace = tmp_path / "host.trace.json.gz"
    trace.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    host_only = tmp_path / "host_only.xplane.pb"
    host_only.write_bytes(_host_only_space())
    return {
        "missing": (tmp_path / "nope.xplane.pb", "no such file"),
        "no profiles": (empty_dir, "no *.xplane.pb profiles"),
        "empty": (empty, "empty"),
        "truncated": (truncated, "not a readable XSpace"),
        "random": (random_bytes, "not a readable XSpace"),
        "trace json": (trace, "trace JSON"),
        "host only": (host_only, "host-only profile"),
    }


def _host_only_space() -> bytes:
    from tpuperf import _xspace_schema as pb

    space = pb.XSpace()
    plane = space.planes.add(id=0, name="/host:CPU")
    plane.event_metadata[1].name = "main"
    line = plane.lines.add(id=1, name="python3", timestamp_ns=10)
    line.events.add(metadata_id=1, offset_ps=5, duration_ps=100)
    return space.SerializeToString()


@pytest.mark.parametrize(
    "case", ["missing", "no profiles", "empty", "truncated", "random", "trace json", "host only"]
)
@pytest.mark.parametrize("command", ["info", "ops"])
def test_bad_input_exit_4_one_line(cli: Cli, tmp_path, case: str, command: str) -> None:
    path, message = _bad_inputs(tmp_path)[case]
    code, out, err = cli(command, str(path))
    assert code == 4
    assert out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert str(path.name) in lines[0] and message in lines[0]
    assert "Traceback" not in err


def test_debug_shows_the_traceback_and_keeps_the_exit_code(cli: Cli, tmp_path) -> None:
    code, _, err = cli("--debug", "info", str(tmp_path / "missing.xplane.pb"))
    assert code == 4
    assert "Traceback (most recent call last)" in err and "BadInput" in err
    assert err.rstrip().splitlines()[-1].startswith("tpuperf: error: ")


def test_too_large_file_is_refused(tmp_path, monkeypatch) -> None:
    from tpuperf import sources
    from tpuperf.errors import BadInput

    size = CPU_FIXTURE.stat().st_size
    with pytest.raises(BadInput, match=r"needs about .* GiB of memory"):
        sources.read_profile(str(CPU_FIXTURE), available=size)
    # It reads when the memory is there.
    assert len(sources.read_profile(str(CPU_FIXTURE), available=10 * size)) == size


def test_gzip_profile_reads(cli: Cli, tmp_path) -> None:
    path = tmp_path / "host.xplane.pb.gz"
    path.write_bytes(gzip.compress(CPU_FIXTURE.read_bytes()))
    code, out, _ = cli("info", str(path), "--format", "json")
    assert code == 0
    assert json.loads(out)["hosts"][0]["host"] == "host"


def test_generated_in_memory_filesystem(cli: Cli) -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    xspaces = generate("collective_training").xspaces
    for host, data in xspaces.items():
        fs.pipe(f"/logs/plugins/profile/2026_01_01_00_00_00/{host}.xplane.pb", data)
    code, out, err = cli("info", "memory://logs", "--format", "json")
    assert code == 0, err
    assert [h["host"] for h in json.loads(out)["hosts"]] == sorted(xspaces)


def test_gzip_bomb_is_refused_before_it_fills_memory(tmp_path) -> None:
    # 64 MiB of zeros compress to about 64 KiB: refused once the inflated bytes pass what the
    # available memory can analyse, long before the whole stream is inflated.
    import resource

    from tpuperf import sources
    from tpuperf.errors import BadInput

    bomb = tmp_path / "bomb.xplane.pb.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (64 << 20)))
    assert bomb.stat().st_size < 1 << 20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(BadInput, match="inflates to more than"):
        sources.read_profile(str(bomb), available=16 << 20)
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 32 << 10  # it stopped near the 16 MiB budget, not at 64 MiB


def test_truncated_and_corrupt_gzip_are_bad_input(cli: Cli, tmp_path) -> None:
    whole = gzip.compress(CPU_FIXTURE.read_bytes())
    truncated = tmp_path / "cut.xplane.pb.gz"
    truncated.write_bytes(whole[: len(whole) // 2])
    corrupt = tmp_path / "bad.xplane.pb.gz"
    corrupt.write_bytes(whole[:10] + bytes(b ^ 0x5A for b in whole[10:200]) + whole[200:])
    for path, reason in ((truncated, "ends early"), (corrupt, "does not decompress")):
        code, _, err = cli("info", str(path))
        assert code == 4, err
        assert reason in err and str(path) in err


def test_info_says_why_the_numpy_decoder_reads() -> None:
    """With the C module built, TPUPERF_DECODER=numpy is a choice, not a missing build."""
    from tpuperf import kernels

    if not kernels.native_built():
        pytest.skip("the C decoder is not built here: numpy is the fallback, not a choice")
    reason = "chosen by TPUPERF_DECODER=numpy"
    env = {**os.environ, "TPUPERF_DECODER": "numpy"}
    args = [sys.executable, "-m", "tpuperf", "info", str(CPU_FIXTURE)]
    table = subprocess.run(args, capture_output=True, text=True, cwd=REPO, env=env, check=True)
    assert f"decoder numpy ({reason}: slower, same results)" in table.stdout
    assert "not built" not in table.stdout
    document = subprocess.run(
        [*args, "--format", "json"], capture_output=True, text=True, cwd=REPO, env=env, check=True
    )
    info = json.loads(document.stdout)
    assert (info["decoder"], info["decoder_reason"]) == ("numpy", reason)
    native = subprocess.run(
        [*args, "--format", "json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k != "TPUPERF_DECODER"},
        check=True,
    )
    assert (json.loads(native.stdout)["decoder"], json.loads(native.stdout)["decoder_reason"]) == (
        "native",
        None,
    )
