"""OpenAI's own request shapes, as generated requests draw from them (docs/generation.md).

The hand-written strategies (``strategies.py``) draw the fields the profile names and the
OpenAI fields whose semantics the suite's oracles judge. Every other request field of OpenAI's
chat completions, Responses and embeddings APIs, and every content part of a chat message and
of a Responses input, comes from here: from ``openai_shapes.json``, which
``scripts/openai-shapes`` writes from the official Python SDK's request types (pydantic's JSON
Schema of each ``TypedDict``), so a field OpenAI adds reaches the generator when the file is
written again, and the suite itself never imports the SDK.

Owns :data:`SOURCE` (which SDK the shapes came from), :func:`extra_fields` (an operation's
fields the hand-written strategies leave out), :class:`Decks` (which fields, or which content
part type, each valid request takes: dealt in shuffled rounds from the run's seed, so every
field and part type comes round in turn, ``FIELDS_PER_REQUEST`` fields at a time), values
drawn from each schema (:func:`field_value`, :func:`content_part`), and the bounds that keep
a drawn value a request an endpoint answers at once: integers 0..8 and numbers -2..2
(OpenAI's range for the penalties, small for ``n``, ``top_logprobs``, ``dimensions``), text
of at most 16 characters with no ``$`` (a recipe reads ``${NAME}``), at most 3 items or
members, and a depth of 5. A value the schema allows may still be one an endpoint refuses (a
URL nobody serves, ``previous_response_id`` of no stored response): the request is a valid
one in OpenAI's types, and the generated checks allow a refusal that names what it refuses
(``generated.refusal-unnamed``) and never a server error (``generated.server-error``).

The values come from a generator seeded by the deal, not from hypothesis: what hypothesis
draws may not depend on the slot it fills (it refuses such a strategy as flaky), and drawing
a value of every field for every case, so that the slot could pick one, took 3.2 s per 200
cases. hypothesis-jsonschema would have drawn from these schemas; its 0.23.1 fails on every
object schema with the hypothesis this suite runs ('many' object has no attribute 'more'),
and the subset pydantic writes (``type``, ``enum``, ``const``, ``anyOf``, ``$ref`` into
``$defs``, ``properties``/``required``, ``additionalProperties``, ``items``) is small, so it
is read here.
"""

from __future__ import annotations

import copy
import functools
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from nnrp_conformance import contract
from nnrp_conformance.generate.deck import Deck
from nnrp_conformance.generate.fields import STREAM_OPTIONS

__all__ = ["FIELDS_PER_REQUEST", "KINDS", "SOURCE", "Decks", "Use", "content_part",
           "content_part_types", "extra_fields", "field_value", "with_use"]

_SHAPES: Final[dict[str, Any]] = json.loads(
    Path(__file__).with_name("openai_shapes.json").read_text(encoding="utf-8"))
#: the SDK the shapes were read from ("openai 3.63.0 …")
SOURCE: Final[str] = _SHAPES["source"]

#: the fields the hand-written strategies draw (with their semantics) or that decide what the
#: operation is: never drawn from the shapes
HAND_DRAWN: Final = frozenset({
    "model", "messages", "input", "stream", "tools", "tool_choice", "temperature", "top_p",
    "seed", "metadata", "stop", "max_tokens", "max_completion_tokens", "max_output_tokens",
    "instructions", "encoding_format", "stream_options"})
#: fields.py's, with the semantics their oracles judge, by operation
_HAND_DRAWN_FOR: Final = {
    contract.OP_CHAT_COMPLETIONS_CREATE: frozenset({"n", "response_format", "user"}),
    contract.OP_RESPONSES_CREATE: frozenset({"user"}),
}

#: the bounds of a drawn value (module doc)
_INT_MAX = 8
_NUMBER_RANGE = (-2.0, 2.0)
_TEXT_MAX = 16
_MAX_ITEMS = 3
_MAX_DEPTH = 5
#: the characters of a drawn text: ASCII letters and digits, then beyond ASCII (2-, 3- and
#: 4-byte UTF-8) and a few that JSON escapes
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 _-éß漢字😀\"\\/\n"
#: a URL for ``format: uri`` (an image, a file): well-formed, served by nobody
_URIS = ("https://example.com/image.png", "https://example.com/file.pdf",
         "data:image/png;base64,iVBORw0KGgo=")
