"""Checks on cancellation: the endpoint itself answered the cancel (``cancel.unanswered``), the
in-band hint was honoured (``cancel.hint``) and the reason is a recommended one
(``cancel.reason``). A cancel never sent, or crossed by the endpoint's terminal, is
``checks/exercise.py``'s: such a case judges nothing about cancellation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.checks.context import Context, at, type_of


def limit_that_ended(extra: Mapping[str, Any]) -> str:
    """The client limit that ended a case without a terminal, as a message says it: the idle
    limit (nothing from the endpoint for that long) or the case limit."""
    if extra.get("expired_by") == "idle":
        return f"the idle limit ended the case ({extra.get('idle_timeout_s')}s with nothing " \
               "from the endpoint)"
    return f"the case limit ended the case ({extra.get('timeout_s')}s)"


def check_cancel(ctx: Context) -> None:
    case, obs = ctx.case, ctx.obs
    if obs.cancelled_at_index is not None and obs.terminal_kind is None \
            and not obs.extra.get("flooded"):
        # Only the endpoint's own terminal answers a cancel: a drop or a push with
        # response.cancelled. nnrp-py's local lifecycle CANCELLED is ours, not proof.
        local = " (the client's local lifecycle CANCELLED is not the endpoint's answer)" \
            if obs.extra.get("local_cancelled") else ""
        ctx.fail("cancel.unanswered", "the server never answered the cancel: no "
                 "RESULT_DROP_REASON and no response.cancelled for the frame before "
                 f"{limit_that_ended(obs.extra)}{local}",
                 expected="the endpoint's terminal for the cancelled frame",
                 seen=obs.extra.get("delivery") or "nothing")
    nnrp = case.envelope.get("nnrp") if isinstance(case.envelope, dict) else None
    hint = nnrp.get("cancel_after_events") if isinstance(nnrp, dict) else None
    if isinstance(hint, int) and case.expected_terminal == contract.TERMINAL_CANCELLED \
            and obs.terminal_kind == contract.TERMINAL_CANCELLED:
        emitted = [e for e in obs.events if type_of(e) not in contract.TERMINAL_EVENT_TYPES]
        if len(emitted) > hint:
            ctx.fail("cancel.hint", f"the endpoint emitted {len(emitted)} events although "
                     f"nnrp.cancel_after_events is {hint}", index=hint, expected=hint,
                     seen=len(emitted))


def check_cancel_reason(ctx: Context) -> None:
    for i, ev in enumerate(ctx.seq):
        if type_of(ev) != contract.EV_CANCELLED:
            continue
        reason = ev.get("reason")
        if isinstance(reason, str) and reason not in contract.CANCEL_SOURCES:
            ctx.fail("cancel.reason", f"response.cancelled.reason {reason!r} is outside the "
                     f"recommended reasons — {at(ctx.seq, i)}", index=i,
                     expected=list(contract.CANCEL_SOURCES), seen=reason)
