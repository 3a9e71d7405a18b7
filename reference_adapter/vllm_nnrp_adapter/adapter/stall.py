"""The backend stall watchdog: one timer per operation, not one cancel scope per chunk.

An operation whose backend produces nothing for ``timeout`` seconds must end (a hung engine
ends in an error terminal, never a hang). Wrapping every ``await`` of the next chunk in
``anyio.fail_after`` did that at a price paid per token: a cancel scope, a timer handle and
the task lookups anyio makes on enter and exit took ~25–30 % of the adapter's GIL time at
eight concurrent streams (docs/performance.md). Here one ``loop.call_at`` timer per
operation checks how long the current wait has lasted and re-arms itself; a chunk costs two
attribute writes and a clock read.

The timer only ever interrupts a wait on the backend (:meth:`StallWatchdog.next`): when it
fires while the handler is elsewhere (its events waiting on a slow consumer), it re-arms,
so a slow client is never taken for a stalled engine. asyncio only (vLLM is asyncio-only);
the interruption is ``Task.cancel`` matched by ``Task.uncancel``, as ``asyncio.timeout``
does, so an outer cancellation (anyio's or asyncio's) still arrives.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, TypeVar

__all__ = ["StallWatchdog"]

T = TypeVar("T")


class StallWatchdog:
    """``await watchdog.next(iterator)`` raises :class:`TimeoutError` after ``timeout``
    seconds without an item; ``timeout=None`` never fires. Call :meth:`close` when done."""

    __slots__ = ("_handle", "_loop", "_task", "_wait_started", "fired", "timeout")

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.fired = False
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._wait_started: float | None = None  # loop time the current wait began, or None
        self._handle: asyncio.TimerHandle | None = None
        if timeout is not None and self._task is not None:
            self._handle = self._loop.call_at(self._loop.time() + timeout, self._check)

    async def next(self, iterator: AsyncIterator[T]) -> T:
        """The iterator's next item; ``StopAsyncIteration`` at its end, ``TimeoutError`` on a
        stall."""
        self._wait_started = self._loop.time()
        try:
            return await iterator.__anext__()
        except asyncio.CancelledError:
            if self.fired and self._task is not None:
                self._task.uncancel()  # our own cancel, taken back; anything else propagates
                raise TimeoutError(f"no backend output for {self.timeout:g} s") from None
            raise
        finally:
            self._wait_started = None

    def _check(self) -> None:
        assert self.timeout is not None
        started = self._wait_started
        now = self._loop.time()
        if started is not None and now >= started + self.timeout and not self.fired:
            self.fired = True
            self._handle = None
            assert self._task is not None
            self._task.cancel()
            return
        # not waiting now: the next wait gets its full timeout from when it begins
        due = now + self.timeout if started is None else started + self.timeout
        self._handle = self._loop.call_at(due, self._check)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def __enter__(self) -> StallWatchdog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
