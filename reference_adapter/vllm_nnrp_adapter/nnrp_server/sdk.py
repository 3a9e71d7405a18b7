"""The only place that touches nnrp-py's private entry points (the transport boundary).

nnrp-py has no public synchronous send and its accept polls in 1 ms slices; the pump thread
needs both (docs/wire-pump.md). This module calls the same native entry points the SDK's own
wrappers call, and keeps the SDK's bookkeeping (one terminal per operation, the accept
tickets, the server's session list). :data:`VERIFIED_NNRP_PY` is the release it was checked
against; ``tests/unit/test_nnrp_sdk_boundary.py`` fails on another, and on any private nnrp-py
name used outside this module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from nnrp.core import MessageType
from nnrp.native import (
    FFI_STATUS_WOULD_BLOCK,
    NativeStatus,
    NativeWouldBlockError,
    _buffer_view_from_payload,
    _NnrpServerSendResultRequest,
)
from nnrp.runtime import PartialResultMetadata, ResultDropReasonMetadata
from nnrp.server.native import _allocate_native_handle_id

__all__ = [
    "VERIFIED_NNRP_PY",
    "accept_blocking",
    "forget_closed_session",
    "has_accept_internals",
    "release_accept_tickets",
    "send_drop",
    "send_partial",
    "send_result",
]

#: the nnrp-py release whose private entry points this module was verified against
VERIFIED_NNRP_PY = "1.0.0rc4.post20"

# nnrp-py has no public synchronous send (its async wrappers add a to_thread hop per frame,
# ~70 µs). These call the same native entry points the wrappers call, from the pump thread,
# and keep the SDK's one-terminal bookkeeping.


def send_partial(op: Any, md: PartialResultMetadata, body: bytes) -> None:
    op._begin_reply(terminal=False)
    op._owner._send_operation_runtime_frame(
        op._handle, op.frame_id, MessageType.PARTIAL_RESULT, md, body
    )


def send_terminal_reply(op: Any, send: Callable[[], None]) -> None:
    op._begin_reply(terminal=True)
    try:
        send()
    except BaseException:
        op._restore_terminal_reply()
        raise
    op._complete_terminal_reply()


def send_result(op: Any, md: Any, body: bytes) -> None:
    payload = md.pack() + bytes(body)
    view, owner = _buffer_view_from_payload(payload)
    request = _NnrpServerSendResultRequest(op._handle.to_ffi(), view)
    send_terminal_reply(op, lambda: op._send_result_blocking(request, owner))


def send_drop(op: Any, md: ResultDropReasonMetadata, diagnostic: bytes) -> None:
    send_terminal_reply(
        op,
        lambda: op._owner._send_operation_runtime_frame(
            op._handle, op.frame_id, MessageType.RESULT_DROP_REASON, md, diagnostic
        ),
    )


def has_accept_internals(server: Any) -> bool:
    return all(
        hasattr(server, a)
        for a in (
            "_servers",
            "_accept_lock",
            "_accept_session_handle_ids",
            "_sessions",
            "_ensure_open",
            "_release_pending_accept_tickets",
        )
    )


def accept_blocking(server: Any, slice_ms: int) -> Any:
    """``NativeServer.accept`` waiting in native code for up to ``slice_ms``.

    nnrp-py's accept calls the native accept in 1 ms slices from Python, raising and
    catching an exception per slice: ~6 % of a core here with nobody connecting (3.6 % of
    the adapter's CPU per token under load came from it). The same native call with a long
    slice waits in native code (0.2 % of a core at 100 ms). Same bookkeeping as the SDK's:
    one pending accept ticket per listener kept across slices, the session recorded in the
    server's list; the caller releases the ticket when it stops accepting.
    """
    with server._accept_lock:
        server._ensure_open()
        ids = server._accept_session_handle_ids
        if not ids:
            ids.extend(None for _ in server._servers)
        per = max(1, slice_ms // max(1, len(server._servers)))
        for index, (_transport, listener) in enumerate(server._servers):
            handle_id = ids[index]
            if handle_id is None:
                handle_id = ids[index] = _allocate_native_handle_id()
            try:
                session = listener.accept_session(
                    session_handle_id=handle_id, generation=1, timeout_ms=per
                )
            except NativeWouldBlockError:
                continue
            ids[index] = None
            server._sessions.append(session)
            return session
    raise NativeWouldBlockError(NativeStatus(FFI_STATUS_WOULD_BLOCK))


def release_accept_tickets(server: Any) -> None:
    """Give back the accept tickets :func:`accept_blocking` kept across its slices."""
    with contextlib.suppress(Exception), server._accept_lock:
        server._release_pending_accept_tickets()


def forget_closed_session(server: Any, native_session: Any) -> None:
    """Drop a closed session from the SDK server's list.

    nnrp-py's server keeps every session it ever accepted (to close them at shutdown), ~1 KiB
    per connection for the server's lifetime (docs/sdk-defects.md); a closed one needs no
    closing, so it is let go."""
    with contextlib.suppress(AttributeError, ValueError):
        server._sessions.remove(native_session)
