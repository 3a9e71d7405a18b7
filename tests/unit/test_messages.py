"""Messages that say what happened (issue 36 item 2): each finding names the limit that ended
the case, the terminal the endpoint sent, the expected value (never a schema id), and cites
only its rule's quotes that are about the event it judges."""

from __future__ import annotations

from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.checks import Observation, judge
from nnrp_conformance.manifest import manifest_from_dict
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import load_recipes

CHAT = contract.OP_CHAT_COMPLETIONS_CREATE
MANIFEST = manifest_from_dict({
    "adapter": "t", "profile": contract.PROFILE, "schema_version": contract.SCHEMA_VERSION,
    "compatibility_levels": [1],
    "operations": [{"name": CHAT, "streaming": True, "non_streaming": True, "tool_calls": True,
                    "cancellation": True}],
    "models": [{"id": "tiny"}]})
BUNDLED = {r.id: r for r in load_recipes()}


def case_of(recipe_id: str) -> Any:
    return build_plan([BUNDLED[recipe_id]], MANIFEST, model_id="tiny").cases[0]


def delta(**fields: Any) -> dict[str, Any]:
    return {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": "hi", **fields}


def unanswered(expired_by: str) -> Observation:
    return Observation(events=[delta()], raw_events=[None], terminal_kind=None, timed_out=True,
                       cancelled_at_index=1,
                       extra={"expired_by": expired_by, "timeout_s": 60.0,
                              "idle_timeout_s": 25.0})


def test_cancel_unanswered_names_the_limit_that_ended_the_case() -> None:
    case = case_of("level1.chat.cancel.client")
    (idle,) = [f for f in judge(case, unanswered("idle")).findings
               if f.rule == "cancel.unanswered"]
    assert "the idle limit ended the case (25.0s with nothing from the endpoint)" in idle.message
    assert "60.0" not in idle.message
    (whole,) = [f for f in judge(case, unanswered("deadline")).findings
                if f.rule == "cancel.unanswered"]
    assert "the case limit ended the case (60.0s)" in whole.message
    assert "idle" not in whole.message


def test_an_expired_deadline_says_what_the_endpoint_did_strict_or_not() -> None:
    """An endpoint that stopped at the deadline with response.cancelled: the message says so
    (not that it completed the answer), and --strict charges the recipe's own rule, never
    terminal.kind with §10's invalid-body row."""
    case = case_of("level1.chat.timeout")
    stopped = {"type": contract.EV_CANCELLED, "reason": "timeout"}
    for strict, level in ((False, "non-strict"), (True, "failed")):
        v = judge(case, Observation(events=[delta()], raw_events=[None],
                                    terminal_kind="cancelled", terminal_event=stopped),
                  strict=strict)
        assert [(f.rule, f.level) for f in v.findings] == [("timeout.total-deadline", level)]
        message = v.findings[0].message
        assert "stopped after 1 event(s) with response.cancelled (reason 'timeout')" in message
        assert "completes the answer" not in message
        assert "(it expects the error terminal)" in message


def test_a_schema_finding_shows_the_expected_value_and_its_own_quote() -> None:
    """A text delta without index: expected is the required fields, not the schema id
    event.output_text.delta; the citation is the profile's streaming sections, not the
    contract JSON's tool-call events."""
    v = judge(case_of("level1.chat.streaming-text"),
              Observation(events=[{"type": contract.EV_OUTPUT_TEXT_DELTA, "delta": "hi"}],
                          raw_events=[None], terminal_kind="success"))
    (finding,) = [f for f in v.findings if f.rule == "event.schema"]
    assert finding.expected == {"/index": {"required": ["type", "index", "delta"]}}
    assert finding.expected != "event.output_text.delta"
    assert "toolCallEvents" not in finding.spec and "contract JSON" not in finding.spec
    assert "§7.1 Partial-Result Wire Mapping" in finding.spec
    # a tool-call event's finding still cites the contract's tool-call events
    bad = {"type": "response.tool_call.started", "index": 0, "item_id": "i", "call_id": "c"}
    v = judge(case_of("level1.chat.streaming-text"),
              Observation(events=[bad], raw_events=[None], terminal_kind="success"))
    (finding,) = [f for f in v.findings if f.rule == "event.schema"]
    assert "public contract JSON §toolCallEvents" in finding.spec
