"""Strict by construction (issue 43 item 1): the strict shape of every event schema is derived
from the profile's own documents, and nothing of this suite's hides in it.

The top level of each event schema (and of ``error-body``) is what ``event.schema`` judges,
failing the case whatever the options. These tests derive that shape from the verbatim copies
in ``upstream/``: the contract JSON's tool-call events (their required fields and field specs,
the error object of ``response.tool_call.error``) and the profile design's §7 event table (the
required fields of the other events), with the few types the profile's own sentences give
(``TYPED_BY_TEXT``, each with the sentence, which must be in that section). A strict schema
that requires, limits, closes or enumerates anything beyond them fails here: this suite's
limits belong in ``$defs/recommended``, judged non-strict. Where the profile leaves a field
untyped (``response.cancelled.reason``), both readings pass: no type at all.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import contract, validation
from nnrp_conformance.checks import Observation, judge
from nnrp_conformance.checks.judge import judge_recorded
from nnrp_conformance.manifest import manifest_from_dict
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import load_recipes

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "upstream" / "nnrp-doc" / "docs"
CONTRACT = json.loads((DOCS / "public" / "contracts" / "openai-compatible-1.json")
                      .read_text(encoding="utf-8"))
PROFILE = (DOCS / "en" / "design" / "openai-compatible-profile.md").read_text(encoding="utf-8")
TOOL_CALL_EVENTS: dict[str, Any] = CONTRACT["toolCallEvents"]
#: the shared error shape: the contract's, which §12 gives response.error too
ERROR_SPEC: dict[str, Any] = TOOL_CALL_EVENTS[contract.EV_TOOL_CALL_ERROR]["fields"]["error"]
ERROR_REF = {"$ref": "error-body.schema.json"}

#: (event type, field) -> (its strict schema, the profile section, the sentence that gives it):
#: the fields the contract does not type, typed only where the profile's own words do
TYPED_BY_TEXT: dict[tuple[str, str], tuple[dict[str, Any], str, str]] = {
    (contract.EV_OUTPUT_TEXT_DELTA, "index"): (
        {"type": "integer", "minimum": 0}, "12. Tool Calls",
        "`index` is a non-negative position in the output sequence."),
    (contract.EV_OUTPUT_TEXT_DELTA, "delta"): (
        {"type": "string"}, "7. Streaming Response Mapping",
        "| `response.output_text.delta` | `index`, `delta` | Incremental text output. |"),
    (contract.EV_USAGE, "usage"): (
        {"type": "object"}, "11. Usage and Diagnostics",
        "Usage data is reported as profile payload data so existing clients can consume it:"),
    (contract.EV_COMPLETED, "body"): (
        {"type": "object"}, "8. Non-Streaming Response Mapping",
        "The result payload preserves the OpenAI-compatible response shape for the selected "
        "operation"),
    (contract.EV_ERROR, "error"): (
        ERROR_REF, "12. Tool Calls",
        "an error contains the same profile error shape used by `response.error`."),
    # the table requires reason and types it nowhere: every value is a reading
    (contract.EV_CANCELLED, "reason"): ({}, "7. Streaming Response Mapping",
                                        "| `response.cancelled` | `reason` |"),
}


def normalized(text: str) -> str:
    return re.sub(r"\s*\|\s*", " | ", " ".join(text.split()))


def section(heading: str) -> str:
    """The profile's text under ``heading`` up to the next heading of its level or higher."""
    lines = PROFILE.splitlines()
    for n, line in enumerate(lines):
        m = re.match(r"^(#+)\s+(.*?)\s*$", line)
        if m and m.group(2) == heading:
            end = next((k for k in range(n + 1, len(lines))
                        if (h := re.match(r"^(#+)\s", lines[k]))
                        and len(h.group(1)) <= len(m.group(1))), len(lines))
            return "\n".join(lines[n + 1:end])
    raise AssertionError(f"the profile has no heading {heading!r}")


def profile_table() -> dict[str, list[str]]:
    """§7's event table: event type -> its required fields, read from the verbatim copy."""
    rows = {}
    for line in section("7. Streaming Response Mapping").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`response\.[a-z_.]+`", cells[0]):
            rows[cells[0].strip("`")] = re.findall(r"`([a-z_]+)`", cells[1])
    return rows


