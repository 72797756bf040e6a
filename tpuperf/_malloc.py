"""Keep freed memory in the process for the length of one command (glibc only).

An analysis makes many short-lived arrays of the size of an event column (16 MB for 2M
events). By default glibc gives each such array fresh pages from the kernel and hands them back
when it is freed, so the next array faults its pages in again: on an 85 MB profile, 145,000
page faults and 0.4 s of system time, a fifth of the run. Raising the thresholds lets freed
blocks be reused instead: half the faults, for 7% more peak memory. Threads share the one
heap: each thread's own arena is at most 64 MB, so a column larger than that, made in a device
or analyzer thread, got fresh pages every time (a 2 GB profile: 960,000 page faults and 16-21 s
of system time; 610,000-650,000 and 15 s in one arena, 6% less peak memory). The CLI calls this;
a library does not change its host process's allocator.
"""

from __future__ import annotations

import ctypes
import sys

# mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8


def keep_freed_memory() -> bool:
    """Tune glibc's malloc as the module docstring says; False where there is no glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The C library the interpreter runs on (ctypes.util.find_library would import
        # tempfile and shutil and run ldconfig: 25 ms of every command).
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # musl and others: nothing to tune
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    ok = mallopt(_M_MMAP_THRESHOLD, 1 << 30)  # blocks up to 1 GiB from the heap
    ok &= mallopt(_M_TRIM_THRESHOLD, (1 << 31) - 1)  # and never trimmed back to the kernel
    ok &= mallopt(_M_TOP_PAD, 256 << 20)  # grown 256 MiB at a time
    ok &= mallopt(_M_ARENA_MAX, 1)  # one heap for every thread
    return bool(ok)
