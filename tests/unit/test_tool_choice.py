"""The tool_choice oracles (checks/tool_choice.py) on synthetic observations: each fails what
OpenAI's semantics rule out and passes the readings they allow (issue 45 item 2)."""

from __future__ import annotations

from typing import Any

from test_checks import completion, custom_case, delta, obs, rules, tool

from nnrp_conformance.checks import judge

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}},
         {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}]
CALL = [tool("started"), tool("delta", arguments_delta="{}"), tool("completed", arguments="{}")]


def _verdict(choice: Any, events: list[dict], finish: str = "stop") -> list[str]:
    body = {"stream": True, "tools": TOOLS, "tool_choice": choice}
    done = completion()
    done["body"]["choices"][0]["finish_reason"] = finish
    v = judge(custom_case([], body=body), obs(events, "success", done))
    return [r for r in rules(v) if r.startswith("tool-choice.")]


def test_none_fails_a_call_and_passes_text() -> None:
    assert _verdict("none", CALL) == ["tool-choice.none"]
    assert _verdict("none", [delta("hi")]) == []


def test_a_named_function_fails_a_call_to_another() -> None:
    named = {"type": "function", "function": {"name": "other"}}
    assert _verdict(named, CALL, "tool_calls") == ["tool-choice.named"]
    assert _verdict({"type": "function", "function": {"name": "lookup"}}, CALL,
                    "tool_calls") == []
    assert _verdict({"type": "function", "name": "other"}, CALL,  # Responses' flat form
                    "tool_calls") == ["tool-choice.named"]


def test_required_fails_only_an_answer_that_finished_on_its_own_without_a_call() -> None:
    assert _verdict("required", [delta("hi")], "stop") == ["tool-choice.required"]
    assert _verdict("required", [delta("hi")], "length") == []  # cut short: not judged
    assert _verdict("required", CALL, "tool_calls") == []
    assert _verdict("auto", [delta("hi")]) == []
