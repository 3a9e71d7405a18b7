"""The end-to-end smoke's event sequence, re-judged from the recorded events.

Owns the rules a recorded smoke answer must meet to count as profile-valid: every event
meets its schema, at most one terminal event and nothing after it, the terminal event
agrees with the recorded terminal, each answer carries what its terminal promises (content
for a success, ``response.cancelled`` for a cancel; an error never passes), each tool call
follows its lifecycle, and the smoke as a whole includes a streamed text answer. The recorded ``outcome`` is never trusted alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nnrp_conformance import contract, validation

__all__ = ["sequence_problems", "smoke_problems"]


def _tool_call_problems(events: Sequence[Mapping[str, Any]]) -> list[str]:
    problems: list[str] = []
    started: dict[str, int] = {}
    deltas: dict[str, list[str]] = {}
    closed: set[str] = set()
    for i, ev in enumerate(events):
        kind, call = ev.get("type"), ev.get("call_id")
        if kind not in contract.TOOL_CALL_EVENT_TYPES or not isinstance(call, str):
            continue
        if call in closed:
            problems.append(f"event #{i}: {kind} for tool call {call!r} after it was closed")
            continue
        if kind == contract.EV_TOOL_CALL_STARTED:
            if call in started:
                problems.append(f"event #{i}: tool call {call!r} started twice")
            started[call] = i
            continue
        if call not in started:
            problems.append(f"event #{i}: {kind} for tool call {call!r} before its started event")
            continue
        if kind == contract.EV_TOOL_CALL_DELTA:
            deltas.setdefault(call, []).append(str(ev.get("arguments_delta", "")))
            continue
        closed.add(call)
        joined = "".join(deltas.get(call, []))
        if kind == contract.EV_TOOL_CALL_COMPLETED and ev.get("arguments") != joined:
            problems.append(
                f"event #{i}: tool call {call!r} arguments differ from its concatenated deltas"
            )
    problems += [
        f"tool call {call!r} (started at event #{at}) never completed"
        for call, at in started.items()
        if call not in closed
    ]
    return problems


def sequence_problems(events: Any, terminal: str) -> list[str]:
    """Why ``events`` (with recorded ``terminal``) is not a profile-valid answer.

    A success must carry content: streamed text, a tool call, or a final chat completion
    (non-streaming). A cancellation must end in ``response.cancelled`` when it carries a
    terminal event. An error answer is never a passing smoke.
    """
    if not isinstance(events, list) or not events:
        return ["no events recorded"]
    problems: list[str] = []
    for i, ev in enumerate(events):
        problems += [f"event #{i}: {v}" for v in validation.validate_event(ev)]
    if problems:
        return problems
    kinds = [ev["type"] for ev in events]
    terminals = [i for i, k in enumerate(kinds) if k in contract.TERMINAL_EVENT_TYPES]
    if len(terminals) > 1:
        problems.append(f"{len(terminals)} terminal events (at #{terminals}); exactly one allowed")
    if terminals and terminals[0] != len(kinds) - 1:
        problems.append(f"events after the terminal event #{terminals[0]} ({kinds[terminals[0]]})")
    if terminals:
        expected = contract.TERMINAL_EVENT_FOR.get(terminal)
        if kinds[terminals[-1]] != expected:
            problems.append(
                f"terminal {terminal!r} recorded, but the terminal event is {kinds[terminals[-1]]}"
            )
    if terminal == contract.TERMINAL_ERROR:
        problems.append("the smoke answer ended in an error")
    elif terminal == contract.TERMINAL_SUCCESS and not _has_content(events):
        problems.append(
            f"no content: no {contract.EV_OUTPUT_TEXT_DELTA}, no tool call and no chat "
            "completion body"
        )
    problems += _tool_call_problems(events)
    return problems


def _has_content(events: Sequence[Mapping[str, Any]]) -> bool:
    for ev in events:
        kind = ev.get("type")
        if kind == contract.EV_OUTPUT_TEXT_DELTA or kind in contract.TOOL_CALL_EVENT_TYPES:
            return True
        body = ev.get("body") if kind == contract.EV_COMPLETED else None
        if isinstance(body, Mapping) and body.get("object") == "chat.completion":
            return True
    return False


def smoke_problems(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the smoke as a whole lacks: it must include a streamed text answer."""
    for r in results:
        events = r.get("events")
        if r.get("terminal") == contract.TERMINAL_SUCCESS and isinstance(events, list) and any(
            isinstance(e, Mapping) and e.get("type") == contract.EV_OUTPUT_TEXT_DELTA
            for e in events
        ):
            return []
    return [f"no successful streamed answer with a {contract.EV_OUTPUT_TEXT_DELTA} in the smoke"]
