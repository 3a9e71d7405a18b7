"""The wire benchmark's three servers, each run in its own process: ``ours`` (the adapter's
server binding), ``naive`` (the nnrp-py public API as its examples use it) and ``floor``
(the SDK's own per-frame cost, the pump's native sends without our binding), all serving
the same bench handler that stamps each delta at yield time."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any

import anyio
from nnrp.core import MessageType
from nnrp.native import NativeInvalidStateError, NativeWouldBlockError
from nnrp.runtime import PartialResultMetadata
from nnrp.server import NativeServerEventKind, listen_native_server

from nnrp_conformance import contract
from nnrp_conformance.wire import codec, nodelay
from nnrp_conformance.wire.pump import parse_address, server_options
from vllm_nnrp_adapter.nnrp_server import NnrpServer, sdk

TERMINALS = {MessageType.RESULT_PUSH, MessageType.RESULT_DROP, MessageType.RESULT_DROP_REASON}


async def bench_handler(ctx: Any) -> Any:
    """n deltas (each carrying its yield time), ``gap_us`` apart, then response.completed."""
    body = ctx.envelope.get("body", {})
    n, gap = int(body.get("n", 5)), float(body.get("gap_us", 0)) / 1e6
    for i in range(n):
        if gap:
            await anyio.sleep(gap)
        yield {
            "type": contract.EV_OUTPUT_TEXT_DELTA,
            "index": 0,
            "delta": str(time.perf_counter_ns()),
        }
        if not gap and i % 64 == 63:
            await anyio.sleep(0)
    yield {"type": contract.EV_COMPLETED, "body": {"n": n}}


def envelope(n: int, gap_us: float = 0) -> dict[str, Any]:
    return {
        "schema_version": contract.SCHEMA_VERSION,
        "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
        "body": {"n": n, "gap_us": gap_us},
    }


async def serve_ours(listen: str) -> None:
    async with NnrpServer(bench_handler, listen) as srv:
        print(srv.address, flush=True)
        await _until_stdin_closes()


async def serve_naive(listen: str) -> None:
    """The natural nnrp-py pattern (notes §4.1): reader task with a 2 ms next_event slice,
    one task per operation awaiting send_partial_result / send_result; no TCP_NODELAY."""
    opts = server_options(parse_address(listen))
    with listen_native_server(opts) as server:
        print(server.bound_provider_endpoints["tcp"].uri.split("://", 1)[1], flush=True)
        stop = asyncio.ensure_future(_until_stdin_closes())
        tasks: set[asyncio.Task[None]] = set()
        while not stop.done():
            try:
                sess = await _accept(server)
            except NativeWouldBlockError:
                continue
            t = asyncio.ensure_future(_naive_session(sess))
            tasks.add(t)
            t.add_done_callback(tasks.discard)


class _Ctx:
    def __init__(self, env: dict[str, Any]) -> None:
        self.envelope = env


async def _naive_op(op: Any) -> None:
    md = op.submit.metadata.value
    env = codec.decode_submit(md, bytes(op.submit.tail.body))
    seq = 0
    try:
        async for ev in bench_handler(_Ctx(env)):
            if ev["type"] in contract.TERMINAL_EVENT_TYPES:
                rmd, body = codec.encode_result_push(op.frame_id, ev)
                await op.send_result(rmd, body)
                return
            seq += 1
            b = codec.encode_event(ev)
            await op.send_partial_result(
                PartialResultMetadata(op.operation_id, seq, 0, seq, len(b), 0), b
            )
    except NativeInvalidStateError:
        return


async def _naive_session(sess: Any) -> None:
    tasks: set[asyncio.Task[None]] = set()
    while True:
        try:
            ev = await sess.next_event(timeout=0.002)
        except NativeWouldBlockError:
            continue
        except NativeInvalidStateError:
            await asyncio.sleep(0.001)
            continue
        if ev.kind is NativeServerEventKind.SUBMIT:
            t = asyncio.ensure_future(_naive_op(ev.as_submit()))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
        elif (
            ev.kind is NativeServerEventKind.RUNTIME
            and ev.as_runtime().header.message_type is MessageType.SESSION_CLOSE
        ):
            sess.close()
            return


def _floor_session(sess: Any) -> None:
    """nnrp-py's fastest measured pattern (notes §5 "fast"): one OS thread owns the session,
    polls synchronously one event at a time, runs the handler inline as a plain loop and
    sends with the blocking call, re-polling for cancels only every 10 ms. No event loop,
    no hand-off between threads: the floor any binding of an async handler can approach."""

    backlog: list[Any] = []
    closing = False

    def take(events: Any) -> bool:
        for ev in events:
            if ev.kind is NativeServerEventKind.SUBMIT:
                backlog.append(ev.as_submit())
            elif (
                ev.kind is NativeServerEventKind.RUNTIME
                and ev.as_runtime().header.message_type is MessageType.SESSION_CLOSE
            ):
                return True
        return False

    def poll() -> Any:
        try:
            return sess.poll_events(max_events=1, timeout_ms=1)
        except (NativeWouldBlockError, NativeInvalidStateError):
            return ()

    while not closing:
        closing = take(poll())
        while backlog:
            op = backlog.pop(0)
            body = codec.decode_submit(op.submit.metadata.value, bytes(op.submit.tail.body))["body"]
            n, gap = int(body.get("n", 5)), float(body.get("gap_us", 0)) / 1e6
            last_poll = time.perf_counter()
            for i in range(n):
                if gap:
                    time.sleep(gap)
                if time.perf_counter() - last_poll > 0.010:
                    closing = take(poll()) or closing
                    last_poll = time.perf_counter()
                b = codec.encode_event(
                    {
                        "type": contract.EV_OUTPUT_TEXT_DELTA,
                        "index": 0,
                        "delta": str(time.perf_counter_ns()),
                    }
                )
                sdk.send_partial(
                    op, PartialResultMetadata(op.operation_id, i + 1, 0, i + 1, len(b), 0), b
                )
            md, rb = codec.encode_result_push(
                op.frame_id, {"type": contract.EV_COMPLETED, "body": {"n": n}}
            )
            sdk.send_result(op, md, rb)
    sess.close()


async def serve_floor(listen: str) -> None:
    opts = server_options(parse_address(listen))
    with listen_native_server(opts) as server:
        print(server.bound_provider_endpoints["tcp"].uri.split("://", 1)[1], flush=True)
        stop = asyncio.ensure_future(_until_stdin_closes())
        while not stop.done():
            try:
                sess = await _accept(server)
            except NativeWouldBlockError:
                continue
            nodelay.apply_nodelay()
            threading.Thread(target=_floor_session, args=(sess,), daemon=True).start()


async def _accept(server: Any) -> Any:
    """One 200-ms accept slice that keeps its accept ticket when it times out: nnrp-py's own
    ``accept`` gives the ticket back, and a client handshaking at that moment gets a session
    nobody serves (docs/sdk-defects.md#accept-timeout)."""
    return await anyio.to_thread.run_sync(sdk.accept_blocking, server, 200)


async def _until_stdin_closes() -> None:
    await anyio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)
