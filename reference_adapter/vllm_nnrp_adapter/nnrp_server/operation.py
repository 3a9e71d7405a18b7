"""One operation as the server binding sees it: what a handler is given
(:class:`OperationContext`, :class:`CancelInfo`, the :data:`Handler` signature) and the state
the event loop and the session's pump thread share (:class:`_Op`, :class:`_Terminal`).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from nnrp_conformance import contract

__all__ = ["AbortHook", "CancelInfo", "Handler", "OperationContext"]


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
