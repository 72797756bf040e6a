"""tpuperf._entry_points reads entry points as importlib.metadata does."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from tpuperf._entry_points import entry_points


def _importlib(group: str) -> list[tuple[str, str]]:
    return [(ep.name, ep.value) for ep in metadata.entry_points(group=group)]


def _ours(group: str) -> list[tuple[str, str]]:
    return [(ep.name, ep.value) for ep in entry_points(group)]


@pytest.mark.parametrize("group", ["console_scripts", "pytest11", "tpuperf.analyzers"])
def test_installed_entry_points_equal_importlib(group: str) -> None:
    assert _ours(group) == _importlib(group)


def _dist(site: Path, directory: str, text: str | None) -> None:
    (site / directory).mkdir(parents=True)
    if text is not None:
        (site / directory / "entry_points.txt").write_text(text)


def test_a_made_up_site_reads_like_importlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    group = "tpuperf.analyzers"
    _dist(first, "Alpha_Pkg-1.0.dist-info", f"[{group}]\nalpha = alpha_mod:Analyzer\n")
    # Comments, blank lines, other groups, spaces and extras, as entry_points.txt holds them.
    _dist(
        first,
        "beta-2.dist-info",
        "# a comment\n\n[console_scripts]\nbeta = beta.cli:main\n\n"
        f"[{group}]\n  beta =  beta.plug : Thing.inner [extra]  \ngamma=beta:g\n",
    )
    _dist(first, "nothing-1.dist-info", None)  # no entry points at all
    (first / "old.egg-info").write_text("Metadata-Version: 1.0\n")  # an egg-info file
    # The same project again, later on the path (as alpha.pkg, normalized alike): skipped.
    _dist(second, "alpha.pkg-0.9.dist-info", f"[{group}]\nshadowed = nope:x\n")
    _dist(second, "delta-3.egg-info", f"[{group}]\ndelta = delta:D\n")
    monkeypatch.setattr(sys, "path", [str(first), str(tmp_path / "missing"), str(second)])
    fast_path = getattr(metadata, "FastPath", None)  # importlib caches directory listings
    if fast_path is not None:
        fast_path.__new__.cache_clear()
    expected = _importlib(group)
    assert ("shadowed", "nope:x") not in expected  # the made-up site tests what it means to
    assert sorted(_ours(group)) == sorted(expected)
    assert sorted(_ours("console_scripts")) == sorted(_importlib("console_scripts"))
    beta = next(ep for ep in entry_points(group) if ep.name == "beta")
    assert beta.value == "beta.plug : Thing.inner [extra]"


def test_load_imports_the_named_object() -> None:
    from tpuperf._entry_points import EntryPoint

    point = EntryPoint("x", "tpuperf.columns : Table.take [extra]", "g")
    from tpuperf.columns import Table

    assert point.load() is Table.take
    assert EntryPoint("m", "tpuperf.columns", "g").load() is sys.modules["tpuperf.columns"]
