"""Routing one frame the pump received to its operation: partial results (decoded,
timestamped, capped, wake-ups coalesced), the terminal (a pushed result or a drop), frames
that arrive after an operation ended, and the wire findings each can raise."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import threading
import time
from typing import Any

from nnrp.core import MessageType
from nnrp.native import (
    NativeLifecycleEvent,
    NativeRuntimeError,
    NativeRuntimeEvent,
)
from nnrp.runtime import OperationState

from nnrp_conformance import contract
from nnrp_conformance.wire import codec
from nnrp_conformance.wire.codec import WireViolation

from .operation import Operation
from .records import _BULK_AFTER, _BULK_GAP_NS, ReceivedEvent, Terminal

_EVENT_KIND_OPERATION_LIFECYCLE = 14
_TERMINAL_TYPES = frozenset(
    (MessageType.RESULT_PUSH, MessageType.RESULT_DROP_REASON, MessageType.RESULT_DROP)
)
# A server flooding a cancelled stream can leave thousands of its frames queued ahead of
# the drop that answers the cancel; past this, a silent server no longer excuses 3/4/105.
_CANCEL_CONFIRM_LIMIT_NS = 60 * 1_000_000_000
# Wake-up coalescing (docs/wire-pump.md): a partial arriving within HOLD_GAP of the previous
# one is handed over without waking the reader; the held wake-up is given when a poll comes
# back empty, or once the oldest held event has waited HOLD_MAX. Paced streams (a gap above
# HOLD_GAP), first events and terminals are handed over at once.
_HOLD_GAP_NS = 300_000
_HOLD_MAX_NS = 1_000_000


class _FrameRouter:
    """The frame-routing half of the client's pump thread (a mixin over the client's state)."""

    # the client's state the pump reads and writes (NnrpClient.__init__ sets it up)
    _session: Any
    _ops: dict[int, Operation]
    _by_op_id: dict[int, Operation]
    _unconfirmed_cancels: dict[int, int]
    _finished: collections.OrderedDict[int, Operation]
    _held: dict[Operation, int]
    _bulk: Operation | None
    _commands: collections.deque[tuple[str, Any, concurrent.futures.Future[Any]]]
    _wake: threading.Event
    _native_lock: threading.Lock
    _broken: str | None
    cancel_grace: float
    stale_errors: int
    frames_received: int
    last_frame: tuple[str, int] | None
    bulk_polls: int
    pump_stalls: int
    pump_stalled_ns: int

    def _finish(self, op: Operation, terminal: Terminal) -> None:
        raise NotImplementedError  # the client's: it runs on the loop side too

    def _run_command(self, kind: str, arg: Any) -> Any:
        raise NotImplementedError  # the pump's

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
        op.after_terminal.append(
            ReceivedEvent(
                "after_terminal",
                now,
                mt.name,
                bytes(ev.tail.body or ev.tail.diagnostic or b""),
                None,
                None,
                {"frame_id": ev.header.frame_id},
            )
        )
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
        cancelled_push = isinstance(event, dict) and event.get("type") == contract.EV_CANCELLED
        if op.local_cancelled_at_ns is not None and not cancelled_push:
            # A push carrying response.cancelled is the endpoint ending the operation
            # cancelled (the profile's terminal cancellation notification, in RESULT_PUSH as
            # §8.1 says), whether it answers our cancel or crossed it acting on an in-band
            # hint; a push with any other terminal is a late result (§9).
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
