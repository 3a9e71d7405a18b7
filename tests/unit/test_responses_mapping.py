"""Level 2's mapping table (docs/levels.md#level2-events) on event sequences recorded from real
vLLM, both lines.

Fixtures: tests/fixtures/vllm-responses/<version>/, written by
scripts/record-vllm-responses-fixtures against real vLLM CPU with the tiny local model; nothing
here is invented. Where a rule covers a case vLLM did not produce in the recordings (an error
event, a call closed without an argument delta), the recorded sequence is cut or extended,
and the test says how.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from nnrp_conformance import contract
from nnrp_conformance.validation import validate_event
from vllm_nnrp_adapter.profile.responses_mapping import IGNORED_EVENT_TYPES, ResponsesMapper

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-responses"
VERSIONS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
CURRENT = "0.22.1"
TOOL_STREAMS = ["stream_tool_named", "stream_tool_required"]


def load(version: str, name: str) -> dict:
    return json.loads((FIXTURES / version / f"{name}.json").read_text())


def map_all(events: list[dict], **kw: object) -> tuple[ResponsesMapper, list[dict]]:
    mapper = ResponsesMapper(**kw)  # type: ignore[arg-type]
    out = [e for event in events for e in mapper.map_event(event)]
    return mapper, out


def of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def raw(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e.get("type") == kind]


def test_every_line_is_recorded():
    assert {"0.18.1", CURRENT, "0.32.0"} <= set(VERSIONS)


@pytest.mark.parametrize("version", VERSIONS)
def test_streamed_text_maps_item_by_item_then_usage(version):
    recorded = load(version, "stream_text")["events"]
    mapper, events = map_all(recorded)
    for e in events:
        assert validate_event(e) == [], e
    # the lifecycle events vLLM sends and the profile does not
    assert not {e["type"] for e in events} & IGNORED_EVENT_TYPES
    assert [e["type"] for e in events] == [
        contract.EV_OUTPUT_ITEM_ADDED,
        *[contract.EV_OUTPUT_TEXT_DELTA] * len(raw(recorded, "response.output_text.delta")),
        contract.EV_OUTPUT_ITEM_DONE,
        contract.EV_USAGE,
    ]
    item = events[0]["item"]
    deltas = of(events, contract.EV_OUTPUT_TEXT_DELTA)
    assert all(d["item_id"] == item["id"] and d["index"] == 0 for d in deltas)
    assert [d["delta"] for d in deltas] == [
        e["delta"] for e in raw(recorded, "response.output_text.delta")]
    completed = mapper.completed_event()
    assert completed is not None and validate_event(completed) == []
    body = completed["body"]
    final = raw(recorded, "response.completed")[0]["response"]
    # everything but the output is vLLM's; the output is the streamed items
    assert {k: v for k, v in body.items() if k != "output"} == \
        {k: v for k, v in final.items() if k != "output"}
    assert [i["id"] for i in body["output"]] == [item["id"]]
    assert "".join(d["delta"] for d in deltas) == body["output"][0]["content"][0]["text"]
    assert events[-1]["usage"] == {k: final["usage"][k]
                                   for k in ("input_tokens", "output_tokens", "total_tokens")}
    assert mapper.usage == events[-1]["usage"] and mapper.error is None


#: the recordings whose ``response.completed`` names its items anew (0.32.0 keeps the streamed
#: ids)
RENAMES_FINAL_ITEMS = {"0.18.1", "0.22.1"}


@pytest.mark.parametrize("version", VERSIONS)
def test_vllm_gives_the_final_body_new_item_ids(version):
    """Why the body's output is the streamed items: vLLM up to 0.22 parses the whole text again
    for ``response.completed`` and names its items anew (the mapping takes the streamed items
    on every version, so both behaviours give one answer)."""
    recorded = load(version, "stream_text")["events"]
    streamed = raw(recorded, "response.output_item.added")[0]["item"]["id"]
    final = raw(recorded, "response.completed")[0]["response"]["output"]
    assert ([i["id"] for i in final] != [streamed]) is (version in RENAMES_FINAL_ITEMS)


@pytest.mark.parametrize("name", TOOL_STREAMS)
def test_streamed_tool_call_is_a_function_call_item_with_tool_call_events(name):
    recorded = load(CURRENT, name)["events"]
    mapper, events = map_all(recorded)
    for e in events:
        assert validate_event(e) == [], e
    added = [e for e in of(events, contract.EV_OUTPUT_ITEM_ADDED)
             if e["item"]["type"] == "function_call"]
    assert len(added) == 1
    item = added[0]["item"]
    calls = [e for e in events if e["type"] in contract.TOOL_CALL_EVENT_TYPES]
    # added, then started; deltas; completed; then the item's done
    start = events.index(added[0])
    assert events[start + 1] == {
        "type": contract.EV_TOOL_CALL_STARTED, "index": added[0]["output_index"],
        "item_id": item["id"], "call_id": item["call_id"], "name": "lookup"}
    assert [e["type"] for e in calls] == [
        contract.EV_TOOL_CALL_STARTED,
        *[contract.EV_TOOL_CALL_DELTA] * (len(calls) - 2),
        contract.EV_TOOL_CALL_COMPLETED,
    ]
    assert {(e["index"], e["item_id"], e["call_id"]) for e in calls} == {
        (added[0]["output_index"], item["id"], item["call_id"])}
    vllm_deltas = raw(recorded, "response.function_call_arguments.delta")
    assert all("call_id" not in d for d in vllm_deltas)  # vLLM's delta has none: filled here
    joined = "".join(e["arguments_delta"] for e in calls[1:-1])
    assert joined == "".join(d["delta"] for d in vllm_deltas)
    assert calls[-1]["arguments"] == joined == \
        raw(recorded, "response.function_call_arguments.done")[0]["arguments"]
    done = [e for e in of(events, contract.EV_OUTPUT_ITEM_DONE) if e["item"]["id"] == item["id"]]
    assert len(done) == 1 and events.index(calls[-1]) < events.index(done[0])
    assert done[0]["item"]["arguments"] == joined
    assert isinstance(json.loads(joined, strict=False)["q"], str)
    body = mapper.completed_event()["body"]  # type: ignore[index]
    assert [i["id"] for i in body["output"]] == [
        e["item"]["id"] for e in of(events, contract.EV_OUTPUT_ITEM_ADDED)]
    assert not [e for e in events if e["type"] in contract.TERMINAL_EVENT_TYPES]


def test_a_call_closed_without_an_argument_delta_is_still_completed():
    """vLLM sends function_call_arguments.done only after a delta. The recorded named call with
    its deltas and its arguments.done cut out: the item's done closes the call, its arguments
    sent as one delta first, so the completed arguments are still the deltas' sum."""
    recorded = [e for e in load(CURRENT, "stream_tool_named")["events"]
                if not e["type"].startswith("response.function_call_arguments.")]
    _, events = map_all(recorded)
    calls = [e for e in events if e["type"] in contract.TOOL_CALL_EVENT_TYPES]
    final = next(e["item"]["arguments"] for e in raw(recorded, "response.output_item.done")
                 if e["item"]["type"] == "function_call")
    assert [e["type"] for e in calls] == [contract.EV_TOOL_CALL_STARTED,
                                          contract.EV_TOOL_CALL_DELTA,
                                          contract.EV_TOOL_CALL_COMPLETED]
    assert calls[1]["arguments_delta"] == calls[2]["arguments"] == final


