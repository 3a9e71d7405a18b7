"""Reading a request's FRAME_SUBMIT: the one typed frame the profile's wire binding allows.

``decode_request`` returns the envelope's bytes, or an ``invalid_request`` error plan naming
what breaks the binding (no typed payload, more than one frame, a payload kind other than
structured_event, non-zero profile or schema ids, stream semantics other than snapshot).
"""

from __future__ import annotations

from typing import Any

from envelope import Plan, error_plan
from nnrp import StreamSemantics
from nnrp.core import PayloadKind, unpack_body, unpack_typed_payload_frames


def decode_request(op: Any, defect: str | None) -> bytes | Plan:
    """The envelope bytes of a FRAME_SUBMIT, or an error plan when the frame breaks §6.1."""
    metadata = op.submit.metadata.value
    try:
        view = unpack_body(op.submit.tail.body)
        frames = unpack_typed_payload_frames(
            view.typed_payload_descriptor_region,
            view.typed_payload_frame_region,
            payload_kind_bitmap=metadata.payload_kind_bitmap,
        )
    except Exception as exc:  # the SDK raises several types for a malformed body
        return error_plan("invalid_request", f"FRAME_SUBMIT body is not a typed payload: {exc}")
    if not frames:
        return error_plan("invalid_request", "FRAME_SUBMIT carries no typed payload frame")
    if defect == "accepts-bad-wire":
        return frames[0].payload
    if len(frames) != 1:
        return error_plan(
            "invalid_request", f"FRAME_SUBMIT must carry exactly one typed frame, got {len(frames)}"
        )
    frame = frames[0]
    wrong = []
    if frame.payload_kind != PayloadKind.STRUCTURED_EVENT:
        wrong.append(f"payload kind {int(frame.payload_kind)} (want 16 structured_event)")
    if frame.profile_id or frame.schema_id or frame.schema_version:
        wrong.append(
            f"profile/schema ids {frame.profile_id}/{frame.schema_id}/{frame.schema_version}"
            " (want 0/0/0)"
        )
    if int(frame.stream_semantics) != StreamSemantics.SNAPSHOT:
        wrong.append(f"stream semantics {int(frame.stream_semantics)} (want 1 snapshot)")
    if wrong:
        return error_plan("invalid_request", "request frame: " + "; ".join(wrong))
    return frame.payload
