"""Levels 2 and 3 on synthetic observations (docs/levels.md): a correct answer of each recipe
passes, and each broken relation fails with its own rule; plus the Level 3 selection and
manifest rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_checks import BUNDLED, obs, rules

from nnrp_conformance import contract
from nnrp_conformance.checks import judge
from nnrp_conformance.manifest import ManifestError, manifest_from_dict
from nnrp_conformance.planner import build_plan

RESPONSES, MODELS, EMBED = (contract.OP_RESPONSES_CREATE, contract.OP_MODELS_LIST,
                            contract.OP_EMBEDDINGS_CREATE)


def _op(name: str, streaming: bool = True, tools: bool = True) -> dict[str, Any]:
    return {"name": name, "streaming": streaming, "non_streaming": True, "tool_calls": tools,
            "cancellation": streaming}


MANIFEST_DATA = {
    "adapter": "test-adapter", "profile": contract.PROFILE,
    "schema_version": contract.SCHEMA_VERSION, "compatibility_levels": [1, 2, 3],
    "operations": [_op(contract.OP_CHAT_COMPLETIONS_CREATE), _op(RESPONSES),
                   _op(MODELS, False, False), _op(EMBED, False, False)],
}
MANIFEST = manifest_from_dict(MANIFEST_DATA)
DOC = {**{k: v for k, v in MANIFEST_DATA.items() if k != "adapter"},
       "models": [{"id": "tiny", "owned_by": "adapter"}]}


def case_of(recipe_id: str) -> Any:
    return build_plan([BUNDLED[recipe_id]], MANIFEST, model_id="tiny").cases[0]


def verdict(recipe_id: str, events: list, terminal: dict | None, kind: str = "success") -> Any:
    return judge(case_of(recipe_id), obs(events, kind, terminal), manifest=MANIFEST,
                 capability_document=DOC)


# --- Level 2 --------------------------------------------------------------------------------


def _message(item_id: str = "msg_1", text: str = "hi") -> dict:
    return {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _call(item_id: str = "fc_1", call_id: str = "call_1", arguments: str = '{"query":"x"}') -> dict:
    return {"id": item_id, "type": "function_call", "call_id": call_id, "name": "lookup",
            "arguments": arguments, "status": "completed"}


def _response(*items: dict, usage: tuple[int, int] = (3, 2)) -> dict:
    i, o = usage
    return {"type": contract.EV_COMPLETED, "body": {
        "id": "resp_1", "object": "response", "status": "completed", "model": "tiny",
        "output": list(items),
        "usage": {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}}}


def _usage(i: int = 3, o: int = 2) -> dict:
    return {"type": contract.EV_USAGE, "usage": {"input_tokens": i, "output_tokens": o,
                                                 "total_tokens": i + o}}


def added(index: int, item: dict) -> dict:
    return {"type": contract.EV_OUTPUT_ITEM_ADDED, "output_index": index,
            "item": {k: v for k, v in item.items() if k not in ("content", "arguments")}}


def done(index: int, item: dict) -> dict:
    return {"type": contract.EV_OUTPUT_ITEM_DONE, "output_index": index, "item": item}


def text(delta: str, index: int = 0, item_id: str = "msg_1") -> dict:
    return {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": index, "item_id": item_id,
            "delta": delta}


def call_events(index: int, item: dict, parts: tuple[str, ...] = ('{"query":', '"x"}')) -> list:
    ids = {"index": index, "item_id": item["id"], "call_id": item["call_id"]}
    return [added(index, item),
            {"type": contract.EV_TOOL_CALL_STARTED, **ids, "name": item["name"]},
            *({"type": contract.EV_TOOL_CALL_DELTA, **ids, "arguments_delta": p} for p in parts),
            {"type": contract.EV_TOOL_CALL_COMPLETED, **ids, "name": item["name"],
             "arguments": "".join(parts)},
            done(index, item)]


def text_stream() -> list:
    msg = _message(text="hi")
    return [added(0, msg), text("h"), text("i"), done(0, msg), _usage()]


def test_a_correct_responses_stream_passes() -> None:
    v = verdict("level2.responses.streaming-text", text_stream(), _response(_message(text="hi")))
    assert v.passed and v.findings == [], v.findings


def test_two_items_in_order_pass_and_the_tool_call_recipe_passes() -> None:
    a, b = _call("fc_1", "call_1"), _call("fc_2", "call_2")
    events = [*call_events(0, a), *call_events(1, b), _usage()]
    v = verdict("level2.responses.output-item-ordering", events, _response(a, b))
    assert v.passed and v.findings == [], v.findings
    v = verdict("level2.responses.tool-call-forced", [*call_events(0, a), _usage()], _response(a))
    assert v.passed and v.findings == [], v.findings


@pytest.mark.parametrize(("mutate", "rule"), [
    (lambda ev: ev.insert(2, added(0, _message())), "output-item.lifecycle"),       # added twice
    (lambda ev: ev.__setitem__(0, added(1, _message())), "output-item.lifecycle"),  # starts at 1
    (lambda ev: ev.insert(1, ev.pop(3)), "output-item.lifecycle"),                  # done first
    (lambda ev: ev.__setitem__(1, text("h", item_id="msg_9")), "output-item.lifecycle"),
    (lambda ev: ev.pop(3), "output-item.lifecycle"),                                # never done
    (lambda ev: ev.pop(4), "responses.usage-event"),
])
def test_each_broken_lifecycle_has_its_rule(mutate: Any, rule: str) -> None:
    events = text_stream()
    mutate(events)
    v = verdict("level2.responses.streaming-text", events, _response(_message(text="hi")))
    assert rule in rules(v), v.findings


def test_a_missing_usage_event_is_a_recommendation() -> None:
    events = text_stream()[:-1]
    v = verdict("level2.responses.streaming-text", events, _response(_message(text="hi")))
    # the recipe's expectation and the check name the same recommendation
    levels = [f.level for f in v.findings if f.rule == "responses.usage-event"]
    assert levels and set(levels) == {"non-strict"} and v.outcome == "passed", v.findings


def test_usage_arithmetic_is_judged_in_the_event_and_in_the_response_body() -> None:
    """usage.arithmetic reads every usage the endpoint sent: the streamed event (named by its
    index) and the Response body (named as the body), each on its own."""
    events = text_stream()
    events[-1]["usage"]["total_tokens"] += 1
    v = verdict("level2.responses.usage", events, _response(_message(text="hi")))
    found = [f.message for f in v.findings if f.rule == "usage.arithmetic"]
    assert len(found) == 1 and found[0].startswith("response.usage total_tokens 6 is not "
                                                   "input_tokens + output_tokens (5) — event #4")
    body = _response(_message(text="hi"))
    body["body"]["usage"]["total_tokens"] = 9
    v = verdict("level2.responses.usage", text_stream(), body)
    found = [f.message for f in v.findings if f.rule == "usage.arithmetic"]
    assert found == ["the Response body's usage.total_tokens 9 is not input_tokens + "
                     "output_tokens (5)"], found


def test_tool_call_events_must_be_their_items() -> None:
    a = _call()
    events = call_events(0, a)
    events[1] = {**events[1], "name": "other"}
    events[-2] = {**events[-2], "name": "other"}
    v = verdict("level2.responses.tool-call-forced", [*events, _usage()], _response(a))
    assert "output-item.tool-call" in rules(v)
    events = call_events(0, a)
    events[-1] = done(0, _call(arguments='{"query":"y"}'))
    v = verdict("level2.responses.tool-call-forced", [*events, _usage()], _response(a))
    assert "output-item.tool-call" in rules(v)


def test_the_final_body_is_the_response_of_the_stream() -> None:
    body = _response(_message("msg_other", "hi"))
    assert "responses.body" in rules(verdict("level2.responses.streaming-text", text_stream(), body))
    bad = _response(_message(text="hi"))
    del bad["body"]["usage"]
    assert "responses.body" in rules(verdict("level2.responses.streaming-text", text_stream(), bad))
    v = verdict("level2.responses.streaming-text", text_stream(), _response(_message(text="ho")))
    assert "text.agreement" in rules(v)
    v = verdict("level2.responses.streaming-text", text_stream(),
                _response(_message(text="hi"), usage=(3, 4)))
    assert "usage.agreement" in rules(v)
    v = verdict("level2.responses.streaming-text", text_stream(), None)
    assert [f.level for f in v.findings if f.rule == "responses.final-body"] == ["non-strict"]


def test_non_streaming_responses_is_one_result() -> None:
    ok = _response(_message(text="hi"))
    assert verdict("level2.responses.non-streaming-body", [], ok).passed
    v = verdict("level2.responses.non-streaming-body", [text("h")], ok)
    assert "nonstreaming.single-result" in rules(v)


# --- Level 3 --------------------------------------------------------------------------------


def _list(*ids: str) -> dict:
    return {"type": contract.EV_COMPLETED, "body": {"object": "list", "data": [
        {"id": i, "object": "model", "created": 1, "owned_by": "adapter"} for i in ids]}}


def test_models_list_agrees_with_the_document() -> None:
    assert verdict("level3.models.list", [], _list("tiny")).passed
    assert "models.agreement" in rules(verdict("level3.models.list", [], _list("tiny", "other")))
    assert "models.agreement" in rules(verdict("level3.models.list", [], _list()))
    broken = _list("tiny")
    broken["body"]["data"][0]["object"] = "engine"
    assert "models.body" in rules(verdict("level3.models.list", [], broken))


def _embeddings(*vectors: list[float], **over: Any) -> dict:
    body = {"object": "list", "model": "tiny",
            "data": [{"object": "embedding", "index": i, "embedding": v}
                     for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": 5, "total_tokens": 5}}
    body.update(over)
    return {"type": contract.EV_COMPLETED, "body": body}


CAT, QCD, PARIS = [1.0, 0.1, 0.0], [0.0, 1.0, 0.2], [0.3, 0.0, 1.0]


def test_embeddings_shape_and_order() -> None:
    assert verdict("level3.embeddings.shape", [], _embeddings(CAT, QCD)).passed
    assert verdict("level3.embeddings.single-input", [], _embeddings(CAT)).passed
    assert verdict("level3.embeddings.batch-order", [], _embeddings(CAT, QCD, CAT, PARIS)).passed
    for broken in (_embeddings(CAT), _embeddings(CAT, [1.0, 2.0]), _embeddings(CAT, []),
                   _embeddings(CAT, QCD, usage={"prompt_tokens": 1})):
        assert "embeddings.body" in rules(verdict("level3.embeddings.shape", [], broken))
    swapped = _embeddings(CAT, QCD)
    swapped["body"]["data"][0]["index"] = 1
    assert "embeddings.body" in rules(verdict("level3.embeddings.shape", [], swapped))
    # a batch answered in reverse: the twins are no longer at 0 and 2
    reverse = _embeddings(PARIS, CAT, QCD, CAT)
    assert "embeddings.order" in rules(verdict("level3.embeddings.batch-order", [], reverse))


def test_embeddings_dimensions_are_honoured() -> None:
    case = copy.deepcopy(case_of("level3.embeddings.single-input"))
    case.envelope["body"]["dimensions"] = 2
    v = judge(case, obs([], "success", _embeddings(CAT)), manifest=MANIFEST)
    assert "embeddings.body" in rules(v)


@pytest.mark.parametrize(("value", "vectors"), [
    ([15339, 1917, 0], 1),            # an array of token ids is one input (OpenAI's API)
    ([[15339], [1917, 2]], 2),        # an array of them, one input each
    (["a", "b", "c"], 3),
])
def test_an_embeddings_input_counts_as_openai_reads_it(value: Any, vectors: int) -> None:
    """A token array is one input: the suite counted its ids as inputs and failed a correct
    endpoint's one vector (found by the generator's token-array inputs, issue 45 item 4)."""
    case = copy.deepcopy(case_of("level3.embeddings.single-input"))
    case.envelope["body"]["input"] = value
    right = judge(case, obs([], "success", _embeddings(*[CAT, QCD, PARIS][:vectors])),
                  manifest=MANIFEST)
    assert "embeddings.body" not in rules(right)
    wrong = judge(case, obs([], "success", _embeddings(*([CAT] * (vectors + 1)))),
                  manifest=MANIFEST)
    assert "embeddings.body" in rules(wrong)


# --- selection and manifests ------------------------------------------------------------------


def test_level3_operations_are_each_optional() -> None:
    data = copy.deepcopy(MANIFEST_DATA)
    data["operations"] = data["operations"][:3]  # no embeddings.create
    plan = build_plan(list(BUNDLED.values()), manifest_from_dict(data), model_id="tiny")
    assert plan.case("level3.models.list").selected
    embeddings = plan.case("level3.embeddings.shape")
    assert embeddings.selection == contract.SEL_NOT_CLAIMED
    assert "each optional" in (embeddings.reason or "")


def test_a_level3_claim_lists_a_level3_operation() -> None:
    data = copy.deepcopy(MANIFEST_DATA)
    data["operations"] = data["operations"][:2]
    with pytest.raises(ManifestError, match="Level 3 is claimed"):
        manifest_from_dict(data)


def test_after_our_cancel_nothing_is_judged_for_being_absent() -> None:
    """nnrp-py drops the queued partials once the client cancels: an item never seen done and
    a usage event never seen are not the endpoint's fault; a wrong item id still is."""
    case = case_of("level2.responses.streaming-text")
    events = text_stream()[:2]  # added, one delta: the rest was dropped after the cancel
    v = judge(case, obs(events, "success", _response(_message(text="hi")),
                        cancelled_at_index=1), manifest=MANIFEST, capability_document=DOC)
    assert not {"output-item.lifecycle", "responses.usage-event"} & set(rules(v)), v.findings
    wrong = _response(_message("msg_other", "hi"))
    v = judge(case, obs(events, "success", wrong, cancelled_at_index=1), manifest=MANIFEST,
              capability_document=DOC)
    assert "responses.body" in rules(v)
