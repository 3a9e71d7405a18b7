"""The hypothesis strategies of generated requests: valid bodies of every operation a run
claims, drawn from the fields the profile names (design §6: ``model``, ``messages``,
``input``, ``temperature``, ``top_p``, ``max_tokens``, ``tools``, ``tool_choice``,
``metadata``, ``stream``) and the OpenAI request fields beside them (``seed``,
``max_completion_tokens``, multi-part content, every message role; ``stop``, ``n``,
``response_format``, ``user`` and ``stream_options`` are ``fields.py``'s), and the three
families built on them (:class:`Draft`): a valid request, an invalid one (a valid base plus one named
mutation, ``mutations.py``) and a sequence on one session (operations in flight together, a
cancel at a drawn event). Which operation, family and mutation each case is, is dealt from
the seed in shuffled rounds (:func:`slots`); hypothesis draws what the request holds
(:func:`material`), and :func:`draft_of` puts the two together.

A valid body keeps OpenAI's request semantics: a ``tool`` message follows the assistant
message that called it, ``stream_options`` only with ``stream: true``, ``tool_choice`` names
a tool of ``tools``. No text carries a lone surrogate (it cannot be sent as UTF-8).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import strategies as st

from nnrp_conformance import contract
from nnrp_conformance.generate.deck import Deck
from nnrp_conformance.generate.envelopes import ENVELOPES
from nnrp_conformance.generate.fields import STREAM_OPTIONS, USER, chat_extras, stop
from nnrp_conformance.generate.mutations import MUTATIONS
from nnrp_conformance.generate.openai_shapes import Decks, Use, with_use
from nnrp_conformance.generate.texts import LONG_TEXT, SHORT_TEXT, TEXT
from nnrp_conformance.recipes import SESSION_ANOTHER, SESSION_SAME

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
    #: the envelope shape a valid or sequence request is sent in (``envelopes.py``; None:
    #: the recipes' own, or an invalid request's mutation)
    envelope: str | None = None
    #: a relation's later request (``repeats.py``): the index of the valid case it repeats,
    #: and what it changes (``none``, ``user-added``, ``user-removed``)
    repeats: tuple[int, str] | None = None
    #: a companion's session: ``recipes.SESSION_ANOTHER`` puts it on a second session
    #: opened for the group (docs/recipes.md#across-sessions)
    session: str = SESSION_SAME


#: generation stays cheap: a short answer is enough to judge a stream
MAX_TOKENS = 48
_ROLES_BEFORE_USER = ("system", "developer")

def _content(part_type: str) -> st.SearchStrategy[Any]:
    """A message's content: a string, or an array of text parts (multi-part content)."""
    parts = st.lists(TEXT.map(lambda t: {"type": part_type, "text": t}),
                     min_size=1, max_size=3)
    return st.one_of(TEXT, TEXT, parts)


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
        fn["description"] = draw(SHORT_TEXT)
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
    # each form as often as the others (absent, none, auto, required, a named function): each
    # is an oracle's (checks/tool_choice.py)
    form = draw(st.sampled_from((None, "none", "auto", "required", "named")))
    return tools, draw(named) if form == "named" else form


_METADATA = st.dictionaries(_NAME, SHORT_TEXT.map(lambda s: s[:64]), max_size=4)
_TOOLS = {True: _tools(flat=True), False: _tools(flat=False)}


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
        out.append({"role": "assistant", "content": draw(TEXT)})
    if tools and draw(st.booleans()):
        name = tools[0]["function"]["name"]
        call_id = "call_" + draw(_NAME)
        out.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]})
        out.append({"role": "tool", "tool_call_id": call_id, "content": draw(TEXT)})
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


#: fields of ``_OPTIONAL`` an operation's own API does not define: OpenAI's Responses API has
#: no ``seed`` (a "valid" request carrying it is one the endpoint may rightly refuse)
_NOT_DEFINED = {contract.OP_RESPONSES_CREATE: frozenset({"seed"})}


