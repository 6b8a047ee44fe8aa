"""One C heap for every thread of an engine process.

glibc gives each thread that allocates while another holds the heap an arena of its own, up to eight per core,
and an arena keeps what it once held: after a burst, an engine process carried 2-5 MB more in its worker's and
projector's arenas. Their threads mostly run Python, one at a time under the GIL, so they seldom meet in the
allocator and gain little from arenas of their own. With one arena, the engine with one http child peaked 2.5-4
MiB lower under 32 connections of sync starts, at the same starts a second (two alternating rounds).
"""

from __future__ import annotations

import ctypes
import os

M_ARENA_MAX = -8
"""glibc's `mallopt` parameter for the most arenas a process may have."""


def one_malloc_arena() -> bool:
    """Limit this process to one malloc arena where the C library is glibc (elsewhere nothing is done); whether it
    was. Call before the process starts its threads: arenas made before stay."""
    if not _glibc():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols, the C library's among them
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, 1))


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (AttributeError, ValueError, OSError):  # not a POSIX system, or not glibc
        return False
