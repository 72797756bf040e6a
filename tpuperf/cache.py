"""A cache of decoded profile tables, of analyses and of scan results, keyed by content.

Every command that reads a profile reads it through here (``--no-cache`` aside), and so does
``tpuperf scan``: decoding is what costs, so a profile read once is not decoded again while
it is unchanged. The cache lives under ``$TPUPERF_CACHE_DIR``, else
``$XDG_CACHE_HOME/tpuperf``, else ``~/.cache/tpuperf``::

    v3/tables/ab/<key>/   one host file's decoded tables: columns.bin, every array of its
                          tables one after another (raw, aligned, memory-mapped when read)
                          and the UTF-8 text of each string column's values,
                          and host.json (what each array is, the tables' form, its HostInfo,
                          warnings, and the stamps that say the entry is whole and current)
    v3/reports/ab/<key>/  one analysis (``analyze``, ``report``, a run of ``diff``) of a
                          profile's files under given options, or one comparison of ``diff``
                          (keyed by its runs' analyses): columns.bin, the arrays of its
                          tables, and
                          report.json (the Report's fields as tagged JSON, :func:`_pack`; the
                          page's data too where HTML was asked for), with the same stamps
    v3/rows/ab/<key>.json a scan row (the analysis of one profile under given options)
    v3/stat/ab/<key>.json a local file's (size, mtime, ctime, inode) -> content key, so an
                          unchanged file is not read again just to hash it (a file modified
                          too recently for that is recorded without its stat: seen, so that
                          reading it again hashes it before decoding anything)
    v3/sizes/ab/<key>.json  that a file of a size was read: a file never seen that has the
                          size of one seen (a copy) is hashed before it is decoded; any other
                          is hashed while its tables are built

Keys hash the content (a report's adds the path as given, the notices of choosing its files
and the options), never the path alone: a file's *content key* is the 128-bit XXH3 of its
(decompressed) bytes (their SHA-256 where the xxhash package is missing), or, for an object
store listing that states one, the object's MD5 or ETag with its size. Entry keys add the
tpuperf version (and, for development versions, a digest of tpuperf's own source) so a new
tpuperf never reads an old one's results. Nothing is pickled: arrays are raw numbers and
everything else JSON. An entry is written whole under a temporary name and renamed into
place, so two processes storing the same one at once leave one whole entry; a command stores
the entry it decoded in a thread of its own while it analyses the tables (``write_behind``),
and waits for it before it ends. One that does not read back exactly (a file changed since
it was written, a stamp of another format or version, anything missing) is removed, said in
one note, and rebuilt. Table and report entries together take at most
``$TPUPERF_CACHE_MAX_BYTES`` (default 8 GiB): the least recently used go first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tpuperf import jsonout, schema
from tpuperf.columns import Strings, Table
from tpuperf.files import write_atomic
from tpuperf.profiles import HostInfo, HostPart, Profile, assemble, read_host

# Bump when the layout of entries changes; old entries are then simply never looked at.
FORMAT = "v3"

# A local file modified this recently may change again within the file system's timestamp
# resolution without its mtime moving, so its stat is not trusted as a stand-in for its content
# (git's "racily clean" rule). A file system that stamps whole milliseconds or coarser (FAT's
# 2 s, HFS+'s 1 s, some network file systems) is given the 2 s; one that stamps finer moves a
# file's mtime at every tick of the kernel's clock (at most 10 ms apart), so 50 ms is enough,
# and a script's next command on a profile just written reads its stat, not its bytes.
_RACY_NS = 2_000_000_000
_RACY_FINE_NS = 50_000_000

# A temporary entry folder this old was left by a process that died while writing it.
_ABANDONED_NS = 3600 * 1_000_000_000

# The default bound on the table entries together; the least recently used go first.
DEFAULT_MAX_BYTES = 8 * 1024**3


# One host file's decoded tables, HostInfo and decoder warnings: what the cache stores.
HostTables = HostPart


def default_dir() -> str:
    explicit = os.environ.get("TPUPERF_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tpuperf")


def default_max_bytes() -> int:
    """``$TPUPERF_CACHE_MAX_BYTES`` (a whole number of bytes), else 8 GiB."""
    text = os.environ.get("TPUPERF_CACHE_MAX_BYTES", "").strip()
    if text:
        try:
            return max(0, int(text))
        except ValueError:
            from tpuperf.errors import UsageError

            raise UsageError(
                f"TPUPERF_CACHE_MAX_BYTES={text!r}: give a whole number of bytes"
            ) from None
    return DEFAULT_MAX_BYTES


def content_key(data: bytes) -> str:
    """The content key of a profile's bytes (see :func:`_content_digest`)."""
    name, digest = _content_digest()
    digest.update(data)
    return f"{name}:{digest.hexdigest()}"


def _content_digest() -> tuple[str, Any]:
    """A new digest of a profile's bytes, and the name its keys start with: XXH3's 128 bits
    (the xxhash package: 80 MB in 8 ms here, where OpenSSL's SHA-256 takes 67 ms; a first
    command hashes beside its build, whose second core it shared), or SHA-256 where xxhash is
    missing. Either tells a changed file from the one hashed; XXH3 is no defence against a
    file crafted to collide with another, which a cache of one's own profiles need not be.
    Both let go of the GIL."""
    try:
        import xxhash
    except ImportError:
        import hashlib  # OpenSSL's SHA-256: several times the interpreter's own

        return "sha256", hashlib.sha256()
    return "xxh3_128", xxhash.xxh3_128()


