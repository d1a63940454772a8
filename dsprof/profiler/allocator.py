"""Steady host-memory allocation while PyTorch runs on the CPU.

PyTorch eager allocates every activation with the C library's ``malloc`` and frees it after use.
glibc serves large requests with fresh ``mmap`` pages and adjusts its thresholds from what was freed
before, so whether each forward pass pays thousands of page faults (MobileNetV2 at 224 px: ~2,300,
about 3 ms of a 20 ms pass) depends on the process's allocation history: one run of the same model
measured 10-20 % slower than another, and a block timed alone did not pay what it pays inside the
model (benchmarks/RESULTS.md, issue #14). Two ``mallopt`` calls (no ``mmap``, trim only above
1 GiB) keep freed memory in the heap: no page faults after the first pass, whatever ran before. It is what a tuned CPU
deployment does with jemalloc or tcmalloc, and it is recorded in every record's environment.
``DSPROF_ALLOCATOR=system`` in the environment leaves glibc as it is (to time what an untuned
deployment pays, or to compare: `benchmarks/lut_accuracy.py --system-allocator`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["TRIM_THRESHOLD", "steady_allocator"]

#: Free memory at the top of the heap is returned to the system only above this many bytes.
TRIM_THRESHOLD = 1024 * 1024 * 1024
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's <malloc.h>

_state: str | None = None


def steady_allocator() -> str:
    """Make glibc malloc serve every request from the heap and keep what is freed there (once per
    process); returns what was done, e.g. ``"glibc malloc: no mmap, trim threshold 1024 MiB"``, or why nothing was
    (another C library, another OS)."""
    global _state
    if _state is not None:
        return _state
    if os.environ.get("DSPROF_ALLOCATOR", "").lower() == "system":
        _state = "system allocator (DSPROF_ALLOCATOR=system)"
        return _state
    if not sys.platform.startswith("linux"):
        _state = f"system allocator ({sys.platform})"
        return _state
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        # every request from the heap (glibc's mmap threshold stops at 32 MiB; batches on a CPU exceed it),
        # and freed memory kept there for the next pass
        ok = libc.gnu_get_libc_version and libc.mallopt(_M_MMAP_MAX, 0) == 1 \
            and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    except (OSError, AttributeError):  # not glibc (musl, for one, has neither symbol)
        ok = False
    _state = (f"glibc malloc: no mmap, trim threshold {TRIM_THRESHOLD >> 20} MiB"
              if ok else "system allocator (not glibc: thresholds left as they are)")
    return _state
