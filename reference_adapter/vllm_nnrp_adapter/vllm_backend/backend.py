"""The binding itself: :class:`VllmBackend` starts the engine from ``vllm serve`` flags or
binds to the objects a running ``vllm serve`` built, offers the operations (chat, Responses,
models, embeddings) on vLLM's serving objects and reports the engine's health and unfinished
requests (see the package docstring). What every request goes through on its way (claimed,
called, streamed, aborted) is its base's, :class:`.inflight.InFlight`."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator
from typing import Any, cast

from .chunks import StreamChunk
from .errors import (
    BackendError,
    BackendStartupError,
)
from .families import Family, check_version_supported
from .inflight import InFlight
from .lines import FEATURE_EMBEDDINGS, FEATURE_MODELS, FEATURE_RESPONSES, NO_EMBEDDINGS_ENGINE
from .pooling import PoolingEngine, engine_healthy, open_pooling_engine, serving_state
from .symbols import _Symbols
from .versions import UnsupportedVllmVersion, detect_vllm_version

__all__ = ["VllmBackend"]

# The Responses serving layer uses the request's ``request_id`` as the response id (OpenAI's
# look: ``resp_…``) and names the engine request ``{request_id}_{n}``, n the turn: function
# tools end the answer, so there is one turn, 0 (vLLM's ``_generate_with_builtin_tools``).
_RESPONSE_ID_PREFIX = "resp_"
_RESPONSE_ENGINE_SUFFIX = "_0"


def _dump(result: Any) -> dict[str, Any]:
    """A chat completion body as JSON."""
    return cast(dict[str, Any], result.model_dump(mode="json"))


def _dump_by_alias(result: Any) -> dict[str, Any]:
    """A Response object as JSON, with its aliased fields under their OpenAI names."""
    return cast(dict[str, Any], result.model_dump(mode="json", by_alias=True))


class VllmBackend(InFlight):
    """A started vLLM engine plus its OpenAI serving objects (chat, Responses, models).

    Create with :meth:`from_cli_args` (``async with``; starts the engine) or
    :meth:`from_app_state` (binds to what ``vllm serve`` built). Attributes: ``version``
    (vLLM's), ``served_model_names``, ``max_model_len``, ``startup_path`` (``"explicit"``:
    engine built from the given flags by vLLM's own builders; ``"vllm-plugin"``: bound
    inside ``vllm serve`` by :mod:`..launch.vllm_plugin`), ``limitations`` (feature -> why this
    vLLM cannot keep it: :mod:`.lines`, plus a serving object vLLM did not build).
    """

    startup_path: str = "explicit"

    def __init__(
        self,
        *,
        symbols: _Symbols,
        family: Family,
        engine_client: Any,
        serving_chat: Any,
        args: Any,
        version: str,
        startup_path: str = "explicit",
        serving_responses: Any = None,
        serving_models: Any = None,
    ) -> None:
        super().__init__(symbols, engine_client)
        self._chat = serving_chat
        self._responses = serving_responses
        self._models = serving_models
        self.args = args
        self.version = version
        self.startup_path = startup_path
        names = getattr(args, "served_model_name", None)
        self.served_model_names: list[str] = list(names) if names else [str(args.model)]
        self.max_model_len: int = int(engine_client.vllm_config.model_config.max_model_len)
        self.limitations: dict[str, str] = family.limitations(version)
        if serving_responses is None:
            self.limitations[FEATURE_RESPONSES] = (
                f"vLLM {version} built no Responses serving object for this model"
            )
        if serving_models is None:
            self.limitations[FEATURE_MODELS] = f"vLLM {version} built no models serving object"
        #: the embeddings engine, when the deployment runs one (:meth:`attach_pooling`)
        self.pooling: PoolingEngine | None = None
        self.limitations[FEATURE_EMBEDDINGS] = NO_EMBEDDINGS_ENGINE

    def attach_pooling(self, pooling: PoolingEngine) -> None:
        """Serve embeddings from ``pooling`` too: its models join the served ones (a name both
        engines serve is listed once: the same model used to generate and to embed)."""
        self.pooling = pooling
        self.limitations.pop(FEATURE_EMBEDDINGS, None)
        for name in pooling.served_model_names:
            if name not in self.served_model_names:
                self.served_model_names.append(name)

    # ----------------------------------------------------------------- start-up
    @classmethod
    def from_cli_args(
        cls, argv: list[str], *, allow_unsupported: bool = False,
        embeddings_argv: list[str] | None = None,
    ) -> contextlib.AbstractAsyncContextManager[VllmBackend]:
        """Start vLLM from ``vllm serve`` flags (``MODEL --dtype … --max-model-len …``), and
        with ``embeddings_argv`` (``vllm serve`` flags of a pooling model) a second engine that
        serves embeddings (:mod:`.pooling`).

        Raises :class:`UnsupportedVllmVersion` (vLLM missing or out of range) or
        :class:`BackendStartupError` (flags rejected, engine failed to start). On exit
        every request still in flight is aborted and the engines are shut down.
        """
        return cls._open(list(argv), allow_unsupported,
                         None if embeddings_argv is None else list(embeddings_argv))

    @classmethod
    def from_app_state(
        cls, state: Any, *, allow_unsupported: bool = False, startup_path: str = "vllm-plugin"
    ) -> VllmBackend:
        """Bind to the serving objects a running ``vllm serve`` holds in ``app.state``.

        ``state`` is the FastAPI app's ``State`` after vLLM's ``init_app_state`` (the same
        ``engine_client`` and ``openai_serving_chat`` its HTTP routes use). vLLM owns the
        engine here: nothing is started, and the caller stops only its own requests
        (:meth:`abort_in_flight`). Raises :class:`UnsupportedVllmVersion` or
        :class:`BackendStartupError` (no engine client, or the model serves no chat).
        """
        version, family = cls._checked_version(allow_unsupported)
        sym = family.symbols()
        engine_client = getattr(state, "engine_client", None)
        args = getattr(state, "args", None)
        if engine_client is None or args is None:
            raise BackendStartupError(
                "vLLM's app state holds no engine client (init_app_state has not run, or this "
                "is a render-only server without an engine)"
            )
        return cls._bind(sym, family, state, engine_client, args, version,
                         startup_path=startup_path)

    @staticmethod
    def _checked_version(allow_unsupported: bool) -> tuple[str, Family]:
        version = detect_vllm_version()
        if version is None:
            raise UnsupportedVllmVersion(
                "vLLM is not importable in this Python; run inside a vLLM venv "
                "(scripts/vllm-venv VERSION builds one)"
            )
        return version, check_version_supported(version, allow_unsupported=allow_unsupported)

    @classmethod
    def _bind(
        cls,
        sym: _Symbols,
        family: Family,
        state: Any,
        engine_client: Any,
        args: Any,
        version: str,
        *,
        startup_path: str,
        tasks: Any = None,
    ) -> VllmBackend:
        """The one binding both start-up paths end in: ``state.openai_serving_chat``, and
        ``openai_serving_responses`` / ``openai_serving_models`` (``init_app_state`` builds
        both whenever the model generates, on every bound family)."""
        chat = getattr(state, "openai_serving_chat", None)
        if chat is None:
            offered = f" (supported tasks: {tasks})" if tasks is not None else ""
            raise BackendStartupError(
                f"the model {args.model!r} does not offer chat completions{offered}"
            )
        return cls(
            symbols=sym,
            family=family,
            engine_client=engine_client,
            serving_chat=chat,
            args=args,
            version=version,
            startup_path=startup_path,
            serving_responses=getattr(state, "openai_serving_responses", None),
            serving_models=getattr(state, "openai_serving_models", None),
        )

    @classmethod
    @contextlib.asynccontextmanager
    async def _open(cls, argv: list[str], allow_unsupported: bool,
                    embeddings_argv: list[str] | None = None) -> AsyncIterator[VllmBackend]:
        version, family = cls._checked_version(allow_unsupported)
        sym = family.symbols()
        args = cls._parse_args(sym, argv)
        # parsed before either engine starts: bad flags fail in a second, not after start-up
        pooling_args = (None if embeddings_argv is None
                        else cls._parse_args(sym, embeddings_argv, what="embeddings engine "))
        sym.cli_env_setup()

        try:
            engine_cm = sym.build_engine_client(args)
            engine_client = await engine_cm.__aenter__()
        except Exception as exc:
            raise BackendStartupError(f"vLLM engine failed to start: {exc}") from exc
        backend: VllmBackend | None = None
        try:
            try:
                state, tasks = await serving_state(sym, engine_client, args)
            except Exception as exc:
                raise BackendStartupError(f"vLLM serving layer failed to start: {exc}") from exc
            backend = cls._bind(sym, family, state, engine_client, args, version,
                                startup_path="explicit", tasks=tasks)
            if pooling_args is None:
                yield backend
            else:
                async with open_pooling_engine(sym, pooling_args) as pooling:
                    backend.attach_pooling(pooling)
                    yield backend
        except BaseException as exc:
            if backend is not None:
                await backend.abort_in_flight()
            with contextlib.suppress(Exception):
                await engine_cm.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        else:
            await backend.abort_in_flight()
            await engine_cm.__aexit__(None, None, None)

    @staticmethod
    def _parse_args(sym: _Symbols, argv: list[str], what: str = "engine ") -> Any:
        parser = sym.make_arg_parser(sym.parser_cls(prog="vllm serve"))
        if argv and not argv[0].startswith("-"):
            argv = ["--model", *argv]  # `vllm serve MODEL …`: vLLM's parser wants --model
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            # argparse has already printed the reason to stderr.
            raise BackendStartupError(
                f"vLLM rejected the {what}flags {argv!r} (argparse exit {exc.code})"
            ) from None
        if getattr(args, "model_tag", None):
            args.model = args.model_tag
        try:
            sym.validate_args(args)
        except (TypeError, ValueError) as exc:
            raise BackendStartupError(str(exc)) from exc
        return args

    # ----------------------------------------------------------------- operations
    async def chat(
        self, body: dict[str, Any], *, request_id: str
    ) -> AsyncIterator[StreamChunk] | dict[str, Any]:
        """Run one OpenAI chat request through vLLM's ``OpenAIServingChat``.

        ``body`` is the chat request as a dict; ``request_id`` becomes vLLM's request id
        (engine id ``chatcmpl-{request_id}``), so :meth:`abort` can stop it; any
        ``request_id`` member in ``body`` is overridden. ``stream=True`` returns an async
        iterator of :class:`StreamChunk` (ends at ``[DONE]``; closing it early aborts the
        request; an error event mid-stream raises :class:`BackendError`). ``stream=False``
        returns the completion body. Rejections raise :class:`BackendError`.
        """
        self._claim(request_id)
        request = self._build_request(body, request_id)
        self._inflight.add(request_id)
        return await self._call(lambda: self._chat.create_chat_completion(request, None),
                                request_id, self._stream, _dump)

    async def responses(
        self, body: dict[str, Any], *, request_id: str
    ) -> AsyncIterator[dict[str, Any]] | dict[str, Any]:
        """Run one OpenAI Responses request through vLLM's ``OpenAIServingResponses``.

        The response id (and vLLM's request id) is ``resp_{request_id}``, the engine request
        ``resp_{request_id}_0``, so :meth:`abort` stops it. ``stream=True`` returns an async
        iterator of vLLM's Responses events as JSON objects (``response.created`` …
        ``response.completed``; closing it early aborts the request; a generation that fails
        raises :class:`BackendError`); ``stream=False`` returns the Response object.
        Rejections raise :class:`BackendError`.
        """
        if self._responses is None:
            raise BackendError("internal", self.limitations.get(FEATURE_RESPONSES, "no Responses"))
        self._claim(request_id)
        response_id = _RESPONSE_ID_PREFIX + request_id
        request = self._build_request(body, response_id, self._sym.responses_request)
        self._inflight.add(request_id)
        self._response_engine_ids[request_id] = response_id + _RESPONSE_ENGINE_SUFFIX
        return await self._call(lambda: self._responses.create_responses(request, None),
                                request_id, self._response_stream, _dump_by_alias,
                                forget=lambda: self._response_engine_ids.pop(request_id, None))

    async def list_models(self) -> dict[str, Any]:
        """vLLM's model list (``OpenAIServingModels.show_available_models``: the served names
        and the LoRA adapters loaded), as ``GET /v1/models`` answers it."""
        if self._models is None:
            raise BackendError("internal", self.limitations.get(FEATURE_MODELS, "no models"))
        result = (await self._models.show_available_models()).model_dump(mode="json")
        if self.pooling is not None and self.pooling.serving_models is not None:
            # the embeddings engine's models too, each id once
            more = (await self.pooling.serving_models.show_available_models()).model_dump(
                mode="json")
            ids = {m.get("id") for m in result.get("data") or []}
            result["data"] = [*(result.get("data") or []),
                              *(m for m in more.get("data") or [] if m.get("id") not in ids)]
        return cast(dict[str, Any], result)

    async def embeddings(self, body: dict[str, Any], *, request_id: str) -> dict[str, Any]:
        """Run one OpenAI embeddings request through the embeddings engine's
        ``ServingEmbedding`` (:mod:`.pooling`); returns the response body. Rejections raise
        :class:`BackendError`; without an embeddings engine, one naming the reason."""
        if self.pooling is None:
            raise BackendError("internal", self.limitations.get(FEATURE_EMBEDDINGS,
                                                                NO_EMBEDDINGS_ENGINE))
        self._claim(request_id)
        request = self._build_request(body, request_id, self._sym.embedding_request)
        self._inflight.add(request_id)
        try:
            return cast(dict[str, Any],
                        await self.pooling.embed(request, self._error_from_exception))
        finally:
            self._inflight.discard(request_id)

    async def num_unfinished_requests(self) -> int:
        """How many requests the engine front ends still track (0 when all are done)."""
        pooled = 0 if self.pooling is None else await self.pooling.unfinished_requests()
        proc = getattr(self._engine, "output_processor", None)
        if proc is not None and hasattr(proc, "get_num_unfinished_requests"):
            return int(proc.get_num_unfinished_requests()) + pooled
        getter = getattr(self._engine, "get_num_unfinished_requests", None)
        if getter is not None:
            value = getter()
            if inspect.isawaitable(value):
                value = await value
            return int(value) + pooled
        raise UnsupportedVllmVersion("this vLLM exposes no unfinished-request count")

    async def health(self) -> bool:
        """True while the engine (and the embeddings engine, if any) is up and answers its
        health check."""
        if not await engine_healthy(self._engine):
            return False
        return self.pooling is None or await self.pooling.healthy()
