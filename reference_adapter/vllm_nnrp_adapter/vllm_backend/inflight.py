"""The requests a backend has in flight on one vLLM engine client, from claim to end.

:class:`InFlight` is the base of :class:`.backend.VllmBackend` that owns the request
lifecycle, whatever the operation: claiming a request id, validating the body into vLLM's
request model, one serving-class call (its error answer or exception made a
:class:`BackendError`, vLLM's own mapping first), the streams handed out (chat's SSE strings
parsed into chunks, Responses events dumped as JSON, either closed early aborting its request)
and aborts (of a running request, of one whose stream was handed out but never iterated, of
everything on shutdown). The operations themselves and start-up are ``backend``'s.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import anyio

from .chunks import StreamChunk, parse_sse
from .errors import (
    BackendError,
    _error_from_dict,
    _error_from_response,
    _responses_stream_failure,
    _validation_error,
)
from .symbols import _Symbols

#: what a serving call's stream handler makes of vLLM's stream (chunks or Responses events)
_Stream = TypeVar("_Stream")

__all__ = ["InFlight"]

# The serving layer prefixes the caller's request id with this to form the engine id.
_ENGINE_ID_PREFIX = "chatcmpl-"


class InFlight:
    """The request lifecycle on one engine client (the base of :class:`.backend.VllmBackend`)."""

    def __init__(self, symbols: _Symbols, engine_client: Any) -> None:
        self._sym = symbols
        self._engine = engine_client
        self._inflight: set[str] = set()
        # Aborted before the engine saw them (stream handed out but not yet iterated).
        self._aborted_early: set[str] = set()
        # request id -> engine id of the Responses requests in flight (chat's is derived)
        self._response_engine_ids: dict[str, str] = {}

    def _engine_id(self, request_id: str) -> str:
        return self._response_engine_ids.get(request_id) or _ENGINE_ID_PREFIX + request_id

    def _build_request(self, body: Any, request_id: str, model: Any = None) -> Any:
        if not isinstance(body, dict):
            raise BackendError(
                "request_validation",
                f"request body must be a JSON object, got {type(body).__name__}",
                status=400,
                error_type="BadRequestError",
                original={
                    "error": {
                        "message": "body must be an object",
                        "type": "BadRequestError",
                        "code": 400,
                    }
                },
            )
        from pydantic import ValidationError

        payload = dict(body)
        payload["request_id"] = request_id
        try:
            return (model or self._sym.chat_request).model_validate(payload)
        except ValidationError as exc:
            raise _validation_error(exc) from None
        except Exception as exc:
            raise self._error_from_exception(exc) from None

    def _error_from_exception(self, exc: BaseException) -> BackendError:
        if isinstance(exc, BackendError):
            return exc
        if isinstance(exc, self._sym.engine_errors):
            return BackendError(
                "engine_failure",
                str(exc) or type(exc).__name__,
                status=500,
                error_type=type(exc).__name__,
                original={"error": {"message": str(exc), "type": type(exc).__name__, "code": 500}},
            )
        if isinstance(exc, Exception):
            try:
                err = self._sym.create_error_response(exc)
            except Exception:
                err = None
            if err is not None:
                be = _error_from_response(err)
                if (
                    be.family == "engine_failure"
                    and self._engine_alive()
                    and (type(exc).__name__ != "GenerationError")
                ):
                    # vLLM answers any unexpected exception with a 500; with the engine
                    # still healthy that is a fault in the serving path, not the engine.
                    be.family = "internal"
                return be
        return BackendError(
            "internal",
            f"{type(exc).__name__}: {exc}",
            status=500,
            error_type="InternalServerError",
            original={"error": {"message": str(exc), "type": type(exc).__name__, "code": 500}},
        )

    def _engine_alive(self) -> bool:
        return not bool(getattr(self._engine, "errored", False))

    def _claim(self, request_id: str) -> None:
        """Refuse an empty request id, or one already in flight (every operation's check)."""
        if not isinstance(request_id, str) or not request_id:
            raise BackendError("internal", "request_id must be a non-empty string")
        if request_id in self._inflight:
            raise BackendError("internal", f"request id {request_id!r} is already in flight")

    async def _call(
        self,
        create: Callable[[], Awaitable[Any]],
        request_id: str,
        stream: Callable[[Any, str], _Stream],
        dump: Callable[[Any], dict[str, Any]],
        forget: Callable[[], object] | None = None,
    ) -> _Stream | dict[str, Any]:
        """One serving-class call for ``request_id`` (already in ``_inflight``).

        vLLM's error answer or exception becomes a :class:`BackendError`; a caller cancelled
        while vLLM starts the request aborts it; a stream is handed to ``stream``, which then
        owns the in-flight entry; a body is returned as ``dump`` makes it. Otherwise the
        in-flight entry (and ``forget``'s) is dropped here.
        """
        handed_off = False
        try:
            try:
                result = await create()
            except BaseException as exc:
                if not isinstance(exc, Exception):
                    await self._abort_quietly(request_id)
                    raise
                raise self._error_from_exception(exc) from None
            if isinstance(result, self._sym.error_response):
                raise _error_from_response(result)
            if hasattr(result, "__aiter__"):
                handed_off = True
                return stream(result, request_id)
            return dump(result)
        finally:
            if not handed_off:
                self._inflight.discard(request_id)
                if forget is not None:
                    forget()

    async def _stream(self, gen: Any, request_id: str) -> AsyncIterator[StreamChunk]:
        finished = False
        try:
            if request_id in self._aborted_early:
                return
            async for text in gen:
                for payload in parse_sse(text):
                    if payload.strip() == "[DONE]":
                        finished = True
                        return
                    try:
                        data = json.loads(payload)
                    except json.JSONDecodeError:
                        raise BackendError(
                            "internal", f"vLLM sent a non-JSON SSE payload: {payload[:200]!r}"
                        ) from None
                    if isinstance(data, dict) and "error" in data and "choices" not in data:
                        finished = True
                        raise _error_from_dict(data)
                    yield StreamChunk(data=data, raw=payload)
            finished = True
            # vLLM always closes a stream with [DONE]; without it the answer is cut short.
            raise BackendError("engine_failure", "vLLM's stream ended without [DONE]")
        except BackendError:
            raise
        except Exception as exc:
            finished = True
            raise self._error_from_exception(exc) from None
        finally:
            self._inflight.discard(request_id)
            self._aborted_early.discard(request_id)
            if not finished:
                await self._close_early(gen, request_id)

    async def _response_stream(self, gen: Any, request_id: str) -> AsyncIterator[dict[str, Any]]:
        finished = False
        try:
            if request_id in self._aborted_early:
                return
            async for event in gen:
                yield event.model_dump(mode="json", by_alias=True)
            # vLLM's Responses stream simply ends (no [DONE]); whether it delivered its final
            # response.completed is the mapping's to judge
            finished = True
        except Exception as exc:
            finished = True
            raise _responses_stream_failure(exc) or self._error_from_exception(exc) from None
        finally:
            self._inflight.discard(request_id)
            self._aborted_early.discard(request_id)
            if not finished:
                await self._close_early(gen, request_id)
            self._response_engine_ids.pop(request_id, None)

    async def _close_early(self, gen: Any, request_id: str) -> None:
        # Shielded: this runs while the consumer is being cancelled or closed.
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(Exception):
                await gen.aclose()
            await self._abort_quietly(request_id)

    async def _abort_quietly(self, request_id: str) -> None:
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await self._engine.abort(self._engine_id(request_id))

    async def abort(self, request_id: str) -> bool:
        """Abort the request; True if it was still running (the abort took effect).

        A running request ends: its stream closes with ``finish_reason: "abort"``, a
        non-streaming call returns with it. A stream handed out but not yet iterated never
        reaches the engine: iterating it yields nothing.
        """
        engine_id = self._engine_id(request_id)
        known = self._engine_knows(engine_id)
        try:
            await self._engine.abort(engine_id)
        except Exception:
            return False
        if known is False and request_id in self._inflight:
            self._aborted_early.add(request_id)
            return True
        return known if known is not None else request_id in self._inflight

    def _engine_knows(self, engine_id: str) -> bool | None:
        proc = getattr(self._engine, "output_processor", None)
        ext = getattr(proc, "external_req_ids", None)
        if isinstance(ext, dict):
            return bool(ext.get(engine_id))
        states = getattr(proc, "request_states", None)
        if isinstance(states, dict):
            return any(engine_id == k or str(k).startswith(engine_id + "-") for k in states)
        return None

    async def abort_in_flight(self) -> None:
        """Abort every request this binding still has running (on shutdown)."""
        for request_id in list(self._inflight):
            await self._abort_quietly(request_id)
