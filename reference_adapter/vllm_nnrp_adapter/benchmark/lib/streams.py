"""What the real-vLLM benchmarks share: the request they send (:func:`chat_envelope`, the
prompt and tools), one streamed answer as the client saw it (:class:`StreamSample`, from
:func:`run_stream`: submit, every frame's receive time, cancel, terminal), and the engine's
state read through the adapter's capability document (:func:`engine_info`,
:func:`engine_settled`).

Clocks: every latency is two ``perf_counter_ns`` readings in this process (submit or cancel
sent, and a frame's receive time stamped by the client's pump thread).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient

#: per-event ``nnrp`` member an adapter may stamp (perf_counter_ns when the vLLM chunk
#: arrived; CLOCK_MONOTONIC, shared by processes on one host) when asked with TIMING_HINT
BACKEND_STAMP = "t_backend_ns"


TIMING_HINT = "timing"


PROMPT = "Count from one to one hundred."


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a word up.",
            "parameters": {
                "type": "object",
                # an enum keeps the forced JSON finite: a random model never closes a free string
                "properties": {"q": {"type": "string", "enum": ["alpha", "beta"]}},
                "required": ["q"],
            },
        },
    }
]


def chat_envelope(
    *,
    max_tokens: int,
    stream: bool = True,
    model: str | None = None,
    content: str = PROMPT,
    nnrp: Mapping[str, Any] | None = None,
    request_id: str | None = None,
    **body_extra: Any,
) -> dict[str, Any]:
    """A ``chat.completions.create`` envelope with greedy sampling and ``ignore_eos``.

    ``ignore_eos`` makes every answer run to ``max_tokens`` whatever the model does, so
    sample counts are fixed and the same request means the same work on every server.
    """
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "stream": stream,
        "temperature": 0,
        "ignore_eos": True,
    }
    if model:
        body["model"] = model
    body.update(body_extra)
    env: dict[str, Any] = {
        "schema_version": contract.SCHEMA_VERSION,
        "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
        "body": body,
    }
    if request_id:
        env["request_id"] = request_id
    if nnrp:
        env["nnrp"] = dict(nnrp)
    return env


@dataclass
class StreamSample:
    """One operation as the client saw it (receive times from the client's pump thread)."""

    submitted_ns: int
    #: receive time of each ``response.output_text.delta``
    text_ns: list[int] = field(default_factory=list)
    #: every decoded partial event, then the terminal event (when there is one)
    events: list[dict[str, Any]] = field(default_factory=list)
    outcome: str | None = None
    delivery: str | None = None
    terminal_ns: int | None = None
    cancel_sent_ns: int | None = None
    # the adapter's stamp on its success terminal: when vLLM's stream had ended (timing hint)
    completed_backend_ns: int | None = None
    #: partial events received after the cancel was sent (in flight then: allowed)
    after_cancel: int = 0
    #: frames that arrived after the terminal (never allowed); filled in by :func:`late_frames`
    after_terminal: int = 0
    output_tokens: int | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    decode_errors: list[str] = field(default_factory=list)
    #: client receive minus the adapter's ``nnrp.t_backend_ns`` stamp, when events carry one
    backend_lag_ns: list[int] = field(default_factory=list)
    op: Any = None

    @property
    def ttft_ns(self) -> int | None:
        return self.text_ns[0] - self.submitted_ns if self.text_ns else None

    @property
    def total_ns(self) -> int | None:
        return None if self.terminal_ns is None else self.terminal_ns - self.submitted_ns


def gaps_ms(times_ns: Sequence[int]) -> list[float]:
    """Gaps between consecutive receive times, in milliseconds."""
    return [(b - a) / 1e6 for a, b in itertools.pairwise(times_ns)]


async def run_stream(
    client: NnrpClient,
    envelope: Mapping[str, Any],
    *,
    timeout: float = 120.0,
    cancel_after: int | None = None,
) -> StreamSample:
    """Submit ``envelope`` and read it to its terminal; cancel after ``cancel_after`` partials.

    The cancel is sent by the client's pump thread the moment the ``cancel_after``-th partial
    arrives (``cancel_after_partials``), not by this reader: on a starved machine the reader
    lagged the wire by most of an answer and its cancels left after the answer had ended
    (docs/performance.md). Events after the cancel are the partials that arrived after it."""
    op = await client.submit(dict(envelope), timeout=timeout, cancel_after_partials=cancel_after)
    sample = StreamSample(submitted_ns=op.submitted_at_ns, op=op)
    async for rec in op:
        if rec.decode_error:
            sample.decode_errors.append(rec.decode_error)
        if rec.kind == "partial" and rec.event is not None:
            sample.events.append(rec.event)
            sent = op.cancel_sent_at_ns
            if sent is not None and rec.received_at_ns > sent:
                sample.after_cancel += 1
            if rec.event.get("type") == contract.EV_OUTPUT_TEXT_DELTA:
                sample.text_ns.append(rec.received_at_ns)
                stamp = (rec.event.get("nnrp") or {}).get(BACKEND_STAMP)
                if isinstance(stamp, int):
                    sample.backend_lag_ns.append(rec.received_at_ns - stamp)
            elif rec.event.get("type") == contract.EV_USAGE:
                sample.output_tokens = (rec.event.get("usage") or {}).get("output_tokens")
    sample.cancel_sent_ns = op.cancel_sent_at_ns
    term = await op.result()
    if term.event is not None:
        stamp = (term.event.get("nnrp") or {}).get(BACKEND_STAMP)
        sample.completed_backend_ns = stamp if isinstance(stamp, int) else None
    sample.outcome = term.outcome
    sample.delivery = term.delivery
    sample.terminal_ns = term.received_at_ns
    sample.diagnostics = dict(term.diagnostics)
    if term.event is not None:
        sample.events.append(term.event)
    return sample


def late_frames(sample: StreamSample) -> int:
    """Frames the client recorded for this operation after its terminal."""
    findings = getattr(sample.op, "wire_findings", []) or []
    return sum(1 for f in findings if f.get("rule") == "wire.frame_after_terminal")


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


async def engine_info(client: NnrpClient) -> dict[str, Any]:
    """The adapter's own diagnostics (vLLM version, engine requests in flight)."""
    op = await client.submit(
        {
            "schema_version": contract.SCHEMA_VERSION,
            "operation": contract.OP_CAPABILITIES_GET,
            "body": {},
            "nnrp": {"diagnostics": True},
        },
        timeout=30,
    )
    term = await op.result()
    return dict(term.diagnostics)


async def engine_settled(client: NnrpClient, wait_s: float = 20.0) -> int:
    """Unfinished requests in the engine, polled (bounded) until aborts have landed."""
    value = -1
    with anyio.move_on_after(wait_s):
        while True:
            value = int(
                (await engine_info(client)).get("engine", {}).get("unfinished_requests", -1)
            )
            if value <= 0:
                return value
            await anyio.sleep(0.2)
    return value
