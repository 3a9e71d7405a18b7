"""The real-vLLM benchmark's cancellation step over the real wire, against the adapter
handler on a scripted backend: ``concurrency`` answers stream at once on one session, each is
cancelled at its 5th delta, every request is run exactly once, and every cancel takes effect
(the backend request aborted, nothing left in flight)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient
from vllm_nnrp_adapter.benchmark.latency import vllm as bench

sys.path.insert(0, str(Path(__file__).parent))
from scripted_backend import Script, ScriptedBackend

from conftest import serve_adapter

pytestmark = [pytest.mark.anyio, pytest.mark.wire]


class CountingBackend(ScriptedBackend):
    """Remembers the most requests it had in flight at once."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.most_in_flight = 0

    async def chat(self, body: dict[str, Any], *, request_id: str) -> Any:
        result = await super().chat(body, request_id=request_id)
        self.most_in_flight = max(self.most_in_flight, len(self.unfinished))
        return result


@pytest.mark.parametrize("concurrency", [1, 4])
async def test_cancellation_runs_each_request_once_with_that_many_streaming(concurrency: int) -> None:
    # the benchmark's request names no script: the default one streams long enough to cancel
    backend = CountingBackend(scripts={"default": Script(n=400, delay_s=0.002)})
    plan = bench.Plan(repeats=2, stream_requests=0, cancel_requests=6)
    async with serve_adapter(backend) as a:
        async with await NnrpClient.connect(a.address) as client:
            samples, per_repeat = await bench.cancellation_latency(client, plan, None, concurrency)
        assert await a.settle() == []
    summary = bench.cancel_summary(samples)
    assert len(samples) == 12 and len(per_repeat) == 2
    assert summary["cancelled"] == 12 and summary["not_effective"] == 0
    assert len(summary["latencies_ms"]) == 12
    assert backend.started == 12 and len(set(backend.aborted)) == 12
    assert backend.most_in_flight == concurrency
    assert all(s.outcome == contract.TERMINAL_CANCELLED for s in samples)
