"""The invalid family's mutations: each turns a valid request into one invalid in exactly one
named way, deterministically (a shrunk base gets the same mutation again).

A mutation is ``strict`` when the profile itself makes the request invalid: a required
envelope member missing or of the wrong kind (design §6, §6.1), a body without what the
operation is (``messages``, ``input``). Its expectation (an error terminal with a profile
error of the ``invalid_request_error`` family) is then the profile's (``terminal.kind``,
``sequence.expected``). The others break OpenAI's request semantics, which the profile adopts
without fixing how an endpoint validates them (a negative ``max_tokens``, an unknown role, a
mistyped optional field, a body without ``model``: the profile lists ``model`` among the
body's familiar fields without requiring it, and vLLM's own request types default it): an
endpoint that answers such a request anyway is shown under the recommendation
``generated.invalid-accepted``, never failed (the recipe's ``beyond_profile``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from nnrp_conformance import contract

CHAT = contract.OP_CHAT_COMPLETIONS_CREATE
RESPONSES = contract.OP_RESPONSES_CREATE
EMBEDDINGS = contract.OP_EMBEDDINGS_CREATE
_GENERATING = (CHAT, RESPONSES)
_ALL = (CHAT, RESPONSES, EMBEDDINGS)


@dataclass(frozen=True)
class Mutation:
    description: str
    operations: tuple[str, ...]
    strict: bool
    #: body -> the mutated body (a copy)
    body: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    #: the ``request.envelope`` overrides (a bad envelope)
    envelope: dict[str, Any] | None = None
    #: the expected ``response.error``'s own rule, as the fixed recipe of the same input has
    #: it: an invalid submit (§6.1) may also be answered by an NNRP-level error
    #: (``error.invalid-submit``, a recommendation), not only by a profile error body
    event_rule: str | None = None
    #: the expected terminal's rule when it is not ``expect.invalid-request``: a submit §6.1
    #: makes invalid is ``expect.invalid-submit``, an operation the profile does not have §10's
    #: unsupported-operation row
    terminal_rule: str | None = None


def _without(key: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda b: {k: v for k, v in b.items() if k != key}


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda b: {**b, key: copy.deepcopy(value)}


def _last_message(**change: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def apply(b: dict[str, Any]) -> dict[str, Any]:
        messages = copy.deepcopy(b["messages"])
        messages[-1].update(change)
        return {**b, "messages": messages}
    return apply


def _limit(b: dict[str, Any]) -> str:
    return "max_output_tokens" if "input" in b and "messages" not in b else "max_tokens"


def _tool_choice_unknown(b: dict[str, Any]) -> dict[str, Any]:
    flat = "input" in b
    tool = {"type": "function", "name": "declared_tool", "parameters": {"type": "object"}} \
        if flat else {"type": "function", "function": {"name": "declared_tool",
                                                       "parameters": {"type": "object"}}}
    choice = {"type": "function", "name": "undeclared_tool"} if flat else \
        {"type": "function", "function": {"name": "undeclared_tool"}}
    return {**b, "tools": b.get("tools") or [tool], "tool_choice": choice}


MUTATIONS: Final = MappingProxyType({
    # the profile's own: required members, the envelope (design §6, §6.1)
    "missing-messages": Mutation("the chat body has no messages", (CHAT,), True,
                                 _without("messages")),
    "messages-not-array": Mutation("messages is a string, not an array", (CHAT,), True,
                                   _set("messages", "hello")),
    "missing-input": Mutation("the body has no input", (RESPONSES, EMBEDDINGS), True,
                              _without("input")),
    "input-not-text": Mutation("input is an object, neither text nor an array", (
        RESPONSES, EMBEDDINGS), True, _set("input", {"text": "hello"})),
    "envelope-schema-version": Mutation(
        "the envelope's schema_version is openai-compatible/0", _ALL, True,
        envelope={"schema_version": "openai-compatible/0"}, event_rule="error.invalid-submit",
        terminal_rule="expect.invalid-submit"),
    "envelope-body-not-object": Mutation("the envelope's body is a string", _ALL, True,
                                         envelope={"body": "hello"}),
    "envelope-no-operation": Mutation("the envelope has no operation", _ALL, True,
                                      envelope={"omit": ["operation"]}),
    "envelope-no-schema-version": Mutation(
        "the envelope has no schema_version", _ALL, True,
        envelope={"omit": ["schema_version"]}, event_rule="error.invalid-submit",
        terminal_rule="expect.invalid-submit"),
    # §6: operation is "One of the operation names advertised by the adapter capability
    # document"; a near miss (OpenAI's legacy completions) no profile document names
    "envelope-unknown-operation": Mutation(
        "the envelope's operation is completions.create, which the profile does not have",
        _ALL, True, envelope={"operation": "completions.create"},
        terminal_rule="expect.unsupported-operation"),
    # OpenAI's request semantics, which the profile does not fix (recommendation)
    "missing-model": Mutation("the body has no model", _ALL, False, _without("model")),
    "empty-messages": Mutation("messages is an empty array", (CHAT,), False,
                               _set("messages", [])),
    "unknown-role": Mutation("the last message has the role 'narrator'", (CHAT,), False,
                             _last_message(role="narrator")),
    "content-not-text": Mutation("the last message's content is a number", (CHAT,), False,
                                 _last_message(content=42)),
    "negative-max-tokens": Mutation("the token limit is -1", _GENERATING, False,
                                    lambda b: {**b, _limit(b): -1}),
    "max-tokens-not-integer": Mutation("the token limit is the string 'ten'", _GENERATING,
                                       False, lambda b: {**b, _limit(b): "ten"}),
    "temperature-not-number": Mutation("temperature is the string 'hot'", _GENERATING, False,
                                       _set("temperature", "hot")),
    "stream-not-boolean": Mutation("stream is an array", _GENERATING, False,
                                   _set("stream", [True])),
    "tools-malformed": Mutation("tools holds a function tool without a function", (CHAT,),
                                False, _set("tools", [{"type": "function"}])),
    "tool-choice-unknown": Mutation("tool_choice names a tool that tools does not declare",
                                    _GENERATING, False, _tool_choice_unknown),
    # near misses (issue 45 item 4): what a client's typo or a loose serializer sends, one
    # step from a valid value, where the bad values above are far from it
    "max-tokens-numeric-string": Mutation("the token limit is the string '16'", _GENERATING,
                                          False, lambda b: {**b, _limit(b): "16"}),
    "temperature-numeric-string": Mutation("temperature is the string '0.5'", _GENERATING,
                                           False, _set("temperature", "0.5")),
    "stream-string": Mutation("stream is the string 'true'", _GENERATING, False,
                              _set("stream", "true")),
    "role-one-letter-off": Mutation("the last message's role is 'usar', one letter from "
                                    "'user'", (CHAT,), False, _last_message(role="usar")),
    "content-part-other-api": Mutation(
        "the last message's content is a Responses part (input_text) in a chat message",
        (CHAT,), False, _last_message(content=[{"type": "input_text", "text": "hello"}])),
    "content-part-one-letter-off": Mutation(
        "the input's content part type is 'input_txt', one letter from 'input_text'",
        (RESPONSES,), False, _set("input", [{"role": "user", "content": [
            {"type": "input_txt", "text": "hello"}]}])),
    "encoding-format-one-letter-off": Mutation(
        "encoding_format is 'flaot', two letters swapped in 'float'", (EMBEDDINGS,), False,
        _set("encoding_format", "flaot")),
})


def mutate(name: str, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The mutated body and the envelope overrides (None: the envelope is left as it is)."""
    mutation = MUTATIONS[name]
    out = mutation.body(body) if mutation.body is not None else copy.deepcopy(body)
    return out, copy.deepcopy(mutation.envelope)
