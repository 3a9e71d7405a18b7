"""One reading of an answer (answer_reading.py): the HTTP twin and the relations between
requests compare an answer choice by choice, both read the same way (issue 45)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.answer_reading import nnrp_choices
from nnrp_conformance.checks.same_answers import answer_of
from nnrp_conformance.twin.answers import from_nnrp

CHAT = contract.OP_CHAT_COMPLETIONS_CREATE


def _chat(arguments: str, *, n: int = 2) -> list[dict[str, Any]]:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
    choices = [{"index": i, "message": {"role": "assistant", "content": f"text {i}",
                                        "tool_calls": [call]},
                "finish_reason": "tool_calls"} for i in range(n)]
    return [{"type": contract.EV_COMPLETED, "body": {
        "id": "chatcmpl-1", "object": "chat.completion", "choices": choices,
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}}]


def test_the_twin_reads_the_choices_the_relations_read() -> None:
    events = _chat('{"city": "Oslo"}')
    choices = nnrp_choices(CHAT, events)
    assert sorted(choices) == [0, 1]
    answer = from_nnrp(CHAT, contract.TERMINAL_SUCCESS, events)
    twin = answer.fields
    assert {k: twin[k] for k in choices[0]} == choices[0]
    assert answer.choices == choices
    assert twin["usage"] == {"input": 1, "output": 2, "total": 3}
    relation = answer_of(CHAT, SimpleNamespace(terminal=contract.TERMINAL_SUCCESS,
                                               events=events))
    assert relation == {"choice 0": choices[0], "choice 1": choices[1]}


def test_arguments_are_read_as_a_client_parses_them() -> None:
    """The relations compared arguments as raw strings: two answers whose arguments differ
    only in spacing or key order were a false answer.repeatable; a client parses them."""
    def read(arguments: str) -> Any:
        return answer_of(CHAT, SimpleNamespace(terminal=contract.TERMINAL_SUCCESS,
                                               events=_chat(arguments)))
    assert read('{"a": 1, "b": 2}') == read('{"b":2,"a":1}')
    assert read('{"a": 1}') != read('{"a": 2}')


def test_a_streamed_finish_is_its_own_choices() -> None:
    """The twin read the last finish_reason of any choice: a streamed n>1 answer compared
    choice 1's finish with the HTTP API's choice 0."""
    events = [
        {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": "a",
         "openai_chunk": {"choices": [{"index": 0, "finish_reason": "length"}]}},
        {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 1, "delta": "b",
         "openai_chunk": {"choices": [{"index": 1, "finish_reason": "stop"}]}},
        {"type": contract.EV_COMPLETED, "body": None}]
    assert from_nnrp(CHAT, contract.TERMINAL_SUCCESS, events).fields["finish_reason"] == "length"
    assert nnrp_choices(CHAT, events) == {
        0: {"text": "a", "tool_calls": None, "finish_reason": "length"},
        1: {"text": "b", "tool_calls": None, "finish_reason": "stop"}}
