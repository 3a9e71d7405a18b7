"""Relations between fields: values that must agree with each other, not only with a schema.

Owns the relation checks (docs/verdicts.md#relations has the table: each relation, where it
comes from and its rule id). Each reads only the observed events of one operation:

* ``usage.arithmetic``: ``total_tokens`` is the sum of the two counts, in ``response.usage``
  and a Response body's ``usage`` (input + output) and in a chat completion body's ``usage``
  (prompt + completion);
* ``usage.agreement``: the streamed ``response.usage`` and the final body's ``usage`` carry the
  same numbers (input = prompt, output = completion, total = total; a Response body uses the
  event's own names);
* ``text.agreement``: per output index, the concatenated ``output_text.delta`` texts equal the
  final body's text for it: ``choices[index].message.content`` of a chat completion, the
  ``output_text`` parts of a Response's message item ``output[index]``;
* ``tool-call.identity``: one call's ``index``, ``item_id`` and ``name`` stay the same across
  its events;
* ``completion.identity``: the OpenAI chunks an operation's events carry (``openai_chunk``) name
  one completion (the same ``id``, ``model`` and ``created``), and the final body is that
  completion (the same ``id`` and ``model``);
* ``finish-reason.tool-calls``: a choice that finished with ``tool_calls`` carries tool calls;
* ``usage.max-tokens``: the completion uses no more tokens than the request's limit allows;
* ``capability.behaviour``: the endpoint does only what its capability document says (no tool
  calls from an operation documented without them; answers name a model the document lists).

The tool-call relations ``tool-call.index-unique`` and ``tool-call.body-agreement`` are in
``checks/tool_call_body.py``.

Each check is called by :func:`checks.judge` (``checks/judge.py``) like every always-on
check; nothing else judges these.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from nnrp_conformance import contract
from nnrp_conformance.checks.context import (
    Context,
    chat_completion_body,
    show,
    type_of,
    usage_counts,
    usage_names,
)
from nnrp_conformance.checks.responses import response_body

__all__ = ["RELATION_CHECKS", "token_limit"]


def _int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def check_usage_arithmetic(ctx: Context) -> None:
    """total = input + output in every usage the endpoint sent (each ``response.usage``
    event, a Response body's, a completion body's), under either of the profile's name sets."""
    # (usage, event index, what it is, where it was seen)
    seen: list[tuple[Any, int | None, str, str]] = [
        (ev.get("usage"), i, "response.usage {}", f" — event #{i}: {show(ev)}")
        for i, ev in enumerate(ctx.seq) if type_of(ev) == contract.EV_USAGE]
    response = response_body(ctx)
    if response:
        seen.append((response.get("usage"), ctx.obs.terminal_index,
                     "the Response body's usage.{}", ""))
    body = chat_completion_body(ctx)
    if body:
        seen.append((body.get("usage"), ctx.obs.terminal_index,
                     "the completion body's usage.{}", ""))
    for usage, index, what, where in seen:
        names = usage_names(usage)
        if names is None:
            continue
        a, b, total = names
        want = usage[a] + usage[b]
        if usage[total] != want:
            ctx.fail("usage.arithmetic", f"{what.format(total)} {usage[total]} is not {a} + {b} "
                     f"({want}){where}", index=index, expected=want, seen=usage[total])


def check_usage_agreement(ctx: Context) -> None:
    streamed = [ev.get("usage") for ev in ctx.obs.events if type_of(ev) == contract.EV_USAGE]
    body = chat_completion_body(ctx) or response_body(ctx)
    final = body.get("usage") if body else None
    if len(streamed) != 1:
        return  # nothing to compare (usage.at-most-once judges repeats)
    ours, theirs = usage_counts(streamed[0]), usage_counts(final)
    if ours is None or theirs is None:
        return  # no counts on one side (usage.shape, or a body without usage)
    differ = {name: [a, b] for name, a, b in zip(("input", "output", "total"), ours, theirs,
                                                  strict=True) if a != b}
    if differ:
        ctx.fail("usage.agreement", f"the streamed response.usage and the final body's "
                 f"usage disagree: {differ} (streamed, body)", index=ctx.obs.terminal_index,
                 expected=streamed[0], seen=final)


