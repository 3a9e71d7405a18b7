"""Conformant variants of the minimal endpoint: the profile kept, the suite's recommendations not.

A variant is not a defect: an endpoint built the way another implementation of the profile
builds it. The suite must pass it (with non-strict notes) and fail it only when asked to be
strict. ``upstream-names`` answers like the upstream vLLM NNRP adapter
(NagareWorks/vllm-nnrp-adapter): its error-code names, a top-level ``diagnostics`` field on
every event, and no discovery operation (``nnrp.capabilities.get`` is answered
``unsupported_operation``, as the profile prescribes for an operation not advertised).
``unstated-flags`` states in its capability document only the operation flags of the
profile design's example (§13): a flag a document leaves out is unstated, not false.
``open-shapes`` takes the open choices of the profile's event shapes the other way from this
suite's schemas (issue 43): an empty cancellation reason, usage without ``total_tokens`` and
with a ``cost``, an error family of its own.
The session-limit variants are ``admission.py``'s; one of them, ``cancel-leak-cap``, is a
cancel defect registered here rather than in ``defects.py`` because what it tests is the run
around it: its leaked operations must fail the cancel cases and nothing else.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final

from answer_shapes import SHAPES
from openai_codes import openai_codes

VARIANTS: Final = MappingProxyType(
    {
        "upstream-names": (
            "the upstream adapter's error-code names (unsupported_schema_version, invalid_body, "
            "request_timeout, backend_overload), a top-level diagnostics field on every event, "
            "no discovery operation"
        ),
        "unstated-flags": (
            "a capability document with only the operation flags of the profile design's own "
            "example (streaming, non_streaming, tool_calls): no cancellation flag"
        ),
        "error-param": "every error object carries OpenAI's param field (null)",
        "diagnostics-event": (
            "a request with nnrp.diagnostics: true gets a response.diagnostics event before "
            "its answer, as the upstream adapter sends it"),
        "own-codes": (
            "its own codes of the right family for invalid requests (invalid_messages, "
            "invalid_envelope, invalid_submit) instead of invalid_request"
        ),
        "chat-usage-names": (
            "response.usage counts named prompt_tokens/completion_tokens (the profile's §8 "
            "example) instead of input_tokens/output_tokens (its §11 example)"
        ),
        "backend-error-family": "backend_error in the invalid_request_error family",
        "open-shapes": (
            "response.cancelled with reason \"\", every usage (streamed and in the final "
            "body) without total_tokens and with a cost, backend_error in a family of its "
            "own (unavailable)"
        ),
        "unsupported-model": (
            "a model it does not serve is answered unsupported_model (invalid_request_error), "
            "the profile design's own error example (§10), instead of backend_error"
        ),
        "no-output-items": (
            "Responses streams without response.output_item.added/done events (the profile's "
            "event table has none)"
        ),
        "openai-codes": (
            "OpenAI's own error codes where upstream's recipes expect theirs: "
            "missing_required_parameter for a chat body without messages, unsupported_model "
            "for a model it does not serve (openai_codes.py)"
        ),
        "timeout-server-error": "an expired nnrp.timeout_ms ends in a server_error",
        "timeout-cancelled": (
            "an expired nnrp.timeout_ms ends in response.cancelled with reason timeout"
        ),
        "timeout-drop": "an expired nnrp.timeout_ms ends in an NNRP DEADLINE_EXPIRED drop",
        "nnrp-submit-errors": (
            "an invalid submit (a malformed frame or envelope, §6.1) ends in an NNRP drop "
            "without a profile body: the profile's preferred mapping of a malformed frame"
        ),
        # freedoms.py: the freedoms, each switchable (--without NAME, --freedom NAME)
        "every-freedom": (
            "every choice the three normative texts leave open, taken the other way from this "
            "endpoint's default (freedoms.py lists each with its sentence)"
        ),
        # admission.py: session limits; the first is a cancel defect the suite must charge
        # to the cancel cases alone, the second conformant
        "cancel-leak-cap": (
            "never ends a cancelled operation, and refuses operations past 2 per session "
            "(adapter_operation_limit), as the upstream adapter does past 4: a cancel "
            "defect only"
        ),
        "own-overload": (
            "refuses operations past 2 per session with its own overload code "
            "(session_capacity_exceeded), a profile error body before any output"
        ),
        "drop-on-tools": (
            "drops the session once a request with tools has streamed an event: a defect of "
            "that case alone"
        ),
        "limit-before-validation": (
            "admits 4 operations per session and refuses the rest before reading their bodies "
            "(adapter_operation_limit, server_error), as the upstream adapter does"
        ),
        "context-length": (
            "a prompt over 128 words answered with vLLM's context-length error, as the "
            "upstream adapter passes it on (invalid_backend_request): context_window.py"
        ),
        # issue 43: choices the profile leaves open, taken the other way from ours
        "own-families": (
            "its own error families (invalid_argument; unimplemented, code unimplemented, for "
            "an operation it does not serve) and no discovery operation"
        ),
        "text-drops": (
            "an invalid submit and an expired nnrp.timeout_ms end in NNRP drops whose "
            "diagnostic is plain text (no profile body)"
        ),
        "empty-success": (
            "a stream (chat or Responses) ends with an empty successful RESULT_PUSH, zero "
            "payload frames (§8.1 MAY), instead of response.completed"
        ),
        **SHAPES,  # answer_shapes.py: answers as short as the profile allows
        "drop-on-tool-results": (
            "drops the session, before any answer, on a request with a tool message (a tool "
            "round trip): a silent defect of that case alone"
        ),
    }
)

#: the variants whose own-code names replace invalid_request, by operation's body problem
OWN_CODES: Final = ("invalid_messages", "invalid_envelope", "invalid_submit")

#: the operation flags the profile design's capability-document example states (§13)
PROFILE_EXAMPLE_FLAGS: Final = ("name", "streaming", "non_streaming", "tool_calls")

#: our code -> the upstream adapter's name for it (the error.type family is unchanged)
UPSTREAM_CODE_NAMES: Final = MappingProxyType(
    {
        "invalid_schema_version": "unsupported_schema_version",
        "invalid_request": "invalid_body",
        "timeout": "request_timeout",
        "overloaded": "backend_overload",
    }
)


def check_variant(name: str | None) -> str | None:
    """Return ``name`` when it is a known variant (or None); raise ValueError naming the choices."""
    if name is None or name in VARIANTS:
        return name
    raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")


def restyle(event: dict[str, Any], variant: str | None,
            operation_id: int) -> dict[str, Any] | None:
    """The event as the variant sends it (None: the variant does not send it)."""
    if variant in _RESTYLES:
        return _RESTYLES[variant](event, operation_id)
    if variant != "upstream-names":
        return event
    out = dict(event)
    err = out.get("error")
    if isinstance(err, dict) and err.get("code") in UPSTREAM_CODE_NAMES:
        out["error"] = {**err, "code": UPSTREAM_CODE_NAMES[err["code"]]}
    out["diagnostics"] = {"adapter": "minimal-endpoint", "operation_id": operation_id}
    return out


def unstated_flags(event: dict[str, Any]) -> dict[str, Any]:
    """The capability document with only the flags of the profile design's example (§13)."""
    body = event.get("body")
    if event.get("type") != "response.completed" or not isinstance(body, dict) \
            or body.get("profile") != "openai-compatible":
        return event
    ops = [{k: v for k, v in op.items() if k in PROFILE_EXAMPLE_FLAGS} if isinstance(op, dict)
           else op for op in body.get("operations") or ()]
    return {**event, "body": {**body, "operations": ops}}


