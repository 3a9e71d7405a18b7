"""Relations between a request and its repeats (issue 45 item 3, in the manner of metamorphic
testing; the groups are made by ``generate/repeats.py``), both recommendations:

* ``answer.repeatable``: the same request sent again, at temperature 0 (and, for chat, with a
  ``seed``), gets the same answer;
* ``answer.user-neutral``: the same request with ``user`` added or taken away gets the answer
  the request got, once its exact repeat showed that the endpoint answers it the same each
  time.

Both are judged on one session and across sessions: a group's last repeat is sent on a
session of its own (``another-session``), and the run says which session each answer came on.
An exact repeat that differs only across sessions says so (the answer follows the session: a
sampler seeded from it, say); ``user`` is judged only where the exact repeat, on the same
footing (one session, or two), got the same answer.

The answer compared is what a client reads of it (``answer_reading.py``, the reading the
HTTP twin compares too): each choice's (a Response's) text, its tool calls' names and
arguments (parsed as JSON), and its finish (a chat ``finish_reason``, a Response's
``status``); not ids, timestamps or usage. Authority: OpenAI documents ``seed`` as a
best-effort determinism ("Determinism is not guaranteed") and ``user`` as an end-user
identifier for abuse monitoring, which asks nothing of the answer; the profile keeps the
body's fields without restating them (§1, §6), puts sampling correctness out of its scope
(§3), and its capability document (§13) has no member where an endpoint claims determinism.
So neither is ever strict.

With the HTTP twin (``--nnrp-http-twin``), a pair whose NNRP answers differ is sent over HTTP
too (``twin/pairs.py``): the finding says whether the HTTP API answers the two alike (only the
NNRP face breaks the relation) or not (the model itself does), and the result's diagnostics
keep both HTTP answers (``relation_http_twin``). The level is the rule's either way: an
endpoint's answers are judged, whichever part of it makes them.

Only a successful answer is compared, and only to the answer of the same request (its body
equal to the earlier one's but for ``user``): a shrinking try, which sends another body under
the case's id, is not judged. Owns :class:`SameAnswers`, which ``run_cases.py`` holds for the
run and asks after each case, as it asks ``checks/answer_ids.py``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from nnrp_conformance import contract, rules
from nnrp_conformance.answer_reading import nnrp_choices
from nnrp_conformance.checks.model import verdict_of
from nnrp_conformance.findings import Finding

__all__ = ["CHANGE_ANOTHER_SESSION", "REPEATABLE", "USER_NEUTRAL", "SameAnswers", "answer_of"]

REPEATABLE = "answer.repeatable"
USER_NEUTRAL = "answer.user-neutral"
#: a repeat of the same body sent on a session of its own (``generate/repeats.py``)
CHANGE_ANOTHER_SESSION = "another-session"
#: the twin's second HTTP call: (operation, the first body, the repeat's body) -> its report
#: (None: the run has no twin)
OverHttp = Callable[[str, Any, Any], dict[str, Any] | None]
_EXACT = frozenset({"none", CHANGE_ANOTHER_SESSION})


def answer_of(operation: str, result: Any) -> dict[str, Any] | None:
    """What a client reads of a successful answer, choice by choice (module doc), else
    None."""
    if result.terminal != contract.TERMINAL_SUCCESS:
        return None
    return {f"choice {i}": choice
            for i, choice in nnrp_choices(operation, result.events or ()).items()}


def _body(case: Any) -> Any:
    envelope = case.envelope if isinstance(getattr(case, "envelope", None), dict) else {}
    return envelope.get("body")


def _operation(case: Any) -> str:
    envelope = case.envelope if isinstance(getattr(case, "envelope", None), dict) else {}
    operation = envelope.get("operation")
    return operation if isinstance(operation, str) else str(getattr(case, "operation", ""))


def _request(case: Any) -> tuple[str, bool]:
    """The case's body without ``user`` (as JSON), and whether it had one."""
    envelope = case.envelope if isinstance(getattr(case, "envelope", None), dict) else {}
    body = envelope.get("body")
    body = body if isinstance(body, dict) else {}
    rest = {k: v for k, v in body.items() if k != "user"}
    return json.dumps(rest, sort_keys=True, default=str), "user" in body


