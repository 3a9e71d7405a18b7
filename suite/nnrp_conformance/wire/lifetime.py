"""Explicit lifetimes for nnrp-py's native objects: held until closed, closed off the event loop.

nnrp-py opens connections and listeners through generator context managers whose ``finally``
closes the native object. Left to the garbage collector, that ``finally`` runs as a finaliser
on whatever thread the collector happens to run on, which in an asyncio process is usually the
event-loop thread. There ``NativeClientConnection.close`` blocks on its role-executor thread,
and for a client of an in-process server on a session-close ack that only that same loop can
give: a deadlock seen in CI (a client left open by a failed test, collected later inside an
unrelated test's handler).

So every such context manager this project enters is registered here and held by a strong
reference until it is closed explicitly: the collector can never finalise it. Closing happens
on a thread that may block (never the loop's), bounded in time, and shielded from
cancellation so a cancelled caller cannot skip it. Whatever is still open at interpreter exit
is closed the same way by an ``atexit`` hook, bounded, so a leak can neither hang the process
nor go unnoticed: :func:`open_objects` names it, and the test suites check it after each test.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import anyio

log = logging.getLogger("nnrp_conformance.wire.lifetime")

# How long a close may take before its caller goes on (the closing thread carries on alone).
# nnrp-py's session close waits for the peer's ack, up to 30 s against a silent peer.
DEFAULT_CLOSE_TIMEOUT_S = 5.0
EXIT_CLOSE_TIMEOUT_S = 3.0


@dataclass
class Held:
    """One entered nnrp-py context manager, alive until :func:`close_blocking` ran it out."""

    ident: int
    what: str
    cm: AbstractContextManager[Any]
    opened_at: float = field(default_factory=time.monotonic)
    closed: threading.Event = field(default_factory=threading.Event)
    close_error: str | None = None

    def __repr__(self) -> str:
        return f"<{self.what} #{self.ident}{' closed' if self.closed.is_set() else ''}>"


_lock = threading.Lock()
_held: dict[int, Held] = {}
_ids = itertools.count(1)
_closing = threading.local()
_exit_hook_registered = False


def enter(factory: Callable[[], AbstractContextManager[Any]], what: str) -> tuple[Held, Any]:
    """Enter ``factory()`` on this thread and hold it; returns the handle and the object."""
    cm = factory()
    obj = cm.__enter__()
    held = Held(next(_ids), what, cm)
    global _exit_hook_registered
    with _lock:
        _held[held.ident] = held
        if not _exit_hook_registered:
            # Registered once nnrp-py has loaded its native library (which registers the
            # runtime's shutdown then), so at exit ours runs first (atexit is LIFO) and closes
            # while the runtime still works.
            atexit.register(_close_at_exit)
            _exit_hook_registered = True
    return held, obj


def on_loop_thread() -> bool:
    """Whether this thread is running an asyncio event loop (where no close may block)."""
    return asyncio.events._get_running_loop() is not None


def closing_explicitly() -> bool:
    """True inside :func:`close_blocking`: lets a test tell our closes from a finaliser's."""
    return bool(getattr(_closing, "active", False))


def close_blocking(held: Held) -> None:
    """Exit the context manager on this thread (which may block); idempotent, never raises.

    Refuses to run on an event-loop thread: that is exactly the block this module prevents.
    """
    if on_loop_thread():
        raise RuntimeError(f"{held.what}: a native close must not run on the event-loop thread")
    with _lock:
        if _held.pop(held.ident, None) is None:
            return  # closed already, or being closed by another thread
    _closing.active = True
    try:
        held.cm.__exit__(None, None, None)
    except Exception as exc:  # a dead peer answers close with 3/4/105; nothing to act on
        held.close_error = f"{type(exc).__name__}: {exc}"
        log.debug("%s: close: %s", held.what, held.close_error)
    finally:
        _closing.active = False
        held.closed.set()


def close_in_thread(held: Held) -> threading.Thread:
    """Start closing ``held`` on a daemon thread of its own and return that thread."""
    thread = threading.Thread(
        target=close_blocking, args=(held,), name=f"nnrp-close {held.what}", daemon=True
    )
    thread.start()
    return thread


async def aclose(held: Held | None, timeout: float = DEFAULT_CLOSE_TIMEOUT_S) -> bool:
    """Close ``held`` off the loop, waiting at most ``timeout``; True when it finished.

    Shielded: a cancelled caller still starts the close and waits its bounded time, so
    cancellation can never leave the object to the garbage collector.
    """
    if held is None:
        return True
    with anyio.CancelScope(shield=True):
        close_in_thread(held)
        finished = await anyio.to_thread.run_sync(held.closed.wait, timeout)
    return finished


def open_objects() -> list[Held]:
    """Everything entered and not yet closed (a leak once its owner is gone)."""
    with _lock:
        return list(_held.values())


def close_all(timeout: float = EXIT_CLOSE_TIMEOUT_S) -> list[str]:
    """Close everything still open, each on its own thread, bounded; returns what was open."""
    leftovers = open_objects()
    deadline = time.monotonic() + timeout
    threads = [close_in_thread(h) for h in leftovers]
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [h.what for h in leftovers]


def _close_at_exit() -> None:
    with contextlib.suppress(Exception):
        names = close_all()
        if names:
            # counted by kind: an interrupted run can leave hundreds of the same connection
            kinds = ", ".join(f"{n} × {what}" for what, n in Counter(names).most_common())
            log.warning("closed %d nnrp-py object(s) left open at exit: %s", len(names), kinds)
