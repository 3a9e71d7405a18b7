"""Whether a case exercised what it is about (docs/verdicts.md#not-exercised).

A cancel case tests cancellation only when the endpoint could have seen the cancel: the cancel
was sent, and the endpoint's terminal did not cross it on the wire. A recipe with
``nnrp.timeout_ms`` that expects the deadline to end the operation (a terminal other than
success) tests it only when the deadline could have expired. When the
exercise did not happen, the recipe's expectations about it (the terminal kind it expects,
its ``expect.events``, a crossing terminal's ``wire.result_after_cancel``)
judge nothing; everything else about the stream (event shapes, order, one terminal, nothing
after it) is judged as in any case and can still fail it. A case with nothing failed is then
``skipped`` with the verdict ``not-exercised`` (``checks.model.verdict_of``, from the note).

Owns: :func:`why_not_exercised` (what the client can know about it, from the frames the
endpoint sent and the one-sided bound of the client's own clock), the note that says so, and
where a generated case's next attempt cancels (:func:`smaller_cancel_point`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nnrp_conformance import contract
from nnrp_conformance.checks.model import Observation

if TYPE_CHECKING:
    from nnrp_conformance.checks.context import Context

__all__ = ["CANCEL_MISSES", "EXERCISE_RULES", "IN_FLIGHT_FRAMES", "cancel_point",
           "frames_after_cancel", "in_flight_only", "judge_not_exercised",
           "smaller_cancel_point", "why_not_exercised"]

#: the key of ``Observation.extra`` that holds why the exercise did not happen
KEY = "not_exercised"
#: the key of ``Observation.extra`` that holds how many earlier attempts of this case ended in
#: an error right after the cancel (runner.py sets it on the last attempt)
REPEATED_ERRORS = "errors_after_cancel_before"
#: the rules whose outcome depends on the exercise having happened: their findings are dropped
#: from a case that was not exercised (the recipe's expected events are not checked at all,
#: checks/judge.py, and the comparison with the expected terminal kind is skipped at its
#: source, checks/terminal.py; the terminal's other findings are the stream's own)
EXERCISE_RULES = frozenset({"wire.result_after_cancel", "timeout.total-deadline"})
#: The frames of an operation an endpoint may send after a client's cancel before it observes
#: the cancel: a count of what the endpoint sent, not a time. An endpoint observes a cancel
#: at its own pace (the example endpoint every 4 events; a server re-polling every 10 ms left
#: 111 stale frames in the nnrp-py notes, docs/verdicts.md#cancel); what follows a cancel within
#: this many frames is in flight, and only an endpoint that sent more ran on after the cancel.
IN_FLIGHT_FRAMES = 256
#: the finding of a partial result handed over after the cancel: in flight within the count
_IN_FLIGHT_RULES = frozenset({"wire.partial_after_cancel"})
#: the informational note that says why, by kind (rulebook; checks.model.NOT_EXERCISED_NOTES)
NOTES = {"never-sent": "cancel.not-sent", "crossed": "cancel.crossed",
         "deadline-not-reached": "timeout.not-reached"}


def cancel_point(case: Any, obs: Observation) -> int | None:
    """The number of events after which the client cancels in this attempt: the recipe's,
    unless the runner moved it for a generated case (``extra["cancel_after"]``)."""
    moved = obs.extra.get("cancel_after")
    return moved if isinstance(moved, int) else getattr(case, "cancel_after_events", None)


def _deadline_ms(case: Any) -> int | None:
    envelope = getattr(case, "envelope", None)
    nnrp = envelope.get("nnrp") if isinstance(envelope, dict) else None
    value = nnrp.get("timeout_ms") if isinstance(nnrp, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


def _cancel_not_exercised(case: Any, obs: Observation) -> tuple[str, str] | None:
    after = cancel_point(case, obs)
    if after is None or obs.terminal_kind in (None, contract.TERMINAL_CANCELLED):
        # no cancel asked for; no terminal (cancel.unanswered / timeout judge it); or the
        # endpoint ended the operation cancelled, answering the cancel or acting on a hint
        return None
    n = len(obs.events)
    if obs.cancelled_at_index is None:
        return "never-sent", (f"the answer ended after {n} event(s), before the cancel point "
                              f"({after}): the cancel was never sent")
    cancel = obs.extra.get("cancel") or {}
    if cancel.get("ended_before_cancel"):
        return "never-sent", ("the endpoint's terminal was already in the client's receive "
                              "queue when the cancel was due: the cancel was not sent")
    more = frames_after_cancel(obs)
    if obs.terminal_kind == contract.TERMINAL_ERROR and obs.extra.get(REPEATED_ERRORS):
        # a success crosses a cancel because the answer was complete, whenever the cancel
        # comes; an error at the cancel in every attempt is no coincidence but the endpoint's
        # answer to the cancel, and is judged (the kind it expects is cancelled)
        return None
    if more <= IN_FLIGHT_FRAMES:
        # Nothing the client receives says when the endpoint observed the cancel (no
        # acknowledgement exists but a cancelled terminal): a terminal after at most this many
        # frames may have been sent before it did, and then it crossed the cancel on the wire
        point = "right after the submit" if after == 0 else f"after {after} event(s)"
        return "crossed", (f"the endpoint's {obs.terminal_kind} terminal came {more} frame(s) "
                           f"after the cancel ({point}; at most {IN_FLIGHT_FRAMES} can be in "
                           "flight before an endpoint observes a cancel): it may have crossed "
                           "the cancel on the wire")
    return None


def frames_after_cancel(obs: Observation) -> int:
    """The endpoint's frames of the operation that reached the client after its cancel went
    out: partial results handed over, and frames nnrp-py refused as stale (runner.py)."""
    cancel = obs.extra.get("cancel") or {}
    return int(obs.extra.get("events_after_cancel") or 0) + int(
        cancel.get("stale_frames_after_cancel") or 0)


def in_flight_only(obs: Observation) -> bool:
    """Whether a cancel went out and the endpoint sent no more after it than can be in flight
    before it observes one (:data:`IN_FLIGHT_FRAMES`)."""
    return obs.cancelled_at_index is not None and not (obs.extra.get("cancel") or {}).get(
        "ended_before_cancel") and frames_after_cancel(obs) <= IN_FLIGHT_FRAMES


def _deadline_not_reached(case: Any, obs: Observation) -> tuple[str, str] | None:
    deadline = _deadline_ms(case)
    took = obs.extra.get("submit_to_terminal_ms")
    if deadline is None or obs.terminal_kind is None or not isinstance(took, int | float) \
            or getattr(case, "expected_terminal", None) == contract.TERMINAL_SUCCESS \
            or getattr(case, "cancel_after_events", None) is not None:
        # a recipe that expects a success is not about its deadline, nor is one the client
        # cancels (its cancel is what it exercises: a generated sequence sent with §6's
        # example hints, timeout_ms 30000, is judged on its cancel)
        return None
    if took >= deadline:
        return None
    # one-sided: the client's submit-to-terminal includes both transits, so the endpoint's own
    # time from the request to its terminal was shorter still: its deadline never expired
    return "deadline-not-reached", (f"the endpoint's terminal arrived {took:.1f} ms after the "
                                    f"submit, before nnrp.timeout_ms ({deadline} ms) could "
                                    "expire: the deadline was never reached")


def why_not_exercised(case: Any, obs: Observation) -> tuple[str, str] | None:
    """(kind, why) when ``case``'s exercise did not happen in ``obs``, else None. Kinds:
    ``never-sent``, ``crossed`` (a cancel) and ``deadline-not-reached`` (nnrp.timeout_ms)."""
    return _cancel_not_exercised(case, obs) or _deadline_not_reached(case, obs)


def judge_not_exercised(ctx: Context) -> None:
    """Drop the exercise's findings from a case that was not exercised and say why (a note);
    a partial result handed over after a cancel within :data:`IN_FLIGHT_FRAMES` was in flight
    and judges nothing either."""
    if in_flight_only(ctx.obs):
        ctx.findings = [f for f in ctx.findings if f.rule not in _IN_FLIGHT_RULES]
    found = ctx.obs.extra.get(KEY)
    if not found:
        return
    kind, why = found
    ctx.findings = [f for f in ctx.findings if f.rule not in EXERCISE_RULES]
    ctx.note(NOTES[kind], why, seen=kind)


#: the ways a cancel is not exercised that another attempt can change (runner.py re-runs them)
CANCEL_MISSES = frozenset({"never-sent", "crossed"})


def smaller_cancel_point(after: int, missed: str, events: int) -> int:
    """A generated case's next cancel point: within what the endpoint streamed this attempt
    (before its last event when the cancel was never sent; one event earlier when the terminal
    crossed it), at least 0 (right after the submit)."""
    return max(0, (min(after, events) if missed == "never-sent" else after) - 1)
