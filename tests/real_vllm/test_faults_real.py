"""The vLLM-specific faults against real vLLM on CPU (the adapter as a subprocess): cancels at
random points, client disconnects mid-stream and deadlines. Afterwards the engine itself,
asked from outside through the discovery operation's diagnostics, holds zero requests."""

from __future__ import annotations

import random

import anyio
import pytest
from probe import connect, engine_count

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess

# the adapter's own fault handling over vLLM's abort, the same on every line (the aborts and
# levels modules prove the abort on the lower bound too)
pytestmark = [pytest.mark.anyio, pytest.mark.real_vllm, pytest.mark.wire,
              pytest.mark.current_line_only]

CANCELS = 40


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def adapter(explicit_adapter: AdapterProcess) -> AdapterProcess:
    return explicit_adapter


def _env(max_tokens: int = 64, **nnrp: object) -> dict:
    env: dict = {"schema_version": contract.SCHEMA_VERSION, "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
                 "body": {"messages": [{"role": "user", "content": "Count from one to one hundred."}],
                          "max_tokens": max_tokens, "stream": True, "temperature": 0}}
    if nnrp:
        env["nnrp"] = nnrp
    return env


async def _unfinished(client: NnrpClient) -> int:
    """The engine's own count, polled (bounded) until aborts have landed."""
    value = -1
    with anyio.move_on_after(20):
        while True:
            value = await engine_count(client)
            if value == 0:
                return 0
            await anyio.sleep(0.2)
    return value


async def test_random_cancels_leave_no_engine_request(adapter) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(7)
    async with await connect(adapter.address) as client:
        for _ in range(CANCELS):
            op = await client.submit(_env(), timeout=60)
            k = rng.randint(0, 12)
            if k == 0:
                await op.cancel()
            n = 0
            async for ev in op:
                n += ev.kind == "partial"
                if n >= k:
                    await op.cancel()
            assert op.terminal.outcome in (contract.TERMINAL_CANCELLED, contract.TERMINAL_SUCCESS), op.terminal
            assert not [f for f in op.wire_findings if f["rule"] in ("wire.frame_after_terminal",
                                                                    "wire.partial_after_cancel")]
        assert await _unfinished(client) == 0


async def test_disconnect_mid_stream_leaves_no_engine_request(adapter) -> None:  # type: ignore[no-untyped-def]
    client = await connect(adapter.address)
    ops = [await client.submit(_env(256), timeout=60) for _ in range(3)]
    with anyio.fail_after(60):
        while len(ops[-1].received) < 2:
            await anyio.sleep(0.02)
    await client.aclose()
    async with await connect(adapter.address) as other:
        assert await _unfinished(other) == 0


async def test_deadline_aborts_the_engine_request(adapter) -> None:  # type: ignore[no-untyped-def]
    async with await connect(adapter.address) as client:
        # 400 tokens: prompt + answer must fit max_model_len 512, or vLLM rejects it at once
        op = await client.submit(_env(400, timeout_ms=300), timeout=60)
        term = await op.result()
        assert term.event and term.event["error"]["code"] == contract.ERR_TIMEOUT, term
        assert await _unfinished(client) == 0