def strict_part(node: Any) -> Any:
    """A schema without what validates nothing: descriptions, titles, ids, and the
    ``$defs/recommended`` that the strict verdict never reads."""
    if isinstance(node, dict):
        return {k: strict_part(v) for k, v in node.items()
                if k not in ("description", "title", "$schema", "$id", "$defs")}
    if isinstance(node, list):
        return [strict_part(v) for v in node]
    return node


def derived(event_type: str) -> dict[str, Any]:
    """The strict schema of ``event_type``, from the contract and the §7 table alone."""
    table = profile_table()[event_type]
    if event_type in TOOL_CALL_EVENTS:
        spec = TOOL_CALL_EVENTS[event_type]
        assert table == spec["required"], event_type  # the two documents agree
        props = {f: ERROR_REF if f == "error" else dict(spec["fields"][f])
                 for f in [*spec["required"], *spec["optional"]]}
        required = list(spec["required"])
    else:
        props = {"type": {"const": event_type},
                 **{f: TYPED_BY_TEXT[(event_type, f)][0] for f in table}}
        required = ["type", *table]
    return {"type": "object", "required": required, "properties": props}


def test_the_table_is_the_profiles_event_list() -> None:
    assert set(profile_table()) == set(contract.PROFILE_TABLE_EVENT_TYPES)
    assert set(TOOL_CALL_EVENTS) == set(contract.TOOL_CALL_EVENT_TYPES)


@pytest.mark.parametrize("key", sorted(TYPED_BY_TEXT), ids="/".join)
def test_each_type_the_text_gives_is_quoted_from_it(key: tuple[str, str]) -> None:
    _schema, heading, quote = TYPED_BY_TEXT[key]
    assert normalized(quote) in normalized(section(heading)), key


@pytest.mark.parametrize("event_type", contract.PROFILE_TABLE_EVENT_TYPES)
def test_a_strict_event_schema_is_derived_from_the_profile(event_type: str) -> None:
    """Nothing more (a length, an enum, a closed object, a required total_tokens) and
    nothing less (a required field, a contract type) than the profile's documents."""
    schema = validation.load_schema(contract.EVENT_SCHEMA_NAMES[event_type])
    assert strict_part(schema) == derived(event_type)


def test_the_strict_error_body_is_the_contracts() -> None:
    schema = validation.load_schema("error-body")
    assert strict_part(schema) == {"type": "object", "required": ERROR_SPEC["required"],
                                   "properties": ERROR_SPEC["fields"]}


#: what a basic shape may say: the event types outside the profile's table (Level 2, this
#: project's reading of OpenAI's Responses stream) keep required fields and JSON types only
_BASIC = {"type", "const", "required", "properties"}


def _keywords(node: Any) -> set[str]:
    if not isinstance(node, dict):
        return set()
    out = set(node) - {"properties"}
    for key, value in node.items():
        if key == "properties":
            out |= {"properties"}.union(*(_keywords(v) for v in value.values()))
        elif isinstance(value, dict):
            out |= _keywords(value)
    return out


@pytest.mark.parametrize("event_type", sorted(set(contract.EVENT_TYPES)
                                              - set(contract.PROFILE_TABLE_EVENT_TYPES)))
def test_an_event_outside_the_table_is_strict_only_in_its_basic_shape(event_type: str) -> None:
    schema = strict_part(validation.load_schema(contract.EVENT_SCHEMA_NAMES[event_type]))
    assert _keywords(schema) <= _BASIC, event_type


@pytest.mark.parametrize("event_type", contract.EVENT_TYPES)
def test_every_event_schema_keeps_its_limits_apart(event_type: str) -> None:
    """This suite's preferences are a closed object in ``$defs/recommended`` that names
    every field the strict shape names (so a profile field is never an extra one)."""
    schema = validation.load_schema(contract.EVENT_SCHEMA_NAMES[event_type])
    recommended = schema["$defs"]["recommended"]
    assert recommended["additionalProperties"] is False
    assert set(schema["properties"]) <= set(recommended["properties"])
    assert {"openai_chunk", "nnrp"} <= set(recommended["properties"])


# --- the readings that failed before (issue 43), judged as a case is ------------------------

NS, FAILED = "non-strict", "failed"


def verdicts(events: list[dict[str, Any]], terminal: str) -> set[tuple[str, str]]:
    return {(f.rule, f.level) for f in judge_recorded(events, terminal, strict=False)}


