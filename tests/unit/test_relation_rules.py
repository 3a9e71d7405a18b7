"""The relation rules on synthetic observations: the sides of each relation that the faulty
endpoint variants (tests/endpoints/relation_faults.py) do not reach, and the readings that
must stay legal (docs/verdicts.md#relations)."""

from __future__ import annotations

from typing import Any

from test_checks import (
    MANIFEST,
    MANIFEST_DATA,
    case_of,
    completion,
    custom_case,
    delta,
    obs,
    rules,
    tool,
    usage,
)

from nnrp_conformance import contract
from nnrp_conformance.checks import judge

DOC = {"profile": contract.PROFILE, "schema_version": contract.SCHEMA_VERSION,
       "compatibility_levels": [1], "operations": [dict(MANIFEST_DATA["operations"][0])],
       "models": [{"id": "tiny", "owned_by": "adapter"}]}


def _chunk(**over: Any) -> dict:
    chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
             "model": "tiny", "choices": []}
    chunk.update(over)
    return chunk


def _with_chunk(event: dict, **over: Any) -> dict:
    return {**event, "openai_chunk": _chunk(**over)}


def _body(**over: Any) -> dict:
    done = completion()
    done["body"].update(over)
    return done


def test_chunks_of_one_completion_pass_and_the_body_may_have_its_own_clock() -> None:
    events = [_with_chunk(delta("h")), _with_chunk(delta("i"), created=1)]
    v = judge(case_of("level1.chat.streaming-text"), obs(events, "success", _body(created=9)))
    assert v.passed, v.findings


def test_chunks_that_change_identity_fail() -> None:
    for key, value in (("id", "chatcmpl-2"), ("model", "other"), ("created", 2)):
        events = [_with_chunk(delta("h")), _with_chunk(delta("i"), **{key: value})]
        v = judge(case_of("level1.chat.streaming-text"), obs(events, "success", completion()))
        assert rules(v) == ["completion.identity"], (key, v.findings)


def test_body_with_another_model_than_its_chunks_fails() -> None:
    events = [_with_chunk(delta("h"), model="tiny-2"), delta("i")]
    doc = {**DOC, "models": [{"id": "tiny"}, {"id": "tiny-2"}]}
    v = judge(case_of("level1.chat.streaming-text"), obs(events, "success", completion()),
              capability_document=doc)
    assert rules(v) == ["completion.identity"], v.findings


def test_forced_tool_call_may_finish_with_stop() -> None:
    # OpenAI and vLLM finish a forced (named) tool_choice with "stop": only
    # "tool_calls" -> message.tool_calls is a relation
    call = {"id": "call_1", "type": "function",
            "function": {"name": "lookup", "arguments": "{}"}}
    done = completion()
    done["body"]["choices"][0]["message"] = {"role": "assistant", "content": None,
                                             "tool_calls": [call]}
    events = [tool("started"), tool("completed", arguments="{}")]
    v = judge(case_of("level1.chat.tool-call-forced"), obs(events, "success", done))
    assert v.passed, v.findings


def test_tool_calls_finish_without_tool_calls_fails() -> None:
    done = completion()
    done["body"]["choices"][0]["finish_reason"] = "tool_calls"
    v = judge(case_of("level1.chat.non-streaming-body"), obs([], "success", done))
    assert rules(v) == ["finish-reason.tool-calls"], v.findings


def test_max_tokens_bound_per_choice_and_superseded_by_max_completion_tokens() -> None:
    def judged(body: dict, output: int) -> list[str]:
        case = custom_case([{"type": contract.EV_OUTPUT_TEXT_DELTA, "min_count": 1}],
                           body={"stream": True, **body})
        return rules(judge(case, obs([delta(), usage(3, output)], "success", None)))

    assert judged({"max_tokens": 4}, 4) == []
    assert judged({"max_tokens": 4}, 5) == ["usage.max-tokens"]
    assert judged({"max_tokens": 4, "n": 2}, 8) == []
    assert judged({"max_tokens": 4, "max_completion_tokens": 8}, 8) == []
    assert judged({"max_tokens": 8, "max_completion_tokens": 4}, 5) == ["usage.max-tokens"]
    assert judged({}, 500) == []


def test_tool_calls_from_an_operation_documented_without_them_fail() -> None:
    events = [tool("started"), tool("completed", arguments="{}")]
    doc = {**DOC, "operations": [{**DOC["operations"][0], "tool_calls": False}]}
    v = judge(case_of("level1.chat.tool-call-forced"), obs(events), capability_document=doc)
    assert rules(v) == ["capability.behaviour"], v.findings
    v = judge(case_of("level1.chat.tool-call-forced"), obs(events), capability_document=DOC)
    assert v.passed, v.findings


def test_an_answer_from_a_model_the_document_does_not_list_fails() -> None:
    case = case_of("level1.chat.non-streaming-body")
    assert judge(case, obs([], "success", completion()), capability_document=DOC).passed
    v = judge(case, obs([], "success", _body(model="tiny-2026")), capability_document=DOC)
    assert rules(v) == ["capability.behaviour"], v.findings
    # without a document (none learned, none given) nothing is judged against one
    assert judge(case, obs([], "success", _body(model="tiny-2026"))).passed
    # an error answer names no model
    assert judge(case_of("level1.chat.backend-error"),
                 obs([], "error", {"type": contract.EV_ERROR, "error": {
                     "type": "server_error", "code": "backend_error", "message": "x"}}),
                 capability_document=DOC, manifest=MANIFEST).passed
