"""Cancellation on real vLLM: answers cancelled at their Nth delta, one or several streaming
at once on the session, and the contract's counts (cancels that took effect, lost races,
events after the cancel) and latencies (cancel sent → terminal seen)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient

from ..lib.results import (
    median,
    run_concurrent,
)
from ..lib.streams import (
    TIMING_HINT,
    StreamSample,
    chat_envelope,
    late_frames,
    run_stream,
)

if TYPE_CHECKING:
    from .plan import Plan


def cancel_summary(samples: Sequence[StreamSample]) -> dict[str, Any]:
    """Latencies (ms) and the counts the cancellation contract cares about."""
    latencies = [
        (s.terminal_ns - s.cancel_sent_ns) / 1e6
        for s in samples
        # a cancel that lost the race with the end of the answer measures nothing
        if s.cancel_sent_ns is not None
        and s.terminal_ns is not None
        and s.outcome == contract.TERMINAL_CANCELLED
    ]
    return {
        "latencies_ms": latencies,
        "cancelled": sum(1 for s in samples if s.outcome == contract.TERMINAL_CANCELLED),
        "not_cancelled": sum(1 for s in samples if s.outcome != contract.TERMINAL_CANCELLED),
        "never_sent": sum(1 for s in samples if s.cancel_sent_ns is None),
        # a cancel that was sent and still the answer ran to its end: a failure
        "not_effective": sum(1 for s in samples if _ignored(s)),
        # cancels sent after the adapter had already finished the answer (its own stamp)
        "lost_race": sum(1 for s in samples if _lost_race(s)),
        # of those, how many had every partial on the client's side of the wire before the
        # cancel was sent (no wire.partial_after_cancel): the answer had finished streaming, the
        # cancel lost the race (the reader lagged the wire); the rest saw the server keep
        # streaming after the cancel
        "not_effective_after_last_partial": sum(
            1 for s in samples if _ignored(s) and "wire.partial_after_cancel" not in _rules(s)
        ),
        # what the client recorded on those operations (e.g. client.cancel_after_end: the
        # runtime refused the cancel as if the frame had ended): where to look for the cause
        "not_effective_findings": sorted(
            {
                str(f.get("rule"))
                for s in samples
                if _ignored(s)
                for f in (getattr(s.op, "wire_findings", None) or [])
            }
        ),
        "events_after_cancel": [s.after_cancel for s in samples],
        "events_after_terminal": sum(s.after_terminal for s in samples),
        "deliveries": sorted({str(s.delivery) for s in samples}),
        # the adapter's own account (diagnostics.cancellation.abort_accepted), when it gives one
        "abort_accepted": sum(
            1 for s in samples if (s.diagnostics.get("cancellation") or {}).get("abort_accepted")
        ),
    }


def _lost_race(s: StreamSample) -> bool:
    """The answer had ended in the adapter (its stamp on the success terminal) before the cancel
    was sent: nothing could stop it, so it is counted apart, never as an ignored cancel."""
    return (
        s.cancel_sent_ns is not None
        and s.outcome == contract.TERMINAL_SUCCESS
        and s.completed_backend_ns is not None
        and s.completed_backend_ns <= s.cancel_sent_ns
    )


def _ignored(s: StreamSample) -> bool:
    return (
        s.cancel_sent_ns is not None
        and s.outcome != contract.TERMINAL_CANCELLED
        and not _lost_race(s)
    )


def _rules(s: StreamSample) -> set[str]:
    return {str(f.get("rule")) for f in (getattr(s.op, "wire_findings", None) or [])}


async def cancellation_latency(
    client: NnrpClient, plan: Plan, model: str | None, concurrency: int = 1
) -> tuple[list[StreamSample], list[float]]:
    """``plan.cancel_requests`` cancelled answers per repeat, ``concurrency`` of them streaming
    at once on the client's session (a new one is submitted as soon as one ends)."""
    samples: list[StreamSample] = []
    per_repeat: list[float] = []

    async def cancel_one(_worker: int) -> StreamSample:
        # the timing hint makes the adapter stamp when its answer ended (_lost_race)
        env = chat_envelope(max_tokens=plan.cancel_max_tokens, model=model, nnrp={TIMING_HINT: True})
        return await run_stream(client, env, cancel_after=plan.cancel_after)

    for _ in range(plan.repeats):
        workers = min(concurrency, plan.cancel_requests)
        mine, _wall = await run_concurrent(plan.cancel_requests, workers, cancel_one)
        lat = cancel_summary(mine)["latencies_ms"]
        if lat:
            per_repeat.append(median(lat))
        samples += mine
    await anyio.sleep(0.5)  # late frames, if any, have time to arrive and be recorded
    for s in samples:
        s.after_terminal = late_frames(s)
    return samples, per_repeat
