"""One operation as the client sees it (:class:`Operation`): the events it received, its one
terminal, the async iterator the caller reads with the operation's deadline and idle limit,
cancel, and the wire findings the checks read. The records it holds (``ReceivedEvent``,
``Terminal``) and the calls it makes into its connection (``OperationHost``) sit below it in
``records``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio

from nnrp_conformance.wire.pump import (
    ThreadChannel,
)

from .records import (
    _BULK_GAP_NS,
    _DONE,
    NnrpClientError,
    OperationHost,
    ReceivedEvent,
    Terminal,
)

# Operations in flight on every client of this process (set add/discard are atomic under the
# GIL). A submit is sent from the event loop only when this is empty: see NnrpClient.submit.
_IN_FLIGHT: set[Operation] = set()


class Operation:
    """One submitted operation. Iterate it for its events; ``terminal`` is set when it ends."""

    def __init__(
        self,
        client: OperationHost,
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
        # the typed frames of the FRAME_SUBMIT as sent, and frames that came after the
        # terminal (judged by wire.frame_after_terminal): what a frame trace shows
        self.request_frames: tuple[Any, ...] = ()
        self.after_terminal: list[ReceivedEvent] = []
        # frames nnrp-py refused after the terminal, attributed to this operation, and when
        # its settle window ends (client/refused.py): its iteration ends no sooner
        self.refused_after_terminal: list[Any] = []
        self.settle_until_ns: int | None = None
        self.wire_findings: list[dict[str, Any]] = []
        self.cancel_sent_at_ns: int | None = None
        self.local_cancelled_at_ns: int | None = None
        self.stale_after_cancel = 0
        # the endpoint's terminal reached us before our cancel could be sent (pump.py)
        self.ended_before_cancel = False
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

    async def _settle(self) -> None:
        """Wait out the settle window after the endpoint's terminal (client/refused.py)."""
        until = self.settle_until_ns
        left = 0.0 if until is None else (until - time.perf_counter_ns()) / 1e9
        if left > 0:
            await asyncio.sleep(left)

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
                await op._settle()
                raise StopAsyncIteration
            return cast(ReceivedEvent, item)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
