"""What a request's ``tool_choice`` asks of its answer: OpenAI's request semantics, which the
profile adopts for the body (design §6 names ``tool_choice`` among the familiar fields) without
restating them, so each rule is a recommendation (docs/generation.md#oracles):

* ``tool-choice.none``: ``"none"``: the answer calls no tool;
* ``tool-choice.named``: a named function: every call the answer makes is to that function;
* ``tool-choice.required``: ``"required"`` or a named function: an answer that finished on
  its own (a chat ``finish_reason`` of ``stop``, a Response whose status is ``completed``)
  holds a call. One cut short by its token limit (``length``, ``incomplete``) or of unknown
  finish is not judged.

The calls of an answer are its tool-call events, or, when it streamed none, a chat completion
body's ``message.tool_calls`` and a Response body's ``function_call`` output items. Only a successful
answer the client read whole is judged (not one cancelled by the suite or flooded). Called by
:func:`checks.judge` like every always-on check; nothing else judges these.
"""

from __future__ import annotations

from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.checks.context import Context, show, type_of
from nnrp_conformance.checks.tool_call_body import body_calls

__all__ = ["TOOL_CHOICE_CHECKS"]


def _asked(choice: Any) -> tuple[str, str | None] | None:
    """(``none`` / ``required`` / ``named``, the function's name) of a ``tool_choice``, chat's
    ``{"type": "function", "function": {"name": N}}`` and Responses' flat form alike."""
    if choice in ("none", "required"):
        return str(choice), None
    if isinstance(choice, dict) and choice.get("type") == "function":
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, dict) else choice.get("name")
        if isinstance(name, str) and name:
            return "named", name
    return None


def _calls(ctx: Context) -> list[Any]:
    """The names of the calls the answer made (None for a call without a name): the streamed
    calls when it streamed any, else its body's (a body that disagrees with its stream is
    ``tool-call.body-agreement``'s to judge)."""
    names = [ev.get("name") for ev in ctx.obs.events
             if type_of(ev) in contract.TOOL_CALL_EVENT_TYPES and "name" in ev]
    term = ctx.obs.terminal_event
    body = term.get("body") if type_of(term) == contract.EV_COMPLETED else None
    if names or not isinstance(body, dict):
        return names
    names = [call.name for call in body_calls(body)]
    for item in body.get("output") or ():
        if isinstance(item, dict) and item.get("type") == "function_call":
            names.append(item.get("name"))
    return names


def _finished_on_its_own(ctx: Context) -> bool:
    """The answer ended by itself, not at its token limit: a chat ``finish_reason`` of
    ``stop`` (body or OpenAI chunks), or a Response whose status is ``completed``."""
    term = ctx.obs.terminal_event
    body = term.get("body") if type_of(term) == contract.EV_COMPLETED else None
    reasons = []
    chunks = [ev.get("openai_chunk") for ev in ctx.obs.events]
    for holder in [body, *chunks]:
        for choice in (holder.get("choices") or ()) if isinstance(holder, dict) else ():
            if isinstance(choice, dict) and choice.get("finish_reason"):
                reasons.append(choice["finish_reason"])
    if reasons:
        return bool(reasons[-1] == "stop")
    return isinstance(body, dict) and body.get("object") == "response" \
        and body.get("status") == "completed"


def check_tool_choice(ctx: Context) -> None:
    asked = _asked(ctx.body.get("tool_choice"))
    obs = ctx.obs
    if asked is None or obs.terminal_kind != contract.TERMINAL_SUCCESS \
            or obs.cancelled_at_index is not None or obs.extra.get("flooded"):
        return
    kind, name = asked
    calls = _calls(ctx)
    if kind == "none" and calls:
        ctx.fail("tool-choice.none", f"tool_choice is 'none' but the answer calls "
                 f"{show(calls)}", index=obs.terminal_index, expected="no tool call",
                 seen=calls)
    elif kind == "named" and any(c != name for c in calls):
        ctx.fail("tool-choice.named", f"tool_choice names {name!r} but the answer calls "
                 f"{show(calls)}", index=obs.terminal_index, expected=f"calls to {name!r} only",
                 seen=calls)
    elif kind in ("required", "named") and not calls and _finished_on_its_own(ctx):
        ctx.fail("tool-choice.required", f"tool_choice is {ctx.body.get('tool_choice')!r} but "
                 "the answer, finished on its own, calls no tool", index=obs.terminal_index,
                 expected="a tool call", seen="no call")


TOOL_CHOICE_CHECKS = (check_tool_choice,)
