"""The minimal endpoint's input-handling defects: requests no fixed recipe sends, handled
wrongly (docs/generation.md#the-example-endpoints-input-defects).

Each is one defect of the registry (``defects.py``): a valid request with an optional field
the recipes never send answered with an error, an invalid body answered, a character split
across two text deltas, ``max_tokens``, ``max_completion_tokens``, ``stop`` (or all of a stop
list but its first), ``n``, JSON mode or a usage asked for ignored, an answer at temperature 0
that changes by chance, with ``user`` or with the session, an answer id that each session
numbers anew, a long prompt never ended, an
unknown role never answered, a session that stops serving after an invalid request, a field
of OpenAI's API the validator does not list answered with a server error, a tool
called where tool_choice says none, an answer cached under the wrong key, and an envelope
refused for what §6 makes optional (no
request_id) or for its nnrp hints forwarded into the body. With none switched on, the chat
"model" (``chat_profile``) handles every such input correctly.
"""

from __future__ import annotations

import contextvars
import json
import random
from collections.abc import Iterator
from typing import Any

from chat_body import MESSAGE_ROLES
from envelope import ProfileError

#: defect -> its one-line description (merged into defects.DEFECTS)
INPUT_DEFECTS = {
    "seed-server-error": "a chat request with 'seed' is answered with a server_error",
    "multipart-server-error": (
        "a chat message whose content is an array of text parts is answered with a "
        "server_error"),
    "metadata-refused-unnamed": (
        "a chat request with 'metadata' is refused with invalid_request and a message that "
        "names nothing"),
    "missing-model-accepted": "a chat body without 'model' is answered with the served model",
    "negative-max-tokens-accepted": (
        "a max_tokens of 0 or less is taken as no limit instead of refused"),
    "ignores-max-tokens": "max_tokens is ignored: every answer is 16 tokens long",
    "ignores-stop": "the stop list is ignored: the text runs on past a stop sequence",
    "split-multibyte": (
        "a character of 2 or more UTF-8 bytes in a text delta is split across two deltas at a "
        "byte: each partial result is invalid UTF-8"),
    "lone-surrogate": (
        "a character outside the BMP in a text delta is sent as two UTF-16 surrogates, one "
        "per delta (each a lone surrogate)"),
    "long-prompt-no-terminal": (
        "a prompt of more than 4000 characters is answered without a terminal"),
    "unknown-role-unanswered": (
        "a chat message with a role outside the five OpenAI roles is never answered: no "
        "event, no terminal"),
    "invalid-deafens-session": (
        "after an invalid chat body, the session's next operation is never answered"),
    "tool-choice-none-ignored": (
        "a chat request with tools and tool_choice 'none' is answered with a call to its "
        "first tool"),
    "answer-cache-wrong-key": (
        "non-streamed chat answers are cached under the model and top_p, not the request: a "
        "later request with the same top_p gets the first one's answer, id and all"),
    # OpenAI's own request shapes (the generator's openai_shapes.json): a field neither the
    # profile's §6 list, nor a fixed recipe, nor the hand-written generator sends
    "unknown-field-server-error": (
        "a chat request with a field of OpenAI's API that the example's validator does not "
        "list (logprobs, n, service_tier, …) is answered with a server_error"),
    # request fields and what OpenAI's semantics ask of their answer (issue 45 item 2)
    "ignores-max-completion-tokens": (
        "max_completion_tokens is ignored (max_tokens, its deprecated spelling, is honoured): "
        "such an answer is 16 tokens long"),
    "stop-list-first-only": (
        "of a stop list only the first sequence is honoured (a string is honoured)"),
    "n-ignored": "n is ignored: every chat answer carries one choice",
    "json-mode-ignored": (
        "response_format json_object is ignored: the answer is plain text, not JSON"),
    "responses-json-mode-ignored": (
        "responses: text.format json_object is ignored: the Response is plain text, not JSON"),
    "usage-lost-with-user": (
        "a chat stream with 'user' that asks for usage (stream_options.include_usage) gets "
        "none: the body rebuilt to move 'user' loses stream_options"),
    # relations between requests (issue 45 item 3)
    "temperature-zero-sampled": (
        "temperature 0 is read as the default (a falsy zero) and sampling ignores 'seed': the "
        "same request twice gets answers that open with other words"),
    "user-in-prompt": (
        "'user' is forwarded into the prompt: a request with it gets another answer than "
        "without it"),
    # relations across sessions (issue 45 item 3): each session alone is right
    "ids-per-session": (
        "an envelope without request_id gets an id derived from the frame id alone, which "
        "each session numbers anew: answers on two sessions share chat completion ids"),
    "seed-per-session": (
        "at temperature 0 the sampler is seeded from the session, not the request: the same "
        "request gets one answer on a session and another on the next"),
    # the envelope (profile §6): what no fixed recipe sends, since each sends a request_id
    "requires-request-id": "an envelope without request_id is refused (§6 makes it optional)",
    "forwards-nnrp-hints": (
        "the envelope's nnrp hints are forwarded into the body, whose validator refuses them "
        "as unknown arguments (§6: they must not be forwarded)"),
}
LONG_PROMPT_CHARS = 4000
#: the chat fields the example's validator lists: §6's familiar fields and the OpenAI fields
#: the fixed recipes and the hand-written generator send (unknown-field-server-error)
LISTED_CHAT_FIELDS = frozenset({
    "model", "messages", "input", "temperature", "top_p", "max_tokens", "tools",
    "tool_choice", "metadata", "stream", "stream_options", "stop", "seed",
    "max_completion_tokens", "ignore_eos"})


