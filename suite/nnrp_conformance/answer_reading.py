"""What a client reads of an OpenAI answer: the one reading of an answer's choices, for the
HTTP twin (``twin/answers.py``, which compares every choice, how many there are, and the usage
with the HTTP API's answer) and for the relations between requests (``checks/same_answers.py``,
which compare every choice of a request and its repeat).

Owns the readers of a final body (a chat completion, a Response, an embeddings list, a models
list: :func:`body_fields`, :func:`body_choices`), of OpenAI chat chunks (:func:`chunk_choices`:
an HTTP SSE stream's, and the ``openai_chunk``s NNRP events may carry) and of the profile
events of one NNRP operation (:func:`nnrp_choices`, :func:`streamed_usage`). Per choice (a
Response is one choice) it reads:

* ``text``: the text deltas of that choice index joined, else the body's content (a
  Response's ``output_text`` parts joined, as OpenAI's SDK joins them);
* ``tool_calls``: each call's name and arguments, the arguments parsed as JSON when they
  parse (a client parses them: key order and spacing say nothing), streamed calls for
  choice 0 (a profile tool-call event names no choice; a chat chunk's calls are its choice's),
  else the body's;
* ``finish_reason``: the chat choice's, or a Response's ``status`` (with its incomplete
  reason).

A streamed field is completed by the body's where the stream has none (:func:`merge`); a field
neither carries is None, never a guess. Ids, timestamps and models are not read: they are no
part of what an answer says.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.tool_calls import streamed_calls

__all__ = ["CHOICE_FIELDS", "body_choices", "body_fields", "calls_of", "chunk_choices",
           "final_body", "merge", "nnrp_choices", "response_fields", "streamed_usage",
           "usage_of"]

#: what each choice holds
CHOICE_FIELDS = ("text", "tool_calls", "finish_reason")
_EMPTY: dict[str, Any] = dict.fromkeys(CHOICE_FIELDS)


def _type(event: Any) -> str | None:
    return event.get("type") if isinstance(event, dict) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _index(value: Any) -> int:
    """A choice's (a call's) ``index``; 0 when it has none that is an integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_of(usage: Any) -> dict[str, int] | None:
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
    """Arguments read as JSON when they parse (key order and spacing do not matter)."""
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def calls_of(pairs: Sequence[tuple[Any, Any]]) -> list[dict[str, Any]] | None:
    """(name, arguments) pairs as a client reads them; None when there are none."""
    return [{"name": n, "arguments": _arguments(a)} for n, a in pairs] or None


