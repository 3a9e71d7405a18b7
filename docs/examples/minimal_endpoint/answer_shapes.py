"""Answer shapes of the minimal endpoint: conformant variants whose streamed answers are as short
as the profile allows, so a client's cancel has little or nothing to interrupt.

The profile fixes no stream length, and it leaves the in-band hint ``nnrp.cancel_after_events``
to the caller (these variants do not act on it). What a suite can judge of a cancel against them
is only what happened: a cancel after the answer ended was never sent, and a terminal the
endpoint sent before the cancel reached it crossed it (docs/verdicts.md#not-exercised).

* ``one-delta``: a streamed text answer is one text delta holding the whole text;
* ``one-frame``: a streamed answer sends no partial result, only its terminal
  (``response.completed`` with the whole body);
* ``ends-at-cancel``: one text delta like ``one-delta``, and everything after that delta, its
  terminal included, goes out at once, with no pause and no look for a cancel: a client that
  cancels after that delta sends its cancel as the terminal is already on its way.

Owns: :data:`SHAPES` (registered among the variants), :func:`reshape` (the plan of an answer)
and :func:`bursts` (whether the rest of an answer goes out at once).
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any, Final

from envelope import Plan, encode

SHAPES: Final = MappingProxyType({
    "one-delta": "a streamed text answer is one text delta (the whole text); the in-band hint "
                 "nnrp.cancel_after_events is not acted on",
    "one-frame": "a streamed answer sends no partial result, only its terminal "
                 "(response.completed with the whole body); the hint is not acted on",
    "ends-at-cancel": "a streamed text answer is one text delta, and everything after it, the "
                      "terminal included, goes out at once without looking for a cancel: it "
                      "finishes as a cancel after that delta is sent; the hint is not acted on",
})

_DELTA = "response.output_text.delta"
#: the key of ``Plan.extra`` that says after how many events the rest goes out at once
_BURST_AFTER = "burst_after"


def _one_delta(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` with each text's deltas merged into its first (same fields but the text)."""
    out: list[dict[str, Any]] = []
    first: dict[str, dict[str, Any]] = {}
    for ev in events:
        if ev.get("type") != _DELTA or not isinstance(ev.get("delta"), str):
            out.append(ev)
            continue
        key = json.dumps({k: v for k, v in ev.items() if k != "delta"}, sort_keys=True)
        if key in first:
            first[key]["delta"] += ev["delta"]
        else:
            first[key] = dict(ev)
            out.append(first[key])
    return out


def reshape(variant: str | None, plan: Plan) -> Plan:
    """The plan as the variant answers it (unchanged for other variants, and for answers that
    stream nothing: errors, non-streaming answers)."""
    if variant not in SHAPES:
        return plan
    partials = list(plan.partials)
    if not any(isinstance(p, bytes) for p in partials):
        return plan
    plan.cancel_after_events = None  # the hint is the caller's (upstream's own words)
    events = [json.loads(p) for p in partials if isinstance(p, bytes)]
    if variant == "one-frame":
        plan.partials = []
        return plan
    merged = _one_delta(events)
    plan.partials = [encode(ev) for ev in merged]
    if variant == "ends-at-cancel":
        first = next((i for i, ev in enumerate(merged) if ev.get("type") == _DELTA), None)
        plan.extra[_BURST_AFTER] = len(merged) if first is None else first + 1
    return plan


def bursts(plan: Plan, sent: int) -> bool:
    """Whether the rest of this answer goes out at once (``ends-at-cancel`` after its delta)."""
    after = plan.extra.get(_BURST_AFTER)
    return isinstance(after, int) and sent >= after
