"""Where the minimal endpoint listens: ``--listen`` parsed into nnrp-py's route, and
TCP_NODELAY set on its accepted sockets.
"""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass

from nnrp.core import TransportPolicy


def set_tcp_nodelay() -> int:
    """Set TCP_NODELAY on this process's connected TCP sockets.

    nnrp-py's TCP carrier leaves Nagle on, which stalls every second frame of a stream by
    ~40 ms.  The sockets belong to the native runtime, so the option is set through a dup
    of each descriptor (Linux /proc); the original descriptor is left untouched.
    """
    count = 0
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return 0
    for name in names:
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            dup = os.dup(int(name))
        except OSError:
            continue
        sock = socket.socket(fileno=dup)
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
                sock.getpeername()
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                count += 1
        except OSError:
            pass
        finally:
            sock.close()
    return count


@dataclass(frozen=True)
class Listen:
    """Where to listen: nnrp-py's route key, its provider locator and the application endpoint."""

    transport: str  # "tcp" | "ipc" | "websocket"
    provider: str  # tcp://HOST:PORT, unix:///PATH, ws://HOST:PORT
    host: str
    port: int
    policy: TransportPolicy

    def announced(self, bound: str) -> str:
        """The bound locator as a client target: HOST:PORT for TCP, else the URI itself."""
        return bound.removeprefix("tcp://") if self.transport == "tcp" else bound


_TRANSPORTS = {
    "tcp": ("tcp", TransportPolicy.FORCE_TCP),
    "ipc": ("ipc", TransportPolicy.FORCE_IPC),
    "unix": ("ipc", TransportPolicy.FORCE_IPC),
    "ws": ("websocket", TransportPolicy.FORCE_WEBSOCKET),
}


def parse_listen(text: str) -> Listen:
    """``HOST:PORT`` or ``tcp://HOST:PORT``, ``ipc:///PATH`` (``unix:///PATH``), ``ws://HOST:PORT``."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    if scheme not in _TRANSPORTS:
        raise argparse.ArgumentTypeError(
            f"--listen: unknown scheme {scheme!r} in {text!r} (use tcp, ipc/unix or ws)")
    transport, policy = _TRANSPORTS[scheme]
    if transport == "ipc":
        if not rest.startswith("/"):
            raise argparse.ArgumentTypeError(f"--listen wants ipc:///ABSOLUTE/PATH, got {text!r}")
        return Listen("ipc", f"unix://{rest}", "127.0.0.1", 0, policy)
    host, colon, port = rest.rstrip("/").rpartition(":")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT, got {text!r}")
    return Listen(transport, f"{scheme}://{host}:{port}", host, int(port), policy)