def _text_digest(text: str) -> str:
    """The SHA-256 of a short text (a key's parts), hex."""
    return str(_short_sha256()(text.encode()).hexdigest())


@functools.lru_cache(maxsize=1)
def _short_sha256() -> Callable[[bytes], Any]:
    """The interpreter's own SHA-256 where it has one: a command served from the cache then
    needs no hashlib, whose import loads OpenSSL (4-9 ms here, more than the hashing of a
    command's keys takes)."""
    try:
        from _sha2 import sha256  # type: ignore[import-not-found]  # CPython 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found]  # CPython 3.10, 3.11
        except ImportError:
            from hashlib import sha256
    return sha256  # type: ignore[no-any-return]


def listing_key(info: dict[str, Any]) -> str | None:
    """A content key from an object store's metadata (fsspec ``info``), or None when it has none.

    GCS states ``md5Hash`` for every non-composite object; S3 and others an ``ETag`` (the MD5 of
    a single-part upload). Either, with the size, changes whenever the content does.
    """
    size = info.get("size")
    for field in ("md5Hash", "md5", "ETag", "etag"):
        value = info.get(field)
        if value:
            return f"{field.lower()}:{str(value).strip(chr(34))}:{size}"
    return None


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """tpuperf's version; for a development version, with a digest of its source files.

    Development checkouts change code without changing the version string, and a cached
    result computed by older code must not be served as today's. The digest is of each
    source file's name and :func:`settled_state` (size, mtime, ctime, inode: what moves when
    the file is written, the stat git's index trusts), which costs a stat per file rather
    than reading them all; where one was modified too recently for its stat to be trusted,
    of the files' names and bytes.
    """
    from tpuperf import __version__

    if not any(tag in __version__ for tag in ("dev", "+")):
        return __version__
    import tpuperf.analyzers
    import tpuperf.roofline

    paths = [
        path
        for package in (tpuperf, tpuperf.analyzers, tpuperf.roofline)
        for root in package.__path__
        for path in sorted(
            os.path.join(folder, name)
            for folder, _, names in os.walk(root)  # a third of the time of Path.rglob
            for name in names
            if name.endswith(".py")
        )
    ]
    states = [settled_state(path) for path in paths]
    if all(state is not None for state in states):
        named = [[os.path.basename(p), state] for p, state in zip(paths, states, strict=True)]
        return f"{__version__}+stat.{_text_digest(json.dumps(named))[:16]}"
    import hashlib

    digest = hashlib.sha256()
    for path in paths:
        digest.update(os.path.basename(path).encode())
        with open(path, "rb") as file:
            digest.update(file.read())
    return f"{__version__}+src.{digest.hexdigest()[:16]}"


def _hash(*parts: Any) -> str:
    text = json.dumps([FORMAT, code_version(), *parts], sort_keys=True, separators=(",", ":"))
    return _text_digest(text)