@pytest.mark.parametrize("version", VERSIONS)
def test_a_stream_cut_before_its_completed_has_no_terminal(version):
    recorded = load(version, "stream_text")["events"][:-1]
    mapper, events = map_all(recorded)
    assert mapper.completed_event() is None and not mapper.finished
    assert not of(events, contract.EV_USAGE)


@pytest.mark.parametrize("kind", ["response.failed", "error"])
def test_a_failure_event_becomes_the_error_terminal(kind):
    """vLLM 0.18.1 and 0.22.1 never send one (their GenerationError breaks the stream instead:
    the backend maps that); a later vLLM that does is still answered with response.error."""
    recorded = load(CURRENT, "stream_text")["events"][:3]
    failure = {"type": kind, "error": {"message": "engine fell over"}}
    if kind == "response.failed":
        failure = {"type": kind, "response": {"error": {"message": "engine fell over"}}}
    mapper, _ = map_all([*recorded, failure])
    assert mapper.finished and mapper.completed_event() is None
    assert mapper.error is not None and validate_event(mapper.error) == []
    assert mapper.error["error"]["code"] == contract.ERR_BACKEND_ERROR
    assert mapper.error["error"]["message"] == "engine fell over"


def test_incomplete_is_a_completed_terminal_with_its_status():
    recorded = copy.deepcopy(load(CURRENT, "stream_text")["events"])
    last = recorded[-1]
    last["type"] = "response.incomplete"
    last["response"].pop("status")
    mapper, _ = map_all(recorded)
    assert mapper.completed_event()["body"]["status"] == "incomplete"  # type: ignore[index]


