"""vLLM 0.23 to 0.28 (0.23.0 tested): the shared serving helpers moved out of
``vllm.entrypoints.utils`` (gone) into ``vllm.entrypoints.serve`` (the environment set-up into
``serve.utils.api_utils``; the HTTP server's error mapping into ``serve.utils.error_response``,
from 0.28 ``serve.exception_handling.error_response``); the server itself, its flags and the
protocol types stay under ``vllm.entrypoints.openai``."""

from __future__ import annotations

from .base import Family

__all__ = ["FAMILY"]

_API = "vllm.entrypoints.openai.api_server"
_CLI = "vllm.entrypoints.openai.cli_args"

FAMILY = Family(
    name="0.23",
    covers=">=0.23,<0.29",
    api_server_module=_API,
    paths={
        "parser_cls": [("vllm.utils.argparse_utils", "FlexibleArgumentParser")],
        "make_arg_parser": [(_CLI, "make_arg_parser")],
        "validate_args": [(_CLI, "validate_parsed_serve_args")],
        "cli_env_setup": [("vllm.entrypoints.serve.utils.api_utils", "cli_env_setup")],
        "build_engine_client": [(_API, "build_async_engine_client")],
        "init_app_state": [(_API, "init_app_state")],
        "build_app": [(_API, "build_app")],
        "chat_request": [("vllm.entrypoints.openai.chat_completion.protocol",
                          "ChatCompletionRequest")],
        "error_response": [("vllm.entrypoints.openai.engine.protocol", "ErrorResponse"),
                           ("vllm.entrypoints.serve.engine.protocol", "ErrorResponse")],
        "create_error_response": [
            ("vllm.entrypoints.serve.utils.error_response", "create_error_response"),
            ("vllm.entrypoints.serve.exception_handling.error_response", "create_error_response"),
        ],
        "engine_dead_error": [("vllm.v1.engine.exceptions", "EngineDeadError")],
        "engine_generate_error": [("vllm.v1.engine.exceptions", "EngineGenerateError")],
        "responses_request": [("vllm.entrypoints.openai.responses.protocol", "ResponsesRequest")],
        "embedding_request": [("vllm.entrypoints.pooling.embed.protocol",
                               "EmbeddingCompletionRequest")],
    },
)
