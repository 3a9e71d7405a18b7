"""Whether an error answer is, by the endpoint's own words, an admission or overload refusal.

Owns :func:`refusal_named`, the one reading of §10's row "Model overload or scheduling
rejection | Profile error body plus NNRP diagnostic metadata" that the concurrency checks
(``checks/concurrency.py``: the refused operation's expectations set aside) and the run's
blame note (``run_cases.py``: ``left_open_earlier``) both use
(docs/verdicts.md#concurrency).

A refusal is what the endpoint says it is. The profile names no code for the row, so no code
list decides; what decides is that the answer **names** a limit, an overload or scheduling:

* its error's ``code``, ``type`` or ``message``, or the string values of its diagnostics
  (``diagnostics`` on the event, as the upstream adapter sends them, or ``nnrp.diagnostics``)
  say overload, busy, capacity, a rate limit, throttling, scheduling, admission, a full
  queue, too many requests, or a limit of operations, sessions, requests, connections or
  slots (upstream's ``adapter_operation_limit`` "Adapter session operation limit 4 is
  active.", an endpoint's own ``session_capacity_exceeded``, OpenAI's ``rate_limit_error``);
* or NNRP's own status says busy: a ``RESULT_DROP`` with reason ``BACKPRESSURE``, or a
  ``RESULT_PUSH`` status 429 or 503.

An answer that names the request's own size is never a refusal, whatever else it says: a
context-length error ("This model's maximum context length is 512 tokens. However, your
request has 600 input tokens.", vLLM's, whether an adapter passes it on under
``invalid_backend_request`` or under an overload code) is an invalid request for that
request, judged as what it is. Any other error (a backend failure, an input error) is not a
refusal either: it is judged by what its request expected.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from nnrp_conformance import contract

__all__ = ["names_own_size", "names_request_size", "refusal_named"]

#: one word of these names an overload or scheduling by itself (prefixes: ``overload``
#: covers overloaded, ``throttl`` throttled and throttling, ``schedul`` scheduler and
#: scheduling)
_OVERLOAD_PREFIXES = ("overload", "busy", "capacity", "throttl", "schedul", "admission",
                      "backpressure", "congest", "ratelimit", "concurrency")
#: two words together name one ("rate limit", "too many requests", "queue full", "resource
#: exhausted"); each pair is (word, word)
_OVERLOAD_PAIRS = (("rate", "limit"), ("rate", "limited"), ("many", "requests"),
                   ("many", "operations"), ("queue", "full"), ("resource", "exhausted"))
#: "limit" names an overload when what is limited is an amount of work in flight, never the
#: request's content (a max_tokens limit is an input error)
_LIMIT_WORDS = frozenset(("limit", "limits", "limited"))
_WORK_WORDS = frozenset(("operation", "operations", "session", "sessions", "requests",
                         "connections", "slot", "slots", "flight", "concurrent", "reached"))
#: the request's own size: a context length, a prompt or input too long
_SIZE_ALONE = frozenset(("context", "max_model_len"))
_LENGTH_OF = frozenset(("prompt", "input", "model", "token", "tokens", "sequence", "messages"))
#: NNRP's own busy status: RESULT_PUSH status codes, RESULT_DROP reasons
_BUSY_STATUS = frozenset((429, 503))
_BUSY_DROP = "backpressure"
#: how much of a diagnostics object is read (an endpoint's answer is bounded here too)
_MAX_STRINGS = 64
_WORD = re.compile(r"[a-z]+")


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    """The string values (and the names of members set to ``true``) of a diagnostics object."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict) and depth < 4:
        for key, item in value.items():
            if item is True:
                yield str(key)
            else:
                yield from _strings(item, depth + 1)
    elif isinstance(value, list) and depth < 4:
        for item in value:
            yield from _strings(item, depth + 1)


def _words(texts: Iterator[str]) -> set[str]:
    words: set[str] = set()
    for n, text in enumerate(texts):
        if n >= _MAX_STRINGS:
            break
        low = text[:4096].lower()
        words.update(_WORD.findall(low))
        words.update(w for w in re.findall(r"[a-z_]+", low) if w in _SIZE_ALONE)
    return words


def _said(event: Any) -> set[str]:
    """The words of an error event's error object and diagnostics."""
    if not isinstance(event, dict):
        return set()
    err = event.get("error")
    nnrp = event.get("nnrp")
    parts: list[Any] = []
    if isinstance(err, dict):
        parts += [err.get(k) for k in ("code", "type", "message")]
    parts += [event.get("diagnostics"),
              nnrp.get("diagnostics") if isinstance(nnrp, dict) else None]
    return _words(s for p in parts for s in _strings(p))


def names_request_size(words: set[str]) -> bool:
    """The words name the request's own size (a context length, a prompt too long)."""
    return bool(words & _SIZE_ALONE) or ("length" in words and bool(words & _LENGTH_OF)) \
        or ("too" in words and bool(words & {"long", "large"}))


def names_own_size(event: Any) -> bool:
    """The error answer names its request's own size (a context length): its own cause,
    never a neighbour's (``checks/concurrency.py``) nor an admission limit."""
    return names_request_size(_said(event))


def _names_overload(words: set[str]) -> bool:
    if any(w.startswith(_OVERLOAD_PREFIXES) for w in words):
        return True
    if any(a in words and b in words for a, b in _OVERLOAD_PAIRS):
        return True
    return bool(words & _LIMIT_WORDS) and bool(words & _WORK_WORDS)


def _busy_status(status_code: Any, drop_reason: Any) -> bool:
    if isinstance(status_code, int) and status_code in _BUSY_STATUS:
        return True
    if isinstance(drop_reason, int) and not isinstance(drop_reason, bool):
        return drop_reason == contract.WIRE_DROP_BACKPRESSURE
    return _BUSY_DROP in str(getattr(drop_reason, "name", drop_reason) or "").lower()


def refusal_named(event: Any, *, status_code: Any = None, drop_reason: Any = None) -> bool:
    """The error answer (``event``: its terminal event, a ``response.error`` or none; the
    NNRP status and drop reason it came with) is a refusal by its own words (module doc)."""
    words = _said(event)
    if names_request_size(words):
        return False
    return _busy_status(status_code, drop_reason) or _names_overload(words)
