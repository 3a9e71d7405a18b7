"""Typed-payload encode/decode for the profile's wire mapping (profile §6.1, §8.1).

Owns: building the FRAME_SUBMIT for an envelope (or for deliberately malformed frames),
checking a received FRAME_SUBMIT against the mapping, encoding PARTIAL_RESULT event
bodies and RESULT_PUSH terminals, and checking a received RESULT_PUSH. Every check
returns the rule it broke, so both the server (error terminal) and the suite (findings)
can say precisely what was wrong. Only nnrp-py's own packers are used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from nnrp import StreamSemantics, TypedPayloadDescriptorFlags
from nnrp.client import (
    SubmitIdentity,
    SubmitPolicy,
    SubmitRequest,
    TypedPayloadInputFrame,
    TypedPayloadSubmitInput,
)
from nnrp.core import (
    PayloadKind,
    ResultClass,
    ResultPushMetadata,
    build_result_push_typed_payload_packet,
    build_typed_payload_frame,
    unpack_body,
    unpack_typed_payload_frames,
)

from nnrp_conformance import contract

#: descriptor values every profile typed frame carries (profile §6.1)
SPEC_DESCRIPTOR: dict[str, int] = {
    "payload_kind": contract.WIRE_PAYLOAD_KIND_STRUCTURED_EVENT,
    "profile_id": contract.WIRE_PROFILE_ID,
    "schema_id": contract.WIRE_SCHEMA_ID,
    "schema_version": contract.WIRE_SCHEMA_VERSION,
    "stream_semantics": contract.WIRE_STREAM_SEMANTICS_SNAPSHOT,
    "descriptor_flags": contract.WIRE_DESCRIPTOR_FLAGS,
}


class WireViolation(ValueError):
    """A frame that breaks the wire mapping; ``rule`` names the rule (stable, for checks)."""

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(f"{rule}: {detail}")
        self.rule = rule
        self.detail = detail


@dataclass(frozen=True, slots=True)
class RawFrame:
    """One typed payload frame exactly as it should go on the wire (malformed on purpose or not)."""

    payload: bytes
    payload_kind: int = contract.WIRE_PAYLOAD_KIND_STRUCTURED_EVENT
    profile_id: int = contract.WIRE_PROFILE_ID
    schema_id: int = contract.WIRE_SCHEMA_ID
    schema_version: int = contract.WIRE_SCHEMA_VERSION
    stream_semantics: int = contract.WIRE_STREAM_SEMANTICS_SNAPSHOT
    descriptor_flags: int = contract.WIRE_DESCRIPTOR_FLAGS

    def to_input_frame(self) -> TypedPayloadInputFrame:
        return TypedPayloadInputFrame(
            profile_id=self.profile_id,
            payload_kind=PayloadKind(self.payload_kind),
            payload=self.payload,
            descriptor_flags=TypedPayloadDescriptorFlags(self.descriptor_flags),
            schema_id=self.schema_id,
            schema_version=self.schema_version,
            stream_semantics=StreamSemantics(self.stream_semantics),
        )


# One shared encoder: json.dumps with keyword arguments builds a new encoder per call, which
# was half the cost of mapping a chunk (benchmark/mapper.py). Events are trees of plain JSON
# values made here, so the circular-reference check buys nothing on this hot path.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_encode = _ENCODER.encode


def dump_json(obj: Any) -> bytes:
    """Compact UTF-8 JSON, the one encoding used for envelopes and events."""
    return _encode(obj).encode(contract.WIRE_PAYLOAD_ENCODING)


def decode_json_object(raw: bytes, *, what: str) -> dict[str, Any]:
    """UTF-8 JSON object or WireViolation naming what failed (utf8 / json / not an object)."""
    try:
        text = bytes(raw).decode(contract.WIRE_PAYLOAD_ENCODING)
    except UnicodeDecodeError as exc:
        raise WireViolation(
            f"{what}.utf8", f"payload is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WireViolation(
            f"{what}.json", f"payload is not valid JSON ({exc.msg} at char {exc.pos})"
        ) from None
    except RecursionError:
        # a small payload can still nest deeper than the parser's stack allows
        raise WireViolation(
            f"{what}.json", "payload is not valid JSON (nesting too deep)"
        ) from None
    if not isinstance(obj, dict):
        raise WireViolation(
            f"{what}.object", f"payload is JSON {type(obj).__name__}, not an object"
        )
    return obj


# --- request -----------------------------------------------------------------------------


def submit_frames(
    envelope: dict[str, Any] | bytes | None = None,
    frames: list[RawFrame] | tuple[RawFrame, ...] | None = None,
) -> tuple[RawFrame, ...]:
    """The typed frames of a FRAME_SUBMIT: one spec frame carrying ``envelope`` (dict -> JSON,
    bytes as-is), or exactly ``frames`` when given (for malformed-frame tests)."""
    if frames is not None:
        return tuple(frames)
    payload = envelope if isinstance(envelope, bytes | bytearray) else dump_json(envelope)
    return (RawFrame(bytes(payload)),)


def build_submit(
    operation_id: int,
    frame_id: int,
    envelope: dict[str, Any] | bytes | None = None,
    *,
    frames: list[RawFrame] | tuple[RawFrame, ...] | None = None,
) -> SubmitRequest:
    """FRAME_SUBMIT with the typed frames of :func:`submit_frames`."""
    frames = submit_frames(envelope, frames)
    return SubmitRequest.typed_payload(
        TypedPayloadSubmitInput(
            identity=SubmitIdentity(operation_id=operation_id, frame_id=frame_id),
            policy=SubmitPolicy(),
            frames=tuple(f.to_input_frame() for f in frames),
        )
    )


def _check_descriptor(frame: Any, where: str) -> None:
    for name, expected in SPEC_DESCRIPTOR.items():
        actual = int(getattr(frame, name))
        if actual != expected:
            raise WireViolation(
                f"{where}.{name}", f"descriptor {name} is {actual}, the mapping requires {expected}"
            )


def decode_typed_frames(metadata: Any, body: bytes, *, where: str) -> tuple[Any, ...]:
    """Typed frames of a FRAME_SUBMIT / RESULT_PUSH body, with the prelude checks of §6.1 and §8.1."""
    try:
        view = unpack_body(body)
    except (ValueError, TypeError) as exc:
        raise WireViolation(
            f"{where}.body", f"body region prelude does not decode: {exc}"
        ) from None
    for region in (
        "inline_object_region",
        "object_reference_region",
        "extension_descriptor_region",
        "extension_payload_region",
    ):
        if len(getattr(view, region)):
            raise WireViolation(
                f"{where}.{region}",
                f"{region} must be empty, has {len(getattr(view, region))} bytes",
            )
    count = int(metadata.payload_frame_count)
    if len(view.typed_payload_descriptor_region) != count * contract.WIRE_TYPED_DESCRIPTOR_BYTES:
        raise WireViolation(
            f"{where}.descriptor_bytes",
            f"typed_payload_descriptor_bytes is {len(view.typed_payload_descriptor_region)}, "
            f"payload_frame_count {count} x {contract.WIRE_TYPED_DESCRIPTOR_BYTES} required",
        )
    try:
        frames: tuple[Any, ...] = unpack_typed_payload_frames(
            view.typed_payload_descriptor_region,
            view.typed_payload_frame_region,
            payload_kind_bitmap=int(metadata.payload_kind_bitmap),
        )
        return frames
    except (ValueError, TypeError) as exc:
        raise WireViolation(
            f"{where}.frames", f"typed payload frames do not decode: {exc}"
        ) from None


def decode_submit(metadata: Any, body: bytes) -> dict[str, Any]:
    """Envelope of a received FRAME_SUBMIT, or WireViolation (rule ``submit.*``)."""
    if int(metadata.payload_kind_bitmap) != contract.WIRE_PAYLOAD_KIND_BITMAP:
        raise WireViolation(
            "submit.payload_kind_bitmap",
            f"payload_kind_bitmap is {int(metadata.payload_kind_bitmap)}, "
            f"the mapping requires {contract.WIRE_PAYLOAD_KIND_BITMAP} (structured_event only)",
        )
    if int(metadata.payload_frame_count) != contract.WIRE_PAYLOAD_FRAME_COUNT:
        raise WireViolation(
            "submit.payload_frame_count",
            f"{int(metadata.payload_frame_count)} typed payload frames, exactly "
            f"{contract.WIRE_PAYLOAD_FRAME_COUNT} required (extra frames are not allowed)",
        )
    frames = decode_typed_frames(metadata, body, where="submit")
    if len(frames) != contract.WIRE_PAYLOAD_FRAME_COUNT:
        raise WireViolation(
            "submit.payload_frame_count",
            f"{len(frames)} typed payload frames decoded, exactly 1 required",
        )
    _check_descriptor(frames[0], "submit")
    return decode_json_object(frames[0].payload, what="submit.payload")


# --- partial results ---------------------------------------------------------------------


def encode_event(event: dict[str, Any]) -> bytes:
    """PARTIAL_RESULT body: the raw UTF-8 JSON of exactly one event."""
    return dump_json(event)


# --- terminal ----------------------------------------------------------------------------


def encode_result_push(
    frame_id: int, event: dict[str, Any] | None, *, status_code: int = contract.WIRE_STATUS_OK
) -> tuple[ResultPushMetadata, bytes]:
    """RESULT_PUSH metadata+body with the terminal event in one spec typed frame;
    ``event=None`` gives the empty success terminal (zero frames, bitmap 0)."""
    if event is None:
        md = ResultPushMetadata(
            status_code,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            result_class=ResultClass.COMPLETE,
            payload_kind_bitmap=PayloadKind(0),
            payload_frame_count=0,
        )
        return md, b""
    pkt = build_result_push_typed_payload_packet(
        session_id=0,
        frame_id=frame_id,
        status_code=status_code,
        result_class=ResultClass.COMPLETE,
        frames=(
            build_typed_payload_frame(
                PayloadKind.STRUCTURED_EVENT,
                dump_json(event),
                profile_id=contract.WIRE_PROFILE_ID,
                schema_id=contract.WIRE_SCHEMA_ID,
                schema_version=contract.WIRE_SCHEMA_VERSION,
                stream_semantics=StreamSemantics(contract.WIRE_STREAM_SEMANTICS_SNAPSHOT),
            ),
        ),
    )
    return ResultPushMetadata.unpack(pkt.metadata), pkt.body


def decode_result_push(metadata: Any, body: bytes) -> dict[str, Any] | None:
    """Terminal event of a RESULT_PUSH (None for the empty success), or WireViolation
    (rule ``result_push.*``) when metadata and body disagree or the descriptor is off-spec."""
    count = int(metadata.payload_frame_count)
    bitmap = int(metadata.payload_kind_bitmap)
    if count == 0:
        if bitmap != 0:
            raise WireViolation(
                "result_push.empty_bitmap", f"zero payload frames but payload_kind_bitmap {bitmap}"
            )
        if len(body):
            view = decode_typed_frames(metadata, body, where="result_push") if body else ()
            if view:
                raise WireViolation(
                    "result_push.empty_body",
                    "zero payload frames declared but the body carries frames",
                )
        return None
    if bitmap != contract.WIRE_PAYLOAD_KIND_BITMAP:
        raise WireViolation(
            "result_push.payload_kind_bitmap",
            f"payload_kind_bitmap is {bitmap}, {contract.WIRE_PAYLOAD_KIND_BITMAP} required",
        )
    if count != contract.WIRE_PAYLOAD_FRAME_COUNT:
        raise WireViolation(
            "result_push.payload_frame_count",
            f"{count} payload frames, at most one terminal event allowed",
        )
    frames = decode_typed_frames(metadata, body, where="result_push")
    if len(frames) != count:
        raise WireViolation(
            "result_push.payload_frame_count",
            f"metadata declares {count} frames, body has {len(frames)}",
        )
    _check_descriptor(frames[0], "result_push")
    event = decode_json_object(frames[0].payload, what="result_push.payload")
    if event.get("type") not in contract.TERMINAL_EVENT_TYPES:
        raise WireViolation(
            "result_push.event_type",
            f"RESULT_PUSH carries {event.get('type')!r}, not a profile terminal event",
        )
    return event


@dataclass(slots=True)
class DropDiagnostic:
    """What a RESULT_DROP_REASON's diagnostic bytes carry in this mapping."""

    event: dict[str, Any] | None
    diagnostics: dict[str, Any] = field(default_factory=dict)