def _final_texts(ctx: Context) -> dict[Any, str] | None:
    """Output index -> the final text of that output: a chat completion's
    ``choices[i].message.content``, or a Response's message item ``output[i]`` (its
    ``output_text`` parts joined)."""
    body = chat_completion_body(ctx)
    if body is not None:
        out: dict[Any, str] = {}
        for choice in body.get("choices") or ():
            message = choice.get("message") if isinstance(choice, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                out[choice.get("index")] = content
        return out
    response = response_body(ctx)
    if response is None or not isinstance(response.get("output"), list):
        return None
    out = {}
    for i, item in enumerate(response["output"]):
        if isinstance(item, dict) and item.get("type") == "message" \
                and isinstance(item.get("content"), list):
            out[i] = "".join(part.get("text", "") for part in item["content"]
                             if isinstance(part, dict) and part.get("type") == "output_text"
                             and isinstance(part.get("text"), str))
    return out


def check_text_agreement(ctx: Context) -> None:
    finals = _final_texts(ctx)
    if finals is None or ctx.obs.terminal_kind != contract.TERMINAL_SUCCESS:
        return
    if ctx.obs.cancelled_at_index is not None or ctx.obs.extra.get("flooded"):
        # after our cancel nnrp-py refuses the operation's queued partials (docs/verdicts.md
        # #cancel): the client cannot know the whole streamed text, so it judges none of it
        return
    texts: dict[Any, list[str]] = {}
    for ev in ctx.obs.events:
        if type_of(ev) != contract.EV_OUTPUT_TEXT_DELTA:
            continue
        if not (isinstance(ev.get("delta"), str) and _int(ev.get("index"))):
            return  # a malformed delta (event.schema): the streamed text is unknown
        texts.setdefault(ev["index"], []).append(ev["delta"])
    if not texts:
        return  # a non-streaming answer, or a tool call: nothing streamed to compare
    for index, content in finals.items():
        streamed = "".join(texts.get(index, []))
        if streamed != content:
            ctx.fail("text.agreement", f"output {index!r}: the streamed text "
                     f"({len(streamed)} chars) differs from the final body's text "
                     f"({len(content)} chars)", index=ctx.obs.terminal_index,
                     expected=streamed[:200], seen=content[:200])


def check_tool_call_identity(ctx: Context) -> None:
    first: dict[str, tuple[int, dict[str, Any]]] = {}
    for i, ev in enumerate(ctx.seq):
        if type_of(ev) not in contract.TOOL_CALL_EVENT_TYPES:
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
                         f"{show(ev)}", index=i, expected=ref[key], seen=ev[key])
                return


#: what one completion's chunks must share (OpenAI chat.completion.chunk: "each chunk has the
#: same ID", "each chunk has the same timestamp"); the final body must share the first two only:
#: an endpoint may stamp the body it assembles at its own clock
_CHUNK_IDENTITY = ("id", "model", "created")
_BODY_IDENTITY = ("id", "model")


def _chunks(ctx: Context) -> list[tuple[int, dict[str, Any]]]:
    return [(i, ev["openai_chunk"]) for i, ev in enumerate(ctx.seq)
            if isinstance(ev, dict) and isinstance(ev.get("openai_chunk"), dict)]


def check_completion_identity(ctx: Context) -> None:
    chunks = _chunks(ctx)
    if not chunks:
        return  # openai_chunk is optional (§7, §12): nothing to compare
    at, ref = chunks[0]
    for i, chunk in chunks[1:]:
        for key in _CHUNK_IDENTITY:
            if key in chunk and key in ref and chunk[key] != ref[key]:
                ctx.fail("completion.identity", f"openai_chunk {key} {chunk[key]!r} differs "
                         f"from {ref[key]!r} on the operation's first chunk (event #{at}) — "
                         f"event #{i}", index=i, expected=ref[key], seen=chunk[key])
                return
    body = chat_completion_body(ctx)
    for key in _BODY_IDENTITY if body is not None else ():
        if body is not None and key in body and key in ref and body[key] != ref[key]:
            ctx.fail("completion.identity", f"the completion body's {key} {body[key]!r} is "
                     f"not the streamed chunks' {ref[key]!r} (one completion, one {key})",
                     index=ctx.obs.terminal_index, expected=ref[key], seen=body[key])
            return


