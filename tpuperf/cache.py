"""A cache of decoded profile tables (Parquet) and of scan results (JSON), keyed by content.

``tpuperf scan`` reads the same profiles again and again; decoding and analysis are what cost,
so both are cached under a directory (default ``$TPUPERF_CACHE_DIR``, else
``$XDG_CACHE_HOME/tpuperf``, else ``~/.cache/tpuperf``)::

    v1/tables/ab/<key>/   one Parquet file per table of one host's profile, and host.json
                          (its HostInfo, warnings, row counts and file sizes)
    v1/rows/ab/<key>.json a scan row (the analysis of one profile under given options)
    v1/stat/ab/<key>.json a local file's (size, mtime, ctime, inode) -> content key, so an
                          unchanged file is not read again just to hash it

Keys hash the content, never the path: a file's *content key* is the sha256 of its
(decompressed) bytes, or, for an object store listing that states one, the object's MD5 or
ETag with its size. Entry keys add the tpuperf version (and, for development versions, a digest
of tpuperf's own source) so a new tpuperf never reads an old one's results. Nothing is pickled:
tables are Parquet and everything else JSON. Every write is atomic (a temporary name, then a
rename), and an entry that does not read back exactly is removed and reported as a miss, so the
caller rebuilds it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tpuperf import jsonout, schema
from tpuperf.columns import Table, from_arrow, to_arrow
from tpuperf.files import write_atomic
from tpuperf.profiles import HostInfo, HostPart, Profile, assemble, read_host

# Bump when the layout of entries changes; old entries are then simply never looked at.
FORMAT = "v1"

# A local file modified this recently may change again within the file system's timestamp
# resolution without its mtime moving, so its stat is not trusted as a stand-in for its content
# (git's "racily clean" rule).
_RACY_NS = 2_000_000_000


# One host file's decoded tables, HostInfo and decoder warnings: what the cache stores.
HostTables = HostPart


def default_dir() -> Path:
    explicit = os.environ.get("TPUPERF_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tpuperf"


def content_key(data: bytes) -> str:
    """The content key of a profile's bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


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
    result computed by older code must not be served as today's.
    """
    from tpuperf import __version__

    if not any(tag in __version__ for tag in ("dev", "+")):
        return __version__
    import tpuperf.analyzers
    import tpuperf.roofline

    digest = hashlib.sha256()
    for package in (tpuperf, tpuperf.analyzers, tpuperf.roofline):
        for root in package.__path__:
            for path in sorted(Path(root).rglob("*.py")):
                digest.update(path.name.encode())
                digest.update(path.read_bytes())
    return f"{__version__}+src.{digest.hexdigest()[:16]}"


def _hash(*parts: Any) -> str:
    text = json.dumps([FORMAT, code_version(), *parts], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class Cache:
    """The cache under ``root``; see the module docstring for its layout."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else default_dir()
        self._base = self.root / FORMAT

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

    def known_content(self, path: str) -> str | None:
        """The content key recorded for local file ``path`` if it is unchanged since, else None."""
        entry = self._entry("stat", _hash("stat", os.path.abspath(path)), ".json")
        try:
            memo = json.loads(entry.read_text())
        except (OSError, ValueError):
            return None
        state = settled_state(path)
        if state is None or not isinstance(memo, dict) or memo.get("stat") != state:
            return None
        key = memo.get("content")
        return key if isinstance(key, str) else None

    def remember_content(self, path: str, key: str) -> None:
        """Record that local file ``path``, as it is now, has content key ``key``."""
        state = settled_state(path)
        if state is not None:
            entry = self._entry("stat", _hash("stat", os.path.abspath(path)), ".json")
            self._write_json(entry, {"stat": state, "content": key})

    # ------------------------------------------------------------------ rows

    def get_row(self, key: str) -> dict[str, Any] | None:
        entry = self._entry("rows", key, ".json")
        try:
            document = json.loads(entry.read_text())
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

    # ------------------------------------------------------------------ tables

    def get_tables(self, key: str, url: str) -> HostTables | None:
        """The cached tables under ``key``, with ``url`` as the HostInfo path; None on a miss.

        An entry that does not read back exactly (a missing or damaged file, a row count
        that does not match) is removed and treated as a miss.
        """
        from tpuperf.tables import DeviceTables

        entry = self._entry("tables", key, "")
        if not entry.exists():
            return None
        try:
            meta = json.loads((entry / "host.json").read_text())
            if meta.get("key") != key:
                raise ValueError("key mismatch")
            read = {}
            for name in (*_DEVICE_TABLES, "lines"):
                part = entry / f"{name}.parquet"
                expected = meta["tables"][name]
                if part.stat().st_size != expected["bytes"]:
                    raise ValueError(f"{part.name}: size changed")
                table = _read_parquet(part)
                if table.n != expected["rows"]:
                    raise ValueError(f"{part.name}: row count changed")
                read[name] = table
            devices = []
            for index, row in enumerate(meta["devices"]):
                # JSON wrote unknown peaks (NaN) as null: they read back as NaN.
                row = {
                    k: float("nan")
                    if v is None and schema.TABLES["devices"].get(k) == "float64"
                    else v
                    for k, v in row.items()
                }
                tables = {
                    name: _device_rows(read[name], index, schema.TABLES[name])
                    for name in _DEVICE_TABLES
                }
                steps = tables["steps"] if meta["has_steps"][index] else None
                devices.append(
                    DeviceTables(
                        row["host"],
                        int(row["device"]),
                        row,
                        tables["ops"],
                        tables["modules"],
                        tables["async_ops"],
                        steps,
                        waits=tables["waits"] if tables["waits"].n else None,
                    )
                )
            host_events = None
            if "host_events" in meta["tables"]:
                part = entry / "host_events.parquet"
                host_events = _read_parquet(part)
                if host_events.n != meta["tables"]["host_events"]["rows"]:
                    raise ValueError(f"{part.name}: row count changed")
            info = HostInfo(**{**meta["info"], "path": url})
            warnings = [str(w) for w in meta["warnings"]]
            protos = _read_protos(entry / "hlo_protos.parquet", meta["hlo_protos"])
        except Exception:  # any damage at all: the entry is rebuilt, never trusted
            _remove(entry)
            return None
        return HostTables(
            devices, read["lines"], info, warnings, hlo_protos=protos, host_events=host_events
        )

    def put_tables(self, key: str, tables: HostTables) -> None:
        entry = self._entry("tables", key, "")
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            temp = Path(tempfile.mkdtemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=entry.parent))
        except OSError:
            return  # a cache that cannot be written is only slower, never wrong
        try:
            counts = {}
            for name in _DEVICE_TABLES:
                part = temp / f"{name}.parquet"
                stacked = _stack_devices(tables.devices, name)
                _write_parquet(stacked, part)
                counts[name] = {"rows": stacked.n, "bytes": part.stat().st_size}
            _write_protos(tables.hlo_protos, temp / "hlo_protos.parquet")
            part = temp / "lines.parquet"
            _write_parquet(tables.lines, part)
            counts["lines"] = {"rows": tables.lines.n, "bytes": part.stat().st_size}
            if tables.host_events is not None:
                part = temp / "host_events.parquet"
                _write_parquet(tables.host_events, part)
                counts["host_events"] = {"rows": tables.host_events.n, "bytes": 0}
            meta = {
                "key": key,
                "info": dataclasses.asdict(tables.info),
                "warnings": list(tables.warnings),
                "devices": [d.row for d in tables.devices],
                "has_steps": [d.steps is not None for d in tables.devices],
                "hlo_protos": len(tables.hlo_protos),
                "tables": counts,
            }
            write_atomic(temp / "host.json", json.dumps(jsonout.clean(meta)), fsync=False)
            os.rename(temp, entry)  # atomic: readers see the whole entry or none
        except OSError:
            pass  # another process stored the same entry first, or the disk is full
        finally:
            if temp.exists():
                shutil.rmtree(temp, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def _entry(self, kind: str, key: str, suffix: str) -> Path:
        return self._base / kind / key[:2] / f"{key}{suffix}"

    @staticmethod
    def _write_json(path: Path, document: dict[str, Any]) -> None:
        # A cache that cannot be written is only slower; one cut short by a crash is rebuilt,
        # so its files skip the fsync.
        with contextlib.suppress(OSError):
            text = json.dumps(jsonout.clean(document), allow_nan=False)
            write_atomic(path, text, fsync=False)


def settled_state(path: str) -> list[int] | None:
    """A local file's size, mtime, ctime, inode and device; None when it is missing, or was
    modified so recently that it may change again without its mtime moving."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if time.time_ns() - st.st_mtime_ns < _RACY_NS:
        return None
    # ctime moves on chmod too, so a file made readable is tried again.
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


_DEVICE_TABLES = ("ops", "modules", "async_ops", "steps", "waits")


def _stack_devices(devices: list[Any], name: str) -> Table:
    """One table of every device's ``name`` rows, with ``_device``: the device's position."""
    from tpuperf.columns import Strings, concat_strings

    parts = []
    for index, device in enumerate(devices):
        table = getattr(device, name)
        if table is None:
            continue
        parts.append(table.with_columns(_device=np.full(table.n, index, dtype=np.int64)))
    columns: dict[str, Any] = {}
    for column in (*(c for c in schema.TABLES[name] if c not in ("host", "device")), "_device"):
        pieces = [part[column] for part in parts]
        if not pieces:
            columns[column] = np.zeros(0, dtype=np.int64)
        elif isinstance(pieces[0], Strings):
            columns[column] = concat_strings(pieces)  # type: ignore[arg-type]
        else:
            columns[column] = np.concatenate([part.array(column) for part in parts])
    return Table(columns)


def _device_rows(stacked: Table, index: int, columns: dict[str, str]) -> Table:
    from tpuperf.columns import Strings

    if "_device" not in stacked:
        rows = np.zeros(0, dtype=np.int64)
    else:
        rows = np.flatnonzero(stacked.array("_device") == index)
    out = {}
    for name in columns:
        if name in ("host", "device"):
            continue
        column = stacked.get(name)
        if column is None:
            out[name] = (
                Strings(np.zeros(len(rows), np.int32), ())
                if columns[name] == "category"
                else np.zeros(len(rows))
            )
        elif isinstance(column, Strings):
            out[name] = column.take(rows)
        else:
            out[name] = stacked.array(name)[rows]
    return Table(out, n=len(rows))


def _write_parquet(table: Table, path: Path) -> None:
    import pyarrow.parquet as pq

    # Entries are read whole, so column statistics buy nothing; skipping them and LZ4 instead of
    # Snappy halve the write time of a large profile's tables at the same size (measured).
    pq.write_table(
        to_arrow(table), path, write_page_checksum=True, write_statistics=False, compression="lz4"
    )


def _write_protos(protos: dict[str, bytes], path: Path) -> None:
    """The host's HLO protos (scopes, collectives' bytes and groups) as name, data rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = list(protos)
    table = pa.table(
        {"name": pa.array(names, pa.string()), "data": pa.array([protos[n] for n in names])},
        schema=pa.schema([("name", pa.string()), ("data", pa.binary())]),
    )
    pq.write_table(table, path)


