"""A verdict only on what was exercised (issue 43 item 2; checks/exercise.py): a cancel never
sent, a terminal that was the endpoint's next frame after the cancel (it may have crossed it),
a deadline never reached judge nothing about cancellation or timeouts; the rest of the stream
is still judged, and an endpoint that streamed on after the cancel is still failed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.case_results import CaseResult, started_now
from nnrp_conformance.checks import judge
from nnrp_conformance.checks.exercise import (
    IN_FLIGHT_FRAMES,
    NOTES,
    REPEATED_ERRORS,
    smaller_cancel_point,
)
from nnrp_conformance.checks.model import NOT_EXERCISED_NOTES, verdict_of
from nnrp_conformance.events import CaseRecord, RunFinished
from nnrp_conformance.reports.format import summary_line, verdict_label
from nnrp_conformance.reports.html import render_html
from nnrp_conformance.reports.markdown import render_markdown

sys.path.insert(0, str(Path(__file__).parent))
from test_checks import case_of, completion, delta, obs, rules

CANCEL = "level1.chat.cancel.client"
AFTER_CANCEL = {"rule": "wire.result_after_cancel",
                "detail": "RESULT_PUSH delivered for a frame the client cancelled"}
AFTER_CANCEL_PARTIAL = {"rule": "wire.partial_after_cancel",
                        "detail": "PARTIAL_RESULT delivered after the client's cancel"}


def sent(events: int, after: int = 0, stale: int = 0, **cancel: Any) -> dict[str, Any]:
    """The runner's evidence of a cancel sent after the first event."""
    return {"cancel": {"ended_before_cancel": False, "stale_frames_after_cancel": stale,
                       **cancel}, "events_after_cancel": after}


def test_a_cancel_never_sent_is_not_exercised() -> None:
    case = case_of(CANCEL)
    v = judge(case, obs([delta()], "success", completion()))
    assert (v.outcome, v.level, rules(v)) == ("skipped", "not-exercised", ["cancel.not-sent"])
    assert v.findings[0].level == "informational"
    # strict makes no difference: the note judges nothing
    v = judge(case, obs([delta()], "success", completion()), strict=True)
    assert (v.outcome, v.level) == ("skipped", "not-exercised")


def test_a_terminal_already_here_when_the_cancel_was_due_is_not_exercised() -> None:
    v = judge(case_of(CANCEL), obs([delta()], "success", completion(), cancelled_at_index=0,
                                   extra=sent(0, ended_before_cancel=True)))
    assert (v.outcome, v.level, rules(v)) == ("skipped", "not-exercised", ["cancel.not-sent"])


def test_a_terminal_next_after_the_cancel_may_have_crossed_it() -> None:
    o = obs([delta()], "success", completion(), cancelled_at_index=0, extra=sent(0),
            wire_findings=[AFTER_CANCEL])
    v = judge(case_of(CANCEL), o)
    assert (v.outcome, v.level, rules(v)) == ("skipped", "not-exercised", ["cancel.crossed"])


def test_a_terminal_after_what_can_be_in_flight_may_have_crossed_too() -> None:
    """A conformant endpoint observes a cancel at its own pace: frames it sent before then,
    up to IN_FLIGHT_FRAMES, and its terminal are in flight, not a defect."""
    for extra in (sent(0, after=3), sent(0, stale=IN_FLIGHT_FRAMES)):
        o = obs([delta()] * 4, "success", completion(), cancelled_at_index=0, extra=extra,
                wire_findings=[AFTER_CANCEL, AFTER_CANCEL_PARTIAL])
        v = judge(case_of(CANCEL), o)
        assert (v.outcome, v.level, rules(v)) == ("skipped", "not-exercised", ["cancel.crossed"])


def test_a_partial_in_flight_after_a_cancel_the_endpoint_answered_judges_nothing() -> None:
    cancelled = {"type": contract.EV_CANCELLED, "reason": "client"}
    o = obs([delta()] * 2, "cancelled", cancelled, cancelled_at_index=0, extra=sent(0, after=1),
            wire_findings=[AFTER_CANCEL_PARTIAL])
    assert judge(case_of(CANCEL), o).passed
    o = obs([delta()] * 2, "cancelled", cancelled, cancelled_at_index=0,
            extra=sent(0, after=1, stale=IN_FLIGHT_FRAMES), wire_findings=[AFTER_CANCEL_PARTIAL])
    assert "wire.partial_after_cancel" in rules(judge(case_of(CANCEL), o))


