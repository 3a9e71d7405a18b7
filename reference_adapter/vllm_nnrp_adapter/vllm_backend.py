"""The binding to vLLM's own OpenAI serving layer (in process, no HTTP server).

This module owns: locating vLLM's objects for the installed version, starting the engine
exactly as ``vllm serve`` would from the same flags, calling the chat serving object,
and turning vLLM's rejections into :class:`BackendError` with the original status, type
and message preserved. It knows nothing of NNRP.

vLLM is imported lazily inside functions, so this module imports without vLLM.

vLLM objects used (same paths on 0.18.1 and 0.22.1; each is probed, see ``_Symbols``):

- ``vllm.utils.argparse_utils.FlexibleArgumentParser`` (older: ``vllm.utils``) and
  ``vllm.entrypoints.openai.cli_args.make_arg_parser`` / ``validate_parsed_serve_args``:
  the ``vllm serve`` flag set, parsed and checked unchanged.
- ``vllm.entrypoints.utils.cli_env_setup``: the environment ``vllm serve`` sets up
  (spawned engine-core process).
- ``vllm.entrypoints.openai.api_server.build_async_engine_client(args)``: async context
  manager yielding the ``AsyncLLM`` engine client; ``init_app_state(engine_client,
  State(), args, supported_tasks)`` fills a ``starlette.datastructures.State`` whose
  ``openai_serving_chat`` is the ``OpenAIServingChat``; ``supported_tasks`` comes from
  ``await engine_client.get_supported_tasks()``.
- ``ChatCompletionRequest`` from ``vllm.entrypoints.openai.chat_completion.protocol``
  (older: ``vllm.entrypoints.openai.protocol``); ``ErrorResponse`` from
  ``vllm.entrypoints.openai.engine.protocol`` (older: ``...openai.protocol``).
- ``OpenAIServingChat.create_chat_completion(request, None)``: an async generator of
  SSE strings (stream), a ``ChatCompletionResponse`` or an ``ErrorResponse``; it may also
  raise ``vllm.exceptions.VLLMValidationError`` (e.g. ``max_tokens`` beyond the context).
  Raised exceptions are mapped with ``vllm.entrypoints.utils.create_error_response`` —
  the same mapping vLLM's HTTP server applies.
- Request ids: the serving layer names the engine request ``chatcmpl-{request.request_id}``
  when no HTTP request is passed; we set ``request_id`` on the request, so
  ``engine_client.abort("chatcmpl-" + request_id)`` aborts it. Unfinished requests come
  from ``engine_client.output_processor.get_num_unfinished_requests()``.

Two ways in: :meth:`VllmBackend.from_cli_args` starts the engine itself (the explicit
``vllm-nnrp serve`` path); :meth:`VllmBackend.from_app_state` binds to the engine client and
chat serving object that ``vllm serve`` already built into its FastAPI ``app.state``
(``init_app_state`` sets ``engine_client``, ``args`` and ``openai_serving_chat``; the
``vllm-plugin`` path, :mod:`.vllm_plugin`). Both end in the same binding code.

Must run on an asyncio event loop (vLLM is asyncio-only); anyio on its asyncio backend is
fine. The process that starts the engine needs ``LD_PRELOAD`` with tcmalloc and libiomp5
(see docs/vllm-cpu.md) and a ``if __name__ == "__main__":`` guard (spawned engine core).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from nnrp_conformance.jsonsafe import jsonable
from vllm_nnrp_adapter import CURRENT_LINE_TESTED, LOWER_BOUND_TESTED, SUPPORTED_VLLM

__all__ = [
    "FAMILIES",
    "SUPPORTED_RANGE",
    "BackendError",
    "BackendStartupError",
    "StreamChunk",
    "UnsupportedVllmVersion",
    "VllmBackend",
    "check_version_supported",
    "detect_vllm_version",
]

SUPPORTED_RANGE: str = SUPPORTED_VLLM
FAMILIES = ("request_validation", "unknown_model", "context_too_long", "engine_failure", "internal")

# The serving layer prefixes the caller's request id with this to form the engine id.
_ENGINE_ID_PREFIX = "chatcmpl-"
_CONTEXT_RE = re.compile(
    r"maximum context length|context length \(|max_model_len|max_total_tokens", re.IGNORECASE
)
_CONTEXT_PARAMS = {"input_tokens", "input_text", "max_tokens", "max_completion_tokens"}


class UnsupportedVllmVersion(RuntimeError):
    """The installed vLLM is missing or outside :data:`SUPPORTED_RANGE`."""


class BackendStartupError(RuntimeError):
    """The engine could not be configured or started (bad flags, model, environment)."""


class BackendError(Exception):
    """vLLM rejected or failed a request.

    ``family`` is one of :data:`FAMILIES`; ``status``/``error_type``/``message`` are what
    vLLM said (``error.code``/``error.type``/``error.message`` of its ``ErrorResponse``,
    or the mapping its HTTP server applies to a raised exception); ``original`` is the
    full error object as a dict.
    """

    def __init__(
        self,
        family: str,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        original: dict[str, Any] | None = None,
    ) -> None:
        if family not in FAMILIES:
            raise ValueError(f"unknown BackendError family {family!r}")
        super().__init__(message)
        self.family = family
        self.status = status
        self.error_type = error_type
        self.message = message
        self.original = original if original is not None else {}

    def __repr__(self) -> str:
        return (
            f"BackendError(family={self.family!r}, status={self.status!r}, "
            f"error_type={self.error_type!r}, message={self.message!r})"
        )


@dataclass
class StreamChunk:
    """One parsed OpenAI ``chat.completion.chunk`` and the SSE payload it came from."""

    data: dict[str, Any]
    raw: str


def detect_vllm_version() -> str | None:
    """``vllm.__version__``, or None if vLLM is not importable.

    ``importlib.metadata.version("vllm")`` does not find the ``vllm-cpu`` distribution,
    so the import package is asked.
    """
    try:
        import vllm
    except ImportError:
        return None
    version = getattr(vllm, "__version__", None)
    return str(version) if version else None


def _parse_release(version: str) -> tuple[int, ...] | None:
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)", version)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def _in_range(version: str, spec: str) -> bool:
    release = _parse_release(version)
    if release is None:
        return False
    for clause in (c.strip() for c in spec.split(",") if c.strip()):
        m = re.match(r"^(>=|<=|==|<|>)\s*(\S+)$", clause)
        bound = _parse_release(m.group(2)) if m else None
        if m is None or bound is None:
            raise ValueError(f"cannot read version clause {clause!r} in {spec!r}")
        width = max(len(release), len(bound))
        a = release + (0,) * (width - len(release))
        b = bound + (0,) * (width - len(bound))
        ok = {">=": a >= b, "<=": a <= b, "==": a == b, "<": a < b, ">": a > b}[m.group(1)]
        if not ok:
            return False
    return True


def check_version_supported(version: str, *, allow_unsupported: bool = False) -> None:
    """Raise :class:`UnsupportedVllmVersion` unless ``version`` is in :data:`SUPPORTED_RANGE`.

    Pre-release/dev suffixes are judged by their release number. ``allow_unsupported``
    lets any readable version through (the operator accepts the risk).
    """
    if allow_unsupported and _parse_release(version) is not None:
        return
    if not _in_range(version, SUPPORTED_RANGE):
        raise UnsupportedVllmVersion(
            f"vLLM {version!r} is outside the supported range {SUPPORTED_RANGE} "
            f"(tested: {LOWER_BOUND_TESTED} and {CURRENT_LINE_TESTED}); install a supported "
            "vllm-cpu or pass allow_unsupported to try anyway"
        )


def _import_first(candidates: list[tuple[str, str]], what: str) -> Any:
    errors = []
    for module_name, attr in candidates:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            errors.append(f"{module_name}: {exc}")
            continue
        if hasattr(module, attr):
            return getattr(module, attr)
        errors.append(f"{module_name} has no {attr}")
    raise UnsupportedVllmVersion(f"cannot locate vLLM's {what}: " + "; ".join(errors))


@dataclass
class _Symbols:
    """The vLLM objects this binding uses, located by probing known import paths."""

    parser_cls: Any
    make_arg_parser: Any
    validate_args: Any
    cli_env_setup: Any
    build_engine_client: Any
    init_app_state: Any
    chat_request: Any
    error_response: Any
    create_error_response: Any
    validation_error: type[BaseException] | None
    engine_errors: tuple[type[BaseException], ...] = field(default_factory=tuple)

    @classmethod
    def probe(cls) -> _Symbols:
        def optional(cands: list[tuple[str, str]]) -> Any:
            try:
                return _import_first(cands, "optional")
            except UnsupportedVllmVersion:
                return None

        api = "vllm.entrypoints.openai.api_server"
        engine_errors = tuple(
            e
            for e in (
                optional([("vllm.v1.engine.exceptions", "EngineDeadError")]),
                optional([("vllm.v1.engine.exceptions", "EngineGenerateError")]),
            )
            if e is not None
        )
        return cls(
            parser_cls=_import_first(
                [
                    ("vllm.utils.argparse_utils", "FlexibleArgumentParser"),
                    ("vllm.utils", "FlexibleArgumentParser"),
                ],
                "FlexibleArgumentParser",
            ),
            make_arg_parser=_import_first(
                [("vllm.entrypoints.openai.cli_args", "make_arg_parser")], "make_arg_parser"
            ),
            validate_args=optional(
                [("vllm.entrypoints.openai.cli_args", "validate_parsed_serve_args")]
            ),
            cli_env_setup=optional([("vllm.entrypoints.utils", "cli_env_setup")]),
            build_engine_client=_import_first(
                [(api, "build_async_engine_client")], "build_async_engine_client"
            ),
            init_app_state=_import_first([(api, "init_app_state")], "init_app_state"),
            chat_request=_import_first(
                [
                    ("vllm.entrypoints.openai.chat_completion.protocol", "ChatCompletionRequest"),
                    ("vllm.entrypoints.openai.protocol", "ChatCompletionRequest"),
                ],
                "ChatCompletionRequest",
            ),
            error_response=_import_first(
                [
                    ("vllm.entrypoints.openai.engine.protocol", "ErrorResponse"),
                    ("vllm.entrypoints.openai.protocol", "ErrorResponse"),
                ],
                "ErrorResponse",
            ),
            create_error_response=optional([("vllm.entrypoints.utils", "create_error_response")]),
            validation_error=optional([("vllm.exceptions", "VLLMValidationError")]),
            engine_errors=engine_errors,
        )


def _family_for(
    status: int | None, error_type: str | None, message: str, param: str | None = None
) -> str:
    if status == 404 or error_type == "NotFoundError":
        return "unknown_model"
    if (status is not None and 400 <= status < 500) or status == 501:
        if (param in _CONTEXT_PARAMS or param is None) and _CONTEXT_RE.search(message):
            return "context_too_long"
        return "request_validation"
    if status is not None and status >= 500:
        return "engine_failure"
    return "internal"


def _error_from_response(err: Any) -> BackendError:
    info = err.error
    original = err.model_dump(mode="json") if hasattr(err, "model_dump") else {"error": {}}
    status = getattr(info, "code", None)
    error_type = getattr(info, "type", None)
    message = str(getattr(info, "message", "") or "")
    family = _family_for(status, error_type, message, getattr(info, "param", None))
    return BackendError(family, message, status=status, error_type=error_type, original=original)


def _error_from_dict(payload: dict[str, Any]) -> BackendError:
    info = payload.get("error") if isinstance(payload.get("error"), dict) else payload
    status = info.get("code") if isinstance(info.get("code"), int) else None
    error_type = info.get("type") if isinstance(info.get("type"), str) else None
    message = str(info.get("message", ""))
    family = _family_for(status, error_type, message, info.get("param"))
    return BackendError(family, message, status=status, error_type=error_type, original=payload)


def _validation_error(exc: Any) -> BackendError:
    """A pydantic ValidationError from building the request, shaped like vLLM's HTTP 400."""
    errors = []
    for e in exc.errors(include_url=False):
        item = {k: e[k] for k in ("type", "loc", "msg") if k in e}
        item["loc"] = ["body", *e.get("loc", ())]
        if "input" in e and e["type"] != "missing":
            item["input"] = jsonable(e["input"])
        ctx = e.get("ctx") or {}
        if "error" in ctx:
            item["ctx"] = {"error": str(ctx["error"])}
        errors.append(item)
    message = "; ".join(
        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in errors
    ) or str(exc)
    param = None
    for e in exc.errors(include_url=False):
        ctx_err = (e.get("ctx") or {}).get("error")
        if ctx_err is not None and getattr(ctx_err, "parameter", None):
            param = ctx_err.parameter
            break
    # vLLM's HTTP validation handler answers 400 with type "Bad Request".
    original = {
        "error": {"message": message, "type": "Bad Request", "param": param, "code": 400},
        "detail": errors,
    }
    family = "context_too_long" if _CONTEXT_RE.search(message) else "request_validation"
    return BackendError(family, message, status=400, error_type="Bad Request", original=original)



