"""What the server binding does with one operation (the policy): decode and check the
submit against the wire mapping, run the handler, turn its events into frames through the
session's pump, and end the operation exactly once, whatever stops it (the handler's end, a
client cancel, the envelope's ``nnrp.timeout_ms``, the ``nnrp.cancel_after_events`` hint, a
disconnect, shutdown), with the backend abort hook and the diagnostics.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from dataclasses import dataclass
from typing import Any

import anyio

from nnrp_conformance import contract
from nnrp_conformance.wire import codec
from nnrp_conformance.wire.codec import WireViolation
from vllm_nnrp_adapter.profile import profile

from . import auth
from .hints import Hints
from .operation import CancelInfo, Handler, OperationContext, _Op, _Terminal
from .sides import Session
from .terminal import error_status, error_terminal

log = logging.getLogger("vllm_nnrp_adapter.nnrp_server")


@dataclass(slots=True)
class _Streamed:
    """How the handler's stream ended."""

    terminal: dict[str, Any] | None = None
    failure: BaseException | None = None
    hint_hit: bool = False
    timed_out: bool = False


class _OperationRunner:
    """The per-operation half of :class:`NnrpServer` (a mixin: it reads the server's
    settings, ``stats``, ``handler`` and ``_tasks``)."""

    # What the mixin reads of the server, set by NnrpServer.__init__: declared here so that
    # each read is checked against one type.
    handler: Handler
    api_gate: auth.ApiKeyGate | None
    max_envelope_bytes: int
    max_in_flight: int
    abort_hook_timeout: float
    stats: dict[str, int]
    _tasks: set[asyncio.Task[None]]

    def _start_op(self, sess: Session, op: _Op) -> None:
        task = asyncio.ensure_future(self._run_op(sess, op))
        op.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_op(self, sess: Session, op: _Op) -> None:
        """One operation, start to its one terminal: admit, stream the handler, conclude."""
        self.stats["operations"] += 1
        envelope = self._admit(sess, op)
        if envelope is None:
            return
        refusal = auth.admit(self.api_gate, sess, envelope, self.stats)
        if refusal is not None:
            # the gate's answer (authenticated, or refused) is the operation's one terminal;
            # the handler, and with it every record and metric of the request, never sees it
            self._finish(sess, op, refusal)
            return
        hints = Hints.of(envelope)
        ctx = OperationContext(
            envelope,
            op.operation_id,
            op.frame_id,
            sess.session_id,
            sess.connection_id,
            sess.transport,
            op.submitted_at_ns,
            hints.timeout_ms,
        )
        op.ctx = ctx
        if hints.timeout_ms is not None:
            op.deadline_ns = op.submitted_at_ns + hints.timeout_ms * 1_000_000
        streamed = await self._stream(sess, op, ctx, hints)
        if op.cancel_info is not None:
            return  # _on_cancelled owns the terminal
        await self._conclude(sess, op, ctx, hints, streamed)

    def _admit(self, sess: Session, op: _Op) -> dict[str, Any] | None:
        """The submit's envelope, or None when the operation was refused (and so ended): a
        frame that breaks the wire mapping, one that cannot be decoded, one too many."""
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
                sess, op, error_terminal(code, f"wire mapping violated ({exc.rule}): {exc.detail}")
            )
            return None
        except Exception as exc:  # the operation must still end exactly once
            log.exception("op %s: submit could not be decoded", op.operation_id)
            self._finish(
                sess,
                op,
                error_terminal(contract.ERR_INTERNAL, f"submit could not be decoded: {exc!r}"),
            )
            return None
        if len(sess.ops) > self.max_in_flight:
            self._finish(
                sess,
                op,
                error_terminal(
                    contract.ERR_OVERLOADED,
                    (f"more than {self.max_in_flight} operations in flight on this connection"),
                ),
            )
            return None
        return envelope

    async def _stream(
        self, sess: Session, op: _Op, ctx: OperationContext, hints: Hints
    ) -> _Streamed:
        """Run the handler, queueing each event for the pump (bounded queue: the flow
        control), until it ends, yields a terminal, fails, or a stop, deadline or hint."""
        out = _Streamed()
        # locals on the per-event path: no attribute lookup per event
        emitted = 0
        cancel_after = hints.cancel_after
        agen = self.handler(ctx)
        tscope: anyio.CancelScope | None = None
        try:
            with anyio.CancelScope() as scope:
                op.scope = scope
                with anyio.move_on_after(
                    None
                    if hints.timeout_ms is None or op.deadline_ns is None
                    else max(0.0, (op.deadline_ns - time.perf_counter_ns()) / 1e9)
                ) as tscope:
                    async for event in agen:
                        if op.stop_reason is not None:
                            break
                        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
                            out.failure = TypeError(
                                f"handler yielded {type(event).__name__}, not an event object"
                            )
                            break
                        if event["type"] in contract.TERMINAL_EVENT_TYPES:
                            out.terminal = event
                            break
                        try:
                            body = codec.encode_event(event)
                        except (TypeError, ValueError) as exc:
                            out.failure = exc
                            break
                        while len(op.out) >= op.queue_size and op.stop_reason is None:
                            op.space_waiter = asyncio.get_running_loop().create_future()
                            if len(op.out) >= op.queue_size:
                                await op.space_waiter
                        # a stop may come while the queue was full: mypy keeps the narrowing
                        # of the check above across that await, so it calls this unreachable
                        if op.stop_reason is not None:
                            break  # type: ignore[unreachable]
                        sess.enqueue(op, body)
                        op.enqueued += 1
                        emitted += 1
                        if cancel_after is not None and emitted >= cancel_after:
                            out.hint_hit = True  # queued events still go out, then the terminal
                            break
        except Exception as exc:
            out.failure = exc
        finally:
            op.scope = None
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                # a handler returns any async iterator; an async generator is closed here
                aclose = getattr(agen, "aclose", None)
                if aclose is not None:
                    await aclose()
        # Judged after both scopes: when the pump sees the deadline first it cancels the
        # outer scope, and a check inside it would be skipped by that very cancellation.
        out.timed_out = (
            tscope is not None and tscope.cancelled_caught
        ) or op.stop_reason == contract.CANCEL_SOURCE_TIMEOUT
        return out

    async def _conclude(
        self, sess: Session, op: _Op, ctx: OperationContext, hints: Hints,
        streamed: _Streamed,
    ) -> None:
        """The one terminal of an operation nobody cancelled: the deadline's error, the
        hint's cancelled, the handler's failure, its terminal, or the empty success."""
        diag = self._diagnostics(sess, op, ctx) if hints.want_diagnostics else None
        if streamed.timed_out:
            self.stats["timeouts"] += 1
            op.stop_reason = contract.CANCEL_SOURCE_TIMEOUT
            d = await self._stop_by_policy(
                sess,
                op,
                ctx,
                contract.CANCEL_SOURCE_TIMEOUT,
                f"nnrp.timeout_ms={hints.timeout_ms} expired",
            )
            self._finish(
                sess,
                op,
                error_terminal(
                    contract.ERR_TIMEOUT,
                    (f"operation exceeded nnrp.timeout_ms={hints.timeout_ms} after "
                     f"{op.sent} events"),
                    d,
                ),
            )
            return
        if streamed.hint_hit:
            d = await self._stop_by_policy(
                sess,
                op,
                ctx,
                contract.CANCEL_SOURCE_HINT,
                f"nnrp.cancel_after_events={hints.cancel_after}",
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
        failure = streamed.failure
        if failure is not None:
            msg = f"handler failed: {type(failure).__name__}: {failure}"
            log.warning("op %s: %s", op.operation_id, msg)
            self._finish(sess, op, error_terminal(contract.ERR_INTERNAL, msg, diag))
            return
        terminal = streamed.terminal
        if terminal is None:
            self._finish(sess, op, _Terminal("push", None))  # the empty success terminal
            return
        status = contract.WIRE_STATUS_OK
        if terminal["type"] == contract.EV_ERROR:
            code = (terminal.get("error") or {}).get("code", contract.ERR_INTERNAL)
            status = error_status(code)
        self._finish(sess, op, _Terminal("push", codec.with_diagnostics(terminal, diag), status))

    def _decode(self, sess: Session, op: _Op) -> dict[str, Any]:
        submit = op.native.submit
        body = bytes(submit.tail.body)
        if len(body) > self.max_envelope_bytes + 256:
            raise WireViolation(
                "submit.too_large",
                f"submit body is {len(body)} bytes, the limit is {self.max_envelope_bytes}",
            )
        envelope = codec.decode_submit(submit.metadata.value, body)
        return envelope

    def _finish(self, sess: Session, op: _Op, term: _Terminal) -> None:
        if op.terminal is not None or op.terminal_sent or op.done:
            return
        sess.enqueue(op, terminal=term)

    def _diagnostics(
        self, sess: Session, op: _Op, ctx: OperationContext | None
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
        self, sess: Session, op: _Op, ctx: OperationContext, source: str, reason: str
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

    def _on_deadline_hit(self, sess: Session, op: _Op) -> None:
        scope = op.scope
        if scope is not None:
            scope.cancel()

    def _on_cancelled(self, sess: Session, op: _Op) -> None:
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

    async def _cancelled_terminal(self, sess: Session, op: _Op, info: CancelInfo) -> None:
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

