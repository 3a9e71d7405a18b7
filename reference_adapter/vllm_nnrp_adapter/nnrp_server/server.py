"""The NNRP server binding's listener and lifecycle: listen on the address's transport,
accept sessions on a thread of its own (each handed to a :class:`_SessionPump`), count the
sessions busy for the shared poll budget, and close cleanly. What happens to one operation
is :class:`_OperationRunner`'s (``operations.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
from nnrp.native import NativeRuntimeError, NativeWouldBlockError
from nnrp.server import NativeServerAcceptOptions, listen_native_server

from nnrp_conformance import contract
from nnrp_conformance.wire import lifetime, nodelay
from nnrp_conformance.wire.pump import (
    parse_address,
    server_options,
    status_text,
    unlistenable_reason,
)
from nnrp_conformance.wire.tls import server_security

from . import sdk
from .auth import ApiKeyGate
from .operation import Handler
from .operations import _OperationRunner
from .pump import _SESSION_IDLE_POLL_MS, _SessionPump
from .sides import Session

__all__ = ["NnrpServer"]

log = logging.getLogger("vllm_nnrp_adapter.nnrp_server")

# Polls a second that every session with an operation in flight share, at most. A poll costs
# 100-300 us of CPU here whether or not a frame comes, and a session waiting on the engine polls
# every idle_poll_interval_ms (20 ms) for cancels: 512 such sessions spent the adapter's CPU on
# 25,600 polls a second and starved the engine (bench capacity, docs/performance.md). Up to
# budget × interval busy sessions (20 at 20 ms) nothing changes; beyond, each polls less often,
# so a cancel of a silent operation is seen within busy_sessions / budget seconds.
_BUSY_POLL_BUDGET_PER_S = 1000.0
_ABORT_HOOK_TIMEOUT_S = 2.0
# one native accept wait; also how long a stopping server may wait for its accept thread
_ACCEPT_SLICE_MS = 200


class NnrpServer(_OperationRunner):
    """Async context manager: listens, runs ``handler`` per operation, closes cleanly."""

    def __init__(
        self,
        handler: Handler,
        listen: str = "127.0.0.1:0",
        *,
        max_envelope_bytes: int = contract.DEFAULT_MAX_ENVELOPE_BYTES,
        max_in_flight_per_connection: int = 64,
        queue_size: int = 256,
        hot_poll_interval_ms: float = 50.0,
        idle_poll_interval_ms: float = 20.0,
        session_idle_poll_ms: int = _SESSION_IDLE_POLL_MS,
        poll_cost_ms: float = 2.5,
        busy_poll_budget_per_s: float = _BUSY_POLL_BUDGET_PER_S,
        abort_hook_timeout: float = _ABORT_HOOK_TIMEOUT_S,
        tcp_nodelay: bool = True,
        api_keys: Sequence[str] = (),
        tls: tuple[bytes, bytes] | None = None,
    ) -> None:
        """``tls``: (certificate DER, PKCS#8 key DER), used by a TLS address (``tcp+tls://``,
        ``quic+tls://``, ``wss://``), which needs it; a plaintext one ignores it."""
        self.handler = handler
        # None without keys: every session may work (the operator chose no key)
        self.api_gate = ApiKeyGate(api_keys) if any(api_keys) else None
        self.endpoint = parse_address(listen)
        if self.endpoint.secure and tls is None:
            raise ValueError(f"{listen}: a TLS address needs a certificate and key (tls=)")
        self.tls = tls if self.endpoint.secure else None
        self.max_envelope_bytes = max_envelope_bytes
        self.max_in_flight = max_in_flight_per_connection
        self.queue_size = max(2, queue_size)
        self.hot_poll_interval_ns = int(hot_poll_interval_ms * 1e6)
        self.idle_poll_interval_ns = int(idle_poll_interval_ms * 1e6)
        self.poll_cost_ns = int(poll_cost_ms * 1e6)
        self.busy_poll_budget_per_s = busy_poll_budget_per_s
        self.busy_sessions = 0  # sessions with an operation in flight (their pumps count)
        self._busy_lock = threading.Lock()
        self.session_idle_poll_ms = max(1, int(session_idle_poll_ms))
        self.abort_hook_timeout = abort_hook_timeout
        self.tcp_nodelay = tcp_nodelay and self.endpoint.transport in ("tcp", "websocket")
        self.address = ""
        self.sessions: dict[int, _SessionPump] = {}
        self.stats = {"sessions": 0, "operations": 0, "malformed": 0, "cancelled": 0, "timeouts": 0,
                      "unauthenticated": 0, "auth_refused": 0}
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listen_held: lifetime.Held | None = None
        self._native_server: Any = None
        self._accept_thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    # --- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> NnrpServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        opts = server_options(
            self.endpoint, None if self.tls is None else server_security(*self.tls))
        # An ipc socket is owner-only (0600): created under a umask that says so, not
        # chmod-ed afterwards (a peer could connect in between). The umask is the process's,
        # so it is put back at once.
        umask = os.umask(0o177) if self.endpoint.transport == "ipc" else None
        try:
            self._listen_held, self._native_server = lifetime.enter(
                lambda: listen_native_server(opts), f"listener {self.endpoint.provider_uri}"
            )
        except NativeRuntimeError as exc:
            # nnrp-py says "detail=106" for a port in use: a plain bind says it in words
            reason = unlistenable_reason(self.endpoint) or f"{status_text(exc)}: {exc}"
            raise OSError(f"cannot listen on {self.endpoint.provider_uri}: {reason}") from None
        finally:
            if umask is not None:
                os.umask(umask)
        bound = self._native_server.bound_provider_endpoints[self.endpoint.transport].uri
        # what a client connects to: plain TCP as host:port, every other one as a URL in the
        # scheme it was asked for (nnrp-py names its TLS QUIC and TCP locators quic:// and
        # tcp://, which would send a client in plaintext)
        scheme, rest = self.endpoint.scheme, bound.split("://", 1)[1]
        self.address = (rest if scheme == "tcp" else bound if self.endpoint.transport == "ipc"
                        else f"{scheme}://{rest}")
        self._accept_thread = threading.Thread(
            target=self._accept_main, name="nnrp-accept", daemon=True
        )
        self._accept_thread.start()

    async def serve_forever(self) -> None:
        if self._loop is None:
            await self.start()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await self.aclose()

    async def aclose(self, *, timeout: float = 5.0) -> None:
        """Stop serving: cancel what runs, wind the pumps down, close sessions and listener.

        Shielded and bounded: a cancelled caller must not leave the listener to the garbage
        collector, and every native close runs off the event loop (``wire.lifetime``).
        """
        if self._native_server is None:
            return
        with anyio.CancelScope(shield=True):
            await self._aclose(timeout)

    async def _aclose(self, timeout: float) -> None:
        self._stopping.set()
        for sess in list(self.sessions.values()):
            for op in list(sess.ops.values()):
                if op.cancel_info is None and not op.terminal_sent:
                    sess._cancel(op, contract.CANCEL_SOURCE_SHUTDOWN, "server shutting down")
        # let cancelled handlers run their abort hooks and their drops go out
        with anyio.move_on_after(min(timeout, self.abort_hook_timeout + 0.5)):
            while any(s.ops for s in self.sessions.values()) or self._tasks:
                await anyio.sleep(0.005)
        for task in list(self._tasks):
            task.cancel()
        for sess in list(self.sessions.values()):
            sess.stop = True
            sess.wake()
        deadline = time.monotonic() + timeout
        for sess in list(self.sessions.values()):
            await anyio.to_thread.run_sync(
                sess.thread.join, max(0.0, deadline - time.monotonic())
            )
            await anyio.to_thread.run_sync(sess._close_native)
        if self._accept_thread is not None:
            await anyio.to_thread.run_sync(
                self._accept_thread.join, max(0.1, deadline - time.monotonic())
            )
        held, self._listen_held, self._native_server = self._listen_held, None, None
        await lifetime.aclose(held)

    # --- accept thread -------------------------------------------------------------------------
    def _accept_main(self) -> None:
        # accept() must be running while a client handshakes (notes §4.5); a thread of its own
        # keeps that true whatever the event loop is doing, for in-process tests too
        server = self._native_server
        blocking = sdk.accept_blocking if sdk.has_accept_internals(server) else None
        try:
            while not self._stopping.is_set():
                try:
                    if blocking is not None:
                        native = blocking(server, _ACCEPT_SLICE_MS)
                    else:
                        native = asyncio.run(
                            server.accept(NativeServerAcceptOptions(timeout_ms=100))
                        )
                except NativeWouldBlockError:
                    continue
                except NativeRuntimeError as exc:
                    if self._stopping.is_set():
                        return
                    log.info("accept: %s", status_text(exc))
                    time.sleep(0.01)
                    continue
                except Exception:
                    # Any other error (a handshake torn down half-way raises outside nnrp-py's
                    # NativeRuntimeError family) must not end this thread: the kernel goes on
                    # completing TCP connects, so every later client would see its session
                    # open go unanswered while the adapter looked alive.
                    if self._stopping.is_set():
                        return
                    log.exception("accept failed; accepting goes on")
                    time.sleep(0.01)
                    continue
                try:
                    self._accepted(native)
                except Exception:
                    log.exception("setting up an accepted session failed; closing it")
                    self._discard_accepted(native)
        finally:
            if blocking is not None:
                sdk.release_accept_tickets(server)

    def _accepted(self, native: Any) -> None:
        if self.tcp_nodelay:
            nodelay.apply_nodelay()
        sess = _SessionPump(self, native, next(self._ids))
        self.sessions[sess.connection_id] = sess
        self.stats["sessions"] += 1
        sess.thread.start()

    def _discard_accepted(self, native: Any) -> None:
        """Let go of a session whose set-up failed; its client sees the session close."""
        for sess in [s for s in self.sessions.values() if s.native is native]:
            self.sessions.pop(sess.connection_id, None)

        def close() -> None:
            # off this thread: a native close can wait for the peer, and accepting must go on
            with contextlib.suppress(Exception):
                native.close()
            if self._native_server is not None:
                sdk.forget_closed_session(self._native_server, native)

        threading.Thread(target=close, name="nnrp-discard", daemon=True).start()

    def _busy_changed(self, delta: int) -> None:
        with self._busy_lock:
            self.busy_sessions += delta

    def busy_poll_share_ns(self) -> int:
        """The poll interval below which the busy sessions together would exceed the budget
        (0 without a budget)."""
        if self.busy_poll_budget_per_s <= 0:
            return 0
        return int(self.busy_sessions * 1e9 / self.busy_poll_budget_per_s)

    def _session_ended(self, sess: Session) -> None:
        self.sessions.pop(sess.connection_id, None)
        if sess.closed and self._native_server is not None:
            sdk.forget_closed_session(self._native_server, sess.native)

    # --- loop side -------------------------------------------------------------------------------
    def _loop_call(self, fn: Callable[..., Any], *args: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(fn, *args)