def token_limit(defect: str | None, body: dict[str, Any]) -> int | None:
    """The answer's token limit: max_completion_tokens, which supersedes the deprecated
    max_tokens (``ignores-max-completion-tokens``: max_tokens only)."""
    limit = body.get("max_tokens") if defect == "ignores-max-completion-tokens" \
        else body.get("max_completion_tokens") or body.get("max_tokens")
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def stops(defect: str | None, body: dict[str, Any]) -> list[str]:
    """The stop sequences honoured (``ignores-stop``: none; ``stop-list-first-only``: a
    list's first)."""
    stop = body.get("stop")
    items = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    if defect == "stop-list-first-only" and isinstance(stop, list):
        items = stop[:1]
    return [] if defect == "ignores-stop" else [s for s in items if isinstance(s, str) and s]


def choices(defect: str | None, body: dict[str, Any]) -> int:
    """How many choices the answer carries: ``n`` (``n-ignored``: one)."""
    n = body.get("n")
    return n if isinstance(n, int) and n >= 1 and defect != "n-ignored" else 1


def json_mode(defect: str | None, body: dict[str, Any]) -> bool:
    """Whether the answer is a JSON object (``json-mode-ignored``: never)."""
    form = body.get("response_format")
    return isinstance(form, dict) and form.get("type") == "json_object" \
        and defect != "json-mode-ignored"


def responses_json_mode(defect: str | None, body: dict[str, Any]) -> bool:
    """Whether a Response is a JSON object: ``text.format`` json_object
    (``responses-json-mode-ignored``: never)."""
    text = body.get("text")
    form = text.get("format") if isinstance(text, dict) else None
    return isinstance(form, dict) and form.get("type") == "json_object" \
        and defect != "responses-json-mode-ignored"


def usage_asked(defect: str | None, body: dict[str, Any]) -> bool:
    """Whether a chat stream sends its usage (``usage-lost-with-user``: not with 'user')."""
    options = body.get("stream_options")
    asked = isinstance(options, dict) and options.get("include_usage") is True
    return asked and not (defect == "usage-lost-with-user" and "user" in body)


def sampled(defect: str | None, body: dict[str, Any], words: list[str]) -> list[str]:
    """The words the answer echoes: ``temperature-zero-sampled`` opens them with a word drawn
    by chance at temperature 0; ``user-in-prompt`` with the user's id."""
    if defect == "user-in-prompt" and isinstance(body.get("user"), str):
        return [body["user"], *words]
    if defect == "temperature-zero-sampled" and body.get("temperature") == 0:
        return [f"{_SAMPLER.choice(_OPENERS)}{_SAMPLER.randrange(1000)}", *words]
    if defect == "seed-per-session" and body.get("temperature") == 0:
        return [f"{_OPENERS[SESSION.get() % len(_OPENERS)]}{SESSION.get()}", *words]
    return words


_SAMPLER = random.Random()
_OPENERS = ("so", "well", "ok", "hm")
#: the number of the session planning the request (session.py sets it: seed-per-session)
SESSION: contextvars.ContextVar[int] = contextvars.ContextVar("session", default=0)


def derived_request_id(defect: str | None, op_id: int, serial: int) -> str:
    """The request id of an envelope without one: from the frame id (§6), made unique in the
    process by ``serial`` (``ids-per-session``: the frame id alone, which restarts with each
    session)."""
    return f"op{op_id}" if defect == "ids-per-session" else f"op{op_id}-{serial}"


def refuse(defect: str | None, body: dict[str, Any]) -> None:
    """The defects that refuse a valid chat body (raise ProfileError)."""
    if defect == "seed-server-error" and "seed" in body:
        raise ProfileError("internal_error", "sampling failed")
    if defect == "multipart-server-error" and any(
            isinstance(m, dict) and isinstance(m.get("content"), list)
            for m in body.get("messages") or ()):
        raise ProfileError("internal_error", "the backend failed")
    if defect == "metadata-refused-unnamed" and "metadata" in body:
        raise ProfileError("invalid_request", "request not supported")
    if defect == "unknown-field-server-error" and set(body) - LISTED_CHAT_FIELDS:
        # a validator that looks the field up in its table and fails on a miss
        raise ProfileError("internal_error", "KeyError in the request validator")


