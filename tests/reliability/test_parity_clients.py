"""The parity benchmark's NNRP columns over the real wire (adapter handler, scripted backend):
the lean client streams several answers on one session and on one session each, sees what the
suite's client sees (text, token count, a failed answer as a failed sample), and the rounds
give every column its own results with the other server's CPU never taken from its own."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from nnrp_conformance.client import NnrpClient
from vllm_nnrp_adapter.benchmark.parity import run as parity_run
from vllm_nnrp_adapter.benchmark.parity.facts import (
    HTTP,
    NNRP,
    NNRP_COLUMNS,
    NNRP_IPC,
    NNRP_ONE,
    NNRP_SUITE,
    NNRP_SUITE_ONE,
)
from vllm_nnrp_adapter.benchmark.parity.lean_client import LeanSession

sys.path.insert(0, str(Path(__file__).parent))
# at collection, while 'conftest' is this folder's (later another folder's may hold the name)
from conftest import MANIFEST, ScriptedBackend, chat, envelope, serve_adapter

pytestmark = [pytest.mark.anyio, pytest.mark.wire]


async def test_lean_client_sees_what_the_suite_client_sees_on_shared_and_own_sessions() -> None:
    async with serve_adapter() as a:
        suite = await NnrpClient.connect(a.address)
        op = await suite.submit(envelope(chat("short")), timeout=30)
        events: list = []
        async for rec in op:
            if rec.kind == "partial" and rec.event is not None:
                events.append(rec.event)
        await op.result()
        await suite.aclose()
        want = "".join(e.get("delta", "") for e in events
                       if e.get("type") == "response.output_text.delta")
        deltas = sum(1 for e in events if e.get("type") == "response.output_text.delta")
        assert want and deltas == 3

        shared = await LeanSession.connect(a.address)
        own = [await LeanSession.connect(a.address) for _ in range(3)]
        try:
            results: list = []

            async def one(session: LeanSession, script: str = "short") -> None:
                results.append(await session.run(envelope(chat(script)), timeout=30))

            async with anyio.create_task_group() as tg:
                for _ in range(4):  # four answers in flight on one session
                    tg.start_soon(one, shared)
                for s in own:
                    tg.start_soon(one, s)
            assert len(results) == 7
            for r in results:
                assert r.error is None
                assert r.text == want and len(r.content_ns) == deltas
                assert r.ttft_ms is not None and r.total_ms is not None
                assert r.tokens == deltas  # the usage event's output_tokens
            failed = await shared.run(envelope(chat("raise")), timeout=30)
            assert failed.error and "terminal" in failed.error
            again = await shared.run(envelope(chat("short")), timeout=30)
            assert again.error is None and again.text == want  # the session survived it
        finally:
            for s in (shared, *own):
                await s.close()
        assert await a.settle() == []


async def test_every_nnrp_column_is_measured_and_the_idle_server_is_another_process() -> None:
    """Rounds over the four columns: each gets its samples; with every NNRP column served by
    one process, the 'other, idle server' of an NNRP column is never the adapter itself."""
    assert set(NNRP_COLUMNS) == {NNRP, NNRP_IPC, NNRP_ONE, NNRP_SUITE, NNRP_SUITE_ONE}
    async with serve_adapter() as a:
        paths = {name: parity_run.nnrp_path(name, a.address, "m") for name in NNRP_COLUMNS}
        for p in paths.values():
            await p.open()
        try:
            class Scripted:  # the scripted backend reads its script from the body
                def __init__(self, path) -> None:  # type: ignore[no-untyped-def]
                    self.path = path

                def one(self, content: str):  # type: ignore[no-untyped-def]
                    return self.path.one_env(envelope(chat("short")))

            measured = await parity_run.measure(
                {n: Scripted(p) for n, p in paths.items()},
                {n: os.getpid() for n in paths},  # one process serves them all
                {"short": "x"},
                parity_run.Plan(rounds=2, requests={1: 2, 8: 8, 32: 8}, warmup=1),
            )
        finally:
            for p in paths.values():
                await p.close()
    for w, rounds in measured.items():
        assert {rr.path for rr in rounds} == set(NNRP_COLUMNS), w
        for rr in rounds:
            assert rr.tokens == 3 * len(rr.samples) and not any(s.error for s in rr.samples)
            assert rr.idle_other_cpu_s is None  # no other process: never the adapter's own CPU
    assert HTTP not in {rr.path for rounds in measured.values() for rr in rounds}
    assert sorted(len(p.clients) for p in paths.values()) == [1, 1, 32, 32, 32]


async def test_the_second_listener_serves_the_same_adapter_over_ipc() -> None:
    """``--nnrp-also-listen ipc://…`` (what the parity benchmark's ``nnrp_ipc`` column talks
    to): one adapter, two listeners; a lean session streams the same answer over each."""
    import tempfile

    from vllm_nnrp_adapter.launch.serve import nnrp_serving
    from vllm_nnrp_adapter.launch.settings import ServeConfig

    with tempfile.TemporaryDirectory(prefix="nnrp-") as short:  # a Unix socket path is short
        config = ServeConfig(vllm_argv=[], listen="127.0.0.1:0",
                             also_listen=f"ipc://{short}/nnrp.sock")
        async with nnrp_serving(ScriptedBackend(), config, MANIFEST) as info:
            assert info["also_address"] == f"unix://{short}/nnrp.sock"
            texts = []
            for address in (info["address"], info["also_address"]):
                session = await LeanSession.connect(address, shared=False)
                try:
                    sample = await session.run(envelope(chat("short")), timeout=30)
                finally:
                    await session.close()
                assert sample.error is None, address
                texts.append(sample.text)
            assert texts[0] == texts[1] and texts[0]