class Cache:
    """The cache under ``root``; see the module docstring for its layout."""

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        max_bytes: int | None = None,
        note: Callable[[str], None] | None = None,
        write_behind: bool = False,
    ) -> None:
        # Paths are strings here (os.path), as in every module a command imports: pathlib
        # would import urllib.parse and ipaddress with it (15 M instructions, 3-6 ms).
        self.root = os.fspath(root) if root is not None else default_dir()
        self._base = os.path.join(self.root, FORMAT)
        # The most the table entries may take together (see :func:`default_max_bytes`).
        self.max_bytes = max_bytes if max_bytes is not None else default_max_bytes()
        self.note = note  # told, in one line, of each damaged entry it removes
        self.hits = 0  # entries read back (tests check what was served from here)
        # The (url, host, content key) of each file the last :func:`load` read, and the
        # notices of choosing them (sources.Resolved.notices).
        self.last_loaded: list[tuple[str, str, str]] = []
        self.last_notices: list[str] = []
        self._stated: dict[str, str | None] = {}  # url -> stated_key's answer
        self._known_bytes: int | None = None  # what the table entries take, once walked
        # Store table entries in a thread of their own while the caller goes on (a command
        # analyses the tables it just decoded meanwhile); :meth:`wait` joins it.
        self.write_behind = write_behind
        self._writer: threading.Thread | None = None
        self._write_error: BaseException | None = None

    # ------------------------------------------------------------------ keys

    @staticmethod
    def tables_key(host: str, content: str) -> str:
        # The host name (from the file name) is in every table, so it is part of the key.
        return _hash("tables", host, content)

    @staticmethod
    def row_key(hosts: list[tuple[str, str]], options: dict[str, Any]) -> str:
        """Key of a scan row: the (host, content key) of each file analysed, and the options."""
        return _hash("row", hosts, options)

    @staticmethod
    def failure_key(states: list[tuple[str, list[int]]], options: dict[str, Any]) -> str:
        """Key of a bad profile's error: each local file's path and :func:`settled_state`.

        A file that cannot be read has no content key; an unchanged one fails the same way.
        """
        return _hash("failure", states, options)

    # ------------------------------------------------------------------ stat memo

    def content_of(self, url: str, stated: str | None = None) -> str | None:
        """The content key of ``url`` known without reading it: ``stated`` (an object
        store's, :func:`listing_key`), else a local file's stat memo's
        (:meth:`known_content`); None when neither knows it."""
        if stated is not None or "://" in url:
            return stated
        return self.known_content(url)

    def stated_key(self, url: str) -> str | None:
        """The content key an object store states for ``url`` (:func:`_stated_key`), asked
        once per Cache: a command that looks for its report before loading asks once."""
        if url not in self._stated:
            self._stated[url] = _stated_key(url)
        return self._stated[url]

    def known_content(self, path: str) -> str | None:
        """The content key recorded for local file ``path`` if it is unchanged since, else None."""
        entry = self._stat_entry(path)
        try:
            memo = json.loads(_read_text(entry))
        except (OSError, ValueError):
            return None
        state = settled_state(path)
        if state is None or not isinstance(memo, dict) or memo.get("stat") != state:
            return None
        key = memo.get("content")
        return key if isinstance(key, str) else None

    def _stat_entry(self, path: str) -> str:
        """Where local file ``path``'s stat memo is kept."""
        return self._entry("stat", _hash("stat", os.path.abspath(path)), ".json")

    def _size_entry(self, size: int) -> str:
        """Where it is kept that a file of ``size`` bytes was read."""
        return self._entry("sizes", _hash("size", size), ".json")

    def remember_content(self, path: str, key: str) -> None:
        """Record that local file ``path``, as it is now, has content key ``key``, and that a
        file of its size was read. A file modified too recently for its stat to stand in for
        its content is recorded without its stat: :meth:`known_content` never answers for
        it, :meth:`seen` does."""
        state = settled_state(path)
        if state is not None or os.path.exists(path):
            entry = self._stat_entry(path)
            self._write_json(entry, {"stat": state, "content": key})
            with contextlib.suppress(OSError):
                size = os.path.getsize(path)
                self._write_json(self._size_entry(size), {})

    def seen(self, path: str) -> bool:
        """Whether a content key was recorded for local file ``path`` (:meth:`remember_content`),
        however it has changed since, or for a file of its size (a copy of one): its tables
        may well be here, so they are looked for before the file is decoded."""
        if os.path.exists(self._stat_entry(path)):
            return True
        try:
            size = os.path.getsize(path)
        except OSError:
            return False
        return os.path.exists(self._size_entry(size))

    # ------------------------------------------------------------------ rows

    def get_row(self, key: str) -> dict[str, Any] | None:
        entry = self._entry("rows", key, ".json")
        try:
            document = json.loads(_read_text(entry))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            _remove(entry)
            return None
        if not isinstance(document, dict) or document.get("key") != key:
            _remove(entry)
            return None
        row = document.get("row")
        return row if isinstance(row, dict) else None

    def put_row(self, key: str, row: dict[str, Any]) -> None:
        self._write_json(self._entry("rows", key, ".json"), {"key": key, "row": row})

    # ------------------------------------------------------------------ reports

    @staticmethod
    def report_key(parts: Any) -> str:
        """Key of an analysis's results: ``parts`` name what it read and how (plain JSON)."""
        return _hash("report", parts)

    def get_report(self, key: str) -> dict[str, Any] | None:
        """The values :meth:`put_report` stored under ``key``, equal and of the same types;
        None on a miss (a damaged entry is removed and said in one note, as a table
        entry is)."""
        return self._get_entry(  # type: ignore[no-any-return]
            "reports", key, _REPORT_META, lambda meta, arrays: _unpack(meta["values"], arrays)
        )

    def put_report(self, key: str, values: dict[str, Any]) -> None:
        """Store ``values`` (an analysis's results, by name) under ``key``: None, bools,
        ints, floats, strings, lists, tuples and dicts of them, numpy numbers and arrays,
        Tables and tpuperf's dataclasses (:func:`_pack`). Values of any other type leave
        the entry out."""
        self._store_entry(
            "reports", key, _REPORT_META, lambda blob: {"values": _pack(values, blob)}
        )

    # ------------------------------------------------------------------ tables

    def holds_tables(self, key: str) -> bool:
        """Whether an entry of tables is stored under ``key`` (:meth:`get_tables` reads it)."""
        return os.path.exists(os.path.join(self._entry("tables", key, ""), _TABLES_META))

    def get_tables(self, key: str, url: str) -> HostTables | None:
        """The cached tables under ``key``, with ``url`` as the HostInfo path; None on a miss.

        An entry that does not read back exactly (a missing, changed or damaged file, a stamp
        of another format or version) is removed, said in one note, and treated as a miss.
        """
        return self._get_entry(
            "tables", key, _TABLES_META, lambda meta, arrays: _read_tables(meta, arrays, url)
        )

    def _get_entry(
        self, kind: str, key: str, meta_name: str, read: Callable[[dict[str, Any], _Arrays], Any]
    ) -> Any:
        """What ``read`` makes of the entry of ``kind`` under ``key`` (its ``meta_name`` JSON,
        checked against its stamps, and the arrays of its blob); None on a miss, and on
        damage, which removes the entry and says so in one note."""
        entry = self._entry(kind, key, "")
        try:
            meta_text = _read_text(os.path.join(entry, meta_name))
        except FileNotFoundError:
            if os.path.exists(entry):
                self._damaged(entry, f"{meta_name} is missing")
            return None
        except OSError:
            return None
        try:
            meta = json.loads(meta_text)
            _check_stamps(meta, key, meta_name)
            hit = read(meta, _Arrays(entry, meta))
        except Exception as exc:  # any damage at all: the entry is rebuilt, never trusted
            self._damaged(entry, _reason(exc, meta_name))
            return None
        self.hits += 1
        with contextlib.suppress(OSError):
            os.utime(entry)  # its last use, for eviction
        return hit

    def put_tables(self, key: str, tables: HostTables) -> None:
        """Store ``tables`` under ``key``; with ``write_behind``, in a thread of its own, after
        the entries this Cache is storing already (:meth:`wait` joins them)."""
        if not self.write_behind:
            self._store_tables(key, tables)
            return
        previous = self._writer

        def store() -> None:
            if previous is not None:
                previous.join()  # one entry at a time, in order: evict counts them one by one
            try:
                self._store_tables(key, tables)
            except BaseException as exc:  # said by wait(), as put_tables would have raised it
                self._write_error = exc

        # Not a daemon: should the caller never wait, the interpreter still does at exit.
        self._writer = threading.Thread(target=store, name="tpuperf-cache-write")
        self._writer.start()

    def wait(self) -> None:
        """Return once the entries stored in the background (``write_behind``) are written;
        raises what writing one raised (a cache that cannot be written is no error)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.join()
        error, self._write_error = self._write_error, None
        if error is not None:
            raise error

    def _store_tables(self, key: str, tables: HostTables) -> None:
        def fill(blob: _Blob) -> dict[str, Any]:
            devices = [
                {
                    "row": jsonout.clean(d.row),
                    "untimed": int(d.untimed),
                    "tables": {
                        name: _encode(getattr(d, name), blob)
                        for name in _DEVICE_TABLES
                        if getattr(d, name) is not None
                    },
                }
                for d in tables.devices
            ]
            lines = _encode(tables.lines, blob)
            events = None if tables.host_events is None else _encode(tables.host_events, blob)
            protos = {name: blob.add_bytes(data) for name, data in tables.hlo_protos.items()}
            # Cleaned where values may be numpy's or NaN (the rows, the info): the tables'
            # forms are plain already, and their strings are most of the text.
            return {
                "info": jsonout.clean(dataclasses.asdict(tables.info)),
                "warnings": [str(w) for w in tables.warnings],
                "devices": devices,
                "lines": lines,
                "host_events": events,
                "hlo_protos": protos,
            }

        self._store_entry("tables", key, _TABLES_META, fill)

    def _store_entry(
        self, kind: str, key: str, meta_name: str, fill: Callable[[_Blob], dict[str, Any]]
    ) -> None:
        """Store an entry of ``kind`` under ``key``: the arrays ``fill`` adds to its blob, and
        ``meta_name``, the JSON of what ``fill`` returns with the entry's stamps; whole or
        not at all. One that cannot be stored (a value the cache does not store, a full disk,
        another process storing it first) is left out: a cache is only ever slower."""
        entry = self._entry(kind, key, "")
        # A folder of this process's own (as tempfile.mkdtemp makes one, without importing
        # tempfile: shutil, random, bz2 and lzma with it, 5 ms of every first command).
        folder = os.path.dirname(entry)
        temp = os.path.join(folder, f".{key[:16]}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
        try:
            os.makedirs(folder, exist_ok=True)
            os.mkdir(temp, mode=0o700)
        except OSError:
            return  # a cache that cannot be written is only slower, never wrong
        try:
            blob = _Blob(os.path.join(temp, _BLOB))
            with blob:
                content = fill(blob)
            st = os.stat(blob.path)
            meta = {
                "format": FORMAT,
                "version": code_version(),
                "key": key,
                "blob": [st.st_size, st.st_mtime_ns, st.st_ino],
                "arrays": blob.arrays,
                **content,
            }
            text = json.dumps(meta)
            if blob.size + len(text) > self.max_bytes:
                return  # larger than the whole cache: not stored
            write_atomic(os.path.join(temp, meta_name), text, fsync=False)
            os.rename(temp, entry)  # atomic: readers see the whole entry or none
            stored = blob.size + os.stat(os.path.join(entry, meta_name)).st_size
        except (OSError, ValueError):
            stored = 0  # another process stored the same entry first, the disk is full, or
            # a value of a kind the cache does not store (then the entry is not kept)
        finally:
            if os.path.exists(temp):
                _remove(temp)
        if stored:
            self.evict(stored)

    # ------------------------------------------------------------------ size

    def evict(self, added: int = 0) -> None:
        """Remove the least recently used table and report entries until they take at most
        ``max_bytes``.

        Entries of every format under the root count (an old tpuperf's too); rows and stat
        memos are a few hundred bytes each and are left. The folder is walked once per
        Cache, and again only when the entries it knows of with those ``added`` since (the
        bytes of each entry this Cache stored) pass the bound: a scan storing thousands of
        entries does not walk thousands of times.
        """
        if self._known_bytes is not None:
            self._known_bytes += added
            if self._known_bytes <= self.max_bytes:
                return
        entries = []
        now = time.time_ns()
        for entry in _entries(self.root):
            try:
                st = os.stat(entry)
                if os.path.basename(entry).startswith("."):  # being written, or left by a crash
                    if now - st.st_mtime_ns > _ABANDONED_NS:
                        _remove(entry)
                    continue
                size = sum(os.stat(os.path.join(entry, f)).st_size for f in os.listdir(entry))
            except OSError:
                continue  # removed meanwhile
            entries.append((st.st_mtime_ns, size, entry))
        total = sum(size for _, size, _ in entries)
        for _, size, entry in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_bytes:
                break
            _remove(entry)
            total -= size
        self._known_bytes = total

    def _damaged(self, entry: str, reason: str) -> None:
        _remove(entry)
        if self.note is not None:
            name = os.path.basename(entry)
            self.note(f"cache entry {name[:12]} unusable ({reason}); read the profile again")

    # ------------------------------------------------------------------ helpers

    def _entry(self, kind: str, key: str, suffix: str) -> str:
        return os.path.join(self._base, kind, key[:2], f"{key}{suffix}")

    @staticmethod
    def _write_json(path: str, document: dict[str, Any]) -> None:
        # A cache that cannot be written is only slower; one cut short by a crash is rebuilt,
        # so its files skip the fsync.
        with contextlib.suppress(OSError):
            text = json.dumps(jsonout.clean(document), allow_nan=False)
            write_atomic(path, text, fsync=False)


def settled_state(path: str) -> list[int] | None:
    """A local file's size, mtime, ctime, inode and device; None when it is missing, or was
    modified so recently that it may change again without its mtime moving (:data:`_RACY_NS`,
    or :data:`_RACY_FINE_NS` where its mtime is not a whole number of milliseconds)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    racy = _RACY_NS if st.st_mtime_ns % 1_000_000 == 0 else _RACY_FINE_NS
    if time.time_ns() - st.st_mtime_ns < racy:
        return None
    # ctime moves on chmod too, so a file made readable is tried again.
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


_DEVICE_TABLES = ("ops", "modules", "async_ops", "steps", "waits")
_BLOB = "columns.bin"
_TABLES_META = "host.json"
_REPORT_META = "report.json"
_ENTRY_KINDS = ("tables", "reports")  # folders of a blob and its JSON, evicted by use
_ALIGN = 64
_KINDS = "biuf"  # bool, signed and unsigned integers, floats: nothing else is stored


class _Blob:
    """The arrays of one entry, written one after another (each aligned) into one file; their
    dtype, shape and offset go to the entry's host.json. Arrays shared by several columns (a
    TPU op's names and costs all index its metadata row) are written once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.arrays: list[list[Any]] = []  # [dtype, shape, offset] per array
        self.size = 0
        self._seen: dict[int, tuple[np.ndarray, int]] = {}
        self._file: Any = None

    def __enter__(self) -> _Blob:
        self._file = open(self.path, "wb")  # closed by __exit__
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def add(self, array: np.ndarray) -> int:
        """The number of ``array`` in :attr:`arrays`, writing it when it is new."""
        seen = self._seen.get(id(array))
        if seen is not None and seen[0] is array:
            return seen[1]
        if array.dtype.kind not in _KINDS or array.dtype.hasobject:
            raise ValueError(f"the cache stores no {array.dtype} arrays")
        number = self._write(np.ascontiguousarray(array))
        self._seen[id(array)] = (array, number)
        return number

    def add_bytes(self, data: bytes) -> int:
        return self._write(np.frombuffer(data, dtype=np.uint8))

    def _write(self, array: np.ndarray) -> int:
        pad = -self.size % _ALIGN
        self._file.write(b"\0" * pad)
        self._file.write(array.data if array.size else b"")
        self.arrays.append([array.dtype.str, list(array.shape), self.size + pad])
        self.size += pad + array.nbytes
        return len(self.arrays) - 1


def _encode(
    table: Table, blob: _Blob, objects: Callable[[list[Any]], list[Any]] | None = None
) -> dict[str, Any]:
    """A Table as JSON naming its arrays in ``blob``; Strings and Lookups keep their form.
    ``objects``: what a column of Python objects is kept as (a report's: its values packed,
    :func:`_pack`); without it, such a column raises ValueError."""
    from tpuperf.columns import Lookup, Strings

    columns: dict[str, Any] = {}
    for name in table:
        column = table[name]
        if isinstance(column, Strings):
            mapping = None if column.mapping is None else blob.add(column.mapping)
            columns[name] = ["strings", blob.add(column.index), mapping, _values(column, blob)]
        elif isinstance(column, Lookup):
            columns[name] = ["lookup", blob.add(column.index), blob.add(column.values)]
        else:
            array = np.asarray(column)
            if array.dtype.hasobject and objects is not None and array.ndim == 1:
                columns[name] = ["objects", objects(array.tolist())]
            else:
                columns[name] = ["array", blob.add(array)]
    return {"n": int(table.n), "columns": columns}


def _values(column: Any, blob: _Blob) -> list[str] | list[int]:
    """A Strings column's values as the entry keeps them: their UTF-8 text joined by NUL in
    ``blob``, ``[array, count]`` (made and read back in C; as JSON, escaping every character
    of a profile's HLO texts, storing them held the GIL for most of a cache entry's time);
    the values themselves, as a JSON list, where one holds a NUL or there are none."""
    values = column.values
    try:
        joined = "\0".join(values)
    except TypeError:  # a value that is no str: as its str
        values = tuple(map(str, values))
        joined = "\0".join(values)
    data = joined.encode("utf-8", "surrogatepass")
    if not values or data.count(0) != len(values) - 1:  # (UTF-8 writes a NUL only for one)
        return list(values)
    return [blob.add_bytes(data), len(values)]


class _Arrays:
    """The arrays of an entry's blob, as read-only views of its memory map."""

    def __init__(self, entry: str, meta: dict[str, Any]) -> None:
        import mmap

        path = os.path.join(entry, _BLOB)
        with open(path, "rb") as file:
            st = os.fstat(file.fileno())
            if [st.st_size, st.st_mtime_ns, st.st_ino] != meta["blob"]:
                raise ValueError(f"{_BLOB} changed since it was written")
            self._data: Any = (
                mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) if st.st_size else b""
            )
        self._size = st.st_size
        self._specs = meta["arrays"]
        self._made: dict[int, np.ndarray] = {}

    def __getitem__(self, number: int) -> np.ndarray:
        array = self._made.get(number)
        if array is None:
            if not (isinstance(number, int) and 0 <= number < len(self._specs)):
                raise ValueError(f"no array {number!r}")
            text, shape, offset = self._specs[number]
            dtype = np.dtype(text)
            if dtype.kind not in _KINDS or dtype.hasobject:
                raise ValueError(f"array {number}: dtype {text}")
            if not all(isinstance(n, int) and n >= 0 for n in shape):
                raise ValueError(f"array {number}: shape {shape}")
            count = math.prod(shape)
            if not 0 <= offset <= self._size - count * dtype.itemsize:
                raise ValueError(f"array {number} lies past the end of {_BLOB}")
            array = np.frombuffer(self._data, dtype, count, offset).reshape(shape)
            self._made[number] = array  # shared by the columns that share it when written
        return array

    def bytes(self, number: int) -> bytes:
        return self[number].tobytes()


