"""Shrinking a failed generated request to a minimal one that still fails the same way.

A deterministic, structure-aware shrinker over the request's JSON rather than hypothesis's
own: each attempt is one more operation against a live endpoint, so the budget is a small
fixed number of runs (hypothesis may replay hundreds of byte buffers), every failure of a
run is shrunk (hypothesis shrinks the first one and stops), and each edit keeps the request
in its family (a valid body stays valid: optional fields, messages, companions and text are
removed or shortened, never what the operation needs; an invalid one is its shrunk valid
base with the same mutation).

Edits are tried biggest first (a companion operation, an optional field, a message, a
tool, then halving a text and lowering a number); the first that still fails is kept and
the search starts again from it, until no edit fails or the budget is spent: a number of
runs, and for a failure whose case drops or silences the session (each try that still fails
waits for a silence) a number of seconds too (``generate/run.py`` sets both).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Generic, NamedTuple, TypeVar

from nnrp_conformance import contract
from nnrp_conformance.generate.strategies import Draft

__all__ = ["MAX_SHRINK_RUNS", "Shrunk", "body_candidates", "candidates", "shrink"]

#: operations spent on shrinking one failure at most
MAX_SHRINK_RUNS = 30
#: what each operation's body needs to stay the same request
REQUIRED = {
    contract.OP_CHAT_COMPLETIONS_CREATE: frozenset({"model", "messages"}),
    contract.OP_RESPONSES_CREATE: frozenset({"model", "input"}),
    contract.OP_EMBEDDINGS_CREATE: frozenset({"model", "input"}),
}
#: removing one of these also removes what depends on it
_DEPENDENTS = {"stream": ("stream_options",), "tools": ("tool_choice",)}
#: strings that other members refer to, or whose value is one of a few (a shortened
#: ``tool_choice`` "auto", ``encoding_format`` "float" or tool-call ``arguments`` "{}" is no
#: longer a valid request): never shortened
_NAMES = frozenset({"model", "name", "id", "tool_call_id", "type", "role", "call_id",
                    "tool_choice", "encoding_format", "arguments"})

R = TypeVar("R")


def _size(draft: Draft) -> int:
    return len(json.dumps([draft.body, [c.body for c in draft.companions]], ensure_ascii=False))


def _drop_tool_turns(messages: list[Any]) -> list[Any]:
    return [m for m in messages if not (isinstance(m, dict) and (
        m.get("role") == "tool" or m.get("tool_calls")))]


def _strings(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in _NAMES:
                yield from _strings(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, (*path, i))
    elif isinstance(value, str) and len(value) > 1:
        yield path, value


def _set_at(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def body_candidates(operation: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Smaller valid bodies of ``operation``, biggest cut first."""
    required = REQUIRED.get(operation, frozenset({"model"}))
    for key in body:
        if key in required:
            continue
        out = {k: v for k, v in body.items() if k != key and k not in _DEPENDENTS.get(key, ())}
        if key == "tools" and isinstance(out.get("messages"), list):
            out["messages"] = _drop_tool_turns(out["messages"])
        yield out
    messages = body.get("messages")
    if isinstance(messages, list) and len(messages) > 1:
        if _drop_tool_turns(messages) != messages:
            yield {**body, "messages": _drop_tool_turns(messages)}
        for i, m in enumerate(messages[:-1]):
            if isinstance(m, dict) and m.get("role") != "tool" and not m.get("tool_calls"):
                yield {**body, "messages": messages[:i] + messages[i + 1:]}
    for key in ("input", "stop"):
        if isinstance(body.get(key), list) and len(body[key]) > 1:
            yield {**body, key: body[key][:1]}
    tools = body.get("tools")
    if isinstance(tools, list) and len(tools) > 1 and "tool_choice" not in body:
        yield {**body, "tools": tools[:1]}
    for path, text in _strings(body):
        yield _set_at(body, path, text[: len(text) // 2])
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens", "seed"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            yield {**body, key: 1}
            yield {**body, key: value // 2}
    for key in ("temperature", "top_p"):
        if body.get(key) not in (None, 0, 1):
            yield {**body, key: 1}


def candidates(draft: Draft) -> Iterator[Draft]:
    """Smaller drafts of the same family, biggest cut first."""
    for i in range(len(draft.companions)):
        yield replace(draft, companions=draft.companions[:i] + draft.companions[i + 1:])
    for body in body_candidates(draft.operation, draft.body):
        yield replace(draft, body=body)


class Shrunk(NamedTuple, Generic[R]):
    """What shrinking found: the smallest draft that still fails, its result, the runs and
    seconds spent, and whether the budget ran out with smaller edits left untried."""

    draft: Draft
    result: R
    runs: int
    seconds: float
    stopped: bool


def shrink(draft: Draft, result: R, still_fails: Callable[[Draft], R | None], *,
           budget: int = MAX_SHRINK_RUNS, seconds: float | None = None) -> Shrunk[R]:
    """The smallest draft found that ``still_fails`` (which returns its result, or None)
    within ``budget`` runs and, when given, ``seconds`` (no run starts after them)."""
    start = time.monotonic()
    best, best_result, runs = draft, result, 0
    improved, stopped = True, False
    while improved and not stopped:
        improved = False
        size = _size(best)
        for candidate in candidates(best):
            if _size(candidate) >= size:
                continue
            if runs >= budget or (seconds is not None and time.monotonic() - start >= seconds):
                stopped = True
                break
            runs += 1
            seen = still_fails(candidate)
            if seen is not None:
                best, best_result, improved = candidate, seen, True
                break
    return Shrunk(best, best_result, runs, round(time.monotonic() - start, 1), stopped)
