"""Installed entry points of one group, read straight from the packages' metadata.

``importlib.metadata.entry_points`` costs 20-25 ms of every command in a typical environment
(15-18 ms to import it, with ``email``, ``zipfile`` and ``csv``; then a walk of every
distribution), to learn that no analyzer plug-in is installed. This reads the same files the
same way: each ``*.dist-info`` or ``*.egg-info`` directory on ``sys.path``, the first of each
normalized project name only, its ``entry_points.txt`` read as importlib reads it. Where
``sys.path`` holds something this does not read (a zip file, an ``.egg``), importlib does it.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterator
from functools import reduce
from typing import Any

from tpuperf._dataclasses import dataclass

_METADATA_DIRS = (".dist-info", ".egg-info")
# importlib.metadata.EntryPoint.pattern: module, optional :attr.path, optional [extras].
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


@dataclass(frozen=True)
class EntryPoint:
    name: str
    value: str
    group: str

    def load(self) -> Any:
        """The object the entry point names, imported (as ``EntryPoint.load`` does)."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r} has an invalid value {self.value!r}")
        module = importlib.import_module(match.group("module"))
        attrs = filter(None, (match.group("attr") or "").split("."))
        return reduce(getattr, attrs, module)


# The entry points of each group as last read, with the sys.path they were read on (each
# entry's folder and its modification time, as importlib.metadata keys its listings): an
# ``analyze`` asks twice (its cache keys, then its analyzers), and the walk reads every
# installed distribution.
_READ: dict[str, tuple[tuple[tuple[str, int], ...], list[EntryPoint]]] = {}


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points of ``group`` of every installed distribution, in importlib's order;
    read again once a folder on ``sys.path`` changes (a distribution installed or removed)."""
    state = tuple((entry, _modified(entry)) for entry in map(os.path.abspath, sys.path))
    known = _READ.get(group)
    if known is None or known[0] != state:
        known = _READ[group] = (state, _read_all(group))
    return list(known[1])


def _modified(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:  # a missing path entry holds nothing, until it is made
        return -1


def _read_all(group: str) -> list[EntryPoint]:
    if any(_unreadable(entry) for entry in sys.path):
        from importlib.metadata import entry_points as from_importlib

        return [EntryPoint(ep.name, ep.value, ep.group) for ep in from_importlib(group=group)]
    found: list[EntryPoint] = []
    seen: set[str] = set()
    for entry in sys.path:
        for name, directory in _distributions(entry or "."):
            if name in seen:
                continue  # an earlier path entry has this project: importlib keeps that one
            seen.add(name)
            found.extend(_read(os.path.join(directory, "entry_points.txt"), group))
    return found


def _unreadable(entry: str) -> bool:
    """A ``sys.path`` entry whose distributions only importlib reads (zip files, eggs)."""
    return entry.endswith(".egg") or os.path.isfile(entry)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _distributions(root: str) -> Iterator[tuple[str, str]]:
    """(normalized name, metadata directory) under ``root``, grouped by name in the order each
    name is first listed (as importlib's path search yields them)."""
    try:
        children = os.listdir(root)
    except OSError:  # a missing or unreadable path entry holds nothing
        return
    by_name: dict[str, list[str]] = {}
    for child in children:
        low = child.lower()
        if low.endswith(_METADATA_DIRS):
            name = _normalize(low.rpartition(".")[0].partition("-")[0])
            by_name.setdefault(name, []).append(os.path.join(root, child))
    for name, directories in by_name.items():
        for directory in directories:
            yield name, directory


def _read(path: str, group: str) -> list[EntryPoint]:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):  # no entry points (or an .egg-info file)
        return []
    out = []
    section = None
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == group and "=" in line:
            name, _, value = line.partition("=")
            out.append(EntryPoint(name.strip(), value.strip(), group))
    return out