def _read_protos(path: Path, expected: int) -> dict[str, bytes]:
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    if len(rows) != expected:
        raise ValueError(f"{path.name}: row count changed")
    return {str(row["name"]): bytes(row["data"]) for row in rows}


def _read_parquet(path: Path) -> Table:
    import pyarrow.parquet as pq

    return from_arrow(pq.read_table(path, page_checksum_verification=True))


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


# ---------------------------------------------------------------------- loading through the cache


def decode_host(url: str, host: str, data: Any) -> HostTables:
    """Decode one host file's bytes into its tables, as :func:`tpuperf.load` does."""
    return read_host(url, host, data)


def host_tables(
    url: str, host: str, cache: Cache | None, content: str | None = None
) -> tuple[HostTables, str]:
    """One host file's tables and its content key, from the cache when it holds them.

    ``content`` is the file's content key when the caller already knows it (from the stat memo
    or an object listing); otherwise the bytes are read and hashed. Decoded tables are stored.
    """
    from tpuperf import sources

    if cache is not None and content is None and "://" not in url:
        content = cache.known_content(url)
    if cache is not None and content is not None:
        hit = cache.get_tables(Cache.tables_key(host, content), url)
        if hit is not None:
            return hit, content
    data = sources.read_profile(url)
    if content is None:
        content = content_key(data)
        if cache is not None:
            if "://" not in url:
                cache.remember_content(url, content)
            hit = cache.get_tables(Cache.tables_key(host, content), url)
            if hit is not None:
                return hit, content
    decoded = decode_host(url, host, data)
    del data
    if cache is not None:
        cache.put_tables(Cache.tables_key(host, content), decoded)
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
    parts = [host_tables(f.url, f.host, cache)[0] for f in resolved.files]
    return assemble(parts, text, resolved.notices)
