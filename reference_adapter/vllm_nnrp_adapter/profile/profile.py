"""The adapter's view of the ``openai-compatible/1`` profile: envelope checks and event builders.

Built on :mod:`nnrp_conformance.contract` (names, codes, wire numbers) and the contract's
JSON Schemas (:mod:`nnrp_conformance.validation`); nothing here restates them. It owns:

* turning a decoded submit payload into a checked :class:`Envelope`, or a
  :class:`ProfileError` whose ``response.error`` names the offending field;
* building every profile event the adapter emits, so their shape lives in one place;
* the capability document derived from the adapter's manifest plus the models served, less
  the operations the backend cannot keep (and every level that then loses its operation).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.contract import (
    ERR_INVALID_REQUEST,
    ERR_INVALID_SCHEMA_VERSION,
    ERR_UNSUPPORTED_OPERATION,
    ERROR_CODES,
    EV_CANCELLED,
    EV_COMPLETED,
    EV_ERROR,
    EV_OUTPUT_ITEM_ADDED,
    EV_OUTPUT_ITEM_DONE,
    EV_OUTPUT_TEXT_DELTA,
    EV_REASONING_TEXT_DELTA,
    EV_TOOL_CALL_COMPLETED,
    EV_TOOL_CALL_DELTA,
    EV_TOOL_CALL_ERROR,
    EV_TOOL_CALL_STARTED,
    EV_USAGE,
    OP_CAPABILITIES_GET,
    OPERATION_LEVELS,
    PROFILE,
    SCHEMA_VERSION,
)
from nnrp_conformance.validation import validate

__all__ = [
    "PROFILE",
    "SCHEMA_VERSION",
    "Envelope",
    "ProfileError",
    "cancelled_event",
    "capability_document",
    "completed_event",
    "error_event",
    "item_text_delta_event",
    "load_manifest_document",
    "output_item_added_event",
    "output_item_done_event",
    "parse_envelope",
    "reasoning_text_delta_event",
    "text_delta_event",
    "tool_call_completed_event",
    "tool_call_delta_event",
    "tool_call_error_event",
    "tool_call_started_event",
    "usage_event",
]

MAX_ERROR_MESSAGE_CHARS = 4096


class ProfileError(Exception):
    """A request the profile rejects; :meth:`event` is its ``response.error``."""

    def __init__(self, code: str, message: str, *, param: str | None = None) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"not a profile error code: {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param

    def event(self) -> dict[str, Any]:
        return error_event(self.code, self.message, param=self.param)


# --- event builders --------------------------------------------------------------------


def error_event(code: str, message: str, *, param: str | None = None) -> dict[str, Any]:
    """``response.error`` with the code's fixed ``error.type`` family."""
    if code not in ERROR_CODES:
        raise ValueError(f"not a profile error code: {code!r}")
    text = message if len(message) <= MAX_ERROR_MESSAGE_CHARS else message[:MAX_ERROR_MESSAGE_CHARS]
    error = {"type": ERROR_CODES[code], "code": code, "message": text or code}
    event: dict[str, Any] = {"type": EV_ERROR, "error": error}
    if param is not None:
        # The error body is closed ({type, code, message}); the field travels as a diagnostic.
        event["nnrp"] = {"diagnostics": {"param": param}}
    return event


def cancelled_event(reason: str) -> dict[str, Any]:
    return {"type": EV_CANCELLED, "reason": reason}


def text_delta_event(delta: str, index: int = 0) -> dict[str, Any]:
    return {"type": EV_OUTPUT_TEXT_DELTA, "index": index, "delta": delta}


def item_text_delta_event(index: int, item_id: str, delta: str) -> dict[str, Any]:
    """Level 2's text delta: it names its output item (the chat path's builder stays as is)."""
    return {"type": EV_OUTPUT_TEXT_DELTA, "index": index, "item_id": item_id, "delta": delta}


def reasoning_text_delta_event(index: int, item_id: str, delta: str) -> dict[str, Any]:
    return {"type": EV_REASONING_TEXT_DELTA, "index": index, "item_id": item_id, "delta": delta}