@st.composite
def _common(draw: Callable[..., Any], body: dict[str, Any], claim: Claim, words: list[str],
            limit_key: str) -> dict[str, Any]:
    """The sampling fields every generating operation shares, each present or not."""
    if claim.streaming and draw(st.booleans()):
        body["stream"] = True
        if claim.operation in STREAM_OPTIONS and draw(st.booleans()):
            body["stream_options"] = {"include_usage": draw(st.booleans())}
    elif draw(st.booleans()):
        body["stream"] = False
    undefined = _NOT_DEFINED.get(claim.operation, frozenset())
    optional = {**{k: v for k, v in _OPTIONAL.items() if k not in undefined}, limit_key: _LIMIT}
    if claim.operation == contract.OP_CHAT_COMPLETIONS_CREATE:
        optional["stop"] = stop(words)
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
    # OpenAI's max_completion_tokens supersedes the deprecated max_tokens: both are sent
    limit = draw(st.sampled_from(("max_tokens", "max_completion_tokens")))
    out: dict[str, Any] = draw(_common(body, claim, _words(messages), limit))
    return dict(draw(chat_extras(out)))


_INPUT = st.one_of(TEXT, st.lists(st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(("system", "developer", "user", "assistant")), _CONTENT["input_text"]),
    min_size=0, max_size=2).map(lambda xs: [*xs, {"role": "user", "content": "hello there"}]))


@st.composite
def responses_body(draw: Callable[..., Any], claim: Claim, model: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "input": draw(_INPUT)}
    if draw(st.booleans()):
        body["instructions"] = draw(SHORT_TEXT)
    if claim.tool_calls and draw(st.booleans()):
        tools, choice = draw(_TOOLS[True])
        body["tools"] = tools
        if choice is not None:
            body["tool_choice"] = choice
    out: dict[str, Any] = draw(_common(body, claim, [], "max_output_tokens"))
    if draw(st.booleans()):
        out["user"] = draw(USER)
    return out


#: OpenAI's embeddings input: a text (long ones too), an array of texts (up to 2,048 in its API
#: reference; 64 here), an array of token ids, or an array of those
_TOKENS = st.lists(st.integers(0, 50_000), min_size=1, max_size=32)
_EMBEDDING_INPUT = st.one_of(SHORT_TEXT, SHORT_TEXT, LONG_TEXT,
                             st.lists(SHORT_TEXT, min_size=1, max_size=4),
                             st.lists(SHORT_TEXT, min_size=16, max_size=64),
                             _TOKENS, st.lists(_TOKENS, min_size=1, max_size=3))


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
#: in the cancel recipes. An endpoint may still answer shorter (the profile fixes no length):
#: then the runner moves the point within what it streamed and runs the case again, and a
#: cancel never sent or crossed is reported not exercised (runner.py, checks/exercise.py)
CANCELLED_TOKENS = 400


