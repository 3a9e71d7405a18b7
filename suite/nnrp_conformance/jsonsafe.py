"""One JSON helper: any value made JSON-safe, for reports, evidence files and xdist transfer.

Findings and diagnostics carry whatever an endpoint sent or a check computed (tuples, sets,
bytes, SDK objects); :func:`jsonable` keeps their structure where JSON has one and writes the
rest as text, so a report never fails to serialise what it was given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["jsonable"]

#: bytes of a raw payload kept (decoded as UTF-8, undecodable bytes replaced)
MAX_BYTES_SHOWN = 256


def jsonable(value: Any) -> Any:
    """``value`` with mappings as objects (keys as text), sequences and sets as arrays, bytes
    as their first :data:`MAX_BYTES_SHOWN` bytes decoded, anything else as its ``repr``."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return bytes(value[:MAX_BYTES_SHOWN]).decode("utf-8", "replace")
    return repr(value)