class _JoinedStrings(Strings):
    """A Strings column of an entry whose values are read from their joined text on first
    use (a profile's HLO texts, which most commands never read, took 14 ms of reading an
    80 MB profile's tables)."""

    joined: np.ndarray  # the values' UTF-8 text, joined by NUL (a view of the memory map)

    @classmethod
    def of(
        cls, index: np.ndarray, mapping: np.ndarray | None, joined: np.ndarray
    ) -> _JoinedStrings:
        column = object.__new__(cls)
        for field, value in (("index", index), ("mapping", mapping), ("joined", joined)):
            object.__setattr__(column, field, value)
        return column

    @functools.cached_property
    def values(self) -> tuple[str, ...]:
        return tuple(self.joined.tobytes().decode("utf-8", "surrogatepass").split("\0"))


def _decode(
    spec: dict[str, Any],
    arrays: _Arrays,
    objects: Callable[[list[Any]], list[Any]] | None = None,
    read_later: bool = False,
) -> Table:
    """The Table :func:`_encode` made ``spec`` of (``objects``: what reads back a column of
    objects that its ``objects`` kept); ``read_later``: string values kept joined are read
    on first use (:class:`_JoinedStrings`)."""
    from tpuperf.columns import Column, Lookup

    columns: dict[str, Column] = {}
    for name, (kind, *parts) in spec["columns"].items():
        if kind == "strings":
            index, mapping, values = parts
            mapped = None if mapping is None else arrays[mapping]
            if len(values) == 2 and all(type(v) is int for v in values):  # joined (_values)
                number, count = values
                text = arrays[number]
                found = int(np.count_nonzero(text == 0)) + 1  # values: its NULs plus one
                if found != count:
                    raise ValueError(f"column {name}: {found} values, not {count}")
                joined = _JoinedStrings.of(arrays[index], mapped, text)
                columns[name] = (
                    joined if read_later else Strings(joined.index, joined.values, mapped)
                )
                continue
            if not all(isinstance(v, str) for v in values):
                raise ValueError(f"column {name}: values that are not strings")
            columns[name] = Strings(arrays[index], tuple(values), mapped)
        elif kind == "lookup":
            columns[name] = Lookup(arrays[parts[0]], arrays[parts[1]])
        elif kind == "array":
            columns[name] = arrays[parts[0]]
        elif kind == "objects" and objects is not None:
            values = objects(parts[0])
            column = np.empty(len(values), dtype=object)
            column[:] = values
            columns[name] = column
        else:
            raise ValueError(f"column {name}: kind {kind!r}")
    return Table(columns, n=int(spec["n"]))