def output_item_added_event(output_index: int, item: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": EV_OUTPUT_ITEM_ADDED, "output_index": output_index, "item": dict(item)}


def output_item_done_event(output_index: int, item: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": EV_OUTPUT_ITEM_DONE, "output_index": output_index, "item": dict(item)}


def usage_event(
    input_tokens: int, output_tokens: int, total_tokens: int | None = None
) -> dict[str, Any]:
    total = input_tokens + output_tokens if total_tokens is None else total_tokens
    return {
        "type": EV_USAGE,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": total,
        },
    }


def completed_event(body: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": EV_COMPLETED, "body": dict(body)}


def _tool_call_base(kind: str, index: int, item_id: str, call_id: str) -> dict[str, Any]:
    return {"type": kind, "index": index, "item_id": item_id, "call_id": call_id}


def tool_call_started_event(
    index: int, item_id: str, call_id: str, name: str
) -> dict[str, Any]:
    return {**_tool_call_base(EV_TOOL_CALL_STARTED, index, item_id, call_id), "name": name}


def tool_call_delta_event(
    index: int, item_id: str, call_id: str, arguments_delta: str
) -> dict[str, Any]:
    event = _tool_call_base(EV_TOOL_CALL_DELTA, index, item_id, call_id)
    event["arguments_delta"] = arguments_delta
    return event


def tool_call_completed_event(
    index: int, item_id: str, call_id: str, name: str, arguments: str
) -> dict[str, Any]:
    event = _tool_call_base(EV_TOOL_CALL_COMPLETED, index, item_id, call_id)
    event.update(name=name, arguments=arguments)
    return event


def tool_call_error_event(
    index: int, item_id: str, call_id: str, code: str, message: str
) -> dict[str, Any]:
    event = _tool_call_base(EV_TOOL_CALL_ERROR, index, item_id, call_id)
    event["error"] = error_event(code, message)["error"]
    return event


# --- envelope --------------------------------------------------------------------------


@dataclass(frozen=True)
class Envelope:
    """A checked request envelope. ``body`` is the OpenAI request, untouched by NNRP policy."""

    operation: str
    body: dict[str, Any]
    request_id: str | None = None
    nnrp: dict[str, Any] = field(default_factory=dict)

    @property
    def timeout_ms(self) -> int | None:
        return self.nnrp.get("timeout_ms")

    @property
    def wants_diagnostics(self) -> bool:
        return bool(self.nnrp.get("diagnostics", False))

    @property
    def wants_openai_chunk(self) -> bool:
        return bool(self.nnrp.get("openai_chunk", False))

    @property
    def wants_timing(self) -> bool:
        return bool(self.nnrp.get("timing", False))

    @property
    def cancel_after_events(self) -> int | None:
        return self.nnrp.get("cancel_after_events")


def _describe(pointer: str) -> str:
    return pointer or "the envelope"


def parse_envelope(
    payload: bytes | Mapping[str, Any],
    *,
    operations: Iterable[str] = (contract.OP_CHAT_COMPLETIONS_CREATE,),
) -> Envelope:
    """Decode and check one submitted envelope.

    ``operations`` are the operations this endpoint serves; any other well-formed operation
    name is ``unsupported_operation`` (not ``invalid_request``), as the profile asks. The
    discovery operation is always accepted.
    """

    if isinstance(payload, bytes | bytearray | memoryview):
        try:
            text = bytes(payload).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProfileError(
                ERR_INVALID_REQUEST, f"envelope is not valid UTF-8 (byte {exc.start})"
            ) from None
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProfileError(
                ERR_INVALID_REQUEST,
                f"envelope is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            ) from None
        except RecursionError:
            raise ProfileError(
                ERR_INVALID_REQUEST, "envelope is not valid JSON: nesting too deep"
            ) from None
    else:
        obj = payload
    if not isinstance(obj, dict):
        raise ProfileError(
            ERR_INVALID_REQUEST, f"envelope must be a JSON object, got {type(obj).__name__}"
        )
    # The version decides how the rest is read, so it is judged first and on its own.
    if "schema_version" in obj and obj["schema_version"] != SCHEMA_VERSION:
        raise ProfileError(
            ERR_INVALID_SCHEMA_VERSION,
            f"schema_version must be {SCHEMA_VERSION!r}, got {obj['schema_version']!r}",
            param="schema_version",
        )
    violations = validate("envelope", obj)
    if violations:
        first = violations[0]
        param = first.pointer.lstrip("/").replace("/", ".") or None
        raise ProfileError(
            ERR_INVALID_REQUEST,
            f"invalid envelope: {_describe(first.pointer)}: {first.message}",
            param=param,
        )
    operation = obj["operation"]
    if operation != OP_CAPABILITIES_GET and operation not in set(operations):
        raise ProfileError(
            ERR_UNSUPPORTED_OPERATION,
            f"operation {operation!r} is not supported by this endpoint",
            param="operation",
        )
    return Envelope(
        operation=operation,
        body=obj.get("body", {}),
        request_id=obj.get("request_id"),
        nnrp=dict(obj.get("nnrp") or {}),
    )


# --- capability document ---------------------------------------------------------------


def load_manifest_document(path: str | Path) -> dict[str, Any]:
    # a manifest is a JSON object (the suite's manifest format); its fields are read by name
    document: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return document


def capability_document(
    manifest: Mapping[str, Any],
    models: Iterable[str],
    *,
    owned_by: str = "vllm",
    withheld: Iterable[str] = (),
) -> dict[str, Any]:
    """The capability document: the manifest's claims plus the models actually served.

    ``withheld`` are operations the backend cannot keep (e.g. a vLLM line whose Responses
    stream breaks with tools): they are not listed, and since a higher level includes the
    lower ones (spec §1), a claimed level stays only while every level up to it keeps an
    operation; the operations of a level that goes go with it.
    """
    withheld = set(withheld)
    kept_ops = [op for op in manifest["operations"] if op["name"] not in withheld]
    served_levels = {OPERATION_LEVELS.get(op["name"]) for op in kept_ops}
    levels = [
        level
        for level in manifest["compatibility_levels"]
        if all(k in served_levels for k in range(1, level + 1))
    ]
    # the lowest claimed level lost: it and every level above it go, with their operations
    lost = min(set(manifest["compatibility_levels"]) - set(levels), default=None)
    doc: dict[str, Any] = {
        "profile": manifest["profile"],
        "schema_version": manifest["schema_version"],
        "adapter": manifest["adapter"],
        "compatibility_levels": levels,
        "operations": copy.deepcopy(
            [op for op in kept_ops if lost is None or OPERATION_LEVELS.get(op["name"], 0) < lost]
        ),
        "models": [{"id": m, "owned_by": owned_by} for m in models],
    }
    if manifest.get("extensions"):
        doc["extensions"] = copy.deepcopy(list(manifest["extensions"]))
    return doc
