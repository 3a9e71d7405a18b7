"""What the backend streams: :class:`StreamChunk`, one OpenAI ``chat.completion.chunk`` parsed
from the SSE text vLLM's chat serving object yields (:func:`parse_sse` takes its ``data:``
payloads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["StreamChunk", "parse_sse"]

@dataclass
class StreamChunk:
    """One parsed OpenAI ``chat.completion.chunk`` and the SSE payload it came from."""

    data: dict[str, Any]
    raw: str


def parse_sse(text: str) -> list[str]:
    """The ``data:`` payloads in one or more SSE events."""
    payloads = []
    for event in text.split("\n\n"):
        lines = [ln[5:].lstrip(" ") for ln in event.splitlines() if ln.startswith("data:")]
        if lines:
            payloads.append("\n".join(lines))
    return payloads
