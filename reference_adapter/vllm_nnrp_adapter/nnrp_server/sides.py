"""The two sides of the server binding as each sees the other, so that neither imports the
other: :class:`PumpHost` is what a session's pump thread reads and calls on its server (the
poll settings, the shared poll budget, the hand-offs to the event loop), :class:`Session` is
what the event loop's side (the server, the per-operation policy) reads and calls on one
session's pump. ``server`` builds both sides and is the only module that knows each concrete
class; ``pump`` and ``operations`` know each other only through these.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from .operation import _Op, _Terminal

__all__ = ["PumpHost", "Session"]


class Session(Protocol):
    """One session's pump as the event loop's side uses it (:class:`.pump._SessionPump`)."""

    session_id: int
    connection_id: int
    transport: str
    native: Any
    closed: bool
    #: the API-key gate's state for this session (``auth.ApiKeyGate``)
    authenticated: bool
    auth_failures: int
    #: operation id -> operation in flight (the pump thread's; the loop reads its size)
    ops: dict[int, _Op]

    def enqueue(
        self, op: _Op, body: bytes | None = None, terminal: _Terminal | None = None
    ) -> None:
        """Queue an event's bytes and/or the terminal of ``op`` for the pump to send."""


class PumpHost(Protocol):
    """The server as a session's pump thread uses it (:class:`.server.NnrpServer`)."""

    queue_size: int
    hot_poll_interval_ns: int
    idle_poll_interval_ns: int
    poll_cost_ns: int
    session_idle_poll_ms: int
    _loop: asyncio.AbstractEventLoop | None

    def busy_poll_share_ns(self) -> int:
        """The poll interval the busy sessions' shared budget allows each of them."""

    def _busy_changed(self, delta: int) -> None:
        """One session more (+1) or fewer (-1) with an operation in flight."""

    def _session_ended(self, sess: Session) -> None:
        """The pump thread of ``sess`` has ended."""

    def _loop_call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the event loop (from the pump thread)."""

    # what the pump hands to the event loop through _loop_call
    def _start_op(self, sess: Session, op: _Op) -> None:
        """A submit arrived: run its operation."""

    def _on_deadline_hit(self, sess: Session, op: _Op) -> None:
        """The pump saw ``op``'s ``nnrp.timeout_ms`` pass."""

    def _on_cancelled(self, sess: Session, op: _Op) -> None:
        """The pump saw a cancel or a disconnect for ``op``."""
