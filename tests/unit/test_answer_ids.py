"""The relation across operations (checks/answer_ids.py): two different requests never get
the same answer id; the same request sent again may (issue 45 item 3)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.case_results import CaseResult
from nnrp_conformance.checks.answer_ids import AnswerIds, answer_ids
from nnrp_conformance.checks.model import verdict_of


def _case(request_id: str | None, text: str) -> Any:
    envelope: dict[str, Any] = {"operation": contract.OP_CHAT_COMPLETIONS_CREATE,
                                "body": {"messages": [{"role": "user", "content": text}]}}
    if request_id is not None:
        envelope["request_id"] = request_id
    return SimpleNamespace(envelope=envelope)


def _result(case_id: str, answer_id: str) -> CaseResult:
    events = [{"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": "hi",
               "openai_chunk": {"id": answer_id, "object": "chat.completion.chunk"}},
              {"type": contract.EV_COMPLETED, "body": {"id": answer_id,
                                                       "object": "chat.completion"}}]
    return CaseResult(case_id, "passed", "success", verdict_of(case_id, "success", [], 2),
                      events, 0.1, "t", 1, "optional", "selected", None)


def test_another_request_with_a_known_answer_id_is_found() -> None:
    ids = AnswerIds()
    assert answer_ids(_result("a", "chatcmpl-1")) == {"chatcmpl-1"}
    first = ids.judge(_case("a", "one"), _result("a", "chatcmpl-1"), strict=False)
    assert first.verdict.findings == []
    second = ids.judge(_case("b", "two"), _result("b", "chatcmpl-1"), strict=False)
    assert [f.rule for f in second.verdict.findings] == ["answer.id-reused"]
    assert "a got" in second.verdict.findings[0].message
    assert second.outcome == "passed"  # a recommendation: a failure only with --nnrp-strict
    strict = AnswerIds()
    strict.judge(_case(None, "one"), _result("a", "chatcmpl-1"), strict=True)
    two = strict.judge(_case(None, "two"), _result("b", "chatcmpl-1"), strict=True)
    assert two.outcome == "failed"


def test_the_same_request_again_may_get_the_same_id() -> None:
    ids = AnswerIds()
    ids.judge(_case("a", "one"), _result("a", "chatcmpl-1"), strict=True)

    def again(rid: str, text: str, case_id: str, answer_id: str) -> list[Any]:
        result = ids.judge(_case(rid, text), _result(case_id, answer_id), strict=True)
        return list(result.verdict.findings)

    # a re-run, a shrinking try under the case's request_id, the client's own id reused
    assert again("a", "one", "a", "chatcmpl-1") == []
    assert again("a", "shorter", "a.try", "chatcmpl-1") == []
    assert again("c", "one", "c", "chatcmpl-1") == []
    assert again("d", "four", "d", "chatcmpl-4") == []


def test_ids_are_the_runs_across_sessions_and_the_message_says_so() -> None:
    """An id that comes round again on another session (ids numbered per session) fails
    like any reused id; the message names the session (issue 45 item 3, across sessions)."""
    ids = AnswerIds()
    ids.judge(_case(None, "one"), _result("a", "chatcmpl-op3"), strict=True, session=0)
    again = ids.judge(_case(None, "two"), _result("b", "chatcmpl-op3"), strict=True, session=1)
    assert [f.rule for f in again.verdict.findings] == ["answer.id-reused"]
    assert "on another session" in again.verdict.findings[0].message
    assert "numbered per session" in again.verdict.findings[0].message
