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

import os
from dataclasses import field
from typing import Any

from tpuperf._dataclasses import dataclass
from tpuperf.errors import BadInput, UsageError
from tpuperf.files import path_name, path_parts

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
    fs, root = filesystem(path)
    if not fs.exists(root):
        raise BadInput(f"{path}: no such file or directory")
    if not fs.isdir(root):
        if run is not None:
            raise UsageError(f"--run needs a logdir, but {path} is a file")
        resolved = Resolved([HostFile(host_name(root), _url(fs, path, root))])
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
            path_name(entry)
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
            [HostFile(host_name(f), _url(fs, path, f)) for f in files], run=chosen, notices=notices
        )
    if run is not None:
        raise UsageError(f"--run needs a logdir (with plugins/profile/ inside); {path} is not one")
    files = _profile_files(fs, root)
    if not files:
        found = sorted(path_name(p) for p in fs.ls(root, detail=False))
        listing = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
        raise BadInput(
            f"{path}: no *.xplane.pb profiles in this directory"
            + (f" (found: {listing})" if found else " (it is empty)")
            + "; pass a profile file, a run directory or a logdir"
        )
    return Resolved([HostFile(host_name(f), _url(fs, path, f)) for f in files], run=path_name(root))


def _runs_dir(fs: Any, root: str) -> str | None:
    """The ``plugins/profile`` directory of a logdir, or None when ``root`` is not a logdir."""
    candidate = f"{root.rstrip('/')}/plugins/profile"
    if fs.isdir(candidate):
        return candidate
    parts = tuple(path_parts(root))
    if len(parts) >= 2 and parts[-2:] == ("plugins", "profile"):
        return root
    return None


def _profile_files(fs: Any, directory: str) -> list[str]:
    return sorted(
        entry
        for entry in fs.ls(directory, detail=False)
        if strip_profile_suffix(path_name(entry)) is not None and not fs.isdir(entry)
    )


def strip_profile_suffix(name: str) -> str | None:
    """``name`` without its profile suffix (``.xplane.pb``, ``.gz`` too), None when it has none."""
    base = name[:-3] if name.endswith(".gz") else name
    for suffix in PROFILE_SUFFIXES:
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return None


def host_name(path: str) -> str:
    """The host a profile file is of: its name without the profile suffix."""
    name = path_name(path)
    stripped = strip_profile_suffix(name)
    return stripped if stripped else name


class _LocalFS:
    """The few filesystem calls this module makes, on local paths, with the standard library
    (importing fsspec costs a local analysis 60 ms)."""

    exists = staticmethod(os.path.exists)
    isdir = staticmethod(os.path.isdir)
    size = staticmethod(os.path.getsize)

    @staticmethod
    def ls(path: str, detail: bool = False) -> list[str]:
        return sorted(os.path.join(path, name) for name in os.listdir(path))

    @staticmethod
    def open(path: str, mode: str = "rb") -> Any:
        return open(path, mode)  # the caller closes it


def filesystem(path: str, walk: bool = False) -> tuple[Any, str]:
    """The filesystem of ``path`` (local or an fsspec URL) and the path on it. Local paths get
    the few standard-library calls loading needs, or fsspec's local filesystem with ``walk``
    (scan lists whole trees with ``find``)."""
    if "://" not in path:
        if walk:
            from fsspec.implementations.local import LocalFileSystem

            return LocalFileSystem(), os.path.abspath(path)
        return _LocalFS(), os.path.abspath(path)
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


# Memory that decoding and analysing a profile takes, per byte of the (decompressed) file:
# event columns and the analysis's working arrays (a memory-mapped file's pages are let go of
# as it is decoded). Measured on the
# benchmark profiles (benchmarks/README.md): peak RSS is 2.4x a 5 GB file, 3.5x an 85 MB one
# (where the interpreter and numpy weigh more).
MEMORY_PER_BYTE = 2.5
_CHUNK = 1 << 22


