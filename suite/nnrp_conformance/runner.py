"""Running one planned case against an endpoint: the submit, the reading, the verdict.

Owns: turning a :class:`~nnrp_conformance.planner.PlannedCase` into a submit (the envelope,
or the malformed payload a ``request.raw`` describes), reading the operation through the
client until its terminal, the case timeout or the event cap, sending a real NNRP cancel
when ``request.cancel.after_events`` says so, recording the :class:`Observation` and timings,
and asking :func:`~nnrp_conformance.checks.judge` for the verdict. Endpoint misbehaviour
never raises: it becomes a failed :class:`~nnrp_conformance.case_results.CaseResult` with
findings. What a result holds and how it is written is :mod:`.case_results`'s.

Terminal mapping (client delivery -> logical terminal): :mod:`nnrp_conformance.terminals`,
the one place that decides it. Only frames the endpoint sent count: the client's local
lifecycle ``CANCELLED`` after our own cancel is evidence, never a terminal.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from nnrp_conformance import contract
from nnrp_conformance.case_results import (
    CaseResult,
    case_results_document,
    skipped_result,
    started_now,
    unresponsive_result,
)
from nnrp_conformance.checks import Observation, judge
from nnrp_conformance.checks.exercise import (
    CANCEL_MISSES,
    REPEATED_ERRORS,
    smaller_cancel_point,
)
from nnrp_conformance.checks.exercise import KEY as NOT_EXERCISED
from nnrp_conformance.checks.generated import generated_family
from nnrp_conformance.jsonsafe import jsonable
from nnrp_conformance.terminals import DELIVERIES_FROM_ENDPOINT, terminal_kind_of
from nnrp_conformance.trace import frame_trace

if TYPE_CHECKING:
    from nnrp_conformance.manifest import Manifest
    from nnrp_conformance.planner import PlannedCase

# CaseResult and the results of cases not run are case_results' (re-exported for callers
# that read them with the runner's)
__all__ = [
    "DEFAULT_CASE_TIMEOUT_S",
    "DEFAULT_IDLE_TIMEOUT_S",
    "DEFAULT_MAX_EVENTS",
    "CaseResult",
    "case_results_document",
    "payload_of",
    "run_case",
    "skipped_result",
    "terminal_kind_of",
    "unresponsive_result",
]

#: per-case limit; a cold CPU vLLM needs ~15-20 s for its first request
DEFAULT_CASE_TIMEOUT_S = 60.0
#: idle limit: no frame from the endpoint for this long while an operation is open ends the
#: case (above a cold CPU vLLM's 15-19 s before its first token; docs/verdicts.md#bounds)
DEFAULT_IDLE_TIMEOUT_S = 25.0
#: partial events accepted for one operation before the suite calls it a flood and cancels
DEFAULT_MAX_EVENTS = 20_000
#: the client's wire finding for an operation that exceeded its event cap
CLIENT_FLOOD_RULE = "client.max_events"
#: extra wall time over the client's own timeout before the runner gives up on an operation
_GRACE_S = 5.0
#: A cancel case whose exercise did not happen (checks/exercise.py: the answer ended before the
#: cancel point, its terminal was already here when the cancel was due, or its terminal came
#: within the frames that may have been in flight after the cancel (at most
#: ``IN_FLIGHT_FRAMES``) and may have crossed it) proves nothing about
#: cancellation either way. It runs again, at most this many attempts in all; the last attempt
#: is judged (``skipped`` / ``not-exercised`` when it was not exercised either) and the earlier
#: ones are listed in ``diagnostics.cancel_races_lost``. A generated case runs again with its
#: cancel point moved within what the endpoint streamed (``smaller_cancel_point``). An endpoint
#: that ignores cancels still fails: it streams on after the cancel, which is exercised.
CANCEL_RACE_ATTEMPTS = 3


# --- submit payload -----------------------------------------------------------------------


def payload_of(case: PlannedCase) -> tuple[dict[str, Any] | bytes, list[Any] | None]:
    """What to submit: the envelope dict, or (raw bytes, typed frames) for ``request.raw``."""
    raw = case.raw
    if not raw:
        return case.envelope, None
    if "payload_hex" in raw:
        payload: bytes = bytes.fromhex(raw["payload_hex"])
    elif "payload_text" in raw:
        payload = raw["payload_text"].encode("utf-8")
    else:
        payload = json.dumps(case.envelope, ensure_ascii=False, separators=(",", ":")).encode()
    frames = None
    if raw.get("frames"):
        # lazy on purpose: the codec loads nnrp-py's native library, needed only for a raw
        # frame (the pytest plugin loads this module in every pytest run of the venv)
        from nnrp_conformance.wire.codec import RawFrame

        frames = [RawFrame(payload, **spec) for spec in raw["frames"]]
    return payload, frames


# --- running ------------------------------------------------------------------------------


def _ms(ns: int | None, t0: int) -> float | None:
    return None if ns is None else round((ns - t0) / 1e6, 3)


async def _cancel(op: Any) -> int:
    try:
        ns = await op.cancel()
    except Exception:  # the op may already be over; the cancel attempt is still evidence
        return time.perf_counter_ns()
    return ns if isinstance(ns, int) else time.perf_counter_ns()


async def run_case(client: Any, case: PlannedCase, *,
                   timeout: float | None = DEFAULT_CASE_TIMEOUT_S,
                   manifest: Manifest | None = None,
                   capability_document: dict[str, Any] | None = None,
                   max_events: int = DEFAULT_MAX_EVENTS,
                   idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT_S,
                   strict: bool = False,
                   capability_file: str | None = None,
                   trace: bool = False, twin: Any = None) -> CaseResult:
    """Run ``case`` over ``client`` and judge it (it runs even if not selected; callers
    decide about skipping); with ``trace``, the result carries the case's frame trace; with
    ``twin`` (:class:`~nnrp_conformance.twin.HttpTwin`), the comparison with the HTTP API. Never
    raises for endpoint misbehaviour. A cancel case whose cancel was not exercised runs again
    (``CANCEL_RACE_ATTEMPTS``); ``diagnostics.cancel_races_lost`` lists those attempts."""
    lost: list[dict[str, Any]] = []
    after = case.cancel_after_events
    generated = generated_family(case) is not None
    while True:
        # an error right after the cancel in every earlier attempt, and this is the last: the
        # endpoint answers this cancel with an error, judged (checks/exercise.py)
        errors = len(lost) if len(lost) + 1 == CANCEL_RACE_ATTEMPTS and all(
            e["not_exercised"] == "crossed" and e["terminal"] == contract.TERMINAL_ERROR
            for e in lost) else 0
        result = await _run_once(
            client, case, timeout=timeout, manifest=manifest,
            capability_document=capability_document, max_events=max_events,
            idle_timeout=idle_timeout, strict=strict, capability_file=capability_file,
            trace=trace, cancel_after=after, errors_after_cancel=errors)
        missed = (result.diagnostics.get("not_exercised") or {}).get("kind")
        if missed not in CANCEL_MISSES or len(lost) + 1 >= CANCEL_RACE_ATTEMPTS:
            break
        lost.append({"attempt": len(lost) + 1, "not_exercised": missed,
                     "cancel_after": after, "events": result.diagnostics["event_count"],
                     "terminal": result.terminal,
                     "timings_ms": result.diagnostics["timings_ms"]})
        if generated and after is not None:
            after = smaller_cancel_point(after, missed, result.diagnostics["event_count"])
    if lost:
        result.diagnostics["cancel_races_lost"] = lost
    if twin is not None:  # --nnrp-http-twin: the same body to the HTTP API (twin/)
        result = await twin.compare(case, result, strict=strict, timeout=timeout)
    return result


async def _run_once(client: Any, case: PlannedCase, *, timeout: float | None,
                    manifest: Manifest | None, capability_document: dict[str, Any] | None,
                    max_events: int, idle_timeout: float | None, strict: bool,
                    capability_file: str | None, trace: bool,
                    cancel_after: int | None, errors_after_cancel: int = 0) -> CaseResult:
    """One attempt of :func:`run_case`, judged."""
    timeout_s = (case.timeout_ms / 1000 if case.timeout_ms
                 else float(DEFAULT_CASE_TIMEOUT_S if timeout is None else timeout))
    started_at = started_now()
    t0 = time.perf_counter_ns()
    obs = Observation()
    extra = obs.extra
    extra["timeout_s"] = timeout_s
    idle_s = idle_timeout if idle_timeout is not None and idle_timeout < timeout_s else None
    extra["idle_timeout_s"] = idle_s
    first_ns: int | None = None
    terminal_ns: int | None = None
    cancel_ns: int | None = None
    op: Any = None
    after = cancel_after
    if after != case.cancel_after_events:  # moved for a generated case (run_case)
        extra["cancel_after"] = after
    if errors_after_cancel:
        extra[REPEATED_ERRORS] = errors_after_cancel
    decode_errors: dict[int, str] = {}
    try:
        payload, frames = payload_of(case)
    except Exception as exc:  # a recipe problem, not the endpoint's: still a clear failure
        payload, frames = None, None
        extra["exception"] = f"cannot build the submit for {case.id}: {exc}"
    if payload is not None:
        with anyio.move_on_after(timeout_s + _GRACE_S) as scope:
            try:
                op = await client.submit(payload, timeout=timeout_s, frames=frames,
                                         max_events=max_events + 1, idle_timeout=idle_s)
                if after == 0:
                    cancel_ns = await _cancel(op)
                    obs.cancelled_at_index = -1
                async for ev in op:
                    if ev.kind == "terminal":
                        # keep iterating: the client ends the iteration once it has
                        # recorded the terminal (op.terminal), which may lag this item
                        terminal_ns = ev.received_at_ns
                        if ev.decode_error:
                            extra["terminal_decode_error"] = ev.decode_error
                        continue
                    if ev.kind != "partial":
                        continue  # lifecycle records are evidence, not profile events
                    first_ns = first_ns or ev.received_at_ns
                    index = len(obs.events)
                    obs.raw_events.append(ev)
                    obs.events.append(ev.event if ev.decode_error is None else None)
                    if ev.decode_error is not None:
                        decode_errors[index] = ev.decode_error
                    if len(obs.events) > max_events:
                        extra["flooded"] = True
                        extra["max_events"] = max_events
                        cancel_ns = cancel_ns or await _cancel(op)
                        break
                    if after and obs.cancelled_at_index is None and len(obs.events) >= after:
                        cancel_ns = await _cancel(op)
                        obs.cancelled_at_index = index
                if op.terminal is None:
                    await op.result()
            except Exception as exc:
                extra["exception"] = f"{type(exc).__name__}: {exc}"
        if scope.cancelled_caught:
            obs.timed_out = True
            if op is not None and cancel_ns is None:
                with anyio.move_on_after(_GRACE_S):
                    cancel_ns = await _cancel(op)
    if decode_errors:
        extra["decode_errors"] = decode_errors
    _finish_observation(obs, op, cancel_ns)
    if terminal_ns is None and obs.terminal_kind is not None:
        terminal_ns = time.perf_counter_ns()
    # an upper bound of the endpoint's own time to its terminal (checks/exercise.py)
    extra["submit_to_terminal_ms"] = _ms(terminal_ns, t0)
    verdict = judge(case, obs, manifest=manifest, capability_document=capability_document,
                    strict=strict, capability_file=capability_file)
    events = [e for e in obs.events if isinstance(e, dict)]
    if obs.terminal_event is not None:
        events.append(obs.terminal_event)
    duration = (time.perf_counter_ns() - t0) / 1e9
    diagnostics = {
        "expected_terminal": case.expected_terminal,
        "operation": case.operation,
        "request_id": case.envelope.get("request_id") if isinstance(case.envelope, dict)
        else None,
        "timings_ms": {
            "submit_to_first_event": _ms(first_ns, t0),
            "submit_to_terminal": _ms(terminal_ns, t0),
            "submit_to_cancel": _ms(cancel_ns, t0),
        },
        "event_count": len(obs.events),
        "terminal_delivery": extra.get("delivery"),
        "drop_reason": extra.get("drop_reason"),
        "status_code": extra.get("status_code"),
        "cancelled_after_event": obs.cancelled_at_index,
        "events_after_cancel": extra.get("events_after_cancel", 0),
        "late_events": len(extra.get("late_events") or ()),
        "timed_out": obs.timed_out,
        "cancel": extra.get("cancel"),
        "timeout_s": timeout_s,
        "idle_timeout_s": idle_s,
        "expired_by": extra.get("expired_by"),
        "last_frame": extra.get("last_frame"),
        "frames": _frame_summary(obs.raw_events),
        "slowest_gap_ms": _slowest_gap_ms(op),
        "wire_findings": list(obs.wire_findings),
        "notes": list(case.notes),
    }
    if extra.get("exception"):
        diagnostics["exception"] = extra["exception"]
    if "cancel_after" in extra:
        diagnostics["cancel_after_events"] = extra["cancel_after"]
    if extra.get(NOT_EXERCISED):
        kind, why = extra[NOT_EXERCISED]
        diagnostics["not_exercised"] = {"kind": kind, "why": why}
    return CaseResult(
        id=case.id, outcome=verdict.outcome, terminal=obs.terminal_kind, verdict=verdict,
        events=events, duration_s=duration, started_at=started_at, level=case.level,
        status=case.status, selection=case.selection, reason=case.reason,
        diagnostics=diagnostics, trace=frame_trace(op) if trace and op is not None else None,
        span_ns=_span_ns(op),
    )


def _finish_observation(obs: Observation, op: Any, cancel_ns: int | None) -> None:
    """Fill the terminal, late events and wire findings from the client's operation."""
    extra = obs.extra
    if op is None:
        return
    term = getattr(op, "terminal", None)
    if term is not None:
        extra["delivery"] = term.delivery
        extra["drop_reason"] = jsonable(getattr(term, "drop_reason", None))
        extra["status_code"] = getattr(term, "status_code", None)
        extra["terminal_detail"] = getattr(term, "detail", None)
        obs.terminal_kind = terminal_kind_of(term)
        ev = getattr(term, "event", None)
        obs.terminal_event = ev if isinstance(ev, dict) else None
        if term.delivery == "timeout":
            obs.timed_out = True
            extra["expired_by"] = getattr(op, "expired_by", None)
    obs.wire_findings = [dict(w) for w in getattr(op, "wire_findings", None) or ()]
    if any(w.get("rule") == CLIENT_FLOOD_RULE for w in obs.wire_findings):
        extra["flooded"] = True
        extra.setdefault("max_events", getattr(op, "max_events", None))
    received: Sequence[Any] = list(getattr(op, "received", None) or ())
    from_endpoint = [ev for ev in received if ev.kind != "lifecycle"]
    if from_endpoint:
        last = from_endpoint[-1]
        extra["last_frame"] = {"message_type": last.message_type,
                               "after_submit_ms": _ms(last.received_at_ns,
                                                      getattr(op, "submitted_at_ns", 0))}
    seen_terminal = False
    late: list[Any] = []
    for ev in received:
        if seen_terminal:
            late.append(ev.event if ev.event is not None else {
                "decode_error": ev.decode_error})
        elif ev.kind == "terminal":
            seen_terminal = True
    if late:
        extra["late_events"] = late
    extra["local_cancelled"] = getattr(op, "local_cancelled_at_ns", None) is not None
    if cancel_ns is not None:
        extra["cancel"] = _cancel_evidence(op, term, cancel_ns)
        extra["events_after_cancel"] = sum(
            1 for ev in received
            if ev.kind == "partial" and isinstance(ev.received_at_ns, int)
            and ev.received_at_ns > cancel_ns)


