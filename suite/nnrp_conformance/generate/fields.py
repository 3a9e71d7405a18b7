"""The OpenAI request fields a generated body may carry beside what the operation needs, each
drawn so that its oracle can bite (docs/generation.md#oracles), and which operation's own API
defines which.

Owns the strategies of ``stop`` (a string or a list of up to 4, often a word of the prompt),
``n`` (chat: 1 to 3 choices), ``response_format`` (chat: ``text`` or ``json_object``, the
latter with a message that asks for JSON, as OpenAI requires of JSON mode), ``user`` (chat and
Responses: an end-user id, which changes nothing of the answer) and ``stream_options`` (chat
only: OpenAI's Responses API defines no ``include_usage``), and :func:`chat_extras`, which
adds the chat-only ones to a drawn body. ``strategies.py`` draws the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from hypothesis import strategies as st

from nnrp_conformance import contract
from nnrp_conformance.generate.texts import WORD

__all__ = ["JSON_INSTRUCTION", "STREAM_OPTIONS", "USER", "chat_extras", "stop"]

#: OpenAI refuses JSON mode unless a message asks for JSON ("'messages' must contain the word
#: 'json' in some form, to use 'response_format' of type 'json_object'")
JSON_INSTRUCTION: Final = "Reply with a JSON object."
USER = st.from_regex(r"\Auser-[a-z0-9]{1,12}\Z")
#: the operations whose API defines ``stream_options.include_usage``
STREAM_OPTIONS: Final = frozenset({contract.OP_CHAT_COMPLETIONS_CREATE})
_N = st.integers(1, 3)
_FORMAT = st.sampled_from(("text", "json_object"))


def stop(words: Sequence[str]) -> st.SearchStrategy[Any]:
    """``stop``: a string or up to 4; often a word of the prompt, so that it can bite."""
    one = st.one_of(st.sampled_from(list(words)) if words else WORD, WORD)
    return st.one_of(one, st.lists(one, min_size=1, max_size=4, unique=True))


@st.composite
def chat_extras(draw: Callable[..., Any], body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (a chat request) with ``n``, ``response_format`` and ``user``, each present
    or not. ``n`` only without ``tools``: the profile's tool-call events name no choice, so
    an endpoint may rightly refuse several choices of calls. ``response_format`` only without
    ``tools`` too: an answer that calls a tool tells nothing of JSON mode (on the OpenAI-shape
    draws every JSON-mode request of seed 7 had tools, and json-mode-ignored went unseen).
    JSON mode puts its instruction first among the messages and drops ``stop`` (a stop
    sequence cuts the JSON short, and that answer would tell nothing)."""
    if draw(st.booleans()) and "tools" not in body:
        body["n"] = draw(_N)
    if draw(st.booleans()) and "tools" not in body:
        kind = draw(_FORMAT)
        body["response_format"] = {"type": kind}
        if kind == "json_object":
            body["messages"] = [{"role": "system", "content": JSON_INSTRUCTION},
                                *body["messages"]]
            body.pop("stop", None)
    if draw(st.booleans()):
        body["user"] = draw(USER)
    return body