def check_finish_reason_tool_calls(ctx: Context) -> None:
    body = chat_completion_body(ctx)
    for choice in (body.get("choices") or ()) if body else ():
        if not isinstance(choice, dict) or choice.get("finish_reason") != "tool_calls":
            continue
        message = choice.get("message")
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if not (isinstance(calls, list) and calls):
            # the converse does not hold: with a forced tool_choice OpenAI and vLLM finish
            # with "stop" and carry the call
            ctx.fail("finish-reason.tool-calls", f"choice {choice.get('index')!r} finished "
                     f"with 'tool_calls' but its message carries no tool_calls: "
                     f"{show(message)}", index=ctx.obs.terminal_index,
                     expected="a non-empty message.tool_calls", seen=calls)
            return


def token_limit(request: dict[str, Any]) -> int | None:
    """The request's completion-token limit for all its choices, or None when it sets none.
    ``max_completion_tokens`` supersedes the deprecated ``max_tokens`` (OpenAI, and vLLM's
    ``max_completion_tokens or max_tokens``); the limit is per choice."""
    limit = request.get("max_completion_tokens")
    if not (_int(limit) and limit > 0):
        limit = request.get("max_tokens")
    if not (_int(limit) and limit > 0):
        return None
    n = request.get("n", 1)
    return limit * n if _int(n) and n >= 1 else None


def check_usage_max_tokens(ctx: Context) -> None:
    # Only the bound: a choice may end with "length" under the limit (vLLM clamps the limit to
    # the model's remaining context), and with "stop" at it (an end-of-text as last token).
    limit = token_limit(ctx.body)
    if limit is None:
        return
    body = chat_completion_body(ctx)
    counts = [(ev.get("usage") or {}).get("output_tokens", None) for ev in ctx.obs.events
              if type_of(ev) == contract.EV_USAGE and isinstance(ev.get("usage"), dict)]
    if body and isinstance(body.get("usage"), dict):
        counts.append(body["usage"].get("completion_tokens"))
    for count in counts:
        if _int(count) and count > limit:
            ctx.fail("usage.max-tokens", f"the completion used {count} tokens, over the "
                     f"request's limit of {limit} (max_completion_tokens / max_tokens × n)",
                     index=ctx.obs.terminal_index, expected=f"<= {limit}", seen=count)
            return


def _doc_operation(doc: dict[str, Any], name: str) -> dict[str, Any] | None:
    for op in doc.get("operations") or ():
        if isinstance(op, dict) and op.get("name") == name:
            return op
    return None


def check_capability_behaviour(ctx: Context) -> None:
    doc = ctx.capability_document
    if not isinstance(doc, dict):
        return  # no document to hold the endpoint to (capability.* judges its absence)
    entry = _doc_operation(doc, ctx.case.operation)
    if entry is not None and entry.get("tool_calls") is False:
        for i, ev in enumerate(ctx.seq):
            if type_of(ev) in contract.TOOL_CALL_EVENT_TYPES:
                ctx.fail("capability.behaviour", f"{ctx.case.operation} streamed a tool call "
                         f"though the capability document says tool_calls: false — event "
                         f"#{i}: {show(ev)}", index=i, expected="no tool-call events",
                         seen=type_of(ev))
                return
    models: set[str] = {m["id"] for m in doc.get("models") or ()
                        if isinstance(m, dict) and isinstance(m.get("id"), str)}
    if not models or ctx.obs.terminal_kind != contract.TERMINAL_SUCCESS:
        return
    body = chat_completion_body(ctx) or response_body(ctx)
    named: list[tuple[int | None, Any]] = (
        [(ctx.obs.terminal_index, body.get("model"))] if body else []
    )
    named += [(i, chunk.get("model")) for i, chunk in _chunks(ctx)]
    for where, model in named:
        if isinstance(model, str) and model not in models:
            ctx.fail("capability.behaviour", f"the answer names model {model!r}, which the "
                     f"capability document does not list ({sorted(models)})", index=where,
                     expected=sorted(models), seen=model)
            return


RELATION_CHECKS = (
    check_usage_arithmetic,
    check_usage_agreement,
    check_text_agreement,
    check_tool_call_identity,
    check_completion_identity,
    check_finish_reason_tool_calls,
    check_usage_max_tokens,
    check_capability_behaviour,
)