def test_raw_event_attached_only_when_asked():
    recorded = load(CURRENT, "stream_text")["events"]
    _, plain = map_all(recorded)
    assert not any("openai_chunk" in e for e in plain)
    _, attached = map_all(recorded, attach_events=True)
    assert all(validate_event(e) == [] for e in attached)
    assert attached[0]["openai_chunk"]["type"] == "response.output_item.added"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["nonstream_text", "nonstream_tool_named"])
def test_non_streamed_body_is_the_completed_body(version, name):
    body = load(version, name)["body"]
    assert validate_event({"type": contract.EV_COMPLETED, "body": body}) == []
    assert body["object"] == "response" and body["id"].startswith("resp_")
    assert body["status"] in ("completed", "incomplete")
    assert ResponsesMapper.usage_of(body) is not None
    if name == "nonstream_tool_named":
        calls = [i for i in body["output"] if i["type"] == "function_call"]
        assert len(calls) == 1 and calls[0]["name"] == "lookup" and calls[0]["call_id"]


@pytest.mark.parametrize("version", VERSIONS)
def test_models_list_is_the_openai_model_list(version):
    models = load(version, "models")
    assert models["object"] == "list"
    assert [(m["id"], m["object"], m["owned_by"]) for m in models["data"]] == [
        ("tiny-model", "model", "vllm")]


def test_the_lower_bound_line_breaks_streaming_with_tools():
    """The evidence behind the lower bound's claims (vllm_backend.lines): vLLM 0.18.1's own
    Responses stream with function tools fails building its own events (pydantic rejects
    them): no event at all with a required or named tool_choice, nothing after
    ``response.in_progress`` with auto; the same line's non-streamed tool call and streamed
    text are right (above). The backend reports it as the engine's failure."""
    for name, seen in (("stream_tool_named", []), ("stream_tool_required", []),
                       ("stream_tool_auto", ["response.created", "response.in_progress"])):
        recorded = load("0.18.1", name)
        assert [e["type"] for e in recorded["events"]] == seen, name
        assert recorded["end"].startswith("raised BackendError(engine_failure)"), recorded["end"]
        assert recorded["error"]["error"]["type"] == "ValidationError"
        _, events = map_all(recorded["events"])
        assert events == []
    for name in TOOL_STREAMS:
        assert load(CURRENT, name)["end"] == "end"


def test_reasoning_text_maps_to_the_reasoning_delta():
    """No model here reasons; the recorded text stream with its message item turned into a
    reasoning item (vLLM's reasoning events carry the same members: item_id, output_index,
    delta) maps as the table's reasoning row says."""
    recorded = copy.deepcopy(load(CURRENT, "stream_text")["events"])
    for e in recorded:
        if e["type"] in ("response.output_item.added", "response.output_item.done"):
            e["item"] = {"id": e["item"]["id"], "type": "reasoning", "summary": []}
        elif e["type"] == "response.output_text.delta":
            e["type"] = "response.reasoning_text.delta"
    _, events = map_all(recorded)
    deltas = of(events, contract.EV_REASONING_TEXT_DELTA)
    assert deltas and not of(events, contract.EV_OUTPUT_TEXT_DELTA)
    item_id = of(events, contract.EV_OUTPUT_ITEM_ADDED)[0]["item"]["id"]
    assert all(validate_event(d) == [] and d["item_id"] == item_id and d["index"] == 0
               for d in deltas)
