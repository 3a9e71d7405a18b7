"""Relations between fields: values that must agree with each other, not only with a schema.

Owns the relation checks (docs/verdicts.md#relations has the table: each relation, where it
comes from and its rule id). Each reads only the observed events of one operation:

* ``usage.arithmetic``: ``total_tokens`` is the sum of the two counts, in ``response.usage``
  (input + output) and in a chat completion body's ``usage`` (prompt + completion);
* ``usage.agreement``: the streamed ``response.usage`` and the final body's ``usage`` carry the
  same numbers (input = prompt, output = completion, total = total);
* ``text.agreement``: per output index, the concatenated ``output_text.delta`` texts equal the
  final body's ``choices[index].message.content`` when the body carries one;
* ``tool-call.identity``: one call's ``index``, ``item_id`` and ``name`` stay the same across
  its events.

Each check is called by ``checks.judge`` like every always-on check; nothing else judges these.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from nnrp_conformance import contract

if TYPE_CHECKING:
    from nnrp_conformance.checks import _Ctx

__all__ = ["RELATION_CHECKS"]

_SPEC = contract.SCHEMA_VERSION


def _type(event: Any) -> str | None:
    return event.get("type") if isinstance(event, dict) else None


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 300 else text[:300] + "…"


def _final_body(ctx: _Ctx) -> dict[str, Any] | None:
    term = ctx.obs.terminal_event
    body = term.get("body") if _type(term) == contract.EV_COMPLETED else None
    return body if isinstance(body, dict) and body.get("object") == "chat.completion" else None


def check_usage_arithmetic(ctx: _Ctx) -> None:
    spec = f"{_SPEC} §4 response.usage; OpenAI usage: total_tokens = prompt + completion"
    for i, ev in enumerate(ctx.seq):
        usage = ev.get("usage") if _type(ev) == contract.EV_USAGE else None
        if isinstance(usage, dict) and all(_int(usage.get(k)) for k in
                                           ("input_tokens", "output_tokens", "total_tokens")):
            want = usage["input_tokens"] + usage["output_tokens"]
            if usage["total_tokens"] != want:
                ctx.fail("usage.arithmetic", f"response.usage total_tokens "
                         f"{usage['total_tokens']} is not input_tokens + output_tokens ({want})"
                         f" — event #{i}: {_show(ev)}", index=i, expected=want,
                         seen=usage["total_tokens"], spec=spec)
    body = _final_body(ctx)
    usage = body.get("usage") if body else None
    if isinstance(usage, dict) and all(_int(usage.get(k)) for k in
                                       ("prompt_tokens", "completion_tokens", "total_tokens")):
        want = usage["prompt_tokens"] + usage["completion_tokens"]
        if usage["total_tokens"] != want:
            ctx.fail("usage.arithmetic", f"the completion body's usage.total_tokens "
                     f"{usage['total_tokens']} is not prompt_tokens + completion_tokens ({want})",
                     index=ctx.obs.terminal_index, expected=want, seen=usage["total_tokens"],
                     spec=spec)


def check_usage_agreement(ctx: _Ctx) -> None:
    streamed = [ev.get("usage") for ev in ctx.obs.events if _type(ev) == contract.EV_USAGE]
    body = _final_body(ctx)
    final = body.get("usage") if body else None
    if len(streamed) != 1 or not isinstance(streamed[0], dict) or not isinstance(final, dict):
        return  # nothing to compare (usage.at-most-once judges repeats)
    pairs = (("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens"),
             ("total_tokens", "total_tokens"))
    differ = {f"{a}/{b}": [streamed[0].get(a), final.get(b)] for a, b in pairs
              if _int(streamed[0].get(a)) and _int(final.get(b))
              and streamed[0].get(a) != final.get(b)}
    if differ:
        ctx.fail("usage.agreement", f"the streamed response.usage and the completion body's "
                 f"usage disagree: {differ} (streamed, body)", index=ctx.obs.terminal_index,
                 expected=streamed[0], seen=final,
                 spec=f"{_SPEC} §4 response.usage (the usage summary of the same operation)")


def check_text_agreement(ctx: _Ctx) -> None:
    body = _final_body(ctx)
    if body is None or ctx.obs.terminal_kind != contract.TERMINAL_SUCCESS:
        return
    if ctx.obs.cancelled_at_index is not None or ctx.obs.extra.get("flooded"):
        # after our cancel nnrp-py refuses the operation's queued partials (docs/verdicts.md
        # #cancel): the client cannot know the whole streamed text, so it judges none of it
        return
    texts: dict[Any, list[str]] = {}
    for ev in ctx.obs.events:
        if _type(ev) != contract.EV_OUTPUT_TEXT_DELTA:
            continue
        if not (isinstance(ev.get("delta"), str) and _int(ev.get("index"))):
            return  # a malformed delta (event.schema): the streamed text is unknown
        texts.setdefault(ev["index"], []).append(ev["delta"])
    if not texts:
        return  # a non-streaming answer, or a tool call: nothing streamed to compare
    for choice in body.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            continue
        streamed = "".join(texts.get(choice.get("index"), []))
        if streamed != content:
            ctx.fail("text.agreement", f"choice {choice.get('index')!r}: the streamed text "
                     f"({len(streamed)} chars) differs from the completion body's "
                     f"message.content ({len(content)} chars)", index=ctx.obs.terminal_index,
                     expected=streamed[:200], seen=content[:200],
                     spec=f"{_SPEC} §4 output_text.delta and response.completed (one answer, "
                     "two representations)")


def check_tool_call_identity(ctx: _Ctx) -> None:
    first: dict[str, tuple[int, dict[str, Any]]] = {}
    for i, ev in enumerate(ctx.seq):
        if _type(ev) not in contract.TOOL_CALL_EVENT_TYPES:
            continue
        call = ev.get("call_id")
        if not isinstance(call, str):
            continue
        if call not in first:
            first[call] = (i, ev)
            continue
        at, ref = first[call]
        for key in ("index", "item_id", "name"):
            if key in ev and key in ref and ev[key] != ref[key]:
                ctx.fail("tool-call.identity", f"call {call!r}: {key} {ev[key]!r} differs "
                         f"from {ref[key]!r} on its first event (#{at}) — event #{i}: "
                         f"{_show(ev)}", index=i, expected=ref[key], seen=ev[key],
                         spec=f"{_SPEC} §4 tool-call events (one call, one identity)")
                return


RELATION_CHECKS = (
    check_usage_arithmetic,
    check_usage_agreement,
    check_text_agreement,
    check_tool_call_identity,
)
