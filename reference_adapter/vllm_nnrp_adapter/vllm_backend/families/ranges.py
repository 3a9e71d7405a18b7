"""Reading vLLM version numbers and PEP 440-style ranges (``>=0.23.0,<0.33``), without the
``packaging`` distribution (vLLM's plugin entry point imports the adapter in every process).
Pre-release and dev suffixes are judged by their release number."""

from __future__ import annotations

import re

__all__ = ["in_range", "release", "releases_apart"]


def release(version: str) -> tuple[int, ...]:
    """``"0.22.1rc1"`` -> ``(0, 22, 1)``; a version with no number reads as ``()``."""
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)", version)
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def _padded(a: tuple[int, ...], b: tuple[int, ...],
            width: int = 0) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Both releases with as many parts as the longer one (at least ``width``)."""
    width = max(len(a), len(b), width)
    return a + (0,) * (width - len(a)), b + (0,) * (width - len(b))


def in_range(version: str, spec: str) -> bool:
    """``version`` satisfies every clause of ``spec`` (``>=``, ``<=``, ``==``, ``<``, ``>``)."""
    have = release(version)
    if not have:
        return False
    for clause in (c.strip() for c in spec.split(",") if c.strip()):
        m = re.match(r"^(>=|<=|==|<|>)\s*(\S+)$", clause)
        bound = release(m.group(2)) if m else ()
        if m is None or not bound:
            raise ValueError(f"cannot read version clause {clause!r} in {spec!r}")
        a, b = _padded(have, bound)
        ok = {">=": a >= b, "<=": a <= b, "==": a == b, "<": a < b, ">": a > b}[m.group(1)]
        if not ok:
            return False
    return True


def releases_apart(a: str, b: str) -> int:
    """How far apart two versions are, for "the nearest tested version": the distance between
    their release numbers read as one number (each part worth 1,000 of the next), so 1.0.0 is
    nearer 0.32.0 than 0.18.1."""
    x, y = _padded(release(a), release(b), 3)
    weight = [1000 ** (len(x) - 1 - i) for i in range(len(x))]
    apart: int = sum((p - q) * w for p, q, w in zip(x, y, weight, strict=True))
    return abs(apart)
