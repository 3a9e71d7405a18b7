"""Helpers both pumps share (client and the adapter's server binding).

Owns: parsing a target/listen address into nnrp-py options (one transport per address,
chosen by scheme), saying why an address could not be reached (nothing listening), triage of nnrp-py's status codes (stale event vs dead peer), and the
small thread→event-loop channel the pumps use to hand events to anyio code.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from nnrp.client import NativeClientOptions, NativeClientProviderRoute
from nnrp.core import TransportPolicy
from nnrp.native import (
    NativeRuntimeError,
    NativeTransportClientSecurity,
    NativeTransportServerSecurity,
)
from nnrp.server import NativeServerBootstrapOptions, NativeServerProviderRoute

from nnrp_conformance import contract

from .tls import SECURE_SCHEMES

#: nnrp-py detail code for "operation/session no longer usable": stale event of a cancelled
#: operation, finished operation, or dead peer (the SDK does not tell them apart)
DETAIL_STALE_OR_GONE = 105

_SCHEMES = {
    "tcp": ("tcp", TransportPolicy.FORCE_TCP),
    "ipc": ("ipc", TransportPolicy.FORCE_IPC),
    "unix": ("ipc", TransportPolicy.FORCE_IPC),
    "ws": ("websocket", TransportPolicy.FORCE_WEBSOCKET),
    # TLS (wire/tls.py): the certificate comes from the side's TLS options
    "quic+tls": ("quic", TransportPolicy.FORCE_QUIC),
    "wss": ("websocket", TransportPolicy.FORCE_WEBSOCKET),
    "tcp+tls": ("tcp", TransportPolicy.FORCE_TCP),
}
_OFFERED = "use tcp, ipc/unix or ws; with TLS quic+tls, wss or tcp+tls"

#: schemes nnrp-py has a carrier for that are refused, with why: by name, not left to fail
#: inside nnrp-py ("security-unsatisfied") or after vLLM has started
_NOT_OFFERED = {
    "quic": "refused: nnrp-py's QUIC carrier needs TLS (quic+tls:// with a certificate: "
            "--ssl-certfile/--ssl-keyfile to serve, --nnrp-tls-ca to connect)",
}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One address, resolved: nnrp-py route key, provider locator, application endpoint."""

    transport: str  # "tcp" | "ipc" | "websocket" | "quic"
    provider_uri: str
    host: str
    port: int | None
    policy: TransportPolicy
    #: the address's scheme as given (lower case), e.g. "tcp+tls"
    scheme: str = "tcp"

    @property
    def secure(self) -> bool:
        return self.scheme in SECURE_SCHEMES

    @property
    def app_endpoint(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"nnrp://{host}:{self.port or contract.DEFAULT_NNRP_PORT}"


class AddressError(ValueError):
    """An address that names no transport nnrp-py ships, or is malformed."""


def parse_address(address: str, *, default_host: str = "127.0.0.1") -> Endpoint:
    """``host:port``, ``[v6]:port``, ``tcp://``, ``ipc://path`` / ``unix:///path``, ``ws://``;
    with TLS ``quic+tls://``, ``wss://`` and ``tcp+tls://``."""
    address = address.strip()
    if "://" not in address:
        address = f"tcp://{address}"
    parts = urlsplit(address)
    scheme = parts.scheme.lower()
    if scheme in _NOT_OFFERED:
        raise AddressError(f"address {address!r}: {scheme}:// is {_NOT_OFFERED[scheme]} "
                           f"({_OFFERED})")
    if scheme not in _SCHEMES:
        raise AddressError(f"address {address!r}: unknown scheme {scheme!r} ({_OFFERED})")
    transport, policy = _SCHEMES[scheme]
    if transport == "ipc":
        path = (parts.netloc + parts.path) if scheme == "ipc" else parts.path
        if not path:
            raise AddressError(f"address {address!r}: an ipc address needs a socket path")
        return Endpoint("ipc", f"unix://{path}", default_host, None, policy, scheme)
    try:
        port = parts.port
    except ValueError as exc:
        raise AddressError(f"address {address!r}: {exc}") from None
    host = parts.hostname or default_host
    if port is None:
        raise AddressError(
            f"address {address!r}: a port is required (0 picks a free one when listening)"
        )
    shown = f"[{host}]" if ":" in host else host
    suffix = parts.path if transport == "websocket" else ""
    locator = SECURE_SCHEMES.get(scheme, scheme)  # tcp+tls is nnrp-py's tcp:// with TLS
    return Endpoint(transport, f"{locator}://{shown}:{port}{suffix}", host, port, policy, scheme)


def _inet(endpoint: Endpoint, port: int) -> tuple[socket.AddressFamily, tuple[str, int], str]:
    """A TCP endpoint as a plain socket sees it: family, address, and how a message shows it."""
    v6 = ":" in endpoint.host
    shown = f"[{endpoint.host}]:{port}" if v6 else f"{endpoint.host}:{port}"
    return (socket.AF_INET6 if v6 else socket.AF_INET), (endpoint.host, port), shown


def unreachable_reason(endpoint: Endpoint, timeout: float = 1.0) -> str | None:
    """Why a connect to ``endpoint`` failed, told by a plain socket, or None if it cannot tell.

    nnrp-py reports a refused connection as an internal error with a detail code; a plain
    TCP (or Unix socket) connect says it in words. Only called after a failed connect, so a
    probe of a port that does listen costs one accepted-and-closed connection."""
    where: str | tuple[str, int]
    if endpoint.transport == "ipc":
        path = endpoint.provider_uri.removeprefix("unix://")
        family, where, shown = socket.AF_UNIX, path, path
    elif endpoint.transport in ("tcp", "websocket") and endpoint.port:
        family, where, shown = _inet(endpoint, endpoint.port)
    else:
        return None  # no port to probe
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.settimeout(timeout)
            probe.connect(where)
    except (ConnectionRefusedError, FileNotFoundError):
        return f"nothing listening on {shown}"
    except TimeoutError:
        return f"no answer from {shown} within {timeout:g} s"
    except OSError as exc:
        return f"cannot reach {shown}: {exc.strerror or exc}"
    return None


def unlistenable_reason(endpoint: Endpoint) -> str | None:
    """Why a listen on ``endpoint`` failed, told by a plain socket, or None if it cannot tell.

    nnrp-py reports a port in use as an internal error with a detail code (106); a plain bind
    says it in words. Only called after a failed listen."""
    if endpoint.transport == "ipc":
        path = endpoint.provider_uri.removeprefix("unix://")
        return f"socket path {path} already exists" if Path(path).exists() else None
    if endpoint.transport not in ("tcp", "websocket") or not endpoint.port:
        return None  # port 0 cannot be in use
    family, where, shown = _inet(endpoint, endpoint.port)
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as nnrp-py binds
            probe.bind(where)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return f"address {shown} already in use (another process listens there)"
        if exc.errno == errno.EADDRNOTAVAIL:
            return f"{endpoint.host} is not an address of this machine"
        if exc.errno == errno.EACCES:
            return f"no permission to listen on {shown} (ports below 1024 need privileges)"
        return f"cannot bind {shown}: {exc.strerror or exc}"
    return None


def server_options(endpoint: Endpoint, security: NativeTransportServerSecurity | None = None,
                   **kwargs: Any) -> NativeServerBootstrapOptions:
    # Forced policy: the server's AUTO fails with no ipc/websocket routes (the nnrp-py notes' pitfalls), and an
    # explicit provider route is the only way to bind port 0 (the app endpoint maps 0 -> 4433).
    return NativeServerBootstrapOptions(
        endpoint=endpoint.app_endpoint,
        provider_routes={
            endpoint.transport: NativeServerProviderRoute(
                provider_endpoint=endpoint.provider_uri, security=security)
        },
        transport_policy=endpoint.policy,
        **kwargs,
    )


def client_options(endpoint: Endpoint, security: NativeTransportClientSecurity | None = None,
                   **kwargs: Any) -> NativeClientOptions:
    return NativeClientOptions(
        endpoint=endpoint.app_endpoint,
        provider_routes={
            endpoint.transport: NativeClientProviderRoute(
                provider_endpoint=endpoint.provider_uri, security=security)
        },
        transport_policy=endpoint.policy,
        **kwargs,
    )


def detail_code(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    return getattr(status, "detail_code", None)


def status_text(exc: NativeRuntimeError) -> str:
    st = exc.status
    return (
        f"{type(exc).__name__}(status={st.status_code}/{st.status_name}, family={st.error_family}, "
        f"protocol={st.protocol_error_code}, detail={st.detail_code})"
    )


class ThreadChannel:
    """Deque filled by a pump thread and drained by one async reader on the event loop.

    Why: a loop wake-up (self-pipe write, epoll return, pipe read, a loop iteration) costs
    more than everything else the client does with an event. The producer wakes the loop
    only when the reader is actually waiting, and it may hold the wake-up back
    (``put(..., wake=False)`` then ``flush()``) while a burst is arriving, so a burst costs
    a few wake-ups instead of one per event. The producer bounds the content (max events
    per operation) and how long a wake-up is held, not this class.
    """

    __slots__ = ("_items", "_lock", "_loop", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: collections.deque[Any] = collections.deque()
        self._lock = threading.Lock()
        self._waiter: asyncio.Future[None] | None = None

    def put(self, item: Any, *, wake: bool = True) -> None:
        with self._lock:
            self._items.append(item)
            if not wake:
                return
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            self._loop.call_soon_threadsafe(_wake, waiter)

    def flush(self) -> None:
        """Wake the reader if it waits while items are held back."""
        with self._lock:
            if not self._items:
                return
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            self._loop.call_soon_threadsafe(_wake, waiter)

    def get_nowait(self) -> Any:
        """Next item or raise IndexError."""
        return self._items.popleft()

    def wake_reader(self) -> None:
        """Wake a waiting reader with nothing new (loop thread only; e.g. its deadline passed)."""
        with self._lock:
            waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Return once an item is available (possibly at once) or ``wake_reader`` is called."""
        with self._lock:
            if self._items:
                return
            self._waiter = self._loop.create_future()
            waiter = self._waiter
        try:
            await waiter
        finally:
            if self._waiter is waiter:
                with self._lock:
                    if self._waiter is waiter:
                        self._waiter = None


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
