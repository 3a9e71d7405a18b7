"""What an answer amounts to, read the same way from both sides of the twin.

Owns :class:`Answer` (outcome, error family and code, the compared fields: choice 0's
``text``, ``finish_reason``, ``tool_calls``, and ``usage``, ``embeddings``, ``models``; and a
chat completion's every choice by index, ``choices``) and the two readers: :func:`from_nnrp`
(the profile events one case received) and :func:`from_http` (:class:`~.http.HttpAnswer`: a
JSON body, or a chat completion / Responses SSE stream).

A streamed answer is read as a streaming client reads it (each choice's text deltas joined,
its tool calls assembled, the usage sent), a plain one from its body; where a stream lacks a
field its final body has (the NNRP ``response.completed`` body, the Responses
``response.completed`` event), the body's is taken. A field one side does not carry is absent
(None), never a guess: the comparison skips it. Both sides are read with
:mod:`nnrp_conformance.answer_reading`, the one reading of an answer that the relations
between requests use too: the bodies on both sides, the NNRP events, and the HTTP chat
chunks (``chunk_choices``, which reads the ``openai_chunk`` of an NNRP event too). A Response
is one choice (``fields``). The HTTP error family is the error body's ``type`` when it is one
of the profile's families, else the status code's (:func:`family_of_status`); the raw type
and status are kept for the side-by-side view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.answer_reading import (
    body_choices,
    body_fields,
    chunk_choices,
    final_body,
    merge,
    nnrp_choices,
    response_fields,
    streamed_usage,
    usage_of,
)
from nnrp_conformance.twin.http import HttpAnswer

__all__ = ["Answer", "family_of_status", "from_http", "from_nnrp"]

SUCCESS = "success"
ERROR = "error"


@dataclass
class Answer:
    """One side's answer: ``outcome`` success / error (None: no answer at all)."""

    outcome: str | None
    error_type: str | None = None
    error_code: Any = None
    #: the raw error as that side sent it (type, code, message, HTTP status)
    error_raw: dict[str, Any] | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    #: a successful chat completion's choices by index (choice 0's are in ``fields`` too);
    #: empty for the other operations (a Response is one choice: ``fields``)
    choices: dict[int, dict[str, Any]] = field(default_factory=dict)

    def view(self) -> dict[str, Any]:
        """The answer for a side-by-side table (JSON-safe): choice 0's fields, and the
        others' under ``other_choices`` when there are others."""
        out: dict[str, Any] = {"outcome": self.outcome}
        if self.outcome == ERROR:
            out["error"] = self.error_raw
        out.update({k: v for k, v in self.fields.items() if v is not None})
        others = {str(i): {k: v for k, v in c.items() if v is not None}
                  for i, c in self.choices.items() if i != 0}
        if others:
            out["other_choices"] = others
        return out


def _type(event: Any) -> str | None:
    return event.get("type") if isinstance(event, dict) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# --- the NNRP side ---------------------------------------------------------------------------


def from_nnrp(operation: str, terminal: str | None, events: Sequence[Any]) -> Answer:
    """The answer one case received over NNRP (its partial events then its terminal event):
    every choice and the usage, read as :mod:`nnrp_conformance.answer_reading` reads them."""
    if terminal is None:
        return Answer(None)
    last = _dict(events[-1]) if events else {}
    if terminal != contract.TERMINAL_SUCCESS:
        error = _dict(last.get("error")) if _type(last) == contract.EV_ERROR else {}
        raw: dict[str, Any] = {k: error.get(k) for k in ("type", "code", "message")
                               if k in error}
        return Answer(ERROR if terminal == contract.TERMINAL_ERROR else terminal,
                      error.get("type") if isinstance(error.get("type"), str) else None,
                      error.get("code"), raw or {"terminal": terminal})
    choices = nnrp_choices(operation, events)
    stream = {**choices.get(0, {}), "usage": streamed_usage(events)}
    return Answer(SUCCESS, fields=merge(stream, body_fields(operation, final_body(events))),
                  choices=_chat_only(operation, choices))