def _cancel_evidence(op: Any, term: Any, cancel_ns: int) -> dict[str, Any]:
    """What the wire let the client see after its cancel (docs/verdicts.md#cancel)."""
    local = getattr(op, "local_cancelled_at_ns", None)
    answered = term is not None and term.delivery in DELIVERIES_FROM_ENDPOINT
    diag = (getattr(term, "diagnostics", None) or {}) if answered else {}
    cancellation = diag.get("cancellation") if isinstance(diag, dict) else None
    return {
        "answered_by": term.delivery if answered else None,
        "answer_ms": _ms(getattr(term, "received_at_ns", None), cancel_ns) if answered else None,
        "local_lifecycle_cancelled_ms": _ms(local, cancel_ns),
        # frames nnrp-py refused to hand over after the cancel (3/4/105 on poll): counted,
        # never read, and not attributable to an operation when several were cancelled
        "stale_frames_after_cancel": getattr(op, "stale_after_cancel", 0),
        # the terminal was here before the cancel could go out, so it was not sent
        "ended_before_cancel": bool(getattr(op, "ended_before_cancel", False)),
        "endpoint_events_sent": (cancellation or {}).get("events_sent")
        if isinstance(cancellation, dict) else None,
    }


def _span_ns(op: Any) -> tuple[int, int | None] | None:
    """When ``op`` was submitted and when the endpoint's own terminal arrived."""
    submitted = getattr(op, "submitted_at_ns", None)
    if not isinstance(submitted, int):
        return None
    term = getattr(op, "terminal", None)
    ended = getattr(term, "received_at_ns", None) \
        if getattr(term, "delivery", None) in DELIVERIES_FROM_ENDPOINT else None
    return submitted, ended


def _slowest_gap_ms(op: Any) -> float | None:
    """The longest the endpoint kept this operation waiting for its next frame (from the
    submit to the first frame, between frames, to its terminal), for an operation the
    endpoint ended: the pace it has shown, which bounds how long a later case waits for a
    frame once an earlier one was left silent (``run_cases.py``). None: it did not end it."""
    span = _span_ns(op)
    if span is None or span[1] is None:
        return None
    times = [span[0], *(ev.received_at_ns for ev in getattr(op, "received", ())
                        if ev.kind != "lifecycle" and ev.received_at_ns <= span[1]), span[1]]
    return round(float(max(b - a for a, b in itertools.pairwise(times))) / 1e6, 3)


def _frame_summary(raw_events: Sequence[Any]) -> dict[str, Any]:
    kinds: dict[str, int] = {}
    total = 0
    for ev in raw_events:
        name = str(getattr(ev, "message_type", "?"))
        kinds[name] = kinds.get(name, 0) + 1
        raw = getattr(ev, "raw", b"")
        total += len(raw) if isinstance(raw, bytes | bytearray) else 0
    return {"by_message_type": kinds, "partial_bytes": total}
