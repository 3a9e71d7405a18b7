"""The documents ``bench vllm`` leaves: streaming latency and cancellation latency as
benchmark-results (medians, spread, the contract's counts, the issue's targets), from the
samples of one run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..lib.results import (
    BENCH_CANCELLATION_LATENCY,
    BENCH_STREAMING_LATENCY,
    metric,
    percentile,
    results_document,
)
from ..lib.streams import (
    BACKEND_STAMP,
    StreamSample,
)
from .cancellation import cancel_summary
from .plan import (
    BACKEND_METRIC,
    CANCEL_METRIC,
    EVENTS_AFTER_CANCEL_TARGET,
    INTER_EVENT_METRIC,
    TTFT_METRIC,
    Plan,
)


def documents(
    ttft: list[float],
    inter: list[float],
    stream_repeats: list[dict[str, float]],
    stream_failures: int,
    cancels: list[StreamSample],
    cancel_repeats: list[float],
    plan: Plan,
    vllm_version: str,
    context: Mapping[str, Any],
    lag: list[float] | None = None,
    loaded: Sequence[StreamSample] = (),
    loaded_repeats: Sequence[float] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    params = {
        "max_tokens": plan.max_tokens,
        "requests_per_repeat": plan.stream_requests,
        "concurrency": 1,
        "stream_failures": stream_failures,
        **context,
    }
    metrics = [
        metric(
            TTFT_METRIC,
            "ms",
            ttft,
            description="client submit → first response.output_text.delta received",
        ),
        metric(
            INTER_EVENT_METRIC,
            "ms",
            inter,
            description="gap between consecutive text deltas as received by the client",
        ),
    ]
    if lag:
        metrics.append(
            metric(
                BACKEND_METRIC,
                "ms",
                lag,
                keep_values=False,
                description=f"adapter's nnrp.{BACKEND_STAMP} (vLLM chunk in) → "
                "client receive, one monotonic clock",
            )
        )
    if lag is None:
        lag_note = (
            f"backend chunk → client receive not measured (run with --backend-timing "
            f"against an adapter that stamps nnrp.{BACKEND_STAMP})"
        )
    elif not lag:
        lag_note = (
            f"--backend-timing: the adapter stamped no nnrp.{BACKEND_STAMP}, so backend "
            "chunk → client receive is bounded above by the client-side figures only"
        )
    else:
        lag_note = f"{BACKEND_METRIC}: {len(lag)} stamped events"
    stream_doc = results_document(
        BENCH_STREAMING_LATENCY,
        metrics,
        runs=plan.repeats,
        vllm=vllm_version,
        parameters=params,
        notes=[
            "per-repeat p50 (ttft ms / inter-event ms): "
            + ", ".join(f"{r['ttft_p50']:.2f}/{r['inter_p50']:.3f}" for r in stream_repeats),
            lag_note,
            f"load average at start: {context.get('load_average_start')}",
        ],
        description="Streamed chat through the adapter on real vLLM (CPU, tiny model), "
        "suite client over loopback NNRP, greedy, ignore_eos, concurrency 1.",
    )
    # the verdicts (a cancel that did not take effect, a frame after a terminal) count every
    # cancel, at concurrency 1 and under load; the latencies are reported per concurrency
    summary = cancel_summary([*cancels, *loaded])
    alone = cancel_summary(cancels)
    after = alone["events_after_cancel"]
    if not alone["latencies_ms"]:
        raise RuntimeError(f"no cancellation completed: {alone}")
    under_load: list[dict[str, Any]] = []
    load_params: dict[str, Any] = {}
    if loaded:
        busy = cancel_summary(loaded)
        n = plan.cancel_concurrency
        if busy["latencies_ms"]:
            under_load.append(
                metric(
                    f"{CANCEL_METRIC}.c{n}",
                    "ms",
                    busy["latencies_ms"],
                    description=f"as {CANCEL_METRIC}, with {n} answers streaming at once on "
                    "the session, each cancelled",
                )
            )
        under_load.append(
            metric(
                f"cancel.events_after_cancel.c{n}",
                "events",
                busy["events_after_cancel"],
                keep_values=False,
                description=f"partial events received after the cancel was sent, {n} answers "
                "streaming at once",
            )
        )
        load_params = {
            # issue 13's target: at c=8, events after the cancel p99 <= 2 (shown, not gated)
            f"target.cancel_c{n}.events_after_cancel_p99_le_{EVENTS_AFTER_CANCEL_TARGET}": (
                percentile(busy["events_after_cancel"], 99) <= EVENTS_AFTER_CANCEL_TARGET
            ),
            "cancel_concurrency_under_load": n,
            "cancelled_under_load": busy["cancelled"],
            "cancel_not_effective_under_load": busy["not_effective"],
            "cancel_lost_race_under_load": busy["lost_race"],
        }
    cancel_doc = results_document(
        BENCH_CANCELLATION_LATENCY,
        [
            metric(
                CANCEL_METRIC,
                "ms",
                alone["latencies_ms"],
                description=f"FRAME_CANCEL sent (after {plan.cancel_after} text deltas) → "
                "terminal received by the client",
            ),
            metric(
                "cancel.events_after_cancel",
                "events",
                after,
                keep_values=False,
                description="partial events received after the cancel was sent (in flight)",
            ),
            *under_load,
        ],
        runs=plan.repeats,
        vllm=vllm_version,
        parameters={
            "cancel_after_events": plan.cancel_after,
            "max_tokens": plan.cancel_max_tokens,
            "requests_per_repeat": plan.cancel_requests,
            "cancelled": summary["cancelled"],
            "not_cancelled": summary["not_cancelled"],
            "cancel_never_sent": summary["never_sent"],
            "cancel_not_effective": summary["not_effective"],
            "cancel_verdict": "fail" if summary["not_effective"] else "pass",
            "cancel_not_effective_findings": ",".join(summary["not_effective_findings"]),
            "cancel_not_effective_after_last_partial": summary["not_effective_after_last_partial"],
            "cancel_lost_race": summary["lost_race"],
            "events_after_terminal": summary["events_after_terminal"],
            "deliveries": ",".join(summary["deliveries"]),
            "adapter_abort_accepted": summary["abort_accepted"],
            **load_params,
            **context,
        },
        notes=[
            "per-repeat p50 (ms): " + ", ".join(f"{v:.2f}" for v in cancel_repeats),
            f"per-repeat p50 (ms) with {plan.cancel_concurrency} answers at once: "
            + (", ".join(f"{v:.2f}" for v in loaded_repeats) or "not run"),
            f"events after the terminal: {summary['events_after_terminal']} (must be 0)",
            f"cancels that did not take effect: {summary['not_effective']} of "
            f"{len(cancels) - summary['never_sent']} sent (must be 0: the answer ran to its end "
            "after the cancel)",
            f"cancels sent after the adapter had already finished the answer (its own stamp on "
            f"the success terminal; counted apart, not a failure): {summary['lost_race']}",
            f"load average at start: {context.get('load_average_start')}",
        ],
        description="Cancellation of a streamed chat on real vLLM through the adapter, "
        "started after N received events so it does not depend on time to first token.",
    )
    return stream_doc, cancel_doc