# The modules whose dataclasses a report entry may hold: tpuperf's own, never another's.
_PACKAGES = ("tpuperf", "analyzers", "roofline")


def _pack(value: Any, blob: _Blob) -> Any:
    """``value`` as plain JSON that :func:`_unpack` reads back equal and of the same types.
    What JSON holds as is (None, bools, ints, strings, lists, finite floats) stays as it is;
    everything else becomes an object tagged ``"$"``: other floats, tuples, dicts (as pairs,
    so that keys keep their types and order), numpy numbers and arrays (in ``blob``),
    Tables (:func:`_encode`) and dataclasses of tpuperf's modules (each field, by name).
    A value of any other type (or a dataclass that computes more than its fields) raises
    ValueError."""
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
    if kind is list:
        return [_pack(v, blob) for v in value]
    if kind is tuple:
        return {"$": "tuple", "v": [_pack(v, blob) for v in value]}
    if kind is dict:
        return {"$": "dict", "v": [[_pack(k, blob), _pack(v, blob)] for k, v in value.items()]}
    if kind is Table:
        return {"$": "table", "v": _encode(value, blob, lambda v: _pack(v, blob))}
    if kind is np.ndarray:
        return {"$": "array", "v": blob.add(value)}
    if isinstance(value, np.generic) and value.dtype.kind in _KINDS:
        return {"$": "number", "dtype": value.dtype.str, "v": _pack(value.item(), blob)}
    if dataclasses.is_dataclass(value) and _storable_class(kind):
        fields = {f.name: _pack(getattr(value, f.name), blob) for f in dataclasses.fields(value)}
        return {"$": "object", "type": f"{kind.__module__}:{kind.__qualname__}", "v": fields}
    raise ValueError(f"the cache stores no {kind.__module__}.{kind.__qualname__}")


