"""The end-to-end smoke's event sequence, re-judged from the recorded events.

Owns the rules a recorded smoke answer must meet to count as profile-valid: every event
meets its schema, at most one terminal event and nothing after it, the terminal event
agrees with the recorded terminal, the answer succeeded with at least one text delta, and
each tool call follows its lifecycle. The recorded ``outcome`` is never trusted alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nnrp_conformance import contract, validation

__all__ = ["sequence_problems"]


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
    """Why ``events`` (with recorded ``terminal``) is not a profile-valid successful answer."""
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
    if terminal != contract.TERMINAL_SUCCESS:
        problems.append(f"the smoke must end in success, it ended in {terminal!r}")
    if contract.EV_OUTPUT_TEXT_DELTA not in kinds:
        problems.append(f"no {contract.EV_OUTPUT_TEXT_DELTA} event")
    problems += _tool_call_problems(events)
    return problems
