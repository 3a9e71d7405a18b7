"""The ``diagnostics-event`` variant: the upstream vLLM adapter's answer to ``nnrp.diagnostics:
true``, a partial ``{"type": "response.diagnostics", "diagnostics": {...}}`` before the answer
(NagareWorks/vllm-nnrp-adapter, ``build_diagnostics_event``, declared under its non-critical
extension ``vllm.diagnostics``). The profile's texts disagree on where diagnostics go (§6 and
§11 against §7.1), so the suite sets the event aside and shows a recommendation
(``event.diagnostics-event``); a streamed or a non-streamed answer is otherwise judged as if it
had not been sent.
"""

from __future__ import annotations

import itertools
from typing import Final

from envelope import Plan, encode

DIAGNOSTICS_EVENT: Final = "diagnostics-event"


def add(variant: str | None, plan: Plan) -> Plan:
    """``plan`` with the diagnostics event first, when the request asked for diagnostics and
    the answer is a success (unchanged otherwise)."""
    answered = isinstance(plan.terminal, dict) and plan.terminal.get("type") == "response.completed"
    if variant != DIAGNOSTICS_EVENT or not plan.extra.get("diagnostics_asked") or not answered:
        return plan
    event = {"type": "response.diagnostics",
             "diagnostics": {"queue_ms": 0, "transport": "tcp", "request_id": plan.request_id}}
    plan.partials = itertools.chain((encode(event),), plan.partials)
    return plan
