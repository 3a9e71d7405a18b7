"""One JSON helper: any value made JSON-safe, for reports, evidence files and xdist transfer.

Findings and diagnostics carry whatever an endpoint sent or a check computed (tuples, sets,
bytes, SDK objects); :func:`jsonable` keeps their structure where JSON has one and writes the
rest as text, so a report never fails to serialise what it was given. Text is kept as
received except where it cannot be written as UTF-8 (a lone surrogate, which an endpoint can
send as ``"\\ud83d"`` in valid JSON): that code point is written as its escape, ``\\ud83d``,
so every writer (terminal, JSON, Markdown, HTML, NDJSON) shows it instead of crashing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["jsonable", "printable"]

#: bytes of a raw payload kept (decoded as UTF-8, undecodable bytes replaced)
MAX_BYTES_SHOWN = 256


def printable(text: str) -> str:
    """``text`` with each lone surrogate written as its ``\\udXXX`` escape (else unchanged)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def jsonable(value: Any) -> Any:
    """``value`` with mappings as objects (keys as text), sequences and sets as arrays, bytes
    as their first :data:`MAX_BYTES_SHOWN` bytes decoded, text :func:`printable`, anything
    else as its ``repr``."""
    if isinstance(value, str):
        return printable(value)
    if value is None or isinstance(value, int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {printable(str(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return bytes(value[:MAX_BYTES_SHOWN]).decode("utf-8", "replace")
    return printable(repr(value))
