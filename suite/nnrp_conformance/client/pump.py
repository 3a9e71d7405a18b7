"""The client's pump thread: the one thread that owns the nnrp-py session (docs/wire-pump.md).

It runs submit/cancel/close commands between polls, polls one event at a time (a multi-event
poll lingers 2-3 ms and loses the whole batch on a stale event) only while operations are in
flight, decodes and timestamps each frame, records wire findings and hands the frame to the
operation's async iterator; a flood is capped per operation and every wait is bounded.
"""

from __future__ import annotations

import time
from typing import Any

from nnrp.native import (
    NativeInvalidStateError,
    NativeRuntimeError,
    NativeWouldBlockError,
)

from nnrp_conformance.terminals import DELIVERIES_FROM_ENDPOINT
from nnrp_conformance.wire.pump import (
    DETAIL_STALE_OR_GONE,
    detail_code,
    status_text,
)

from .frames import _CANCEL_CONFIRM_LIMIT_NS, _HOLD_MAX_NS, _FrameRouter
from .records import _BULK_GAP_NS, _BULK_MAX, Terminal
from .refused import _RefusalLedger

_IDLE_WAIT_S = 0.05
# Before a cancel goes out, the frames already here are read first (_drain_before_cancel), in
# batches: a batch poll returns at once when this many frames are queued, and otherwise
# lingers 2-3 ms for more (notes §3), so a batch that comes back short means the queue is
# empty and the cancel goes out. A poll for one frame cannot tell "queued" from "arrived while
# it waited" (100-400 us either way, measured here).
_DRAIN_BATCH = 64
# at most this many frames are read ahead of one cancel (a flood never ends by itself)
_DRAIN_MAX_FRAMES = 4096
# A turn of the pump's loop takes at most tens of milliseconds (an idle wait is 50 ms, a poll
# 1 ms, a drain a few thousand frames); a turn longer than this means the pump did not run.
_PUMP_STALL_NS = 1_000_000_000
# refusals (3/4/105) in a row, with no cancel of ours unanswered, that mean the session is gone
_GONE_LIMIT = 64


class _ClientPump(_RefusalLedger, _FrameRouter):
    """The pump-thread half of :class:`NnrpClient` (a mixin over the client's state)."""

    # the client state it shares, and the _finish stub, are declared on _FrameRouter

    # --- pump thread ---------------------------------------------------------------------------
    def _pump(self) -> None:
        consecutive_gone = 0
        last_turn = time.perf_counter_ns()
        while True:
            turn = time.perf_counter_ns()
            if turn - last_turn > _PUMP_STALL_NS:
                self._forgive_stall(turn - last_turn)
            last_turn = turn
            if self._commands:
                self._drain_before_cancel()
                with self._native_lock:
                    if not self._run_commands():
                        return
            self._check_cancel_grace()
            # an ended operation's settle window keeps the polls going (client/refused.py)
            if not (self._ops or self._cancels_unconfirmed() or self._settling_now(turn)) \
                    or self._broken:
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
                if consecutive_gone > _GONE_LIMIT and not self._cancels_unconfirmed():
                    self._broken = (
                        f"session unusable: {status_text(exc)} {consecutive_gone} times in a "
                        f"row with no cancel unanswered; {self.stale_errors} refused frames "
                        f"in all, the pump stalled {self.pump_stalls} times "
                        f"({self.pump_stalled_ns / 1e9:.1f} s)"
                    )
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

    def _forgive_stall(self, gap_ns: int) -> None:
        """The pump did not run for ``gap_ns`` (the process or the whole machine stalled):
        the wait for each unanswered cancel does not count that time.

        The server's answer to a cancel, and the stale frames ahead of it, may have been
        waiting here all along. A stall longer than the wait (one of 127 s was seen in CI)
        once expired every unanswered cancel before the pump could read a frame; the stale
        frames then read as a dead session, and the client broke a live one (the cancel
        storm of the real-vLLM tests: "session unusable" in three of its sixteen lanes at once).
        """
        self.pump_stalls += 1
        self.pump_stalled_ns += gap_ns
        for frame_id in self._unconfirmed_cancels:  # all by one amount: order is kept
            self._unconfirmed_cancels[frame_id] += gap_ns

    def _drain_before_cancel(self) -> None:
        """Read the frames already waiting before a queued cancel goes out.

        A frame that reached this client before its cancel was sent was sent by the endpoint
        before the cancel could reach it: it is an event, not a frame after the cancel. A
        reader behind the wire (a starved client, an endpoint that sent a burst) once cancelled
        after the first event of a 400-token answer whose every frame and terminal were already
        queued here, and the endpoint was failed for results after a cancel it never had a
        chance to see. When the terminal turns up in the drain the cancel is not sent and the
        operation says so (``ended_before_cancel``); the runner runs such a case again.
        """
        ops = [arg for kind, arg, _fut in list(self._commands)
               if kind == "cancel" and arg._native is not None and not arg._done_in_pump
               and arg.cancel_sent_at_ns is None]
        # A batch with a stale frame of an earlier cancel in it is lost whole (notes §6): with
        # a cancel still unanswered the drain is skipped and the cancel goes out as before.
        if not ops or self._unconfirmed_cancels:
            return
        drained = 0
        while drained < _DRAIN_MAX_FRAMES and not all(op._done_in_pump for op in ops):
            try:
                with self._native_lock:
                    events = self._session.poll_events_batch(max_events=_DRAIN_BATCH,
                                                             timeout_ms=0)
            except NativeWouldBlockError:
                return
            except NativeInvalidStateError as exc:
                self._on_invalid_state(exc)
                return
            except NativeRuntimeError:
                return  # the pump's own poll meets it again and says why
            now = time.perf_counter_ns()
            for ev in events:
                self._route(ev, now)
            drained += len(events)
            if len(events) < _DRAIN_BATCH:
                return

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
            if (op._native is not None and op._done_in_pump and op.terminal is not None
                    and op.terminal.delivery in DELIVERIES_FROM_ENDPOINT):
                # the endpoint's terminal was here before the cancel could go out: the race
                # was lost on this side, nothing is sent (the runner runs the case again)
                op.ended_before_cancel = True
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
            if not self._cancels_unconfirmed():
                # no cancel of ours explains it: a frame after an operation's terminal
                self._on_refused(status_text(exc), time.perf_counter_ns())
                return
            # a cancel of ours is unanswered: a frame the endpoint sent before it took effect,
            # refused by nnrp-py; it shows the peer is alive
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
