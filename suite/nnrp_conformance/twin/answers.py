"""What an answer amounts to, read the same way from both sides of the twin.

Owns :class:`Answer` (outcome, error family and code, and the compared fields: ``text``,
``finish_reason``, ``tool_calls``, ``usage``, ``embeddings``, ``models``) and the two
readers: :func:`from_nnrp` (the profile events one case received) and :func:`from_http`
(:class:`~.http.HttpAnswer`: a JSON body, or a chat completion / Responses SSE stream).

A streamed answer is read as a streaming client reads it (the text deltas joined, the tool
calls assembled, the usage sent), a plain one from its body; where a stream lacks a field
its final body has (the NNRP ``response.completed`` body, the Responses ``response.completed``
event), the body's is taken. A field one side does not carry is absent (None), never a guess:
the comparison skips it. The HTTP error family is the error body's ``type`` when it is one
of the profile's families, else the status code's (:func:`family_of_status`); the raw type
and status are kept for the side-by-side view.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.tool_calls import streamed_calls
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

    def view(self) -> dict[str, Any]:
        """The answer for a side-by-side table (JSON-safe)."""
        out: dict[str, Any] = {"outcome": self.outcome}
        if self.outcome == ERROR:
            out["error"] = self.error_raw
        out.update({k: v for k, v in self.fields.items() if v is not None})
        return out


def _type(event: Any) -> str | None:
    return event.get("type") if isinstance(event, dict) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _usage(usage: Any) -> dict[str, int] | None:
    """``{"input", "output", "total"}`` of whichever names a usage uses (chat's prompt /
    completion, the profile's and Responses' input / output; embeddings have no output)."""
    if not isinstance(usage, dict):
        return None
    names = {"input": ("input_tokens", "prompt_tokens"),
             "output": ("output_tokens", "completion_tokens"), "total": ("total_tokens",)}
    out = {}
    for key, candidates in names.items():
        for name in candidates:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                out[key] = value
                break
    return out or None


def _arguments(text: Any) -> Any:
    """Arguments compared as JSON when they parse (key order and spacing do not matter)."""
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _calls(pairs: Sequence[tuple[Any, Any]]) -> list[dict[str, Any]] | None:
    return [{"name": n, "arguments": _arguments(a)} for n, a in pairs] or None


# --- bodies (an NNRP final body and an HTTP answer are the same OpenAI objects) -------------


def _chat_body(body: dict[str, Any]) -> dict[str, Any]:
    choices = body.get("choices")
    choice = _dict(choices[0]) if isinstance(choices, list) and choices else {}
    message = _dict(choice.get("message"))
    calls = [(_dict(c.get("function")).get("name"), _dict(c.get("function")).get("arguments"))
             for c in message.get("tool_calls") or () if isinstance(c, dict)]
    content = message.get("content")
    return {"text": content if isinstance(content, str) else "" if choice else None,
            "finish_reason": choice.get("finish_reason"), "tool_calls": _calls(calls),
            "usage": _usage(body.get("usage"))}


def _response_status(body: dict[str, Any]) -> Any:
    reason = _dict(body.get("incomplete_details")).get("reason")
    status = body.get("status")
    return f"{status}: {reason}" if reason else status


def _response_body(body: dict[str, Any]) -> dict[str, Any]:
    texts, calls = [], []
    for item in body.get("output") or ():
        item = _dict(item)
        if item.get("type") == "message":
            texts += [p.get("text", "") for p in item.get("content") or ()
                      if isinstance(p, dict) and p.get("type") == "output_text"]
        elif item.get("type") == "function_call":
            calls.append((item.get("name"), item.get("arguments")))
    return {"text": "".join(t for t in texts if isinstance(t, str)),
            "finish_reason": _response_status(body), "tool_calls": _calls(calls),
            "usage": _usage(body.get("usage"))}


def _embeddings_body(body: dict[str, Any]) -> dict[str, Any]:
    vectors = [_dict(d).get("embedding") for d in body.get("data") or ()]
    return {"embeddings": vectors if vectors else None, "usage": _usage(body.get("usage"))}


def _models_body(body: dict[str, Any]) -> dict[str, Any]:
    ids = sorted(str(_dict(m).get("id")) for m in body.get("data") or ())
    return {"models": ids}


def body_fields(operation: str, body: Any) -> dict[str, Any]:
    """The compared fields of a final OpenAI object for ``operation``."""
    if not isinstance(body, dict):
        return {}
    reader = {contract.OP_CHAT_COMPLETIONS_CREATE: _chat_body,
              contract.OP_RESPONSES_CREATE: _response_body,
              contract.OP_EMBEDDINGS_CREATE: _embeddings_body,
              contract.OP_MODELS_LIST: _models_body}.get(operation)
    return reader(body) if reader else {}


def _merge(stream: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The stream's fields, completed by the body's where the stream has none."""
    return {k: stream.get(k) if stream.get(k) is not None else body.get(k)
            for k in dict.fromkeys([*stream, *body])}


# --- the NNRP side ---------------------------------------------------------------------------


def from_nnrp(operation: str, terminal: str | None, events: Sequence[Any]) -> Answer:
    """The answer one case received over NNRP (its partial events then its terminal event)."""
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
    body = body_fields(operation, last.get("body")) if _type(last) == contract.EV_COMPLETED \
        else {}
    partial = [e for e in events if _type(e) not in contract.TERMINAL_EVENT_TYPES]
    deltas = [e.get("delta") for e in partial if _type(e) == contract.EV_OUTPUT_TEXT_DELTA
              and e.get("index", 0) == 0 and isinstance(e.get("delta"), str)]
    usage = [e.get("usage") for e in partial if _type(e) == contract.EV_USAGE]
    streamed = streamed_calls(partial) or []
    chunks = [_dict(e.get("openai_chunk")) for e in partial]
    finish = [c.get("finish_reason") for ch in chunks for c in ch.get("choices") or ()
              if isinstance(c, dict) and c.get("finish_reason")]
    stream = {"text": "".join(deltas) if deltas else None,
              "tool_calls": _calls([(c.name, c.arguments) for c in streamed]),
              "usage": _usage(usage[-1]) if usage else None,
              "finish_reason": finish[-1] if finish else None}
    return Answer(SUCCESS, fields=_merge(stream, body))


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


def _chat_stream(chunks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    text: list[str] = []
    calls: dict[int, list[Any]] = {}
    finish = usage = None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            choice = _dict(choice)
            if choice.get("index", 0) != 0:
                continue
            delta = _dict(choice.get("delta"))
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for call in delta.get("tool_calls") or ():
                call = _dict(call)
                fn = _dict(call.get("function"))
                slot = calls.setdefault(call.get("index", 0), [None, ""])
                slot[0] = slot[0] or fn.get("name")
                slot[1] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    return {"text": "".join(text), "finish_reason": finish,
            "tool_calls": _calls([(n, a) for _, (n, a) in sorted(calls.items())]),
            "usage": _usage(usage)}


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
    return _merge(stream, _response_body(final) if final else {}), None


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
        return Answer(SUCCESS, fields=body_fields(operation, answer.body))
    chunks = [e for e in answer.events if isinstance(e, dict)]
    errors = [e for e in chunks if e.get("error") is not None and not e.get("type")]
    if errors:  # an error sent inside a 200 stream (vLLM's way)
        return _http_error(errors[0], None)
    if operation == contract.OP_RESPONSES_CREATE:
        fields, error = _responses_stream(chunks)
        return _http_error(error, None) if error is not None else Answer(SUCCESS, fields=fields)
    return Answer(SUCCESS, fields=_chat_stream(chunks))
