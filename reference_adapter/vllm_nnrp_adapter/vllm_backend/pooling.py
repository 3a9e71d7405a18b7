"""The embeddings engine: a second vLLM engine with a pooling runner, beside the generating one.

vLLM runs one runner per engine: a generating engine builds no embeddings serving object, and
a pooling engine no chat (``vllm serve`` of a chat model answers ``/v1/embeddings`` with an
error). A deployment that serves both runs two engines; ``vllm-nnrp serve
--nnrp-embeddings-engine 'MODEL --runner pooling …'`` starts the second one in the adapter's
process from ``vllm serve`` arguments, through vLLM's own ``build_async_engine_client`` and
``init_app_state`` like the first, and serves ``embeddings.create`` through the
``ServingEmbedding`` that builds (``state.serving_embedding`` on every bound family).

Owns: starting and stopping that engine, the embeddings call (vLLM answers with a JSON
response, or raises), and what the engine adds to the served models and the model list.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from .errors import BackendError, BackendStartupError
from .symbols import _Symbols

__all__ = ["PoolingEngine", "engine_healthy", "open_pooling_engine", "serving_state"]


@dataclass
class PoolingEngine:
    """A running pooling engine and the serving objects vLLM built for it."""

    engine_client: Any
    serving_embedding: Any
    serving_models: Any
    served_model_names: list[str]
    args: Any

    async def embed(self, request: Any, to_error: Callable[[BaseException], BackendError]) -> Any:
        """One embeddings request through vLLM's ``ServingEmbedding``: the response body as
        JSON (``to_error`` maps what vLLM raises). A cancelled caller cancels vLLM's own
        request generators, which abort the engine requests."""
        try:
            response = await self.serving_embedding(request, None)
        except Exception as exc:
            raise to_error(exc) from None
        body = getattr(response, "body", None)
        if not isinstance(body, bytes | bytearray | memoryview):
            # ErrorResponse-like objects and anything else vLLM may hand back
            dump = getattr(response, "model_dump", None)
            if callable(dump):
                return dump(mode="json")
            raise BackendError("internal", f"vLLM's embeddings answer is a "
                               f"{type(response).__name__}, not a JSON response")
        return json.loads(bytes(body))

    async def unfinished_requests(self) -> int:
        proc = getattr(self.engine_client, "output_processor", None)
        if proc is not None and hasattr(proc, "get_num_unfinished_requests"):
            return int(proc.get_num_unfinished_requests())
        return 0

    async def healthy(self) -> bool:
        return await engine_healthy(self.engine_client)


async def engine_healthy(engine_client: Any) -> bool:
    """True while an engine is up and answers its health check (either engine's)."""
    if getattr(engine_client, "errored", False):
        return False
    try:
        await engine_client.check_health()
    except Exception:
        return False
    return True


async def serving_state(sym: _Symbols, engine_client: Any, args: Any) -> tuple[Any, Any]:
    """vLLM's serving objects for a started engine, as ``vllm serve`` builds them: a fresh
    app ``State`` filled by ``init_app_state`` (with the engine's supported tasks where that
    vLLM takes them), and those tasks. Both engines of the adapter get theirs here."""
    from starlette.datastructures import State

    tasks = None
    if hasattr(engine_client, "get_supported_tasks"):
        tasks = await engine_client.get_supported_tasks()
    state = State()
    if "supported_tasks" in inspect.signature(sym.init_app_state).parameters \
            and tasks is not None:
        await sym.init_app_state(engine_client, state, args, tasks)
    else:
        await sym.init_app_state(engine_client, state, args)
    return state, tasks


@contextlib.asynccontextmanager
async def open_pooling_engine(sym: _Symbols, args: Any) -> AsyncIterator[PoolingEngine]:
    """Start the pooling engine for the parsed ``vllm serve`` ``args``; stop it on exit.

    Raises :class:`BackendStartupError` when the engine does not start, or when it serves no
    embeddings (a model or runner that does not embed)."""
    try:
        engine_cm = sym.build_engine_client(args)
        engine_client = await engine_cm.__aenter__()
    except Exception as exc:
        raise BackendStartupError(f"the embeddings engine failed to start: {exc}") from exc
    try:
        try:
            state, tasks = await serving_state(sym, engine_client, args)
        except Exception as exc:
            raise BackendStartupError(
                f"the embeddings engine's serving layer failed to start: {exc}") from exc
        serving = getattr(state, "serving_embedding", None)
        if serving is None:
            raise BackendStartupError(
                f"the embeddings engine serves no embeddings (model {args.model!r}, supported "
                f"tasks {tasks}): give it a pooling runner, e.g. --runner pooling "
                "(--convert embed for a generative model)")
        names = getattr(args, "served_model_name", None)
        yield PoolingEngine(engine_client, serving, getattr(state, "openai_serving_models", None),
                            list(names) if names else [str(args.model)], args)
    except BaseException as exc:
        with contextlib.suppress(Exception):
            await engine_cm.__aexit__(type(exc), exc, exc.__traceback__)
        raise
    else:
        await engine_cm.__aexit__(None, None, None)
