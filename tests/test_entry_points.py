"""tpuperf._entry_points reads entry points as importlib.metadata does."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
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


def test_a_path_read_once_is_read_again_only_when_a_folder_on_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tpuperf import _entry_points

    site = tmp_path / "site"
    group = "tpuperf.analyzers"
    _dist(site, "alpha-1.dist-info", f"[{group}]\nalpha = alpha_mod:A\n")
    monkeypatch.setattr(sys, "path", [str(site), str(tmp_path / "later")])
    walks: list[str] = []
    walk = _entry_points._distributions

    def counted(root: str) -> Iterator[tuple[str, str]]:
        walks.append(root)
        return walk(root)

    monkeypatch.setattr(_entry_points, "_distributions", counted)
    assert _ours(group) == [("alpha", "alpha_mod:A")]
    assert _ours(group) == [("alpha", "alpha_mod:A")]  # (an analyze asks twice)
    assert len(walks) == 2  # one walk of the two entries
    # A distribution installed since: its folder's time changed (set apart from the first
    # one's, as a file system's coarse clock might not).
    _dist(site, "beta-1.dist-info", f"[{group}]\nbeta = beta_mod:B\n")
    os.utime(site, ns=(site.stat().st_atime_ns, site.stat().st_mtime_ns + 10**9))
    assert sorted(_ours(group)) == [("alpha", "alpha_mod:A"), ("beta", "beta_mod:B")]
    assert len(walks) == 4
    # A path entry that did not exist, made.
    _dist(tmp_path / "later", "gamma-1.dist-info", f"[{group}]\ngamma = gamma_mod:C\n")
    assert ("gamma", "gamma_mod:C") in _ours(group)
    assert len(walks) == 6
    # Another group is its own walk; a changed sys.path is read again.
    assert _ours("console_scripts") == []
    monkeypatch.setattr(sys, "path", [str(site)])
    assert len(_ours(group)) == 2
    assert len(walks) == 9
