"""The parity benchmark's lean NNRP client: what a production consumer would write on nnrp-py.

Owns :class:`LeanSession`, one nnrp-py session and one plain pump thread, the wire
benchmark's SDK-floor pattern (:class:`.wire_clients.FloorClient`: synchronous
``poll_events_batch(max_events=1)``, TCP_NODELAY applied) grown to several operations on a
session: the pump sends the submits queued from the event loop between its polls (a submit
made from another thread would wait for the poll anyway: calls on a session are serialised,
notes §3), routes each frame to its operation by frame id, and per token does what the HTTP
client (:class:`.http_sse.HttpConnection`) does: read the frame, decode its JSON, take the
text delta, stamp and count it. Nothing is recorded or judged; the operation's sample reaches
the event loop once, at its terminal. With no operation in flight the pump does not poll (it
waits on an event), so an idle lean session costs the client nothing.

The suite's :class:`nnrp_conformance.client.NnrpClient` records every frame and judges it as it
goes; it stays the parity benchmark's second NNRP column.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
from nnrp.client import NativeClientSessionOptions, connect_native_client_connection
from nnrp.core import MessageType
from nnrp.native import (
    NativeRuntimeError,
    NativeRuntimeEvent,
    NativeWouldBlockError,
)

from nnrp_conformance import contract
from nnrp_conformance.wire import codec, nodelay
from nnrp_conformance.wire.pump import client_options, parse_address

from .http_sse import RequestSample

#: the pump's wait in one poll while operations are in flight. A poll returns as soon as a
#: frame arrives, so the wait bounds only how long a submit queued meanwhile waits behind an
#: empty poll; but nnrp-py has no wakeable poll and an empty one costs 100-300 µs of CPU
#: (docs/performance.md#idle-sessions). A session shared by concurrent streams takes new
#: submits while it polls: short waits. A session per stream never has a submit queued while
#: it polls (its one operation is in flight): long waits, few empty polls.
SHARED_POLL_MS = 2
OWN_POLL_MS = 50
#: the pump's wait for work when nothing is in flight (no poll then)
IDLE_WAIT_S = 0.5
#: consecutive failed polls that mean the server is gone: a dead peer answers every poll at
#: once with 3/4/105, a stale frame of a finished operation once (notes §6.6, §7)
GONE_AFTER = 32
_DELTA = contract.EV_OUTPUT_TEXT_DELTA
_USAGE = contract.EV_USAGE


@dataclass
class _Op:
    fut: asyncio.Future[RequestSample]
    sample: RequestSample
    env: dict[str, Any]
    text: list[str] = field(default_factory=list)


class LeanSession:
    """One session; :meth:`run` streams one chat and returns what its client saw."""

    def __init__(
        self, cm: Any, session: Any, loop: asyncio.AbstractEventLoop, poll_ms: int
    ) -> None:
        self._cm, self._session, self._loop, self._poll_ms = cm, session, loop, poll_ms
        self._submits: queue.SimpleQueue[_Op] = queue.SimpleQueue()
        self._work = threading.Event()
        self._closing = False
        self._next_id = 0
        self._ops: dict[int, _Op] = {}  # by frame id; the pump thread's alone
        self._thread = threading.Thread(target=self._pump, name="lean-nnrp-pump", daemon=True)
        self._thread.start()

    @classmethod
    async def connect(cls, target: str, *, shared: bool = True) -> LeanSession:
        """A session to ``target``; ``shared``: concurrent streams will share it."""
        cm = connect_native_client_connection(client_options(parse_address(target)))
        conn = cm.__enter__()
        try:
            session = await conn.open_session(
                NativeClientSessionOptions(profile_id=contract.WIRE_SESSION_PROFILE_ID)
            )
        except BaseException:
            cm.__exit__(None, None, None)
            raise
        nodelay.apply_nodelay()  # nnrp-py sets no TCP_NODELAY (docs/sdk-defects.md #1)
        poll_ms = SHARED_POLL_MS if shared else OWN_POLL_MS
        return cls(cm, session, asyncio.get_running_loop(), poll_ms)

    async def run(self, env: dict[str, Any], timeout: float = 120.0) -> RequestSample:
        """Stream ``env``; a timeout or a lost session is one failed sample, never a raise."""
        op = _Op(self._loop.create_future(), RequestSample(time.perf_counter_ns()), env)
        self._submits.put(op)
        self._work.set()
        try:
            with anyio.fail_after(timeout):
                return await asyncio.shield(op.fut)
        except TimeoutError:
            op.sample.error = f"TimeoutError: no terminal within {timeout:g} s"
            return op.sample

    async def close(self) -> None:
        self._closing = True
        self._work.set()
        await anyio.to_thread.run_sync(self._thread.join, 15.0)

    # --- the pump thread -----------------------------------------------------------------

    def _pump(self) -> None:
        failed = 0
        try:
            while not self._closing and failed < GONE_AFTER:
                self._send_submits()
                if not self._ops:
                    self._work.wait(IDLE_WAIT_S)
                    self._work.clear()
                    continue
                try:
                    events = self._session.poll_events_batch(max_events=1, timeout_ms=self._poll_ms)
                except NativeWouldBlockError:
                    continue
                except NativeRuntimeError:
                    failed += 1
                    continue
                failed = 0
                now = time.perf_counter_ns()
                for ev in events:
                    if isinstance(ev, NativeRuntimeEvent):
                        self._route(ev, now)
        finally:
            why = "server gone" if failed >= GONE_AFTER else "session closed"
            for op in list(self._ops.values()):
                self._finish(op, f"{why} with the operation in flight")
            self._ops.clear()
            # a dead server cannot ack the close (notes §7)
            with contextlib.suppress(NativeRuntimeError):
                self._session.close()
            self._cm.__exit__(None, None, None)

    def _send_submits(self) -> None:
        while True:
            try:
                op = self._submits.get_nowait()
            except queue.Empty:
                return
            self._next_id += 1
            try:
                self._session.submit_operation(
                    codec.build_submit(self._next_id, self._next_id, op.env)
                )
            except NativeRuntimeError as exc:
                self._finish(op, f"submit failed: {exc}")
                continue
            self._ops[self._next_id] = op

    def _route(self, ev: NativeRuntimeEvent, now: int) -> None:
        op = self._ops.get(ev.header.frame_id)
        if op is None:
            return
        mt = ev.header.message_type
        if mt is MessageType.PARTIAL_RESULT:
            # per token, what the HTTP client does per SSE chunk: decode, take the text, count
            event = json.loads(bytes(ev.tail.body))
            kind = event.get("type")
            if kind == _DELTA:
                op.sample.content_ns.append(now)
                op.text.append(event.get("delta", ""))
            elif kind == _USAGE:
                op.sample.tokens = (event.get("usage") or {}).get("output_tokens")
            return
        del self._ops[ev.header.frame_id]
        op.sample.finished_ns = now
        if mt is MessageType.RESULT_PUSH:
            try:
                terminal = codec.decode_result_push(ev.metadata.value, bytes(ev.tail.body))
            except codec.WireViolation as exc:
                self._finish(op, f"bad terminal: {exc}")
                return
            kind = (terminal or {}).get("type", contract.EV_COMPLETED)
            self._finish(op, None if kind == contract.EV_COMPLETED else f"terminal {kind}")
        else:
            self._finish(op, f"terminal {mt.name}")

    def _finish(self, op: _Op, error: str | None) -> None:
        op.sample.text = "".join(op.text)
        op.sample.error = error
        self._loop.call_soon_threadsafe(_resolve, op.fut, op.sample)


def _resolve(fut: asyncio.Future[RequestSample], sample: RequestSample) -> None:
    if not fut.done():
        fut.set_result(sample)