TEXT = {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": "hi"}


@pytest.mark.parametrize(("events", "terminal", "notes"), [
    # the profile's table requires a reason and says nothing of its value
    ([TEXT, {"type": contract.EV_CANCELLED, "reason": ""}], contract.TERMINAL_CANCELLED,
     set()),
    ([TEXT, {"type": contract.EV_CANCELLED, "reason": "r" * 300}], contract.TERMINAL_CANCELLED,
     {("event.value-limit", NS)}),
    ([TEXT, {"type": contract.EV_CANCELLED, "reason": {"source": "client"}}],
     contract.TERMINAL_CANCELLED, {("event.value-limit", NS)}),
    # a usage with a cost beside its counts, or without total_tokens: the profile requires a
    # usage and names no count
    ([TEXT, {"type": contract.EV_USAGE, "usage": {"input_tokens": 1, "output_tokens": 2,
                                                  "total_tokens": 3, "cost": 0.001}},
      {"type": contract.EV_COMPLETED, "body": {}}], contract.TERMINAL_SUCCESS,
     {("usage.shape", NS)}),
    ([TEXT, {"type": contract.EV_USAGE, "usage": {"input_tokens": 1, "output_tokens": 2}},
      {"type": contract.EV_COMPLETED, "body": {}}], contract.TERMINAL_SUCCESS,
     {("usage.shape", NS)}),
    # an error of the endpoint's own family and code: the contract's shape, non-empty strings
    ([{"type": contract.EV_ERROR, "error": {"type": "invalid_argument", "code": "unimplemented",
                                            "message": "no"}}], contract.TERMINAL_ERROR,
     {("error.code-choice", NS)}),
    ([{"type": contract.EV_ERROR, "error": {"type": "server_error", "code": "internal_error",
                                            "message": "m" * 70_000, "param": None}}],
     contract.TERMINAL_ERROR, {("event.value-limit", NS), ("event.extra-field", NS)}),
], ids=["empty-reason", "long-reason", "object-reason", "usage-cost", "usage-no-total",
        "own-family", "long-message-param"])
def test_what_the_profile_allows_is_never_a_failure(events: list[dict[str, Any]],
                                                    terminal: str,
                                                    notes: set[tuple[str, str]]) -> None:
    assert verdicts(events, terminal) == notes


@pytest.mark.parametrize(("event", "pointer"), [
    ({"type": contract.EV_ERROR, "error": {"type": "", "code": "x", "message": "m"}},
     "/error/type"),
    ({"type": contract.EV_ERROR, "error": {"type": "t", "code": "x"}}, "/error/message"),
    ({"type": contract.EV_TOOL_CALL_ERROR, "index": 0, "item_id": "i", "call_id": "c",
      "error": {"type": "t", "code": 7, "message": "m"}}, "/error/code"),
    ({"type": contract.EV_CANCELLED}, "/reason"),
    ({"type": contract.EV_USAGE}, "/usage"),
    ({"type": contract.EV_USAGE, "usage": 44}, "/usage"),
], ids=["error-empty-type", "error-no-message", "tool-error-code-number", "no-reason",
        "no-usage", "usage-number"])
def test_what_the_profile_fixes_still_fails(event: dict[str, Any], pointer: str) -> None:
    """The contract's error shape (§12: the same for response.error) and the table's
    required fields stay strict."""
    assert [v.pointer for v in validation.validate_event(event)] == [pointer]
    terminal = {contract.EV_ERROR: contract.TERMINAL_ERROR,
                contract.EV_CANCELLED: contract.TERMINAL_CANCELLED}.get(event["type"])
    events = [event] if terminal else [event, {"type": contract.EV_COMPLETED, "body": {}}]
    assert ("event.schema", FAILED) in verdicts(events, terminal or contract.TERMINAL_SUCCESS)


# --- usage.shape: this suite's counts, judged as a recommendation ---------------------------

MANIFEST = manifest_from_dict({
    "adapter": "t", "profile": contract.PROFILE, "schema_version": contract.SCHEMA_VERSION,
    "compatibility_levels": [1, 2],
    "operations": [{"name": op, "streaming": True, "non_streaming": True, "tool_calls": True,
                    "cancellation": True}
                   for op in (contract.OP_CHAT_COMPLETIONS_CREATE, contract.OP_RESPONSES_CREATE)],
    "models": [{"id": "tiny"}],
})
BUNDLED = {r.id: r for r in load_recipes()}
OPEN_USAGE = {"input_tokens": 3, "output_tokens": 2, "cost": 0.001}  # no total_tokens


def judged(recipe_id: str, events: list[dict[str, Any]], terminal: dict[str, Any] | None,
           *, strict: bool = False) -> Any:
    case = build_plan([BUNDLED[recipe_id]], MANIFEST, model_id="tiny").cases[0]
    obs = Observation(events=events, raw_events=[None] * len(events),
                      terminal_kind=contract.TERMINAL_SUCCESS, terminal_event=terminal)
    return judge(case, obs, manifest=MANIFEST, strict=strict)


def test_a_usage_with_a_cost_and_no_total_is_a_note() -> None:
    events = [TEXT, {"type": contract.EV_USAGE, "usage": OPEN_USAGE}]
    v = judged("level1.chat.usage-shape", events, {"type": contract.EV_COMPLETED, "body": {
        "id": "c", "object": "chat.completion", "model": "tiny", "usage": OPEN_USAGE,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                     "finish_reason": "stop"}]}})
    assert (v.outcome, {(f.rule, f.level) for f in v.findings}) == (
        "passed", {("usage.shape", NS)})
    (finding,) = v.findings
    assert "total_tokens" in finding.message and "cost" in finding.message
    assert judged("level1.chat.usage-shape", events, None).outcome == "passed"
    assert judged("level1.chat.usage-shape", events, None, strict=True).outcome == "failed"