#: answer-cache-wrong-key: (model, top_p) -> the first answer's body
_CACHE: dict[tuple[str, Any], dict[str, Any]] = {}


def cached_answer(defect: str | None, request: dict[str, Any], model: str,
                  body: dict[str, Any]) -> dict[str, Any]:
    """The completion body ``answer-cache-wrong-key`` sends: the first one cached under the
    model and ``top_p`` of a non-streamed request (no fixed recipe sends top_p)."""
    if defect != "answer-cache-wrong-key" or request.get("stream") or "top_p" not in request:
        return body
    return json.loads(json.dumps(_CACHE.setdefault((model, json.dumps(request["top_p"])), body)))


def tool_choice_fault(defect: str | None, body: dict[str, Any],
                      tool: dict[str, Any] | None) -> dict[str, Any] | None:
    """The tool the defects call: ``tool-choice-none-ignored`` calls the first one."""
    tools = body.get("tools")
    if defect == "tool-choice-none-ignored" and body.get("tool_choice") == "none" \
            and isinstance(tools, list) and tools and isinstance(tools[0], dict):
        fn = tools[0].get("function")
        return fn if isinstance(fn, dict) else tool
    return tool


def envelope_fault(defect: str | None, envelope: dict[str, Any]) -> None:
    """The defects that refuse a valid envelope (raise ProfileError)."""
    if defect == "requires-request-id" and "request_id" not in envelope:
        raise ProfileError("invalid_request", "request_id is required")
    hints = envelope.get("nnrp")
    if defect == "forwards-nnrp-hints" and isinstance(hints, dict) and hints:
        # the hints read as body fields, which the body's validator does not know
        raise ProfileError("invalid_request",
                           f"Unrecognized request argument supplied: {sorted(hints)[0]}")


def lenient(defect: str | None, body: dict[str, Any], model: str) -> dict[str, Any]:
    """The body as the defects that answer an invalid one read it."""
    if defect == "missing-model-accepted" and "model" not in body:
        return {**body, "model": model}
    if defect == "negative-max-tokens-accepted" and isinstance(body.get("max_tokens"), int) \
            and body["max_tokens"] <= 0:
        return {k: v for k, v in body.items() if k != "max_tokens"}
    return body


def _delta(prefix: bytes, text: bytes) -> bytes:
    return prefix + text + b'"}'


def split_delta(defect: str | None, token: str) -> Iterator[bytes] | None:
    """The two text deltas the splitting defects send for ``token`` (None: sent whole)."""
    prefix = b'{"type":"response.output_text.delta","index":0,"delta":'
    if defect == "split-multibyte":
        at = next((i for i, c in enumerate(token) if len(c.encode()) > 1), None)
        if at is None:
            return None
        raw = json.dumps(token[:at], ensure_ascii=False).encode()[:-1]
        char = token[at].encode()
        rest = json.dumps(token[at + 1:], ensure_ascii=False).encode()[1:-1]
        return iter((_delta(prefix, raw + char[:1]), _delta(prefix + b'"', char[1:] + rest)))
    if defect == "lone-surrogate":
        at = next((i for i, c in enumerate(token) if ord(c) > 0xFFFF), None)
        if at is None:
            return None
        both = json.dumps(token[at])[1:-1].encode()  # "\\ud83d\\ude00"
        head = json.dumps(token[:at]).encode()[:-1]
        tail = json.dumps(token[at + 1:]).encode()[1:-1]
        return iter((_delta(prefix, head + both[:6]), _delta(prefix + b'"', both[6:] + tail)))
    return None


def unanswered(defect: str | None, body: dict[str, Any]) -> bool:
    """unknown-role-unanswered: this body is never answered."""
    return defect == "unknown-role-unanswered" and any(
        isinstance(m, dict) and m.get("role") not in MESSAGE_ROLES
        for m in body.get("messages") or () if isinstance(body.get("messages"), list))


def never_ends(defect: str | None, prompt: str) -> bool:
    """long-prompt-no-terminal: this prompt's answer gets no terminal."""
    return defect == "long-prompt-no-terminal" and len(prompt) > LONG_PROMPT_CHARS


def deafens(defect: str | None, terminal: dict[str, Any] | None) -> bool:
    """invalid-deafens-session: this answer (an invalid body's) deafens the session."""
    error = (terminal or {}).get("error")
    return defect == "invalid-deafens-session" and isinstance(error, dict) \
        and error.get("type") == "invalid_request_error"
