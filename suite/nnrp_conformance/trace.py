"""A case's frame trace (``--nnrp-trace DIR``): every frame the client sent and received for
the case's operation, one JSON object per line (NDJSON), in the order they happened.

Each line: ``seq``, ``t_ms`` (milliseconds since the submit left the client, the client's
monotonic clock), ``direction`` (``sent``/``received``, or ``local`` for nnrp-py's own
notice that a cancel took effect), ``message_type``, ``operation_id``,
``frame_id``, ``metadata`` (the frame's metadata fields as decoded), ``descriptor`` (for the
submit's typed frames), the body as ``body`` (UTF-8 text) or ``body_base64`` (anything else),
``decode_error`` when the suite could not decode it, and ``after_terminal`` for a frame that
arrived once the operation had ended. A frame nnrp-py refused after the terminal (raised as
3/4/105, unread: ``client/refused.py``) is a ``received`` line with ``message_type``
``"unknown (refused by nnrp-py)"``, ``refused`` (the SDK's status and how the frame was
attributed to this operation) and ``after_terminal``. The trace shows what was on the wire; the verdict is
judged from the same frames (``checks``), never from the trace file.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .artifacts import private_tmp

__all__ = ["TRACE_SUFFIX", "frame_trace", "trace_file_name", "write_trace"]

TRACE_SUFFIX = ".ndjson"


def _body(raw: bytes) -> dict[str, Any]:
    try:
        return {"body": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body_base64": base64.b64encode(raw).decode("ascii")}


def _ms(ns: int | None, origin: int) -> float | None:
    return None if ns is None else round((ns - origin) / 1e6, 3)


def frame_trace(op: Any) -> list[dict[str, Any]]:
    """The frames of one client :class:`~nnrp_conformance.client.operation.Operation`."""
    origin = op.sent_at_ns or op.submitted_at_ns
    ids = {"operation_id": op.operation_id, "frame_id": op.frame_id}
    lines: list[tuple[int, dict[str, Any]]] = []
    for i, frame in enumerate(op.request_frames):
        descriptor = {name: int(getattr(frame, name)) for name in (
            "payload_kind", "profile_id", "schema_id", "schema_version", "stream_semantics",
            "descriptor_flags")}
        lines.append((op.sent_at_ns or op.submitted_at_ns, {
            "direction": "sent", "message_type": "FRAME_SUBMIT", **ids,
            "typed_frame": i, "descriptor": descriptor, **_body(bytes(frame.payload))}))
    if op.cancel_sent_at_ns is not None:
        lines.append((op.cancel_sent_at_ns, {"direction": "sent",
                                             "message_type": "FRAME_CANCEL", **ids}))
    for rec, late in [(r, False) for r in op.received] + [(r, True) for r in op.after_terminal]:
        # a lifecycle record is nnrp-py's local notice (the cancel took effect), not a frame
        direction = "local" if rec.kind == "lifecycle" else "received"
        entry: dict[str, Any] = {"direction": direction, "message_type": rec.message_type,
                                 **ids, "metadata": dict(rec.metadata)}
        if direction != "local":
            entry.update(_body(rec.raw))
        if rec.decode_error:
            entry["decode_error"] = rec.decode_error
        if late:
            entry["after_terminal"] = True
        lines.append((rec.received_at_ns, entry))
    for ref in getattr(op, "refused_after_terminal", ()):
        lines.append((ref.received_at_ns, {
            "direction": "received", "message_type": "unknown (refused by nnrp-py)", **ids,
            "refused": {"status": ref.status, "attribution": ref.attribution},
            "after_terminal": True}))
    lines.sort(key=lambda item: item[0])  # stable: a submit's frames keep their order
    return [{"seq": n, "t_ms": _ms(ns, origin), **entry} for n, (ns, entry) in enumerate(lines)]


def trace_file_name(case_id: str) -> str:
    return case_id + TRACE_SUFFIX


def write_trace(path: Path, lines: Iterable[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = private_tmp(path)
    try:
        with tmp.open("w", encoding="utf-8") as out:
            for line in lines:
                out.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
