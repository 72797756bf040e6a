"""The :class:`Profile`: a profile's tables, and :func:`load`, the way to get one."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Any

import numpy as np

from tpuperf import schema
from tpuperf._dataclasses import dataclass
from tpuperf.columns import Strings, Table, concat_strings, from_pandas, stack, to_pandas
from tpuperf.errors import BadInput, BadProfile

if TYPE_CHECKING:
    from tpuperf.tables import DeviceTables
    from tpuperf.xspace import Space


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


class _Frame:
    """A Profile attribute that is the pandas DataFrame of the table of its name (built on
    first access and kept)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.table = name

    def __get__(self, profile: Profile | None, owner: type | None = None) -> Any:
        return self if profile is None else profile._frame(self.table)


class Profile:
    """One profile (one host, or all hosts of a run).

    The engine keeps each device's tables as columns (:attr:`device_tables`; see
    :mod:`tpuperf.columns`); ``devices``, ``ops``, ``modules``, ``async_ops``, ``steps``
    and ``lines`` are the pandas DataFrames documented in :mod:`tpuperf.schema`, built on
    first access (so the commands never import pandas).
    """

    def __init__(
        self,
        device_tables: list[DeviceTables],
        lines: Table,
        hosts: list[HostInfo] | None = None,
        source: str = "",
        warnings: list[str] | None = None,
        hlo_protos: dict[str, dict[str, bytes]] | None = None,
        host_events: dict[str, Table] | None = None,
    ) -> None:
        self.device_tables = device_tables
        self.line_table = lines  # host, plane, line, events, first_ps, last_ps
        self.hosts = hosts or []
        self.source = source
        self.warnings = warnings or []
        # host -> module (`name(program_id)`) -> serialized xla.HloProto, for tpuperf.scopes
        self.hlo_protos = hlo_protos or {}
        # host -> its host-plane events (tpuperf.hostview.events_of), for tpuperf.hostview
        self.host_events = host_events or {}
        self._frames: dict[str, Any] = {}

    # ------------------------------------------------------------------ pandas views

    def _frame(self, table: str) -> Any:
        if table not in self._frames:
            self._frames[table] = _to_frame(self, table)
        return self._frames[table]

    devices = _Frame()
    ops = _Frame()
    modules = _Frame()
    async_ops = _Frame()
    steps = _Frame()
    waits = _Frame()
    lines = _Frame()

    @property
    def scopes(self) -> Any:
        """Where each op (program, op) sits in the model's code: the scope table of
        :data:`tpuperf.schema.SCOPES` (see :mod:`tpuperf.scopes`), built on first access."""
        if "scopes" not in self._frames:
            from tpuperf import scopes

            self._frames["scopes"] = scopes.frame(self)
        return self._frames["scopes"]

    # ------------------------------------------------------------------ facts

    @classmethod
    def from_tables(cls, **tables: Any) -> Profile:
        """Build a Profile from pandas DataFrames (absent tables are empty); keyword arguments
        that are no table (``hosts``, ``source``, ``warnings``) are passed on.

        Meant for tests and plug-ins that synthesise a profile without a file. The ops,
        modules, async_ops and steps rows are split by (host, device); a device without a
        devices row gets one (kind TPU, no chip).
        """
        return _from_frames(cls, tables)

    @property
    def host_names(self) -> list[str]:
        return [h.host for h in self.hosts]

    @property
    def platform(self) -> str:
        """TPU, GPU or CPU: the kind of the devices that ran ops (TPU wins a tie)."""
        kinds = [d.row["kind"] for d in self.device_tables if d.row["ops"] > 0]
        if not kinds:
            kinds = [d.row["kind"] for d in self.device_tables]
        for kind in ("TPU", "GPU", "CPU"):
            if kind in kinds:
                return kind
        return "unknown"

    def read_space(self, host: str) -> Space | None:
        """One host's file, read again through the source resolver and decoded as :func:`load`
        decodes it (its lines decoded on use): the events the tables do not hold (the Perfetto
        export writes those lines as recorded). None when the profile was not read from a file."""
        from tpuperf import sources, xspace

        url = next((info.path for info in self.hosts if info.host == host), None)
        if not url:
            return None
        try:
            return xspace.decode(sources.read_profile(url))
        except xspace.DecodeError as exc:
            raise BadProfile(f"{url}: not a readable XSpace profile: {exc}") from None

    def summary(self) -> dict[str, Any]:
        return {
            "hosts": len(self.hosts),
            "devices": len(self.device_tables),
            "ops": sum(d.ops.n for d in self.device_tables),
            "steps": sum(d.steps.n for d in self.device_tables if d.steps is not None),
        }


