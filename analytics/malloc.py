"""glibc's allocator set for the analytics' arrays: big, short-lived, allocated and freed many times a refresh.

By default glibc serves a block over its mmap threshold with a fresh mapping and, once more than its trim
threshold lies free at the top of the heap, gives that memory back to the kernel; glibc moves both thresholds
with the blocks it sees. Scoring a window of thousands of ranks allocates temporaries of tens of MB one after
another, so the same memory is given back and taken again, each page faulted and zeroed anew by the kernel.
Fixing the mmap threshold at glibc's 64-bit ceiling and the trim threshold far above it keeps freed memory in
the process for the next temporary: the process stays at the size its peak needed (which it needs again next
refresh) instead of shrinking between refreshes.

Set through ``mallopt`` when ``lockstep analytics`` starts. An operator's own allocator settings win: with
``GLIBC_TUNABLES`` or any ``MALLOC_*_`` variable in the environment nothing is changed; on a C library without
``mallopt`` (not glibc) neither.
"""
from __future__ import annotations

import ctypes
import os
from typing import Mapping

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3      # glibc's malloc.h
MMAP_THRESHOLD = 32 << 20                        # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: the most mallopt takes
TRIM_THRESHOLD = (1 << 31) - 1                   # mallopt takes an int
OPERATOR_SETTINGS = ("GLIBC_TUNABLES", "MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "MALLOC_MMAP_MAX_",
                     "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_")


def tune(environ: Mapping[str, str] = os.environ) -> bool:
    """Set both thresholds; whether they were set (False: the operator's settings, or not glibc)."""
    if any(name in environ for name in OPERATOR_SETTINGS):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