def _parse_sse(text: str) -> list[str]:
    """The ``data:`` payloads in one or more SSE events."""
    payloads = []
    for event in text.split("\n\n"):
        lines = [ln[5:].lstrip(" ") for ln in event.splitlines() if ln.startswith("data:")]
        if lines:
            payloads.append("\n".join(lines))
    return payloads


class VllmBackend:
    """A started vLLM engine plus its OpenAI chat serving object.

    Create with :meth:`from_cli_args` (``async with``; starts the engine) or
    :meth:`from_app_state` (binds to what ``vllm serve`` built). Attributes: ``version``
    (vLLM's), ``served_model_names``, ``max_model_len``, ``startup_path`` (``"explicit"``:
    engine built from the given flags by vLLM's own builders; ``"vllm-plugin"``: bound
    inside ``vllm serve`` by :mod:`.vllm_plugin`).
    """

    startup_path: str = "explicit"

    def __init__(
        self,
        *,
        symbols: _Symbols,
        engine_client: Any,
        serving_chat: Any,
        args: Any,
        version: str,
        startup_path: str = "explicit",
    ) -> None:
        self._sym = symbols
        self._engine = engine_client
        self._chat = serving_chat
        self.args = args
        self.version = version
        self.startup_path = startup_path
        names = getattr(args, "served_model_name", None)
        self.served_model_names: list[str] = list(names) if names else [str(args.model)]
        self.max_model_len: int = int(engine_client.vllm_config.model_config.max_model_len)
        self._inflight: set[str] = set()
        # Aborted before the engine saw them (stream handed out but not yet iterated).
        self._aborted_early: set[str] = set()

    # ----------------------------------------------------------------- start-up
    @classmethod
    def from_cli_args(
        cls, argv: list[str], *, allow_unsupported: bool = False
    ) -> contextlib.AbstractAsyncContextManager[VllmBackend]:
        """Start vLLM from ``vllm serve`` flags (``MODEL --dtype … --max-model-len …``).

        Raises :class:`UnsupportedVllmVersion` (vLLM missing or out of range) or
        :class:`BackendStartupError` (flags rejected, engine failed to start). On exit
        every request still in flight is aborted and the engine is shut down.
        """
        return cls._open(list(argv), allow_unsupported)

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
        version = cls._checked_version(allow_unsupported)
        sym = _Symbols.probe()
        engine_client = getattr(state, "engine_client", None)
        args = getattr(state, "args", None)
        if engine_client is None or args is None:
            raise BackendStartupError(
                "vLLM's app state holds no engine client (init_app_state has not run, or this "
                "is a render-only server without an engine)"
            )
        return cls._bind(sym, state, engine_client, args, version, startup_path=startup_path)

    @staticmethod
    def _checked_version(allow_unsupported: bool) -> str:
        version = detect_vllm_version()
        if version is None:
            raise UnsupportedVllmVersion(
                "vLLM is not importable in this Python; run inside a vLLM venv "
                "(scripts/vllm-venv VERSION builds one)"
            )
        check_version_supported(version, allow_unsupported=allow_unsupported)
        return version

    @classmethod
    def _bind(
        cls,
        sym: _Symbols,
        state: Any,
        engine_client: Any,
        args: Any,
        version: str,
        *,
        startup_path: str,
        tasks: Any = None,
    ) -> VllmBackend:
        """The one binding both start-up paths end in: ``state.openai_serving_chat``."""
        chat = getattr(state, "openai_serving_chat", None)
        if chat is None:
            offered = f" (supported tasks: {tasks})" if tasks is not None else ""
            raise BackendStartupError(
                f"the model {args.model!r} does not offer chat completions{offered}"
            )
        return cls(
            symbols=sym,
            engine_client=engine_client,
            serving_chat=chat,
            args=args,
            version=version,
            startup_path=startup_path,
        )

    @classmethod
    @contextlib.asynccontextmanager
    async def _open(cls, argv: list[str], allow_unsupported: bool) -> AsyncIterator[VllmBackend]:
        version = cls._checked_version(allow_unsupported)
        sym = _Symbols.probe()
        args = cls._parse_args(sym, argv)
        if sym.cli_env_setup is not None:
            sym.cli_env_setup()
        from starlette.datastructures import State

        try:
            engine_cm = sym.build_engine_client(args)
            engine_client = await engine_cm.__aenter__()
        except Exception as exc:
            raise BackendStartupError(f"vLLM engine failed to start: {exc}") from exc
        backend: VllmBackend | None = None
        try:
            try:
                tasks = None
                if hasattr(engine_client, "get_supported_tasks"):
                    tasks = await engine_client.get_supported_tasks()
                state = State()
                params = inspect.signature(sym.init_app_state).parameters
                if "supported_tasks" in params and tasks is not None:
                    await sym.init_app_state(engine_client, state, args, tasks)
                else:
                    await sym.init_app_state(engine_client, state, args)
            except Exception as exc:
                raise BackendStartupError(f"vLLM serving layer failed to start: {exc}") from exc
            backend = cls._bind(
                sym, state, engine_client, args, version, startup_path="explicit", tasks=tasks
            )
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
    def _parse_args(sym: _Symbols, argv: list[str]) -> Any:
        parser = sym.make_arg_parser(sym.parser_cls(prog="vllm serve"))
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            # argparse has already printed the reason to stderr.
            raise BackendStartupError(
                f"vLLM rejected the engine flags {argv!r} (argparse exit {exc.code})"
            ) from None
        if getattr(args, "model_tag", None):
            args.model = args.model_tag
        if sym.validate_args is not None:
            try:
                sym.validate_args(args)
            except (TypeError, ValueError) as exc:
                raise BackendStartupError(str(exc)) from exc
        return args

    # ----------------------------------------------------------------- requests
    def _engine_id(self, request_id: str) -> str:
        return _ENGINE_ID_PREFIX + request_id

    def _build_request(self, body: Any, request_id: str) -> Any:
        if not isinstance(body, dict):
            raise BackendError(
                "request_validation",
                f"chat request body must be a JSON object, got {type(body).__name__}",
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
            return self._sym.chat_request.model_validate(payload)
        except ValidationError as exc:
            raise _validation_error(exc) from None
        except Exception as exc:
            raise self._error_from_exception(exc) from None

    def _error_from_exception(self, exc: BaseException) -> BackendError:
        if isinstance(exc, BackendError):
            return exc
        if self._sym.engine_errors and isinstance(exc, self._sym.engine_errors):
            return BackendError(
                "engine_failure",
                str(exc) or type(exc).__name__,
                status=500,
                error_type=type(exc).__name__,
                original={"error": {"message": str(exc), "type": type(exc).__name__, "code": 500}},
            )
        if self._sym.create_error_response is not None and isinstance(exc, Exception):
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
        if not isinstance(request_id, str) or not request_id:
            raise BackendError("internal", "request_id must be a non-empty string")
        if request_id in self._inflight:
            raise BackendError("internal", f"request id {request_id!r} is already in flight")
        request = self._build_request(body, request_id)
        self._inflight.add(request_id)
        handed_off = False
        try:
            try:
                result = await self._chat.create_chat_completion(request, None)
            except BaseException as exc:
                if not isinstance(exc, Exception):
                    await self._abort_quietly(request_id)
                    raise
                raise self._error_from_exception(exc) from None
            if isinstance(result, self._sym.error_response):
                raise _error_from_response(result)
            if hasattr(result, "__aiter__"):
                handed_off = True
                return self._stream(result, request_id)
            return result.model_dump(mode="json")
        finally:
            if not handed_off:
                self._inflight.discard(request_id)

    async def _stream(self, gen: Any, request_id: str) -> AsyncIterator[StreamChunk]:
        finished = False
        try:
            if request_id in self._aborted_early:
                return
            async for text in gen:
                for payload in _parse_sse(text):
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

    async def _close_early(self, gen: Any, request_id: str) -> None:
        import anyio

        # Shielded: this runs while the consumer is being cancelled or closed.
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(Exception):
                await gen.aclose()
            await self._abort_quietly(request_id)

    async def _abort_quietly(self, request_id: str) -> None:
        import anyio

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
        """How many requests the engine front end still tracks (0 when all are done)."""
        proc = getattr(self._engine, "output_processor", None)
        if proc is not None and hasattr(proc, "get_num_unfinished_requests"):
            return int(proc.get_num_unfinished_requests())
        getter = getattr(self._engine, "get_num_unfinished_requests", None)
        if getter is not None:
            value = getter()
            if inspect.isawaitable(value):
                value = await value
            return int(value)
        raise UnsupportedVllmVersion("this vLLM exposes no unfinished-request count")

    async def health(self) -> bool:
        """True while the engine is up and answers its health check."""
        if getattr(self._engine, "errored", False):
            return False
        try:
            await self._engine.check_health()
        except Exception:
            return False
        return True
