"""Checks on how an operation ends: exactly one terminal carrying its kind's own event
(``terminal.exactly-once``, ``terminal.kind``), of the kind the recipe expects (judged under
the recipe's ``terminal_rule``: authority.py), nothing after it
(``terminal.after``, ``cancel.late-event``), and the stream that never ended
(``timeout.silence``, ``timeout.no-terminal``, ``flood.max-events``)."""

from __future__ import annotations

from nnrp_conformance import authority, contract
from nnrp_conformance.checks.cancel import limit_that_ended
from nnrp_conformance.checks.context import Context, at, show, type_of
from nnrp_conformance.checks.exercise import KEY as NOT_EXERCISED


def check_terminal(ctx: Context) -> None:
    obs, seq = ctx.obs, ctx.seq
    for i, ev in enumerate(obs.events):
        if type_of(ev) in contract.TERMINAL_EVENT_TYPES:
            ctx.fail("terminal.exactly-once",
                     f"terminal event {type_of(ev)} arrived as a partial result; terminal events "
                     f"end the operation once, in its terminal — {at(seq, i)}",
                     index=i, expected="only non-terminal events in PARTIAL_RESULT",
                     seen=type_of(ev))
    term = obs.terminal_event
    if term is not None and type_of(term) not in contract.TERMINAL_EVENT_TYPES:
        what = ("tool-call events are never terminal"
                if type_of(term) in contract.TOOL_CALL_EVENT_TYPES
                else "a terminal carries response.completed, response.error or "
                     "response.cancelled")
        ctx.fail("terminal.kind", f"terminal result carries {type_of(term)!r}: {what} — "
                 f"{at(seq, len(obs.events))}", index=len(obs.events),
                 expected=list(contract.TERMINAL_EVENT_TYPES), seen=type_of(term))
    if obs.terminal_kind is None:
        if obs.timed_out or obs.extra.get("flooded"):
            return  # reported by the timeout / flood checks
        delivery = obs.extra.get("delivery") or "none"
        ctx.fail("terminal.exactly-once",
                 f"the operation ended without a terminal (delivery: {delivery}; "
                 f"{obs.extra.get('terminal_detail') or 'no detail'})",
                 expected=ctx.case.expected_terminal, seen=None)
        return
    expected = ctx.case.expected_terminal
    # a cancel never sent or crossed, a deadline never reached: the expected kind describes
    # what did not happen (checks/exercise.py), so it is not compared
    if obs.terminal_kind != expected and not obs.extra.get(NOT_EXERCISED):
        ctx.fail(authority.terminal_rule(ctx.case.expect),
                 f"terminal is {obs.terminal_kind!r}, the recipe expects "
                 f"{expected!r}" + (f" — {at(seq, len(obs.events))}" if term else ""),
                 index=obs.terminal_index, expected=expected, seen=obs.terminal_kind)
    if term is not None and type_of(term) in contract.TERMINAL_EVENT_TYPES:
        want = contract.TERMINAL_EVENT_FOR.get(obs.terminal_kind)
        if type_of(term) != want:
            ctx.fail("terminal.kind", f"a {obs.terminal_kind} terminal carries {type_of(term)}, "
                     f"which belongs to another terminal kind — {at(seq, len(obs.events))}",
                     index=len(obs.events), expected=want, seen=type_of(term))


def check_after_terminal(ctx: Context) -> None:
    late = ctx.obs.extra.get("late_events") or []
    cancelled = ctx.obs.cancelled_at_index is not None
    base = len(ctx.seq)
    for k, ev in enumerate(late):
        rule = "cancel.late-event" if cancelled else "terminal.after"
        ctx.fail(rule, f"{type_of(ev) or 'a result'} arrived after the terminal"
                 + (" of a cancelled operation" if cancelled else "")
                 + f": {show(ev)}", index=base + k, expected="nothing after the terminal",
                 seen=ev)
        if type_of(ev) == contract.EV_OUTPUT_TEXT_DELTA:
            ctx.fail("order.text-before-terminal", "a text delta arrived after the terminal",
                     index=base + k, seen=ev)


def check_timeout(ctx: Context) -> None:
    obs = ctx.obs
    if obs.extra.get("flooded"):
        ctx.fail("flood.max-events", f"more than {obs.extra.get('max_events')} events without a "
                 f"terminal; the suite cancelled the operation", expected=obs.extra.get(
                     "max_events"), seen=len(obs.events))
        return
    if obs.timed_out and obs.terminal_kind is None:
        if obs.cancelled_at_index is not None:
            return  # the cancel was sent: cancel.unanswered names the cause
        extra = obs.extra
        limit = limit_that_ended(extra)
        if not obs.events:
            ctx.fail("timeout.silence", f"no event and no terminal: {limit}",
                     expected="events then one terminal", seen="silence")
        else:
            last = extra.get("last_frame") or {}
            ctx.fail("timeout.no-terminal", f"{len(obs.events)} event(s), then no terminal: "
                     f"{limit} (last frame: {last.get('message_type')} at "
                     f"{last.get('after_submit_ms')} ms)", expected="one terminal",
                     seen=f"{len(obs.events)} events")