# --------------------------------------------------------------------------- pandas


def _to_frame(profile: Profile, table: str) -> Any:
    """One of the documented DataFrames, stacked over devices, validated."""
    import pandas as pd
    from pandas.api.types import union_categoricals

    dtypes = schema.TABLES[table]
    if table == "devices":
        rows = [d.row for d in profile.device_tables]
        frame = pd.DataFrame(rows) if rows else schema.empty(table)
        return schema.conform(table, frame)
    if table == "lines":
        frame = profile.line_table.to_pandas(dtypes)
        return schema.conform(table, frame) if len(frame.columns) else schema.empty(table)
    parts = []
    for device in profile.device_tables:
        data = getattr(device, table)
        if data is None or not data.n:
            continue
        part = data.with_columns(
            host=Strings.constant(device.host, data.n),
            device=np.full(data.n, device.device, dtype=np.int64),
        )
        parts.append(part)
    if not parts:
        return schema.empty(table)
    columns: dict[str, Any] = {}
    for name, dtype in dtypes.items():
        pieces = [part[name] for part in parts]
        if dtype == schema.CATEGORY:
            cats = [to_pandas(piece) for piece in pieces]
            columns[name] = union_categoricals(cats) if len(cats) > 1 else cats[0]
        elif dtype == "string":
            values = concat_strings([p for p in pieces if isinstance(p, Strings)])
            columns[name] = pd.array(values.tolist(), dtype="string")
        else:
            arrays = [to_pandas(piece) for piece in pieces]
            columns[name] = np.concatenate(arrays).astype(dtype, copy=False)
    frame = pd.DataFrame(columns, copy=False)
    schema.validate(table, frame)
    return frame


def _from_frames(cls: type[Profile], tables: dict[str, Any]) -> Profile:
    from tpuperf.tables import DeviceTables

    frames = {}
    for table in schema.TABLES:
        frame = tables.pop(table, None)
        frames[table] = schema.empty(table) if frame is None else schema.conform(table, frame)
    keys: dict[tuple[str, int], dict[str, Any]] = {}
    for table in ("ops", "modules", "async_ops", "steps", "waits"):
        frame = frames[table]
        if frame.empty:
            continue
        for (host, device), group in frame.groupby(["host", "device"], observed=True, sort=False):
            keys.setdefault((str(host), int(device)), {})[table] = group
    rows = {
        (str(r["host"]), int(r["device"])): dict(r) for r in frames["devices"].to_dict("records")
    }
    devices = []
    for key in list(rows) + [k for k in keys if k not in rows]:
        groups = keys.get(key, {})
        row = rows.get(key) or {
            "host": key[0],
            "device": key[1],
            "plane": f"/device:TPU:{key[1]}",
            "kind": "TPU",
            "core": "TensorCore",
            "chip": "",
            "peak_tflops": float("nan"),
            "peak_hbm_gbps": float("nan"),
            "memory_bytes": float("nan"),
        }
        row = {**row, "host": str(row["host"]), "device": int(row["device"])}
        tables_: dict[str, Table] = {}
        for table in ("ops", "modules", "async_ops", "steps", "waits"):
            group = groups.get(table)
            if group is None:
                group = frames[table].iloc[0:0]
            tables_[table] = Table(
                {
                    name: from_pandas(group[name].reset_index(drop=True))
                    for name in schema.TABLES[table]
                    if name not in ("host", "device")
                },
                n=len(group),
            )
        row["ops"] = tables_["ops"].n
        steps = tables_["steps"] if tables_["steps"].n else None
        devices.append(
            DeviceTables(
                key[0],
                key[1],
                row,
                tables_["ops"],
                tables_["modules"],
                tables_["async_ops"],
                steps,
                waits=tables_["waits"] if tables_["waits"].n else None,
            )
        )
    lines = frames["lines"]
    line_table = Table(
        {name: from_pandas(lines[name].reset_index(drop=True)) for name in schema.TABLES["lines"]},
        n=len(lines),
    )
    return cls(devices, line_table, **tables)


