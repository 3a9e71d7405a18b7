"""How the twin reads an HTTP answer (twin/http.py, twin/answers.py) where the example
endpoint's HTTP API never goes: SSE framing details, vLLM's error shapes (a bare error object,
an error inside a 200 stream), the status families, and a sampled request's fields."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace

import anyio
import pytest

from nnrp_conformance import contract
from nnrp_conformance.twin import why_not_compared
from nnrp_conformance.twin.answers import family_of_status, from_http, from_nnrp
from nnrp_conformance.twin.compare import compare_answers
from nnrp_conformance.twin.http import HttpAnswer, api_base, sse_data

CHAT = contract.OP_CHAT_COMPLETIONS_CREATE


def test_sse_events_are_joined_data_fields_and_comments_are_skipped() -> None:
    lines = [": keep-alive", "data: {\"a\":", "data: 1}", "", "event: x", "data:[DONE]", "",
             "data: tail"]

    async def read() -> list[str]:
        async def source() -> AsyncIterator[str]:
            for line in lines:
                yield line
        return [d async for d in sse_data(source())]

    assert anyio.run(read) == ['{"a":\n1}', "[DONE]", "tail"]


def test_the_base_url_takes_the_api_root_with_or_without_v1() -> None:
    assert api_base("http://h:1") == api_base("http://h:1/v1/") == "http://h:1/v1"


@pytest.mark.parametrize(("status", "family"), [
    (400, "invalid_request_error"), (404, "invalid_request_error"), (429, "rate_limit_error"),
    (408, "timeout_error"), (504, "timeout_error"), (500, "server_error"), (200, None)])
def test_an_http_status_has_one_profile_family(status: int, family: str | None) -> None:
    assert family_of_status(status) == family


def test_vllm_error_shapes_read_as_errors_of_their_family() -> None:
    bare = HttpAnswer("POST", "u", False, status=404, body={
        "object": "error", "message": "no such model", "type": "NotFoundError", "code": 404})
    answer = from_http(CHAT, bare)
    assert (answer.outcome, answer.error_type) == ("error", "invalid_request_error")
    assert answer.error_raw == {"type": "NotFoundError", "code": 404,
                                "message": "no such model", "http_status": 404}
    in_stream = HttpAnswer("POST", "u", True, status=200, events=[
        {"choices": [{"index": 0, "delta": {"content": "a"}}]},
        {"error": {"type": "InternalServerError", "message": "boom", "code": 500}}])
    assert from_http(CHAT, in_stream).outcome == "error"


def test_a_sampled_request_compares_only_what_it_decides() -> None:
    nnrp = from_nnrp(CHAT, "success", [
        {"type": "response.output_text.delta", "index": 0, "delta": "x"},
        {"type": "response.usage", "usage": {"input_tokens": 3, "output_tokens": 1,
                                             "total_tokens": 4}}])
    http = from_http(CHAT, HttpAnswer("POST", "u", True, status=200, events=[
        {"choices": [{"index": 0, "delta": {"content": "y"}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2,
                                  "total_tokens": 5}}]))
    sampled = compare_answers(nnrp, http, {"temperature": 0.7}, where="POST /v1/x")
    # how many choices is the request's (n), never the sampling's: compared either way
    assert sampled.findings == [] and sampled.compared == ["outcome", "choices", "usage"]
    assert set(sampled.not_compared) == {"text", "finish-reason", "tool-calls"}
    greedy = compare_answers(nnrp, http, {"temperature": 0}, where="POST /v1/x")
    assert [f.rule for f in greedy.findings] == ["twin.text", "twin.usage"]
    assert greedy.not_compared == {"finish-reason": "not in the NNRP answer"}


def _two_choices(second: str, finish: str = "stop") -> list[dict[str, object]]:
    """An HTTP chat stream of two choices, interleaved as a server may send them."""
    return [{"choices": [{"index": 0, "delta": {"content": "a"}}]},
            {"choices": [{"index": 1, "delta": {"content": second}}]},
            {"choices": [{"index": 1, "delta": {"tool_calls": [
                {"index": 0, "function": {"name": "f", "arguments": '{"x":'}}]}}]},
            {"choices": [{"index": 1, "delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": " 1}"}}]}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"},
                         {"index": 1, "delta": {}, "finish_reason": finish}]}]


def test_every_choice_and_how_many_are_compared() -> None:
    """The twin compared choice 0 alone: an NNRP face that ignored ``n``, or whose second
    choice differed, showed no difference (issue 45 item 5)."""
    http = from_http(CHAT, HttpAnswer("POST", "u", True, status=200, events=_two_choices("b")))
    assert http.choices == {
        0: {"text": "a", "tool_calls": None, "finish_reason": "stop"},
        1: {"text": "b", "tool_calls": [{"name": "f", "arguments": {"x": 1}}],
            "finish_reason": "stop"}}
    same = compare_answers(http, http, {"temperature": 0}, where="w")
    assert same.findings == []
    assert same.compared == ["outcome", "choices", "text", "finish-reason", "text[1]",
                             "finish-reason[1]", "tool-calls[1]"]
    other = from_http(CHAT, HttpAnswer("POST", "u", True, status=200,
                                       events=_two_choices("c", "length")))
    found = compare_answers(other, http, {"seed": 3}, where="w").findings
    assert [f.rule for f in found] == ["twin.text", "twin.finish-reason"]
    assert all("of choice 1 differs" in f.message for f in found)
    assert (found[0].seen, found[0].expected) == ("c", "b")
    one = from_nnrp(CHAT, "success", [
        {"type": "response.output_text.delta", "index": 0, "delta": "a"},
        {"type": contract.EV_COMPLETED, "body": {"choices": [
            {"index": 0, "message": {"content": "a"}, "finish_reason": "stop"}]}}])
    fewer = compare_answers(one, http, {"temperature": 0.7}, where="w")
    (finding,) = fewer.findings
    assert (finding.rule, finding.seen, finding.expected) == ("twin.choices", 1, 2)
    assert "the number of choices differs" in finding.message
    greedy = compare_answers(one, http, {"temperature": 0}, where="w")
    assert [f.rule for f in greedy.findings] == ["twin.choices"]
    assert greedy.not_compared == {"choice 1": "only in the HTTP answer"}
    responses = from_http(contract.OP_RESPONSES_CREATE, HttpAnswer(
        "POST", "u", False, status=200, body={"status": "completed", "output": []}))
    assert "choices" not in compare_answers(responses, responses, {}, where="w").compared


def test_a_null_error_member_is_no_error() -> None:
    """A Responses object always carries ``error``: null on success. Read as an error, every
    non-streamed Responses answer was a false difference and never compared (issue 45)."""
    body = {"id": "resp_1", "object": "response", "status": "completed", "error": None,
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}]}
    plain = from_http(contract.OP_RESPONSES_CREATE,
                      HttpAnswer("POST", "u", False, status=200, body=body))
    assert plain.outcome == "success", plain
    failed = {**body, "status": "failed", "error": {"code": "server_error", "message": "x"}}
    assert from_http(contract.OP_RESPONSES_CREATE,
                     HttpAnswer("POST", "u", False, status=200, body=failed)).outcome == "error"
    chunk = {"choices": [{"index": 0, "delta": {"content": "a"}}], "error": None}
    assert from_http(CHAT, HttpAnswer("POST", "u", True, status=200,
                                      events=[chunk])).outcome == "success"


@pytest.mark.parametrize("envelope", [
    {"schema_version": "openai-compatible/0", "operation": CHAT, "body": {}},
    {"schema_version": contract.SCHEMA_VERSION, "body": {}},  # envelope-no-operation
    {"schema_version": contract.SCHEMA_VERSION, "operation": CHAT, "body": "hello"},
    {"schema_version": contract.SCHEMA_VERSION, "operation": CHAT, "body": {}, "extra": 1},
])
def test_an_envelope_invalid_on_purpose_never_goes_over_http(envelope: dict[str, object]) -> None:
    """The HTTP API receives only a body: an envelope mutation has no HTTP form, and comparing
    it made false differences (issue 45 item 5: four from ``envelope-no-operation``)."""
    case = SimpleNamespace(envelope=envelope, operation=CHAT, raw=None, cancel_after_events=None)
    why = why_not_compared(case, SimpleNamespace(terminal="error"))  # type: ignore[arg-type]
    assert why is not None and "envelope itself is invalid" in why
    valid = {**envelope, "schema_version": contract.SCHEMA_VERSION, "operation": CHAT,
             "body": {"model": "m"}}
    valid.pop("extra", None)
    case = SimpleNamespace(envelope=valid, operation=CHAT, raw=None, cancel_after_events=None)
    assert why_not_compared(case, SimpleNamespace(terminal="error")) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(("nnrp", "terminal", "took_ms", "compared"), [
    ({"timeout_ms": 30000, "diagnostics": True}, "success", 40.0, True),  # §6's own example
    ({"timeout_ms": 30000}, "success", 40.0, True),
    ({"timeout_ms": 50}, "success", 80.0, False),   # ended after its deadline was due
    ({"timeout_ms": 30000}, "error", 40.0, False),  # an error may be the deadline's
    ({"timeout_ms": "30000"}, "success", 40.0, False),
    ({"timeout_ms": 30000, "priority": 1}, "success", 40.0, False),  # other policy
    ({"diagnostics": True}, "error", None, True),
])
def test_a_deadline_the_operation_never_reached_is_compared(
        nnrp: dict[str, object], terminal: str, took_ms: float | None, compared: bool) -> None:
    """§6's example hints (``timeout_ms`` 30000) on a request answered in time change nothing
    of the answer, so the HTTP API's answer to the same body is compared: before, every
    generated case dealt those hints went uncompared (238 of 1,000)."""
    envelope = {"schema_version": contract.SCHEMA_VERSION, "operation": CHAT,
                "body": {"model": "m"}, "nnrp": nnrp}
    case = SimpleNamespace(envelope=envelope, operation=CHAT, raw=None, cancel_after_events=None)
    result = SimpleNamespace(terminal=terminal,
                             diagnostics={"timings_ms": {"submit_to_terminal": took_ms}})
    why = why_not_compared(case, result)  # type: ignore[arg-type]
    assert (why is None) is compared, why
    if not compared and terminal == "success" and "priority" in nnrp:
        assert why is not None and "nnrp.priority" in why and "nnrp.timeout_ms" in why