def cancellable(operation: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as a stream long enough to be cancelled mid-way: text only (no tool call, no
    stop sequence, no JSON mode: a JSON object may end on its own), ``CANCELLED_TOKENS``
    long."""
    limit = "max_tokens" if operation == contract.OP_CHAT_COMPLETIONS_CREATE \
        else "max_output_tokens"
    out = {k: v for k, v in body.items()
           if k not in ("tools", "tool_choice", "stop", "response_format")}
    if isinstance(out.get("messages"), list):
        out["messages"] = [m for m in out["messages"] if not (
            m.get("role") == "tool" or m.get("tool_calls"))]
    return {**out, limit: CANCELLED_TOKENS, "stream": True}


@dataclass(frozen=True)
class Slot:
    """What one case is before hypothesis draws its content: the operation's claim, the
    family and (invalid) the mutation. ``slots`` deals them evenly."""

    claim: Claim
    family: str
    mutation: str | None = None
    envelope: str | None = None
    #: what a valid request takes from OpenAI's own shapes (``openai_shapes.Decks``)
    openai: Use | None = None
    #: a sequence whose first companion runs on another session
    across: bool = False


def slots(claims: Sequence[Claim], count: int, seed: int) -> list[Slot]:
    """``count`` slots from ``seed``: the operations, the families and each operation's
    mutations in shuffled rounds, so a bounded run sends each of them about as often as the
    others. (Left to hypothesis, a choice among a list leans to its first entries: 1,000
    drafts of seed 7 held 19% invalid requests and 2 of the 15th mutation.)"""
    rng = random.Random(seed)
    usable = [c for c in claims if c.operation in BODIES]
    operations, families = Deck(usable, rng), Deck(FAMILIES, rng)
    mutations = {c.operation: Deck([n for n, m in MUTATIONS.items()
                                     if c.operation in m.operations], rng) for c in usable}
    # a deck of its own, from its own generator: the shapes moved no other choice of a seed
    envelopes = Deck(list(ENVELOPES), random.Random(f"envelope-{seed}"))
    # half the sequences put their first companion on another session (the same reason)
    across = Deck([False, True], random.Random(f"sessions-{seed}"))
    uses = Decks(seed)
    out = []
    for _ in range(count):
        claim, family = operations.deal(), families.deal()
        mutation = mutations[claim.operation].deal() if family == FAMILY_INVALID else None
        envelope = envelopes.deal() if family != FAMILY_INVALID else None
        use = uses.use(claim.operation) if family == FAMILY_VALID else None
        out.append(Slot(claim, family, mutation, envelope, use,
                        across=family == FAMILY_SEQUENCE and across.deal()))
    return out


@dataclass(frozen=True)
class Material:
    """What hypothesis draws for one case, the same whatever its slot: a valid body of every
    claimed operation, a cancel point, and the companion requests a sequence may add. (A
    strategy that depended on the slot, chosen outside hypothesis, would draw differently
    for the same choices: hypothesis refuses that as a flaky strategy.)"""

    bodies: tuple[dict[str, Any], ...]
    cancel_after: int | None
    companions: tuple[Draft, ...]


@st.composite
def material(draw: Callable[..., Any], claims: Sequence[Claim], model: str) -> Material:
    usable = [c for c in claims if c.operation in BODIES]
    bodies = tuple(draw(body_of(c, model)) for c in usable)
    cancel = draw(st.one_of(st.none(), st.integers(1, 3)))
    others: list[Draft] = []
    for _ in range(draw(st.integers(0 if cancel else 1, 2))):
        other = draw(st.sampled_from(usable))
        others.append(Draft(FAMILY_VALID, other.operation, draw(body_of(other, model))))
    return Material(bodies, cancel, tuple(others))


def draft_of(slot: Slot, stuff: Material, claims: Sequence[Claim]) -> Draft:
    """The generated request of ``slot``, made of what hypothesis drew."""
    usable = [c for c in claims if c.operation in BODIES]
    claim, family = slot.claim, slot.family
    body = stuff.bodies[usable.index(claim)]
    if family == FAMILY_INVALID:
        return Draft(family, claim.operation, body, mutation=slot.mutation)
    streams = [c for c in usable if c.streaming and c.cancellation]
    if family == FAMILY_SEQUENCE and streams:
        # the slot's operation leads when it can stream and be cancelled
        lead = claim if claim in streams else streams[0]
        lead_body = {**stuff.bodies[usable.index(lead)], "stream": True}
        cancel = stuff.cancel_after
        if cancel is not None:
            lead_body = cancellable(lead.operation, lead_body)
        companions = stuff.companions
        if slot.across and companions:
            companions = (replace(companions[0], session=SESSION_ANOTHER), *companions[1:])
        return Draft(FAMILY_SEQUENCE, lead.operation, lead_body, cancel_after=cancel,
                     companions=companions, envelope=slot.envelope)
    body = with_use(slot.openai, claim.operation, body)
    return Draft(FAMILY_VALID, claim.operation, body, envelope=slot.envelope)
