"""An extra event field that collides with a profile field or a declared extension stays a
profile failure (issue 27): only a field that collides with nothing is the non-strict
``event.extra-field``. The profile's event fields are read from the schemas of its own event
table (``validation.profile_event_fields``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import contract, validation
from nnrp_conformance.checks import Observation, judge
from nnrp_conformance.manifest import manifest_from_dict
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import Recipe, load_recipes

CHAT = contract.OP_CHAT_COMPLETIONS_CREATE
MANIFEST = manifest_from_dict({
    "adapter": "t", "profile": contract.PROFILE, "schema_version": contract.SCHEMA_VERSION,
    "compatibility_levels": [1],
    "operations": [{"name": CHAT, "streaming": True, "non_streaming": True, "tool_calls": True,
                    "cancellation": True}],
    "extensions": [{"name": "vllm.diagnostics", "critical": False},
                   {"name": "acme.priority", "critical": True}],
    "models": [{"id": "tiny"}],
})
STREAMING = next(r for r in load_recipes() if r.id == "level1.chat.streaming-text")


def delta(**extra: Any) -> dict[str, Any]:
    return {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": "hi", **extra}


def findings(events: list[Any], case: Any = None) -> dict[str, str]:
    """rule -> level of the schema check's findings on ``events`` (then a bare success)."""
    case = case or build_plan([STREAMING], MANIFEST, model_id="tiny").cases[0]
    v = judge(case, Observation(events=events, raw_events=[None] * len(events),
                                terminal_kind="success"), manifest=MANIFEST)
    return {f.rule: f.level for f in v.findings if f.rule.startswith("event.")}


def test_the_profile_event_fields_come_from_its_own_event_table() -> None:
    fields = validation.profile_event_fields()
    # every field the profile design's §7 table requires (and the contract's tool-call events)
    assert {"index", "delta", "item_id", "call_id", "name", "arguments_delta", "arguments",
            "usage", "body", "error", "reason"} <= fields
    # Level 2's item events are this project's: their fields are not the profile's
    assert not {"item", "output_index"} & fields


@pytest.mark.parametrize(("event", "owner"), [
    (delta(usage={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}), "response.usage"),
    (delta(error={"type": "server_error", "code": "internal_error", "message": "x"}),
     "response.error"),
    ({"type": contract.EV_USAGE, "usage": {"input_tokens": 1, "output_tokens": 1,
                                           "total_tokens": 2}, "delta": "x"},
     "response.output_text.delta"),
    (delta(call_id="call_1"), "response.tool_call.started"),
])
def test_a_profile_field_on_another_event_type_breaks_the_profile(event: dict[str, Any],
                                                                   owner: str) -> None:
    v = judge(build_plan([STREAMING], MANIFEST, model_id="tiny").cases[0],
              Observation(events=[event], raw_events=[None], terminal_kind="success"),
              manifest=MANIFEST)
    schema = [f for f in v.findings if f.rule.startswith("event.")]
    assert [(f.rule, f.level) for f in schema] == [("event.schema", "failed")], v.message
    assert owner in schema[0].message and "is the profile's field of" in schema[0].message


def test_a_critical_extension_the_case_did_not_select_breaks_the_profile() -> None:
    for key in ("acme.priority", "acme_priority", "acme.priority.level"):
        got = findings([delta(**{key: 1})])
        assert got == {"event.schema": "failed"}, key


def test_a_selected_critical_extension_is_ignored() -> None:
    data = {**STREAMING.data, "id": "t.ext", "required_capabilities": [
        "api.level1", "api.extension.acme.priority.critical"]}
    validation.check("recipe", data)
    recipe = Recipe(id="t.ext", path=Path("<t>"), data=data, status="mandatory",
                    operation=CHAT, required_capabilities=tuple(data["required_capabilities"]),
                    level=1)
    case = build_plan([recipe], MANIFEST, model_id="tiny",
                      extensions=["acme.priority"]).cases[0]
    assert case.selected and findings([delta(acme_priority=1)], case) == {}


@pytest.mark.parametrize(("extra", "rule"), [
    ({"vllm.diagnostics": {"q": 1}}, None),  # a declared non-critical extension
    ({"acme_trace": {"t": 1}}, "event.extra-field"),  # undeclared, collides with nothing
    ({"output_index": 0, "content_index": 0}, "event.extra-field"),  # OpenAI Responses' own
    ({"diagnostics": {"a": 1}}, "event.diagnostics-field"),
])
def test_a_field_that_collides_with_nothing_is_a_recommendation(extra: dict[str, Any],
                                                               rule: str | None) -> None:
    assert findings([delta(**extra)]) == ({rule: "non-strict"} if rule else {})


def test_an_error_objects_param_collides_with_nothing() -> None:
    err = {"type": contract.EV_ERROR, "error": {
        "type": "server_error", "code": "internal_error", "message": "x", "param": None}}
    assert findings([err]) == {"event.extra-field": "non-strict"}
