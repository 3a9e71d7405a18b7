"""Level 2 checks: the output-item lifecycle of a ``responses.create`` stream and its final
Response object (docs/levels.md#level2-events).

Rule ids: ``output-item.lifecycle`` (each output index added once, before its deltas, done
once after them, indexes from 0 in order, deltas naming their item), ``output-item.tool-call``
(a function-call item's ``tool_call.*`` events carry its call id and name, and the done item's
arguments are the call's completed ones), ``responses.body`` (the terminal body is an OpenAI Response object whose
output items are the streamed ones), ``responses.final-body`` (this project's choice: a
successful Responses operation ends with ``response.completed`` and its body, never an empty
``RESULT_PUSH``), ``responses.usage-event`` (this project's choice: a successful stream sends
``response.usage``). Usage and text agreement with the body are the relations' own rules
(``checks/relations.py``), judged there for both operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.checks.context import Context, at, show, type_of

__all__ = ["RESPONSES_CHECKS", "response_body"]

_LEVELS = "docs/levels.md#level2-events"
_ITEM_DELTAS = (contract.EV_OUTPUT_TEXT_DELTA, contract.EV_REASONING_TEXT_DELTA,
                *contract.TOOL_CALL_EVENT_TYPES)
RESPONSE_STATUSES = ("completed", "incomplete")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def response_body(ctx: Context) -> dict[str, Any] | None:
    """The Response object a successful ``responses.create`` ended with, or None."""
    term = ctx.obs.terminal_event
    body = term.get("body") if type_of(term) == contract.EV_COMPLETED else None
    return body if isinstance(body, dict) and body.get("object") == "response" else None


def _applies(ctx: Context) -> bool:
    return ctx.case.operation == contract.OP_RESPONSES_CREATE


def _stream_incomplete(ctx: Context) -> bool:
    """After our cancel nnrp-py refuses the operation's queued partials (docs/verdicts.md
    #cancel), and a flood is cut short: the client does not know the whole stream, so nothing
    is judged for being absent from it (what did arrive is still judged)."""
    return ctx.obs.cancelled_at_index is not None or bool(ctx.obs.extra.get("flooded"))


@dataclass
class _Item:
    output_index: int
    id: str
    type: str
    item: dict[str, Any]
    added_at: int
    done_at: int | None = None
    done_item: dict[str, Any] | None = None


def _streamed_items(ctx: Context) -> dict[int, _Item]:
    """The output items as the stream announced them (well-formed ``added`` events only)."""
    items: dict[int, _Item] = {}
    for i, ev in enumerate(ctx.obs.events):
        if type_of(ev) != contract.EV_OUTPUT_ITEM_ADDED:
            continue
        oi, item = ev.get("output_index"), ev.get("item")
        if _int(oi) and isinstance(item, dict) and isinstance(item.get("id"), str) \
                and oi not in items:
            items[oi] = _Item(oi, item["id"], str(item.get("type")), item, i)
    return items


def check_output_items(ctx: Context) -> None:
    """The item lifecycle, judged only when the stream has item events: they are this
    project's reading of OpenAI's Responses stream, outside the profile's event table (whose
    §7.1 calls an event shape outside the profile a stream error), so their absence is
    never recommended against."""
    if not _applies(ctx) or not any(
            type_of(ev) in (contract.EV_OUTPUT_ITEM_ADDED, contract.EV_OUTPUT_ITEM_DONE)
            for ev in ctx.obs.events):
        return
    seq = ctx.seq
    rule = "output-item.lifecycle"
    items: dict[int, _Item] = {}
    expected_next = 0
    for i, ev in enumerate(ctx.obs.events):
        kind = type_of(ev)
        if kind == contract.EV_OUTPUT_ITEM_ADDED:
            oi, item = ev.get("output_index"), ev.get("item")
            if not (_int(oi) and isinstance(item, dict) and isinstance(item.get("id"), str)):
                continue  # event.schema judges the shape
            if oi in items:
                ctx.fail(rule, f"output_index {oi} is added a second time (first at event "
                         f"#{items[oi].added_at}) — {at(seq, i)}", index=i, expected=1,
                         seen=2)
                return
            if oi != expected_next:
                ctx.fail(rule, f"output_index {oi} is added where {expected_next} comes next "
                         f"(indexes start at 0 and rise by one) — {at(seq, i)}", index=i,
                         expected=expected_next, seen=oi)
                return
            items[oi] = _Item(oi, item["id"], str(item.get("type")), item, i)
            expected_next = oi + 1
        elif kind == contract.EV_OUTPUT_ITEM_DONE:
            oi, item = ev.get("output_index"), ev.get("item")
            if not (_int(oi) and isinstance(item, dict)):
                continue
            st = items.get(oi)
            problem = (f"output_index {oi} is done without being added" if st is None
                       else f"output_index {oi} is done a second time" if st.done_at is not None
                       else f"output_index {oi} is done as item {item.get('id')!r}, added as "
                       f"{st.id!r}" if item.get("id") != st.id else None)
            if problem:
                ctx.fail(rule, f"{problem} — {at(seq, i)}", index=i,
                         expected=st.id if st else "an added item", seen=item.get("id"))
                return
            assert st is not None
            st.done_at, st.done_item = i, item
        elif kind in _ITEM_DELTAS:
            oi, item_id = ev.get("index"), ev.get("item_id")
            st = items.get(oi) if _int(oi) else None
            if st is None or st.done_at is not None:
                state = "never added" if st is None else f"done at event #{st.done_at}"
                ctx.fail(rule, f"a {kind} for output_index {oi!r}, which is {state} (an item's "
                         f"deltas come between its added and its done) — {at(seq, i)}",
                         index=i, expected="an open output item", seen=oi)
                return
            if item_id != st.id:
                ctx.fail(rule, f"a {kind} names item_id {item_id!r}; output_index {oi} is item "
                         f"{st.id!r} — {at(seq, i)}", index=i, expected=st.id, seen=item_id)
                return
    if ctx.obs.terminal_kind == contract.TERMINAL_SUCCESS and not _stream_incomplete(ctx):
        for st in items.values():
            if st.done_at is None:
                ctx.fail(rule, f"output_index {st.output_index} (item {st.id!r}) is never done "
                         f"before the successful terminal", index=ctx.obs.terminal_index,
                         expected=contract.EV_OUTPUT_ITEM_DONE, seen=None)
                return
    _check_function_call_items(ctx, items)


def _check_function_call_items(ctx: Context, items: dict[int, _Item]) -> None:
    seq = ctx.seq
    rule = "output-item.tool-call"
    completed: dict[int, str] = {}
    for i, ev in enumerate(ctx.obs.events):
        if type_of(ev) not in contract.TOOL_CALL_EVENT_TYPES:
            continue
        st = items.get(ev.get("index")) if _int(ev.get("index")) else None
        if st is None or st.type != "function_call":
            if st is not None:
                ctx.fail(rule, f"a {type_of(ev)} on output_index {st.output_index}, a "
                         f"{st.type!r} item, not a function_call — {at(seq, i)}", index=i,
                         expected="function_call", seen=st.type)
                return
            continue
        for key in ("call_id", "name"):
            if key in ev and key in st.item and ev[key] != st.item[key]:
                ctx.fail(rule, f"a {type_of(ev)} carries {key} {ev[key]!r}; its function_call "
                         f"item says {st.item[key]!r} — {at(seq, i)}", index=i,
                         expected=st.item[key], seen=ev[key])
                return
        if type_of(ev) == contract.EV_TOOL_CALL_COMPLETED and isinstance(ev.get("arguments"), str):
            completed[st.output_index] = ev["arguments"]
    # the completed event's arguments are the deltas' concatenation (tool_calls.py judges that)
    for oi, arguments in completed.items():
        done = items[oi].done_item
        final = done.get("arguments") if isinstance(done, dict) else None
        if isinstance(final, str) and final != arguments:
            ctx.fail(rule, f"output_index {oi}: the done item's arguments differ from the "
                     f"call's response.tool_call.completed arguments", index=items[oi].done_at,
                     expected=arguments[:200], seen=final[:200])
            return


def _response_problems(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return [f"body must be an object, seen {show(body)}"]
    problems = []
    if not (isinstance(body.get("id"), str) and body["id"]):
        problems.append("body.id must be a non-empty string")
    if body.get("object") != "response":
        problems.append(f"body.object must be 'response', seen {show(body.get('object'))}")
    if body.get("status") not in RESPONSE_STATUSES:
        problems.append(f"body.status must be one of {list(RESPONSE_STATUSES)} on success, "
                        f"seen {show(body.get('status'))}")
    output = body.get("output")
    if not isinstance(output, list):
        problems.append("body.output must be an array of output items")
    else:
        for n, item in enumerate(output):
            if not (isinstance(item, dict) and isinstance(item.get("id"), str)
                    and isinstance(item.get("type"), str)):
                problems.append(f"body.output[{n}] must be an item with a string id and type")
    if not isinstance(body.get("usage"), dict):
        # its counts are this suite's recommendation (usage.shape, checks/sequence.py)
        problems.append("body.usage must be an object")
    if not (isinstance(body.get("model"), str) and body["model"]):
        problems.append("body.model must be a non-empty string")
    return problems


def check_response_body(ctx: Context) -> None:
    if not _applies(ctx) or ctx.obs.terminal_kind != contract.TERMINAL_SUCCESS:
        return
    term = ctx.obs.terminal_event
    where = ctx.obs.terminal_index
    if type_of(term) != contract.EV_COMPLETED or "body" not in term:
        ctx.fail("responses.final-body", "a successful responses.create must end with "
                 "response.completed carrying the Response object (an empty RESULT_PUSH "
                 "leaves the client without status, output and usage)", index=where,
                 expected=f"{contract.EV_COMPLETED} {{body}}", seen=type_of(term))
        return
    problems = _response_problems(term["body"])
    if problems:
        ctx.fail("responses.body", "the terminal body is not an OpenAI Response object: "
                 + "; ".join(problems), index=where,
                 expected="{id, object: response, status, output[], usage, model}",
                 seen=term["body"])
        return
    output = term["body"]["output"]
    for oi, st in sorted(_streamed_items(ctx).items()):  # items that arrived: judged even so
        seen = output[oi].get("id") if oi < len(output) else None
        if seen != st.id:
            ctx.fail("responses.body", f"the stream's output item {oi} is {st.id!r}; the "
                     f"Response body's output[{oi}] is {seen!r} (one response, one list of "
                     f"items)", index=where, expected=st.id, seen=seen)
            return


def check_usage_event(ctx: Context) -> None:
    if not _applies(ctx) or ctx.body.get("stream") is not True \
            or ctx.obs.terminal_kind != contract.TERMINAL_SUCCESS or _stream_incomplete(ctx):
        return
    if not any(type_of(ev) == contract.EV_USAGE for ev in ctx.obs.events):
        ctx.fail("responses.usage-event", "a successful Responses stream sent no "
                 "response.usage before its terminal", index=ctx.obs.terminal_index,
                 expected=contract.EV_USAGE, seen=None)


RESPONSES_CHECKS = (check_output_items, check_response_body, check_usage_event)
