"""The packaged schemas: well-formed, offline-resolvable, and accepting every documented example."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from nnrp_conformance import contract, validation
from nnrp_conformance.validation import SchemaViolationError, UnknownSchemaError, Violation

DATA = Path(__file__).parent / "data"
UPSTREAM = DATA / "upstream"

EXPECTED_NAMES = sorted(
    [
        "envelope",
        *contract.EVENT_SCHEMA_NAMES.values(),
        "event",
        "error-body",
        "capability-document",
        "manifest",
        "recipe",
        "execution-plan",
        "case-results",
        "release-gate-report",
        "benchmark-results",
        "rulebook",
        "coverage-reasons",
        "release-policy",
        "baseline",
    ]
)


def load(name: str) -> object:
    return json.loads((UPSTREAM / name).read_text(encoding="utf-8"))


# --- the schema files themselves ---------------------------------------------------------------


def test_schema_names_are_the_api() -> None:
    assert validation.schema_names() == EXPECTED_NAMES


@pytest.mark.parametrize("name", EXPECTED_NAMES)
def test_schema_is_valid_2020_12_with_stable_id(name: str) -> None:
    schema = validation.load_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == contract.SCHEMA_BASE_URI + name + ".schema.json"
    assert validation.schema_uri(name) == schema["$id"]
    assert schema["description"]


def test_registry_resolves_every_schema_offline() -> None:
    reg = validation.registry()
    for name in EXPECTED_NAMES:
        resolved = reg.resolver().lookup(validation.schema_uri(name))
        assert resolved.contents["$id"] == validation.schema_uri(name)


def test_registry_never_fetches_unknown_uris() -> None:
    import referencing.exceptions

    with pytest.raises(referencing.exceptions.Unresolvable):
        validation.registry().resolver().lookup("https://example.com/not-packaged.schema.json")


def test_load_schema_returns_a_copy() -> None:
    validation.load_schema("envelope")["title"] = "changed"
    assert validation.load_schema("envelope")["title"] != "changed"


def test_unknown_schema_name_is_a_clear_error() -> None:
    with pytest.raises(UnknownSchemaError, match=r"unknown schema .nope.*envelope"):
        validation.validate("nope", {})
    with pytest.raises(UnknownSchemaError):
        validation.load_schema("envelope.schema.json")


# --- examples every schema must accept ---------------------------------------------------------

SPEC_CAPABILITY_DOCUMENT = {
    "profile": "openai-compatible",
    "schema_version": "openai-compatible/1",
    "compatibility_levels": [1],
    "operations": [
        {
            "name": "chat.completions.create",
            "streaming": True,
            "non_streaming": True,
            "tool_calls": True,
        }
    ],
    "models": [{"id": "example-model", "owned_by": "adapter"}],
}

COMPLETION_BODY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "example-model",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hello!"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
}

EVENT_EXAMPLES = {
    "text-delta": {"type": "response.output_text.delta", "index": 0, "delta": "pong"},
    "text-delta-empty": {"type": "response.output_text.delta", "index": 3, "delta": ""},
    "text-delta-chunk": {
        "type": "response.output_text.delta",
        "index": 0,
        "delta": "Hel",
        "openai_chunk": {"object": "chat.completion.chunk", "choices": []},
        "nnrp": {"queue_delay_ms": 2},
    },
    "tool-started": {
        "type": "response.tool_call.started",
        "index": 0,
        "item_id": "item_0",
        "call_id": "call_abc",
        "name": "lookup",
    },
    "tool-delta": {
        "type": "response.tool_call.delta",
        "index": 0,
        "item_id": "item_0",
        "call_id": "call_abc",
        "arguments_delta": '{"q": ',
    },
    "tool-delta-empty": {
        "type": "response.tool_call.delta",
        "index": 0,
        "item_id": "item_0",
        "call_id": "call_abc",
        "arguments_delta": "",
    },
    "tool-completed": {
        "type": "response.tool_call.completed",
        "index": 0,
        "item_id": "item_0",
        "call_id": "call_abc",
        "name": "lookup",
        "arguments": '{"q": "x"}',
    },
    "tool-error": {
        "type": "response.tool_call.error",
        "index": 1,
        "item_id": "item_1",
        "call_id": "call_def",
        "error": {
            "type": "server_error",
            "code": "tool_call_parse_error",
            "message": "arguments are not valid JSON",
        },
    },
    "usage": {
        "type": "response.usage",
        "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
    },
    "usage-with-passthrough": {
        "type": "response.usage",
        "usage": {
            "input_tokens": 5,
            "output_tokens": 2,
            "total_tokens": 7,
            "prompt_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    },
    "completed": {"type": "response.completed", "body": COMPLETION_BODY},
    "error-spec-5": {
        "type": "response.error",
        "error": {
            "type": "invalid_request_error",
            "code": "unsupported_model",
            "message": "model 'x' is not served here",
        },
    },
    "error-with-diagnostics": {
        "type": "response.error",
        "error": {"type": "server_error", "code": "backend_error", "message": "vLLM said 404"},
        "nnrp": {"backend_status": 404, "backend_type": "NotFoundError"},
    },
    "cancelled": {"type": "response.cancelled", "reason": "client"},
}


@pytest.mark.parametrize("event", EVENT_EXAMPLES.values(), ids=EVENT_EXAMPLES.keys())
def test_event_examples_are_valid(event: dict) -> None:
    assert validation.validate_event(event) == []
    assert validation.validate("event", event) == []
    assert validation.validate(contract.EVENT_SCHEMA_NAMES[event["type"]], event) == []
    validation.check("event", event)


@pytest.mark.parametrize("code", list(contract.ERROR_CODES))
def test_every_error_code_with_its_family_is_valid(code: str) -> None:
    body = {"type": contract.ERROR_CODES[code], "code": code, "message": "m"}
    assert validation.validate("error-body", body) == []
    assert validation.validate_event({"type": contract.EV_ERROR, "error": body}) == []


ENVELOPES = {
    "spec-d6": {
        "schema_version": "openai-compatible/1",
        "operation": "chat.completions.create",
        "request_id": "req_123",
        "body": {"model": "example-model", "messages": [{"role": "user", "content": "hi"}]},
        "nnrp": {"timeout_ms": 30000, "diagnostics": True},
    },
    "upstream-wire-runner": {
        "schema_version": "openai-compatible/1",
        "operation": "chat.completions.create",
        "request_id": "req_wire_1",
        "body": {
            "model": "reference-model",
            "messages": [{"role": "user", "content": "ping"}],
            "stream": True,
        },
    },
    "all-hints": {
        "schema_version": "openai-compatible/1",
        "operation": "chat.completions.create",
        "body": {},
        "nnrp": {
            "timeout_ms": 3_600_000,
            "diagnostics": False,
            "cancel_after_events": 1,
            "extensions": ["vllm.diagnostics"],
            "openai_chunk": True,
            "vllm.priority": 3,
        },
    },
    # Not a schema violation: unknown operations are the unsupported_operation check's job.
    "unknown-operation": {
        "schema_version": "openai-compatible/1",
        "operation": "no.such.operation",
        "body": {},
    },
    "missing-messages-is-not-a-schema-error": {
        "schema_version": "openai-compatible/1",
        "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
        "body": {"model": "m"},
    },
    "discovery": {
        "schema_version": "openai-compatible/1",
        "operation": contract.OP_CAPABILITIES_GET,
        "body": {},
    },
}


@pytest.mark.parametrize("envelope", ENVELOPES.values(), ids=ENVELOPES.keys())
def test_envelope_examples_are_valid(envelope: dict) -> None:
    assert validation.validate("envelope", envelope) == []


def test_spec_capability_document_is_valid() -> None:
    assert validation.validate("capability-document", SPEC_CAPABILITY_DOCUMENT) == []


def test_full_capability_document_is_valid() -> None:
    doc = copy.deepcopy(SPEC_CAPABILITY_DOCUMENT)
    doc.update(
        {
            "$schema": validation.schema_uri("capability-document"),
            "adapter": "vllm-nnrp-adapter",
            "adapter_version": "0.1.0",
            "description": "reference adapter",
            "extensions": [{"name": "vllm.diagnostics", "critical": False}],
        }
    )
    doc["operations"][0]["cancellation"] = True
    assert validation.validate("capability-document", doc) == []


def test_upstream_manifest_is_valid_unchanged() -> None:
    assert validation.validate("manifest", load("adapter-capabilities.json")) == []


def test_manifest_with_our_additions_is_valid() -> None:
    doc = load("adapter-capabilities.json")
    doc.update(
        {
            "models": [{"id": "Qwen/Qwen2.5-0.5B-Instruct", "owned_by": "vllm"}],
            "adapter_version": "0.1.0",
            "description": "The vLLM NNRP adapter.",
        }
    )
    assert validation.validate("manifest", doc) == []


UPSTREAM_RECIPES = sorted(p.name for p in UPSTREAM.glob("chat-*.json"))


def test_all_eight_upstream_recipes_are_present() -> None:
    assert len(UPSTREAM_RECIPES) == 8


@pytest.mark.parametrize("filename", UPSTREAM_RECIPES)
def test_upstream_recipe_is_valid_unchanged(filename: str) -> None:
    assert validation.validate("recipe", load(filename)) == []


def test_recipe_with_all_our_additions_is_valid() -> None:
    recipe = load("chat-streaming-text.json")
    recipe.update(
        {
            "description": "a malformed submit is refused",
            "rule": "spec §3 exactly one typed payload frame",
            "level": 1,
            "timeout_ms": 10_000,
            "checks": ["usage-shape", "text-order"],
        }
    )
    recipe["request"].update(
        {
            "raw": {
                "payload_text": "{not json",
                "frames": [{}, {"payload_kind": 64, "stream_semantics": 2}],
                "payload_kind_bitmap": 16,
            },
            "cancel": {"after_events": 0},
            "envelope": {
                "schema_version": "openai-compatible/0",
                "request_id": 7,
                "omit": ["nnrp"],
            },
        }
    )
    recipe["expect"]["events"][0]["max_count"] = 1000
    assert validation.validate("recipe", recipe) == []


def test_raw_payload_hex_is_valid() -> None:
    recipe = load("chat-streaming-text.json")
    recipe["request"]["raw"] = {"payload_hex": "7bff7d"}
    assert validation.validate("recipe", recipe) == []


def test_upstream_plan_is_valid_unchanged() -> None:
    assert validation.validate("execution-plan", load("execution-plan.json")) == []


def test_plan_with_our_additions_is_valid() -> None:
    plan = load("execution-plan.json")
    plan.update({"generated_at": "2025-01-31T12:00:00Z", "model": "Qwen/Qwen2.5-0.5B-Instruct"})
    plan["cases"][0].update(
        {"description": "d", "rule": "spec §4", "level": 1, "timeout_ms": 5000, "checks": ["x"]}
    )
    assert validation.validate("execution-plan", plan) == []


def test_upstream_case_results_are_valid_unchanged() -> None:
    assert validation.validate("case-results", load("case-results.json")) == []


GATE_REPORT = json.loads((DATA / "examples" / "release-gate-report.json").read_text("utf-8"))
BENCHMARK = json.loads((DATA / "examples" / "benchmark-results.json").read_text("utf-8"))


def test_release_gate_report_example_is_valid() -> None:
    assert validation.validate("release-gate-report", GATE_REPORT) == []


def test_benchmark_results_example_is_valid() -> None:
    assert validation.validate("benchmark-results", BENCHMARK) == []


# --- the API's behaviour ---------------------------------------------------------------------


def test_validate_reports_every_violation_sorted_by_pointer() -> None:
    found = validation.validate(
        "envelope", {"operation": 5, "body": [], "extra": 1, "nnrp": {"timeout_ms": "x"}}
    )
    assert [(v.pointer, v.rule) for v in found] == [
        ("/body", "type"),
        ("/extra", "additionalProperties"),
        ("/nnrp/timeout_ms", "type"),
        ("/operation", "type"),
        ("/schema_version", "required"),
    ]
    assert all(v.schema_path.startswith("envelope#/") for v in found)


def test_violation_str_is_ready_to_print() -> None:
    [violation] = validation.validate("event.cancelled", {"type": "response.cancelled"})
    assert str(violation) == "/reason: missing required field 'reason' [required]"
    root = Violation("", "type", "the document must be of type object, got array", "x#/type")
    assert str(root) == "/: the document must be of type object, got array [type]"


def test_json_pointer_escaping() -> None:
    [violation] = validation.validate(
        "error-body#/$defs/recommended",
        {"type": "server_error", "code": "internal_error", "message": "m", "a/b~c": 1},
    )
    assert violation.pointer == "/a~1b~0c"
    assert violation.schema_path == "error-body#/$defs/recommended/additionalProperties"


def test_oversize_values_are_abbreviated_in_messages() -> None:
    [violation] = validation.validate(
        "envelope",
        {"schema_version": "x" * 10_000, "operation": "chat.completions.create", "body": {}},
    )
    assert len(violation.message) < 300
    assert "10002 chars" in violation.message


def test_check_raises_with_readable_multiline_message() -> None:
    with pytest.raises(SchemaViolationError) as info:
        validation.check("error-body", {"type": "server_error", "code": "", "message": 3})
    err = info.value
    assert err.name == "error-body"
    assert [(v.pointer, v.rule) for v in err.violations] == [
        ("/code", "minLength"),
        ("/message", "type"),
    ]
    lines = str(err).splitlines()
    assert lines[0] == "error-body: 2 schema violation(s)"
    assert lines[2] == "  /message: 'message' must be of type string, got integer [type]"


def test_check_passes_silently_on_valid_documents() -> None:
    validation.check("capability-document", SPEC_CAPABILITY_DOCUMENT)


@pytest.mark.parametrize(
    ("event", "pointer", "rule"),
    [
        ([], "", "type"),
        ({"index": 0}, "/type", "required"),
        ({"type": 3}, "/type", "enum"),
        ({"type": "response.output_text.done", "index": 0}, "/type", "enum"),
    ],
    ids=["not-an-object", "missing-type", "non-string-type", "unknown-type"],
)
def test_validate_event_bad_type_gives_one_clear_violation(
    event: object, pointer: str, rule: str
) -> None:
    [violation] = validation.validate_event(event)
    assert (violation.pointer, violation.rule) == (pointer, rule)
    if rule == "enum":
        assert "response.output_text.delta" in violation.message
    # the dispatch schema agrees on where the problem is
    assert [(v.pointer, v.rule) for v in validation.validate("event", event)] == [(pointer, rule)]


def test_validate_event_messages_are_specific() -> None:
    found = validation.validate_event(
        {"type": "response.tool_call.started", "index": -1, "item_id": ""}
    )
    assert [str(v) for v in found] == [
        "/call_id: missing required field 'call_id' [required]",
        "/index: 'index' must be >= 0, got -1 [minimum]",
        "/item_id: 'item_id' must not be empty [minLength]",
        "/name: missing required field 'name' [required]",
    ]
