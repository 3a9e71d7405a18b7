"""Checks on a non-streaming answer: no partial results (``nonstreaming.single-result``, for
every operation) and, for chat, a terminal carrying an OpenAI chat completion
(``nonstreaming.body``)."""

from __future__ import annotations

from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.checks.context import Context, at, show, type_of


def _chat_completion_problems(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return [f"body must be an object, seen {show(body)}"]
    problems = []
    if not isinstance(body.get("id"), str) or not body.get("id"):
        problems.append("body.id must be a non-empty string")
    if body.get("object") != "chat.completion":
        problems.append(f"body.object must be 'chat.completion', seen {show(body.get('object'))}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        problems.append("body.choices must be a non-empty array")
    else:
        for n, choice in enumerate(choices):
            if not isinstance(choice, dict):
                problems.append(f"body.choices[{n}] must be an object")
                continue
            if not isinstance(choice.get("message"), dict):
                problems.append(f"body.choices[{n}].message must be an object")
            if "finish_reason" not in choice:
                problems.append(f"body.choices[{n}].finish_reason is missing")
    if not isinstance(body.get("usage"), dict):
        problems.append("body.usage must be an object")
    return problems


#: operations whose non-streaming answer is one result (the discovery operation included)
_SINGLE_RESULT_OPERATIONS = (*contract.PROFILE_OPERATIONS, contract.OP_CAPABILITIES_GET)


def check_nonstreaming(ctx: Context) -> None:
    # a request is non-streaming when its stream is false or absent; a stream that is no
    # boolean ("true", an invalid request an endpoint may still accept and read either way)
    # asks for neither, and a request the endpoint answered anyway is judged under
    # generated.invalid-accepted, not by a reading of its flag
    if ctx.case.operation not in _SINGLE_RESULT_OPERATIONS \
            or ctx.body.get("stream", False) is not False:
        return
    if ctx.obs.terminal_kind != contract.TERMINAL_SUCCESS:
        return
    seq = ctx.seq
    for i, ev in enumerate(ctx.obs.events):
        ctx.fail("nonstreaming.single-result", f"a non-streaming request produced a partial "
                 f"result — {at(seq, i)}", index=i, expected="no partial results",
                 seen=type_of(ev))
    if ctx.case.operation != contract.OP_CHAT_COMPLETIONS_CREATE:
        return  # the other operations' bodies: checks/responses.py, checks/discovery.py
    term = ctx.obs.terminal_event
    if type_of(term) != contract.EV_COMPLETED:
        ctx.fail("nonstreaming.body", "a successful non-streaming request must end with "
                 "response.completed carrying the chat completion", index=ctx.obs.terminal_index,
                 expected=contract.EV_COMPLETED, seen=type_of(term))
        return
    problems = _chat_completion_problems(term.get("body"))
    if problems:
        ctx.fail("nonstreaming.body", "the completion body is not an OpenAI chat completion: "
                 + "; ".join(problems) + f" — {at(seq, len(ctx.obs.events))}",
                 index=len(ctx.obs.events),
                 expected="{id, object: chat.completion, choices[].message, finish_reason, usage}",
                 seen=term.get("body"))