#: how many fields a "fields" use adds to one request (module doc)
FIELDS_PER_REQUEST = 4


def _operation(operation: str) -> Mapping[str, Any]:
    return _SHAPES["operations"].get(operation) or {"fields": {}, "content_parts": {}}


@functools.lru_cache(maxsize=8)
def extra_fields(operation: str) -> tuple[str, ...]:
    """The request fields of ``operation`` in OpenAI's SDK that :data:`HAND_DRAWN` leaves out,
    sorted (empty for an operation the SDK does not have)."""
    # stream_options is drawn by hand only where its include_usage is defined (chat); the
    # Responses API's own stream_options comes from its shape
    hand = HAND_DRAWN if operation in STREAM_OPTIONS else HAND_DRAWN - {"stream_options"}
    hand |= _HAND_DRAWN_FOR.get(operation, frozenset())
    return tuple(sorted(set(_operation(operation)["fields"]) - hand))


def content_part_types(operation: str) -> tuple[str, ...]:
    """The content part types of ``operation``'s messages, by their ``type`` (sorted)."""
    return tuple(sorted(_operation(operation)["content_parts"]))


def field_value(operation: str, name: str, rng: random.Random) -> Any:
    """A value of field ``name`` of ``operation`` drawn from its schema (module doc)."""
    schema = _operation(operation)["fields"][name]["schema"]
    return _value(schema, schema.get("$defs", {}), rng, 0)


def content_part(operation: str, part_type: str, rng: random.Random) -> Any:
    """A content part of type ``part_type`` drawn from the SDK's schema of that part."""
    schema = _operation(operation)["content_parts"][part_type]
    return _value(schema, schema.get("$defs", {}), rng, 0)


class _Unreachable(Exception):
    """A schema with no value within the depth (a recursive shape's required member)."""


def _value(schema: Any, defs: Mapping[str, Any], rng: random.Random, depth: int) -> Any:
    """A value of the subset of JSON Schema pydantic writes (module doc)."""
    if not isinstance(schema, dict) or not schema:
        return None
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        if depth >= _MAX_DEPTH or name not in defs:
            raise _Unreachable(name)
        return _value(defs[name], defs, rng, depth + 1)
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if "enum" in schema:
        return copy.deepcopy(rng.choice(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = list(schema[key])
            rng.shuffle(options)
            for option in options:  # the first that has a value within the depth
                try:
                    return _value(option, defs, rng, depth + 1)
                except _Unreachable:
                    continue
            raise _Unreachable(key)
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _value(schema["allOf"][0], defs, rng, depth)
    return _typed(schema, defs, rng, depth)


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.choice((0, 1, 5, _TEXT_MAX))))


def _typed(schema: dict[str, Any], defs: Mapping[str, Any], rng: random.Random,
           depth: int) -> Any:
    kind = schema.get("type")
    if kind == "boolean":
        return rng.choice((True, False))
    if kind == "integer":
        return rng.choice((0, 1, 2, _INT_MAX, rng.randint(0, _INT_MAX)))
    if kind == "number":
        low, high = _NUMBER_RANGE
        return rng.choice((0, 1, low, high, round(rng.uniform(low, high), 3)))
    if kind == "string":
        return rng.choice(_URIS) if schema.get("format") == "uri" else _text(rng)
    if kind == "array":
        least = int(schema.get("minItems", 0))
        items = schema.get("items", {"type": "string"})
        out = []
        for _ in range(rng.randint(least, max(least, _MAX_ITEMS))):
            try:
                out.append(_value(items, defs, rng, depth + 1))
            except _Unreachable:
                if least:
                    raise
                break  # items beyond the depth: a shorter array ends the shape
        return out
    if kind == "object":
        return _object(schema, defs, rng, depth)
    return None  # "null", or a schema of no type: JSON's null


