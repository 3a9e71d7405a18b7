"""The judgement of operations in flight together (``checks/concurrency.py``) and the recipe
format that declares them (``concurrent``): each rule fires on the evidence it names and on
nothing an endpoint right one operation at a time may send."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import rules, validation
from nnrp_conformance.checks.concurrency import Member, judge_group, mark_refusals
from nnrp_conformance.findings import Finding
from nnrp_conformance.manifest import load_manifest
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import RecipeError, load_recipe_file

REPO = Path(__file__).resolve().parents[2]
MIXED = REPO / "recipes" / "level1" / "concurrent-chat-mixed.yaml"


def delta(text: str) -> dict[str, Any]:
    return {"type": "response.output_text.delta", "index": 0, "delta": text}


def completed(text: str, *, ident: str = "c1", model: str = "m") -> dict[str, Any]:
    return {"type": "response.completed", "body": {
        "id": ident, "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": "stop"}]}}


def stream(name: str, *parts: str, final: str | None = None, **kw: Any) -> Member:
    text = "".join(parts) if final is None else final
    return Member(name, "success", "success", [delta(p) for p in parts], completed(text, **kw))


def error(name: str, code: str = "backend_error", typ: str = "server_error",
          expected: str = "error", findings: list[Finding] | None = None) -> Member:
    event = {"type": "response.error", "error": {"type": typ, "code": code, "message": "x"}}
    return Member(name, expected, "error", [], event, findings=findings or [])


def rules_of(member: Member) -> list[str]:
    return [f.rule for f in member.findings]


def test_operations_kept_apart_meet_no_rule_even_with_the_same_text() -> None:
    # two prompts may well get the same answer from a model: that is nobody's cross-talk
    members = [stream("a", "Hi", " there"), stream("b", "Hi", " there", ident="c2"),
               error("e")]
    judge_group(members)
    assert [rules_of(m) for m in members] == [[], [], []]


def test_a_delta_of_another_operation_is_cross_talk() -> None:
    a = stream("a", "alpha", " bravo", " alpha", final="alpha alpha")
    b = stream("b", "bravo", " bravo", ident="c2")
    judge_group([a, b])
    assert rules_of(a) == ["concurrency.cross-talk"] and rules_of(b) == []
    assert a.findings[0].event_index == 1
    assert a.findings[0].level == rules.LEVEL_FAILED


def test_a_delta_its_own_body_lacks_but_no_neighbour_has_is_not_cross_talk() -> None:
    # the stream disagrees with its own body (text.agreement's business), but nothing says
    # the text is another operation's
    a = stream("a", "alpha", " zulu", final="alpha")
    b = stream("b", "bravo", ident="c2")
    judge_group([a, b])
    assert rules_of(a) == [] and rules_of(b) == []


def test_a_chunk_naming_another_completion_is_cross_talk() -> None:
    a = stream("a", "one", ident="c1")
    a.events[0]["openai_chunk"] = {"id": "c2", "model": "m"}
    b = stream("b", "two", ident="c2")
    judge_group([a, b])
    assert rules_of(a) == ["concurrency.cross-talk"] and rules_of(b) == []


def _with_usage(member: Member, streamed: dict[str, int], final: dict[str, int]) -> Member:
    member.events.append({"type": "response.usage", "usage": streamed})
    member.terminal_event["body"]["usage"] = final
    return member


def test_a_usage_of_another_operation_is_cross_talk() -> None:
    a_final = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
    b_final = {"prompt_tokens": 14, "completion_tokens": 3, "total_tokens": 17}
    a = _with_usage(stream("a", "one"), {"input_tokens": 14, "output_tokens": 3,
                                         "total_tokens": 17}, a_final)
    b = _with_usage(stream("b", "two", ident="c2"), b_final, b_final)
    judge_group([a, b])
    assert rules_of(a) == ["concurrency.cross-talk"] and rules_of(b) == []
    assert "usage" in a.findings[0].message


def test_a_near_final_usage_is_nobody_elses() -> None:
    # §7 places the usage "final or near-final": before the last output tokens, its output
    # count may be short of the body's, and may equal a neighbour's by chance; its input
    # count is its own
    a = _with_usage(stream("a", "one"), {"prompt_tokens": 9, "completion_tokens": 1,
                                         "total_tokens": 10},
                    {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11})
    b = _with_usage(stream("b", "two", ident="c2"),
                    *[{"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}] * 2)
    judge_group([a, b])
    assert rules_of(a) == [] and rules_of(b) == []


def test_final_bodies_crossed_are_a_terminal_swap_not_cross_talk() -> None:
    a = stream("a", "alpha", " alpha", final="bravo bravo")
    b = stream("b", "bravo", " bravo", final="alpha alpha", ident="c2")
    judge_group([a, b])
    assert rules_of(a) == rules_of(b) == ["concurrency.terminal-swap"]


def wrong_kind() -> list[Finding]:
    """What the operation's own checks say of a terminal its recipe does not expect."""
    return [Finding("terminal.kind", "not the expected terminal", level=rules.LEVEL_FAILED)]