def read_profile(url: str, available: int | None = None) -> Any:
    """A profile's decompressed bytes, checked to look like an XSpace.

    A plain local file comes back memory-mapped (its pages are the page cache's, not
    copied); a gzip file is inflated as a stream; a remote one is read whole. A profile
    that needs more memory than the machine has ``available`` (default: what the kernel
    reports free, less what this process may still use) is refused before it is read, and
    a gzip stream is refused as soon as it inflates past that.
    """
    fs, path = filesystem(url)
    try:
        size = fs.size(path)
    except FileNotFoundError:
        raise BadInput(f"{url}: no such file") from None
    except OSError as exc:
        raise BadInput(f"{url}: cannot read: {exc}") from None
    budget = available_memory() if available is None else available
    try:
        with fs.open(path, "rb") as handle:
            head = handle.read(2)
            if head == _GZIP_MAGIC:
                handle.seek(0)
                data: Any = _inflate(url, handle, budget)
            else:
                _check_memory(url, size or 0, budget)
                if "://" not in url and size:
                    data = _map(path)
                else:
                    handle.seek(0)
                    data = handle.read()
    except OSError as exc:
        raise BadInput(f"{url}: cannot read: {exc}") from None
    if not len(data):
        raise BadInput(f"{url}: the file is empty; capture the profile again")
    _check_not_trace_json(url, data)
    return data


def file_facts(url: str) -> tuple[int, bool]:
    """The size of the file as stored (bytes) and whether it is gzip-compressed."""
    fs, path = filesystem(url)
    with fs.open(path, "rb") as handle:
        gzip = handle.read(2) == _GZIP_MAGIC
    return int(fs.size(path)), gzip


def read_bytes(url: str) -> bytes:
    """A profile's decompressed bytes as ``bytes`` (see :func:`read_profile`)."""
    data = read_profile(url)
    return data if isinstance(data, bytes) else bytes(data)


def _map(path: str) -> Any:
    import mmap

    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mapped, "madvise") and hasattr(mmap, "MADV_SEQUENTIAL"):
        mapped.madvise(mmap.MADV_SEQUENTIAL)
    return mapped


def release(data: Any) -> None:
    """Let the kernel drop the pages of a memory-mapped profile (:func:`read_profile`) from
    this process once it is decoded: they stay in the page cache and are read again if
    anything still asks for them. The map itself lives until nothing refers to it, which for
    a decoded XSpace (its planes and lines refer to each other) is the next garbage
    collection, and would keep up to a tenth of the file resident through the analysis.
    Bytes, other buffers and systems without MADV_DONTNEED are left as they are."""
    import contextlib
    import mmap

    advice = getattr(mmap, "MADV_DONTNEED", None)
    if isinstance(data, mmap.mmap) and advice is not None and hasattr(data, "madvise"):
        with contextlib.suppress(OSError, ValueError):  # a closed map: nothing is resident
            data.madvise(advice)


def _check_memory(url: str, size: int, budget: int) -> None:
    need = int(size * MEMORY_PER_BYTE)
    if need > budget:
        raise BadInput(
            f"{url}: this {size / 2**30:.1f} GiB profile needs about {need / 2**30:.1f} GiB of "
            f"memory to analyse and {budget / 2**30:.1f} GiB is available; analyze it on a "
            "larger machine, or capture a shorter window"
        )


