"""How the minimal endpoint ends and feeds one operation on the wire: partial results,
RESULT_PUSH terminals (with a profile event or empty) and RESULT_DROP_REASON drops.

``OpState`` is one open operation's stream; ``Sender`` is the part of a session that writes
to it. Every event body passes ``Sender.restyled`` (a conformant variant's way of writing an
event, ``variants.py``, or the ``every-freedom`` variant's, ``freedom_acts.py``): the one hook
through which test wrappers change what is sent. The
session loop that decides *when* to send is ``session.Session``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import freedom_acts
import neighbours
from config import Config, log
from envelope import STATUS_OK, Plan, cancelled_event, encode
from nnrp import StreamSemantics
from nnrp.core import (
    MessageType,
    PayloadKind,
    ResultClass,
    ResultPushMetadata,
    build_result_push_typed_payload_packet,
    build_typed_payload_frame,
)
from nnrp.native import NativeRuntimeError
from nnrp.runtime import (
    PartialResultMetadata,
    ResultDropReasonCode,
    ResultDropReasonMetadata,
    RuntimeRole,
)
from variants import restyle


@dataclass
class OpState:
    op: Any
    plan: Plan
    events: Iterator[bytes | None]
    deadline: float | None
    next_due: float
    sent: int = 0
    finished: bool = False  # a terminal went out (or the session gave up on it)
    exhausted: bool = False  # nothing left to send, but no terminal (defects only)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def streaming(self) -> bool:
        return not (self.finished or self.exhausted)



class Sender:
    """Writes one session's operations to the wire; ``session.Session`` drives it."""

    config: Config
    ops: dict[int, OpState]

    def restyled(self, op: Any, body: bytes) -> bytes | None:
        """A conformant variant's way of writing an event (variants.py); None: not sent."""
        if self.config.variant is None and not self.config.freedoms:
            return body
        try:
            event = json.loads(body)
        except ValueError:
            return body  # a defect's deliberately broken body stays as it is
        if not isinstance(event, dict):
            return body
        if self.config.freedoms:
            return encode(freedom_acts.restyle(event, self.config.freedoms, op.operation_id))
        styled = restyle(event, self.config.variant, op.operation_id)
        return None if styled is None else encode(styled)

    async def send_partial(self, state: OpState, body: bytes) -> None:
        op = state.op
        styled = self.restyled(op, body)
        if styled is None:
            return
        body = styled
        seq = state.sent + 1
        metadata = PartialResultMetadata(op.operation_id, seq, 0, seq - 1, len(body), 0)
        await op.send_partial_result(metadata, body)
        state.sent = seq

    async def push(self, state: OpState, event: dict[str, Any], status: int) -> None:
        op = state.op
        diagnostic = freedom_acts.error_drop(self.config, event)
        if diagnostic is not None:
            await self.drop_with(state, ResultDropReasonCode.CAPABILITY_MISMATCH, diagnostic)
            return
        state.finished = True
        status = freedom_acts.push_status(self.config, status)
        frame = build_typed_payload_frame(
            PayloadKind.STRUCTURED_EVENT, self.restyled(op, encode(event)) or encode(event),
            stream_semantics=StreamSemantics.SNAPSHOT,
        )
        packet = build_result_push_typed_payload_packet(
            session_id=0, frame_id=op.frame_id, frames=(frame,), status_code=status
        )
        try:
            await op.send_result(ResultPushMetadata.unpack(packet.metadata), packet.body)
        except NativeRuntimeError:
            # The runtime already saw a cancel of this frame: only a drop is accepted now.
            await self.drop_cancelled(state, "client")
            return
        if self.config.defect == "two-terminals":
            await self.second_terminal(state)
        await neighbours.end_neighbours(self, state, event=event, status=status)

    async def push_empty(self, state: OpState) -> None:
        """The empty success terminal: a RESULT_PUSH with zero payload frames (§8.1).
        nnrp-py's typed builder refuses zero frames, so the metadata is written here."""
        op = state.op
        state.finished = True
        metadata = ResultPushMetadata(
            freedom_acts.push_status(self.config, STATUS_OK), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            result_class=ResultClass.COMPLETE, payload_kind_bitmap=PayloadKind(0),
            payload_frame_count=0,
        )
        try:
            await op.send_result(metadata, b"")
        except NativeRuntimeError:
            await self.drop_cancelled(state, "client")

    async def second_terminal(self, state: OpState) -> None:
        # The public API refuses a second terminal, so the defect goes one level down.
        op = state.op
        diag = encode(cancelled_event("client"))
        metadata = ResultDropReasonMetadata(
            op.operation_id, state.sent + 2, ResultDropReasonCode.PEER_CANCELLED,
            RuntimeRole.SERVER, 0, len(diag),
        )
        try:
            await anyio.to_thread.run_sync(
                op._owner._send_operation_runtime_frame,
                op._handle, op.frame_id, MessageType.RESULT_DROP_REASON, metadata, diag,
            )
        except NativeRuntimeError as exc:
            log(f"two-terminals: second terminal refused by the runtime: {exc}")

    def drop_text(self, text: str) -> bytes:
        """An NNRP drop's diagnostic: empty, or plain text with the ``text-drops`` variant
        (the drop is NNRP's own message, §8.1; no profile document makes it JSON)."""
        return text.encode() if self.config.variant == "text-drops" else b""

    async def drop_invalid_submit(self, state: OpState) -> None:
        """An invalid submit (§6.1) ended at the NNRP level, the profile's preferred mapping
        of a malformed frame (§10): CAPABILITY_MISMATCH, no profile body."""
        op = state.op
        state.finished = True
        metadata = ResultDropReasonMetadata(
            op.operation_id, state.sent + 1, ResultDropReasonCode.CAPABILITY_MISMATCH,
            RuntimeRole.SERVER, 0, len(diag := self.drop_text("invalid submit")),
        )
        await op.send_result_drop(metadata, diag)

    async def drop_with(self, state: OpState, code: ResultDropReasonCode,
                        diagnostic: bytes) -> None:
        """An NNRP-level end with ``code`` and a plain diagnostic (freedom_acts.error_drop)."""
        op = state.op
        state.finished = True
        metadata = ResultDropReasonMetadata(
            op.operation_id, state.sent + 1, code, RuntimeRole.SERVER, 0, len(diagnostic))
        await op.send_result_drop(metadata, diagnostic)

    async def drop_deadline(self, state: OpState) -> None:
        """An NNRP-level end for an expired deadline: DEADLINE_EXPIRED, no profile body."""
        op = state.op
        state.finished = True
        metadata = ResultDropReasonMetadata(
            op.operation_id, state.sent + 1, ResultDropReasonCode.DEADLINE_EXPIRED,
            RuntimeRole.SERVER, 0, len(diag := self.drop_text("deadline expired")),
        )
        await op.send_result_drop(metadata, diag)

    async def drop_cancelled(self, state: OpState, reason: str) -> None:
        op = state.op
        state.finished = True
        code = ResultDropReasonCode.PEER_CANCELLED
        event = encode(cancelled_event(
            reason,
            source=reason,
            operation_id=op.operation_id,
            events_sent=state.sent,
            backend_aborted=True,
        ))
        diag = freedom_acts.cancel_diagnostic(self.config, reason, op.operation_id) \
            or self.restyled(op, event) or event
        if self.config.defect == "cancel-wrong-drop":
            code, diag = ResultDropReasonCode.BACKPRESSURE, b""
        metadata = ResultDropReasonMetadata(
            op.operation_id, state.sent + 1, code, RuntimeRole.SERVER, 0, len(diag)
        )
        try:
            await op.send_result_drop(metadata, diag)
        except NativeRuntimeError as exc:
            log(f"op {op.operation_id}: drop not delivered ({exc})")