def _chat_only(operation: str, choices: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """``choices`` for a chat completion; none for the rest (a Response is one choice, and
    the request's ``n`` that decides how many there are is chat's)."""
    return choices if operation == contract.OP_CHAT_COMPLETIONS_CREATE else {}


# --- the HTTP side ---------------------------------------------------------------------------


def family_of_status(status: int | None) -> str | None:
    """The profile's error family of an HTTP error status (docs/twin.md#errors)."""
    if status is None or status < 400:
        return None
    if status == 429:
        return contract.ERR_TYPE_RATE_LIMIT
    if status in (408, 504):
        return contract.ERR_TYPE_TIMEOUT
    return contract.ERR_TYPE_INVALID_REQUEST if status < 500 else contract.ERR_TYPE_SERVER


def _http_error(error: Any, status: int | None) -> Answer:
    """An HTTP error answer: OpenAI's ``{"error": {...}}`` or a bare error object."""
    err = _dict(error)
    inner = _dict(err.get("error")) or err
    raw: dict[str, Any] = {k: inner.get(k) for k in ("type", "code", "message") if k in inner}
    raw["http_status"] = status
    kind = inner.get("type")
    family = kind if kind in contract.ERROR_TYPES else family_of_status(status)
    return Answer(ERROR, family or contract.ERR_TYPE_SERVER, inner.get("code"), raw)


def _chat_stream(chunks: Sequence[dict[str, Any]]) -> Answer:
    """A chat completion SSE stream: each choice as ``answer_reading.chunk_choices`` reads it
    (choice 0 is there even when no chunk names it, as on the NNRP side), the last usage."""
    choices = chunk_choices(chunks)
    choices.setdefault(0, {"text": "", "tool_calls": None, "finish_reason": None})
    usage = next((c["usage"] for c in reversed(chunks) if c.get("usage")), None)
    return Answer(SUCCESS, fields={**choices[0], "usage": usage_of(usage)},
                  choices=dict(sorted(choices.items())))


def _responses_stream(events: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], Any]:
    """(fields, an error event or None) of a Responses SSE stream."""
    deltas = [str(e["delta"]) for e in events
              if e.get("type") == "response.output_text.delta" and isinstance(e.get("delta"), str)]
    final: dict[str, Any] = {}
    for e in events:
        if e.get("type") in ("response.completed", "response.incomplete", "response.failed"):
            final = _dict(e.get("response"))
        if e.get("type") == "error" or (e.get("type") == "response.failed"
                                         and _dict(final.get("error"))):
            return {}, e if e.get("type") == "error" else final.get("error")
    stream = {"text": "".join(deltas) if deltas else None}
    body = {**response_fields(final), "usage": usage_of(final.get("usage"))} if final else {}
    return merge(stream, body), None


def from_http(operation: str, answer: HttpAnswer) -> Answer:
    """The answer the HTTP API sent (:class:`~.http.HttpAnswer`)."""
    if answer.problem is not None and answer.status is None:
        return Answer(None)
    status = answer.status
    if status is not None and status >= 400:
        return _http_error(answer.body, status)
    if not answer.stream or not answer.events:
        # a Responses object always has an ``error`` member: null on success
        if isinstance(answer.body, dict) and answer.body.get("error") is not None \
                and status == 200 and operation != contract.OP_MODELS_LIST:
            return _http_error(answer.body, status)
        return Answer(SUCCESS, fields=body_fields(operation, answer.body),
                      choices=_chat_only(operation, body_choices(operation, answer.body)))
    chunks = [e for e in answer.events if isinstance(e, dict)]
    errors = [e for e in chunks if e.get("error") is not None and not e.get("type")]
    if errors:  # an error sent inside a 200 stream (vLLM's way)
        return _http_error(errors[0], None)
    if operation == contract.OP_RESPONSES_CREATE:
        fields, error = _responses_stream(chunks)
        return _http_error(error, None) if error is not None else Answer(SUCCESS, fields=fields)
    return _chat_stream(chunks)
