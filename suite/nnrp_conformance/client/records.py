"""What every room of the client shares, below all of them: the records an operation yields
(:class:`ReceivedEvent`, :class:`Terminal`), the client's error, the end-of-stream marker and
the bulk-poll tuning, and :class:`OperationHost`, the calls an operation makes into the
connection that carries it. ``operation``, ``frames``, ``pump`` and ``connection`` import this;
it imports none of them, so the connection can own its operations without an operation
importing the connection back."""

from __future__ import annotations

import asyncio
import concurrent.futures
from dataclasses import dataclass, field
from typing import Any, Protocol

from nnrp_conformance.terminals import terminal_kind_of

# Bulk polling: once an operation has streamed BULK_AFTER partials and its mean gap between
# partials (an EWMA) is under BULK_GAP, the session is polled for up to BULK_MAX frames at a
# time: nnrp-py's per-call cost is about half of its per-event cost. Never while a cancel is
# unanswered (a stale frame makes nnrp-py drop the whole batch), and never for short or
# paced streams (a poll for several frames lingers 2-3 ms waiting to fill, notes §3).
_BULK_AFTER = 64
_BULK_GAP_NS = 500_000
_BULK_MAX = 16


class NnrpClientError(RuntimeError):
    """Connecting, submitting or closing failed; the message says which and why."""


@dataclass(slots=True)
class ReceivedEvent:
    kind: str  # "partial" | "terminal"
    received_at_ns: int
    message_type: str
    raw: bytes
    event: dict[str, Any] | None
    decode_error: str | None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Terminal:
    delivery: (
        str  # "result_push" | "result_drop" | "local_cancelled" | "timeout" | "transport_error"
    )
    event: dict[str, Any] | None
    status_code: int | None = None
    drop_reason: int | None = None
    detail: str = ""
    diagnostics: dict[str, Any] = field(default_factory=dict)
    received_at_ns: int | None = None

    @property
    def outcome(self) -> str | None:
        """The profile terminal kind this delivery amounts to (the one rule: terminals.py)."""
        return terminal_kind_of(self)


# put on an operation's channel after its terminal: its reader stops there
_DONE = object()


class OperationHost(Protocol):
    """The calls an :class:`~nnrp_conformance.client.operation.Operation` makes into the
    connection that carries it (``connection.NnrpClient`` is the one implementation).

    ``op`` is typed ``Any`` here because the operation type sits above this module: naming
    it would import it back."""

    _loop: asyncio.AbstractEventLoop
    command_timeout: float

    def _command(self, kind: str, arg: Any) -> concurrent.futures.Future[Any]:
        """Queue a command (``"cancel"``) for the pump thread."""
        ...

    async def _await(self, fut: concurrent.futures.Future[Any], timeout: float, what: str) -> Any:
        """Wait for the pump to run a queued command."""
        ...

    def _finish(self, op: Any, terminal: Terminal) -> None:
        """Record an operation's one terminal."""
        ...