def _object(schema: dict[str, Any], defs: Mapping[str, Any], rng: random.Random,
            depth: int) -> dict[str, Any]:
    props: dict[str, Any] = schema.get("properties") or {}
    if not props:
        extra = schema.get("additionalProperties")
        keys = sorted({"".join(rng.choice("abcdefgh") for _ in range(4))
                       for _ in range(rng.randint(0, _MAX_ITEMS))})
        return {k: _value(extra, defs, rng, depth + 1) if isinstance(extra, dict) and extra
                else _text(rng) for k in keys}
    required = set(schema.get("required") or ())
    out = {k: _value(props[k], defs, rng, depth + 1) for k in props if k in required}
    if depth < _MAX_DEPTH - 1:  # beyond it only what is required, so a recursive shape ends
        for key in (k for k in props if k not in required):
            if rng.random() < 0.5:
                try:
                    out[key] = _value(props[key], defs, rng, depth + 1)
                except _Unreachable:
                    continue
    return out


@dataclass(frozen=True)
class Use:
    """What one valid generated request takes from the shapes: ``fields`` (the fields
    ``names``) or ``part`` (a content part of type ``names[0]``), with values drawn from
    ``seed``. Dealt by ``strategies.slots`` from decks of its own, so every field and part
    type comes round in turn."""

    kind: str
    names: tuple[str, ...]
    seed: int


#: the kinds dealt to valid requests in shuffled rounds: a quarter none, half fields, a
#: quarter a content part (an operation without parts takes fields)
KINDS: Final = (None, "fields", "fields", "part")


class Decks:
    """The run's decks of field names and part types per operation, and the kinds (module
    doc): shuffled rounds from a generator of their own, so no other choice of a seed moved."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(f"openai-{seed}")
        self._kinds = Deck(KINDS, self._rng)
        self._names: dict[tuple[str, str], Deck] = {}

    def use(self, operation: str) -> Use | None:
        kind = self._kinds.deal()
        parts = content_part_types(operation)
        if kind == "part" and not parts:
            kind = "fields"
        if kind is None or (kind == "fields" and not extra_fields(operation)):
            return None
        items = parts if kind == "part" else extra_fields(operation)
        deck = self._names.setdefault((operation, kind), Deck(items, self._rng))
        count = 1 if kind == "part" else min(FIELDS_PER_REQUEST, len(items))
        names: list[str] = []
        while len(names) < count:
            name = deck.deal()
            if name not in names:
                names.append(name)
        return Use(kind, tuple(names), self._rng.getrandbits(32))


def with_use(use: Use | None, operation: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with what ``use`` asks (a copy; ``body`` itself when it asks nothing). A field
    the body already sets keeps its value."""
    if use is None:
        return body
    rng = random.Random(use.seed)
    if use.kind == "part":
        return _with_part(body, content_part(operation, use.names[0], rng))
    added = {n: field_value(operation, n, rng) for n in use.names if n not in body}
    return {**body, **added}


def _as_parts(content: Any, text_type: str) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    return [{"type": text_type, "text": content}] if isinstance(content, str) and content \
        else []


def _with_part(body: dict[str, Any], part: Any) -> dict[str, Any]:
    """The part appended to the last message's content (a string content becomes its text
    part first): chat's last message is the user's; a Responses text input becomes one user
    message."""
    out = copy.deepcopy(body)
    if isinstance(out.get("messages"), list) and out["messages"]:
        last = out["messages"][-1]
        last["content"] = [*_as_parts(last.get("content"), "text"), part]
    elif isinstance(out.get("input"), str):
        out["input"] = [{"role": "user", "content": [*_as_parts(out["input"], "input_text"),
                                                     part]}]
    elif isinstance(out.get("input"), list) and out["input"] \
            and isinstance(out["input"][-1], dict):
        last = out["input"][-1]
        last["content"] = [*_as_parts(last.get("content"), "input_text"), part]
    return out