def _error(event: dict[str, Any], **changes: Any) -> dict[str, Any]:
    err = event.get("error")
    return {**event, "error": {**err, **changes}} if isinstance(err, dict) else event


def _own_code(event: dict[str, Any], operation_id: int) -> dict[str, Any]:
    err = event.get("error")
    if not isinstance(err, dict) or err.get("code") != "invalid_request":
        return event
    return _error(event, code=OWN_CODES[operation_id % len(OWN_CODES)])


def _usage_names(event: dict[str, Any], _op: int) -> dict[str, Any]:
    usage = event.get("usage")
    if event.get("type") != "response.usage" or not isinstance(usage, dict):
        return event
    renamed = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}
    return {**event, "usage": {renamed.get(k, k): v for k, v in usage.items()}}


def _open_usage(usage: Any) -> Any:
    if not isinstance(usage, dict):
        return usage
    return {**{k: v for k, v in usage.items() if k != "total_tokens"}, "cost": 0.001}


def _open_shapes(event: dict[str, Any], _op: int) -> dict[str, Any]:
    """What the profile's event table leaves open, taken the other way from our schemas."""
    kind, body, err = event.get("type"), event.get("body"), event.get("error")
    if kind == "response.cancelled":
        return {**event, "reason": ""}
    if kind == "response.usage":
        return {**event, "usage": _open_usage(event.get("usage"))}
    if kind == "response.completed" and isinstance(body, dict) and "usage" in body:
        return {**event, "body": {**body, "usage": _open_usage(body["usage"])}}
    if isinstance(err, dict) and err.get("code") == "backend_error":
        return _error(event, type="unavailable")
    return event


