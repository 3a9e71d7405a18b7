"""Relations of an operation's tool calls across calls and against the final body (the
relation table: docs/verdicts.md#relations), both recommendations:

* ``tool-call.index-unique``: distinct calls (``call_id``) never share an ``index``;
* ``tool-call.body-agreement``: a chat completion body's ``message.tool_calls`` are the
  streamed calls (``tool_calls.streamed_calls``): as many, the same names, the same ids
  where the body gives ids, and the arguments the stream sent.

Both compare what one endpoint sent with itself, so an endpoint's own quirk (a vLLM line
streams a forced call's arguments as ``true``) agrees with itself. Called by
:func:`checks.judge` like every always-on check; nothing else judges these.
"""

from __future__ import annotations

from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.checks.context import Context, chat_completion_body, show, type_of
from nnrp_conformance.tool_calls import StreamedCall, streamed_calls

__all__ = ["TOOL_CALL_BODY_CHECKS", "body_calls"]


def check_tool_call_index_unique(ctx: Context) -> None:
    owner: dict[Any, tuple[str, int]] = {}  # index -> (call_id, event number)
    for i, ev in enumerate(ctx.seq):
        if type_of(ev) not in contract.TOOL_CALL_EVENT_TYPES:
            continue
        call, index = ev.get("call_id"), ev.get("index")
        if not (isinstance(call, str) and isinstance(index, int)) or isinstance(index, bool):
            continue  # event.schema reports it
        first = owner.setdefault(index, (call, i))
        if first[0] != call:
            ctx.fail("tool-call.index-unique", f"calls {first[0]!r} (event #{first[1]}) and "
                     f"{call!r} share index {index} — event #{i}: {show(ev)}", index=i,
                     expected=f"an index of its own for call {call!r}", seen=index)
            return


def body_calls(body: dict[str, Any]) -> list[StreamedCall]:
    """Every choice's ``message.tool_calls``, in order, as (id, name, arguments)."""
    out = []
    for choice in body.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else ():
            call = call if isinstance(call, dict) else {}
            fn = call.get("function")
            fn = fn if isinstance(fn, dict) else {}
            out.append(StreamedCall(call.get("id"), fn.get("name"), fn.get("arguments")))
    return out


def check_tool_call_body_agreement(ctx: Context) -> None:
    obs = ctx.obs
    body = chat_completion_body(ctx)
    if body is None or obs.terminal_kind != contract.TERMINAL_SUCCESS \
            or obs.cancelled_at_index is not None or obs.extra.get("flooded"):
        return  # no body, or (after our cancel) a stream the client could not read whole
    streamed = streamed_calls(obs.events)
    if not streamed:
        return  # no call streamed (a non-streaming answer), or what they amount to is unknown
    final = body_calls(body)

    def fail(what: str, expected: Any, seen: Any) -> None:
        ctx.fail("tool-call.body-agreement", f"the final body's message.tool_calls disagree "
                 f"with the streamed tool-call events: {what}", index=obs.terminal_index,
                 expected=expected, seen=seen)

    if len(final) != len(streamed):
        fail(f"{len(streamed)} call(s) streamed, {len(final)} in the body",
             [c.call_id for c in streamed], [c.call_id for c in final])
        return
    by_id = {c.call_id: c for c in streamed}
    # with ids on every body call they name their streamed call; without, the order does
    pairs = ([(by_id.get(c.call_id), c) for c in final]
             if all(isinstance(c.call_id, str) for c in final)
             else list(zip(streamed, final, strict=True)))
    for mine, theirs in pairs:
        if mine is None:
            fail(f"the body's call {theirs.call_id!r} is none of the streamed calls "
                 f"{sorted(by_id)}", sorted(by_id), theirs.call_id)
            return
        for key in ("name", "arguments"):
            want, got = getattr(mine, key), getattr(theirs, key)
            if got != want:
                fail(f"call {mine.call_id!r}: the body's {key} {show(got)} is not the "
                     f"streamed {show(want)}", want, got)
                return


TOOL_CALL_BODY_CHECKS = (check_tool_call_index_unique, check_tool_call_body_agreement)