# --------------------------------------------------------------------------- reading


@dataclass(eq=False)  # holds arrays: equal only to itself (see tpuperf.columns)
class HostPart:
    """One host file's tables (per device), what it says about itself, and notes."""

    devices: list[DeviceTables]
    lines: Table
    info: HostInfo
    warnings: list[str]
    hlo_protos: dict[str, bytes] = field(default_factory=dict)  # module -> xla.HloProto
    host_events: Table | None = None  # host-plane events (tpuperf.hostview.events_of)


def read_host(url: str, host: str, data: Any, stop: Callable[[], bool] | None = None) -> HostPart:
    """Decode one host file's bytes (or a memory map of them) into its tables. ``stop``: see
    :func:`build.build_host` (the cache gives up a build once it finds it holds the
    tables)."""
    from tpuperf import build, hostview, sources, xspace
    from tpuperf._threads import PARALLEL_BYTES

    try:
        # Lines are decoded lazily, while the tables are built: a broken one surfaces there.
        space = xspace.decode(data)
        # Indexing read every page of the file; the tables read it again line by line, so
        # only the lines being decoded are resident beside the growing tables.
        sources.release(data)
        threads = None if len(data) >= PARALLEL_BYTES else 1
        built = build.build_host(host, space, threads, stop)
        host_events = hostview.events_of(space)
        del space
        sources.release(data)
    except xspace.DecodeError as exc:
        raise BadProfile(f"{url}: not a readable XSpace profile: {exc}") from None
    except (ValueError, IndexError, OverflowError, TypeError, KeyError, UnicodeError) as exc:
        # A well-formed file whose values make no sense (a stat of the wrong type, an id or a
        # range out of bounds): bad input, named as such, not an internal error.
        raise BadProfile(
            f"{url}: an XSpace profile with values tpuperf cannot interpret "
            f"({type(exc).__name__}: {exc})"
        ) from None
    info = HostInfo(
        host=host,
        path=url,
        hostnames=built.hostnames,
        versions=built.versions,
        capture_start_ns=built.capture_start_ns,
        capture_stop_ns=built.capture_stop_ns,
        size_bytes=len(data),
    )
    lines = built.lines.with_columns(host=Strings.constant(host, built.lines.n))
    lines = lines.select(schema.TABLES["lines"])
    return HostPart(built.devices, lines, info, list(built.warnings), built.hlo_protos, host_events)


def assemble(parts: list[HostPart], source: str, notices: list[str] | None = None) -> Profile:
    """The Profile of these hosts together; a profile without devices is bad input."""
    devices = [d for part in parts for d in part.devices]
    if not devices:
        raise BadInput(
            f"{source}: no device planes and no XLA ops: this is a host-only profile; capture it "
            "while the job runs XLA programs (JAX on TPU, GPU or CPU)"
        )
    lines = _stack_lines([part.lines for part in parts])
    warnings = [*(notices or []), *(w for part in parts for w in part.warnings)]
    return Profile(
        devices,
        lines,
        hosts=[part.info for part in parts],
        source=source,
        warnings=warnings,
        hlo_protos={part.info.host: part.hlo_protos for part in parts if part.hlo_protos},
        host_events={p.info.host: p.host_events for p in parts if p.host_events is not None},
    )


def _stack_lines(parts: list[Table]) -> Table:
    if len(parts) == 1:
        return parts[0]
    return stack([part.select(schema.TABLES["lines"]) for part in parts])


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
        parts.append(read_host(host_file.url, host_file.host, sources.read_profile(host_file.url)))
    return assemble(parts, text, resolved.notices)
