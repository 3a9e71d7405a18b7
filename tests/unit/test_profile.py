"""The adapter's profile module: envelope checks become precise response.error events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnrp_conformance import contract
from nnrp_conformance.validation import validate_event
from vllm_nnrp_adapter.profile import profile
from vllm_nnrp_adapter.profile.profile import ProfileError, parse_envelope

MANIFEST = Path(__file__).resolve().parents[2] / "manifests" / "vllm-nnrp-adapter.json"

GOOD = {
    "schema_version": contract.SCHEMA_VERSION,
    "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
    "request_id": "r1",
    "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "nnrp": {"timeout_ms": 1000, "diagnostics": True},
}


def test_good_envelope_from_bytes_and_dict():
    env = parse_envelope(json.dumps(GOOD).encode())
    assert env.operation == contract.OP_CHAT_COMPLETIONS_CREATE
    assert env.timeout_ms == 1000 and env.wants_diagnostics
    assert env.body == GOOD["body"]
    assert "timeout_ms" not in env.body  # NNRP policy never leaks into the OpenAI body
    assert parse_envelope(GOOD).request_id == "r1"


@pytest.mark.parametrize(
    ("payload", "code", "needle"),
    [
        (b"\xff\xfe{}", "invalid_request", "not valid UTF-8"),
        (b"{not json", "invalid_request", "not valid JSON"),
        (b"[1, 2]", "invalid_request", "must be a JSON object"),
        (
            json.dumps({**GOOD, "schema_version": "openai-compatible/2"}).encode(),
            "invalid_schema_version",
            "openai-compatible/2",
        ),
        (
            json.dumps({k: v for k, v in GOOD.items() if k != "body"}).encode(),
            "invalid_request",
            "/body",
        ),
        (json.dumps({**GOOD, "extra": 1}).encode(), "invalid_request", "/extra"),
        (
            json.dumps({**GOOD, "nnrp": {"timeout_ms": "soon"}}).encode(),
            "invalid_request",
            "/nnrp/timeout_ms",
        ),
        (
            json.dumps({**GOOD, "operation": "responses.create"}).encode(),
            "unsupported_operation",
            "responses.create",
        ),
        (b"[" * 100_000, "invalid_request", "JSON"),
    ],
    ids=[
        "non-utf8",
        "bad-json",
        "not-object",
        "wrong-version",
        "missing-body",
        "extra-field",
        "mistyped-hint",
        "unsupported-op",
        "deep-nesting",
    ],
)
def test_bad_envelopes_name_the_field(payload, code, needle):
    with pytest.raises(ProfileError) as info:
        parse_envelope(payload)
    event = info.value.event()
    assert event["error"]["code"] == code
    assert event["error"]["type"] == contract.ERROR_CODES[code]
    assert needle in event["error"]["message"]
    assert validate_event(event) == []


def test_discovery_operation_is_always_accepted():
    env = parse_envelope({**GOOD, "operation": contract.OP_CAPABILITIES_GET, "body": {}})
    assert env.operation == contract.OP_CAPABILITIES_GET


@pytest.mark.parametrize(
    "event",
    [
        profile.text_delta_event("hi"),
        profile.usage_event(3, 4),
        profile.completed_event({"id": "x"}),
        profile.cancelled_event(contract.CANCEL_SOURCE_CLIENT),
        profile.error_event("backend_error", "boom", param="body.model"),
        profile.tool_call_started_event(0, "item", "call", "lookup"),
        profile.tool_call_delta_event(0, "item", "call", "{"),
        profile.tool_call_completed_event(0, "item", "call", "lookup", "{}"),
        profile.tool_call_error_event(0, "item", "call", "tool_call_parse_error", "bad"),
    ],
    ids=lambda e: e["type"],
)
def test_builders_emit_schema_valid_events(event):
    assert validate_event(event) == []


def test_unknown_error_code_is_a_programming_error():
    with pytest.raises(ValueError, match="not a profile error code"):
        profile.error_event("nope", "x")


def test_capability_document_is_manifest_plus_models():
    manifest = json.loads(MANIFEST.read_text())
    from nnrp_conformance.validation import validate

    assert validate("manifest", manifest) == []
    doc = profile.capability_document(manifest, ["tiny-model"])
    assert validate("capability-document", doc) == []
    assert doc["models"] == [{"id": "tiny-model", "owned_by": "vllm"}]
    assert doc["operations"] == manifest["operations"]
