"""Relations between a request and its repeats (issue 45 item 3): the groups the generator
makes (generate/repeats.py) and their judge (checks/same_answers.py). The example endpoint's
defects of both rules are killed over the real wire by tests/reliability/test_kill_rate.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.case_results import CaseResult
from nnrp_conformance.checks.model import verdict_of
from nnrp_conformance.checks.same_answers import SameAnswers
from nnrp_conformance.generate import run as generate_run
from nnrp_conformance.generate.run import draw
from nnrp_conformance.generate.strategies import FAMILY_VALID, Claim

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0,
        "seed": 0}
FIRST = "generated.valid.chat.1-0000"


def _case(body: dict[str, Any], repeats: dict[str, str] | None = None) -> Any:
    generated: dict[str, Any] = {"family": "valid", "seed": 1, "index": 0}
    if repeats:
        generated["repeats"] = repeats
    return SimpleNamespace(envelope={"operation": contract.OP_CHAT_COMPLETIONS_CREATE,
                                     "body": body},
                           recipe=SimpleNamespace(data={"generated": generated}))


def _result(case_id: str, text: str, terminal: str = "success") -> CaseResult:
    events = [{"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": text},
              {"type": contract.EV_COMPLETED, "body": {
                  "id": f"chatcmpl-{case_id}", "object": "chat.completion", "choices": [
                      {"index": 0, "message": {"role": "assistant", "content": text},
                       "finish_reason": "stop"}]}}]
    return CaseResult(case_id, "passed", terminal, verdict_of(case_id, terminal, [], 2),
                      events, 0.1, "t", 1, "optional", "selected", None)


def _findings(judge: SameAnswers, body: dict[str, Any], case_id: str, text: str,
              change: str | None, *, strict: bool = True, session: int = 0) -> list[Any]:
    repeats = {"case": FIRST, "change": change} if change else None
    result = judge.judge(_case(body, repeats), _result(case_id, text), strict=strict,
                         session=session)
    return list(result.verdict.findings)


def _rules(judge: SameAnswers, body: dict[str, Any], case_id: str, text: str,
           change: str | None, *, strict: bool = True, session: int = 0) -> list[str]:
    return [f.rule for f in _findings(judge, body, case_id, text, change, strict=strict,
                                      session=session)]


def test_a_repeat_answered_otherwise_fails_and_the_same_answer_passes() -> None:
    judge = SameAnswers()
    assert _rules(judge, BODY, FIRST, "hi hi", None) == []
    assert _rules(judge, BODY, "b", "hi hi", "none") == []
    assert _rules(judge, BODY, "c", "so hi hi", "none") == ["answer.repeatable"]
    lenient = SameAnswers()
    _rules(lenient, BODY, FIRST, "hi", None)
    result = lenient.judge(_case(BODY, {"case": FIRST, "change": "none"}), _result("b", "ho"),
                           strict=False)
    assert result.outcome == "passed"  # a recommendation: failed only with --strict


def test_user_is_judged_only_where_the_exact_repeat_matched() -> None:
    judge = SameAnswers()
    _rules(judge, BODY, FIRST, "hi", None)
    _rules(judge, BODY, "b", "hi", "none")
    assert _rules(judge, {**BODY, "user": "u"}, "c", "u hi", "user-added") == [
        "answer.user-neutral"]
    assert _rules(judge, {**BODY, "user": "u"}, "d", "hi", "user-added") == []
    unsteady = SameAnswers()
    _rules(unsteady, BODY, FIRST, "hi", None)
    assert _rules(unsteady, BODY, "b", "ho", "none") == ["answer.repeatable"]
    assert _rules(unsteady, {**BODY, "user": "u"}, "c", "u hi", "user-added") == []


def test_a_repeat_on_another_session_is_judged_and_says_the_answer_follows_the_session(
        ) -> None:
    judge = SameAnswers()
    _rules(judge, BODY, FIRST, "hi", None, session=0)
    assert _rules(judge, BODY, "b", "hi", "none", session=0) == []
    found = _findings(judge, BODY, "d", "well hi", "another-session", session=1)
    assert [f.rule for f in found] == ["answer.repeatable"]
    assert "on another session" in found[0].message and "follows the session" in found[0].message
    steady = SameAnswers()
    _rules(steady, BODY, FIRST, "hi", None, session=0)
    assert _rules(steady, BODY, "d", "hi", "another-session", session=1) == []


def test_user_is_judged_on_the_footing_its_exact_repeat_was_shown() -> None:
    """A user repeat on another session than its first is judged only once the exact
    repeat across sessions matched: a session-bound answer is no fault of ``user``."""
    judge = SameAnswers()
    _rules(judge, BODY, FIRST, "hi", None, session=0)
    _rules(judge, BODY, "b", "hi", "none", session=0)
    assert _rules(judge, {**BODY, "user": "u"}, "c", "ok hi", "user-added", session=1) == []
    _rules(judge, BODY, "d", "hi", "another-session", session=1)
    assert _rules(judge, {**BODY, "user": "u"}, "e", "ok hi", "user-added", session=1) == [
        "answer.user-neutral"]


def test_another_body_under_the_case_is_not_compared() -> None:
    judge = SameAnswers()
    _rules(judge, BODY, FIRST, "hi", None)
    shrunk = {**BODY, "messages": [{"role": "user", "content": "h"}]}
    assert _rules(judge, shrunk, "b", "h", "none") == []  # a shrinking try


def test_groups_repeat_an_earlier_valid_request_made_deterministic(monkeypatch: Any) -> None:
    claims = [Claim(contract.OP_CHAT_COMPLETIONS_CREATE, streaming=True)]
    drafts = draw(claims, "m", 60, 7)
    repeats = [(i, d) for i, d in enumerate(drafts) if d.repeats is not None]
    assert len(repeats) >= 2
    for i, d in repeats:
        first, change = d.repeats or (0, "")
        base = drafts[first]
        assert first < i and base.family == d.family == FAMILY_VALID
        assert base.body["temperature"] == 0 and "seed" in base.body
        strip = ({k: v for k, v in b.items() if k != "user"} for b in (base.body, d.body))
        assert next(strip) == next(strip)
        assert ("user" in d.body) == (change == "user-added") \
            or change in ("none", "another-session")
    # each group's last repeat goes to a session of its own
    assert {d.repeats[1] for _, d in repeats if d.repeats} >= {"none", "another-session"}
    # every other case is what the seed drew without the groups
    monkeypatch.setattr(generate_run, "related", lambda drafts, seed: list(drafts))
    plain = draw(claims, "m", 60, 7)
    bases = {d.repeats[0] for d in drafts if d.repeats is not None}
    changed = {i for i, (a, b) in enumerate(zip(drafts, plain, strict=True)) if a != b}
    # (a base drawn at temperature 0 with a seed is left as it was)
    assert {i for i, _ in repeats} <= changed <= bases | {i for i, _ in repeats}
