"""The wire benchmark's three clients, one per server: the naive public-API client, the
floor client (the SDK's per-frame cost) and ours (the suite's ``NnrpClient``); each runs one
operation and returns its frames' receive times."""

from __future__ import annotations

import time
from typing import Any

import anyio
from nnrp.client import NativeClientSessionOptions, connect_native_client_connection
from nnrp.core import MessageType
from nnrp.native import NativeInvalidStateError, NativeRuntimeEvent, NativeWouldBlockError

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient
from nnrp_conformance.wire import codec, nodelay
from nnrp_conformance.wire.pump import client_options, parse_address

from .servers import TERMINALS


class NaiveClient:
    """Public async API: submit_operation + ``await session.next_event()`` per event."""

    def __init__(self, cm: Any, conn: Any, session: Any) -> None:
        self.cm, self.conn, self.session, self.next_id = cm, conn, session, 0

    @classmethod
    async def connect(cls, target: str) -> NaiveClient:
        cm = connect_native_client_connection(client_options(parse_address(target)))
        conn = cm.__enter__()
        session = await conn.open_session(
            NativeClientSessionOptions(profile_id=contract.WIRE_SESSION_PROFILE_ID)
        )
        return cls(cm, conn, session)

    async def run(self, env: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        # the clock starts before the submit is built, as in our client: building it is part
        # of every client's submit (nnrp-py's typed builder alone takes ~70 µs here)
        t0 = time.perf_counter_ns()
        self.session.submit_operation(codec.build_submit(self.next_id, self.next_id, env))
        recv: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ev = await self.session.next_event(timeout=5.0)
            if isinstance(ev, NativeRuntimeEvent):
                mt = ev.header.message_type
                if mt is MessageType.PARTIAL_RESULT:
                    recv.append((time.perf_counter_ns(), bytes(ev.tail.body)))
                elif mt in TERMINALS:
                    return {"t0": t0, "recv": recv, "end": time.perf_counter_ns()}
        raise TimeoutError("naive op did not finish")

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self.session.close)
        self.cm.__exit__(None, None, None)


class FloorClient:
    """The client half of the floor: a plain thread that submits and polls one event at a
    time synchronously (notes §5 "fast1"), run off the event loop for each operation."""

    def __init__(self, cm: Any, conn: Any, session: Any) -> None:
        self.cm, self.conn, self.session, self.next_id = cm, conn, session, 0

    @classmethod
    async def connect(cls, target: str) -> FloorClient:
        c = await NaiveClient.connect(target)
        nodelay.apply_nodelay()
        return cls(c.cm, c.conn, c.session)

    def _run_sync(self, env: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        t0 = time.perf_counter_ns()  # before the build, as for the other clients
        self.session.submit_operation(codec.build_submit(self.next_id, self.next_id, env))
        recv: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                events = self.session.poll_events_batch(max_events=1, timeout_ms=5)
            except (NativeWouldBlockError, NativeInvalidStateError):
                continue
            for ev in events:
                if not isinstance(ev, NativeRuntimeEvent):
                    continue
                mt = ev.header.message_type
                if mt is MessageType.PARTIAL_RESULT:
                    recv.append((time.perf_counter_ns(), bytes(ev.tail.body)))
                elif mt in TERMINALS:
                    return {"t0": t0, "recv": recv, "end": time.perf_counter_ns()}
        raise TimeoutError("floor op did not finish")

    async def run(self, env: dict[str, Any]) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(self._run_sync, env)

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self.session.close)
        self.cm.__exit__(None, None, None)


class OursClient:
    def __init__(self, client: NnrpClient) -> None:
        self.client = client

    @classmethod
    async def connect(cls, target: str) -> OursClient:
        return cls(await NnrpClient.connect(target))

    async def run(self, env: dict[str, Any]) -> dict[str, Any]:
        op = await self.client.submit(env, timeout=60)
        recv = [(e.received_at_ns, e.raw) async for e in op if e.kind == "partial"]
        assert op.terminal is not None and op.terminal.delivery == "result_push", op.terminal
        return {"t0": op.submitted_at_ns, "recv": recv, "end": op.terminal.received_at_ns}

    async def close(self) -> None:
        await self.client.aclose()