def merge(stream: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The stream's fields, completed by the body's where the stream has none."""
    return {k: stream.get(k) if stream.get(k) is not None else body.get(k)
            for k in dict.fromkeys([*stream, *body])}


# --- bodies (an NNRP final body and an HTTP answer are the same OpenAI objects) -------------


def _chat_choice(choice: dict[str, Any]) -> dict[str, Any]:
    message = _dict(choice.get("message"))
    calls = [(_dict(c.get("function")).get("name"), _dict(c.get("function")).get("arguments"))
             for c in message.get("tool_calls") or () if isinstance(c, dict)]
    content = message.get("content")
    return {"text": content if isinstance(content, str) else "",
            "tool_calls": calls_of(calls), "finish_reason": choice.get("finish_reason")}


def _chat_choices(body: dict[str, Any]) -> dict[int, dict[str, Any]]:
    choices = body.get("choices")
    out: dict[int, dict[str, Any]] = {}
    for i, choice in enumerate(choices if isinstance(choices, list) else ()):
        if isinstance(choice, dict):
            index = choice.get("index")
            index = index if isinstance(index, int) and not isinstance(index, bool) else i
            out.setdefault(index, _chat_choice(choice))
    return out


def _response_status(body: dict[str, Any]) -> Any:
    reason = _dict(body.get("incomplete_details")).get("reason")
    status = body.get("status")
    return f"{status}: {reason}" if reason else status


def response_fields(body: dict[str, Any]) -> dict[str, Any]:
    """A Response's one choice: its output_text parts joined, its calls, its status."""
    texts, calls = [], []
    for item in body.get("output") or ():
        item = _dict(item)
        if item.get("type") == "message":
            texts += [p.get("text", "") for p in item.get("content") or ()
                      if isinstance(p, dict) and p.get("type") == "output_text"]
        elif item.get("type") == "function_call":
            calls.append((item.get("name"), item.get("arguments")))
    return {"text": "".join(t for t in texts if isinstance(t, str)),
            "tool_calls": calls_of(calls), "finish_reason": _response_status(body)}


def body_choices(operation: str, body: Any) -> dict[int, dict[str, Any]]:
    """Each choice of a final chat completion or Response (a Response is choice 0)."""
    if not isinstance(body, dict):
        return {}
    if operation == contract.OP_CHAT_COMPLETIONS_CREATE:
        return _chat_choices(body)
    if operation == contract.OP_RESPONSES_CREATE:
        return {0: response_fields(body)}
    return {}


def body_fields(operation: str, body: Any) -> dict[str, Any]:
    """What the twin keeps of a final OpenAI object for ``operation`` beside its choices
    (:func:`body_choices`): choice 0 and the usage (chat, Responses), the vectors and usage
    (embeddings), the model ids (models)."""
    if not isinstance(body, dict):
        return {}
    if operation in (contract.OP_CHAT_COMPLETIONS_CREATE, contract.OP_RESPONSES_CREATE):
        return {**body_choices(operation, body).get(0, _EMPTY),
                "usage": usage_of(body.get("usage"))}
    if operation == contract.OP_EMBEDDINGS_CREATE:
        vectors = [_dict(d).get("embedding") for d in body.get("data") or ()]
        return {"embeddings": vectors if vectors else None, "usage": usage_of(body.get("usage"))}
    if operation == contract.OP_MODELS_LIST:
        return {"models": sorted(str(_dict(m).get("id")) for m in body.get("data") or ())}
    return {}


# --- chat chunks: an HTTP SSE stream's, an NNRP event's openai_chunk ---------------------------


def chunk_choices(chunks: Sequence[Any]) -> dict[int, dict[str, Any]]:
    """Each choice of OpenAI ``chat.completion.chunk`` objects, by index, as a streaming client
    reads it: the ``delta.content`` of that index joined ("" when it sent none), its
    ``delta.tool_calls`` assembled by call index (the first name, the argument pieces joined),
    its last ``finish_reason``. A choice is there when some chunk names its index."""
    texts: dict[int, list[str]] = {}
    calls: dict[int, dict[int, list[Any]]] = {}
    finish: dict[int, Any] = {}
    for chunk in chunks:
        for choice in _dict(chunk).get("choices") or ():
            if not isinstance(choice, dict):
                continue
            index = _index(choice.get("index"))
            text = texts.setdefault(index, [])
            delta = _dict(choice.get("delta"))
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for call in delta.get("tool_calls") or ():
                call = _dict(call)
                fn = _dict(call.get("function"))
                slot = calls.setdefault(index, {}).setdefault(_index(call.get("index")),
                                                              [None, ""])
                slot[0] = slot[0] or fn.get("name")
                slot[1] += fn["arguments"] if isinstance(fn.get("arguments"), str) else ""
            finish[index] = choice.get("finish_reason") or finish.get(index)
    out = {}
    for i in sorted(texts):
        assembled = [(name, arguments) for _, (name, arguments) in sorted(calls.get(i, {}).items())]
        out[i] = {"text": "".join(texts[i]), "tool_calls": calls_of(assembled),
                  "finish_reason": finish.get(i)}
    return out


# --- the NNRP side: the profile events of one operation ---------------------------------------


def _streamed_choices(partial: Sequence[Any]) -> dict[int, dict[str, Any]]:
    texts: dict[int, list[str]] = {}
    for e in partial:
        if _type(e) == contract.EV_OUTPUT_TEXT_DELTA and isinstance(e.get("delta"), str):
            texts.setdefault(_index(e.get("index")), []).append(e["delta"])
    # the text is the profile's deltas; a chunk an event carries says how each choice finished
    finish = {i: c["finish_reason"] for i, c in chunk_choices(
        [_dict(e).get("openai_chunk") for e in partial]).items() if c["finish_reason"]}
    calls = calls_of([(c.name, c.arguments) for c in streamed_calls(partial) or []])
    out = {i: {"text": "".join(texts[i]) if i in texts else None,
               "tool_calls": calls if i == 0 else None, "finish_reason": finish.get(i)}
           for i in sorted({0, *texts, *finish})}
    return out


def streamed_usage(events: Sequence[Any]) -> dict[str, int] | None:
    """The last ``response.usage`` an operation streamed, read as :func:`usage_of`."""
    usage = [e.get("usage") for e in events if _type(e) == contract.EV_USAGE]
    return usage_of(usage[-1]) if usage else None


def final_body(events: Sequence[Any]) -> Any:
    """The body of an operation's ``response.completed`` terminal event, else None."""
    last = _dict(events[-1]) if events else {}
    return last.get("body") if _type(last) == contract.EV_COMPLETED else None


def nnrp_choices(operation: str, events: Sequence[Any]) -> dict[int, dict[str, Any]]:
    """Each choice of a successful NNRP operation (its partial events then its terminal
    event): what it streamed, completed by its final body."""
    partial = [e for e in events if _type(e) not in contract.TERMINAL_EVENT_TYPES]
    stream = _streamed_choices(partial)
    body = body_choices(operation, final_body(events))
    return {i: merge(stream.get(i, _EMPTY), body.get(i, {}))
            for i in sorted({*stream, *body})}
