"""WORKAROUND for nnrp-py: its TCP (and WebSocket) carrier never sets TCP_NODELAY.

Without it the second frame of a reply waits ~40 ms (Nagle + delayed ACK). The Rust
runtime owns the sockets, so we set the option on a dup of each connected TCP socket of
this process, found through /proc/self/fd (Linux only; elsewhere it does nothing). The
option lives on the shared socket, so the dup is closed at once. Reported upstream: see
docs/sdk-defects.md.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from dataclasses import dataclass

_PROC_FD = "/proc/self/fd"


@dataclass(frozen=True, slots=True)
class TcpSocket:
    fd: int
    inode: str
    local: tuple[str, int]
    peer: tuple[str, int]


def connected_tcp_sockets() -> list[TcpSocket]:
    """Connected TCP sockets of this process (listeners and other families skipped)."""
    found: list[TcpSocket] = []
    try:
        names = os.listdir(_PROC_FD)
    except OSError:
        return found
    for name in names:
        fd = int(name)
        try:
            link = os.readlink(f"{_PROC_FD}/{fd}")
            if not link.startswith("socket:"):
                continue
            dup = os.dup(fd)
        except OSError:
            continue
        try:
            sock = socket.socket(fileno=dup)
        except OSError:
            os.close(dup)
            continue
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
                with contextlib.suppress(OSError):
                    found.append(TcpSocket(fd, link, sock.getsockname(), sock.getpeername()))
        finally:
            sock.close()
    return found


_done: set[str] = set()
_lock = threading.Lock()


def apply_nodelay() -> int:
    """Set TCP_NODELAY on every connected TCP socket not yet handled; returns how many were set."""
    with _lock:
        return _apply_locked()


def _apply_locked() -> int:
    count = 0
    live = set()
    for info in connected_tcp_sockets():
        live.add(info.inode)
        if info.inode in _done:
            continue
        try:
            sock = socket.socket(fileno=os.dup(info.fd))
        except OSError:
            continue
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _done.add(info.inode)
            count += 1
        except OSError:
            pass
        finally:
            sock.close()
    _done.intersection_update(live)
    return count


def has_nodelay(fd: int) -> bool:
    """Whether TCP_NODELAY is set on ``fd`` (used by tests to prove the workaround)."""
    sock = socket.socket(fileno=os.dup(fd))
    try:
        return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    finally:
        sock.close()
