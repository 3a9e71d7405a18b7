"""The one judge of the tool-call lifecycle: per call id, started first and once, deltas,
then exactly one completed or error, nothing after it, and completed.arguments equal to
the concatenated deltas when there were deltas.

Both the case verdicts (``checks.sequence.check_tool_calls``) and the release smoke (through
``checks.judge_recorded``) read this; nothing else restates it. Where the two former copies
disagreed (issue 14), the answer kept is:

* a call left open fails only before a **successful** terminal: a cancel or an error may
  end the operation mid-call (the smoke's copy failed every open call);
* ``completed.arguments`` is compared with the deltas only when the call had deltas: the
  deltas are optional, the full arguments on ``completed`` are not (the smoke's copy
  failed a call completed without deltas);
* a ``started`` that comes after other events of its call is a failure (the smoke's copy
  accepted it).

It also owns what a stream's calls amount to (:func:`streamed_calls`: id, name, the
arguments sent), which ``checks/tool_call_body.py`` holds a final body's tool calls to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nnrp_conformance import contract

__all__ = ["RULE_ARGUMENTS", "RULE_ORDER", "StreamedCall", "ToolCallProblem", "streamed_calls",
           "tool_call_problems"]

RULE_ORDER = "order.tool-call"
RULE_ARGUMENTS = "tool-call.arguments"


@dataclass(frozen=True)
class ToolCallProblem:
    rule: str
    message: str
    index: int | None
    expected: Any
    seen: Any


@dataclass(frozen=True)
class StreamedCall:
    """One completed call as the stream sent it: the arguments are its deltas joined, or
    ``completed.arguments`` when it had no deltas (``tool-call.arguments`` holds the two
    equal)."""

    call_id: Any  # a str when streamed; a body's call may have none
    name: Any
    arguments: Any


def _type(event: Any) -> str | None:
    return event.get("type") if isinstance(event, dict) else None


def tool_call_problems(seq: Sequence[Any], terminal_kind: str | None) -> list[ToolCallProblem]:
    """Every tool-call lifecycle problem of ``seq`` (partial events, then the terminal event)."""
    out: list[ToolCallProblem] = []
    calls: dict[str, dict[str, Any]] = {}
    for i, ev in enumerate(seq):
        typ = _type(ev)
        if typ not in contract.TOOL_CALL_EVENT_TYPES:
            continue
        cid = ev.get("call_id")
        if not isinstance(cid, str) or not cid:
            continue  # a schema violation, reported by event.schema
        state = calls.get(cid)
        if typ == contract.EV_TOOL_CALL_STARTED:
            if state is not None:
                what = "started twice" if state["started"] is not None else \
                    "started after other events of the call"
                out.append(ToolCallProblem(RULE_ORDER, f"call {cid!r} {what}", i,
                                           "started exactly once, first", typ))
                if state["started"] is None:
                    state["started"] = i
                continue
            calls[cid] = {"started": i, "args": [], "end": None}
            continue
        if state is None:
            out.append(ToolCallProblem(RULE_ORDER, f"{typ} for call {cid!r} before its "
                                       f"{contract.EV_TOOL_CALL_STARTED}", i,
                                       contract.EV_TOOL_CALL_STARTED, typ))
            state = calls[cid] = {"started": None, "args": [], "end": None}
        if state["end"] is not None:
            out.append(ToolCallProblem(RULE_ORDER, f"{typ} for call {cid!r} after the call "
                                       f"ended with {_type(seq[state['end']])} (event "
                                       f"#{state['end']})", i,
                                       "nothing after completed/error", typ))
            continue
        if typ == contract.EV_TOOL_CALL_DELTA:
            delta = ev.get("arguments_delta")
            state["args"].append(delta if isinstance(delta, str) else "")
            continue
        state["end"] = i
        if typ == contract.EV_TOOL_CALL_COMPLETED and state["args"]:
            joined = "".join(state["args"])
            if ev.get("arguments") != joined:
                out.append(ToolCallProblem(RULE_ARGUMENTS, f"call {cid!r}: completed.arguments "
                                           f"is not the concatenation of its arguments_delta "
                                           f"values", i, joined, ev.get("arguments")))
    if terminal_kind == contract.TERMINAL_SUCCESS:
        out += [ToolCallProblem(RULE_ORDER, f"call {cid!r} never ended: exactly one "
                                f"{contract.EV_TOOL_CALL_COMPLETED} or .error is required "
                                f"before a successful terminal", state["started"],
                                "completed or error", None)
                for cid, state in calls.items() if state["end"] is None]
    return out


def streamed_calls(seq: Sequence[Any]) -> list[StreamedCall] | None:
    """The calls of ``seq`` in the order they started, or None when what the calls amount
    to is unknown: a call ended in error or never completed, a malformed call id or delta
    (the lifecycle and schema rules report those)."""
    calls: dict[str, dict[str, Any]] = {}
    for ev in seq:
        typ = _type(ev)
        if typ not in contract.TOOL_CALL_EVENT_TYPES:
            continue
        cid = ev.get("call_id")
        if not isinstance(cid, str) or typ == contract.EV_TOOL_CALL_ERROR:
            return None
        call = calls.setdefault(cid, {"name": None, "parts": [], "done": None})
        if "name" in ev:
            call["name"] = ev["name"]
        if typ == contract.EV_TOOL_CALL_DELTA:
            call["parts"].append(ev.get("arguments_delta"))
        elif typ == contract.EV_TOOL_CALL_COMPLETED:
            call["done"] = ev.get("arguments")
    out = []
    for cid, call in calls.items():
        parts = call["parts"]
        if call["done"] is None or not all(isinstance(p, str) for p in parts):
            return None
        out.append(StreamedCall(cid, call["name"], "".join(parts) if parts else call["done"]))
    return out
