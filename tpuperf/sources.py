"""Where profiles come from: resolve a path to host files, and read their bytes.

A path is one of:

- a file (``*.xplane.pb`` or ``*.xspace.pb``, plain or gzip-compressed): one host;
- a run directory (``LOGDIR/plugins/profile/<run>/``): all its hosts together,
  each host named after its file (``10.0.0.7_8466.xplane.pb`` is host ``10.0.0.7_8466``);
- a logdir (a directory with ``plugins/profile/<run>/`` inside): its latest run,
  chosen by run name (a timestamp), not by modification time.

Local paths and fsspec URLs (``gs://``, ``file://``, ``memory://``, ...) both work.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from tpuperf.errors import BadInput, UsageError

PROFILE_SUFFIXES = (".xplane.pb", ".xspace.pb")
_GZIP_MAGIC = b"\x1f\x8b"
_TRACE_JSON_SUFFIXES = (".trace.json.gz", ".trace.json", ".json.gz", ".json")


@dataclass
class HostFile:
    host: str
    url: str


@dataclass
class Resolved:
    """The host files a path stands for, and what the user should be told about the choice."""

    files: list[HostFile]
    run: str | None = None
    notices: list[str] = field(default_factory=list)


def resolve(path: str, host: str | None = None, run: str | None = None) -> Resolved:
    """Turn a file, run directory or logdir into the host files to read."""
    fs, root = _filesystem(path)
    if not fs.exists(root):
        raise BadInput(f"{path}: no such file or directory")
    if not fs.isdir(root):
        if run is not None:
            raise UsageError(f"--run needs a logdir, but {path} is a file")
        resolved = Resolved([HostFile(_host_name(root), _url(fs, path, root))])
    else:
        resolved = _resolve_directory(fs, path, root, run)
    if host is not None:
        chosen = [f for f in resolved.files if f.host == host]
        if not chosen:
            raise UsageError(
                f"--host {host}: no such host in {path}; hosts: "
                + ", ".join(f.host for f in resolved.files)
            )
        resolved.files = chosen
    return resolved


def _resolve_directory(fs: Any, path: str, root: str, run: str | None) -> Resolved:
    runs_dir = _runs_dir(fs, root)
    if runs_dir is not None:
        runs = sorted(
            PurePosixPath(entry).name
            for entry in fs.ls(runs_dir, detail=False)
            if fs.isdir(entry) and _profile_files(fs, entry)
        )
        if not runs:
            raise BadInput(f"{path}: a logdir with no profiles in {runs_dir}")
        if run is None:
            chosen = runs[-1]
            notices = (
                [
                    f"{path}: reading the latest of {len(runs)} runs, {chosen} "
                    "(pick another with --run)"
                ]
                if len(runs) > 1
                else []
            )
        elif run in runs:
            chosen, notices = run, []
        else:
            raise UsageError(f"--run {run}: no such run in {path}; runs: {', '.join(runs)}")
        run_root = f"{runs_dir.rstrip('/')}/{chosen}"
        files = _profile_files(fs, run_root)
        return Resolved(
            [HostFile(_host_name(f), _url(fs, path, f)) for f in files], run=chosen, notices=notices
        )
    if run is not None:
        raise UsageError(f"--run needs a logdir (with plugins/profile/ inside); {path} is not one")
    files = _profile_files(fs, root)
    if not files:
        found = sorted(PurePosixPath(p).name for p in fs.ls(root, detail=False))
        listing = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
        raise BadInput(
            f"{path}: no *.xplane.pb profiles in this directory"
            + (f" (found: {listing})" if found else " (it is empty)")
            + "; pass a profile file, a run directory or a logdir"
        )
    return Resolved(
        [HostFile(_host_name(f), _url(fs, path, f)) for f in files], run=PurePosixPath(root).name
    )


def _runs_dir(fs: Any, root: str) -> str | None:
    """The ``plugins/profile`` directory of a logdir, or None when ``root`` is not a logdir."""
    candidate = f"{root.rstrip('/')}/plugins/profile"
    if fs.isdir(candidate):
        return candidate
    parts = PurePosixPath(root).parts
    if len(parts) >= 2 and parts[-2:] == ("plugins", "profile"):
        return root
    return None


def _profile_files(fs: Any, directory: str) -> list[str]:
    return sorted(
        entry
        for entry in fs.ls(directory, detail=False)
        if _strip_profile_suffix(PurePosixPath(entry).name) is not None and not fs.isdir(entry)
    )


def _strip_profile_suffix(name: str) -> str | None:
    base = name[:-3] if name.endswith(".gz") else name
    for suffix in PROFILE_SUFFIXES:
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return None


def _host_name(path: str) -> str:
    name = PurePosixPath(path).name
    stripped = _strip_profile_suffix(name)
    return stripped if stripped else name


def _filesystem(path: str) -> tuple[Any, str]:
    if "://" not in path:
        from fsspec.implementations.local import LocalFileSystem

        return LocalFileSystem(), os.path.abspath(path)
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(path)
    except (ImportError, ValueError) as exc:
        hint = " (install tpuperf[gcs] for gs:// paths)" if path.startswith("gs://") else ""
        raise BadInput(f"{path}: cannot open this URL: {exc}{hint}") from None
    return fs, root


def _url(fs: Any, original: str, path: str) -> str:
    if "://" not in original:
        return path
    return fs.unstrip_protocol(path)


def read_bytes(url: str, max_bytes: int | None = None) -> bytes:
    """The decompressed bytes of a profile file, checked to look like an XSpace."""
    fs, path = _filesystem(url)
    try:
        size = fs.size(path)
    except FileNotFoundError:
        raise BadInput(f"{url}: no such file") from None
    limit = _memory_limit() if max_bytes is None else max_bytes
    if size is not None and size > limit:
        raise BadInput(
            f"{url}: the file is {size / 2**30:.1f} GiB, more than this machine can hold in memory "
            f"to decode ({limit / 2**30:.1f} GiB); capture a shorter window or analyze it on a "
            "larger machine"
        )
    try:
        with fs.open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise BadInput(f"{url}: cannot read: {exc}") from None
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise BadInput(f"{url}: a gzip file that does not decompress ({exc})") from None
    _check_not_trace_json(url, data)
    if not data:
        raise BadInput(f"{url}: the file is empty; capture the profile again")
    return data


def _check_not_trace_json(url: str, data: bytes) -> None:
    head = data[:64].lstrip()
    if head[:1] in (b"{", b"[") or url.endswith(_TRACE_JSON_SUFFIXES):
        raise BadInput(
            f"{url}: this is a Chrome trace JSON (trace.json.gz), not an XSpace; pass the "
            "*.xplane.pb file from the same run directory instead"
        )


def _memory_limit() -> int:
    """Files above this are refused rather than risk running out of memory.

    Decoding holds the file and about as much again in event columns, so the
    limit is a third of physical memory.
    """
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 3
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30
