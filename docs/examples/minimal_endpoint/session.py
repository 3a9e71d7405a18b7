"""One NNRP session of the minimal endpoint: a single loop that polls, then advances every
open operation by at most one slice of events.

This module owns an operation's life on a session: its start (the request frame decoded,
its answer planned), the pacing of its events, its deadline (``nnrp.timeout_ms``), its
cancel hint (``nnrp.cancel_after_events``), a client's cancel, SESSION_CLOSE and a peer that
vanished. What goes on the wire is ``sending.Sender``'s.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from typing import Any

import admission
import answer_shapes
import anyio
import api_key
import chat_profile
import diagnostics_event
import freedom_acts
import input_faults
import neighbours
from config import Config, log
from envelope import OP_CAPABILITIES, OP_RESPONSES, STATUS_OK, Plan, cancelled_event, error_plan
from nnrp.core import MessageType
from nnrp.native import NativeRuntimeError, NativeWouldBlockError
from nnrp.runtime import OperationState
from nnrp.server import NativeServerEventKind
from request_frame import decode_request
from sending import OpState, Sender
from variants import ends_stream_empty, serves_discovery

#: events sent per operation between two polls, so a cancel is seen within one slice
SLICE_EVENTS = 4
#: poll wait while operations stream / while idle (a poll blocks sends on its session)
BUSY_POLL_S = 0.001
IDLE_POLL_S = 0.02
#: a dead peer makes every poll fail at once; this many failures in a row end the session
DEAD_PEER_POLLS = 200


_SESSION_NUMBERS = itertools.count(1)


class Session(Sender):
    """One NNRP session: a single loop that polls, then advances every open operation."""

    def __init__(self, ssess: Any, config: Config, stop: anyio.Event) -> None:
        self.ssess = ssess
        self.config = config
        self.stop = stop
        self.ops: dict[int, OpState] = {}
        self.by_frame: dict[int, int] = {}
        #: invalid-deafens-session: the next operation goes unanswered
        self.deaf = False
        #: the session gave the key (--api-key; api_key.py)
        self.authenticated = False
        #: the session's number in the process (input_faults.seed-per-session)
        self.number = next(_SESSION_NUMBERS)

    # --- operations ----------------------------------------------------------------------

    def start(self, op: Any) -> None:
        config = self.config
        input_faults.SESSION.set(self.number)
        request = decode_request(op, config.defect)
        keyed = api_key.gate(self, config, request)
        if keyed is not None:
            plan = keyed
        elif isinstance(request, Plan):
            plan = request
            plan.extra["invalid_submit"] = True
        elif freedom_acts.takes(config, "discovery-refused") \
                and _operation(request) == OP_CAPABILITIES:
            plan = freedom_acts.discovery_refusal()
        elif not serves_discovery(config.variant) and _operation(request) == OP_CAPABILITIES:
            plan = error_plan("unsupported_operation",
                              f"operation {OP_CAPABILITIES!r} is not served here")
        else:
            plan = chat_profile.plan_request(
                request, op_id=op.operation_id, model=config.model, defect=config.defect,
                levels=config.levels, planners=config.planners(),
            )
        plan = api_key.claimed(plan, config, request)
        plan = admission.admit(self, plan, request)  # session limits (variants)
        plan = answer_shapes.reshape(config.variant, plan)
        plan = diagnostics_event.add(config.variant, plan)
        plan = freedom_acts.replan(plan, config)
        now = time.monotonic()
        deadline = None
        if plan.timeout_ms is not None and config.defect != "ignores-timeout" \
                and not freedom_acts.takes(config, "timeout-not-enforced"):
            deadline = now + plan.timeout_ms / 1000
        state = OpState(op, plan, iter(plan.partials), deadline, next_due=now)
        if config.defect == "silence" or self.deaf:
            state.exhausted = True
        self.deaf = input_faults.deafens(config.defect, plan.terminal) and not self.deaf
        self.ops[op.operation_id] = state
        self.by_frame[op.frame_id] = op.operation_id
        neighbours.register(self, state)

    async def advance(self, state: OpState) -> None:
        """Send what is due for one operation: at most one slice of events, or its end."""
        config, plan = self.config, state.plan
        delay = 0.0 if config.defect == "flood" else config.delta_delay_s
        for n in itertools.count():
            if n >= SLICE_EVENTS and not answer_shapes.bursts(plan, state.sent):
                return  # (ends-at-cancel sends the rest of its answer at once)
            now = time.monotonic()
            if state.deadline is not None and now >= state.deadline:
                if config.variant == "timeout-cancelled":
                    await self.drop_cancelled(state, "timeout")
                    return
                if config.variant in ("timeout-drop", "text-drops"):
                    await self.drop_deadline(state)
                    return
                timeout = error_plan(
                    "timeout",
                    f"nnrp.timeout_ms {plan.timeout_ms} expired after {state.sent} events",
                    config.defect,
                )
                await self.push(state, timeout.terminal, timeout.status)
                return
            if now < state.next_due:
                return
            limit = plan.cancel_after_events
            if limit is not None and state.sent >= limit and config.defect != "ignores-cancel-hint" \
                    and not freedom_acts.takes(config, "cancel-hint-ignored"):
                event = cancelled_event("cancel_after_events", events_sent=state.sent)
                await self.push(state, event, STATUS_OK)
                return
            item = next(state.events, StopIteration)
            if item is StopIteration:
                if plan.empty_terminal or ends_stream_empty(config.variant, plan.terminal,
                                                            state.sent):
                    await self.push_empty(state)
                elif plan.extra.get("invalid_submit") and (
                        config.variant in ("nnrp-submit-errors", "text-drops")
                        or freedom_acts.takes(config, "invalid-submit-drop")):
                    await self.drop_invalid_submit(state)
                elif plan.terminal is None:
                    state.exhausted = True
                else:
                    neighbours.swap_terminal(self, state)
                    await self.push(state, plan.terminal, plan.status)
                return
            state.next_due = max(state.next_due + delay, now) \
                if delay and not answer_shapes.bursts(plan, state.sent + 1) else now
            if item is not None:
                try:
                    for body in neighbours.cross_talk(self, state, item):
                        await self.send_partial(state, body)
                except NativeRuntimeError:
                    # The runtime has processed the client's cancel before this loop polled it.
                    await self.drop_cancelled(state, "client")
                    return

    def ignores_cancel(self, state: OpState) -> bool:
        """The defects that never look for a cancel while this operation streams."""
        defect = self.config.defect
        return defect == "late-event-after-cancel" or (
            defect == "responses-ignores-cancel" and state.plan.operation == OP_RESPONSES)

    async def run_inline(self, state: OpState) -> None:
        """late-event-after-cancel: stream the whole operation without polling once."""
        while state.streaming:
            await self.advance(state)
            await anyio.sleep(self.config.delta_delay_s)

    # --- events --------------------------------------------------------------------------

    async def on_cancel(self, op_id: int) -> None:
        state = self.ops.get(op_id)
        if state is None or state.finished or self.config.defect == "silence" \
                or admission.leaks_cancelled(self, state):
            return
        await self.drop_cancelled(state, "client")
        await neighbours.end_neighbours(self, state)

    async def handle(self, event: Any) -> bool:
        """Handle one polled event; True when the session is over."""
        if event.kind is NativeServerEventKind.SUBMIT:
            self.start(event.as_submit())
        elif event.kind is NativeServerEventKind.RUNTIME:
            frame = event.as_runtime()
            kind = frame.header.message_type
            if kind is MessageType.FRAME_CANCEL:
                await self.on_cancel(self.by_frame.get(frame.header.frame_id, -1))
            elif kind is MessageType.CANCEL:
                await self.on_cancel(frame.metadata.value.operation_id)
            elif kind is MessageType.SESSION_CLOSE:
                return True
        else:
            lifecycle = event.as_lifecycle()
            if lifecycle.state is OperationState.CANCELLED:
                await self.on_cancel(lifecycle.operation_id)
        return False

    async def run(self) -> None:
        failures = 0
        try:
            while not self.stop.is_set():
                self.ops = {k: s for k, s in self.ops.items() if not s.finished}
                busy = [s for s in self.ops.values() if s.streaming]
                deaf = [s for s in busy if self.ignores_cancel(s)]
                if deaf:
                    for state in deaf:
                        await self.run_inline(state)
                    continue
                try:
                    wait = BUSY_POLL_S if busy else IDLE_POLL_S
                    event = await self.ssess.next_event(timeout=wait)
                    failures = 0
                except NativeWouldBlockError:
                    event, failures = None, 0
                except NativeRuntimeError as exc:
                    # Stale events of a cancelled operation fail one by one; a dead peer
                    # fails every poll at once and forever, with no other signal.
                    failures += 1
                    if failures >= DEAD_PEER_POLLS:
                        log(f"session peer is gone ({exc}); ending the session")
                        self.release()
                        return
                    event = None
                if event is not None and await self.handle(event):
                    await self.close_open_ops("disconnect")
                    self.ssess.close()
                    return
                for state in busy:
                    if state.streaming:
                        await self.advance(state)
                if admission.drops_session(self):
                    self.release()
                    return
            await self.close_open_ops("shutdown")
            self.ssess.close()
        except Exception as exc:  # one broken session must not take the endpoint down
            log(f"session ended by {type(exc).__name__}: {exc}")
            self.release()

    def release(self) -> None:
        """Free the runtime's session after its peer vanished (nothing to acknowledge)."""
        with contextlib.suppress(NativeRuntimeError):
            self.ssess.close()

    async def close_open_ops(self, reason: str) -> None:
        for state in self.ops.values():
            if not state.finished and self.config.defect != "silence":
                await self.drop_cancelled(state, reason)


def _operation(payload: bytes) -> Any:
    try:
        envelope = json.loads(payload)
    except ValueError:
        return None
    return envelope.get("operation") if isinstance(envelope, dict) else None

