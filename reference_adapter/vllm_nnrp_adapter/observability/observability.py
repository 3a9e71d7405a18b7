"""One observation record per operation; diagnostics and metrics both read that record.

:class:`Recorder` opens an :class:`ObservationRecord` when the handler starts, the
adapter fills it as events flow, and :meth:`Recorder.finish` folds it into running
aggregates. :class:`PrometheusCollector` exposes those aggregates through a registry the
caller passes (the ``prometheus`` extra); no port is opened unless the operator asks for
:func:`start_metrics_server` explicitly. Prompt and completion text never enter a record.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from nnrp_conformance import contract

#: latency buckets (seconds) shared by the first-event and queue-delay histograms
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


@dataclass
class ObservationRecord:
    operation: str | None
    model_id: str | None
    connection_id: int
    session_id: int
    operation_id: int
    frame_id: int
    transport: str
    submitted_at_ns: int
    handler_started_at_ns: int
    first_event_at_ns: int | None = None
    finished_at_ns: int | None = None
    event_count: int = 0
    terminal_type: str | None = None
    error_code: str | None = None
    backend_error_family: str | None = None
    cancellation_source: str | None = None
    cancellation_reason: str | None = None
    abort_accepted: bool | None = None
    backend_time_ns: int | None = None
    usage: dict[str, int] | None = None

    @property
    def queue_delay_s(self) -> float:
        return max(0, self.handler_started_at_ns - self.submitted_at_ns) / 1e9

    @property
    def first_event_latency_s(self) -> float | None:
        if self.first_event_at_ns is None:
            return None
        return (self.first_event_at_ns - self.submitted_at_ns) / 1e9

    def event(self, event: dict[str, Any]) -> None:
        if self.first_event_at_ns is None:
            self.first_event_at_ns = time.perf_counter_ns()
        self.event_count += 1
        kind = event.get("type")
        if kind in contract.TERMINAL_EVENT_TYPES:
            self.terminal_type = kind
            if kind == contract.EV_ERROR:
                self.error_code = (event.get("error") or {}).get("code")
            elif kind == contract.EV_CANCELLED and self.cancellation_reason is None:
                self.cancellation_reason = event.get("reason")

    def diagnostics(self) -> dict[str, Any]:
        """The record as the ``nnrp.diagnostics`` a client may ask for (no text, no prompt)."""
        data = asdict(self)
        data["queue_delay_ms"] = round(self.queue_delay_s * 1000, 3)
        first = self.first_event_latency_s
        data["first_event_latency_ms"] = None if first is None else round(first * 1000, 3)
        if self.backend_time_ns is not None:
            data["backend_time_ms"] = round(self.backend_time_ns / 1e6, 3)
        for key in (
            "submitted_at_ns",
            "handler_started_at_ns",
            "first_event_at_ns",
            "finished_at_ns",
            "backend_time_ns",
        ):
            data.pop(key, None)
        return data


class _Histogram:
    """Cumulative bucket counts, as Prometheus wants them; no samples are kept."""

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(LATENCY_BUCKETS):
            if value <= bound:
                self.counts[i] += 1
        self.counts[-1] += 1
        self.total += value

    def buckets(self) -> list[tuple[str, float]]:
        labels = [repr(b) for b in LATENCY_BUCKETS] + ["+Inf"]
        return [(label, float(n)) for label, n in zip(labels, self.counts, strict=True)]


@dataclass
class _Aggregates:
    # (operation, terminal_type)
    operations: Counter[tuple[str, str]] = field(default_factory=Counter)
    errors: Counter[tuple[str, str]] = field(default_factory=Counter)  # (code, backend_family)
    cancellations: Counter[str] = field(default_factory=Counter)  # source
    events: int = 0
    tokens: Counter[str] = field(default_factory=Counter)  # input/output
    first_event: _Histogram = field(default_factory=_Histogram)
    queue_delay: _Histogram = field(default_factory=_Histogram)
    in_flight: int = 0


class Recorder:
    """Creates and folds observation records; thread-safe (the wire pump may use threads)."""

    def __init__(self, *, keep_last: int = 1024) -> None:
        self._lock = threading.Lock()
        self._agg = _Aggregates()
        self.recent: deque[ObservationRecord] = deque(maxlen=keep_last)

    def start(self, ctx: Any) -> ObservationRecord:
        envelope = ctx.envelope if isinstance(ctx.envelope, dict) else {}
        raw_body = envelope.get("body")
        body = raw_body if isinstance(raw_body, dict) else {}
        operation = envelope.get("operation")
        model = body.get("model")
        record = ObservationRecord(
            operation=operation if isinstance(operation, str) else None,
            model_id=model if isinstance(model, str) else None,
            connection_id=ctx.connection_id,
            session_id=ctx.session_id,
            operation_id=ctx.operation_id,
            frame_id=ctx.frame_id,
            transport=ctx.transport,
            submitted_at_ns=ctx.submitted_at_ns,
            handler_started_at_ns=time.perf_counter_ns(),
        )
        with self._lock:
            self._agg.in_flight += 1
        return record

    def finish(self, record: ObservationRecord, ctx: Any) -> None:
        record.finished_at_ns = time.perf_counter_ns()
        cancel = getattr(ctx, "cancelled", None)
        if cancel is not None:
            record.cancellation_source = getattr(cancel, "source", None)
            record.cancellation_reason = record.cancellation_reason or getattr(
                cancel, "reason", None
            )
            record.abort_accepted = getattr(cancel, "abort_accepted", None)
        terminal = record.terminal_type or ("cancelled" if cancel is not None else "none")
        with self._lock:
            agg = self._agg
            agg.in_flight -= 1
            agg.operations[(record.operation or "unknown", terminal)] += 1
            agg.events += record.event_count
            if record.error_code:
                agg.errors[(record.error_code, record.backend_error_family or "")] += 1
            source = record.cancellation_source or record.cancellation_reason
            if source:
                agg.cancellations[source] += 1
            if record.usage:
                agg.tokens["input"] += record.usage.get("input_tokens", 0)
                agg.tokens["output"] += record.usage.get("output_tokens", 0)
            if record.first_event_latency_s is not None:
                agg.first_event.observe(record.first_event_latency_s)
            agg.queue_delay.observe(record.queue_delay_s)
            self.recent.append(record)

    def snapshot(self) -> dict[str, Any]:
        """A consistent copy of the aggregates (what the collector and tests read)."""
        with self._lock:
            agg = self._agg
            return {
                "operations": dict(agg.operations),
                "errors": dict(agg.errors),
                "cancellations": dict(agg.cancellations),
                "events": agg.events,
                "tokens": dict(agg.tokens),
                "in_flight": agg.in_flight,
                "first_event": (agg.first_event.buckets(), agg.first_event.total),
                "queue_delay": (agg.queue_delay.buckets(), agg.queue_delay.total),
            }


class PrometheusCollector:
    """A ``prometheus_client`` collector over one :class:`Recorder`.

    ``PrometheusCollector(recorder).register(registry)`` adds it to the caller's registry;
    it never touches the global default registry by itself.
    """

    def __init__(self, recorder: Recorder, *, prefix: str = "vllm_nnrp") -> None:
        self.recorder = recorder
        self.prefix = prefix

    def register(self, registry: Any) -> PrometheusCollector:
        registry.register(self)
        return self

    def describe(self) -> Iterator[Any]:
        return iter(())

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        snap = self.recorder.snapshot()
        operations, errors = snap["operations"], snap["errors"]
        cancellations, tokens = snap["cancellations"], snap["tokens"]
        p = self.prefix
        ops = CounterMetricFamily(
            f"{p}_operations",
            "Operations finished, by operation and terminal event",
            labels=["operation", "terminal"],
        )
        for (operation, terminal), n in sorted(operations.items()):
            ops.add_metric([operation, terminal], n)
        yield ops
        errs = CounterMetricFamily(
            f"{p}_errors",
            "Profile errors, by code and backend error family",
            labels=["code", "backend_family"],
        )
        for (code, family), n in sorted(errors.items()):
            errs.add_metric([code, family], n)
        yield errs
        cancels = CounterMetricFamily(
            f"{p}_cancellations", "Cancellations observed, by source", labels=["source"]
        )
        for source, n in sorted(cancellations.items()):
            cancels.add_metric([source], n)
        yield cancels
        yield CounterMetricFamily(f"{p}_events", "Profile events emitted", value=snap["events"])
        toks = CounterMetricFamily(f"{p}_tokens", "Tokens reported by vLLM", labels=["kind"])
        for kind in ("input", "output"):
            toks.add_metric([kind], tokens.get(kind, 0))
        yield toks
        yield GaugeMetricFamily(f"{p}_in_flight", "Operations in flight", value=snap["in_flight"])
        for name, doc, key in (
            ("first_event_seconds", "Submit to first event", "first_event"),
            ("queue_delay_seconds", "Submit to handler start", "queue_delay"),
        ):
            buckets, total = snap[key]
            yield HistogramMetricFamily(f"{p}_{name}", doc, buckets=buckets, sum_value=total)


def start_metrics_server(recorder: Recorder, port: int, *, host: str = "127.0.0.1") -> Any:
    """Serve ``/metrics`` for one recorder; only called behind the operator's explicit flag."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    PrometheusCollector(recorder).register(registry)
    return start_http_server(port, addr=host, registry=registry)
