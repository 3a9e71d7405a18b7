"""The handler's operations beyond chat: ``responses.create`` (Level 2), ``models.list`` and
``embeddings.create`` (Level 3), docs/levels.md.

Each is an async generator of profile events that :class:`.adapter.VllmNnrpAdapter` delegates
to once the envelope is checked: the body check (:mod:`..profile.bodies`), the backend call, the
mapping (:mod:`..profile.responses_mapping`) and, for a Responses stream, what the chat path does
too: the backend abort registered on the operation (a client cancel, the envelope's
``nnrp.timeout_ms``, the in-band hint and a disconnect all end in it; vLLM's Responses stream
itself has no cancelled event, an aborted request there still ends "completed"), the stall
watchdog, and an abort when the stream is left early. The chat path is not routed through
here, so its per-chunk work stays exactly what it was.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import anyio

from ..profile import profile
from ..profile.bodies import check_embeddings_body, check_models_body, check_responses_body
from ..profile.mapping import _usage_numbers as usage_numbers
from ..profile.mapping import map_backend_error
from ..profile.profile import Envelope, ProfileError
from ..profile.responses_mapping import ResponsesMapper
from ..vllm_backend import BackendError
from .backend_call import BackendCall, failure_event
from .stall import StallWatchdog

__all__ = ["backend_body", "serve_embeddings", "serve_models", "serve_responses"]


def backend_body(backend: Any, envelope: Envelope, record: Any) -> dict[str, Any]:
    """The envelope's body as the backend gets it: a copy whose ``model`` is the one asked
    for, else the first served model (recorded on the operation's record)."""
    body = dict(envelope.body)
    model = body.get("model") or (backend.served_model_names or [""])[0]
    body["model"] = model
    if record is not None:
        record.model_id = model
    return body


async def serve_responses(
    adapter: Any, ctx: Any, envelope: Envelope, record: Any, request_id: str
) -> AsyncIterator[dict[str, Any]]:
    """``responses.create``: vLLM's ``OpenAIServingResponses`` through the backend."""
    try:
        check_responses_body(envelope.body, allowed_operator_fields=adapter.allowed_operator_fields)
    except ProfileError as exc:
        yield exc.event()
        return
    backend = adapter.backend
    body = backend_body(backend, envelope, record)
    call = BackendCall(backend, ctx, request_id, record, adapter.backend_stall_timeout_s)
    streaming = body.get("stream") is True
    started = time.perf_counter_ns()
    try:
        with anyio.fail_after(call.stall_s):
            result = await backend.responses(body, request_id=request_id)
    except (BackendError, TimeoutError) as exc:
        yield await call.failure_event(exc)
        return
    if not streaming:
        if record is not None:
            record.backend_time_ns = time.perf_counter_ns() - started
            record.usage = ResponsesMapper.usage_of(result)
        yield profile.completed_event(result)
        return
    mapper = ResponsesMapper(attach_events=envelope.wants_openai_chunk)
    stream = result
    events = stream.__aiter__()
    finished_stream = False
    finished_ns = 0
    timing = envelope.wants_timing
    watchdog = StallWatchdog(call.stall_s)
    try:
        while mapper.error is None:
            try:
                data = await watchdog.next(events)
            except StopAsyncIteration:
                finished_stream = True
                finished_ns = time.perf_counter_ns()
                break
            taken_ns = time.perf_counter_ns()
            for event in mapper.map_event(data):
                if timing:
                    event["nnrp"] = {"t_backend_ns": taken_ns}
                yield event
    except (BackendError, TimeoutError) as exc:
        yield await call.failure_event(exc)
        return
    finally:
        watchdog.close()
        await call.close(stream, finished=finished_stream)
    if mapper.error is not None:
        call.failed("engine_failure")
        yield mapper.error
        return
    completed = mapper.completed_event()
    if completed is None:
        # vLLM's stream always ends with response.completed: without it the answer was cut
        # short, whatever the iterator said
        call.failed("engine_failure")
        yield map_backend_error(
            "engine_failure", "the backend's Responses stream ended before response.completed"
        )
        return
    if record is not None:
        record.backend_time_ns = time.perf_counter_ns() - started
        record.usage = mapper.usage
    if timing:
        completed["nnrp"] = {"t_backend_ns": finished_ns}
    yield completed


async def serve_models(
    adapter: Any, envelope: Envelope, record: Any
) -> AsyncIterator[dict[str, Any]]:
    """``models.list``: vLLM's ``OpenAIServingModels``, answered as ``GET /v1/models`` is."""
    try:
        check_models_body(envelope.body)
    except ProfileError as exc:
        yield exc.event()
        return
    try:
        with anyio.fail_after(adapter.backend_stall_timeout_s):
            body = await adapter.backend.list_models()
    except (BackendError, TimeoutError) as exc:
        yield failure_event(exc, record, adapter.backend_stall_timeout_s)
        return
    yield profile.completed_event(body)


async def serve_embeddings(
    adapter: Any, envelope: Envelope, record: Any, request_id: str
) -> AsyncIterator[dict[str, Any]]:
    """``embeddings.create``: vLLM's ``ServingEmbedding`` of the embeddings engine, answered
    as ``POST /v1/embeddings`` is (one terminal, no partial results). A client cancel ends the
    handler, and with it vLLM's request generators, which abort the engine requests."""
    try:
        check_embeddings_body(envelope.body,
                              allowed_operator_fields=adapter.allowed_operator_fields)
    except ProfileError as exc:
        yield exc.event()
        return
    backend = adapter.backend
    body = backend_body(backend, envelope, record)
    started = time.perf_counter_ns()
    try:
        with anyio.fail_after(adapter.backend_stall_timeout_s):
            result = await backend.embeddings(body, request_id=request_id)
    except (BackendError, TimeoutError) as exc:
        yield failure_event(exc, record, adapter.backend_stall_timeout_s)
        return
    if record is not None:
        record.backend_time_ns = time.perf_counter_ns() - started
        usage = result.get("usage") if isinstance(result, dict) else None
        if isinstance(usage, dict):
            record.usage = usage_numbers(usage)
    yield profile.completed_event(result)
