"""Process memory as the soak samples it: resident set (``/proc``) and glibc malloc's bytes in
use and held free (``mallinfo2``, native allocations included), and the Python objects
alive by type (:func:`object_census`)."""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import time
from collections import Counter
from typing import Any

from vllm_nnrp_adapter.observability.proc_cpu import rss_bytes


def _rss() -> int:
    return rss_bytes(os.getpid()) or 0


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _libc() -> Any:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
        return libc
    except (OSError, AttributeError):
        return None  # not glibc ≥ 2.33: the malloc figures are left out


_LIBC = _libc()


def _malloc() -> tuple[int, int] | None:
    """glibc malloc over all arenas (native code too): bytes handed out and not had back,
    and bytes it holds free (what ``malloc_trim`` can return)."""
    if _LIBC is None:
        return None
    info = _LIBC.mallinfo2()
    return int(info.uordblks + info.hblkhd), int(info.fordblks)


def _mib(n: float) -> float:
    return round(n / 2**20, 2)


def object_census() -> Counter[str]:
    """Live objects by type, counted while no other thread runs Python code.

    ``gc.get_objects()`` also returns tuples another thread is still building, and a second
    reference to one makes CPython's tuple constructor fail (``SystemError: bad argument to
    internal function`` in ``_PyTuple_Resize``): 64 sessions' pump threads building nnrp-py's
    event tuples hit it within seconds and one server session died of it. With a switch
    interval longer than the count, this thread keeps the GIL until the list is gone.
    """
    gc.collect()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(60.0)
    try:
        # a thread already waiting for the GIL timed its wait with the old interval and would
        # still ask for it after 5 ms (a drop request, seen in CI: the client pump's tuple
        # then failed); giving the GIL up once makes every waiter wait again with the new one
        time.sleep(0.005)
        objects = gc.get_objects()
        counts = Counter(type(o).__qualname__ for o in objects)
        del objects
    finally:
        sys.setswitchinterval(interval)
    return counts
