"""A session's pump: the one OS thread that owns an nnrp-py server session.

nnrp-py serialises calls per session and has no wakeable poll (an idle poll blocks sends
~2 ms), so this thread sends whatever the handlers queued and polls only when the next event
is not imminent (right after a send on a slow stream, every ``hot_poll_interval_ms`` on a fast
one, continuously when no operation is in flight); sessions with work in flight share the
server's poll budget. Incoming frames (submits, cancels) go to the event loop through
:meth:`.sides.PumpHost._loop_call`; the loop queues events back with :meth:`_SessionPump.enqueue`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from typing import Any

from nnrp.core import MessageType
from nnrp.native import NativeInvalidStateError, NativeRuntimeError, NativeWouldBlockError
from nnrp.runtime import OperationState, PartialResultMetadata
from nnrp.server import NativeServerEventKind

from nnrp_conformance import contract
from nnrp_conformance.wire.pump import DETAIL_STALE_OR_GONE, detail_code, status_text

from . import sdk
from .operation import CancelInfo, _Op, _Terminal
from .sides import PumpHost
from .terminal import final_counts, send_terminal

log = logging.getLogger("vllm_nnrp_adapter.nnrp_server")

# Poll wait of a session with no operation in flight. A poll returns as soon as a frame
# arrives, so the wait costs a submit nothing; what it costs is CPU per poll (100-300 us
# here): 256 idle sessions took 70 % of a core at 25 ms, 2.2 % at 1000 ms (bench idle).
# A stopping server waits up to this long for an idle session's thread.
_SESSION_IDLE_POLL_MS = 1000
# While incoming frames keep arriving (a burst of cancels or submits), sends between two
# polls stop after this long, so the last frame of a burst is not 50 ms per frame away.
_BURST_SEND_SLICE_NS = 2_000_000
_GONE_THRESHOLD = 32  # consecutive 3/4/105 polls that mean the peer is gone (notes §7)


class _SessionPump:
    """One nnrp-py server session and the OS thread that owns it."""

    def __init__(self, server: PumpHost, native: Any, connection_id: int) -> None:
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
        self.authenticated = False  # the API-key gate's (auth.py), loop side only
        self.auth_failures = 0
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
                sdk.send_partial(
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
            final_counts(term.event, op.sent)
        op.stop_reason = op.stop_reason or "terminal"
        try:
            send_terminal(op, term)
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
            new_op = _Op(native, now, self.server.queue_size)
            self.ops[new_op.operation_id] = new_op
            self.by_frame[new_op.frame_id] = new_op
            self.server._loop_call(self.server._start_op, self, new_op)
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


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
