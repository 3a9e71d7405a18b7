"""Accepting sessions without losing one: a workaround for an nnrp-py defect.

``NativeServer.accept(timeout_ms=T)`` gives its pending accept ticket back when ``T`` runs
out, and a client whose handshake is under way at that moment has its session opened with
nobody to serve it: its first operation goes unanswered (docs/sdk-defects.md#accept-timeout;
10 of 900 sessions lost with 2-ms accepts). An endpoint that must notice a stop cannot wait
forever in one accept either: closing the server while an accept waits fails the close.

So this module accepts in slices on each listener itself and keeps the ticket across slices,
which is what the SDK's own accept does inside one call. It touches two SDK internals
(``NativeServer._servers`` and ``_allocate_native_handle_id``); where they are missing (a
fixed SDK), it falls back to the SDK's public ``accept``.
"""

from __future__ import annotations

from typing import Any

from nnrp.native import NativeWouldBlockError
from nnrp.server import NativeServerAcceptOptions

try:
    from nnrp.native import _allocate_native_handle_id
except ImportError:  # pragma: no cover - an SDK without the internal
    _allocate_native_handle_id = None


class Acceptor:
    """``accept(slice_ms)`` from one thread at a time: a session, or None after the slice."""

    def __init__(self, server: Any) -> None:
        self.server = server
        listeners = getattr(server, "_servers", None)
        self.listeners = [listener for _name, listener in listeners] \
            if listeners is not None and _allocate_native_handle_id is not None else None
        # one session handle id per listener, kept while its ticket is pending
        self.handle_ids: list[int | None] = [None] * len(self.listeners or ())

    def accept(self, slice_ms: int) -> Any | None:
        if self.listeners is None:
            return self._accept_public(slice_ms)
        per = max(1, slice_ms // len(self.listeners))
        for index, listener in enumerate(self.listeners):
            if self.handle_ids[index] is None:
                self.handle_ids[index] = _allocate_native_handle_id()
            try:
                session = listener.accept_session(session_handle_id=self.handle_ids[index],
                                                  generation=1, timeout_ms=per)
            except NativeWouldBlockError:
                continue  # the ticket stays pending for the next slice
            self.handle_ids[index] = None
            return session
        return None

    def _accept_public(self, slice_ms: int) -> Any | None:
        import asyncio

        try:
            return asyncio.run(self.server.accept(NativeServerAcceptOptions(timeout_ms=slice_ms)))
        except NativeWouldBlockError:
            return None
