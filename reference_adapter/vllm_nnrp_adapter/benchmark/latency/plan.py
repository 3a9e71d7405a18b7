"""What one ``bench vllm`` run measures: the metric names (the release policy's), the
:class:`Plan` (repeats, requests, answer lengths, the cancel point and the concurrency of the
cancellation under load) with its quick and full presets, and the issue's target for events
after a cancel."""

from __future__ import annotations

from dataclasses import dataclass

from ..lib.results import (
    BENCH_CANCELLATION_LATENCY,
    BENCH_STREAMING_LATENCY,
    required_metrics,
)

BACKEND_METRIC = "stream.backend_to_client_ms"


TTFT_METRIC, INTER_EVENT_METRIC = required_metrics(BENCH_STREAMING_LATENCY)


(CANCEL_METRIC,) = required_metrics(BENCH_CANCELLATION_LATENCY)


@dataclass
class Plan:
    repeats: int
    stream_requests: int  # per repeat
    cancel_requests: int  # per repeat
    max_tokens: int = 32
    cancel_after: int = 5
    cancel_max_tokens: int = 400
    warmup: int = 3
    #: the cancellation runs again with this many answers streaming at once on the session,
    #: each cancelled: a cancel must take effect as promptly under load (issue 13's c=8)
    cancel_concurrency: int = 8


#: most partial events that may still arrive after a cancel under load (p99), issue 13
EVENTS_AFTER_CANCEL_TARGET = 2


QUICK = Plan(repeats=2, stream_requests=20, cancel_requests=15)


FULL = Plan(repeats=3, stream_requests=80, cancel_requests=80)