def _unpack(packed: Any, arrays: _Arrays) -> Any:
    """The value :func:`_pack` made ``packed`` of; raises on anything it did not make."""
    kind = type(packed)
    if packed is None or kind in (bool, int, str, float):
        return packed
    if kind is list:
        return [_unpack(v, arrays) for v in packed]
    tag, value = packed["$"], packed["v"]
    if tag == "float":
        number = float(value)
        if math.isfinite(number):
            raise ValueError(f"a tagged float {value!r}")
        return number
    if tag == "tuple":
        return tuple(_unpack(v, arrays) for v in value)
    if tag == "dict":
        return {_unpack(k, arrays): _unpack(v, arrays) for k, v in value}
    if tag == "table":
        return _decode(value, arrays, lambda v: _unpack(v, arrays))
    if tag == "array":
        return arrays[value]
    if tag == "number":
        dtype = np.dtype(packed["dtype"])
        if dtype.kind not in _KINDS:
            raise ValueError(f"a number of dtype {dtype}")
        return dtype.type(_unpack(value, arrays))
    if tag == "object":
        return _unpack_object(packed["type"], value, arrays)
    raise ValueError(f"a value tagged {tag!r}")


def _storable_class(cls: type) -> bool:
    """Whether :func:`_pack` stores instances of dataclass ``cls``: one of tpuperf's modules
    whose instances are their fields alone (no ``__post_init__`` making more)."""
    package = cls.__module__.split(".")[0]
    return package in _PACKAGES and not hasattr(cls, "__post_init__")