def _repeats(case: Any) -> dict[str, Any] | None:
    recipe = getattr(case, "recipe", None)
    generated = getattr(recipe, "data", {}).get("generated") if recipe is not None else None
    found = generated.get("repeats") if isinstance(generated, dict) else None
    return found if isinstance(found, dict) else None


class SameAnswers:
    """Each case's first answer (with its request and session), and whether each group's
    exact repeat got the same answer, on one session and across two."""

    def __init__(self, over_http: OverHttp | None = None) -> None:
        #: the twin's second HTTP call (operation, first body, body) -> what HTTP answered
        self._over_http = over_http
        self._bodies: dict[str, Any] = {}
        self._answers: dict[str, tuple[tuple[str, bool], dict[str, Any] | None, int]] = {}
        #: (the group's first case, across sessions) -> its exact repeat got the same answer
        self._repeatable: dict[tuple[str, bool], bool] = {}

    def judge(self, case: Any, result: Any, *, strict: bool, session: int = 0) -> Any:
        """``result`` with ``answer.repeatable`` or ``answer.user-neutral`` when its answer
        differs from the answer of the request it repeats (module doc); ``session``: the
        number of the session it ran on."""
        request, answer = _request(case), answer_of(_operation(case), result)
        self._answers.setdefault(result.id, (request, answer, session))
        self._bodies.setdefault(result.id, _body(case))
        repeats = _repeats(case)
        earlier = self._answers.get(str(repeats.get("case"))) if repeats else None
        if repeats is None or earlier is None or answer is None or earlier[1] is None \
                or earlier[0][0] != request[0]:
            return result  # not a repeat, or one of the two answers is not there to compare
        change, first = repeats.get("change"), str(repeats["case"])
        across = earlier[2] != session
        same = earlier[1] == answer
        if change in _EXACT:
            self._repeatable.setdefault((first, across), same)
            rule = REPEATABLE
        elif self._repeatable.get((first, across)):
            rule = USER_NEUTRAL
        else:
            return result  # the request is not shown to be answered the same each time
        if same:
            return result
        where = " on another session" if across else ""
        if across and rule == REPEATABLE and self._repeatable.get((first, False)):
            where += " (on one session it got the same answer: the answer follows the session)"
        said = "" if change in _EXACT else f" ({change})"
        http = self._over_http(_operation(case), self._bodies.get(first), _body(case)) \
            if self._over_http is not None else None
        finding = Finding(
            rule, f"the answer differs from the answer {first} got to the same request{said}"
            f"{where}: {_first_difference(earlier[1], answer)}{_http_said(http)}",
            None, earlier[1], answer, rules.citation(rule),
            rules.finding_level(rule, strict=strict))
        verdict = verdict_of(result.id, result.terminal, [*result.verdict.findings, finding],
                             len(result.events))
        diagnostics = result.diagnostics if http is None else \
            {**result.diagnostics, "relation_http_twin": {"repeats": first, **http}}
        return dataclasses.replace(result, verdict=verdict, outcome=verdict.outcome,
                                   diagnostics=diagnostics)


def _http_said(http: dict[str, Any] | None) -> str:
    """What the twin's second HTTP call showed, for the finding's message."""
    if http is None:
        return ""
    if http.get("same") is None:
        return f". Over HTTP (the twin) it could not be told: {http.get('why')}"
    if http["same"]:
        return (". Over HTTP (the twin) the two requests got the same answer: only the NNRP "
                "face answers them differently")
    return (". Over HTTP (the twin) they got different answers too: the model itself answers "
            "them differently, not the NNRP face alone")


def _first_difference(before: dict[str, Any], now: dict[str, Any]) -> str:
    for key in sorted(set(before) | set(now)):
        if before.get(key) != now.get(key):
            return f"{key}: {str(before.get(key))[:120]!r} then {str(now.get(key))[:120]!r}"
    return "no difference"
