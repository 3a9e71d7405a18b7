"""The request-field oracles (checks/request_fields.py: ``choices.n``, ``response-format.json``)
on synthetic observations, and the ``usage.include-usage`` expectation a generated recipe
carries: each fails what OpenAI's semantics rule out and passes what they allow (issue 45
item 2). The example endpoint's defect of each is killed over the real wire by
tests/reliability/test_kill_rate.py."""

from __future__ import annotations

import copy
from typing import Any

from test_checks import completion, custom_case, delta, error, obs, rules

from nnrp_conformance import contract
from nnrp_conformance.checks import judge
from nnrp_conformance.checks.generated import _names_feature
from nnrp_conformance.generate.recipe_files import recipe_data
from nnrp_conformance.generate.strategies import FAMILY_VALID, Draft, cancellable

JSON_MODE = {"type": "json_object"}


def _done(texts: list[str | None], finish: str = "stop") -> dict[str, Any]:
    done = completion()
    choice = done["body"]["choices"][0]
    done["body"]["choices"] = [
        {**copy.deepcopy(choice), "index": i, "finish_reason": finish,
         "message": {"role": "assistant", "content": text}} for i, text in enumerate(texts)]
    return done


def _found(body: dict[str, Any], events: list[dict], done: dict | None,
           terminal: str = "success") -> list[str]:
    v = judge(custom_case([], body=body), obs(events, terminal, done))
    return [r for r in rules(v) if r in ("choices.n", "response-format.json")]


def test_n_fails_too_few_choices_and_passes_n() -> None:
    assert _found({"n": 2}, [], _done(["hi"])) == ["choices.n"]
    assert _found({"n": 2}, [], _done(["hi", "hi"])) == []
    assert _found({"n": 1}, [], _done(["hi"])) == []
    assert _found({}, [], _done(["hi", "hi"])) == []  # no n asked: not judged here


def test_n_fails_a_streamed_choice_beyond_it() -> None:
    two = _done(["h", "h"])
    assert _found({"n": 2, "stream": True}, [delta("h"), delta("h", 2)], two) == ["choices.n"]
    assert _found({"n": 2, "stream": True}, [delta("h"), delta("h", 1)], two) == []


def test_n_refused_is_the_endpoints_right() -> None:
    assert _found({"n": 3}, [], error("invalid_request", message="'n' above 1 is not served"),
                  "error") == []


def test_a_one_letter_field_is_named_only_as_a_word() -> None:
    body = {"model": "m", "n": 2}
    assert _names_feature({"code": "invalid_request", "message": "'n' must be 1"}, body)
    assert not _names_feature({"code": "invalid_request", "message": "request not supported"},
                              {"n": 2})


def test_json_mode_fails_text_that_finished_on_its_own() -> None:
    body = {"response_format": JSON_MODE}
    assert _found(body, [], _done(["hi there"])) == ["response-format.json"]
    assert _found(body, [], _done(['{"answer": "hi"}'])) == []
    assert _found(body, [], _done(['{"answer": "h'], "length")) == []  # cut at its limit
    assert _found({**body, "stop": ["x"]}, [], _done(["hi"])) == []  # a stop may cut it
    assert _found({"response_format": {"type": "text"}}, [], _done(["hi"])) == []


def test_json_mode_judges_streamed_text_when_no_body_holds_it() -> None:
    body = {"response_format": JSON_MODE, "stream": True}
    chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {},
                                                             "finish_reason": "stop"}]}
    ended = {**delta(""), "openai_chunk": chunk}
    assert _found(body, [delta("hi"), ended], None) == ["response-format.json"]
    assert _found(body, [delta('{"a"'), delta(": 1}"), ended], None) == []
    assert _found(body, [delta("hi")], None) == []  # finish unknown: not judged


def test_json_mode_reads_the_answer_as_a_client_does() -> None:
    """One reading of an answer (answer_reading.py): what streamed, else the body's content;
    a stream its body disagrees with is text.agreement's, not this rule's."""
    body = {"response_format": JSON_MODE, "stream": True}
    assert _found(body, [delta('{"a": 1}')], _done(["hi"])) == []
    assert _found(body, [delta("hi")], _done(['{"a": 1}'])) == ["response-format.json"]
    assert _found({"response_format": JSON_MODE}, [], _done([None])) == []  # a refusal


def _expected_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    draft = Draft(FAMILY_VALID, contract.OP_CHAT_COMPLETIONS_CREATE,
                  {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body})
    data = recipe_data(draft, case_id="generated.valid.chat.1-0000", seed=1, index=0, model="m")
    return list(data["expect"]["events"])


def test_a_generated_stream_that_asks_for_usage_expects_one() -> None:
    asked = {"stream": True, "stream_options": {"include_usage": True}}
    assert _expected_events(asked) == [{"type": contract.EV_USAGE, "min_count": 1,
                                        "rule": "usage.include-usage"}]
    # not asking is no reason to expect none: the profile never says a stream has no usage
    assert _expected_events({**asked, "stream_options": {"include_usage": False}}) == []
    assert _expected_events({"stream": False}) == []


def test_a_cancelled_stream_is_never_in_json_mode() -> None:
    """A JSON-mode answer may be a short object that ends before the cancel point (the case
    would prove nothing about cancelling: not exercised)."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
            "response_format": JSON_MODE, "n": 2}
    out = cancellable(contract.OP_CHAT_COMPLETIONS_CREATE, body)
    assert "response_format" not in out and out["n"] == 2 and out["stream"] is True


def _response(text: str, status: str = "completed") -> dict[str, Any]:
    return {"type": contract.EV_COMPLETED, "body": {
        "id": "resp_1", "object": "response", "status": status, "error": None,
        "output": [{"type": "message", "content": [{"type": "output_text", "text": text}]}]}}


def _response_found(body: dict[str, Any], done: dict[str, Any]) -> list[str]:
    """response-format.json on a Responses answer (a context of that operation)."""
    from types import SimpleNamespace

    from nnrp_conformance.checks.context import Context
    from nnrp_conformance.checks.request_fields import check_json_mode

    case = SimpleNamespace(operation=contract.OP_RESPONSES_CREATE, envelope={"body": body})
    ctx = Context(case, obs([], "success", done), None, None, strict=True)  # type: ignore[arg-type]
    check_json_mode(ctx)
    return [f.rule for f in ctx.findings]


def test_a_response_in_json_mode_that_completed_is_json() -> None:
    """A Response asks for JSON mode with text.format (OpenAI's Responses API), judged as
    chat's response_format is (issue 45): completed, it parses; cut at its limit, not judged."""
    body = {"text": {"format": JSON_MODE}}
    assert _response_found(body, _response("hi there")) == ["response-format.json"]
    assert _response_found(body, _response('{"answer": "hi"}')) == []
    assert _response_found(body, _response('{"answ', "incomplete")) == []
    assert _response_found({"text": {"format": {"type": "text"}}}, _response("hi")) == []
    assert _response_found({}, _response("hi")) == []
