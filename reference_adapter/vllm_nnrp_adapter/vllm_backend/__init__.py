"""The binding to vLLM's own OpenAI serving layer (in process, no HTTP server).
May import: `profile` (the release policy); vLLM itself only inside functions.

This package owns: which vLLM is installed (``versions``), one binding per vLLM version
family (``families``: where that family keeps each object the adapter uses, ``symbols`` names
them, and what its releases break, ``lines`` names the features; chosen once at start-up,
the only place that compares vLLM versions), starting the engine exactly as ``vllm serve`` would from the same
flags and calling the chat, Responses and models serving objects (``backend``; each
request's way from claim to end, streams and aborts included, in ``inflight``),
parsing what it streams (``chunks``), and turning vLLM's rejections into
:class:`BackendError` with the original status, type and message preserved (``errors``).
It knows nothing of NNRP.

vLLM is imported lazily inside functions, so this package imports without vLLM.

vLLM objects used (the paths below are the 0.18 family's; where later families keep each is
in :mod:`.families`; the calls are the same on all):

- ``vllm.utils.argparse_utils.FlexibleArgumentParser`` and
  ``vllm.entrypoints.openai.cli_args.make_arg_parser`` / ``validate_parsed_serve_args``:
  the ``vllm serve`` flag set, parsed and checked unchanged.
- ``vllm.entrypoints.utils.cli_env_setup``: the environment ``vllm serve`` sets up
  (spawned engine-core process).
- ``vllm.entrypoints.openai.api_server.build_async_engine_client(args)``: async context
  manager yielding the ``AsyncLLM`` engine client; ``init_app_state(engine_client,
  State(), args, supported_tasks)`` fills a ``starlette.datastructures.State`` whose
  ``openai_serving_chat`` is the ``OpenAIServingChat``; ``supported_tasks`` comes from
  ``await engine_client.get_supported_tasks()``.
- ``ChatCompletionRequest`` from ``vllm.entrypoints.openai.chat_completion.protocol``;
  ``ErrorResponse`` from ``vllm.entrypoints.openai.engine.protocol``.
- ``OpenAIServingChat.create_chat_completion(request, None)``: an async generator of
  SSE strings (stream), a ``ChatCompletionResponse`` or an ``ErrorResponse``; it may also
  raise ``vllm.exceptions.VLLMValidationError`` (e.g. ``max_tokens`` beyond the context).
  Raised exceptions are mapped with ``vllm.entrypoints.utils.create_error_response`` —
  the same mapping vLLM's HTTP server applies.
- Request ids: the serving layer names the engine request ``chatcmpl-{request.request_id}``
  when no HTTP request is passed; we set ``request_id`` on the request, so
  ``engine_client.abort("chatcmpl-" + request_id)`` aborts it. Unfinished requests come
  from ``engine_client.output_processor.get_num_unfinished_requests()``.
- ``ResponsesRequest`` from ``vllm.entrypoints.openai.responses.protocol``;
  ``init_app_state`` puts ``OpenAIServingResponses`` in ``state.openai_serving_responses``
  and ``OpenAIServingModels`` in ``state.openai_serving_models``.
  ``create_responses(request, None)`` returns an ``ErrorResponse``, a ``ResponsesResponse``
  or an async generator of pydantic event objects (dumped ``mode="json", by_alias=True``,
  as vLLM's HTTP route does). The response id is the request's ``request_id``; the engine
  request is ``{request_id}_0``, so ``engine_client.abort(request_id + "_0")`` aborts it.
  vLLM's stream has no error or cancelled event: an aborted request still ends with
  ``response.completed``, a failed generation surfaces as pydantic's ``ValidationError``.
  ``show_available_models()`` returns the ``ModelList`` of ``GET /v1/models``.

Two ways in: :meth:`VllmBackend.from_cli_args` starts the engine itself (the explicit
``vllm-nnrp serve`` path); :meth:`VllmBackend.from_app_state` binds to the engine client and
chat serving object that ``vllm serve`` already built into its FastAPI ``app.state``
(``init_app_state`` sets ``engine_client``, ``args`` and the serving objects; the
``vllm-plugin`` path, :mod:`..launch.vllm_plugin`). Both end in the same binding code.

Must run on an asyncio event loop (vLLM is asyncio-only); anyio on its asyncio backend is
fine. The process that starts the engine needs ``LD_PRELOAD`` with tcmalloc and libiomp5
(see docs/vllm-cpu.md) and a ``if __name__ == "__main__":`` guard (spawned engine core).
"""

from __future__ import annotations

from .backend import VllmBackend
from .chunks import StreamChunk, parse_sse
from .errors import FAMILIES, BackendError, BackendStartupError
from .families import check_version_supported, family_for, limitations, nearest_tested
from .versions import UnsupportedVllmVersion, detect_vllm_version

__all__ = [
    "FAMILIES",
    "BackendError",
    "BackendStartupError",
    "StreamChunk",
    "UnsupportedVllmVersion",
    "VllmBackend",
    "check_version_supported",
    "detect_vllm_version",
    "family_for",
    "limitations",
    "nearest_tested",
    "parse_sse",
]
