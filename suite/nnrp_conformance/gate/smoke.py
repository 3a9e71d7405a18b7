"""The end-to-end smoke's event sequence, re-judged from the recorded events.

Owns only what is particular to the smoke: an answer that ended in an error never passes, a
success must carry content, and the smoke as a whole must include a streamed text answer.
Everything a recorded stream must meet as a profile answer (each event's schema, one terminal
and nothing after it, the terminal event agreeing with the recorded terminal, the tool-call
lifecycle, usage at most once, error bodies) is judged by the same checks as every case
(``checks.judge_recorded``), so the smoke and the verdicts cannot disagree on one stream.
The recorded ``outcome`` is never trusted alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.checks import judge_recorded

__all__ = ["sequence_problems", "smoke_problems"]


def sequence_problems(events: Any, terminal: str) -> list[str]:
    """Why ``events`` (with recorded ``terminal``) is not a profile-valid smoke answer.

    The case checks' findings (as text), then the smoke's own: a success must carry content
    (streamed text, a tool call, or a final chat completion); an error answer never passes.
    """
    if not isinstance(events, list) or not events:
        return ["no events recorded"]
    problems = [str(f) for f in judge_recorded(events, terminal)]
    if terminal == contract.TERMINAL_ERROR:
        problems.append("the smoke answer ended in an error")
    elif terminal == contract.TERMINAL_SUCCESS and not _has_content(events):
        problems.append(
            f"no content: no {contract.EV_OUTPUT_TEXT_DELTA}, no tool call and no chat "
            "completion body"
        )
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
