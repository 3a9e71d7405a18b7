"""A table of named bad documents, each asserting the exact violations (pointer + rule) reported."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from nnrp_conformance import validation

UPSTREAM = Path(__file__).parent / "data" / "upstream"
MIB = 1 << 20


def upstream(name: str) -> dict[str, Any]:
    return json.loads((UPSTREAM / name).read_text(encoding="utf-8"))


ENVELOPE = {
    "schema_version": "openai-compatible/1",
    "operation": "chat.completions.create",
    "request_id": "req_1",
    "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "nnrp": {"timeout_ms": 30000},
}
CAPS = {
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
STARTED = {
    "type": "response.tool_call.started",
    "index": 0,
    "item_id": "item_0",
    "call_id": "call_0",
    "name": "lookup",
}
DELTA = {
    "type": "response.tool_call.delta",
    "index": 0,
    "item_id": "item_0",
    "call_id": "call_0",
    "arguments_delta": "{}",
}
COMPLETED_CALL = {
    "type": "response.tool_call.completed",
    "index": 0,
    "item_id": "item_0",
    "call_id": "call_0",
    "name": "lookup",
    "arguments": "{}",
}
TOOL_ERROR = {
    "type": "response.tool_call.error",
    "index": 0,
    "item_id": "item_0",
    "call_id": "call_0",
    "error": {"type": "server_error", "code": "tool_call_parse_error", "message": "bad"},
}
TEXT = {"type": "response.output_text.delta", "index": 0, "delta": "hi"}
USAGE = {
    "type": "response.usage",
    "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
}
ERROR = {
    "type": "response.error",
    "error": {"type": "invalid_request_error", "code": "missing_messages", "message": "m"},
}


#: this suite's recommended usage object (rule usage.shape)
USAGE_SHAPE = "event.usage#/$defs/usage"


class Bad(NamedTuple):
    #: a schema name (or a part of one, ``name#/$defs/x``), "event" for validate_event
    #: dispatch (the profile's shape), "event-recommended" for this suite's preferences
    schema: str
    base: Any
    mutate: Callable[[Any], Any]
    expected: list[tuple[str, str]]


def setp(path: str, value: Any) -> Callable[[Any], None]:
    """Set the value at a slash path ("/a/0/b"), creating nothing."""

    def apply(doc: Any) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.strip("/").split("/")]
        for p in parents:
            doc = doc[p]
        doc[last] = value

    return apply


def delp(path: str) -> Callable[[Any], None]:
    def apply(doc: Any) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.strip("/").split("/")]
        for p in parents:
            doc = doc[p]
        del doc[last]

    return apply


def replace(value: Any) -> Callable[[Any], Any]:
    return lambda _doc: value


BAD: dict[str, Bad] = {
    # --- envelope
    "envelope-missing-schema-version": Bad(
        "envelope", ENVELOPE, delp("/schema_version"), [("/schema_version", "required")]
    ),
    "envelope-wrong-schema-version": Bad(
        "envelope",
        ENVELOPE,
        setp("/schema_version", "openai-compatible/2"),
        [("/schema_version", "const")],
    ),
    "envelope-missing-body": Bad("envelope", ENVELOPE, delp("/body"), [("/body", "required")]),
    "envelope-body-not-object": Bad("envelope", ENVELOPE, setp("/body", "hi"), [("/body", "type")]),
    "envelope-empty-operation": Bad(
        "envelope", ENVELOPE, setp("/operation", ""), [("/operation", "minLength")]
    ),
    "envelope-extra-top-level-field": Bad(
        "envelope", ENVELOPE, setp("/timeout_ms", 5), [("/timeout_ms", "additionalProperties")]
    ),
    "envelope-two-extra-fields": Bad(
        "envelope",
        ENVELOPE,
        lambda d: d.update(model="m", stream=True),
        [("/model", "additionalProperties"), ("/stream", "additionalProperties")],
    ),
    "envelope-request-id-number": Bad(
        "envelope", ENVELOPE, setp("/request_id", 42), [("/request_id", "type")]
    ),
    "envelope-request-id-oversize": Bad(
        "envelope", ENVELOPE, setp("/request_id", "r" * 257), [("/request_id", "maxLength")]
    ),
    "envelope-timeout-zero": Bad(
        "envelope", ENVELOPE, setp("/nnrp/timeout_ms", 0), [("/nnrp/timeout_ms", "minimum")]
    ),
    "envelope-timeout-over-an-hour": Bad(
        "envelope", ENVELOPE, setp("/nnrp/timeout_ms", 3_600_001), [("/nnrp/timeout_ms", "maximum")]
    ),
    "envelope-timeout-float": Bad(
        "envelope", ENVELOPE, setp("/nnrp/timeout_ms", 1.5), [("/nnrp/timeout_ms", "type")]
    ),
    "envelope-diagnostics-string": Bad(
        "envelope", ENVELOPE, setp("/nnrp/diagnostics", "yes"), [("/nnrp/diagnostics", "type")]
    ),
    "envelope-cancel-after-zero": Bad(
        "envelope",
        ENVELOPE,
        setp("/nnrp/cancel_after_events", 0),
        [("/nnrp/cancel_after_events", "minimum")],
    ),
    "envelope-extensions-duplicate": Bad(
        "envelope",
        ENVELOPE,
        setp("/nnrp/extensions", ["a", "a"]),
        [("/nnrp/extensions", "uniqueItems")],
    ),
    "envelope-hint-bad-name": Bad(
        "envelope", ENVELOPE, setp("/nnrp/Timeout", 1), [("/nnrp/Timeout", "propertyNames")]
    ),
    "envelope-not-an-object": Bad("envelope", ENVELOPE, replace([ENVELOPE]), [("", "type")]),
    # --- events (validate_event dispatch)
    "event-unknown-type": Bad(
        "event", TEXT, setp("/type", "response.output_text.done"), [("/type", "enum")]
    ),
    "event-missing-type": Bad("event", TEXT, delp("/type"), [("/type", "required")]),
    "text-delta-missing-delta": Bad("event", TEXT, delp("/delta"), [("/delta", "required")]),
    "text-delta-negative-index": Bad("event", TEXT, setp("/index", -1), [("/index", "minimum")]),
    "text-delta-index-string": Bad("event", TEXT, setp("/index", "0"), [("/index", "type")]),
    "text-delta-index-bool": Bad("event", TEXT, setp("/index", True), [("/index", "type")]),
    "text-delta-delta-null": Bad("event", TEXT, setp("/delta", None), [("/delta", "type")]),
    "text-delta-oversize": Bad(
        "event-recommended", TEXT, setp("/delta", "x" * (MIB + 1)), [("/delta", "maxLength")]
    ),
    "text-delta-extra-field": Bad(
        "event-recommended", TEXT, setp("/content", "hi"), [("/content", "additionalProperties")]
    ),
    "text-delta-chunk-not-object": Bad(
        "event-recommended", TEXT, setp("/openai_chunk", "data: {}"), [("/openai_chunk", "type")]
    ),
    "tool-started-empty-call-id": Bad(
        "event", STARTED, setp("/call_id", ""), [("/call_id", "minLength")]
    ),
    "tool-started-missing-name": Bad("event", STARTED, delp("/name"), [("/name", "required")]),
    "tool-started-oversize-item-id": Bad(
        "event-recommended", STARTED, setp("/item_id", "i" * 257), [("/item_id", "maxLength")]
    ),
    "tool-delta-arguments-object": Bad(
        "event", DELTA, setp("/arguments_delta", {"q": 1}), [("/arguments_delta", "type")]
    ),
    "tool-delta-superseded-shape": Bad(
        "event",
        DELTA,
        lambda d: (d.pop("arguments_delta"), d.update(tool_call={"id": "c"})),
        [("/arguments_delta", "required")],
    ),
    "tool-delta-extra-field": Bad(
        "event-recommended", DELTA, setp("/tool_call", {"id": "c"}),
        [("/tool_call", "additionalProperties")],
    ),
    "tool-completed-missing-arguments": Bad(
        "event", COMPLETED_CALL, delp("/arguments"), [("/arguments", "required")]
    ),
    "tool-completed-empty-name": Bad(
        "event", COMPLETED_CALL, setp("/name", ""), [("/name", "minLength")]
    ),
    "tool-error-missing-error": Bad("event", TOOL_ERROR, delp("/error"), [("/error", "required")]),
    "tool-error-empty-message": Bad(
        "event", TOOL_ERROR, setp("/error/message", ""), [("/error/message", "minLength")]
    ),
    # --- a usage's counts: this suite's recommendation (usage.shape), not the profile's
    "usage-negative-tokens": Bad(
        USAGE_SHAPE, USAGE["usage"], setp("/output_tokens", -2), [("/output_tokens", "minimum")]
    ),
    "usage-missing-total": Bad(
        USAGE_SHAPE, USAGE["usage"], delp("/total_tokens"), [("/total_tokens", "required")]
    ),
    # OpenAI's names (the profile's §8 example) are a reading the schema accepts; a half of
    # each name set is not a usage this suite recommends
    "usage-mixed-names": Bad(
        USAGE_SHAPE,
        USAGE["usage"],
        replace({"prompt_tokens": 1, "output_tokens": 2, "total_tokens": 3}),
        [("", "anyOf")],
    ),
    "usage-extra-string-detail": Bad(
        USAGE_SHAPE, USAGE["usage"], setp("/note", "cached"), [("/note", "type")]
    ),
    "usage-extra-negative-detail": Bad(
        USAGE_SHAPE, USAGE["usage"], setp("/prompt_tokens", -1), [("/prompt_tokens", "minimum")]
    ),
    "usage-not-an-object": Bad("event", USAGE, setp("/usage", [1, 2]), [("/usage", "type")]),
    "completed-missing-body": Bad(
        "event", {"type": "response.completed"}, lambda d: None, [("/body", "required")]
    ),
    "completed-body-string": Bad(
        "event", {"type": "response.completed", "body": "{}"}, lambda d: None, [("/body", "type")]
    ),
    "error-bad-code": Bad(
        "event-recommended", ERROR, setp("/error/code", "not_a_code"), [("/error/code", "enum")]
    ),
    "error-code-type-mismatch": Bad(
        "event-recommended", ERROR, setp("/error/type", "server_error"), [("/error/type", "const")]
    ),
    "error-backend-error-as-invalid-request": Bad(
        "event-recommended",
        ERROR,
        lambda d: d["error"].update(code="backend_error"),
        [("/error/type", "const")],
    ),
    "error-unknown-type-family": Bad(
        "event-recommended",
        ERROR,
        setp("/error/type", "bogus_error"),
        [("/error/type", "const"), ("/error/type", "enum")],
    ),
    "error-extra-param": Bad(
        "event-recommended", ERROR, setp("/error/param", "messages"), [("/error/param", "additionalProperties")]
    ),
    "error-body-is-string": Bad(
        "event", ERROR, setp("/error", "missing_messages"), [("/error", "type")]
    ),
    "cancelled-oversize-reason": Bad(
        "event-recommended",
        {"type": "response.cancelled", "reason": "r" * 257},
        lambda d: None,
        [("/reason", "maxLength")],
    ),
    "cancelled-reason-number": Bad(
        "event-recommended", {"type": "response.cancelled", "reason": 1}, lambda d: None, [("/reason", "type")]
    ),
    # --- capability document
    "caps-unknown-operation": Bad(
        "capability-document",
        CAPS,
        setp("/operations/0/name", "chat.completions.stream"),
        [("/operations/0/name", "enum")],
    ),
    "caps-discovery-operation-listed": Bad(
        "capability-document",
        CAPS,
        setp("/operations/0/name", "nnrp.capabilities.get"),
        [("/operations/0/name", "enum")],
    ),
    "caps-no-operations": Bad(
        "capability-document", CAPS, setp("/operations", []), [("/operations", "minItems")]
    ),
    "caps-operation-missing-tool-calls": Bad(
        "capability-document",
        CAPS,
        delp("/operations/0/tool_calls"),
        [("/operations/0/tool_calls", "required")],
    ),
    "caps-streaming-string": Bad(
        "capability-document",
        CAPS,
        setp("/operations/0/streaming", "true"),
        [("/operations/0/streaming", "type")],
    ),
    "caps-level-zero": Bad(
        "capability-document",
        CAPS,
        setp("/compatibility_levels", [0]),
        [("/compatibility_levels/0", "enum")],
    ),
    "caps-duplicate-levels": Bad(
        "capability-document",
        CAPS,
        setp("/compatibility_levels", [1, 1]),
        [("/compatibility_levels", "uniqueItems")],
    ),
    "caps-empty-levels": Bad(
        "capability-document",
        CAPS,
        setp("/compatibility_levels", []),
        [("/compatibility_levels", "minItems")],
    ),
    "caps-wrong-profile": Bad(
        "capability-document", CAPS, setp("/profile", "openai"), [("/profile", "const")]
    ),
    "caps-model-missing-id": Bad(
        "capability-document",
        CAPS,
        setp("/models/0", {"owned_by": "x"}),
        [("/models/0/id", "required")],
    ),
    "caps-extension-missing-critical": Bad(
        "capability-document",
        CAPS,
        setp("/extensions", [{"name": "x"}]),
        [("/extensions/0/critical", "required")],
    ),
    # --- manifest
    "manifest-missing-adapter": Bad(
        "manifest",
        upstream("adapter-capabilities.json"),
        delp("/adapter"),
        [("/adapter", "required")],
    ),
    "manifest-unknown-operation": Bad(
        "manifest",
        upstream("adapter-capabilities.json"),
        setp("/operations/0/name", "completions.create"),
        [("/operations/0/name", "enum")],
    ),
    "manifest-operation-extra-flag": Bad(
        "manifest",
        upstream("adapter-capabilities.json"),
        setp("/operations/0/json_mode", True),
        [("/operations/0/json_mode", "additionalProperties")],
    ),
    "manifest-unknown-top-level": Bad(
        "manifest",
        upstream("adapter-capabilities.json"),
        setp("/vendor", "x"),
        [("/vendor", "additionalProperties")],
    ),
    # --- recipe
    "recipe-missing-expect": Bad(
        "recipe", upstream("chat-streaming-text.json"), delp("/expect"), [("/expect", "required")]
    ),
    "recipe-bad-terminal": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/expect/terminal", "completed"),
        [("/expect/terminal", "enum")],
    ),
    "recipe-misspelled-min-count": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        lambda d: d["expect"]["events"][0].update(mincount=1),
        [("/expect/events/0/mincount", "additionalProperties")],
    ),
    "recipe-unknown-event-type": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/expect/events/0/type", "response.text.delta"),
        [("/expect/events/0/type", "enum")],
    ),
    "recipe-negative-max-count": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/expect/events/0/max_count", -1),
        [("/expect/events/0/max_count", "minimum")],
    ),
    "recipe-bad-status": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/status", "required"),
        [("/status", "enum")],
    ),
    "recipe-parameter-not-string": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/parameters/MAX", 5),
        [("/parameters/MAX", "type")],
    ),
    "recipe-duplicate-capability": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/required_capabilities", ["api.level1", "api.level1"]),
        [("/required_capabilities", "uniqueItems")],
    ),
    "recipe-request-extra-field": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/request/headers", {}),
        [("/request/headers", "additionalProperties")],
    ),
    "recipe-nnrp-hint-mistyped": Bad(
        "recipe",
        upstream("chat-cancellation.json"),
        setp("/request/nnrp/cancel_after_events", "1"),
        [("/request/nnrp/cancel_after_events", "type")],
    ),
    "recipe-raw-text-and-hex": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/request/raw", {"payload_text": "x", "payload_hex": "00"}),
        [("/request/raw", "not")],
    ),
    "recipe-raw-odd-hex": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/request/raw", {"payload_hex": "abc"}),
        [("/request/raw/payload_hex", "pattern")],
    ),
    "recipe-raw-too-many-frames": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/request/raw", {"frames": [{}] * 9}),
        [("/request/raw/frames", "maxItems")],
    ),
    "recipe-raw-frame-unknown-field": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/request/raw", {"frames": [{"kind": 16}]}),
        [("/request/raw/frames/0/kind", "additionalProperties")],
    ),
    "recipe-cancel-missing-after-events": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/request/cancel", {}),
        [("/request/cancel/after_events", "required")],
    ),
    "recipe-envelope-omit-unknown": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/request/envelope", {"omit": ["headers"]}),
        [("/request/envelope/omit/0", "enum")],
    ),
    "recipe-level-four": Bad(
        "recipe", upstream("chat-streaming-text.json"), setp("/level", 4), [("/level", "enum")]
    ),
    "recipe-check-name-bad": Bad(
        "recipe",
        upstream("chat-streaming-text.json"),
        setp("/checks", ["Event Schema"]),
        # the named checks are listed in the schema (recipes.py asks no module for them)
        [("/checks/0", "enum")],
    ),
    # --- plan, results, report, benchmark
    "plan-missing-artifacts": Bad(
        "execution-plan",
        upstream("execution-plan.json"),
        delp("/artifacts"),
        [("/artifacts", "required")],
    ),
    "plan-summary-negative": Bad(
        "execution-plan",
        upstream("execution-plan.json"),
        setp("/coverage_matrix/0/summary/selected_cases", -1),
        [("/coverage_matrix/0/summary/selected_cases", "minimum")],
    ),
    "plan-case-bad-expect": Bad(
        "execution-plan",
        upstream("execution-plan.json"),
        delp("/cases/0/expect/terminal"),
        [("/cases/0/expect/terminal", "required")],
    ),
    "results-bad-outcome": Bad(
        "case-results",
        upstream("case-results.json"),
        setp("/results/0/outcome", "pass"),
        [("/results/0/outcome", "enum")],
    ),
    "results-extra-evidence-outside-diagnostics": Bad(
        "case-results",
        upstream("case-results.json"),
        setp("/results/0/duration_ms", 3),
        [("/results/0/duration_ms", "additionalProperties")],
    ),
    "results-event-without-type": Bad(
        "case-results",
        upstream("case-results.json"),
        setp("/results/0/events/0", {"delta": "x"}),
        [("/results/0/events/0/type", "required")],
    ),
}


def example(name: str) -> Callable[[], Any]:
    path = Path(__file__).parent / "data" / "examples" / name
    return lambda: json.loads(path.read_text(encoding="utf-8"))


_gate_report = example("release-gate-report.json")
_benchmark = example("benchmark-results.json")


BAD_LAZY: dict[str, tuple[str, Callable[[], Any], Callable[[Any], Any], list[tuple[str, str]]]] = {
    "gate-missing-one-gate": (
        "release-gate-report",
        _gate_report,
        lambda d: d.update(gates=d["gates"][:4]),
        [("/gates", "contains"), ("/gates", "minItems")],
    ),
    "gate-duplicate-gate": (
        "release-gate-report",
        _gate_report,
        lambda d: d["gates"].__setitem__(4, copy.deepcopy(d["gates"][0])),
        [("/gates", "contains"), ("/gates", "maxContains")],
    ),
    "gate-unknown-name": (
        "release-gate-report",
        _gate_report,
        setp("/gates/4/name", "docs_ok"),
        [("/gates", "contains"), ("/gates/4/name", "enum")],
    ),
    "gate-passed-string": (
        "release-gate-report",
        _gate_report,
        setp("/gates/0/passed", "yes"),
        [("/gates/0/passed", "type")],
    ),
    "gate-bad-timestamp": (
        "release-gate-report",
        _gate_report,
        setp("/generated_at", "yesterday"),
        [("/generated_at", "pattern")],
    ),
    "bench-zero-cores": (
        "benchmark-results",
        _benchmark,
        setp("/machine/cores", 0),
        [("/machine/cores", "minimum")],
    ),
    "bench-metric-missing-p95": (
        "benchmark-results",
        _benchmark,
        delp("/metrics/0/p95"),
        [("/metrics/0/p95", "required")],
    ),
    "bench-negative-ratio": (
        "benchmark-results",
        _benchmark,
        setp("/ratios/0/value", -1),
        [("/ratios/0/value", "minimum")],
    ),
}


def _cases() -> list[Any]:
    out = [
        pytest.param(b.schema, lambda b=b: b.base, b.mutate, b.expected, id=k)
        for k, b in BAD.items()
    ]
    out += [pytest.param(s, base, m, e, id=k) for k, (s, base, m, e) in BAD_LAZY.items()]
    return out


def test_table_is_big_enough() -> None:
    assert len(BAD) + len(BAD_LAZY) >= 40


@pytest.mark.parametrize(("schema", "base", "mutate", "expected"), _cases())
def test_bad_document(
    schema: str,
    base: Callable[[], Any],
    mutate: Callable[[Any], Any],
    expected: list[tuple[str, str]],
) -> None:
    doc = copy.deepcopy(base())
    replaced = mutate(doc)
    if replaced is not None and not isinstance(replaced, tuple):
        doc = replaced
    found = (
        validation.validate_event(doc) if schema == "event"
        else validation.recommended_violations(doc) if schema == "event-recommended"
        else validation.validate(schema, doc)
    )
    assert [(v.pointer, v.rule) for v in found] == expected, "\n".join(map(str, found))
    for violation in found:
        assert violation.message
        assert str(violation).startswith(violation.pointer or "/")
    if schema == "event-recommended":
        # a departure from this suite's preferences only: the profile's shape holds
        assert validation.validate_event(doc) == []
        return
    with pytest.raises(validation.SchemaViolationError):
        validation.check(schema, doc)