def test_a_response_bodys_usage_counts_are_a_recommendation() -> None:
    """responses.body (the OpenAI Response shape) requires a usage object; its counts are
    usage.shape's, like the event's."""
    item = {"id": "msg_1", "type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "hi"}]}
    events = [
        {"type": contract.EV_OUTPUT_ITEM_ADDED, "output_index": 0, "item": item},
        {**TEXT, "item_id": "msg_1"},
        {"type": contract.EV_OUTPUT_ITEM_DONE, "output_index": 0, "item": item},
        {"type": contract.EV_USAGE, "usage": {**OPEN_USAGE, "total_tokens": 5}},
    ]
    body = {"id": "resp_1", "object": "response", "status": "completed", "model": "tiny",
            "output": [item], "usage": OPEN_USAGE}
    v = judged("level2.responses.usage", events, {"type": contract.EV_COMPLETED, "body": body})
    assert (v.outcome, {(f.rule, f.level) for f in v.findings}) == (
        "passed", {("usage.shape", NS)}), v.findings
    v = judged("level2.responses.usage", events, {"type": contract.EV_COMPLETED,
                                                  "body": {**body, "usage": 5}})
    assert ("responses.body", FAILED) in {(f.rule, f.level) for f in v.findings}


# --- the capability document: §13 shows it by example; its closed objects and lengths are ours


def _capability_verdict(doc: dict[str, Any]) -> Any:
    return judged("level1.capabilities.document", [],
                  {"type": contract.EV_COMPLETED, "body": doc})


CAPS = {"profile": contract.PROFILE, "schema_version": contract.SCHEMA_VERSION,
        "compatibility_levels": [1, 2], "operations": MANIFEST.data["operations"],
        "models": [{"id": "tiny"}]}


def test_a_capability_document_with_openais_model_fields_passes_with_a_note() -> None:
    doc = {**CAPS, "models": [{"id": "tiny", "object": "model", "created": 1, "owned_by": "o"}],
           "adapter": "a" * 300}
    v = _capability_verdict(doc)
    assert v.outcome == "passed", v.findings
    assert {(f.rule, f.level) for f in v.findings} == {("capability.document-recommended", NS)}
    assert _capability_verdict(CAPS).findings == []


def test_a_capability_document_missing_what_it_needs_still_fails() -> None:
    doc = {k: v for k, v in CAPS.items() if k != "compatibility_levels"}
    v = _capability_verdict(doc)
    assert ("capability.document", FAILED) in {(f.rule, f.level) for f in v.findings}


def test_the_recommended_usage_is_the_contracts_name_sets() -> None:
    """event.usage's ``$defs/usage`` and contract.USAGE_NAME_SETS say one thing."""
    usage = validation.load_schema("event.usage")["$defs"]["usage"]
    sets = [(*alt["required"], *usage["required"]) for alt in usage["anyOf"]]
    assert sets == list(contract.USAGE_NAME_SETS)
