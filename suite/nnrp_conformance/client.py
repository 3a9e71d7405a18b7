"""The suite's NNRP client: one connection, one session, many operations, every frame kept.

Owns the client end of the wire (spec §3) on nnrp-py: connect, submit envelopes (or
deliberately malformed frames), iterate each operation's events with receive timestamps,
real FRAME_CANCEL, per-operation timeouts, the discovery operation, and the wire-level
findings the suite's checks read (``Operation.wire_findings``).

Threading (docs/wire-pump.md): nnrp-py's calls block and are serialised per session, so
one pump thread owns the session. It runs submit/cancel/close commands between polls,
polls one event at a time (a multi-event poll lingers 2-3 ms and loses the whole batch on
a stale event) only while operations are in flight, decodes and timestamps each frame
and hands it to the operation's async iterator. Nothing here can hang: every wait is
bounded, and a flood is capped per operation.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import itertools
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
from nnrp.client import NativeClientSessionOptions, connect_native_client_connection
from nnrp.core import MessageType
from nnrp.native import (
    NativeInvalidStateError,
    NativeLifecycleEvent,
    NativeRuntimeError,
    NativeRuntimeEvent,
    NativeWouldBlockError,
)
from nnrp.runtime import OperationState

from nnrp_conformance import contract
from nnrp_conformance.terminals import terminal_kind_of
from nnrp_conformance.wire import codec, lifetime, nodelay
from nnrp_conformance.wire.codec import RawFrame, WireViolation
from nnrp_conformance.wire.pump import (
    DETAIL_STALE_OR_GONE,
    ThreadChannel,
    client_options,
    detail_code,
    parse_address,
    status_text,
    unreachable_reason,
)

__all__ = ["NnrpClient", "NnrpClientError", "Operation", "RawFrame", "ReceivedEvent", "Terminal"]

_EVENT_KIND_OPERATION_LIFECYCLE = 14
_IDLE_WAIT_S = 0.05
_TERMINAL_TYPES = frozenset(
    (MessageType.RESULT_PUSH, MessageType.RESULT_DROP_REASON, MessageType.RESULT_DROP)
)
# A server flooding a cancelled stream can leave thousands of its frames queued ahead of
# the drop that answers the cancel; past this, a silent server no longer excuses 3/4/105.
_CANCEL_CONFIRM_LIMIT_NS = 60 * 1_000_000_000
# Operations in flight on every client of this process (set add/discard are atomic under the
# GIL). A submit is sent from the event loop only when this is empty: see NnrpClient.submit.
_IN_FLIGHT: set[Operation] = set()
# Wake-up coalescing (docs/wire-pump.md): a partial arriving within HOLD_GAP of the previous
# one is handed over without waking the reader; the held wake-up is given when a poll comes
# back empty, or once the oldest held event has waited HOLD_MAX. Paced streams (a gap above
# HOLD_GAP), first events and terminals are handed over at once.
_HOLD_GAP_NS = 300_000
_HOLD_MAX_NS = 1_000_000
# Bulk polling: once an operation has streamed BULK_AFTER partials and its mean gap between
# partials (an EWMA) is under BULK_GAP, the session is polled for up to BULK_MAX frames at a
# time: nnrp-py's per-call cost is about half of its per-event cost. Never while a cancel is
# unanswered (a stale frame makes nnrp-py drop the whole batch), and never for short or
# paced streams (a poll for several frames lingers 2-3 ms waiting to fill, notes §3).
_BULK_AFTER = 64
_BULK_GAP_NS = 500_000
_BULK_MAX = 16


class NnrpClientError(RuntimeError):
    """Connecting, submitting or closing failed; the message says which and why."""


@dataclass(slots=True)
class ReceivedEvent:
    kind: str  # "partial" | "terminal"
    received_at_ns: int
    message_type: str
    raw: bytes
    event: dict[str, Any] | None
    decode_error: str | None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Terminal:
    delivery: (
        str  # "result_push" | "result_drop" | "local_cancelled" | "timeout" | "transport_error"
    )
    event: dict[str, Any] | None
    status_code: int | None = None
    drop_reason: int | None = None
    detail: str = ""
    diagnostics: dict[str, Any] = field(default_factory=dict)
    received_at_ns: int | None = None

    @property
    def outcome(self) -> str | None:
        """The profile terminal kind this delivery amounts to (the one rule: terminals.py)."""
        return terminal_kind_of(self)


_DONE = object()


class Operation:
    """One submitted operation. Iterate it for its events; ``terminal`` is set when it ends."""

    def __init__(
        self,
        client: NnrpClient,
        operation_id: int,
        frame_id: int,
        timeout: float | None,
        max_events: int,
        idle_timeout: float | None = None,
    ) -> None:
        self._client = client
        self.operation_id = operation_id
        self.frame_id = frame_id
        self.submitted_at_ns = time.perf_counter_ns()
        self.sent_at_ns: int | None = None
        self.timeout = timeout
        # no frame from the endpoint for this long while the operation is open ends it too
        self.idle_timeout = idle_timeout
        self.max_events = max_events
        # perf_counter_ns of the last frame the endpoint sent for this operation (or of the
        # submit): the idle limit counts from here
        self.last_frame_ns = self.submitted_at_ns
        self.expired_by: str | None = None  # "deadline" | "idle" when the client gave up
        self.terminal: Terminal | None = None
        self.received: list[ReceivedEvent] = []
        self.wire_findings: list[dict[str, Any]] = []
        self.cancel_sent_at_ns: int | None = None
        self.local_cancelled_at_ns: int | None = None
        self.stale_after_cancel = 0
        self._native: Any = None
        self._chan = ThreadChannel(client._loop)
        self._iterated = False
        # pump-thread state
        self._partials = 0
        self._last_result_sequence = 0
        self._last_partial_ns = 0
        self._gap_ewma_ns = float(_BULK_GAP_NS)  # mean gap between partials
        self._done_in_pump = False
        # the pump itself sends the cancel when this many partials have arrived (see submit)
        self.cancel_after_partials: int | None = None

    # --- async side ----------------------------------------------------------------------
    def __aiter__(self) -> AsyncIterator[ReceivedEvent]:
        if self._iterated:
            raise NnrpClientError(
                f"operation {self.operation_id} can be iterated once; use .received"
            )
        self._iterated = True
        return _EventIterator(self)

    async def _expire(self, by: str = "deadline") -> None:
        self.expired_by = by
        if by == "idle":
            detail = (
                f"idle: no frame from the endpoint for {self.idle_timeout:.3f}s while the "
                f"operation was open"
            )
        elif self.cancel_sent_at_ns is not None:
            # The client's own lifecycle CANCELLED (if any) is local: only the endpoint's
            # drop or response.cancelled answers a cancel (docs/verdicts.md#cancel).
            detail = (
                f"the endpoint never answered the cancel: no RESULT_DROP_REASON and no "
                f"response.cancelled for the frame within the operation's {self.timeout:.3f}s"
            )
        else:
            detail = (
                f"no terminal within {self.timeout:.3f}s; a FRAME_CANCEL was sent and later "
                f"results are findings"
            )
        self._client._finish(self, Terminal("timeout", None, detail=detail))
        if self.cancel_sent_at_ns is None:
            with contextlib.suppress(NnrpClientError):
                await self.cancel()

    async def result(self) -> Terminal:
        """Drain the remaining events and return the terminal (never None)."""
        if not self._iterated:
            async for _ in self:
                pass
        else:
            while self.terminal is None:
                await anyio.sleep(0.001)
        assert self.terminal is not None
        return self.terminal

    @property
    def events(self) -> list[dict[str, Any] | None]:
        """Decoded partial events received so far (evidence order)."""
        return [e.event for e in self.received if e.kind == "partial"]

    async def cancel(self) -> int:
        """Send a real NNRP FRAME_CANCEL; returns perf_counter_ns when it was sent."""
        if self.cancel_sent_at_ns is not None:
            return self.cancel_sent_at_ns
        fut = self._client._command("cancel", self)
        await self._client._await(
            fut, self._client.command_timeout, f"cancel of operation {self.operation_id}"
        )
        sent = self._cancel_sent()  # set by the pump thread while this task awaited
        assert sent is not None
        return sent

    def _cancel_sent(self) -> int | None:
        return self.cancel_sent_at_ns

    def finding(self, rule: str, detail: str, **extra: Any) -> None:
        self.wire_findings.append(
            {"rule": rule, "detail": detail, "operation_id": self.operation_id, **extra}
        )


class _EventIterator:
    """An operation's events as they arrive, until its terminal, its deadline or its idle limit.

    A plain ``__anext__`` rather than an async generator with a cancel scope per wait: this
    runs once per event, and the operation's limits are one loop timer for the whole
    iteration instead of one scope per wait. The idle limit moves with every frame, so a
    timer that fires early is simply re-armed for the new due time.
    """

    __slots__ = ("_deadline", "_op", "_timer", "_timer_at")

    def __init__(self, op: Operation) -> None:
        self._op = op
        self._deadline = None if op.timeout is None else time.perf_counter() + op.timeout
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def __aiter__(self) -> _EventIterator:
        return self

    def _due(self) -> tuple[float, str] | None:
        """The next limit (perf_counter seconds) and which one it is, or None."""
        op = self._op
        idle = None if op.idle_timeout is None else op.last_frame_ns / 1e9 + op.idle_timeout
        if idle is not None and (self._deadline is None or idle < self._deadline):
            return idle, "idle"
        return None if self._deadline is None else (self._deadline, "deadline")

    async def __anext__(self) -> ReceivedEvent:
        op = self._op
        chan = op._chan
        while True:
            try:
                item = chan.get_nowait()
            except IndexError:
                due = self._due()
                if due is not None:
                    now = time.perf_counter()
                    if now >= due[0]:
                        self._stop_timer()
                        await op._expire(due[1])
                        raise StopAsyncIteration from None
                    if self._timer is None or self._timer_at <= now:
                        self._stop_timer()
                        self._timer = op._client._loop.call_later(
                            due[0] - now, chan.wake_reader
                        )
                        self._timer_at = due[0]
                await chan.wait()
                continue
            if item is _DONE:
                self._stop_timer()
                raise StopAsyncIteration
            return cast(ReceivedEvent, item)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class NnrpClient:
    """One nnrp-py connection and one session; async context manager."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._conn_held: lifetime.Held | None = None
        self._conn: Any = None
        self._session: Any = None
        self._ids = itertools.count(1)
        self._ops: dict[int, Operation] = {}  # by frame id, in flight
        self._by_op_id: dict[int, Operation] = {}  # in flight, for lifecycle events
        # frame id -> give-up time (ns) of each cancel the server has not answered yet: its
        # stale frames (3/4/105 on poll) are expected until then, even after a local finish
        self._unconfirmed_cancels: dict[int, int] = {}
        self._finished: collections.OrderedDict[int, Operation] = collections.OrderedDict()
        # operations whose reader has not been woken for events already handed over -> since (ns)
        self._held: dict[Operation, int] = {}
        self._bulk: Operation | None = None  # the hot stream that allows bulk polls
        self._commands: collections.deque[tuple[str, Any, concurrent.futures.Future[Any]]] = (
            collections.deque()
        )
        self._wake = threading.Event()
        # held around every native call on the session: by the pump, or by the loop thread
        # for a submit made while the pump is idle (it then skips the hand-off to the pump)
        self._native_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._broken: str | None = None
        self.target = ""
        self.transport = ""
        self.default_timeout: float | None = 30.0
        self.max_events = 100_000
        self.cancel_grace = 2.0
        # how long a submit or cancel may wait for this client's own pump to put it on the
        # wire (a local bound: nothing the endpoint does is judged by it)
        self.command_timeout = 10.0
        self.stale_errors = 0
        # frames the endpoint sent on this session, and the last one: (message type, ns)
        self.frames_received = 0
        self.last_frame: tuple[str, int] | None = None
        self.bulk_polls = 0  # polls that asked for more than one frame (evidence, benchmarks)

    # --- lifecycle -------------------------------------------------------------------------
    @classmethod
    async def connect(
        cls,
        target: str,
        *,
        connect_timeout: float = 10.0,
        default_timeout: float | None = 30.0,
        max_events: int = 100_000,
        command_timeout: float = 10.0,
    ) -> NnrpClient:
        """Connect to ``host:port``, ``[::1]:port`` or a scheme URL and open one session.

        ``command_timeout`` bounds how long a submit or a cancel waits for the client's own
        pump thread to send it (raised where the machine itself can stall for seconds)."""
        self = cls()
        self.target = target
        self.command_timeout = command_timeout
        self.default_timeout = default_timeout
        self.max_events = max_events
        endpoint = parse_address(target)
        self.transport = endpoint.transport
        opts = client_options(endpoint)

        gave_up = threading.Event()
        handover = threading.Lock()

        def enter() -> None:
            held, conn = lifetime.enter(
                lambda: connect_native_client_connection(opts), f"client connection to {target}"
            )
            with handover:
                if not gave_up.is_set():
                    self._conn_held, self._conn = held, conn
                    return
            # The caller timed out and went on: close it here, on this (blocking) thread.
            lifetime.close_blocking(held)

        phase = "the connection (transport and handshake) was not established"
        try:
            with anyio.fail_after(connect_timeout):
                await anyio.to_thread.run_sync(enter, abandon_on_cancel=True)
                phase = "the connection was established, the session open was not answered"
                self._session = await self._conn.open_session(
                    NativeClientSessionOptions(profile_id=contract.WIRE_SESSION_PROFILE_ID)
                )
        except TimeoutError:
            with handover:
                gave_up.set()
            await self._drop_connection()
            raise NnrpClientError(
                f"connect to {target}: no session within {connect_timeout}s ({phase})"
            ) from None
        except NativeRuntimeError as exc:
            await self._drop_connection()
            reason = await anyio.to_thread.run_sync(unreachable_reason, endpoint)
            raise NnrpClientError(
                reason or f"connect to {target}: {status_text(exc)}: {exc}"
            ) from None
        except OSError as exc:
            await self._drop_connection()
            raise NnrpClientError(f"connect to {target}: {exc}") from None
        except BaseException:
            # cancelled from outside: the connect thread may still hand a connection over
            with handover:
                gave_up.set()
            await self._drop_connection()
            raise
        if endpoint.transport in ("tcp", "websocket"):
            nodelay.apply_nodelay()
        self._thread = threading.Thread(
            target=self._pump, name=f"nnrp-client-pump {target}", daemon=True
        )
        self._thread.start()
        return self

    async def __aenter__(self) -> NnrpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _drop_connection(self) -> None:
        held, self._conn_held = self._conn_held, None
        await lifetime.aclose(held)

    async def aclose(self, *, timeout: float = 5.0) -> None:
        """Close the session (waits for the server's ack, bounded) and the connection.

        Shielded and bounded (about 2 x ``timeout`` + the connection's close bound): a caller
        cancelled mid-close (a failing task group, a timed-out test) must still close the
        connection explicitly, or it is left to the garbage collector (see ``wire.lifetime``).
        """
        if self._closing:
            return
        self._closing = True
        with anyio.CancelScope(shield=True):
            try:
                for op in list(self._ops.values()):
                    self._finish(
                        op,
                        Terminal(
                            "transport_error",
                            None,
                            detail="client closed with the operation in flight",
                        ),
                    )
                if self._thread is not None:
                    fut = self._command("close", None)
                    with contextlib.suppress(NnrpClientError):
                        await self._await(fut, timeout, "session close")
                    await anyio.to_thread.run_sync(self._thread.join, timeout)
            finally:
                await self._drop_connection()

    # --- operations --------------------------------------------------------------------------
    async def submit(
        self,
        envelope: dict[str, Any] | bytes | None = None,
        *,
        timeout: float | None = -1.0,
        frames: list[RawFrame] | None = None,
        max_events: int | None = None,
        idle_timeout: float | None = None,
        cancel_after_partials: int | None = None,
    ) -> Operation:
        """Submit one FRAME_SUBMIT; see module docstring. ``timeout=-1`` means the client default;
        ``idle_timeout`` ends the operation when the endpoint sends nothing for that long.

        ``cancel_after_partials=N``: the pump thread sends the cancel the moment the N-th
        partial arrives, however far the reader is behind (a reader on a starved event loop
        can lag the wire by a whole answer, so a cancel it sends after reading N partials may
        leave when the answer has already ended: measured, docs/performance.md)."""
        if self._closing:
            raise NnrpClientError("client is closed")
        if self._broken:
            raise NnrpClientError(f"connection is broken: {self._broken}")
        ident = next(self._ids)
        op = Operation(
            self,
            ident,
            ident,
            self.default_timeout if timeout == -1.0 else timeout,
            max_events or self.max_events,
            idle_timeout,
        )
        try:
            request = codec.build_submit(ident, ident, envelope, frames=frames)
        except (ValueError, TypeError) as exc:
            raise NnrpClientError(f"nnrp-py refuses to build this submit: {exc}") from exc
        op.cancel_after_partials = cancel_after_partials
        self._ops[op.frame_id] = op
        self._by_op_id[op.operation_id] = op
        # With nothing in flight anywhere in the process, the loop submits at once: handing
        # the submit to the pump thread costs a thread wake-up (~100 us here) on the critical
        # path of the first event. Not under load: a native call releases the GIL, the loop
        # (the busiest thread) then waits to get it back from the pump threads, and inline
        # submits cut the 64-session load test's throughput by a quarter. Queued commands
        # keep their order: they go first.
        inline = not _IN_FLIGHT and not self._commands
        _IN_FLIGHT.add(op)
        if inline and self._native_lock.acquire(blocking=False):
            try:
                self._run_command("submit", (op, request))
            except NativeRuntimeError as exc:
                self._unregister(op)
                raise NnrpClientError(f"submit of operation {ident}: {status_text(exc)}") from None
            finally:
                self._native_lock.release()
            self._wake.set()
            return op
        fut = self._command("submit", (op, request))
        try:
            await self._await(fut, self.command_timeout, f"submit of operation {ident}")
        except NnrpClientError:
            self._unregister(op)
            raise
        return op

    def _unregister(self, op: Operation) -> None:
        """Take the operation out of the in-flight tables (it ended, or never reached the wire)."""
        self._ops.pop(op.frame_id, None)
        self._by_op_id.pop(op.operation_id, None)
        _IN_FLIGHT.discard(op)

    async def capabilities(self, *, timeout: float = 10.0) -> dict[str, Any]:
        """Run the discovery operation; returns the capability document."""
        op = await self.submit(
            {
                "schema_version": contract.SCHEMA_VERSION,
                "operation": contract.OP_CAPABILITIES_GET,
                "body": {},
            },
            timeout=timeout,
        )
        term = await op.result()
        ev = term.event
        if term.delivery != "result_push" or not ev or ev.get("type") != contract.EV_COMPLETED:
            raise NnrpClientError(
                f"{contract.OP_CAPABILITIES_GET} ended with {term.delivery}: "
                f"{ev if ev is not None else term.detail}"
            )
        body = ev.get("body")
        if not isinstance(body, dict):
            raise NnrpClientError(
                f"{contract.OP_CAPABILITIES_GET}: response.completed has no object body"
            )
        return body

    # --- plumbing ------------------------------------------------------------------------------
    def _command(self, kind: str, arg: Any) -> concurrent.futures.Future[Any]:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._commands.append((kind, arg, fut))
        self._wake.set()
        return fut

    async def _await(self, fut: concurrent.futures.Future[Any], timeout: float, what: str) -> Any:
        try:
            with anyio.fail_after(timeout):
                return await asyncio.wrap_future(fut)
        except TimeoutError:
            raise NnrpClientError(f"{what}: the session did not answer within {timeout}s") from None
        except NativeRuntimeError as exc:
            raise NnrpClientError(f"{what}: {status_text(exc)}") from None

    def _finish(self, op: Operation, terminal: Terminal) -> None:
        """Record the terminal once (any thread); later frames for the op become findings."""
        if op.terminal is not None:
            return
        if terminal.received_at_ns is None:
            terminal.received_at_ns = time.perf_counter_ns()
        op.terminal = terminal
        self._unregister(op)
        self._finished[op.frame_id] = op
        while len(self._finished) > 4096:
            self._finished.popitem(last=False)
        op._chan.put(_DONE)

    # --- pump thread ---------------------------------------------------------------------------
    def _pump(self) -> None:
        consecutive_gone = 0
        while True:
            if self._commands:
                with self._native_lock:
                    if not self._run_commands():
                        return
            self._check_cancel_grace()
            if not (self._ops or self._cancels_unconfirmed()) or self._broken:
                self._wake.wait(_IDLE_WAIT_S)
                self._wake.clear()
                continue
            try:
                with self._native_lock:
                    events = self._session.poll_events_batch(
                        max_events=self._poll_size(), timeout_ms=1
                    )
                consecutive_gone = 0
            except NativeWouldBlockError:
                self._release_held(None)
                continue
            except NativeInvalidStateError as exc:
                self._release_held(None)
                self._on_invalid_state(exc)
                consecutive_gone += 1
                if consecutive_gone > 64 and not self._cancels_unconfirmed():
                    self._broken = f"session unusable: {status_text(exc)}"
                    self._fail_all(self._broken)
                continue
            except NativeRuntimeError as exc:
                self._release_held(None)
                self._broken = f"poll failed: {status_text(exc)}"
                self._fail_all(self._broken)
                continue
            now = time.perf_counter_ns()
            for ev in events:
                self._route(ev, now)
            if self._held:
                self._release_held(now if events else None)

    def _poll_size(self) -> int:
        op = self._bulk
        if op is None:
            return 1
        if (
            op.terminal is None
            and op._gap_ewma_ns < _BULK_GAP_NS
            and op.cancel_sent_at_ns is None
            and not self._unconfirmed_cancels
        ):
            self.bulk_polls += 1
            return _BULK_MAX
        self._bulk = None
        return 1

    def _release_held(self, now: int | None) -> None:
        """Give held wake-ups: all of them (``now`` None: the stream paused), or those held too long."""
        if not self._held:
            return
        if now is None:
            held, self._held = self._held, {}
            for op in held:
                op._chan.flush()
            return
        # insertion order is hold order: only the head can be due
        while self._held:
            op, since = next(iter(self._held.items()))
            if now - since < _HOLD_MAX_NS:
                break
            del self._held[op]
            op._chan.flush()

    def _run_commands(self) -> bool:
        """Run the queued commands (native lock held); False once the session is closed."""
        while self._commands:
            kind, arg, fut = self._commands.popleft()
            if kind == "close":
                closed = self._close_session()
                if not fut.cancelled():
                    fut.set_result(closed)
                self._fail_all("session closed")
                return False
            # A waiter that gave up has cancelled its future; the command still ran (or
            # failed), and resolving a cancelled future must not kill the pump.
            try:
                result = self._run_command(kind, arg)
            except BaseException as exc:
                if not fut.cancelled():
                    fut.set_exception(exc)
            else:
                if not fut.cancelled():
                    fut.set_result(result)
        return True

    def _run_command(self, kind: str, arg: Any) -> Any:
        if kind == "submit":
            op, request = arg
            op.sent_at_ns = time.perf_counter_ns()
            op._native = self._session.submit_operation(request)
            return None
        if kind == "cancel":
            op = arg
            op.cancel_sent_at_ns = time.perf_counter_ns()
            if op._native is not None and not op._done_in_pump:
                try:
                    self._session.cancel(frame_id=op.frame_id)
                    self._unconfirmed_cancels[op.frame_id] = (
                        op.cancel_sent_at_ns + _CANCEL_CONFIRM_LIMIT_NS
                    )
                except NativeInvalidStateError:
                    # the runtime already forgot the frame (it ended); the cancel is moot
                    op.finding(
                        "client.cancel_after_end", "cancel sent after the runtime closed the frame"
                    )
            return None
        raise ValueError(kind)

    def _close_session(self) -> str:
        try:
            self._session.close()
            return "closed"
        except NativeRuntimeError as exc:
            # a dead or closed server answers close with 3/4/105 (notes §7): nothing to ack
            return f"close: {status_text(exc)}"

    def _cancels_unconfirmed(self) -> bool:
        """Whether a cancel still awaits the server's answer (expired ones are dropped)."""
        if not self._unconfirmed_cancels:
            return False
        # every limit is cancel time + one constant and a frame is cancelled once, so the
        # dict's insertion order is expiry order: only its head can have expired
        now = time.perf_counter_ns()
        pending = self._unconfirmed_cancels
        while pending:
            frame_id, limit = next(iter(pending.items()))
            if now < limit:
                break
            del pending[frame_id]
        return bool(pending)

    def _on_invalid_state(self, exc: NativeInvalidStateError) -> None:
        # A stale event of an operation we cancelled: the SDK raises instead of returning it,
        # and does not say which operation. Count it; it is evidence, not a protocol finding.
        if detail_code(exc) == DETAIL_STALE_OR_GONE:
            self.stale_errors += 1
            if self._unconfirmed_cancels:
                # a frame the endpoint sent, refused by nnrp-py: it shows the peer is alive
                now = time.perf_counter_ns()
                self.frames_received += 1
                self.last_frame = ("stale frame after a cancel (3/4/105)", now)
            for op in self._ops.values():
                if op.cancel_sent_at_ns is not None:
                    op.stale_after_cancel += 1
                    op.last_frame_ns = time.perf_counter_ns()
                    break

    def _fail_all(self, why: str) -> None:
        for op in list(self._ops.values()):
            self._finish(op, Terminal("transport_error", None, detail=why))

    def _check_cancel_grace(self) -> None:
        if not self._ops:
            return
        now = time.perf_counter_ns()
        for op in list(self._ops.values()):
            # An operation with a deadline waits for the endpoint's own answer until then;
            # the grace only bounds operations submitted without one.
            if (
                op.timeout is None
                and op.local_cancelled_at_ns is not None
                and now - op.local_cancelled_at_ns > self.cancel_grace * 1e9
            ):
                op._done_in_pump = True
                self._finish(
                    op,
                    Terminal(
                        "local_cancelled",
                        None,
                        detail=(
                            f"local lifecycle CANCELLED; no RESULT_DROP_REASON from the server within {self.cancel_grace}s"
                        ),
                    ),
                )

    def _route(self, ev: Any, now: int) -> None:
        if isinstance(ev, NativeRuntimeEvent):
            frame_id = ev.header.frame_id
            self.frames_received += 1
            self.last_frame = (ev.header.message_type.name, now)
            if ev.header.message_type in _TERMINAL_TYPES:
                self._unconfirmed_cancels.pop(frame_id, None)
            op = self._ops.get(frame_id)
            if op is None:
                late = self._finished.get(frame_id)
                if late is not None:
                    self._late_frame(late, ev, now)
                return
            op.last_frame_ns = now
            mt = ev.header.message_type
            if mt is MessageType.PARTIAL_RESULT:
                self._on_partial(op, ev, now)
            elif mt is MessageType.RESULT_PUSH:
                self._on_result_push(op, ev, now)
            elif mt in (MessageType.RESULT_DROP_REASON, MessageType.RESULT_DROP):
                self._on_drop(op, ev, now)
            else:
                op.received.append(
                    ReceivedEvent(
                        "other",
                        now,
                        mt.name,
                        bytes(ev.tail.body or ev.tail.diagnostic or b""),
                        None,
                        None,
                        {"frame_id": frame_id},
                    )
                )
        elif isinstance(ev, NativeLifecycleEvent) and ev.kind == _EVENT_KIND_OPERATION_LIFECYCLE:
            op_id = ev.diagnostic.related_operation_id
            op = self._by_op_id.get(op_id)
            if op is None or len(ev.payload) != 1:
                return
            state = OperationState(ev.payload[0])
            if state is OperationState.CANCELLED and op.terminal is None:
                op.local_cancelled_at_ns = now
                op.received.append(
                    ReceivedEvent(
                        "lifecycle",
                        now,
                        "LIFECYCLE_CANCELLED",
                        bytes(ev.payload),
                        None,
                        None,
                        {"operation_id": op_id, "state": state.name},
                    )
                )

    def _late_frame(self, op: Operation, ev: Any, now: int) -> None:
        mt = ev.header.message_type
        if (
            op.terminal is not None
            and op.terminal.delivery == "local_cancelled"
            and mt is MessageType.RESULT_DROP_REASON
        ):
            # The server's drop answering our own cancel, slower than the grace we waited:
            # the same logical terminal (spec §3), arriving late, not a frame after it.
            op.received.append(
                ReceivedEvent(
                    "late_drop",
                    now,
                    mt.name,
                    bytes(ev.tail.diagnostic or b""),
                    None,
                    None,
                    {"frame_id": ev.header.frame_id},
                )
            )
            return
        after = (
            "after its terminal"
            if op.terminal and op.terminal.delivery not in ("timeout",)
            else "after the client timed out"
        )
        op.finding(
            "wire.frame_after_terminal",
            f"{mt.name} arrived {after} ({op.terminal.delivery if op.terminal else ''})",
            message_type=mt.name,
            received_at_ns=now,
        )

    def _cap(self, op: Operation) -> bool:
        if len(op.received) < op.max_events:
            return False
        op.finding(
            "client.max_events", f"more than {op.max_events} events; stopped reading the operation"
        )
        self._finish(
            op,
            Terminal(
                "transport_error", None, detail=f"event flood: more than {op.max_events} events"
            ),
        )
        op.cancel_sent_at_ns = time.perf_counter_ns()
        with self._native_lock, contextlib.suppress(NativeRuntimeError):
            self._session.cancel(frame_id=op.frame_id)
            self._unconfirmed_cancels[op.frame_id] = (
                op.cancel_sent_at_ns + _CANCEL_CONFIRM_LIMIT_NS
            )
        return True

    def _on_partial(self, op: Operation, ev: Any, now: int) -> None:
        if self._cap(op):
            return
        md = ev.metadata.value
        raw = bytes(ev.tail.body)
        meta = {
            "operation_id": md.operation_id,
            "frame_id": ev.header.frame_id,
            "result_sequence": md.result_sequence,
            "delta_sequence": md.delta_sequence,
            "body_bytes": md.body_bytes,
            "flags": int(md.flags),
            "object_id": md.object_id,
        }
        event: dict[str, Any] | None = None
        err: str | None = None
        try:
            event = codec.decode_json_object(raw, what="partial_result")
        except WireViolation as exc:
            err = str(exc)
            op.finding(exc.rule, exc.detail, result_sequence=md.result_sequence)
        if md.operation_id != op.operation_id:
            op.finding(
                "partial_result.operation_id",
                f"metadata operation_id {md.operation_id} != submitted {op.operation_id}",
            )
        if md.body_bytes != len(raw):
            op.finding(
                "partial_result.body_bytes", f"body_bytes {md.body_bytes} != body length {len(raw)}"
            )
        if md.result_sequence <= op._last_result_sequence:
            op.finding(
                "partial_result.order",
                f"result_sequence {md.result_sequence} after {op._last_result_sequence}",
            )
        op._last_result_sequence = md.result_sequence
        if op.local_cancelled_at_ns is not None:
            op.finding(
                "wire.partial_after_cancel",
                "PARTIAL_RESULT delivered after the client's cancel",
                result_sequence=md.result_sequence,
            )
        if event is not None and event.get("type") in contract.TERMINAL_EVENT_TYPES:
            op.finding(
                "partial_result.terminal_event",
                f"{event.get('type')} travelled as a PARTIAL_RESULT; terminals belong in RESULT_PUSH",
            )
        op._partials += 1
        rec = ReceivedEvent("partial", now, "PARTIAL_RESULT", raw, event, err, meta)
        op.received.append(rec)
        if op._partials == op.cancel_after_partials and op.cancel_sent_at_ns is None:
            with self._native_lock, contextlib.suppress(NativeRuntimeError):
                self._run_command("cancel", op)
        gap = now - op._last_partial_ns
        op._last_partial_ns = now
        hold = gap < _HOLD_GAP_NS
        op._gap_ewma_ns = 0.8 * op._gap_ewma_ns + 0.2 * min(gap, 10 * _BULK_GAP_NS)
        if (
            op._partials >= _BULK_AFTER
            and self._bulk is None
            and op._gap_ewma_ns < _BULK_GAP_NS
        ):
            self._bulk = op
        op._chan.put(rec, wake=not hold)
        if hold and op not in self._held:
            self._held[op] = now

    def _on_result_push(self, op: Operation, ev: Any, now: int) -> None:
        md = ev.metadata.value
        raw = bytes(ev.tail.body)
        meta = {
            "frame_id": ev.header.frame_id,
            "status_code": md.status_code,
            "result_class": int(md.result_class),
            "result_flags": int(md.result_flags),
            "payload_kind_bitmap": int(md.payload_kind_bitmap),
            "payload_frame_count": md.payload_frame_count,
            "body_bytes": len(raw),
        }
        event: dict[str, Any] | None = None
        err: str | None = None
        try:
            event = codec.decode_result_push(md, raw)
        except WireViolation as exc:
            err = str(exc)
            op.finding(exc.rule, exc.detail)
        if op.local_cancelled_at_ns is not None:
            op.finding(
                "wire.result_after_cancel", "RESULT_PUSH delivered for a frame the client cancelled"
            )
        diagnostics: dict[str, Any] = {}
        if event is not None:
            event, diagnostics = codec.split_diagnostics(event)
        rec = ReceivedEvent("terminal", now, "RESULT_PUSH", raw, event, err, meta)
        op.received.append(rec)
        op._chan.put(rec)
        op._done_in_pump = True
        self._finish(
            op,
            Terminal(
                "result_push",
                event,
                status_code=md.status_code,
                detail=err or "",
                diagnostics=diagnostics,
                received_at_ns=now,
            ),
        )

    def _on_drop(self, op: Operation, ev: Any, now: int) -> None:
        md = ev.metadata.value
        raw = bytes(ev.tail.diagnostic or b"")
        reason = int(getattr(md, "drop_reason_code", 0))
        meta = {
            "frame_id": ev.header.frame_id,
            "drop_reason_code": reason,
            "result_sequence": getattr(md, "result_sequence", None),
            "source_role": int(getattr(md, "source_role", 0)),
            "diagnostic_bytes": len(raw),
        }
        event: dict[str, Any] | None = None
        diagnostics: dict[str, Any] = {}
        err: str | None = None
        if raw:
            try:
                dd = codec.decode_drop_diagnostic(raw)
                event, diagnostics = dd.event, dd.diagnostics
            except WireViolation as exc:
                err = str(exc)
        rec = ReceivedEvent("terminal", now, ev.header.message_type.name, raw, event, err, meta)
        op.received.append(rec)
        op._chan.put(rec)
        op._done_in_pump = True
        self._finish(
            op,
            Terminal(
                "result_drop",
                event,
                drop_reason=reason,
                detail=err or "",
                diagnostics=diagnostics,
                received_at_ns=now,
            ),
        )
