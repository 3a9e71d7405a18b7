"""The envelope every operation of the minimal endpoint shares, and how an answer is written.

This module owns the profile's literals (schema version, operation names), the envelope's
parsing (``parse_envelope``: the checks every request passes before its body is read), the
profile's errors (``ProfileError``, ``error_event``, the closed ``error.type`` families and
their RESULT_PUSH status) and the ``Plan`` an operation's answer is written as: the event
bodies to stream, then the terminal. It knows nothing about NNRP frames or any one operation.

The profile literals are written out here on purpose: this endpoint plays the part of a
third-party provider that implements the published profile without the suite's code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeGuard

SCHEMA_VERSION = "openai-compatible/1"
PROFILE = "openai-compatible"
ADAPTER = "minimal-endpoint"
OP_CHAT = "chat.completions.create"
OP_RESPONSES = "responses.create"
OP_MODELS = "models.list"
OP_EMBEDDINGS = "embeddings.create"
OP_CAPABILITIES = "nnrp.capabilities.get"
ENVELOPE_FIELDS = frozenset({"schema_version", "operation", "request_id", "body", "nnrp"})

#: error code -> its fixed error.type (a subset of the profile's closed list)
ERROR_TYPES = {
    "missing_messages": "invalid_request_error",
    "unsupported_operation": "invalid_request_error",
    "backend_error": "server_error",
    "invalid_request": "invalid_request_error",
    "invalid_schema_version": "invalid_request_error",
    "request_too_large": "invalid_request_error",
    "context_length_exceeded": "invalid_request_error",
    "timeout": "timeout_error",
    "internal_error": "server_error",
    "invalid_api_key": "invalid_request_error",
}
#: RESULT_PUSH status per error.type
STATUS_OK = 200
STATUS_FOR_TYPE = {"invalid_request_error": 400, "server_error": 500, "timeout_error": 500}

MAX_ENVELOPE_BYTES = 1 << 20


class ProfileError(Exception):
    """A request the profile answers with ``response.error``; ``invalid_submit``: the submit
    itself is invalid (§6.1: its frame or envelope), not only its body."""

    def __init__(self, code: str, message: str, *, invalid_submit: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.invalid_submit = invalid_submit


def encode(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode("utf-8")


def error_event(code: str, message: str, defect: str | None = None) -> dict[str, Any]:
    error = {"type": ERROR_TYPES[code], "code": code, "message": message}
    if defect == "bad-error-body":
        del error["message"]
    return {"type": "response.error", "error": error}


def cancelled_event(reason: str, **diagnostics: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "response.cancelled", "reason": reason}
    if diagnostics:
        # Profile events are closed; runtime details travel in the event's nnrp member.
        event["nnrp"] = {"diagnostics": {"cancellation": diagnostics}}
    return event


@dataclass
class Plan:
    """What one operation sends: partial bodies (None = a generation step that emits
    nothing), then the terminal event (None = the operation is never ended)."""

    partials: Iterable[bytes | None]
    terminal: dict[str, Any] | None
    status: int = STATUS_OK
    cancel_after_events: int | None = None
    timeout_ms: int | None = None
    request_id: str = ""
    operation: str = ""
    #: end a success with an empty RESULT_PUSH (zero frames) instead of ``terminal``
    empty_terminal: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class Planner(Protocol):
    """Plans one operation's answer from its request body (raises ProfileError)."""

    def __call__(self, body: dict[str, Any], *, op_id: int, request_id: str, model: str,
                 defect: str | None) -> Plan: ...


def error_plan(code: str, message: str, defect: str | None = None) -> Plan:
    event = error_event(code, message, defect)
    return Plan(partials=(), terminal=event, status=STATUS_FOR_TYPE[ERROR_TYPES[code]])


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_envelope(payload: bytes) -> dict[str, Any]:
    if len(payload) > MAX_ENVELOPE_BYTES:
        raise ProfileError(
            "request_too_large",
            f"request envelope is {len(payload)} bytes; the limit is {MAX_ENVELOPE_BYTES}",
        )
    try:
        envelope = json.loads(payload.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ProfileError("invalid_request", f"request envelope is not UTF-8: {exc}",
                           invalid_submit=True) from None
    except json.JSONDecodeError as exc:
        raise ProfileError("invalid_request", f"request envelope is not JSON: {exc}",
                           invalid_submit=True) from None
    if not isinstance(envelope, dict):
        raise ProfileError("invalid_request", "request envelope must be a JSON object",
                           invalid_submit=True)
    if envelope.get("schema_version") != SCHEMA_VERSION:
        raise ProfileError(
            "invalid_schema_version",
            f"schema_version must be {SCHEMA_VERSION!r}, got {envelope.get('schema_version')!r}",
            invalid_submit=True,
        )
    unknown = sorted(set(envelope) - ENVELOPE_FIELDS)
    if unknown:
        raise ProfileError("invalid_request", f"unknown envelope member(s): {', '.join(unknown)}")
    if not isinstance(envelope.get("operation"), str) or not envelope["operation"]:
        raise ProfileError("invalid_request", "envelope member 'operation' must be a string")
    if "request_id" in envelope and not isinstance(envelope["request_id"], str):
        raise ProfileError("invalid_request", "envelope member 'request_id' must be a string")
    if not isinstance(envelope.get("body"), dict):
        raise ProfileError("invalid_request", "envelope member 'body' must be a JSON object")
    hints = envelope.get("nnrp", {})
    if not isinstance(hints, dict):
        raise ProfileError("invalid_request", "envelope member 'nnrp' must be a JSON object")
    timeout = hints.get("timeout_ms")
    if timeout is not None and (not is_int(timeout) or timeout <= 0):
        raise ProfileError("invalid_request", "nnrp.timeout_ms must be a positive integer")
    after = hints.get("cancel_after_events")
    if after is not None and (not is_int(after) or after < 0):
        raise ProfileError("invalid_request", "nnrp.cancel_after_events must be an integer >= 0")
    if "diagnostics" in hints and not isinstance(hints["diagnostics"], bool):
        raise ProfileError("invalid_request", "nnrp.diagnostics must be a boolean")
    return envelope

