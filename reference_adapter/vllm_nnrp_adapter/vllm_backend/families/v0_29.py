"""vLLM 0.29 to 0.32 (0.32.0 tested): the server moved to ``vllm.entrypoints.launchers``
(flags in ``launchers.cli_args``; the engine builder in ``launchers.api_server.entry``;
``init_app_state`` in ``launchers.api_server.app_state``; ``vllm.entrypoints.openai.api_server``
is a deprecated shim), and the error types to ``vllm.entrypoints.serve.engine.protocol``."""

from __future__ import annotations

from .base import Family

__all__ = ["FAMILY"]

_LAUNCH = "vllm.entrypoints.launchers"

FAMILY = Family(
    name="0.29",
    covers=">=0.29,<0.33",
    # ``python -m vllm.entrypoints.openai.api_server`` still runs, with a deprecation warning
    api_server_module=f"{_LAUNCH}.api_server.entry",
    paths={
        "parser_cls": [("vllm.utils.argparse_utils", "FlexibleArgumentParser")],
        "make_arg_parser": [(f"{_LAUNCH}.cli_args", "make_arg_parser")],
        "validate_args": [(f"{_LAUNCH}.cli_args", "validate_parsed_serve_args")],
        "cli_env_setup": [("vllm.entrypoints.serve.utils.api_utils", "cli_env_setup")],
        "build_engine_client": [(f"{_LAUNCH}.api_server.entry", "build_async_engine_client")],
        "init_app_state": [(f"{_LAUNCH}.api_server.app_state", "init_app_state")],
        "build_app": [(f"{_LAUNCH}.api_server.entry", "build_app")],
        "chat_request": [("vllm.entrypoints.openai.chat_completion.protocol",
                          "ChatCompletionRequest")],
        "error_response": [("vllm.entrypoints.serve.engine.protocol", "ErrorResponse")],
        "create_error_response": [
            ("vllm.entrypoints.serve.exception_handling.error_response", "create_error_response"),
        ],
        "engine_dead_error": [("vllm.v1.engine.exceptions", "EngineDeadError")],
        "engine_generate_error": [("vllm.v1.engine.exceptions", "EngineGenerateError")],
        "responses_request": [("vllm.entrypoints.openai.responses.protocol", "ResponsesRequest")],
        "embedding_request": [("vllm.entrypoints.pooling.embed.protocol",
                               "EmbeddingCompletionRequest")],
    },
)
