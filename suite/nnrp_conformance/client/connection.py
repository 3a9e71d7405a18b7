"""The client's connection: connect (saying why when nothing answers), the session, submit
and the discovery operation on the event loop side, and a bounded close."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import itertools
import threading
import time
from pathlib import Path
from typing import Any

import anyio
from nnrp.client import NativeClientSessionOptions, connect_native_client_connection
from nnrp.native import (
    NativeRuntimeError,
)

from nnrp_conformance import contract
from nnrp_conformance.wire import codec, lifetime, nodelay, tls
from nnrp_conformance.wire.codec import RawFrame
from nnrp_conformance.wire.pump import (
    client_options,
    parse_address,
    status_text,
    unreachable_reason,
)

from .operation import _IN_FLIGHT, Operation
from .pump import _ClientPump
from .records import _DONE, NnrpClientError, Terminal

# a command's wait goes in slices this long; one that comes back this much late was a stall
_AWAIT_SLICE_S = 1.0
_AWAIT_LATE_S = 1.0


class NnrpClient(_ClientPump):
    """One nnrp-py connection and one session; async context manager."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._conn_held: lifetime.Held | None = None
        self._conn: Any = None
        self._session: Any = None
        self._ids = itertools.count(1)
        self._ops: dict[int, Operation] = {}  # by frame id, in flight
        self._by_op_id: dict[int, Operation] = {}  # in flight, for lifecycle events
        # frame id -> give-up time (ns) of each cancel the server has not answered yet: its
        # stale frames (3/4/105 on poll) are expected until then, even after a local finish
        self._unconfirmed_cancels: dict[int, int] = {}
        self._finished: collections.OrderedDict[int, Operation] = collections.OrderedDict()
        # operations whose reader has not been woken for events already handed over -> since (ns)
        self._held: dict[Operation, int] = {}
        self._bulk: Operation | None = None  # the hot stream that allows bulk polls
        self._commands: collections.deque[tuple[str, Any, concurrent.futures.Future[Any]]] = (
            collections.deque()
        )
        self._wake = threading.Event()
        # held around every native call on the session: by the pump, or by the loop thread
        # for a submit made while the pump is idle (it then skips the hand-off to the pump)
        self._native_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._broken: str | None = None
        self.target = ""
        self.transport = ""
        self.default_timeout: float | None = 30.0
        self.max_events = 100_000
        self.cancel_grace = 2.0
        # how long a submit or cancel may wait for this client's own pump to put it on the
        # wire (a local bound: nothing the endpoint does is judged by it)
        self.command_timeout = 10.0
        self.stale_errors = 0
        # frames the endpoint sent on this session, and the last one: (message type, ns)
        self.frames_received = 0
        self.last_frame: tuple[str, int] | None = None
        self.bulk_polls = 0  # polls that asked for more than one frame (evidence, benchmarks)
        # turns of the pump that took over a second (the process or machine did not run it),
        # and their total length: waits for the server's answers do not count that time
        self.pump_stalls = 0
        self.pump_stalled_ns = 0
        self._init_refusals(0.0)

    # --- lifecycle -------------------------------------------------------------------------
    @classmethod
    async def connect(
        cls,
        target: str,
        *,
        connect_timeout: float = 10.0,
        default_timeout: float | None = 30.0,
        max_events: int = 100_000,
        command_timeout: float = 10.0,
        settle_window: float = 0.0,
        api_key: str | None = None,
        tls_ca: Path | None = None,
        tls_server_name: str | None = None,
    ) -> NnrpClient:
        """Connect to ``host:port``, ``[::1]:port`` or a scheme URL and open one session.

        ``command_timeout`` bounds how long a submit or a cancel waits for the client's own
        pump thread to send it (raised where the machine itself can stall for seconds).
        ``settle_window``: how long an operation's reader waits after the endpoint's
        terminal for frames refused after it (``client/refused.py``; 0: no wait).
        ``api_key``: authenticate the session with it before anything else
        (:meth:`authenticate`); a refused key raises :class:`NnrpClientError`.
        ``tls_ca``/``tls_server_name``: the CA certificate and the name to check for a TLS
        target (``quic+tls://``, ``wss://``, ``tcp+tls://``; ``wire/tls.py``)."""
        self = cls()
        self._init_refusals(settle_window)
        self.target = target
        self.command_timeout = command_timeout
        self.default_timeout = default_timeout
        self.max_events = max_events
        endpoint = parse_address(target)
        self.transport = endpoint.transport
        try:
            security = tls.client_security(endpoint.scheme, endpoint.host, tls_ca,
                                           tls_server_name)
        except tls.TlsSetupError as exc:
            raise NnrpClientError(f"connect to {target}: {exc}") from None
        opts = client_options(endpoint, security)

        gave_up = threading.Event()
        handover = threading.Lock()

        def enter() -> None:
            held, conn = lifetime.enter(
                lambda: connect_native_client_connection(opts), f"client connection to {target}"
            )
            with handover:
                if not gave_up.is_set():
                    self._conn_held, self._conn = held, conn
                    return
            # The caller timed out and went on: close it here, on this (blocking) thread.
            lifetime.close_blocking(held)

        phase = "the connection (transport and handshake) was not established"
        try:
            with anyio.fail_after(connect_timeout):
                await anyio.to_thread.run_sync(enter, abandon_on_cancel=True)
                phase = "the connection was established, the session open was not answered"
                self._session = await self._conn.open_session(
                    NativeClientSessionOptions(profile_id=contract.WIRE_SESSION_PROFILE_ID)
                )
        except TimeoutError:
            with handover:
                gave_up.set()
            await self._drop_connection()
            raise NnrpClientError(
                f"connect to {target}: no session within {connect_timeout}s ({phase})"
            ) from None
        except NativeRuntimeError as exc:
            await self._drop_connection()
            reason = await anyio.to_thread.run_sync(unreachable_reason, endpoint) or \
                await anyio.to_thread.run_sync(tls.tls_failure, endpoint, endpoint.secure,
                                               tls_server_name)
            raise NnrpClientError(
                reason or f"connect to {target}: {status_text(exc)}: {exc}"
            ) from None
        except OSError as exc:
            await self._drop_connection()
            raise NnrpClientError(f"connect to {target}: {exc}") from None
        except BaseException:
            # cancelled from outside: the connect thread may still hand a connection over
            with handover:
                gave_up.set()
            await self._drop_connection()
            raise
        if endpoint.transport in ("tcp", "websocket"):
            nodelay.apply_nodelay()
        self._thread = threading.Thread(
            target=self._pump, name=f"nnrp-client-pump {target}", daemon=True
        )
        self._thread.start()
        if api_key is not None:
            try:
                await self.authenticate(api_key, timeout=connect_timeout)
            except BaseException:
                await self.aclose()
                raise
        return self

    async def __aenter__(self) -> NnrpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _drop_connection(self) -> None:
        held, self._conn_held = self._conn_held, None
        await lifetime.aclose(held)

    async def aclose(self, *, timeout: float = 5.0) -> None:
        """Close the session (waits for the server's ack, bounded) and the connection.

        Shielded and bounded (about 2 x ``timeout`` + the connection's close bound): a caller
        cancelled mid-close (a failing task group, a timed-out test) must still close the
        connection explicitly, or it is left to the garbage collector (see ``wire.lifetime``).
        """
        if self._closing:
            return
        self._closing = True
        with anyio.CancelScope(shield=True):
            try:
                for op in list(self._ops.values()):
                    self._finish(
                        op,
                        Terminal(
                            "transport_error",
                            None,
                            detail="client closed with the operation in flight",
                        ),
                    )
                if self._thread is not None:
                    fut = self._command("close", None)
                    with contextlib.suppress(NnrpClientError):
                        await self._await(fut, timeout, "session close")
                    await anyio.to_thread.run_sync(self._thread.join, timeout)
            finally:
                await self._drop_connection()

    # --- operations --------------------------------------------------------------------------
    async def submit(
        self,
        envelope: dict[str, Any] | bytes | None = None,
        *,
        timeout: float | None = -1.0,
        frames: list[RawFrame] | None = None,
        max_events: int | None = None,
        idle_timeout: float | None = None,
        cancel_after_partials: int | None = None,
    ) -> Operation:
        """Submit one FRAME_SUBMIT; see module docstring. ``timeout=-1`` means the client default;
        ``idle_timeout`` ends the operation when the endpoint sends nothing for that long.

        ``cancel_after_partials=N``: the pump thread sends the cancel the moment the N-th
        partial arrives, however far the reader is behind (a reader on a starved event loop
        can lag the wire by a whole answer, so a cancel it sends after reading N partials may
        leave when the answer has already ended: measured, docs/performance.md)."""
        if self._closing:
            raise NnrpClientError("client is closed")
        if self._broken:
            raise NnrpClientError(f"connection is broken: {self._broken}")
        ident = next(self._ids)
        op = Operation(
            self,
            ident,
            ident,
            self.default_timeout if timeout == -1.0 else timeout,
            max_events or self.max_events,
            idle_timeout,
        )
        try:
            op.request_frames = codec.submit_frames(envelope, frames)
            request = codec.build_submit(ident, ident, frames=op.request_frames)
        except (ValueError, TypeError) as exc:
            raise NnrpClientError(f"nnrp-py refuses to build this submit: {exc}") from exc
        op.cancel_after_partials = cancel_after_partials
        self._ops[op.frame_id] = op
        self._by_op_id[op.operation_id] = op
        # With nothing in flight anywhere in the process, the loop submits at once: handing
        # the submit to the pump thread costs a thread wake-up (~100 us here) on the critical
        # path of the first event. Not under load: a native call releases the GIL, the loop
        # (the busiest thread) then waits to get it back from the pump threads, and inline
        # submits cut the 64-session load test's throughput by a quarter. Queued commands
        # keep their order: they go first.
        inline = not _IN_FLIGHT and not self._commands
        _IN_FLIGHT.add(op)
        if inline and self._native_lock.acquire(blocking=False):
            try:
                self._run_command("submit", (op, request))
            except NativeRuntimeError as exc:
                self._unregister(op)
                raise NnrpClientError(f"submit of operation {ident}: {status_text(exc)}") from None
            finally:
                self._native_lock.release()
            self._wake.set()
            return op
        fut = self._command("submit", (op, request))
        try:
            await self._await(fut, self.command_timeout, f"submit of operation {ident}")
        except NnrpClientError:
            self._unregister(op)
            raise
        return op

    def _unregister(self, op: Operation) -> None:
        """Take the operation out of the in-flight tables (it ended, or never reached the wire)."""
        self._ops.pop(op.frame_id, None)
        self._by_op_id.pop(op.operation_id, None)
        _IN_FLIGHT.discard(op)

    async def capabilities(self, *, timeout: float = 10.0) -> dict[str, Any]:
        """Run the discovery operation; returns the capability document."""
        op = await self.submit(
            {
                "schema_version": contract.SCHEMA_VERSION,
                "operation": contract.OP_CAPABILITIES_GET,
                "body": {},
            },
            timeout=timeout,
        )
        term = await op.result()
        ev = term.event
        if term.delivery != "result_push" or not ev or ev.get("type") != contract.EV_COMPLETED:
            raise NnrpClientError(
                f"{contract.OP_CAPABILITIES_GET} ended with {term.delivery}: "
                f"{ev if ev is not None else term.detail}"
            )
        body = ev.get("body")
        if not isinstance(body, dict):
            raise NnrpClientError(
                f"{contract.OP_CAPABILITIES_GET}: response.completed has no object body"
            )
        return body

    async def authenticate(self, api_key: str, *, timeout: float = 10.0) -> dict[str, Any]:
        """Authenticate the session (``nnrp.session.authenticate``, the key in
        ``nnrp.api_key``: ours, docs/sdk-defects.md#auth-block); returns the endpoint's answer.

        The operation's request frames, which hold the key, are dropped once it has ended:
        nothing of this client keeps, shows or records the key afterwards."""
        op = await self.submit(
            {
                "schema_version": contract.SCHEMA_VERSION,
                "operation": contract.OP_SESSION_AUTHENTICATE,
                "body": {},
                "nnrp": {contract.NNRP_API_KEY_FIELD: api_key},
            },
            timeout=timeout,
        )
        op.request_frames = ()
        term = await op.result()
        ev = term.event or {}
        if term.delivery == "result_push" and ev.get("type") == contract.EV_COMPLETED:
            body = ev.get("body")
            return body if isinstance(body, dict) else {}
        err = ev.get("error") if isinstance(ev.get("error"), dict) else None
        said = (f"{err.get('code')}: {err.get('message')}" if err is not None
                else (ev or term.detail))
        raise NnrpClientError(f"the endpoint refused the session's API key ({said})")

    # --- plumbing ------------------------------------------------------------------------------
    def _command(self, kind: str, arg: Any) -> concurrent.futures.Future[Any]:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._commands.append((kind, arg, fut))
        self._wake.set()
        return fut

    async def _await(self, fut: concurrent.futures.Future[Any], timeout: float, what: str) -> Any:
        """Wait for the pump to run a command, for ``timeout`` seconds of this process's time.

        The wait goes in slices; a slice that comes back more than a second late was a stall
        of the process or the machine (no thread of ours ran), and counts only as long as it
        was asked to be. After such a stall the event loop can wake before the pump has had
        its turn, and a wait in plain wall time then blamed the session for the machine.
        """
        wrapped = asyncio.wrap_future(fut)
        left = timeout
        try:
            while True:
                step = min(left, _AWAIT_SLICE_S)
                started = time.monotonic()
                done, _ = await asyncio.wait({wrapped}, timeout=step)
                if done:
                    return wrapped.result()
                took = time.monotonic() - started
                left -= step if took - step > _AWAIT_LATE_S else took
                if left <= 0:
                    raise NnrpClientError(
                        f"{what}: the session did not answer within {timeout}s"
                    )
        except NativeRuntimeError as exc:
            raise NnrpClientError(f"{what}: {status_text(exc)}") from None
        finally:
            # a waiter that gave up (or was cancelled) cancels the command's future: the pump
            # then runs the command or not, and resolves nothing
            wrapped.cancel()

    def _finish(self, op: Operation, terminal: Terminal) -> None:
        """Record the terminal once (any thread); later frames for the op become findings."""
        if op.terminal is not None:
            return
        if terminal.received_at_ns is None:
            terminal.received_at_ns = time.perf_counter_ns()
        op.terminal = terminal
        self._unregister(op)
        self._start_settle(op, terminal.received_at_ns)
        self._finished[op.frame_id] = op
        while len(self._finished) > 4096:
            self._finished.popitem(last=False)
        op._chan.put(_DONE)