def test_an_endpoint_that_streamed_on_after_the_cancel_is_judged() -> None:
    for extra in (sent(0, after=IN_FLIGHT_FRAMES + 1), sent(0, stale=IN_FLIGHT_FRAMES + 1)):
        o = obs([delta()] * 6, "success", completion(), cancelled_at_index=0, extra=extra,
                wire_findings=[AFTER_CANCEL])
        v = judge(case_of(CANCEL), o)
        assert v.outcome == "failed", v.findings
        # the kind after a cancel is a reading (§9): cancel.terminal notes it; the frames the
        # endpoint sent after seeing the cancel fail the case
        assert {"wire.result_after_cancel", "cancel.terminal"} <= set(rules(v))


def test_the_rest_of_the_stream_is_still_judged() -> None:
    bad = {"type": contract.EV_OUTPUT_TEXT_DELTA, "delta": "no index"}
    v = judge(case_of(CANCEL), obs([bad], "success", completion()))
    assert v.outcome == "failed" and v.level == "failed", v.findings
    assert "cancel.not-sent" in rules(v) and "event.schema" in rules(v)
    assert "terminal.kind" not in rules(v) and "sequence.expected" not in rules(v)


def test_a_cancelled_terminal_is_exercised_whatever_the_point() -> None:
    cancelled = {"type": contract.EV_CANCELLED, "reason": "client"}
    assert judge(case_of(CANCEL), obs([delta()], "cancelled", cancelled,
                                      cancelled_at_index=0, extra=sent(0))).passed


def test_a_deadline_never_reached_judges_nothing_about_timeouts() -> None:
    case = case_of("level1.chat.timeout")
    fast = obs([delta()], "success", completion(), extra={"submit_to_terminal_ms": 12.0})
    v = judge(case, fast)
    assert (v.outcome, v.level, rules(v)) == ("skipped", "not-exercised",
                                              ["timeout.not-reached"])
    # past the deadline by the client's clock: judged (the recipe's surplus, non-strict)
    slow = obs([delta()], "success", completion(), extra={"submit_to_terminal_ms": 80.0})
    v = judge(case, slow)
    assert (v.outcome, v.level, rules(v)) == ("passed", "non-strict",
                                              ["timeout.total-deadline"])


def test_a_generated_cancel_point_moves_within_the_stream() -> None:
    assert smaller_cancel_point(3, "never-sent", 1) == 0
    assert smaller_cancel_point(3, "never-sent", 2) == 1
    assert smaller_cancel_point(2, "never-sent", 5) == 1  # its terminal was already here
    assert smaller_cancel_point(2, "crossed", 2) == 1
    assert smaller_cancel_point(0, "crossed", 0) == 0


def test_an_error_at_the_cancel_in_every_attempt_answers_the_cancel() -> None:
    """A success crosses a cancel because the answer was complete; an error right after the
    cancel in every attempt (the runner says so on the last) is the endpoint's answer to it."""
    wrong = {"type": contract.EV_ERROR, "error": {"type": "server_error", "code": "overloaded",
                                                  "message": "busy"}}
    once = obs([delta()], "error", wrong, cancelled_at_index=0, extra=sent(0))
    assert judge(case_of(CANCEL), once).level == "not-exercised"
    every = obs([delta()], "error", wrong, cancelled_at_index=0,
                extra={**sent(0), REPEATED_ERRORS: 2})
    v = judge(case_of(CANCEL), every)
    # judged: no normative text fixes the terminal after a frame cancellation, so the error
    # is cancel.terminal's note (non-strict), not a skipped case
    assert (v.outcome, v.level) == ("passed", "non-strict") and "cancel.terminal" in rules(v), \
        v.findings


def test_every_verdict_of_a_case_with_the_note_is_not_exercised() -> None:
    """The verdict comes from the note, so a case re-judged elsewhere (a concurrent group,
    a generated case's session probe) keeps it."""
    assert set(NOTES.values()) == NOT_EXERCISED_NOTES
    v = judge(case_of(CANCEL), obs([delta()], "success", completion()))
    again = verdict_of("x", "success", v.findings, 1)
    assert (again.outcome, again.level) == ("skipped", "not-exercised")


def test_every_report_counts_the_cases_not_exercised() -> None:
    case = case_of(CANCEL)
    verdict = judge(case, obs([delta()], "success", completion()))
    result = CaseResult(id=case.id, outcome=verdict.outcome, terminal="success",
                        verdict=verdict, events=[delta(), completion()], duration_s=0.1,
                        started_at=started_now(), level=1, status="optional",
                        selection="selected", reason=None)
    record = CaseRecord.from_result(result)
    assert record.not_exercised and record.skipped and verdict_label(record) == "not-exercised"
    assert summary_line([record]) == "0 passed, 0 failed, 0 skipped, 1 not exercised"
    finished = RunFinished([record], 0.1)
    markdown = render_markdown(None, finished)
    assert "1 not exercised" in markdown and "## Not exercised" in markdown
    assert "| 2 | 0.10s |" in markdown  # it ran: its events and duration are shown
    assert "1 not exercised" in render_html(None, finished)
    assert finished.exit_code == 0
