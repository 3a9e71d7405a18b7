"""Judgement on synthetic observations: a correct stream passes, each violation has its rule."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nnrp_conformance import contract, validation
from nnrp_conformance.checks import Observation, json_contains, judge
from nnrp_conformance.manifest import manifest_from_dict
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import Recipe, load_recipes, recipe_level
from nnrp_conformance.runner import (
    CaseResult,
    case_results_document,
    payload_of,
    skipped_result,
    terminal_kind_of,
)

CHAT = contract.OP_CHAT_COMPLETIONS_CREATE
MANIFEST_DATA = {
    "adapter": "test-adapter", "profile": contract.PROFILE,
    "schema_version": contract.SCHEMA_VERSION, "compatibility_levels": [1],
    "operations": [{"name": CHAT, "streaming": True, "non_streaming": True, "tool_calls": True,
                    "cancellation": True}],
    "extensions": [{"name": "vllm.diagnostics", "critical": False}],
    "models": [{"id": "tiny"}],
}
MANIFEST = manifest_from_dict(MANIFEST_DATA)
BUNDLED = {r.id: r for r in load_recipes()}


def case_of(recipe_id: str, manifest: Any = MANIFEST) -> Any:
    return build_plan([BUNDLED[recipe_id]], manifest, model_id="tiny").cases[0]


def custom_case(expect_events: list[dict], terminal: str = "success", *,
                body: dict | None = None, **extra: Any) -> Any:
    data = {"id": "t.custom", "profile": contract.PROFILE,
            "schema_version": contract.SCHEMA_VERSION, "operation": CHAT,
            "required_capabilities": ["api.level1"],
            "request": {"body": body if body is not None else {"stream": True}},
            "expect": {"events": expect_events, "terminal": terminal}, **extra}
    validation.check("recipe", data)
    r = Recipe(id="t.custom", path=Path("<t>"), data=data, status="mandatory", operation=CHAT,
               required_capabilities=("api.level1",), level=recipe_level(data))
    return build_plan([r], MANIFEST).cases[0]


def delta(text: str = "hi", index: int = 0) -> dict:
    return {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": index, "delta": text}


def usage(i: int = 3, o: int = 2) -> dict:
    return {"type": contract.EV_USAGE, "usage": {"input_tokens": i, "output_tokens": o,
                                                 "total_tokens": i + o}}


def completion() -> dict:
    return {"type": contract.EV_COMPLETED, "body": {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "tiny",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}}


def error(code: str, typ: str | None = None, message: str = "nope") -> dict:
    return {"type": contract.EV_ERROR, "error": {
        "type": typ or contract.ERROR_CODES.get(code, "invalid_request_error"), "code": code,
        "message": message}}


def tool(kind: str, call_id: str = "call_1", **fields: Any) -> dict:
    ev = {"type": f"response.tool_call.{kind}", "index": 0, "item_id": "item_1",
          "call_id": call_id}
    if kind in ("started", "completed"):
        ev["name"] = "lookup"
    ev.update(fields)
    return ev


def obs(events: list, terminal_kind: str | None = "success",
        terminal_event: dict | None = None, **kw: Any) -> Observation:
    return Observation(events=list(events), raw_events=[None] * len(events),
                       terminal_kind=terminal_kind, terminal_event=terminal_event, **kw)


def rules(verdict: Any) -> list[str]:
    return [f.rule for f in verdict.findings]


# --- passing observations -----------------------------------------------------------------


def test_correct_stream_passes() -> None:
    v = judge(case_of("level1.chat.streaming-text"),
              obs([delta("h"), delta("i")], "success", completion()), manifest=MANIFEST)
    assert v.outcome == "passed", v.findings
    assert v.terminal == "success" and v.findings == []


def test_empty_success_push_passes_for_streaming() -> None:
    v = judge(case_of("openai-compatible.chat.streaming-text"), obs([delta()], "success", None))
    assert v.passed, v.findings


def test_correct_tool_call_stream_passes() -> None:
    events = [tool("started"), tool("delta", arguments_delta='{"query":'),
              tool("delta", arguments_delta=' "Paris"}'),
              tool("completed", arguments='{"query": "Paris"}')]
    v = judge(case_of("level1.chat.tool-call-forced"), obs(events))
    assert v.passed, v.findings


def test_interleaved_tool_calls_pass() -> None:
    events = [tool("started", "a"), tool("started", "b"), tool("delta", "b", arguments_delta="{}"),
              tool("delta", "a", arguments_delta="{"), tool("completed", "b", arguments="{}"),
              tool("delta", "a", arguments_delta="}"), tool("completed", "a", arguments="{}")]
    v = judge(case_of("level1.chat.tool-call-forced"), obs(events))
    assert v.passed, v.findings


def test_non_streaming_passes_and_error_recipes_pass() -> None:
    assert judge(case_of("level1.chat.non-streaming-body"),
                 obs([], "success", completion())).passed
    v = judge(case_of("level1.chat.backend-error"), obs([], "error", error("backend_error")))
    assert v.passed, v.findings
    v = judge(case_of("openai-compatible.chat.invalid-body"),
              obs([], "error", error("missing_messages")))
    assert v.passed, v.findings


def test_usage_recipe_passes() -> None:
    v = judge(case_of("level1.chat.usage-shape"), obs([delta(), delta(), usage()]))
    assert v.passed, v.findings


# --- one rule each ------------------------------------------------------------------------


def test_event_schema() -> None:
    bad = {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": -1}
    v = judge(case_of("level1.chat.streaming-text"), obs([delta(), bad]))
    # the index also changed: every check runs on what it applies to (issue 27 item 6)
    assert rules(v) == ["event.schema", "order.text-index"]
    f = v.findings[0]
    assert f.event_index == 1 and "event #1" in f.message and '"index": -1' in f.message
    assert "level1.chat.streaming-text" in v.message
    unknown = judge(case_of("level1.chat.streaming-text"),
                    obs([delta(), {"type": "response.output_text.done"}]))
    assert rules(unknown) == ["event.schema"]


def test_checks_run_on_what_was_seen_whatever_the_recipe_lists() -> None:
    """Alternating text indexes in a single-output chat: not only the text-order recipe sees
    them (issue 27 item 6)."""
    alternating = [delta(index=0), delta(index=1), delta(index=0)]
    for recipe in ("level1.chat.streaming-text", "level1.chat.usage-shape",
                   "openai-compatible.chat.streaming-text"):
        assert "order.text-index" in rules(judge(case_of(recipe), obs(alternating))), recipe
    bad_usage = {"type": contract.EV_USAGE, "usage": {"total_tokens": 3}}
    assert "usage.shape" in rules(judge(case_of("level1.chat.streaming-text"),
                                        obs([delta(), bad_usage])))


def test_event_decode() -> None:
    raw = SimpleNamespace(decode_error="partial_result.json: not JSON", raw=b"data: {}")
    o = Observation(events=[delta(), None], raw_events=[None, raw], terminal_kind="success")
    v = judge(case_of("level1.chat.streaming-text"), o)
    assert rules(v) == ["event.decode"]
    assert v.findings[0].seen == "data: {}"


def test_extension_fields_only_ignored_when_declared_non_critical() -> None:
    tagged = {**delta(), "vllm.diagnostics": {"queue_ms": 1}}
    assert judge(case_of("level1.chat.streaming-text"), obs([tagged]), manifest=MANIFEST).passed
    other = {**delta(), "acme.secret": 1}
    # an undeclared field is this suite's recommendation, not the profile's (issue 27)
    assert rules(judge(case_of("level1.chat.streaming-text"), obs([other]),
                       manifest=MANIFEST)) == ["event.extra-field"]
    assert rules(judge(case_of("level1.chat.streaming-text"), obs([tagged]))) == [
        "event.extra-field"]


def test_sequence_missing_and_fields() -> None:
    v = judge(case_of("level1.chat.streaming-text"), obs([usage()]))
    # the element's own authority (issue 43): the profile's streamed text, quoted
    assert ("expect.streamed-text", "failed") in {(f.rule, f.level) for f in v.findings}
    v = judge(case_of("level1.chat.backend-error"), obs([], "error", error("internal_error")))
    # no normative document fixes a code (issue 36): another code than the one our recipe
    # maps the case to is this suite's recommendation only, named by its own rule
    assert rules(v) == ["error.code-choice"]
    assert "error.code 'internal_error' where this case maps to 'backend_error' or " \
        "'unsupported_model'" in v.findings[0].message


def test_sequence_optional_entries_are_order_checked() -> None:
    # usage before the (optional) text deltas: upstream accepts it, we do not
    v = judge(case_of("openai-compatible.chat.usage"), obs([usage(), delta(), delta()]))
    assert rules(v) == ["sequence.expected"]
    assert "out of order" in v.findings[0].message


def test_sequence_optional_entry_fields_checked_when_present() -> None:
    case = custom_case([{"type": contract.EV_OUTPUT_TEXT_DELTA, "optional": True,
                         "fields": {"index": 0}}])
    assert judge(case, obs([])).passed
    assert rules(judge(case, obs([delta(index=1)]))) == ["sequence.expected"]


def test_min_and_max_count_from_the_cursor() -> None:
    case = custom_case([{"type": contract.EV_USAGE},
                        {"type": contract.EV_OUTPUT_TEXT_DELTA, "min_count": 2}])
    # two deltas overall, but only one after the usage event
    assert rules(judge(case, obs([delta(), usage(), delta()]))) == ["sequence.expected"]
    assert judge(case, obs([delta(), usage(), delta(), delta()])).passed
    v = judge(case_of("level1.chat.usage-shape"), obs([delta(), usage(), usage()]))
    assert set(rules(v)) == {"usage.at-most-once"}


def test_bool_is_not_int_in_fields() -> None:
    assert json_contains({"a": 1}, {"a": 1}) and not json_contains({"a": True}, {"a": 1})
    assert json_contains({"l": [1, 2, 3]}, {"l": [1, 2]})
    assert not json_contains({"l": [1]}, {"l": [1, 2]})


@pytest.mark.parametrize(
    "events",
    [
        [tool("delta", arguments_delta="{}"), tool("completed", arguments="{}")],
        [tool("started"), tool("started"), tool("completed", arguments="")],
        [tool("started"), tool("completed", arguments=""), tool("delta", arguments_delta="")],
        [tool("started"), tool("completed", arguments=""), tool("error", error={
            "type": "server_error", "code": "tool_call_parse_error", "message": "x"})],
        [tool("started"), tool("delta", arguments_delta="{}")],
    ],
    ids=["delta-before-started", "started-twice", "delta-after-completed", "two-ends",
         "never-completed"],
)
def test_tool_call_ordering(events: list) -> None:
    case = custom_case([])
    assert "order.tool-call" in rules(judge(case, obs(events)))


def test_tool_call_arguments_concatenation() -> None:
    events = [tool("started"), tool("delta", arguments_delta='{"a"'),
              tool("delta", arguments_delta=":1}"), tool("completed", arguments='{"a":2}')]
    v = judge(custom_case([]), obs(events))
    assert rules(v) == ["tool-call.arguments"]
    assert (v.findings[0].expected, v.findings[0].seen) == ('{"a":1}', '{"a":2}')


def test_tool_call_event_is_never_terminal() -> None:
    v = judge(custom_case([]), obs([tool("started")], "success",
                                   tool("completed", arguments="")))
    assert "terminal.kind" in rules(v)


def test_terminal_exactly_once() -> None:
    v = judge(case_of("level1.chat.streaming-text"), obs([delta(), completion()]))
    assert "terminal.exactly-once" in rules(v)
    v = judge(case_of("level1.chat.streaming-text"),
              obs([delta()], None, extra={"delivery": "transport_error"}))
    assert rules(v) == ["terminal.exactly-once"]


def test_terminal_kind() -> None:
    v = judge(case_of("level1.chat.streaming-text"),
              obs([delta()], "error", error("internal_error")))
    # the expected kind is judged under the recipe's terminal_rule (issue 43)
    assert ("expect.success", "failed") in {(f.rule, f.level) for f in v.findings}
    # a cancelled drop that carries response.completed contradicts itself
    v = judge(case_of("level1.chat.cancel.client"), obs([delta()], "cancelled", completion(),
                                                       cancelled_at_index=0))
    assert "terminal.kind" in rules(v)


def test_nothing_after_the_terminal() -> None:
    v = judge(case_of("level1.chat.streaming-text"),
              obs([delta()], extra={"late_events": [delta()]}))
    assert set(rules(v)) == {"terminal.after", "order.text-before-terminal"}
    v = judge(case_of("level1.chat.cancel.client"),
              obs([delta()], "cancelled", None, cancelled_at_index=0,
                  extra={"late_events": [usage()]}))
    assert rules(v) == ["cancel.late-event"]


def test_real_cancel_passes_and_not_sent_is_not_exercised() -> None:
    case = case_of("level1.chat.cancel.client")
    good = {"type": contract.EV_CANCELLED, "reason": "client"}
    assert judge(case, obs([delta()], "cancelled", good, cancelled_at_index=0)).passed
    assert judge(case, obs([delta()], "cancelled", None, cancelled_at_index=0)).passed
    # issue 14: the profile leaves the reason open; the recipe no longer pins "client"
    v = judge(case, obs([delta()], "cancelled", {"type": contract.EV_CANCELLED,
                                                "reason": "timeout"}, cancelled_at_index=0))
    assert v.passed and v.level == "passed", v.findings
    v = judge(case, obs([delta()], "cancelled", {"type": contract.EV_CANCELLED,
                                                "reason": "user_stop"}, cancelled_at_index=0))
    assert (v.outcome, v.level, rules(v)) == ("passed", "non-strict", ["cancel.reason"])
    # the answer ended before the cancel point: nothing about cancellation is judged
    # (checks/exercise.py; tests/unit/test_exercise.py)
    v = judge(case, obs([], "success", completion()))
    assert (v.outcome, v.level, rules(v)) == ("skipped", "not-exercised", ["cancel.not-sent"])


def test_in_band_hint() -> None:
    case = case_of("level1.chat.cancel.in-band-hint")
    cancelled = {"type": contract.EV_CANCELLED, "reason": "cancel_after_events"}
    assert judge(case, obs([delta()], "cancelled", cancelled)).passed
    v = judge(case, obs([delta(), delta(), delta()], "cancelled", cancelled))
    # the endpoint acting on the hint is this suite's reading (issue 27): non-strict
    assert (v.outcome, v.level, set(rules(v))) == ("passed", "non-strict", {"cancel.hint"})


def test_error_code_and_body() -> None:
    case = custom_case([{"type": contract.EV_ERROR}], "error")
    # the code list is this suite's (issue 27): a recommendation
    v = judge(case, obs([], "error", error("made_up", "server_error")))
    assert (v.level, set(rules(v))) == ("non-strict", {"error.code-choice"})
    v = judge(case, obs([], "error", error("internal_error", "invalid_request_error")))
    assert set(rules(v)) == {"error.code-choice"}
    assert any("family" in f.message for f in v.findings)
    # backend_error: the profile fixes the code, not its family
    assert judge(case, obs([], "error", error("backend_error", "invalid_request_error"))).passed
    v = judge(case, obs([], "error", error("backend_error", message="")))
    assert set(rules(v)) == {"error.body", "event.schema"}
    # an error terminal without a profile error body: "where available" (profile §7); a
    # recipe that expects response.error reports it once, under that element's authority
    # (here upstream's default: the recipe names none)
    assert rules(judge(case, obs([], "error", None))) == ["sequence.expected"]
    bare = custom_case([], "error")
    v = judge(bare, obs([], "error", None))
    assert (v.outcome, v.level, rules(v)) == ("passed", "non-strict", ["error.body-missing"])


def test_usage_shape_named_check() -> None:
    bad = {"type": contract.EV_USAGE, "usage": {"input_tokens": 1, "output_tokens": "2",
                                                "total_tokens": 3}}
    v = judge(case_of("level1.chat.usage-shape"), obs([delta(), bad]))
    # the profile requires a usage and names no count: the counts are this suite's
    assert (v.outcome, v.level, set(rules(v))) == ("passed", "non-strict", {"usage.shape"})


@pytest.mark.parametrize(("stream", "judged"), [(False, True), (None, True), ("true", False),
                                                 ([True], False)])
def test_only_a_false_or_absent_stream_asks_for_one_result(stream: Any, judged: bool) -> None:
    """A stream that is no boolean is an invalid request: an endpoint that accepts it may read
    it either way (vLLM reads "true" as true and streams), so the one-result rules do not judge
    its answer (a generated stream-string case had 39 nonstreaming findings, issue 47)."""
    body: dict[str, Any] = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
    if stream is not None:
        body["stream"] = stream
    v = judge(custom_case([], body=body), obs([delta()], "success", completion()))
    assert ("nonstreaming.single-result" in rules(v)) is judged


def test_non_streaming_rules() -> None:
    case = case_of("level1.chat.non-streaming-body")
    v = judge(case, obs([delta()], "success", completion()))
    assert rules(v) == ["nonstreaming.single-result"]
    body = completion()
    body["body"]["object"] = "chat.completion.chunk"
    del body["body"]["choices"][0]["finish_reason"]
    v = judge(case, obs([], "success", body))
    assert "nonstreaming.body" in rules(v)
    v = judge(case_of("openai-compatible.chat.non-streaming"), obs([], "success", None))
    assert "nonstreaming.body" in rules(v)


def test_text_index_named_check() -> None:
    v = judge(case_of("level1.chat.text-delta-ordering"), obs([delta(), delta(index=1)]))
    assert rules(v) == ["order.text-index"]


def test_missing_mandatory_capability_fails() -> None:
    data = {**MANIFEST_DATA, "operations": [{**MANIFEST_DATA["operations"][0],
                                             "streaming": False}]}
    case = case_of("level1.chat.streaming-text", manifest_from_dict(data))
    assert case.selected
    v = judge(case, obs([delta()]))
    assert rules(v) == ["capability.not-claimed"]


def test_silence_flood_and_timeout() -> None:
    case = case_of("level1.chat.streaming-text")
    assert rules(judge(case, obs([], None, timed_out=True))) == ["timeout.silence"]
    assert "timeout.no-terminal" in rules(judge(case, obs([delta()], None, timed_out=True)))
    v = judge(case, obs([delta()] * 3, None, extra={"flooded": True, "max_events": 2}))
    assert rules(v) == ["flood.max-events"]


def test_wire_findings_become_findings() -> None:
    v = judge(case_of("level1.chat.streaming-text"),
              obs([delta()], wire_findings=[{"rule": "partial_result.order", "detail": "x"},
                                            {"rule": "wire.frame_after_terminal", "detail": "y"},
                                            {"rule": "client.max_events", "detail": "z"}]))
    assert rules(v) == ["wire.partial_result.order", "wire.frame_after_terminal"]


def test_a_cancel_the_local_runtime_refused_judges_nothing() -> None:
    # the runtime had closed the frame (a dropped session) before our cancel was due: local
    # timing, present in some identical runs and not in others; the silence is what is judged
    v = judge(case_of("level1.chat.streaming-text"),
              obs([delta()], None, timed_out=True, wire_findings=[
                  {"rule": "client.cancel_after_end", "detail": "cancel sent after the runtime "
                   "closed the frame"}]))
    assert rules(v) == ["timeout.no-terminal"]


# --- capability document --------------------------------------------------------------------


def _doc(**over: Any) -> dict:
    doc = {"profile": contract.PROFILE, "schema_version": contract.SCHEMA_VERSION,
           "compatibility_levels": [1], "operations": [dict(MANIFEST_DATA["operations"][0])],
           "extensions": [{"name": "vllm.diagnostics", "critical": False}],
           "models": [{"id": "tiny", "owned_by": "adapter"}]}
    doc.update(over)
    return doc


def test_capability_document_valid_and_agreeing() -> None:
    case = case_of("level1.capabilities.document")
    v = judge(case, obs([], "success", {"type": contract.EV_COMPLETED, "body": _doc()}),
              manifest=MANIFEST, capability_document=_doc())
    assert v.passed, v.findings


@pytest.mark.parametrize(
    ("doc", "rule"),
    [
        (_doc(compatibility_levels=[1, 2]), "capability.agreement"),
        (_doc(operations=[{**MANIFEST_DATA["operations"][0], "tool_calls": False}]),
         "capability.agreement"),
        (_doc(extensions=[]), "capability.agreement"),
        (_doc(models=[{"id": "other"}]), "capability.agreement"),
        (_doc(operations=[]), "capability.document"),
        (_doc(profile="x"), "capability.document"),
    ],
)
def test_capability_document_disagreements(doc: dict, rule: str) -> None:
    case = case_of("level1.capabilities.document")
    v = judge(case, obs([], "success", {"type": contract.EV_COMPLETED, "body": doc}),
              manifest=MANIFEST)
    assert rule in rules(v)


def test_capability_document_missing_body() -> None:
    v = judge(case_of("level1.capabilities.document"), obs([], "success", None))
    assert "capability.document" in rules(v)


# --- runner helpers -------------------------------------------------------------------------


def _term(delivery: str, event: dict | None = None, **kw: Any) -> Any:
    return SimpleNamespace(delivery=delivery, event=event, status_code=kw.get("status"),
                           drop_reason=kw.get("drop"), detail="")


def test_terminal_mapping() -> None:
    assert terminal_kind_of(_term("result_push", completion())) == "success"
    assert terminal_kind_of(_term("result_push", None, status=200)) == "success"
    assert terminal_kind_of(_term("result_push", None, status=500)) == "error"
    assert terminal_kind_of(_term("result_push", error("backend_error"))) == "error"
    assert terminal_kind_of(_term("result_drop", None,
                                  drop=contract.WIRE_DROP_PEER_CANCELLED)) == "cancelled"
    assert terminal_kind_of(_term("result_drop", None,
                                  drop=contract.WIRE_DROP_BACKPRESSURE)) == "error"
    # issue 14: where the client's and the runner's copies disagreed, the runner was right
    assert terminal_kind_of(_term("result_drop", None,
                                  drop=contract.WIRE_DROP_DEADLINE_EXPIRED)) == "error"
    assert terminal_kind_of(_term("result_drop", {"type": contract.EV_CANCELLED, "reason": "client"},
                                  drop=0)) == "cancelled"
    # the client's own lifecycle CANCELLED is not the endpoint's answer to a cancel
    assert terminal_kind_of(_term("local_cancelled")) is None
    assert terminal_kind_of(_term("timeout")) is None
    assert terminal_kind_of(_term("transport_error")) is None


def test_client_terminal_outcome_is_the_same_rule() -> None:
    from nnrp_conformance.client import Terminal

    for args in [("result_push", None, 500), ("result_drop", None, None, 1),
                 ("result_drop", None, None, 3), ("local_cancelled", None),
                 ("result_push", completion(), 200)]:
        t = Terminal(*args)
        assert t.outcome == terminal_kind_of(t), args


def test_unanswered_cancel_fails_even_after_the_local_lifecycle_cancel() -> None:
    o = obs([delta()], None, timed_out=True)
    o.cancelled_at_index = 0
    o.extra.update(local_cancelled=True, delivery="timeout", timeout_s=5.0)
    v = judge(case_of("level1.chat.cancel.client"), o)
    assert v.outcome == "failed"
    assert "cancel.unanswered" in rules(v)
    assert "never answered the cancel" in v.message


def test_raw_payloads() -> None:
    payload, frames = payload_of(case_of("level1.wire.non-utf8-payload"))
    assert payload[:2] == b"\xff\xfe" and frames is None
    payload, _ = payload_of(case_of("level1.wire.invalid-json"))
    assert payload.startswith(b'{"schema_version"')
    env, frames = payload_of(case_of("level1.chat.streaming-text"))
    assert isinstance(env, dict) and frames is None


def test_case_results_document_is_upstream_valid() -> None:
    plan = build_plan(list(BUNDLED.values()), MANIFEST, model_id="tiny")
    case = plan.case("level1.chat.streaming-text")
    verdict = judge(case, obs([delta()], None, timed_out=True))
    failed = CaseResult(id=case.id, outcome=verdict.outcome, terminal=None, verdict=verdict,
                        events=[delta()], duration_s=1.0, started_at="2025-01-01T00:00:00Z",
                        level=1, status="mandatory", selection="selected", reason=None,
                        diagnostics={"expected_terminal": "success"})
    skipped = skipped_result(plan.case("level1.chat.cancel.client"))
    doc = case_results_document(plan, [failed, skipped])
    assert validation.validate("case-results", doc) == []
    first, second = doc["results"]
    assert (first["outcome"], first["terminal"]) == ("failed", "error")
    assert first["diagnostics"]["terminal_observed"] is None
    assert first["diagnostics"]["findings"][0]["rule"] == "timeout.no-terminal"
    assert (second["outcome"], second["terminal"]) == ("skipped", "cancelled")
