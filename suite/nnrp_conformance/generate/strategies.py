"""The hypothesis strategies of generated requests: valid bodies of every operation a run
claims, drawn from the fields the profile names (design §6: ``model``, ``messages``,
``input``, ``temperature``, ``top_p``, ``max_tokens``, ``tools``, ``tool_choice``,
``metadata``, ``stream``) and the OpenAI request fields beside them (``stop``, ``seed``,
``stream_options``, multi-part content, every message role), and the three families built
on them (:class:`Draft`): a valid request, an invalid one (a valid base plus one named
mutation, ``mutations.py``) and a sequence on one session (operations in flight together, a
cancel at a drawn event).

A valid body keeps OpenAI's request semantics: a ``tool`` message follows the assistant
message that called it, ``stream_options`` only with ``stream: true``, ``tool_choice`` names
a tool of ``tools``. No text carries a lone surrogate (it cannot be sent as UTF-8).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from nnrp_conformance import contract
from nnrp_conformance.generate.mutations import MUTATIONS

FAMILY_VALID = "valid"
FAMILY_INVALID = "invalid"
FAMILY_SEQUENCE = "sequence"
FAMILIES = (FAMILY_VALID, FAMILY_INVALID, FAMILY_SEQUENCE)

@dataclass(frozen=True)
class Claim:
    """What a run may send of an operation: its name and the features its manifest claims."""

    operation: str
    streaming: bool = False
    tool_calls: bool = False
    cancellation: bool = False


@dataclass(frozen=True)
class Draft:
    """One generated request before it becomes a recipe: its family, operation, the valid
    body it is built on, and the mutation (invalid), cancel point and companions (sequence)."""

    family: str
    operation: str
    body: dict[str, Any]
    mutation: str | None = None
    cancel_after: int | None = None
    companions: tuple[Draft, ...] = field(default=())


#: generation stays cheap: a short answer is enough to judge a stream
MAX_TOKENS = 48
LONG_TEXT_CHARS = (2_000, 12_000)
_ROLES_BEFORE_USER = ("system", "developer")

# text: every plane of Unicode but no surrogate (Cs), no unassigned code point (Cn) and no
# "$" (a recipe reads "${NAME}" as a parameter)
_CHARS = st.characters(exclude_categories=("Cs", "Cn"), exclude_characters="$")
_WORD = st.text(st.characters(min_codepoint=ord("a"), max_codepoint=ord("z")),
                min_size=1, max_size=8)
#: words beyond ASCII: 2- and 3-byte UTF-8 (accents, CJK), and 4-byte (emoji, the planes
#: above the BMP: one character, two UTF-16 code units)
_NON_ASCII_WORD = st.text(st.characters(min_codepoint=0x80, max_codepoint=0xFFFF,
                                        exclude_categories=("Cs", "Cn", "Cc", "Z")),
                          min_size=1, max_size=6)
_ASTRAL_WORD = st.text(st.characters(min_codepoint=0x10000, exclude_categories=("Cs", "Cn")),
                       min_size=1, max_size=3)


def _short_text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(_WORD, min_size=1, max_size=8).map(" ".join),
        st.lists(st.one_of(_WORD, _NON_ASCII_WORD, _ASTRAL_WORD), min_size=1,
                 max_size=8).map(" ".join),
        st.text(_CHARS, min_size=1, max_size=40).filter(lambda s: s.strip() != ""),
    )


def _long_text() -> st.SearchStrategy[str]:
    return st.builds(lambda word, n: " ".join([word] * n), _WORD,
                     st.integers(LONG_TEXT_CHARS[0] // 6, LONG_TEXT_CHARS[1] // 6))


# Strategies are built once: hypothesis validates every new strategy object, which costs
# far more than drawing from one.
_SHORT = _short_text()
_TEXT = st.one_of(_SHORT, _SHORT, _SHORT, _long_text())


def _content(part_type: str) -> st.SearchStrategy[Any]:
    """A message's content: a string, or an array of text parts (multi-part content)."""
    parts = st.lists(_TEXT.map(lambda t: {"type": part_type, "text": t}),
                     min_size=1, max_size=3)
    return st.one_of(_TEXT, _TEXT, parts)


_CONTENT = {"text": _content("text"), "input_text": _content("input_text")}


_NAME = st.from_regex(r"\A[a-z][a-z0-9_]{0,15}\Z")
_PARAM_TYPES = ("string", "integer", "number", "boolean")