def test_each_getting_the_terminal_kind_the_other_expects_is_a_terminal_swap() -> None:
    a = Member("a", "success", "error", [], None, findings=wrong_kind())
    b = Member("b", "error", "success", [], None, findings=wrong_kind())
    judge_group([a, b])
    assert rules_of(a) == rules_of(b) == ["terminal.kind", "concurrency.terminal-swap"]


def test_a_terminal_a_reading_allows_is_nobody_elses() -> None:
    # an ignored deadline ends in success, judged non-strict under the recipe's beyond_profile
    # (no terminal.kind): another operation failing its own terminal makes no swap of it, and
    # a deadline that ends cancelled beside a client cancel ended no neighbour
    timeout = Member("t", "error", "success", [], None)
    other = Member("o", "success", "error", [], None, findings=wrong_kind())
    judge_group([timeout, other])
    assert rules_of(timeout) == []
    cancelled_by_deadline = Member("d", "error", "cancelled", [], None)
    cancel = Member("c", "cancelled", "cancelled", [], None, cancelled_by_client=True)
    judge_group([cancelled_by_deadline, cancel])
    assert rules_of(cancelled_by_deadline) == []


@pytest.mark.parametrize("cause", ["cancelled", "error"])
def test_an_operation_ended_beside_a_cancel_or_an_error_is_a_neighbour_ended(
        cause: str) -> None:
    ender = Member("x", "cancelled", "cancelled", [delta("a")], None, cancelled_by_client=True) \
        if cause == "cancelled" else error("x")
    victim = Member("v", "success", cause, [delta("b")], None, findings=wrong_kind())
    judge_group([ender, victim])
    assert rules_of(victim) == ["terminal.kind", "concurrency.neighbour-ended"]
    assert rules_of(ender) == []


def test_an_error_naming_its_own_request_size_is_no_neighbours_doing() -> None:
    """Issue 47: a lead ended with vLLM's context-length error for its own long prompt beside
    an operation that failed the same way was blamed on that neighbour (6 generated sequences
    against the upstream adapter)."""
    lead = error("lead", expected="success", findings=wrong_kind())
    lead.terminal_event["error"]["message"] = CONTEXT_ERRORS[0]
    judge_group([lead, error("op-1")])
    assert rules_of(lead) == ["terminal.kind"]


def test_an_operation_ending_as_it_expects_beside_an_error_is_fine() -> None:
    members = [error("x"), error("y", "missing_messages", "invalid_request_error")]
    judge_group(members)
    assert [rules_of(m) for m in members] == [[], []]


def refused(member: Member, *others: Member) -> bool:
    """Whether ``member`` reads as a refusal beside ``others`` (a stream in flight if none)."""
    group = [member, *(others or (stream("busy", "a"),))]
    mark_refusals(group)
    return member.refused


def test_an_overload_refusal_is_allowed_and_ends_no_neighbour() -> None:
    expectation = Finding("terminal.kind", "expected success", level=rules.LEVEL_FAILED)
    body = Finding("error.body", "bad", level=rules.LEVEL_FAILED)
    refused_one = error("r", "overloaded", "rate_limit_error", expected="success",
                        findings=[expectation, body])
    other = Member("o", "success", "error", [], None, findings=wrong_kind())  # not by "r"
    judge_group([refused_one, other])
    assert refused_one.refused
    assert rules_of(refused_one) == ["error.body", "concurrency.refused"]
    assert refused_one.findings[-1].level == rules.LEVEL_INFORMATIONAL
    assert rules_of(other) == ["terminal.kind"]


def test_a_refusal_is_what_the_endpoint_says_it_is_not_a_code_list() -> None:
    # §10 names no code: an error before any output, beside another operation in flight,
    # whose code, type, message or diagnostics name a limit, an overload or scheduling
    for code, typ in (("overloaded", "rate_limit_error"), ("backend_overload", "server_error"),
                      ("session_capacity_exceeded", "server_error"),
                      ("adapter_operation_limit", "invalid_request_error"),
                      ("scheduler_rejected", "server_error"), ("x", "rate_limit_error")):
        assert refused(error("u", code, typ, expected="success")), code
    upstream = error("w", "adapter_operation_limit", "server_error", expected="success")
    upstream.terminal_event["error"]["message"] = "Adapter session operation limit 4 is active."
    assert refused(upstream)
    by_message = error("m", "e1", "server_error", expected="success")
    by_message.terminal_event["error"]["message"] = "this session already holds 2 operations " \
                                                    "(limit 2)"
    assert refused(by_message)
    by_diagnostics = error("d", "e2", "server_error", expected="success")
    by_diagnostics.terminal_event["diagnostics"] = {"source_role": "SCHEDULER"}
    assert refused(by_diagnostics)
    # NNRP's own busy status: a BACKPRESSURE drop (no profile body), a 429 push
    assert refused(Member("b", "success", "error", [], None, drop_reason=4))
    assert refused(Member("s", "success", "error", [], None, status_code=429))
    # not a refusal: output came first; nobody else in flight; no word of one (a backend
    # failure, an input error); no profile body and no busy status
    late = error("l", "overloaded", "rate_limit_error", expected="success")
    late.events = [delta("a")]
    assert not refused(late)
    alone = error("a", "overloaded", "rate_limit_error", expected="success")
    alone.span_ns = (10, 20)
    done_before = stream("d", "x")
    done_before.span_ns = (0, 5)
    assert not refused(alone, done_before)
    assert not refused(error("b", expected="success"))
    assert not refused(error("i", "missing_messages", "invalid_request_error"))
    assert not refused(Member("n", "success", "error", [], None))
    # a limit of the request's content is an input error, not an admission limit
    param = error("p", "invalid_request", "invalid_request_error", expected="success")
    param.terminal_event["error"]["message"] = "'max_tokens' 9000 is over the limit of 4096"
    assert not refused(param)