#: where terminal events carry runtime diagnostics: ``event["nnrp"]["diagnostics"]``
#: (the same ``nnrp`` member name the envelope uses for NNRP policy; never in ``body``)
DIAGNOSTICS_MEMBER = "nnrp"


def with_diagnostics(event: dict[str, Any], diagnostics: dict[str, Any] | None) -> dict[str, Any]:
    """Copy of a terminal event carrying ``diagnostics`` under ``nnrp.diagnostics``."""
    if not diagnostics:
        return event
    doc = dict(event)
    member = dict(doc.get(DIAGNOSTICS_MEMBER) or {})
    existing = member.get("diagnostics")
    # The handler's own diagnostics (backend error, engine state) are kept; the runtime's
    # are added beside them.
    merged = {**existing, **diagnostics} if isinstance(existing, dict) else dict(diagnostics)
    member["diagnostics"] = merged
    doc[DIAGNOSTICS_MEMBER] = member
    return doc


def split_diagnostics(event: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(event without the diagnostics member, diagnostics or {})."""
    member = event.get(DIAGNOSTICS_MEMBER)
    if not isinstance(member, dict) or "diagnostics" not in member:
        return event, {}
    doc = {k: v for k, v in event.items() if k != DIAGNOSTICS_MEMBER}
    diagnostics = member["diagnostics"]
    return doc, diagnostics if isinstance(diagnostics, dict) else {"value": diagnostics}


def encode_drop_diagnostic(
    event: dict[str, Any], diagnostics: dict[str, Any] | None = None
) -> bytes:
    """Diagnostic bytes of a drop: the profile event JSON with ``nnrp.diagnostics``."""
    return dump_json(with_diagnostics(event, diagnostics))


def decode_drop_diagnostic(raw: bytes) -> DropDiagnostic:
    """Inverse of encode_drop_diagnostic; raises WireViolation (rule ``result_drop.*``)."""
    doc = decode_json_object(raw, what="result_drop.diagnostic")
    event, diagnostics = split_diagnostics(doc)
    return DropDiagnostic(event, diagnostics)
