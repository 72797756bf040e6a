"""Writing files whole or not at all: the one atomic writer, for the output layer and for the
core modules that write files (the cache, captures, exports). Standard library only: nothing
here draws or prints."""

from __future__ import annotations

import contextlib
import errno
import io
import os
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from tpuperf.errors import CannotWrite

__all__ = ["local_path", "path_name", "path_parts", "reason", "write_atomic"]


def write_atomic(
    path: str | os.PathLike[str],
    data: bytes | str | Callable[[BinaryIO], None],
    fsync: bool = True,
) -> None:
    """Write ``data`` (bytes, text, or ``write(handle)``) to ``path`` so that readers see the
    old file or the new one, never half of one.

    A local path: a temporary file beside it (``.NAME.*.tmp``, which globs for ``*.json``
    or ``*.xplane.pb`` do not match), flushed to disk (``fsync``; a cache passes False),
    then renamed over ``path``; missing parent directories are made. The file is created
    with mode 0666 less the umask, as ``>`` in a shell makes it (``tempfile.mkstemp`` would
    make it 0600). An fsspec URL (``gs://...``): written locally the same way, then
    uploaded; an object appears only once its upload completes.

    A path that cannot be written (a directory, under a regular file, no permission, a full
    disk) raises :class:`~tpuperf.errors.CannotWrite` naming ``path`` and why, and leaves
    nothing behind; errors of ``write(handle)`` other than a failed write pass unchanged.
    """
    target = os.fspath(path)
    if "://" in target:
        local = local_path(target)
        if local is None:
            try:
                _upload(target, data)
            except CannotWrite:
                raise
            except OSError as exc:
                raise CannotWrite(f"cannot write {target}: {reason(exc)}") from exc
            return
        final = _clean(local)
    else:
        final = _clean(target)
    folder = os.path.dirname(final) or "."

    def cannot(exc: OSError) -> CannotWrite:
        return CannotWrite(f"cannot write {target}: {_why_not(final, exc)}")

    try:
        if os.path.isdir(final):
            raise IsADirectoryError(errno.EISDIR, "is a directory", final)
        if os.path.exists(final) and not os.path.isfile(final):
            # A device, a named pipe or a socket (`-o /dev/null`, `-o /dev/stdout` on a pipe):
            # what is written goes into it; renaming a file over it would replace the device.
            _write_into(final, data, cannot)
            return
        os.makedirs(folder, exist_ok=True)
        name = os.path.basename(final)
        temporary = os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        descriptor = os.open(temporary, flags, 0o666)  # the kernel applies the umask
    except OSError as exc:
        raise cannot(exc) from exc
    try:
        handle = os.fdopen(descriptor, "wb")
        with handle:
            _fill(handle, data, cannot)
            if fsync:
                _checked(cannot, os.fsync, handle.fileno())
        _checked(cannot, os.replace, temporary, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    if fsync:
        _fsync_directory(folder)


def _write_into(
    final: str,
    data: bytes | str | Callable[[BinaryIO], None],
    cannot: Callable[[OSError], CannotWrite],
) -> None:
    """Write ``data`` into ``final``, a file that is not a regular one, as it is."""
    try:
        handle = open(final, "wb")  # noqa: SIM115 (closed below, its errors named)
    except OSError as exc:
        raise cannot(exc) from exc
    with handle:
        _fill(handle, data, cannot)


def _fill(
    handle: BinaryIO,
    data: bytes | str | Callable[[BinaryIO], None],
    cannot: Callable[[OSError], CannotWrite],
) -> None:
    """Write ``data`` (bytes, text, or ``write(handle)``) to the open ``handle`` and flush it,
    a failed write raised as ``cannot(error)``."""
    if callable(data):
        # Only the writes are the file's: whatever else the renderer raises (an input it
        # reads meanwhile) passes as it is.
        data(_Guarded(handle, cannot))  # type: ignore[arg-type]
    else:
        _checked(cannot, handle.write, data.encode("utf-8") if isinstance(data, str) else data)
    _checked(cannot, handle.flush)  # a failed write shows here, not as the file closes


def _checked(cannot: Callable[[OSError], CannotWrite], call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)``, an OSError of it raised as ``cannot(error)``."""
    try:
        return call(*args)
    except OSError as exc:
        raise cannot(exc) from exc


class _Guarded(io.BufferedIOBase):
    """The temporary file as ``write(handle)`` sees it: a write that fails (a full disk)
    raises :class:`~tpuperf.errors.CannotWrite`."""

    def __init__(self, handle: BinaryIO, cannot: Callable[[OSError], CannotWrite]) -> None:
        super().__init__()
        self._handle = handle
        self._cannot = cannot

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return int(_checked(self._cannot, self._handle.write, data))

    def flush(self) -> None:
        if not self._handle.closed:  # this view closed after the file itself
            _checked(self._cannot, self._handle.flush)

    def fileno(self) -> int:
        return self._handle.fileno()

    def tell(self) -> int:
        return self._handle.tell()


def path_parts(path: str) -> list[str]:
    """The names in ``path`` (a local path or a URL), as pathlib's ``PurePosixPath`` splits it
    (its root left out). Paths are strings in every module a command imports: pathlib's
    import takes urllib.parse and ipaddress with it (15 M instructions, 3-6 ms)."""
    return [part for part in path.split("/") if part and part != "."]


def path_name(path: str) -> str:
    """The last name in ``path`` (a local path or a URL), as pathlib's ``name`` gives it."""
    parts = path_parts(path)
    return parts[-1] if parts else ""


def _clean(path: str) -> str:
    """``path`` as pathlib writes it: no empty or ``.`` parts, no trailing slash."""
    return ("/" if path.startswith("/") else "") + "/".join(path_parts(path)) or "."


def _parents(path: str) -> Iterator[str]:
    """The folders above ``path``, nearest first, as pathlib's ``parents`` gives them."""
    while (parent := os.path.dirname(path) or ".") != path:
        yield parent
        path = parent


def _why_not(final: str, exc: OSError) -> str:
    """Why ``final`` could not be written, in words: the part of the path in the way when a
    file stands where a directory should be, else the system's reason."""
    if isinstance(exc, IsADirectoryError) and os.path.isdir(final):
        return "it is a directory"
    folder = os.path.dirname(final) or "."
    if isinstance(exc, FileNotFoundError) and os.path.isdir(folder):  # /proc, /sys
        return f"files cannot be created in {folder}"
    if isinstance(exc, (FileExistsError, NotADirectoryError)):
        for parent in _parents(final):
            if os.path.exists(parent):
                if not os.path.isdir(parent):
                    return f"{parent} is a file, not a directory"
                break
    return reason(exc)


def reason(exc: OSError) -> str:
    """The system's reason (``permission denied``), and the directory it concerns when that
    is not plain from the path the user gave (the temporary file's directory)."""
    text = (exc.strerror or str(exc) or type(exc).__name__).rstrip(".")
    text = text[:1].lower() + text[1:]
    where = exc.filename
    if isinstance(where, str) and where:
        name = os.path.basename(where)
        if name.startswith(".") and name.endswith(".tmp"):  # our temporary: name its directory
            where = os.path.dirname(where) or "."
        text += f" ({where})"
    return text


def _fsync_directory(directory: str) -> None:
    """Make the rename itself durable (where the platform lets a directory be opened)."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)


def local_path(url: str) -> str | None:
    """The local path of a ``file://`` URL (written atomically like any path), else None."""
    if url.startswith("file://"):
        return url[len("file://") :]
    return None


def _upload(url: str, data: bytes | str | Callable[[BinaryIO], None]) -> None:
    import tempfile

    import fsspec

    with tempfile.TemporaryDirectory(prefix="tpuperf-out-") as temp:
        local = os.path.join(temp, "data")
        write_atomic(local, data, fsync=False)
        fs, path = fsspec.core.url_to_fs(url)
        fs.put_file(local, path)