def _inflate(url: str, handle: Any, budget: int) -> bytearray:
    """Decompress a gzip stream in bounded pieces, refusing it once the output outgrows what
    ``budget`` can analyse (see MEMORY_PER_BYTE). A gzip bomb stops here, before it fills
    memory; concatenated gzip members are one stream, as gzip(1) reads them."""
    import zlib

    limit = int(budget / (1 + MEMORY_PER_BYTE))
    out = bytearray()
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    data = handle.read(_CHUNK)
    try:
        while True:
            out += inflater.decompress(data, _CHUNK)
            data = inflater.unconsumed_tail
            if len(out) > limit:
                raise BadInput(
                    f"{url}: this gzip file inflates to more than {limit / 2**30:.1f} GiB, more "
                    f"than the {budget / 2**30:.1f} GiB of available memory can analyse; "
                    "decompress and check it, or analyze it on a larger machine"
                )
            if inflater.eof:
                data = inflater.unused_data or handle.read(_CHUNK)
                if not data:
                    break
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            elif not data:
                data = handle.read(_CHUNK)
                if not data:
                    raise BadInput(f"{url}: a gzip file that ends early (truncated?)")
    except zlib.error as exc:
        raise BadInput(f"{url}: a gzip file that does not decompress ({exc})") from None
    return out  # a bytearray: no second copy of a large profile


def available_memory(root: str = "/") -> int:
    """Memory this process can still take: the least of what the kernel reports available
    (MemAvailable), the room under each memory limit of its cgroup (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``, less what the group uses) and the room under its address-space
    limit (RLIMIT_AS, ``ulimit -v``, less what it has mapped). ``root`` is where /proc and /sys
    are (tests give a directory that imitates them)."""
    rooms = [_mem_available(root), *_cgroup_rooms(root), _address_space_room(root)]
    known = [room for room in rooms if room is not None]
    if not known:
        try:
            known = [os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")]
        except (ValueError, OSError, AttributeError):
            known = [8 * 2**30]
    return max(int(min(known)), 0)


def _read(root: str, path: str) -> str | None:
    try:
        with open(os.path.join(root, path.lstrip("/"))) as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _mem_available(root: str) -> int | None:
    for line in (_read(root, "/proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


# A cgroup v1 memory limit at or above this is no limit (the kernel writes 2**63 - 4096).
_NO_CGROUP_LIMIT = 2**62


def _cgroup_rooms(root: str) -> list[int]:
    """Limit less use of every memory cgroup above this process (its own and its
    ancestors': any of them can stop it), v2 and v1; the root's files where a container
    shows its own cgroup as /."""
    rooms = []
    for line in (_read(root, "/proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, group = parts
        if parts[0] == "0" and controllers == "":  # v2: the unified hierarchy
            base, limit_file, use_file = "/sys/fs/cgroup", "memory.max", "memory.current"
        elif "memory" in controllers.split(","):
            base = "/sys/fs/cgroup/memory"
            limit_file, use_file = "memory.limit_in_bytes", "memory.usage_in_bytes"
        else:
            continue
        levels = [p for p in group.strip().split("/") if p]
        for depth in range(len(levels), -1, -1):
            directory = "/".join([base, *levels[:depth]])
            limit, used = (
                _read(root, f"{directory}/{limit_file}"),
                _read(root, f"{directory}/{use_file}"),
            )
            if limit is None or used is None or limit.strip() == "max":
                continue
            try:
                limit_bytes, used_bytes = int(limit), int(used)
            except ValueError:
                continue
            if limit_bytes < _NO_CGROUP_LIMIT:
                rooms.append(limit_bytes - used_bytes)
    return rooms


def _address_space_room(root: str) -> int | None:
    """RLIMIT_AS less the process's mapped size (VmSize): a process under ``ulimit -v`` fails
    to allocate there, whatever memory the machine has free."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return None
    if limit == resource.RLIM_INFINITY or limit < 0:
        return None
    for line in (_read(root, "/proc/self/status") or "").splitlines():
        if line.startswith("VmSize:"):
            return limit - int(line.split()[1]) * 1024
    return limit


def _check_not_trace_json(url: str, data: Any) -> None:
    head = bytes(data[:64]).lstrip()
    if head[:1] in (b"{", b"[") or url.endswith(_TRACE_JSON_SUFFIXES):
        raise BadInput(
            f"{url}: this is a Chrome trace JSON (trace.json.gz), not an XSpace; pass the "
            "*.xplane.pb file from the same run directory instead"
        )
