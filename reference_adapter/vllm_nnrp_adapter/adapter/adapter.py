"""The server binding's handler for the profile: :class:`VllmNnrpAdapter` checks the envelope
and the chat body (:mod:`..profile.bodies`; operator-only fields refused unless allowed), calls the
backend, maps its chunks to events (:mod:`..profile.mapping`, the design's mapping table), and honours
cancellation, the stall bound and the in-band hint, with the backend's diagnostics on errors.
``responses.create`` and ``models.list`` are dispatched to :mod:`.handlers` (the chat path
stays as it is, event for event). It also decides which operations the capability document
offers: those of the manifest whose backend features the vLLM line keeps
(:data:`OPERATION_FEATURES`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from nnrp_conformance import contract

from ..profile import profile
from ..profile.bodies import OPERATOR_ONLY_FIELDS, check_chat_body
from ..profile.mapping import (
    ChunkMapper,
    _usage_numbers,
    map_backend_error,
)
from ..profile.profile import ProfileError
from ..vllm_backend import BackendError
from ..vllm_backend.lines import (
    FEATURE_EMBEDDINGS,
    FEATURE_MODELS,
    FEATURE_RESPONSES,
    FEATURE_RESPONSES_STREAM_TOOLS,
)
from . import handlers
from .backend_call import BackendCall
from .stall import StallWatchdog

if TYPE_CHECKING:
    from ..observability.observability import Recorder

__all__ = ["OPERATION_FEATURES", "OPERATOR_ONLY_FIELDS", "VllmNnrpAdapter", "check_chat_body"]

#: longest wait for the backend's next output before the operation fails (a hung engine must
#: end in a backend-error terminal, never a hang); the operator can change it.
DEFAULT_BACKEND_STALL_TIMEOUT_S = 300.0


#: the backend features (:mod:`..vllm_backend.lines`) an operation needs. A missing one
#: withholds the operation from the capability document, and with it every level that then
#: loses its operation (:func:`..profile.profile.capability_document`). Level 2 needs Responses
#: streaming *with* tool calls, not only text: no adapter claims Level 2 unless its serving
#: target keeps Responses streaming and tool-call semantics (spec §1, docs/levels.md).
OPERATION_FEATURES: Mapping[str, tuple[str, ...]] = {
    contract.OP_RESPONSES_CREATE: (FEATURE_RESPONSES, FEATURE_RESPONSES_STREAM_TOOLS),
    contract.OP_MODELS_LIST: (FEATURE_MODELS,),
    contract.OP_EMBEDDINGS_CREATE: (FEATURE_EMBEDDINGS,),
}


def withheld_operations(backend: Any) -> dict[str, str]:
    """Operation -> why this backend cannot serve it (its vLLM line's limitations, or a
    backend without the method at all, e.g. a chat-only test double)."""
    limits = dict(getattr(backend, "limitations", None) or {})
    for feature, method in ((FEATURE_RESPONSES, "responses"), (FEATURE_MODELS, "list_models"),
                            (FEATURE_EMBEDDINGS, "embeddings")):
        if not callable(getattr(backend, method, None)):
            limits.setdefault(feature, f"the backend has no {method}()")
    return {
        op: "; ".join(limits[f] for f in features if f in limits)
        for op, features in OPERATION_FEATURES.items()
        if any(f in limits for f in features)
    }


class ChatBackend(Protocol):
    """What the adapter needs from :mod:`vllm_nnrp_adapter.vllm_backend` (or a test double).

    Levels 2 and 3 also use ``responses(body, request_id=…)``, ``list_models()`` and
    ``embeddings(body, request_id=…)`` when the backend has them (:func:`withheld_operations`).
    """

    served_model_names: list[str]

    async def chat(self, body: dict[str, Any], *, request_id: str) -> Any: ...

    async def abort(self, request_id: str) -> bool: ...


class VllmNnrpAdapter:
    """The NNRP server binding's handler for the vLLM backend.

    One call of :meth:`handle` per submitted operation: it yields profile events; a
    terminal event ends the operation. Cancellation arrives through the operation
    context's abort hook (registered here), which aborts the vLLM request.
    """

    def __init__(
        self,
        backend: ChatBackend,
        manifest: Mapping[str, Any],
        *,
        recorder: Recorder | None = None,
        allowed_operator_fields: Iterable[str] = (),
        echo_text_in_diagnostics: bool = False,
        backend_stall_timeout_s: float | None = DEFAULT_BACKEND_STALL_TIMEOUT_S,
        security: Mapping[str, Any] | None = None,
    ) -> None:
        """``security``: the capability document's ``security`` claim
        (:func:`..launch.security.claim`), None for none."""
        self.backend = backend
        self.manifest = dict(manifest)
        self.recorder = recorder
        self.allowed_operator_fields = frozenset(allowed_operator_fields)
        self.echo_text_in_diagnostics = echo_text_in_diagnostics
        self.backend_stall_timeout_s = backend_stall_timeout_s
        #: operation -> why it is not offered although the manifest lists it
        self.withheld = {
            op: why
            for op, why in withheld_operations(backend).items()
            if any(o["name"] == op for o in self.manifest["operations"])
        }
        self._capabilities = profile.capability_document(
            self.manifest, backend.served_model_names, withheld=self.withheld
        )
        if security:  # what this deployment requires (docs/pytest-plugin.md#security)
            self._capabilities["security"] = dict(security)
        self.operations = tuple(op["name"] for op in self._capabilities["operations"])

    @property
    def capabilities(self) -> dict[str, Any]:
        return self._capabilities

    async def handle(self, ctx: Any) -> AsyncIterator[dict[str, Any]]:
        recorder = self.recorder  # the one that started the record finishes it
        record = recorder.start(ctx) if recorder is not None else None
        try:
            async for event in self._handle(ctx, record):
                if record is not None:
                    record.event(event)
                yield event
        finally:
            if recorder is not None and record is not None:
                recorder.finish(record, ctx)

    async def _handle(self, ctx: Any, record: Any) -> AsyncIterator[dict[str, Any]]:
        try:
            envelope = profile.parse_envelope(ctx.envelope, operations=self.operations)
        except ProfileError as exc:
            yield exc.event()
            return
        if envelope.operation == contract.OP_CAPABILITIES_GET:
            event = profile.completed_event(self._capabilities)
            if envelope.wants_diagnostics:
                # The vllm.diagnostics extension: lets a client (the fault tests) ask the
                # engine from outside how many requests it still holds.
                event["nnrp"] = {"diagnostics": await self._engine_diagnostics()}
            yield event
            return
        if envelope.operation == contract.OP_RESPONSES_CREATE:
            request_id = _vllm_request_id(ctx, envelope.request_id)
            async for event in handlers.serve_responses(self, ctx, envelope, record, request_id):
                yield event
            return
        if envelope.operation == contract.OP_MODELS_LIST:
            async for event in handlers.serve_models(self, envelope, record):
                yield event
            return
        if envelope.operation == contract.OP_EMBEDDINGS_CREATE:
            request_id = _vllm_request_id(ctx, envelope.request_id)
            async for event in handlers.serve_embeddings(self, envelope, record, request_id):
                yield event
            return
        try:
            check_chat_body(envelope.body, allowed_operator_fields=self.allowed_operator_fields)
        except ProfileError as exc:
            yield exc.event()
            return
        body = handlers.backend_body(self.backend, envelope, record)
        request_id = _vllm_request_id(ctx, envelope.request_id)
        call = BackendCall(self.backend, ctx, request_id, record, self.backend_stall_timeout_s)
        streaming = bool(body.get("stream", False))
        if streaming:
            # Usage is always requested so that every streamed answer carries it.
            options = dict(body.get("stream_options") or {})
            options["include_usage"] = True
            body["stream_options"] = options
        started = time.perf_counter_ns()
        try:
            with anyio.fail_after(call.stall_s):
                result = await self.backend.chat(body, request_id=request_id)
        except (BackendError, TimeoutError) as exc:
            yield await call.failure_event(exc)
            return
        if not streaming:
            if record is not None:
                record.backend_time_ns = time.perf_counter_ns() - started
                record.usage = _usage_numbers(result.get("usage") or {})
            yield profile.completed_event(result)
            return
        # The in-band hint nnrp.cancel_after_events is NNRP policy: the server binding
        # counts events and cancels through the abort hook registered above.
        mapper = ChunkMapper(attach_chunks=envelope.wants_openai_chunk)
        stream = result
        chunks = stream.__aiter__()
        finished_stream = False
        timing = envelope.wants_timing
        # one watchdog timer for the whole stream, not a cancel scope per chunk (stall.py)
        watchdog = StallWatchdog(call.stall_s)
        try:
            while True:
                try:
                    chunk = await watchdog.next(chunks)
                except StopAsyncIteration:
                    finished_stream = True
                    finished_ns = time.perf_counter_ns()
                    break
                taken_ns = time.perf_counter_ns()
                for event in mapper.map_chunk(chunk.data):
                    if timing:
                        # same clock as every process here (CLOCK_MONOTONIC), for the
                        # backend-chunk → client-receive latency; NNRP side, never the body
                        event["nnrp"] = {"t_backend_ns": taken_ns}
                    yield event
        except (BackendError, TimeoutError) as exc:
            yield await call.failure_event(exc)
            return
        finally:
            watchdog.close()
            await call.close(stream, finished=finished_stream)
        if not mapper.finished:
            # A stream that stops before any choice finished is a cut-short answer, not a
            # success, whatever the backend's iterator said.
            call.failed("engine_failure")
            yield map_backend_error(
                "engine_failure", "the backend stream ended before the answer finished"
            )
            return
        for event in mapper.finish():
            yield event
        if record is not None:
            record.backend_time_ns = time.perf_counter_ns() - started
            record.usage = mapper.usage
        completed = profile.completed_event(mapper.final_body())
        if timing:
            # when vLLM's stream had ended here: a cancel sent after this could not stop it
            completed["nnrp"] = {"t_backend_ns": finished_ns}
        yield completed

    async def _engine_diagnostics(self) -> dict[str, Any]:
        diag: dict[str, Any] = {
            "vllm_version": getattr(self.backend, "version", None),
            # how this process came to serve NNRP: "explicit" (vllm-nnrp serve) or
            # "vllm-plugin" (inside vllm serve, .vllm_plugin)
            "startup_path": getattr(self.backend, "startup_path", None),
        }
        if self.withheld:
            diag["withheld_operations"] = dict(self.withheld)
        if self.recorder is not None:
            # The discovery operation itself is in flight while it reports.
            diag["in_flight_operations"] = max(0, self.recorder.snapshot()["in_flight"] - 1)
        count = getattr(self.backend, "num_unfinished_requests", None)
        if count is not None:
            diag["engine"] = {"unfinished_requests": await count()}
        return diag


def _vllm_request_id(ctx: Any, client_request_id: str | None) -> str:
    # Unique per live operation, so an abort can never hit another client's request.
    base = f"nnrp-{ctx.connection_id}-{ctx.session_id}-{ctx.operation_id}-{ctx.frame_id}"
    return f"{base}-{client_request_id}" if client_request_id else base
