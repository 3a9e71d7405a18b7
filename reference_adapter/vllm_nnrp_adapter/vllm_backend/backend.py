"""The binding itself: :class:`VllmBackend` starts the engine from ``vllm serve`` flags or
binds to the objects a running ``vllm serve`` built, calls the chat, Responses and models
serving objects, streams their output, aborts requests and reports the engine's health (see
the package docstring)."""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar, cast

import anyio

from .chunks import StreamChunk, parse_sse
from .errors import (
    BackendError,
    BackendStartupError,
    _error_from_dict,
    _error_from_response,
    _responses_stream_failure,
    _validation_error,
)
from .families import Family, check_version_supported
from .lines import FEATURE_EMBEDDINGS, FEATURE_MODELS, FEATURE_RESPONSES, NO_EMBEDDINGS_ENGINE
from .pooling import PoolingEngine, engine_healthy, open_pooling_engine, serving_state
from .symbols import _Symbols
from .versions import UnsupportedVllmVersion, detect_vllm_version

#: what a serving call's stream handler makes of vLLM's stream (chunks or Responses events)
_Stream = TypeVar("_Stream")

__all__ = ["VllmBackend"]

# The serving layer prefixes the caller's request id with this to form the engine id.
_ENGINE_ID_PREFIX = "chatcmpl-"
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


class VllmBackend:
    """A started vLLM engine plus its OpenAI serving objects (chat, Responses, models).

    Create with :meth:`from_cli_args` (``async with``; starts the engine) or
    :meth:`from_app_state` (binds to what ``vllm serve`` built). Attributes: ``version``
    (vLLM's), ``served_model_names``, ``max_model_len``, ``startup_path`` (``"explicit"``:
    engine built from the given flags by vLLM's own builders; ``"vllm-plugin"``: bound
    inside ``vllm serve`` by :mod:`.vllm_plugin`), ``limitations`` (feature -> why this
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
        self._sym = symbols
        self._engine = engine_client
        self._chat = serving_chat
        self._responses = serving_responses
        self._models = serving_models
        self.args = args
        self.version = version
        self.startup_path = startup_path
        names = getattr(args, "served_model_name", None)
        self.served_model_names: list[str] = list(names) if names else [str(args.model)]
        self.max_model_len: int = int(engine_client.vllm_config.model_config.max_model_len)
        self._inflight: set[str] = set()
        # Aborted before the engine saw them (stream handed out but not yet iterated).
        self._aborted_early: set[str] = set()
        # request id -> engine id of the Responses requests in flight (chat's is derived)
        self._response_engine_ids: dict[str, str] = {}
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

    # ----------------------------------------------------------------- requests
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
