"""The ``openai-codes`` variant: the error codes OpenAI's own API sends, not upstream's.

A provider writing an endpoint from the profile's normative documents alone has no reason to
pick the codes only upstream's recipes name (``missing_messages``, ``backend_error``): it
answers a chat body without ``messages`` the way OpenAI's API does
(``missing_required_parameter``) and a model it does not serve with
the profile design's own error example (§10. Error Mapping: ``unsupported_model``,
``invalid_request_error``). Both are readings of the profile, so the suite's default run must
judge this endpoint exactly as it judges the one sending upstream's codes; only
``--nnrp-strict`` tells them apart, naming upstream's recipe (rule ``error.code``).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final

#: upstream's recipe code -> the error object OpenAI's API (or the profile design's example)
#: sends for the same case
OPENAI_ERRORS: Final = MappingProxyType({
    "missing_messages": {"type": "invalid_request_error", "code": "missing_required_parameter",
                         "message": "Missing required parameter: 'messages'."},
    "backend_error": {"type": "invalid_request_error", "code": "unsupported_model",
                      "message": "The requested model is not available."},
})


def openai_codes(event: dict[str, Any], _operation_id: int) -> dict[str, Any]:
    """The event with OpenAI's error object in place of an upstream-recipe code."""
    err = event.get("error")
    if event.get("type") != "response.error" or not isinstance(err, dict) \
            or err.get("code") not in OPENAI_ERRORS:
        return event
    return {**event, "error": dict(OPENAI_ERRORS[err["code"]])}
