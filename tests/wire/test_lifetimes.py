"""No nnrp-py object is ever finalised by the garbage collector, and no native close runs on
the event-loop thread, on the failure paths that once deadlocked CI.

The CI hang: a load test failed, its task group cancelled the other sessions while they were
closing, the cancellation skipped the connection close, and the garbage collector later
finalised nnrp-py's connection context manager on the loop thread of the next test, inside an
adapter handler; its ``close`` blocked there for good. Each test here provokes one such path
against the real server binding over loopback, then forces a collection on the loop thread
and checks, through instrumented nnrp-py closes (``close_log``), that every close ran
explicitly (``wire.lifetime``) and off the loop, and that nothing is left open.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from nnrp.client.native import NativeClientConnection
from nnrp.server.native import NativeServer

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient
from nnrp_conformance.wire import lifetime
from vllm_nnrp_adapter.nnrp_server import NnrpServer

sys.path.insert(0, str(Path(__file__).parent))
from wire_handlers import make_handler

pytestmark = [pytest.mark.anyio, pytest.mark.wire]


@dataclass(frozen=True)
class CloseCall:
    what: str
    explicit: bool  # inside lifetime.close_blocking
    on_loop: bool  # on a thread running an event loop
    thread: str


@pytest.fixture
def close_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[CloseCall]]:
    calls: list[CloseCall] = []
    for cls in (NativeClientConnection, NativeServer):
        original = cls.close

        def recording(self, *a, _original=original, _name=cls.__name__, **kw):  # type: ignore[no-untyped-def]
            calls.append(
                CloseCall(
                    _name,
                    lifetime.closing_explicitly(),
                    lifetime.on_loop_thread(),
                    threading.current_thread().name,
                )
            )
            return _original(self, *a, **kw)

        monkeypatch.setattr(cls, "close", recording)
    yield calls


def env(mode: str, **body: object) -> dict:
    return {
        "schema_version": contract.SCHEMA_VERSION,
        "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
        "body": {"mode": mode, **body},
    }


def assert_all_explicit_off_loop(calls: list[CloseCall]) -> None:
    bad = [c for c in calls if not c.explicit or c.on_loop]
    assert bad == [], f"closes by a finaliser or on the loop thread: {bad}"


async def _collect_on_loop() -> None:
    # where the CI hang happened: a collection on the loop thread, inside a running handler
    for _ in range(3):
        gc.collect()
        await anyio.sleep(0.01)


async def test_cancelled_aclose_still_closes_the_connection(close_log: list[CloseCall]) -> None:
    async with NnrpServer(make_handler()) as srv:
        client = await NnrpClient.connect(srv.address)
        op = await client.submit(env("forever"), timeout=30)
        await op.__aiter__().__anext__()
        with anyio.CancelScope() as scope:
            scope.cancel()  # the caller is cancelled before aclose even starts
            await client.aclose()
        del client, op
        await _collect_on_loop()
        assert [h.what for h in lifetime.open_objects() if "client" in h.what] == []
    assert_all_explicit_off_loop(close_log)
    assert sum(c.what == "NativeClientConnection" for c in close_log) == 1
    assert sum(c.what == "NativeServer" for c in close_log) == 1


async def test_failing_task_group_leaves_nothing_to_the_collector(
    close_log: list[CloseCall],
) -> None:
    """The load test's failure path: one session fails, the group cancels the others mid-stream."""
    started = anyio.Event()
    opened = 0

    async def session(n: int) -> None:
        nonlocal opened
        async with await NnrpClient.connect(srv.address) as client:
            op = await client.submit(env("forever"), timeout=30)
            await op.__aiter__().__anext__()
            opened += 1
            if opened == 4:
                started.set()
            await anyio.sleep_forever()

    async def failing() -> None:
        await started.wait()
        raise RuntimeError("one session's assertion failed")

    async with NnrpServer(make_handler()) as srv:
        with pytest.raises(ExceptionGroup):
            async with anyio.create_task_group() as tg:
                for n in range(4):
                    tg.start_soon(session, n)
                tg.start_soon(failing)
        await _collect_on_loop()
        # the next test's traffic on a fresh client still flows (the CI run hung right here)
        async with await NnrpClient.connect(srv.address) as other:
            op = await other.submit(env("echo", text="after"), timeout=10)
            assert (await op.result()).event is not None
        assert [h.what for h in lifetime.open_objects() if "client" in h.what] == []
    assert_all_explicit_off_loop(close_log)
    assert sum(c.what == "NativeClientConnection" for c in close_log) == 5


async def test_cancelled_server_close_still_closes_the_listener(
    close_log: list[CloseCall],
) -> None:
    srv = NnrpServer(make_handler())
    await srv.start()
    async with await NnrpClient.connect(srv.address) as client:
        op = await client.submit(env("echo", text="x"), timeout=10)
        await op.result()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await srv.aclose()
    del srv
    await _collect_on_loop()
    assert [h.what for h in lifetime.open_objects() if "listener" in h.what] == []
    assert_all_explicit_off_loop(close_log)
    assert sum(c.what == "NativeServer" for c in close_log) == 1


async def test_a_client_never_closed_is_held_not_finalised(close_log: list[CloseCall]) -> None:
    """A leak (no aclose at all) stays visible and open until closed explicitly, off the loop."""
    async with NnrpServer(make_handler()) as srv:
        client = await NnrpClient.connect(srv.address)
        op = await client.submit(env("echo", text="x"), timeout=10)
        await op.result()
        del client, op
        await _collect_on_loop()
        leaked = [h for h in lifetime.open_objects() if "client" in h.what]
        assert len(leaked) == 1 and close_log == []
        with pytest.raises(RuntimeError, match="event-loop thread"):
            lifetime.close_blocking(leaked[0])
        assert await lifetime.aclose(leaked[0])
    assert_all_explicit_off_loop(close_log)