_PROPS = st.dictionaries(_NAME, st.sampled_from(_PARAM_TYPES), max_size=3)


@st.composite
def _function(draw: Callable[..., Any], name: str) -> dict[str, Any]:
    props = draw(_PROPS)
    fn: dict[str, Any] = {"name": name, "parameters": {
        "type": "object", "properties": {k: {"type": v} for k, v in props.items()}}}
    if props and draw(st.booleans()):
        fn["parameters"]["required"] = sorted(props)[:1]
    if draw(st.booleans()):
        fn["description"] = draw(_SHORT)
    return fn


_FUNCTION = _function("f")


@st.composite
def _tools(draw: Callable[..., Any], flat: bool) -> tuple[list[dict[str, Any]], Any]:
    """``tools`` and a ``tool_choice`` (absent: None) in every form OpenAI has."""
    names = draw(st.lists(_NAME, min_size=1, max_size=3, unique=True))
    fns = [{**draw(_FUNCTION), "name": n} for n in names]
    tools = [{"type": "function", **fn} if flat else {"type": "function", "function": fn}
             for fn in fns]
    named = st.sampled_from(names).map(
        (lambda n: {"type": "function", "name": n}) if flat
        else (lambda n: {"type": "function", "function": {"name": n}}))
    choice = draw(st.one_of(st.none(), st.sampled_from(("none", "auto", "required")), named))
    return tools, choice


_METADATA = st.dictionaries(_NAME, _SHORT.map(lambda s: s[:64]), max_size=4)
_TOOLS = {True: _tools(flat=True), False: _tools(flat=False)}


def _stop(words: Sequence[str]) -> st.SearchStrategy[Any]:
    """``stop``: a string or up to 4; often a word of the prompt, so that it can bite."""
    one = st.one_of(st.sampled_from(list(words)) if words else _WORD, _WORD)
    return st.one_of(one, st.lists(one, min_size=1, max_size=4, unique=True))


@st.composite
def _messages(draw: Callable[..., Any], tools: list[dict[str, Any]] | None) \
        -> list[dict[str, Any]]:
    """Every role: optional system/developer, user/assistant turns, an assistant tool call
    answered by a ``tool`` message, and a last ``user`` message."""
    out: list[dict[str, Any]] = []
    for role in _ROLES_BEFORE_USER:
        if draw(st.integers(0, 3)) == 0:
            out.append({"role": role, "content": draw(_CONTENT["text"])})
    for _ in range(draw(st.integers(0, 2))):
        out.append({"role": "user", "content": draw(_CONTENT["text"])})
        out.append({"role": "assistant", "content": draw(_TEXT)})
    if tools and draw(st.booleans()):
        name = tools[0]["function"]["name"]
        call_id = "call_" + draw(_NAME)
        out.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]})
        out.append({"role": "tool", "tool_call_id": call_id, "content": draw(_TEXT)})
    out.append({"role": "user", "content": draw(_CONTENT["text"])})
    return out


def _words(messages: list[dict[str, Any]]) -> list[str]:
    content = messages[-1].get("content")
    text = content if isinstance(content, str) else " ".join(
        p.get("text", "") for p in content or () if isinstance(p, dict))
    return text.split()[:50]


_OPTIONAL: dict[str, st.SearchStrategy[Any]] = {
    "temperature": st.sampled_from((0, 0.2, 0.7, 1, 1.5, 2)),
    "top_p": st.sampled_from((0.1, 0.5, 0.9, 1)),
    "seed": st.integers(0, 2**31 - 1),
    "metadata": _METADATA,
}
_LIMIT = st.integers(1, MAX_TOKENS)


@st.composite
def _common(draw: Callable[..., Any], body: dict[str, Any], claim: Claim, words: list[str],
            limit_key: str) -> dict[str, Any]:
    """The sampling fields every generating operation shares, each present or not."""
    if claim.streaming and draw(st.booleans()):
        body["stream"] = True
        if draw(st.booleans()):
            body["stream_options"] = {"include_usage": draw(st.booleans())}
    elif draw(st.booleans()):
        body["stream"] = False
    optional = {**_OPTIONAL, limit_key: _LIMIT}
    if limit_key == "max_tokens":
        optional["stop"] = _stop(words)
    for key, strategy in optional.items():
        if draw(st.booleans()):
            body[key] = draw(strategy)
    return body


