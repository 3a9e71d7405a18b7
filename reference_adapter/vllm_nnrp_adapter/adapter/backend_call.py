"""One backend request as the handler drives it, for every operation that streams from vLLM.

Owns: the abort hook registered on the NNRP operation (a client cancel, the envelope's
``nnrp.timeout_ms``, the in-band hint and a disconnect all end in it, and it asks vLLM once),
the terminal event for a backend failure or a stall (a stall aborts the request first), and
the teardown of a stream left early: abort before closing, so the answer says whether vLLM
still had the request (closing alone also aborts it, but silently), then a shielded close.

Chat (:mod:`.adapter`) and ``responses.create`` (:mod:`.handlers`) share it; their per-chunk
loops stay in their own modules, so the chat path's per-event work is what it was.
"""

from __future__ import annotations

from typing import Any

import anyio

from ..profile.mapping import backend_error_event, stalled_event
from ..vllm_backend import BackendError

__all__ = ["BackendCall", "failure_event", "record_failure"]


def record_failure(record: Any, family: str) -> None:
    """Put a backend failure's family on the operation's record (if it is recorded)."""
    if record is not None:
        record.backend_error_family = family


def failure_event(exc: BackendError | TimeoutError, record: Any,
                  stall_s: float | None) -> dict[str, Any]:
    """The terminal event for a :class:`BackendError`, or for a stall (``TimeoutError`` of the
    stall bound), its failure family recorded. A request awaited whole (``models.list``,
    ``embeddings.create``) has nothing left to abort once the await is left; a streamed one
    aborts first (:meth:`BackendCall.failure_event`)."""
    if isinstance(exc, BackendError):
        record_failure(record, exc.family)
        return backend_error_event(exc)
    record_failure(record, "engine_failure")
    return stalled_event(stall_s)


class BackendCall:
    """The abort, failure and teardown of one backend request (``request_id``)."""

    __slots__ = ("_accepted", "backend", "record", "request_id", "stall_s")

    def __init__(self, backend: Any, ctx: Any, request_id: str, record: Any,
                 stall_s: float | None) -> None:
        self.backend = backend
        self.request_id = request_id
        self.record = record
        self.stall_s = stall_s
        self._accepted: bool | None = None  # vLLM's answer to our one abort
        ctx.on_abort(self.abort)

    async def abort(self, _info: Any = None) -> bool:
        """Abort the request in vLLM (once); whether vLLM still had it."""
        if self._accepted is None:
            self._accepted = bool(await self.backend.abort(self.request_id))
        return self._accepted

    def failed(self, family: str) -> None:
        """Record the backend failure family on the operation's record."""
        record_failure(self.record, family)

    async def failure_event(self, exc: BackendError | TimeoutError) -> dict[str, Any]:
        """The terminal event for a :class:`BackendError`, or for a stall (``TimeoutError``
        of the stall bound), which aborts the request first."""
        if not isinstance(exc, BackendError):
            await self.abort()
        return failure_event(exc, self.record, self.stall_s)

    async def close(self, stream: Any, *, finished: bool) -> None:
        """Tear the stream down: abort first when it was left early, then close it; both
        shielded, since this runs while the consumer is being cancelled."""
        if not finished and self._accepted is None:
            with anyio.CancelScope(shield=True):
                await self.abort()
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            with anyio.CancelScope(shield=True):
                await aclose()
