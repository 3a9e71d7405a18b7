"""The adapter's NNRP server binding on nnrp-py: frames in, profile events out.

Owns: listening (tcp default; ipc/ws/quic by scheme), per-session pump threads, checking
each FRAME_SUBMIT against the wire mapping (spec §3; violations get the profile error
terminal), running the async handler per operation, pushing each yielded event as one
PARTIAL_RESULT then exactly one terminal, and cancellation (client cancel, envelope
``nnrp.timeout_ms``, the ``nnrp.cancel_after_events`` hint, disconnect, shutdown) with the
abort hook and diagnostics. Envelope *schema* validation belongs to the handler.

Pumping (docs/wire-pump.md): nnrp-py serialises calls per session and has no wakeable
poll (an idle poll blocks sends ~2 ms), so one thread per session owns the session: it
sends whatever the handlers queued and polls only when the next event is not imminent
(right after a send on a slow stream, every ``hot_poll_interval_ms`` on a fast one, and
continuously when no operation is in flight). The sessions with work in flight share one
budget of polls a second (``busy_poll_budget_per_s``), so thousands of sessions waiting on the
engine do not spend its CPU on polls. Handlers run on the caller's event loop;
a bounded per-operation queue between them and the pump is the flow control.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import itertools
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from nnrp.core import MessageType
from nnrp.native import (
    FFI_STATUS_WOULD_BLOCK,
    NativeInvalidStateError,
    NativeRuntimeError,
    NativeStatus,
    NativeWouldBlockError,
    _buffer_view_from_payload,
    _NnrpServerSendResultRequest,
)
from nnrp.runtime import (
    OperationState,
    PartialResultMetadata,
    ResultDropReasonMetadata,
    RuntimeRole,
)
from nnrp.server import NativeServerAcceptOptions, NativeServerEventKind, listen_native_server
from nnrp.server.native import _allocate_native_handle_id

from nnrp_conformance import contract
from nnrp_conformance.wire import codec, lifetime, nodelay
from nnrp_conformance.wire.codec import WireViolation
from nnrp_conformance.wire.pump import (
    DETAIL_STALE_OR_GONE,
    detail_code,
    parse_address,
    server_options,
    status_text,
)
from vllm_nnrp_adapter import profile

__all__ = ["CancelInfo", "Handler", "NnrpServer", "OperationContext"]

log = logging.getLogger(__name__)

# Poll wait of a session with no operation in flight. A poll returns as soon as a frame
# arrives, so the wait costs a submit nothing; what it costs is CPU per poll (100-300 us
# here): 256 idle sessions took 70 % of a core at 25 ms, 2.2 % at 1000 ms (bench idle).
# A stopping server waits up to this long for an idle session's thread.
_SESSION_IDLE_POLL_MS = 1000
# While incoming frames keep arriving (a burst of cancels or submits), sends between two
# polls stop after this long, so the last frame of a burst is not 50 ms per frame away.
_BURST_SEND_SLICE_NS = 2_000_000
# Polls a second that every session with an operation in flight share, at most. A poll costs
# 100-300 us of CPU here whether or not a frame comes, and a session waiting on the engine polls
# every idle_poll_interval_ms (20 ms) for cancels: 512 such sessions spent the adapter's CPU on
# 25,600 polls a second and starved the engine (bench capacity, docs/performance.md). Up to
# budget × interval busy sessions (20 at 20 ms) nothing changes; beyond, each polls less often,
# so a cancel of a silent operation is seen within busy_sessions / budget seconds.
_BUSY_POLL_BUDGET_PER_S = 1000.0
_GONE_THRESHOLD = 32  # consecutive 3/4/105 polls that mean the peer is gone (notes §7)
_ABORT_HOOK_TIMEOUT_S = 2.0
# one native accept wait; also how long a stopping server may wait for its accept thread
_ACCEPT_SLICE_MS = 200


@dataclass(slots=True)
class CancelInfo:
    source: str  # contract.CANCEL_SOURCE_*
    reason: str
    at_ns: int


AbortHook = Callable[[CancelInfo], "Awaitable[bool] | bool"]


@dataclass(slots=True)
class OperationContext:
    envelope: dict[str, Any]
    operation_id: int
    frame_id: int
    session_id: int
    connection_id: int
    transport: str
    submitted_at_ns: int
    timeout_ms: int | None
    cancelled: CancelInfo | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    _abort_hooks: list[AbortHook] = field(default_factory=list)

    def on_abort(self, callback: AbortHook) -> None:
        """Register the backend abort; its return value says whether the abort was accepted."""
        self._abort_hooks.append(callback)


Handler = Callable[[OperationContext], AsyncIterator[dict[str, Any]]]


# --- blocking sends ------------------------------------------------------------------------
# nnrp-py has no public synchronous send (its async wrappers add a to_thread hop per frame,
# ~70 µs). These call the same native entry points the wrappers call, from the pump thread,
# and keep the SDK's one-terminal bookkeeping.


def _send_partial(op: Any, md: PartialResultMetadata, body: bytes) -> None:
    op._begin_reply(terminal=False)
    op._owner._send_operation_runtime_frame(
        op._handle, op.frame_id, MessageType.PARTIAL_RESULT, md, body
    )


def _send_terminal(op: Any, send: Callable[[], None]) -> None:
    op._begin_reply(terminal=True)
    try:
        send()
    except BaseException:
        op._restore_terminal_reply()
        raise
    op._complete_terminal_reply()


def _send_result(op: Any, md: Any, body: bytes) -> None:
    payload = md.pack() + bytes(body)
    view, owner = _buffer_view_from_payload(payload)
    request = _NnrpServerSendResultRequest(op._handle.to_ffi(), view)
    _send_terminal(op, lambda: op._send_result_blocking(request, owner))


def _send_drop(op: Any, md: ResultDropReasonMetadata, diagnostic: bytes) -> None:
    _send_terminal(
        op,
        lambda: op._owner._send_operation_runtime_frame(
            op._handle, op.frame_id, MessageType.RESULT_DROP_REASON, md, diagnostic
        ),
    )


def _has_accept_internals(server: Any) -> bool:
    return all(
        hasattr(server, a)
        for a in (
            "_servers",
            "_accept_lock",
            "_accept_session_handle_ids",
            "_sessions",
            "_ensure_open",
            "_release_pending_accept_tickets",
        )
    )


def _accept_blocking(server: Any, slice_ms: int) -> Any:
    """``NativeServer.accept`` waiting in native code for up to ``slice_ms``.

    nnrp-py's accept calls the native accept in 1 ms slices from Python, raising and
    catching an exception per slice: ~6 % of a core here with nobody connecting (3.6 % of
    the adapter's CPU per token under load came from it). The same native call with a long
    slice waits in native code (0.2 % of a core at 100 ms). Same bookkeeping as the SDK's:
    one pending accept ticket per listener kept across slices, the session recorded in the
    server's list; the caller releases the ticket when it stops accepting.
    """
    with server._accept_lock:
        server._ensure_open()
        ids = server._accept_session_handle_ids
        if not ids:
            ids.extend(None for _ in server._servers)
        per = max(1, slice_ms // max(1, len(server._servers)))
        for index, (_transport, listener) in enumerate(server._servers):
            handle_id = ids[index]
            if handle_id is None:
                handle_id = ids[index] = _allocate_native_handle_id()
            try:
                session = listener.accept_session(
                    session_handle_id=handle_id, generation=1, timeout_ms=per
                )
            except NativeWouldBlockError:
                continue
            ids[index] = None
            server._sessions.append(session)
            return session
    raise NativeWouldBlockError(NativeStatus(FFI_STATUS_WOULD_BLOCK))


# --- per-operation state shared by the loop and the pump ----------------------------------


@dataclass(slots=True, eq=False)
class _Terminal:
    kind: str  # "push" | "drop"
    event: dict[str, Any] | None
    status_code: int = contract.WIRE_STATUS_OK
    drop_reason: int = contract.WIRE_DROP_PEER_CANCELLED


class _Op:
    __slots__ = (
        "cancel_info",
        "ctx",
        "deadline_ns",
        "done",
        "enqueued",
        "frame_id",
        "native",
        "operation_id",
        "out",
        "queue_size",
        "scope",
        "sent",
        "seq",
        "space_waiter",
        "stop_reason",
        "submitted_at_ns",
        "task",
        "terminal",
        "terminal_sent",
    )

    def __init__(self, native: Any, submitted_at_ns: int, queue_size: int) -> None:
        self.native = native
        self.operation_id: int = native.operation_id
        self.frame_id: int = native.frame_id
        self.submitted_at_ns = submitted_at_ns
        self.queue_size = queue_size
        self.out: collections.deque[bytes] = collections.deque()
        self.terminal: _Terminal | None = None  # set by the loop, sent by the pump
        self.terminal_sent = False
        self.stop_reason: str | None = None  # once set, no partial is ever sent
        self.cancel_info: CancelInfo | None = None
        self.deadline_ns: int | None = None
        self.seq = 0
        self.sent = 0  # pump thread only
        self.enqueued = 0  # loop thread only
        self.space_waiter: asyncio.Future[None] | None = None
        self.ctx: OperationContext | None = None
        self.done = False
        self.scope: anyio.CancelScope | None = None  # loop side only
        self.task: asyncio.Task[None] | None = None  # loop side only


class _SessionPump:
    """One nnrp-py server session and the OS thread that owns it."""

    def __init__(self, server: NnrpServer, native: Any, connection_id: int) -> None:
        self.server = server
        self.native = native
        self.connection_id = connection_id
        self.session_id = int(getattr(getattr(native.handle, "handle", None), "id", connection_id))
        self.transport = native.active_transport_name
        self.ops: dict[int, _Op] = {}  # operation id -> op (in flight)
        self.by_frame: dict[int, _Op] = {}
        self.ready: collections.deque[_Op] = collections.deque()
        self.cond = threading.Condition(threading.Lock())
        self.closed = False
        self.stop = False
        self.gap_ewma_ns = 0.0  # EWMA of the gap between batches of queued events
        self.last_batch_ns = 0
        self.batch_open = False  # loop side: this loop iteration has queued an event
        self.pump_waiting = False  # the pump sleeps on cond (set and read under its lock)
        self.counted_busy = False  # pump side: this session is in server.busy_sessions
        self.thread = threading.Thread(
            target=self._run, name=f"nnrp-session-{self.session_id}", daemon=True
        )

    # --- called from the event loop ------------------------------------------------------
    def enqueue(
        self, op: _Op, body: bytes | None = None, terminal: _Terminal | None = None
    ) -> None:
        first = not self.batch_open
        if first:
            # The first event of this loop iteration: vLLM hands an engine step's outputs to
            # every stream in one iteration, so the pump's pace is the gap between batches,
            # not between events (eight streams' events come microseconds apart, and timing
            # those made eight streams look like one hot stream, polled every 50 ms: a new
            # submit then waited up to 50 ms for its poll, docs/performance.md).
            self.batch_open = True
            now = time.perf_counter_ns()
            if self.last_batch_ns:
                self.gap_ewma_ns = 0.7 * self.gap_ewma_ns + 0.3 * (now - self.last_batch_ns)
            self.last_batch_ns = now
        with self.cond:
            if body is not None:
                op.out.append(body)
            if terminal is not None:
                op.terminal = terminal
            self.ready.append(op)
        if first:
            loop = self.server._loop
            if loop is not None:
                loop.call_soon(self._batch_end)
            else:
                self._batch_end()

    def _batch_end(self) -> None:
        """End of the loop iteration that queued events: one wake-up for all of them.

        Waking the pump per event made it fight the loop for the GIL once per event. A pump
        that is not waiting needs no wake-up: it looks at the ready queue before it waits.
        """
        self.batch_open = False
        with self.cond:
            if self.pump_waiting:
                self.cond.notify()

    def wake(self) -> None:
        with self.cond:
            self.cond.notify()

    # --- pump thread ---------------------------------------------------------------------------
    def _note_busy(self) -> None:
        """Keep server.busy_sessions in step with whether this session has work in flight."""
        busy = bool(self.ops) and not self.stop
        if busy != self.counted_busy:
            self.counted_busy = busy
            self.server._busy_changed(1 if busy else -1)

    def _run(self) -> None:
        cfg = self.server
        last_poll_ns = 0
        consecutive_gone = 0
        got_event = False
        try:
            while not self.stop:
                self._note_busy()
                share_ns = cfg.busy_poll_share_ns()
                hot_interval_ns = max(cfg.hot_poll_interval_ns, share_ns)
                idle_interval_ns = max(cfg.idle_poll_interval_ns, share_ns)
                # Sending yields to the poll schedule: with fast producers the ready queue
                # never drains, and a pump that only polls once it does never sees a cancel.
                sent_any = self._send_ready(
                    last_poll_ns + (_BURST_SEND_SLICE_NS if got_event else hot_interval_ns)
                )
                now = time.perf_counter_ns()
                if self.ops and not got_event:
                    hot = self.gap_ewma_ns < cfg.poll_cost_ns
                    since = now - last_poll_ns
                    interval_ns = hot_interval_ns if hot else idle_interval_ns
                    if sent_any and not hot:
                        due = (
                            since >= cfg.poll_cost_ns
                        )  # the next event is further away than a poll
                    else:
                        due = since >= interval_ns
                    if not due:
                        wait_s = (interval_ns - since) / 1e9
                        with self.cond:
                            if not self.ready and not self.stop:
                                self.pump_waiting = True
                                self.cond.wait(max(wait_s, 0.0))
                                self.pump_waiting = False
                        continue
                    self._check_deadlines(now)
                gone_now = False
                try:
                    # With nothing in flight there is nothing to send, so a long wait costs no
                    # latency (a submit ends it at once) and spares the CPU the ~500 empty
                    # polls a second per idle session that 1 ms slices cost.
                    wait_ms = 1 if self.ops else cfg.session_idle_poll_ms
                    events = self.native.poll_events(max_events=1, timeout_ms=wait_ms)
                    consecutive_gone = 0
                except NativeWouldBlockError:
                    events = ()
                except NativeInvalidStateError as exc:
                    events = ()
                    if detail_code(exc) == DETAIL_STALE_OR_GONE:
                        consecutive_gone += 1
                        gone_now = True
                        if consecutive_gone >= _GONE_THRESHOLD:
                            self._peer_gone(
                                f"peer gone: {status_text(exc)} on {consecutive_gone} polls in a row"
                            )
                            return
                except NativeRuntimeError as exc:
                    # e.g. a headerless event the SDK cannot convert; it is consumed, carry on
                    log.debug("session %s poll: %s", self.session_id, status_text(exc))
                    events = ()
                last_poll_ns = time.perf_counter_ns()
                # A poll returns one frame, and frames come in bursts (a client cancelling
                # many streams, or submitting many): keep polling while they keep coming,
                # or a cancel waits behind every queued submit at one poll interval each.
                # Not after a lone submit: its first event is imminent and a poll (>= 2 ms,
                # notes §3) would only delay it.
                # A dead peer answers every poll at once with 3/4/105 (notes §7): poll again at
                # once, so _GONE_THRESHOLD of them take milliseconds, not that many poll
                # intervals (a killed client's streams once ran on for 8.6 s on vLLM 0.22.1).
                got_event = gone_now or (
                    bool(events)
                    and (
                        len(self.ops) > 1
                        or any(ev.kind is not NativeServerEventKind.SUBMIT for ev in events)
                    )
                )
                for ev in events:
                    if self._on_event(ev, last_poll_ns):
                        return
        except Exception:
            log.exception("session %s pump failed", self.session_id)
            self._peer_gone("pump failure")
        finally:
            if self.counted_busy:
                self.counted_busy = False
                self.server._busy_changed(-1)
            self.server._session_ended(self)

    def _send_ready(self, poll_due_ns: int) -> bool:
        """Send what the handlers queued, until the queue is empty or a poll is due."""
        sent_any = False
        while True:
            with self.cond:
                if not self.ready:
                    return sent_any
                op = self.ready.popleft()
            sent_any |= self._flush(op)
            if self.ops and time.perf_counter_ns() >= poll_due_ns:
                return sent_any

    def _flush(self, op: _Op) -> bool:
        sent = False
        now = time.perf_counter_ns()
        if op.deadline_ns is not None and now >= op.deadline_ns and op.stop_reason is None:
            op.stop_reason = contract.CANCEL_SOURCE_TIMEOUT
            self.server._loop_call(self.server._on_deadline_hit, self, op)
        # Only what is queued now: a handler producing as fast as this sends would otherwise
        # keep the queue from ever emptying, and the pump would never get back to its poll.
        budget = len(op.out)
        while budget and op.out and not op.terminal_sent:
            budget -= 1
            if op.stop_reason is not None:
                op.out.clear()
                break
            body = op.out.popleft()
            op.seq += 1
            try:
                _send_partial(
                    op.native,
                    PartialResultMetadata(op.operation_id, op.seq, 0, op.seq, len(body), 0),
                    body,
                )
                op.sent += 1
                sent = True
            except NativeRuntimeError as exc:
                # Refused although we never polled a cancel for it: the runtime only refuses
                # after a polled cancel, so the session itself is gone (3/4/105). Stop at once.
                op.out.clear()
                if op.cancel_info is None:
                    self._cancel(
                        op, contract.CANCEL_SOURCE_DISCONNECT, f"send refused: {status_text(exc)}"
                    )
                break
            if op.space_waiter is not None and len(op.out) <= op.queue_size // 2:
                waiter, op.space_waiter = op.space_waiter, None
                self.server._loop_call(_wake, waiter)
        term = op.terminal
        if (
            term is not None
            and not op.terminal_sent
            and not op.out
            and (op.cancel_info is None or term.kind == "drop")
        ):
            # after a cancel the SDK only accepts a drop; a push queued before it waits for that
            self._send_terminal(op)
            sent = True
        return sent

    def _send_terminal(self, op: _Op) -> None:
        term = op.terminal
        assert term is not None
        op.terminal_sent = True
        if op.stop_reason not in (None, "terminal"):
            _final_counts(term.event, op.sent)
        op.stop_reason = op.stop_reason or "terminal"
        try:
            if term.kind == "push":
                md, body = codec.encode_result_push(
                    op.frame_id, term.event, status_code=term.status_code
                )
                _send_result(op.native, md, body)
            else:
                diag = codec.dump_json(term.event) if term.event is not None else b""
                _send_drop(
                    op.native,
                    ResultDropReasonMetadata(
                        op.operation_id,
                        op.seq + 1,
                        term.drop_reason,
                        RuntimeRole.SERVER,
                        0,
                        len(diag),
                    ),
                    diag,
                )
        except NativeRuntimeError as exc:
            if term.kind == "push" and op.cancel_info is None:
                # the client cancelled between our last poll and this push: the SDK now only
                # accepts a drop (notes §4.3); the loop will answer with one
                log.debug(
                    "op %s push refused (%s); cancel pending", op.operation_id, status_text(exc)
                )
                op.terminal_sent = False
                op.terminal = None
                self._cancel(
                    op, contract.CANCEL_SOURCE_CLIENT, f"terminal refused: {status_text(exc)}"
                )
                return
            log.info("op %s terminal not delivered: %s", op.operation_id, status_text(exc))
        self._forget(op)

    def _forget(self, op: _Op) -> None:
        op.done = True
        self.ops.pop(op.operation_id, None)
        self.by_frame.pop(op.frame_id, None)

    def _check_deadlines(self, now: int) -> None:
        for op in list(self.ops.values()):
            if op.deadline_ns is not None and now >= op.deadline_ns and op.stop_reason is None:
                op.stop_reason = contract.CANCEL_SOURCE_TIMEOUT
                self.server._loop_call(self.server._on_deadline_hit, self, op)

    def _cancel(self, op: _Op, source: str, reason: str) -> None:
        if op.cancel_info is not None or op.terminal_sent:
            return
        op.stop_reason = source
        op.out.clear()
        op.cancel_info = CancelInfo(source, reason, time.perf_counter_ns())
        self.server._loop_call(self.server._on_cancelled, self, op)

    def _on_event(self, ev: Any, now: int) -> bool:
        """Handle one polled event; True when the session is over."""
        if ev.kind is NativeServerEventKind.SUBMIT:
            native = ev.as_submit()
            op = _Op(native, now, self.server.queue_size)
            self.ops[op.operation_id] = op
            self.by_frame[op.frame_id] = op
            self.server._loop_call(self.server._start_op, self, op)
            return False
        if ev.kind is NativeServerEventKind.RUNTIME:
            rt = ev.as_runtime()
            mt = rt.header.message_type
            if mt is MessageType.FRAME_CANCEL:
                op = self.by_frame.get(rt.header.frame_id)
                if op is not None:
                    self._cancel(
                        op,
                        contract.CANCEL_SOURCE_CLIENT,
                        f"FRAME_CANCEL frame_id={rt.header.frame_id}",
                    )
            elif mt is MessageType.CANCEL:
                md = rt.metadata.value
                op = self.ops.get(md.operation_id)
                if op is not None:
                    why = bytes(rt.tail.diagnostic or b"").decode("utf-8", "replace")
                    self._cancel(
                        op,
                        contract.CANCEL_SOURCE_CLIENT,
                        f"CANCEL reason_code={md.reason_code}" + (f": {why}" if why else ""),
                    )
            elif mt is MessageType.SESSION_CLOSE:
                self._disconnect("client closed the session (SESSION_CLOSE)")
                self._close_native()  # the client's close() waits for this ack
                return True
            return False
        lc = ev.as_lifecycle()
        if lc is not None and lc.state is OperationState.CANCELLED:
            op = self.ops.get(lc.operation_id)
            if op is not None:
                self._cancel(op, contract.CANCEL_SOURCE_CLIENT, "operation lifecycle CANCELLED")
        return False

    def _disconnect(self, why: str) -> None:
        for op in list(self.ops.values()):
            op.stop_reason = contract.CANCEL_SOURCE_DISCONNECT
            op.out.clear()
            op.terminal_sent = True  # nothing more is ever sent on a gone session
            if op.cancel_info is None:
                op.cancel_info = CancelInfo(
                    contract.CANCEL_SOURCE_DISCONNECT, why, time.perf_counter_ns()
                )
                self.server._loop_call(self.server._on_cancelled, self, op)
            self._forget(op)

    def _peer_gone(self, why: str) -> None:
        self._disconnect(why)
        self._close_native()

    def _close_native(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.native.close()
        except NativeRuntimeError as exc:
            log.debug("session %s close: %s", self.session_id, status_text(exc))


def _final_counts(event: dict[str, Any] | None, sent: int) -> None:
    """Set the sent-event counts of a stopped op's diagnostics from the pump's final count.

    The loop builds the diagnostics while this thread may be finishing a send it began before
    the stop, so its reading of ``op.sent`` can be one short; here, on the only thread that
    sends, with the terminal about to go, the count is final.
    """
    if not isinstance(event, dict):
        return
    _, diag = codec.split_diagnostics(event)  # the event's own diagnostics object, or {}
    if "events_emitted" in diag:
        diag["events_emitted"] = sent
    cancellation = diag.get("cancellation")
    if isinstance(cancellation, dict) and "events_sent" in cancellation:
        cancellation["events_sent"] = sent


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _error_status(code: str) -> int:
    family = contract.ERROR_CODES.get(code, contract.ERR_TYPE_SERVER)
    return (
        contract.WIRE_STATUS_ERROR
        if family == contract.ERR_TYPE_INVALID_REQUEST
        else contract.WIRE_STATUS_SERVER_ERROR
    )


class NnrpServer:
    """Async context manager: listens, runs ``handler`` per operation, closes cleanly."""

    def __init__(
        self,
        handler: Handler,
        listen: str = "127.0.0.1:0",
        *,
        max_envelope_bytes: int = contract.DEFAULT_MAX_ENVELOPE_BYTES,
        max_in_flight_per_connection: int = 64,
        queue_size: int = 256,
        hot_poll_interval_ms: float = 50.0,
        idle_poll_interval_ms: float = 20.0,
        session_idle_poll_ms: int = _SESSION_IDLE_POLL_MS,
        poll_cost_ms: float = 2.5,
        busy_poll_budget_per_s: float = _BUSY_POLL_BUDGET_PER_S,
        abort_hook_timeout: float = _ABORT_HOOK_TIMEOUT_S,
        tcp_nodelay: bool = True,
    ) -> None:
        self.handler = handler
        self.endpoint = parse_address(listen)
        self.max_envelope_bytes = max_envelope_bytes
        self.max_in_flight = max_in_flight_per_connection
        self.queue_size = max(2, queue_size)
        self.hot_poll_interval_ns = int(hot_poll_interval_ms * 1e6)
        self.idle_poll_interval_ns = int(idle_poll_interval_ms * 1e6)
        self.poll_cost_ns = int(poll_cost_ms * 1e6)
        self.busy_poll_budget_per_s = busy_poll_budget_per_s
        self.busy_sessions = 0  # sessions with an operation in flight (their pumps count)
        self._busy_lock = threading.Lock()
        self.session_idle_poll_ms = max(1, int(session_idle_poll_ms))
        self.abort_hook_timeout = abort_hook_timeout
        self.tcp_nodelay = tcp_nodelay and self.endpoint.transport in ("tcp", "websocket")
        self.address = ""
        self.sessions: dict[int, _SessionPump] = {}
        self.stats = {"sessions": 0, "operations": 0, "malformed": 0, "cancelled": 0, "timeouts": 0}
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listen_held: lifetime.Held | None = None
        self._native_server: Any = None
        self._accept_thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    # --- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> NnrpServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        opts = server_options(self.endpoint)
        try:
            self._listen_held, self._native_server = lifetime.enter(
                lambda: listen_native_server(opts), f"listener {self.endpoint.provider_uri}"
            )
        except NativeRuntimeError as exc:
            raise OSError(
                f"cannot listen on {self.endpoint.provider_uri}: {status_text(exc)}: {exc}"
            ) from None
        bound = self._native_server.bound_provider_endpoints[self.endpoint.transport].uri
        self.address = bound.split("://", 1)[1] if self.endpoint.transport == "tcp" else bound
        self._accept_thread = threading.Thread(
            target=self._accept_main, name="nnrp-accept", daemon=True
        )
        self._accept_thread.start()

    async def serve_forever(self) -> None:
        if self._loop is None:
            await self.start()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await self.aclose()

    async def aclose(self, *, timeout: float = 5.0) -> None:
        """Stop serving: cancel what runs, wind the pumps down, close sessions and listener.

        Shielded and bounded: a cancelled caller must not leave the listener to the garbage
        collector, and every native close runs off the event loop (``wire.lifetime``).
        """
        if self._native_server is None:
            return
        with anyio.CancelScope(shield=True):
            await self._aclose(timeout)

    async def _aclose(self, timeout: float) -> None:
        self._stopping.set()
        for sess in list(self.sessions.values()):
            for op in list(sess.ops.values()):
                if op.cancel_info is None and not op.terminal_sent:
                    sess._cancel(op, contract.CANCEL_SOURCE_SHUTDOWN, "server shutting down")
        # let cancelled handlers run their abort hooks and their drops go out
        with anyio.move_on_after(min(timeout, self.abort_hook_timeout + 0.5)):
            while any(s.ops for s in self.sessions.values()) or self._tasks:
                await anyio.sleep(0.005)
        for task in list(self._tasks):
            task.cancel()
        for sess in list(self.sessions.values()):
            sess.stop = True
            sess.wake()
        deadline = time.monotonic() + timeout
        for sess in list(self.sessions.values()):
            await anyio.to_thread.run_sync(
                sess.thread.join, max(0.0, deadline - time.monotonic())
            )
            await anyio.to_thread.run_sync(sess._close_native)
        if self._accept_thread is not None:
            await anyio.to_thread.run_sync(
                self._accept_thread.join, max(0.1, deadline - time.monotonic())
            )
        held, self._listen_held, self._native_server = self._listen_held, None, None
        await lifetime.aclose(held)

    # --- accept thread -------------------------------------------------------------------------
    def _accept_main(self) -> None:
        # accept() must be running while a client handshakes (notes §4.5); a thread of its own
        # keeps that true whatever the event loop is doing, for in-process tests too
        server = self._native_server
        blocking = _accept_blocking if _has_accept_internals(server) else None
        try:
            while not self._stopping.is_set():
                try:
                    if blocking is not None:
                        native = blocking(server, _ACCEPT_SLICE_MS)
                    else:
                        native = asyncio.run(
                            server.accept(NativeServerAcceptOptions(timeout_ms=100))
                        )
                except NativeWouldBlockError:
                    continue
                except NativeRuntimeError as exc:
                    if self._stopping.is_set():
                        return
                    log.info("accept: %s", status_text(exc))
                    time.sleep(0.01)
                    continue
                self._accepted(native)
        finally:
            if blocking is not None:
                with contextlib.suppress(Exception), server._accept_lock:
                    server._release_pending_accept_tickets()

    def _accepted(self, native: Any) -> None:
        if self.tcp_nodelay:
            nodelay.apply_nodelay()
        sess = _SessionPump(self, native, next(self._ids))
        self.sessions[sess.connection_id] = sess
        self.stats["sessions"] += 1
        sess.thread.start()

    def _busy_changed(self, delta: int) -> None:
        with self._busy_lock:
            self.busy_sessions += delta

    def busy_poll_share_ns(self) -> int:
        """The poll interval below which the busy sessions together would exceed the budget
        (0 without a budget)."""
        if self.busy_poll_budget_per_s <= 0:
            return 0
        return int(self.busy_sessions * 1e9 / self.busy_poll_budget_per_s)

    def _session_ended(self, sess: _SessionPump) -> None:
        self.sessions.pop(sess.connection_id, None)
        if sess.closed and self._native_server is not None:
            # nnrp-py's server keeps every session it ever accepted (to close them at
            # shutdown), ~1 KiB per connection for the server's lifetime (docs/sdk-defects.md);
            # a closed one needs no closing, so it is let go.
            with contextlib.suppress(AttributeError, ValueError):
                self._native_server._sessions.remove(sess.native)

    # --- loop side -------------------------------------------------------------------------------
    def _loop_call(self, fn: Callable[..., Any], *args: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(fn, *args)

    def _start_op(self, sess: _SessionPump, op: _Op) -> None:
        task = asyncio.ensure_future(self._run_op(sess, op))
        op.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_op(self, sess: _SessionPump, op: _Op) -> None:
        self.stats["operations"] += 1
        try:
            envelope = self._decode(sess, op)
        except WireViolation as exc:
            self.stats["malformed"] += 1
            code = (
                contract.ERR_REQUEST_TOO_LARGE
                if exc.rule == "submit.too_large"
                else contract.ERR_INVALID_REQUEST
            )
            self._finish(
                sess, op, self._error(code, f"wire mapping violated ({exc.rule}): {exc.detail}")
            )
            return
        except Exception as exc:  # the operation must still end exactly once
            log.exception("op %s: submit could not be decoded", op.operation_id)
            self._finish(
                sess,
                op,
                self._error(contract.ERR_INTERNAL, f"submit could not be decoded: {exc!r}"),
            )
            return
        if len(sess.ops) > self.max_in_flight:
            self._finish(
                sess,
                op,
                self._error(
                    contract.ERR_OVERLOADED,
                    (f"more than {self.max_in_flight} operations in flight on this connection"),
                ),
            )
            return
        nnrp = envelope.get("nnrp") if isinstance(envelope.get("nnrp"), dict) else {}
        timeout_ms = nnrp.get("timeout_ms")
        timeout_ms = (
            timeout_ms
            if isinstance(timeout_ms, int) and not isinstance(timeout_ms, bool) and timeout_ms > 0
            else None
        )
        cancel_after = nnrp.get("cancel_after_events")
        cancel_after = (
            cancel_after
            if isinstance(cancel_after, int)
            and not isinstance(cancel_after, bool)
            and cancel_after >= 1  # 0 is not a valid hint: the envelope check rejects it
            else None
        )
        ctx = OperationContext(
            envelope,
            op.operation_id,
            op.frame_id,
            sess.session_id,
            sess.connection_id,
            sess.transport,
            op.submitted_at_ns,
            timeout_ms,
        )
        op.ctx = ctx
        if timeout_ms is not None:
            op.deadline_ns = op.submitted_at_ns + timeout_ms * 1_000_000
        want_diag = nnrp.get("diagnostics") is True
        emitted = 0
        terminal: dict[str, Any] | None = None
        failure: BaseException | None = None
        timed_out = False
        hint_hit = False
        agen = self.handler(ctx)
        tscope: anyio.CancelScope | None = None
        try:
            with anyio.CancelScope() as scope:
                op.scope = scope
                with anyio.move_on_after(
                    None
                    if timeout_ms is None
                    else max(0.0, (op.deadline_ns - time.perf_counter_ns()) / 1e9)
                ) as tscope:
                    async for event in agen:
                        if op.stop_reason is not None:
                            break
                        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
                            failure = TypeError(
                                f"handler yielded {type(event).__name__}, not an event object"
                            )
                            break
                        if event["type"] in contract.TERMINAL_EVENT_TYPES:
                            terminal = event
                            break
                        try:
                            body = codec.encode_event(event)
                        except (TypeError, ValueError) as exc:
                            failure = exc
                            break
                        while len(op.out) >= op.queue_size and op.stop_reason is None:
                            op.space_waiter = asyncio.get_running_loop().create_future()
                            if len(op.out) >= op.queue_size:
                                await op.space_waiter
                        if op.stop_reason is not None:
                            break
                        sess.enqueue(op, body)
                        op.enqueued += 1
                        emitted += 1
                        if cancel_after is not None and emitted >= cancel_after:
                            hint_hit = True  # queued events still go out, then the terminal
                            break
        except Exception as exc:
            failure = exc
        finally:
            op.scope = None
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await agen.aclose()
        # Judged after both scopes: when the pump sees the deadline first it cancels the
        # outer scope, and a check inside it would be skipped by that very cancellation.
        timed_out = (
            tscope is not None and tscope.cancelled_caught
        ) or op.stop_reason == contract.CANCEL_SOURCE_TIMEOUT
        if op.cancel_info is not None:
            return  # _on_cancelled owns the terminal
        diag = self._diagnostics(sess, op, ctx) if want_diag else None
        if timed_out:
            self.stats["timeouts"] += 1
            op.stop_reason = contract.CANCEL_SOURCE_TIMEOUT
            d = await self._stop_by_policy(
                sess,
                op,
                ctx,
                contract.CANCEL_SOURCE_TIMEOUT,
                f"nnrp.timeout_ms={timeout_ms} expired",
            )
            self._finish(
                sess,
                op,
                self._error(
                    contract.ERR_TIMEOUT,
                    (f"operation exceeded nnrp.timeout_ms={timeout_ms} after {op.sent} events"),
                    d,
                ),
            )
            return
        if hint_hit:
            d = await self._stop_by_policy(
                sess,
                op,
                ctx,
                contract.CANCEL_SOURCE_HINT,
                f"nnrp.cancel_after_events={cancel_after}",
            )
            self._finish(
                sess,
                op,
                _Terminal(
                    "push",
                    codec.with_diagnostics(profile.cancelled_event(contract.CANCEL_SOURCE_HINT), d),
                ),
            )
            return
        if failure is not None:
            msg = f"handler failed: {type(failure).__name__}: {failure}"
            log.warning("op %s: %s", op.operation_id, msg)
            self._finish(sess, op, self._error(contract.ERR_INTERNAL, msg, diag))
            return
        if terminal is None:
            self._finish(sess, op, _Terminal("push", None))  # the empty success terminal
            return
        status = contract.WIRE_STATUS_OK
        if terminal["type"] == contract.EV_ERROR:
            code = (terminal.get("error") or {}).get("code", contract.ERR_INTERNAL)
            status = _error_status(code)
        self._finish(sess, op, _Terminal("push", codec.with_diagnostics(terminal, diag), status))

    def _decode(self, sess: _SessionPump, op: _Op) -> dict[str, Any]:
        submit = op.native.submit
        body = bytes(submit.tail.body)
        if len(body) > self.max_envelope_bytes + 256:
            raise WireViolation(
                "submit.too_large",
                f"submit body is {len(body)} bytes, the limit is {self.max_envelope_bytes}",
            )
        envelope = codec.decode_submit(submit.metadata.value, body)
        return envelope

    def _error(self, code: str, message: str, diag: dict[str, Any] | None = None) -> _Terminal:
        return _Terminal(
            "push",
            codec.with_diagnostics(profile.error_event(code, message), diag),
            _error_status(code),
        )

    def _finish(self, sess: _SessionPump, op: _Op, term: _Terminal) -> None:
        if op.terminal is not None or op.terminal_sent or op.done:
            return
        sess.enqueue(op, terminal=term)

    def _diagnostics(
        self, sess: _SessionPump, op: _Op, ctx: OperationContext | None
    ) -> dict[str, Any]:
        d: dict[str, Any] = {
            "operation_id": op.operation_id,
            "frame_id": op.frame_id,
            "session_id": sess.session_id,
            "connection_id": sess.connection_id,
            "transport": sess.transport,
            # Every queued event goes out before a normal terminal, so the loop's own count
            # is exact (reading the pump's counters from here races with a send in progress);
            # after a stop, what the pump actually sent is what the client got (read here
            # as a first value; _final_counts sets the final one as the terminal goes out).
            "events_emitted": op.enqueued if op.stop_reason in (None, "terminal") else op.sent,
            "elapsed_ms": round((time.perf_counter_ns() - op.submitted_at_ns) / 1e6, 3),
        }
        if ctx is not None and ctx.diagnostics:
            d["handler"] = dict(ctx.diagnostics)
        return d

    def _cancel_diag(self, op: _Op, info: CancelInfo, accepted: dict[str, Any]) -> dict[str, Any]:
        return {
            "source": info.source,
            "reason": info.reason,
            "operation_id": op.operation_id,
            "frame_id": op.frame_id,
            "events_sent": op.sent,
            **accepted,
        }

    async def _stop_by_policy(
        self, sess: _SessionPump, op: _Op, ctx: OperationContext, source: str, reason: str
    ) -> dict[str, Any]:
        """A stop the server decided (deadline, in-band hint): abort, then the diagnostics."""
        info = CancelInfo(source, reason, time.perf_counter_ns())
        ctx.cancelled = info
        accepted = await self._abort(ctx, info)
        d = self._diagnostics(sess, op, ctx)
        d["cancellation"] = self._cancel_diag(op, info, accepted)
        return d

    async def _abort(self, ctx: OperationContext, info: CancelInfo) -> dict[str, Any]:
        hooks = list(ctx._abort_hooks)
        if not hooks:
            return {"abort_accepted": False, "abort_hooks": 0}
        results: list[bool] = []
        errors: list[str] = []
        with anyio.CancelScope(shield=True):
            for hook in hooks:
                try:
                    with anyio.fail_after(self.abort_hook_timeout):
                        res = hook(info)
                        if inspect.isawaitable(res):
                            res = await res
                    results.append(bool(res))
                except TimeoutError:
                    results.append(False)
                    errors.append(f"abort hook did not return within {self.abort_hook_timeout}s")
                except Exception as exc:
                    results.append(False)
                    errors.append(f"{type(exc).__name__}: {exc}")
        out: dict[str, Any] = {"abort_accepted": all(results), "abort_hooks": len(hooks)}
        if errors:
            out["abort_errors"] = errors
        return out

    def _on_deadline_hit(self, sess: _SessionPump, op: _Op) -> None:
        scope = op.scope
        if scope is not None:
            scope.cancel()

    def _on_cancelled(self, sess: _SessionPump, op: _Op) -> None:
        """The pump saw a cancel/disconnect: stop the handler, run abort, send the drop."""
        info = op.cancel_info
        assert info is not None
        self.stats["cancelled"] += 1
        scope = op.scope
        if scope is not None:
            scope.cancel()
        task = asyncio.ensure_future(self._cancelled_terminal(sess, op, info))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _cancelled_terminal(self, sess: _SessionPump, op: _Op, info: CancelInfo) -> None:
        running = op.task
        if running is not None and not running.done():
            with anyio.move_on_after(self.abort_hook_timeout):
                await asyncio.wait({running})
        ctx = op.ctx
        accepted = {"abort_accepted": False, "abort_hooks": 0}
        if ctx is not None:
            ctx.cancelled = info
            accepted = await self._abort(ctx, info)
        if info.source == contract.CANCEL_SOURCE_DISCONNECT or op.done:
            return  # nothing is ever sent to a gone peer
        d = self._diagnostics(sess, op, ctx)
        d["cancellation"] = self._cancel_diag(op, info, accepted)
        reason = (
            contract.WIRE_DROP_TRANSPORT_CLOSED
            if info.source == contract.CANCEL_SOURCE_SHUTDOWN
            else contract.WIRE_DROP_PEER_CANCELLED
        )
        op.terminal = None
        sess.enqueue(
            op,
            terminal=_Terminal(
                "drop",
                codec.with_diagnostics(profile.cancelled_event(info.source), d),
                drop_reason=reason,
            ),
        )
