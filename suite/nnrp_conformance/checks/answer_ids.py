"""A relation across the operations of a run (issue 45 item 3, in the manner of metamorphic
testing): two different requests never receive the same answer id (``answer.id-reused``, a
recommendation).

OpenAI gives every completion and every Response an id of its own, and a client keys on it;
the profile carries those bodies without restating that. An endpoint whose cache is keyed on
the wrong thing, or whose streams cross between operations, hands one request's answer, id and
all, to another: each answer judged alone looks fine. So the run remembers each answer's id
(the terminal body's ``id`` of a chat completion or a Response, else the ``id`` of the OpenAI
chunks its events carry) with the request that got it, and a later answer with a known id
fails when its request is a different one: another ``request_id`` (or none on either side)
and another body. The same request sent again (a re-run, a shrinking try under its case's
``request_id``, the client's own correlation id reused) may get the same id: not judged.
The ids are the run's, whatever session each answer came on (the run sends some generated
repeats on a session of their own, ``generate/repeats.py``): an id that comes round again on
another session (ids numbered per session, from the frame id §6 lets an endpoint derive a
request id from) fails the same way, and its message says so.

Owns :class:`AnswerIds`, which ``run_cases.py`` holds for the run and asks after each case.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from nnrp_conformance import contract, rules
from nnrp_conformance.checks.model import verdict_of
from nnrp_conformance.findings import Finding

__all__ = ["RULE", "AnswerIds", "answer_ids"]

RULE = "answer.id-reused"
_ANSWER_OBJECTS = frozenset({"chat.completion", "response"})


def answer_ids(result: Any) -> set[str]:
    """The id an operation's answer carries: its completed body's (a chat completion or a
    Response), else, for a stream that ends without one, its OpenAI chunks'. (Chunks that name
    another completion than their body are ``completion.identity``'s to judge.)"""
    bodies: set[str] = set()
    chunks: set[str] = set()
    for ev in result.events or ():
        if not isinstance(ev, dict):
            continue
        chunk = ev.get("openai_chunk")
        if isinstance(chunk, dict) and isinstance(chunk.get("id"), str) and chunk["id"]:
            chunks.add(chunk["id"])
        body = ev.get("body") if ev.get("type") == contract.EV_COMPLETED else None
        if isinstance(body, dict) and body.get("object") in _ANSWER_OBJECTS \
                and isinstance(body.get("id"), str) and body["id"]:
            bodies.add(body["id"])
    return bodies or chunks


def _request(case: Any) -> tuple[Any, str]:
    envelope = case.envelope if isinstance(getattr(case, "envelope", None), dict) else {}
    body = json.dumps(envelope.get("body"), sort_keys=True, default=str)
    return envelope.get("request_id"), body


class AnswerIds:
    """The answer ids seen so far in a run, each with the case and request that got it."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[str, tuple[Any, str], int]] = {}

    def judge(self, case: Any, result: Any, *, strict: bool, session: int = 0) -> Any:
        """``result`` with ``answer.id-reused`` when its answer carries an id an earlier,
        different request got (module doc); remembers its ids either way. ``session``: the
        number of the session it ran on."""
        request = _request(case)
        finding = None
        for answer_id in sorted(answer_ids(result)):
            earlier = self._seen.setdefault(answer_id, (result.id, request, session))
            other_case, (other_rid, other_body), other_session = earlier
            same_request = (request[0] is not None and request[0] == other_rid) \
                or request[1] == other_body
            if finding is None and other_case != result.id and not same_request:
                why = "ids numbered per session?" if other_session != session else \
                    "a cache keyed on the wrong thing, crossed streams?"
                finding = Finding(
                    RULE, f"the answer's id {answer_id!r} is the id of the answer "
                    f"{other_case} got, to another request"
                    + (" on another session" if other_session != session else "")
                    + f": one request's answer handed to another, or {why}", None,
                    f"an id of its own, not {other_case}'s", answer_id, rules.citation(RULE),
                    rules.finding_level(RULE, strict=strict))
        if finding is None:
            return result
        findings = [*result.verdict.findings, finding]
        verdict = verdict_of(result.id, result.terminal, findings, len(result.events))
        return dataclasses.replace(result, verdict=verdict, outcome=verdict.outcome)
