"""The profile-level checks of each operation's request body, before the backend sees it.

Each check raises a :class:`.profile.ProfileError` whose ``response.error`` names the field, so
the answer never depends on how vLLM words a rejection: ``chat.completions.create`` (spec §8:
a body without ``messages`` is ``missing_messages``), ``responses.create`` and ``models.list``
(docs/levels.md). It also owns the request fields only the operator may enable, refused in
every operation's body alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nnrp_conformance import contract

from .profile import ProfileError

__all__ = [
    "OPERATOR_ONLY_FIELDS",
    "RESPONSES_STATE_FIELDS",
    "check_chat_body",
    "check_models_body",
    "check_responses_body",
]

#: request body fields that could make vLLM load a template, a module or a file the operator
#: did not configure; refused unless the operator allows them explicitly.
OPERATOR_ONLY_FIELDS: frozenset[str] = frozenset(
    {"chat_template", "logits_processors", "mm_processor_kwargs", "kv_transfer_params"}
)

#: Responses request members that ask for server-side state (a kept response, a background
#: run, a continuation of a kept response); the adapter keeps none, so each is refused when
#: it asks for it (docs/levels.md#level2-request), never ignored silently as vLLM does with
#: ``store`` by default.
RESPONSES_STATE_FIELDS: tuple[str, ...] = ("store", "background", "previous_response_id")


def _object(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise ProfileError(contract.ERR_INVALID_REQUEST, "body must be a JSON object", param="body")
    return body


def _typed(body: Mapping[str, Any], name: str, kind: type, what: str) -> None:
    if name in body and not isinstance(body[name], kind):
        raise ProfileError(
            contract.ERR_INVALID_REQUEST, f"body.{name} must be {what}", param=f"body.{name}"
        )


def _refuse_operator_fields(body: Mapping[str, Any], allowed: Iterable[str]) -> None:
    refused = sorted(set(body) & (OPERATOR_ONLY_FIELDS - set(allowed)))
    if refused:
        raise ProfileError(
            contract.ERR_INVALID_REQUEST,
            f"body.{refused[0]} is not accepted: the operator has not enabled it",
            param=f"body.{refused[0]}",
        )


def check_chat_body(body: Any, *, allowed_operator_fields: Iterable[str] = ()) -> None:
    """Profile-level checks of a chat body that must not depend on the backend's wording."""
    body = _object(body)
    if "messages" not in body:
        raise ProfileError(
            contract.ERR_MISSING_MESSAGES, "body.messages is required", param="body.messages"
        )
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise ProfileError(
            contract.ERR_INVALID_REQUEST,
            "body.messages must be a non-empty array of message objects",
            param="body.messages",
        )
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ProfileError(
                contract.ERR_INVALID_REQUEST,
                f"body.messages[{i}] must be an object with a string 'role'",
                param=f"body.messages.{i}",
            )
    _typed(body, "model", str, "a string")
    _typed(body, "stream", bool, "a boolean")
    _refuse_operator_fields(body, allowed_operator_fields)


def check_responses_body(body: Any, *, allowed_operator_fields: Iterable[str] = ()) -> None:
    """A Responses request: ``input`` a string or an array of input items (else
    ``invalid_request``: the profile has no Responses counterpart of ``missing_messages``),
    and no member asking for server-side state."""
    body = _object(body)
    if "input" not in body:
        raise ProfileError(
            contract.ERR_INVALID_REQUEST,
            "body.input is required (a string, or an array of input items)",
            param="body.input",
        )
    if not isinstance(body["input"], str | list):
        raise ProfileError(
            contract.ERR_INVALID_REQUEST,
            f"body.input must be a string or an array of input items, not "
            f"{type(body['input']).__name__}",
            param="body.input",
        )
    _typed(body, "model", str, "a string")
    _typed(body, "stream", bool, "a boolean")
    for name in RESPONSES_STATE_FIELDS:
        value = body.get(name)
        if value is not None and value is not False:
            raise ProfileError(
                contract.ERR_INVALID_REQUEST,
                f"body.{name} asks for server-side state, which this endpoint does not keep "
                "(store, background and previous_response_id are outside the profile)",
                param=f"body.{name}",
            )
    _refuse_operator_fields(body, allowed_operator_fields)


def check_models_body(body: Any) -> None:
    """``models.list`` takes an object and ignores its members (OpenAI's ``GET /v1/models``
    has no parameters)."""
    _object(body)


def check_embeddings_body(body: Any, *, allowed_operator_fields: Iterable[str] = ()) -> None:
    """An embeddings request (docs/levels.md#embeddings): ``input`` a non-empty string, or a
    non-empty array of non-empty strings (or of token arrays, as OpenAI allows); ``dimensions``
    a positive integer; ``encoding_format`` ``float`` (a base64 body is not the profile's
    array of numbers); no stream (embeddings have none). Anything else is ``invalid_request``,
    as OpenAI answers it with 400."""
    body = _object(body)
    value = body.get("input")
    problem = _embeddings_input_problem(value) if "input" in body else "is required"
    if problem:
        raise ProfileError(
            contract.ERR_INVALID_REQUEST,
            f"body.input {problem} (a non-empty string, or an array of them)",
            param="body.input",
        )
    _typed(body, "model", str, "a string")
    dims = body.get("dimensions")
    if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims < 1):
        raise ProfileError(contract.ERR_INVALID_REQUEST,
                           "body.dimensions must be a positive integer", param="body.dimensions")
    if body.get("encoding_format", "float") != "float":
        raise ProfileError(contract.ERR_INVALID_REQUEST,
                           "body.encoding_format must be \"float\": the profile's embeddings are "
                           "arrays of numbers", param="body.encoding_format")
    if body.get("stream") not in (None, False):
        raise ProfileError(contract.ERR_INVALID_REQUEST,
                           "embeddings have no stream (body.stream)", param="body.stream")
    _refuse_operator_fields(body, allowed_operator_fields)


def _embeddings_input_problem(value: Any) -> str | None:
    """Why ``value`` is not an embeddings input, or None."""
    if isinstance(value, str):
        return "is an empty string" if not value else None
    if not isinstance(value, list):
        return f"must be a string or an array, not {type(value).__name__}"
    if not value:
        return "is an empty array"
    for i, item in enumerate(value):
        if isinstance(item, str):
            if not item:
                return f"[{i}] is an empty string"
        elif isinstance(item, list):
            if not item or not all(isinstance(t, int) and not isinstance(t, bool) for t in item):
                return f"[{i}] must be a non-empty array of token ids"
        elif not (isinstance(item, int) and not isinstance(item, bool)):
            return f"[{i}] must be a string, not {type(item).__name__}"
    return None
