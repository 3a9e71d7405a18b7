"""Locating vLLM's objects for the installed version (each probed among the paths the
supported line uses; a missing one is an :class:`UnsupportedVllmVersion` naming what)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from .versions import UnsupportedVllmVersion

__all__ = ["_Symbols"]

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
    #: ``ResponsesRequest`` (None: this vLLM has no Responses API, so none is served)
    responses_request: Any = None
    #: ``EmbeddingCompletionRequest`` (an ``input`` body; None: no pooling serving layer)
    embedding_request: Any = None

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
            responses_request=optional(
                [("vllm.entrypoints.openai.responses.protocol", "ResponsesRequest")]
            ),
            embedding_request=optional(
                [("vllm.entrypoints.pooling.embed.protocol", "EmbeddingCompletionRequest")]
            ),
        )