#: the profile design's error example (§10), word for word
UNSUPPORTED_MODEL: Final = MappingProxyType({
    "type": "invalid_request_error", "code": "unsupported_model",
    "message": "The requested model is not available.",
})


def _unsupported_model(event: dict[str, Any], _op: int) -> dict[str, Any]:
    err = event.get("error")
    if event.get("type") != "response.error" or not isinstance(err, dict) \
            or err.get("code") != "backend_error":
        return event
    return {**event, "error": dict(UNSUPPORTED_MODEL)}


def _timeout_family(event: dict[str, Any], _op: int) -> dict[str, Any]:
    err = event.get("error")
    if isinstance(err, dict) and err.get("code") == "timeout":
        return _error(event, type="server_error", code="deadline_exceeded")
    return event


def _own_family(event: dict[str, Any], _op: int) -> dict[str, Any]:
    """The contract makes error.type any non-empty string: families of its own."""
    err = event.get("error")
    if not isinstance(err, dict):
        return event
    if err.get("code") == "unsupported_operation":
        return _error(event, type="unimplemented", code="unimplemented")
    return _error(event, type="invalid_argument") \
        if err.get("type") == "invalid_request_error" else event


_RESTYLES: Final = MappingProxyType({
    "own-families": _own_family,
    "unstated-flags": lambda event, _op: unstated_flags(event),
    "error-param": lambda event, _op: _error(event, param=None),
    "own-codes": _own_code,
    "chat-usage-names": _usage_names,
    "backend-error-family": lambda event, _op: _error(event, type="invalid_request_error")
    if isinstance(event.get("error"), dict) and event["error"].get("code") == "backend_error"
    else event,
    "unsupported-model": _unsupported_model,
    "open-shapes": _open_shapes,
    "no-output-items": lambda event, _op: None
    if event.get("type") in ("response.output_item.added", "response.output_item.done")
    else event,
    "timeout-server-error": _timeout_family,
    "openai-codes": openai_codes,
})


def serves_discovery(variant: str | None) -> bool:
    return variant not in ("upstream-names", "own-families")


def ends_stream_empty(variant: str | None, terminal: dict[str, Any] | None, sent: int) -> bool:
    """The ``empty-success`` variant: a success after streamed events ends empty (§8.1)."""
    return variant == "empty-success" and sent > 0 and isinstance(terminal, dict) \
        and terminal.get("type") == "response.completed"
