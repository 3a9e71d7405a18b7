"""The ``context-length`` variant: a prompt longer than the model's context answered with
vLLM's own context-length error, as the upstream vLLM adapter passes it on.

vLLM rejects a chat request whose prompt does not fit the model's context (``max_model_len``)
before it schedules it: "This model's maximum context length is N tokens. However, your
request has M input tokens. Please reduce the length of the input messages." (its
``BadRequestError``, status 400). The upstream adapter (NagareWorks/vllm-nnrp-adapter,
``classify_backend_error``) answers a backend status 400 with ``invalid_request_error`` /
``invalid_backend_request`` and vLLM's message, and adds the backend's error type and status
as a top-level ``diagnostics`` field. Here a token is a word (the "model" echoes words), and
the context is ``CONTEXT_TOKENS`` of them. A correct answer to a request that is too long
for this model: an invalid request for that request, never an overload refusal.
"""

from __future__ import annotations

import json
from typing import Any, Final

from chat_body import message_text
from envelope import STATUS_FOR_TYPE, Plan

CONTEXT_LENGTH: Final = "context-length"
#: the model's context, in words
CONTEXT_TOKENS: Final = 128


def _input_tokens(request: Any) -> int:
    """The words of a chat request's messages (0 when it is not one)."""
    try:
        body = json.loads(request).get("body") if isinstance(request, bytes) else None
    except (ValueError, AttributeError):
        return 0
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return 0
    return sum(len(message_text(m).split()) for m in messages if isinstance(m, dict))


def fit(variant: str | None, plan: Plan, request: Any) -> Plan:
    """``plan``, or vLLM's context-length error for a prompt too long (module doc)."""
    answered = isinstance(plan.terminal, dict) and plan.terminal.get("type") == "response.error"
    if variant != CONTEXT_LENGTH or answered:  # vLLM reads the body before its length
        return plan
    tokens = _input_tokens(request)
    if tokens <= CONTEXT_TOKENS:
        return plan
    event = {"type": "response.error", "error": {
        "type": "invalid_request_error", "code": "invalid_backend_request",
        "message": f"This model's maximum context length is {CONTEXT_TOKENS} tokens. However, "
                   f"your request has {tokens} input tokens. Please reduce the length of the "
                   "input messages."},
        "diagnostics": {"backend_error_family": "VLLMValidationError",
                        "vllm_error_type": "BadRequestError", "vllm_status_code": 400}}
    return Plan(partials=(), terminal=event, status=STATUS_FOR_TYPE["invalid_request_error"],
                request_id=plan.request_id, operation=plan.operation)
