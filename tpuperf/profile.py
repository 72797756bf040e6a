"""The :class:`Profile`: a profile's tables, and :func:`load`, the way to get one."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tpuperf import schema
from tpuperf.errors import BadInput


@dataclass
class HostInfo:
    """What a host's profile says about itself, beyond its tables."""

    host: str
    path: str
    hostnames: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # jax, jaxlib, ... when recorded
    capture_start_ns: int | None = None  # `Task Environment` profile_start_time
    capture_stop_ns: int | None = None
    size_bytes: int = 0


@dataclass
class Profile:
    """One profile (one host, or all hosts of a run) as validated DataFrames.

    The tables and their columns are documented in :mod:`tpuperf.schema`.
    """

    devices: pd.DataFrame
    ops: pd.DataFrame
    modules: pd.DataFrame
    async_ops: pd.DataFrame
    steps: pd.DataFrame
    lines: pd.DataFrame
    hosts: list[HostInfo] = field(default_factory=list)
    source: str = ""
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for table in schema.TABLES:
            schema.validate(table, getattr(self, table))

    @classmethod
    def from_tables(cls, **tables: Any) -> Profile:
        """Build a Profile from partial tables; absent tables are empty, columns are conformed.

        Meant for tests and plug-ins that synthesise a profile without a file.
        """
        kwargs: dict[str, Any] = {}
        for table in schema.TABLES:
            frame = tables.pop(table, None)
            kwargs[table] = schema.empty(table) if frame is None else schema.conform(table, frame)
        return cls(**kwargs, **tables)

    @property
    def host_names(self) -> list[str]:
        return [h.host for h in self.hosts]

    @property
    def platform(self) -> str:
        """TPU, GPU or CPU: the kind of the devices that ran ops (TPU wins a tie)."""
        kinds = self.devices.loc[self.devices["ops"] > 0, "kind"].astype(str)
        if kinds.empty:
            kinds = self.devices["kind"].astype(str)
        for kind in ("TPU", "GPU", "CPU"):
            if (kinds == kind).any():
                return kind
        return "unknown"

    def summary(self) -> dict[str, Any]:
        return {
            "hosts": len(self.hosts),
            "devices": len(self.devices),
            "ops": len(self.ops),
            "steps": len(self.steps),
        }


@dataclass
class HostPart:
    """One host file's tables (see tpuperf.schema), what it says about itself, and notes."""

    frames: dict[str, pd.DataFrame]
    info: HostInfo
    warnings: list[str]


def read_host(url: str, host: str, data: bytes) -> HostPart:
    """Decode one host file's bytes into its tables."""
    from tpuperf import tables, xspace

    built = tables.build_host(host, xspace.decode_or_bad_input(data, url))
    info = HostInfo(
        host=host,
        path=url,
        hostnames=built.hostnames,
        versions=built.versions,
        capture_start_ns=built.capture_start_ns,
        capture_stop_ns=built.capture_stop_ns,
        size_bytes=len(data),
    )
    return HostPart(built.frames, info, list(built.warnings))


def assemble(parts: list[HostPart], source: str, notices: list[str] | None = None) -> Profile:
    """The Profile of these hosts together; a profile without devices is bad input."""
    frames = {
        table: schema.concat(table, [part.frames[table] for part in parts])
        for table in schema.TABLES
    }
    if frames["devices"].empty:
        raise BadInput(
            f"{source}: no device planes and no XLA ops: this is a host-only profile; capture it "
            "while the job runs XLA programs (JAX on TPU, GPU or CPU)"
        )
    warnings = [*(notices or []), *(w for part in parts for w in part.warnings)]
    return Profile(**frames, hosts=[part.info for part in parts], source=source, warnings=warnings)


def load(
    path: str | os.PathLike[str],
    host: str | None = None,
    run: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Profile:
    """Read a profile file, run directory or logdir (local or fsspec URL) into a Profile.

    ``host`` keeps one host of a run; ``run`` picks a run of a logdir (default:
    the latest). ``progress`` is called with a line per host read. Raises
    :class:`~tpuperf.errors.BadInput` for anything that is not a readable
    profile with devices or XLA ops.
    """
    from tpuperf import sources

    text = os.fspath(path)
    resolved = sources.resolve(text, host=host, run=run)
    parts = []
    for index, host_file in enumerate(resolved.files, 1):
        if progress is not None:
            progress(f"reading {host_file.host} ({index}/{len(resolved.files)})")
        parts.append(read_host(host_file.url, host_file.host, sources.read_bytes(host_file.url)))
    return assemble(parts, text, resolved.notices)