def _unpack_object(name: str, fields: dict[str, Any], arrays: _Arrays) -> Any:
    """An instance of the dataclass ``module:qualname`` with ``fields``, made as it was
    (no ``__init__`` runs); only the dataclasses :func:`_storable_class` allows."""
    import importlib

    module, _, qualname = name.partition(":")
    if module.split(".")[0] not in _PACKAGES:
        raise ValueError(f"a {name}, not one of tpuperf's types")
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and _storable_class(cls)):
        raise ValueError(f"a {name}, which the cache does not store")
    names = [f.name for f in dataclasses.fields(cls)]
    if sorted(names) != sorted(fields):
        raise ValueError(f"a {name} with fields {sorted(fields)}, not {sorted(names)}")
    instance = object.__new__(cls)
    for field_name in names:
        object.__setattr__(instance, field_name, _unpack(fields[field_name], arrays))
    return instance


def _check_stamps(meta: Any, key: str, meta_name: str) -> None:
    """Raise unless ``meta`` is an entry's JSON of this format and version under ``key``."""
    if not isinstance(meta, dict):
        raise ValueError(f"{meta_name} is no object")
    if meta.get("format") != FORMAT or meta.get("version") != code_version():
        raise ValueError(
            f"written by tpuperf {meta.get('version')} (format {meta.get('format')}), "
            f"not {code_version()} (format {FORMAT})"
        )
    if meta.get("key") != key:
        raise ValueError(f"{meta_name} names another key")


def _read_tables(meta: dict[str, Any], arrays: _Arrays, url: str) -> HostTables:
    """A table entry's tables; raises on anything amiss."""
    from tpuperf.tables import DeviceTables

    float_columns = [k for k, v in schema.TABLES["devices"].items() if v == "float64"]
    devices = []
    for stored in meta["devices"]:
        # JSON wrote unknown peaks (NaN) as null: they read back as NaN.
        row: dict[str, Any] = {
            k: float("nan") if v is None and k in float_columns else v
            for k, v in stored["row"].items()
        }
        tables = {
            name: _decode(spec, arrays, read_later=True) for name, spec in stored["tables"].items()
        }
        devices.append(
            DeviceTables(
                str(row["host"]),
                int(row["device"]),
                row,
                tables["ops"],
                tables["modules"],
                tables["async_ops"],
                tables.get("steps"),
                waits=tables.get("waits"),
                untimed=int(stored["untimed"]),
            )
        )
    events = meta["host_events"]
    return HostTables(
        devices,
        _decode(meta["lines"], arrays, read_later=True),
        HostInfo(**{**meta["info"], "path": url}),
        [str(w) for w in meta["warnings"]],
        hlo_protos={str(k): arrays.bytes(v) for k, v in meta["hlo_protos"].items()},
        host_events=None if events is None else _decode(events, arrays, read_later=True),
    )


def _reason(exc: Exception, meta_name: str) -> str:
    if isinstance(exc, (KeyError, TypeError, IndexError)):
        return f"{meta_name} lacks what it should hold ({type(exc).__name__}: {exc})"
    if isinstance(exc, json.JSONDecodeError):
        return f"{meta_name} is not JSON"
    return str(exc) or type(exc).__name__


def _remove(path: str) -> None:
    if os.path.isdir(path):
        import shutil

        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read()


def _entries(root: str) -> Iterator[str]:
    """The table and report entries under ``root`` of every format (``v*/KIND/??/*``), those
    being written (``.*``) too."""
    for kind in _ENTRY_KINDS:
        for version in _listdir(root):
            if version.startswith("v"):
                folder = os.path.join(root, version, kind)
                for shard in _listdir(folder):
                    for name in _listdir(os.path.join(folder, shard)):
                        yield os.path.join(folder, shard, name)


def _listdir(path: str) -> list[str]:
    """The names in folder ``path``, in the folder's order (as pathlib's glob walks them: the
    eviction's order among entries last used at the same time); none where it is missing or
    not a folder."""
    try:
        return os.listdir(path)
    except OSError:
        return []


# ---------------------------------------------------------------------- loading through the cache


def decode_host(
    url: str, host: str, data: Any, stop: Callable[[], bool] | None = None
) -> HostTables:
    """Decode one host file's bytes into its tables, as :func:`tpuperf.load` does; ``stop``:
    see :func:`tpuperf.build.build_host`."""
    return read_host(url, host, data, stop)


