"""Smoke tests of docs/examples/minimal_endpoint's Levels 2 and 3 (``--levels 3``:
``responses.create``, ``models.list``, ``embeddings.create``) over real loopback NNRP, with
the plain nnrp-py client of ``test_minimal_endpoint`` (no suite code). The suite's verdicts
on the same endpoint are tests/reliability/test_kill_rate.py's."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from test_minimal_endpoint import (
    ENDPOINT_DIR,
    MODEL,
    Outcome,
    envelope,
    exchange,
    start_endpoint,
    stop_endpoint,
)

pytestmark = pytest.mark.wire

TOOL = {"type": "function", "name": "lookup", "description": "Look something up.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                       "required": ["query"]}}


@pytest.fixture(scope="module")
def endpoint() -> Iterator[int]:
    proc, port = start_endpoint("--model", MODEL, "--levels", "3")
    yield port
    assert stop_endpoint(proc) == 0


def responses(**body: Any) -> dict[str, Any]:
    return envelope({"model": MODEL, "input": "hello there world", **body}, "responses.create")


def embeddings(inputs: Any, **body: Any) -> dict[str, Any]:
    return envelope({"model": MODEL, "input": inputs, **body}, "embeddings.create")


def completed(out: Outcome) -> dict[str, Any]:
    assert out.push is not None and out.push["type"] == "response.completed", out.push
    assert out.push_status == 200
    return out.push["body"]


def test_capability_document_agrees_with_levels_manifest(endpoint: int) -> None:
    doc = completed(exchange(endpoint, envelope({}, operation="nnrp.capabilities.get")))
    manifest = json.loads((ENDPOINT_DIR / "manifest-levels.json").read_text())
    for key in ("adapter", "profile", "schema_version", "compatibility_levels", "operations"):
        assert doc[key] == manifest[key], key
    assert manifest["compatibility_levels"] == [1, 2, 3]


def test_streaming_text_item_lifecycle(endpoint: int) -> None:
    out = exchange(endpoint, responses(stream=True, max_output_tokens=5))
    types = [e["type"] for e in out.events]
    assert types == ["response.output_item.added", *["response.output_text.delta"] * 5,
                     "response.output_item.done", "response.usage"]
    added, *deltas, done, usage = out.events
    item_id = added["item"]["id"]
    assert added["output_index"] == 0 and added["item"]["type"] == "message"
    assert all(d["index"] == 0 and d["item_id"] == item_id for d in deltas)
    text = "".join(d["delta"] for d in deltas)
    assert done["item"]["id"] == item_id
    assert done["item"]["content"] == [{"type": "output_text", "text": text, "annotations": []}]
    body = completed(out)
    assert body["object"] == "response" and body["model"] == MODEL
    # the answer stopped at max_output_tokens: OpenAI's "incomplete"
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [item["id"] for item in body["output"]] == [item_id]
    u = usage["usage"]
    assert u["total_tokens"] == u["input_tokens"] + u["output_tokens"] and u["output_tokens"] == 5
    assert {k: body["usage"][k] for k in u} == u


def test_required_tool_choice_gives_two_function_call_items(endpoint: int) -> None:
    out = exchange(endpoint, responses(stream=True, tools=[TOOL], tool_choice="required"))
    body = completed(out)
    added = [e for e in out.events if e["type"] == "response.output_item.added"]
    done = [e for e in out.events if e["type"] == "response.output_item.done"]
    assert [e["output_index"] for e in added] == [0, 1] == [e["output_index"] for e in done]
    # one item after the other: item 1 is added after item 0 is done
    assert out.events.index(done[0]) < out.events.index(added[1])
    for index, (a, d) in enumerate(zip(added, done, strict=True)):
        item = a["item"]
        assert item["type"] == "function_call" and item["name"] == "lookup"
        calls = [e for e in out.events if e["type"].startswith("response.tool_call.")
                 and e["index"] == index]
        assert [e["type"].rsplit(".", 1)[1] for e in calls] == \
            ["started", "delta", "delta", "delta", "completed"]
        assert {(e["item_id"], e["call_id"]) for e in calls} == {(item["id"], item["call_id"])}
        arguments = "".join(e["arguments_delta"] for e in calls if "arguments_delta" in e)
        assert d["item"]["arguments"] == arguments == calls[-1]["arguments"]
        assert json.loads(arguments) == {"query": "hello there world"}
        assert body["output"][index] == d["item"]
    assert len({a["item"]["call_id"] for a in added}) == 2
    assert body["status"] == "completed"


def test_named_tool_choice_gives_one_item(endpoint: int) -> None:
    out = exchange(endpoint, responses(stream=True, tools=[TOOL],
                                       tool_choice={"type": "function", "name": "lookup"}))
    assert [e["output_index"] for e in out.events
            if e["type"] == "response.output_item.added"] == [0]
    assert len(completed(out)["output"]) == 1


def test_non_streaming_single_response(endpoint: int) -> None:
    out = exchange(endpoint, responses())
    assert out.partials == []
    body = completed(out)
    assert body["status"] == "completed" and body["output"][0]["type"] == "message"
    assert body["output"][0]["content"][0]["text"].split()[:3] == ["hello", "there", "world"]


@pytest.mark.parametrize(
    ("env", "code"),
    [
        (envelope({"model": MODEL, "stream": True}, "responses.create"), "invalid_request"),
        (responses(input=42), "invalid_request"),
        (responses(input=[]), "invalid_request"),
        (responses(store=True), "invalid_request"),
        (responses(previous_response_id="resp_1"), "invalid_request"),
        (responses(tools=[{"type": "function", "function": {"name": "x"}}]), "invalid_request"),
        (responses(model="backend-error"), "backend_error"),
        (responses(max_output_tokens=5000), "context_length_exceeded"),
        (embeddings(42), "invalid_request"),
        (embeddings([]), "invalid_request"),
        (embeddings(""), "invalid_request"),
        (embeddings(["a", 1]), "invalid_request"),
        (embeddings("a", dimensions=0), "invalid_request"),
        (embeddings("a", stream=True), "invalid_request"),
        (embeddings("a", model="backend-error"), "backend_error"),
    ],
)
def test_level_errors(endpoint: int, env: dict[str, Any], code: str) -> None:
    out = exchange(endpoint, env)
    assert out.partials == []
    assert out.push is not None and out.push["type"] == "response.error", out.push
    assert out.push["error"]["code"] == code and out.push["error"]["message"]


def test_responses_cancel_hint(endpoint: int) -> None:
    out = exchange(endpoint, responses(stream=True) | {"nnrp": {"cancel_after_events": 2}})
    assert len(out.partials) == 2
    assert out.push is not None and out.push["type"] == "response.cancelled"
    assert out.push["reason"] == "cancel_after_events"


def test_responses_client_cancel(endpoint: int) -> None:
    out = exchange(endpoint, responses(stream=True, max_output_tokens=4000), cancel_after=2)
    assert out.push is None and out.drop_code == 3  # PEER_CANCELLED
    assert json.loads(out.drop_diag)["reason"] == "client"
    assert len(out.partials) < 4000


def test_responses_timeout(endpoint: int) -> None:
    out = exchange(endpoint, responses(stream=True, max_output_tokens=4000)
                   | {"nnrp": {"timeout_ms": 5}})
    assert out.push is not None and out.push["error"]["code"] == "timeout"


def test_models_list_is_the_documents_models(endpoint: int) -> None:
    out = exchange(endpoint, envelope({}, "models.list"))
    assert out.partials == []
    body = completed(out)
    assert body["object"] == "list"
    assert [(m["id"], m["object"], m["owned_by"]) for m in body["data"]] == \
        [(MODEL, "model", "minimal-endpoint")]


def _vectors(out: Outcome) -> list[list[float]]:
    body = completed(out)
    assert out.partials == [] and body["object"] == "list" and body["model"] == MODEL
    assert [e["index"] for e in body["data"]] == list(range(len(body["data"])))
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > 0
    return [e["embedding"] for e in body["data"]]


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))  # the vectors have length 1


def test_embeddings_are_deterministic_unit_vectors(endpoint: int) -> None:
    batch = ["the cat sat", "quarks and gluons", "the cat sat"]
    a, b, c = _vectors(exchange(endpoint, embeddings(batch)))
    assert a == c != b
    assert len(a) == len(b) == 384
    assert math.isclose(sum(x * x for x in a), 1.0, abs_tol=1e-6)
    assert abs(_cosine(a, b)) < 0.5
    (single,) = _vectors(exchange(endpoint, embeddings("the cat sat")))
    assert single == a  # one text, one vector, whatever the batch


def test_embeddings_honour_dimensions_and_base64(endpoint: int) -> None:
    vectors = _vectors(exchange(endpoint, embeddings(["a", "b"], dimensions=16)))
    assert [len(v) for v in vectors] == [16, 16]
    body = completed(exchange(endpoint, embeddings("a", dimensions=16, encoding_format="base64")))
    assert isinstance(body["data"][0]["embedding"], str)


def test_level1_endpoint_serves_no_level2_operation() -> None:
    proc, port = start_endpoint("--model", MODEL)
    try:
        for op in ("responses.create", "models.list", "embeddings.create"):
            out = exchange(port, envelope({"model": MODEL, "input": "x"}, op))
            assert out.push is not None and out.push["error"]["code"] == "unsupported_operation"
    finally:
        assert stop_endpoint(proc) == 0


def test_embeddings_reversed_defect_answers_another_input() -> None:
    proc, port = start_endpoint("--model", MODEL, "--levels", "3", "--defect",
                                "embeddings-reversed")
    try:
        (a,) = _vectors(exchange(port, embeddings("a")))  # one input: nothing to reverse
        first, second = _vectors(exchange(port, embeddings(["a", "b"])))
        assert second == a != first
    finally:
        assert stop_endpoint(proc) == 0


@pytest.mark.parametrize(
    ("defect", "env", "check"),
    [
        ("item-done-early", responses(stream=True),
         lambda o: o.events[1]["type"] == "response.output_item.done"),
        ("responses-no-usage", responses(stream=True),
         lambda o: "response.usage" not in {e["type"] for e in o.events}),
        ("responses-empty-push", responses(stream=True),
         lambda o: o.pushed and o.push is None and o.push_status == 200),
        ("models-omit-served", envelope({}, "models.list"),
         lambda o: o.push["body"]["data"] == []),
    ],
)
def test_level_defects_change_their_aspect(defect: str, env: dict, check: Any) -> None:
    proc, port = start_endpoint("--model", MODEL, "--levels", "3", "--defect", defect)
    try:
        assert check(exchange(port, env))
        healthy = exchange(port, envelope({"model": MODEL, "messages": [
            {"role": "user", "content": "hi"}]}))  # chat stays correct
        assert healthy.push is not None and healthy.push["type"] == "response.completed"
    finally:
        assert stop_endpoint(proc) == 0