@st.composite
def chat_body(draw: Callable[..., Any], claim: Claim, model: str) -> dict[str, Any]:
    tools, choice = draw(_TOOLS[False]) if claim.tool_calls and draw(st.booleans()) \
        else (None, None)
    messages = draw(_messages(tools))
    body: dict[str, Any] = {"model": model, "messages": messages}
    if tools:
        body["tools"] = tools
        if choice is not None:
            body["tool_choice"] = choice
    out: dict[str, Any] = draw(_common(body, claim, _words(messages), "max_tokens"))
    return out


_INPUT = st.one_of(_TEXT, st.lists(st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(("system", "developer", "user", "assistant")), _CONTENT["input_text"]),
    min_size=0, max_size=2).map(lambda xs: [*xs, {"role": "user", "content": "hello there"}]))


@st.composite
def responses_body(draw: Callable[..., Any], claim: Claim, model: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "input": draw(_INPUT)}
    if draw(st.booleans()):
        body["instructions"] = draw(_SHORT)
    if claim.tool_calls and draw(st.booleans()):
        tools, choice = draw(_TOOLS[True])
        body["tools"] = tools
        if choice is not None:
            body["tool_choice"] = choice
    out: dict[str, Any] = draw(_common(body, claim, [], "max_output_tokens"))
    return out


_EMBEDDING_INPUT = st.one_of(_SHORT, st.lists(_SHORT, min_size=1, max_size=4))


@st.composite
def embeddings_body(draw: Callable[..., Any], claim: Claim, model: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "input": draw(_EMBEDDING_INPUT)}
    if draw(st.booleans()):
        body["encoding_format"] = draw(st.sampled_from(("float", "base64")))
    return body


BODIES: dict[str, Callable[[Claim, str], st.SearchStrategy[dict[str, Any]]]] = {
    contract.OP_CHAT_COMPLETIONS_CREATE: chat_body,
    contract.OP_RESPONSES_CREATE: responses_body,
    contract.OP_EMBEDDINGS_CREATE: embeddings_body,
}


@functools.lru_cache(maxsize=64)
def body_of(claim: Claim, model: str) -> st.SearchStrategy[dict[str, Any]]:
    """The valid bodies of ``claim``'s operation (one strategy object per claim and model)."""
    return BODIES[claim.operation](claim, model)


#: a cancelled stream's length: its cancel point (<= 3 events) comes long before its end, as
#: in the cancel recipes (a shorter answer races the cancel: its terminal may cross it)
CANCELLED_TOKENS = 400


def cancellable(operation: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as a stream long enough to be cancelled mid-way: text only (no tool call, no
    stop sequence), ``CANCELLED_TOKENS`` long."""
    limit = "max_tokens" if operation == contract.OP_CHAT_COMPLETIONS_CREATE \
        else "max_output_tokens"
    out = {k: v for k, v in body.items() if k not in ("tools", "tool_choice", "stop")}
    if isinstance(out.get("messages"), list):
        out["messages"] = [m for m in out["messages"] if not (
            m.get("role") == "tool" or m.get("tool_calls"))]
    return {**out, limit: CANCELLED_TOKENS, "stream": True}


@st.composite
def drafts(draw: Callable[..., Any], claims: Sequence[Claim], model: str) -> Draft:
    """One generated request of any family, for one of ``claims``' operations."""
    claim = draw(st.sampled_from([c for c in claims if c.operation in BODIES]))
    body = draw(body_of(claim, model))
    family = draw(st.sampled_from(FAMILIES))
    if family == FAMILY_INVALID:
        names = [n for n, m in MUTATIONS.items() if claim.operation in m.operations]
        return Draft(family, claim.operation, body, mutation=draw(st.sampled_from(names)))
    streams = [c for c in claims if c.operation in BODIES and c.streaming and c.cancellation]
    if family == FAMILY_SEQUENCE and streams:
        lead = draw(st.sampled_from(streams))
        lead_body = {**draw(body_of(lead, model)), "stream": True}
        cancel = draw(st.one_of(st.none(), st.integers(1, 3)))
        if cancel is not None:
            lead_body = cancellable(lead.operation, lead_body)
        others: list[Draft] = []
        for _ in range(draw(st.integers(0 if cancel else 1, 2))):
            other = draw(st.sampled_from([c for c in claims if c.operation in BODIES]))
            others.append(Draft(FAMILY_VALID, other.operation,
                                draw(body_of(other, model))))
        return Draft(FAMILY_SEQUENCE, lead.operation, lead_body, cancel_after=cancel,
                     companions=tuple(others))
    return Draft(FAMILY_VALID, claim.operation, body)
