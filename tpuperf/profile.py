"""The :class:`Profile`: a profile's tables, and :func:`load`, the way to get one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tpuperf import schema


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
