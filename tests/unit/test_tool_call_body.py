"""tool-call.index-unique and tool-call.body-agreement on synthetic observations (issue 30):
the sides the example endpoint's two defects do not reach, and the readings that must stay
legal (both are recommendations: non-strict unless the run is strict)."""

from __future__ import annotations

from typing import Any

from test_checks import case_of, obs, rules, tool

from nnrp_conformance import contract
from nnrp_conformance.checks import judge

CASE = "level1.chat.tool-call-forced"


def _call(call_id: str, args: str, *, index: int = 0, item: str = "item_1",
          deltas: bool = True) -> list[dict]:
    ids = {"index": index, "item_id": item}
    parts = [tool("delta", call_id, arguments_delta=args[:3], **ids),
             tool("delta", call_id, arguments_delta=args[3:], **ids)] if deltas else []
    return [tool("started", call_id, **ids), *parts,
            tool("completed", call_id, arguments=args, **ids)]


def _body(*calls: dict[str, Any]) -> dict:
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", **c} for c in calls]}
    return {"type": contract.EV_COMPLETED, "body": {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "tiny",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}}


def _fn(args: str, name: str = "lookup", **extra: Any) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": args}, **extra}


def _verdict(events: list, terminal: dict, *, strict: bool = False) -> Any:
    return judge(case_of(CASE), obs(events, "success", terminal), strict=strict)


def test_two_calls_at_two_indexes_agreeing_with_the_body_pass_strictly() -> None:
    events = _call("call_1", '{"q":"a"}') + _call("call_2", '{"q":"b"}', index=1, item="item_2")
    v = _verdict(events, _body(_fn('{"q":"a"}', id="call_1"), _fn('{"q":"b"}', id="call_2")),
                 strict=True)
    assert v.passed, v.findings


def test_two_calls_sharing_an_index_are_a_recommendation() -> None:
    events = _call("call_1", '{"q":"a"}') + _call("call_2", '{"q":"b"}', item="item_2")
    body = _body(_fn('{"q":"a"}', id="call_1"), _fn('{"q":"b"}', id="call_2"))
    assert rules(_verdict(events, body)) == ["tool-call.index-unique"]
    assert _verdict(events, body).outcome == "passed"  # non-strict by default
    assert _verdict(events, body, strict=True).outcome == "failed"


def test_body_arguments_name_id_and_count_must_be_the_streamed_ones() -> None:
    events = _call("call_1", '{"q":"a"}')
    for body in (_body(_fn('{"q":"b"}', id="call_1")),           # other arguments
                 _body(_fn('{"q":"a"}', name="other", id="call_1")),  # another name
                 _body(_fn('{"q":"a"}', id="call_9")),           # an id never streamed
                 _body(_fn('{"q":"a"}'), _fn('{"q":"a"}')),      # a call too many
                 _body()):                                       # no call at all
        assert rules(_verdict(events, body, strict=True)) == ["tool-call.body-agreement"], body


def test_a_body_without_ids_is_matched_in_order_and_one_without_deltas_by_completed() -> None:
    events = _call("call_1", '{"q":"a"}', deltas=False) + _call(
        "call_2", '{"q":"b"}', index=1, item="item_2")
    assert _verdict(events, _body(_fn('{"q":"a"}'), _fn('{"q":"b"}')), strict=True).passed
    v = _verdict(events, _body(_fn('{"q":"b"}'), _fn('{"q":"a"}')), strict=True)
    assert rules(v) == ["tool-call.body-agreement"]


def test_the_stream_is_compared_with_itself_whatever_it_streamed() -> None:
    # vLLM 0.32.0 streams a forced call's arguments as `true`: its body says the same
    events = _call("call_1", "true", deltas=False)
    assert _verdict(events, _body(_fn("true", id="call_1")), strict=True).passed


def test_no_judgement_when_a_call_failed_or_the_operation_did_not_succeed() -> None:
    errored = [tool("started", "call_1"), tool("error", "call_1", error={
        "type": "server_error", "code": "tool_call_parse_error", "message": "bad"})]
    v = _verdict(errored, _body(_fn("{}", id="call_1")), strict=True)
    assert "tool-call.body-agreement" not in rules(v)
    cancelled = judge(case_of(CASE), obs(_call("call_1", '{"q":"a"}'), "success",
                                         _body(_fn("{}", id="call_1")), cancelled_at_index=1),
                      strict=True)
    assert "tool-call.body-agreement" not in rules(cancelled)