# A memory-mapped profile hashed beside its build is read this many bytes at a time, each
# chunk's pages let go once hashed.
_HASH_CHUNK = 16 << 20


def _mapped_content_key(data: Any) -> str:
    """:func:`content_key` of a profile's bytes, hashed a chunk at a time; where they are a
    memory map, each chunk's pages are let go once hashed (:func:`xspace.release_pages`), so
    that hashing beside the build does not keep the whole file resident beside its tables."""
    from tpuperf.xspace import release_pages

    name, digest = _content_digest()
    with memoryview(data) as view:
        for start in range(0, len(view), _HASH_CHUNK):
            digest.update(view[start : start + _HASH_CHUNK])
            release_pages(data, start, start + _HASH_CHUNK)
    return f"{name}:{digest.hexdigest()}"


def _hash_beside_build(
    url: str, host: str, data: Any, cache: Cache
) -> tuple[str, HostTables | None]:
    """The content key of a file the cache has never seen (:meth:`Cache.seen`: nor one of its
    size), and its tables, made side by side (hashlib lets go of the GIL). Such a file is
    seldom in the cache, so its tables are built while it is hashed rather than after. Once
    hashed, a file whose tables the cache holds after all stops its build before its next
    device, and None comes back for its tables: they are read from the cache. A small profile
    is hashed first, in this thread."""
    from tpuperf import _threads
    from tpuperf.build import Stopped

    parallel = len(data) >= _threads.PARALLEL_BYTES
    with _threads.pool(1, "tpuperf-hash", parallel=parallel, beside=True) as pool:
        hashing = pool.submit(_mapped_content_key, data)
        held: list[bool] = []  # once hashed: whether the cache holds the tables

        def held_already() -> bool:
            if not held and hashing.done():
                held.append(cache.holds_tables(Cache.tables_key(host, hashing.result())))
            return bool(held) and held[0]

        try:
            decoded: HostTables | None = decode_host(url, host, data, stop=held_already)
        except Stopped:
            decoded = None
        return hashing.result(), decoded


def host_tables(
    url: str, host: str, cache: Cache | None, content: str | None = None
) -> tuple[HostTables, str]:
    """One host file's tables and its content key, from the cache when it holds them.

    ``content`` is the file's content key when the caller already knows it (from the stat memo
    or an object listing); otherwise the bytes are read and hashed. Decoded tables are stored.
    """
    from tpuperf import sources

    if cache is not None:
        content = cache.content_of(url, content)
    if cache is not None and content is not None:
        hit = cache.get_tables(Cache.tables_key(host, content), url)
        if hit is not None:
            return hit, content
    data = sources.read_profile(url)
    decoded = None
    asked = content is not None  # the cache was asked for these tables above
    if content is None:
        local = "://" not in url
        if cache is not None and local and not cache.seen(url):
            content, decoded = _hash_beside_build(url, host, data, cache)
        else:
            content = content_key(data)
        if cache is not None and local:
            cache.remember_content(url, content)
    key = Cache.tables_key(host, content)
    if decoded is None and cache is not None and not asked:
        hit = cache.get_tables(key, url)
        if hit is not None:
            return hit, content
    if decoded is None:
        decoded = decode_host(url, host, data)
    del data
    if cache is not None and not cache.holds_tables(key):
        cache.put_tables(key, decoded)
    return decoded, content


def load(
    path: str | os.PathLike[str],
    host: str | None = None,
    run: str | None = None,
    cache: Cache | None = None,
) -> Profile:
    """:func:`tpuperf.load` through the cache: the same Profile, decoded once per content."""
    from tpuperf import sources

    text = os.fspath(path)
    cache = cache if cache is not None else Cache()
    resolved = sources.resolve(text, host=host, run=run)
    found = [host_tables(f.url, f.host, cache, cache.stated_key(f.url)) for f in resolved.files]
    cache.last_loaded = [
        (f.url, f.host, content) for f, (_, content) in zip(resolved.files, found, strict=True)
    ]
    cache.last_notices = list(resolved.notices)
    return assemble([part for part, _ in found], text, resolved.notices)


def known_files(
    path: str | os.PathLike[str],
    host: str | None = None,
    run: str | None = None,
    cache: Cache | None = None,
) -> tuple[list[tuple[str, str, str]], list[str]] | None:
    """What :func:`load` would read, found without reading it: the (url, host, content key)
    of each file and the notices of choosing them, as it records them (``last_loaded``,
    ``last_notices``); None where a file's content key is not known without reading the
    file (a local file changed since it was hashed, or never hashed; an object store that
    states none)."""
    from tpuperf import sources

    cache = cache if cache is not None else Cache()
    resolved = sources.resolve(os.fspath(path), host=host, run=run)
    files = []
    for f in resolved.files:
        content = cache.content_of(f.url, cache.stated_key(f.url))
        if content is None:
            return None
        files.append((f.url, f.host, content))
    return files, list(resolved.notices)


def _stated_key(url: str) -> str | None:
    """The content key an object store states for ``url`` (:func:`listing_key`), so that a
    cached remote profile is not downloaded again just to hash it; None for a local file, a
    store that states none, or when asking fails (the bytes are then read and hashed)."""
    if "://" not in url or url.startswith("file://"):
        return None
    from tpuperf import sources

    try:
        fs, name = sources.filesystem(url)
        return listing_key(fs.info(name))
    except Exception:  # asking is an optimisation: reading the bytes settles it
        return None