#: vLLM's own context-length errors (0.18 to 0.22, and an older wording), as an adapter
#: passes them on: its own code, or one that says overload (the words of the message decide)
CONTEXT_ERRORS = (
    "This model's maximum context length is 512 tokens. However, your request has 600 input "
    "tokens. Please reduce the length of the input messages.",
    "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context "
    "length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).",
    "Input prompt (3000 tokens) is too long and exceeds limit of 2048",
    "Prompt length of 3000 is longer than the maximum model length of 2048.",
)


@pytest.mark.parametrize("message", CONTEXT_ERRORS)
@pytest.mark.parametrize("code", ["invalid_backend_request", "context_length_exceeded",
                                  "backend_overload"])
def test_a_context_length_error_is_never_a_refusal(message: str, code: str) -> None:
    # the request's own size: an invalid request for that request, judged as what it is,
    # even beside other operations and under a code or diagnostics that say overload
    long = error("long", code, "invalid_request_error", expected="success",
                 findings=[Finding("terminal.kind", "expected success",
                                   level=rules.LEVEL_FAILED)])
    long.terminal_event["error"]["message"] = message
    long.terminal_event["diagnostics"] = {"vllm_error_type": "BadRequestError",
                                          "vllm_status_code": 400}
    assert not refused(long)
    judge_group([long, stream("busy", "a")])
    assert "concurrency.refused" not in rules_of(long)
    assert "terminal.kind" in rules_of(long)


def test_an_invalid_body_refused_before_validation_is_a_refusal() -> None:
    # upstream's adapter counts its operations before it reads the body: the fifth, an
    # invalid body, gets adapter_operation_limit; §10 allows the refusal whatever the
    # request was, so its expected code (missing_messages) is set aside
    expectation = Finding("sequence.expected", "expected missing_messages",
                          level=rules.LEVEL_FAILED)
    invalid = error("invalid-body", "adapter_operation_limit", "server_error",
                    findings=[expectation])
    judge_group([invalid, stream("alpha", "a")])
    assert invalid.refused
    assert rules_of(invalid) == ["concurrency.refused"]
    assert invalid.findings[0].level == rules.LEVEL_INFORMATIONAL


def test_a_neighbours_own_error_repeated_is_its_ending_not_a_refusal() -> None:
    # error-ends-neighbours: the invalid request's own error reaches a neighbour that had
    # sent nothing yet: that is the neighbour's ending, and its failure names it
    own = error("x", "missing_messages", "invalid_request_error")
    copied = error("v", "missing_messages", "invalid_request_error", expected="success",
                   findings=wrong_kind())
    judge_group([own, copied])
    assert not copied.refused
    assert rules_of(copied) == ["terminal.kind", "concurrency.neighbour-ended"]


def test_the_recipe_format_plans_each_operation_as_a_case() -> None:
    recipe = load_recipe_file(MIXED)
    manifest = load_manifest(REPO / "docs" / "examples" / "minimal_endpoint" / "manifest.json")
    plan = build_plan([recipe], manifest, model_id="served")
    (case,) = plan.cases
    names = [c.name for c in case.companions]
    assert names == ["bravo", "charlie", "backend-error", "invalid-body"]
    assert case.companions[0].envelope["request_id"] == \
        "level1.concurrent.chat-mixed/bravo"
    # parameters resolve per operation: the run-wide model, but not the backend-error's own
    assert [c.envelope["body"]["model"] for c in case.companions] == [
        "served", "served", "backend-error", "served"]
    assert all(c.selected for c in (case, *case.companions))
    document = plan.to_json()
    assert validation.validate("execution-plan", document) == []
    assert [o["name"] for o in document["cases"][0]["concurrent"]] == names


def test_a_recipe_naming_two_operations_alike_is_refused(tmp_path: Path) -> None:
    text = MIXED.read_text().replace("- name: charlie", "- name: bravo")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(RecipeError) as err:
        load_recipe_file(bad)
    assert "/concurrent/1/name" in str(err.value) and "used twice" in str(err.value)
    lead = tmp_path / "lead.yaml"
    lead.write_text(MIXED.read_text().replace("- name: charlie", "- name: lead"))
    with pytest.raises(RecipeError, match="used twice"):
        load_recipe_file(lead)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(MIXED.read_text().replace("- name: charlie", "- nme: charlie"))
    with pytest.raises(RecipeError, match="/concurrent/1"):
        load_recipe_file(unknown)
