"""The one exception hierarchy of tpuperf.

Every error a user can cause carries the exit code the CLI returns for it and a
message that names the input and says what to do. Only ``tpuperf.cli.main``
turns these into text and an exit status.
"""

from __future__ import annotations


class TpuperfError(Exception):
    """Base of all tpuperf errors; ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class UsageError(TpuperfError):
    """The command line asked for something that cannot be done."""

    exit_code = 2


class GateFailed(TpuperfError):
    """A ``--fail-on`` gate or a regression check tripped."""

    exit_code = 3


class BadInput(TpuperfError):
    """A profile is missing, unreadable, or not an XSpace."""

    exit_code = 4


class BadProfile(BadInput):
    """A file that is not a valid XSpace of the shapes tpuperf reads (truncated, corrupt, or
    holding values it cannot interpret); the message names the file, where and why."""


class CaptureFailed(TpuperfError):
    """A capture from a running job did not produce a profile."""

    exit_code = 5


class CannotWrite(TpuperfError, OSError):
    """An output (``-o FILE``) could not be written: a directory, a file where a directory
    should be, no permission, a full disk. Nothing is left behind (no half-written file, no
    temporary). An ``OSError`` too, so code that tolerates a failed write (the cache) still
    catches it."""

    exit_code = 6
