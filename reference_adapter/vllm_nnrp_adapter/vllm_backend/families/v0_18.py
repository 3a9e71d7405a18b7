"""vLLM 0.18 to 0.22 (0.18.1 and 0.22.1 tested): the OpenAI server's own modules
(``vllm.entrypoints.openai.*``) and ``vllm.entrypoints.utils``. The lower bound's Responses
stream breaks with function tools (see :data:`RESPONSES_STREAM_TOOLS_FROM`)."""

from __future__ import annotations

from ..lines import FEATURE_RESPONSES_STREAM_TOOLS
from .base import Family
from .ranges import release

__all__ = ["FAMILY", "RESPONSES_STREAM_TOOLS_FROM"]

_API = "vllm.entrypoints.openai.api_server"
_CLI = "vllm.entrypoints.openai.cli_args"

#: The first release of this family whose Responses stream keeps function tools: 0.22 (0.22.1
#: tested). On 0.18.1 (the lower bound) vLLM's own stream fails as soon as the request has
#: function tools: it cannot build its own events (pydantic rejects them): with
#: ``tool_choice`` "required" or a named function its ``response.created`` (a ``json_schema``
#: text format without its schema), so no event at all; with "auto" its function-call item
#: (``arguments`` None), right after ``response.in_progress``. Its non-streamed tool call and
#: its streamed text are right. 0.19-0.21 are not tested, so they are not trusted with it.
RESPONSES_STREAM_TOOLS_FROM: tuple[int, int] = (0, 22)


def _limits(version: str) -> dict[str, str]:
    if release(version)[:2] >= RESPONSES_STREAM_TOOLS_FROM:
        return {}
    return {FEATURE_RESPONSES_STREAM_TOOLS: (
        f"vLLM {version}'s Responses stream fails when the request has function tools (it "
        "cannot build its own events: required or named tool_choice, no event at all; "
        "auto, none after response.in_progress), so Level 2's streaming tool-call semantics "
        "are not kept; the first line that keeps them is "
        f"{'.'.join(map(str, RESPONSES_STREAM_TOOLS_FROM))}")}


FAMILY = Family(
    name="0.18",
    covers=">=0.18,<0.23",
    api_server_module=_API,
    paths={
        "parser_cls": [("vllm.utils.argparse_utils", "FlexibleArgumentParser")],
        "make_arg_parser": [(_CLI, "make_arg_parser")],
        "validate_args": [(_CLI, "validate_parsed_serve_args")],
        "cli_env_setup": [("vllm.entrypoints.utils", "cli_env_setup")],
        "build_engine_client": [(_API, "build_async_engine_client")],
        "init_app_state": [(_API, "init_app_state")],
        "build_app": [(_API, "build_app")],
        "chat_request": [("vllm.entrypoints.openai.chat_completion.protocol",
                          "ChatCompletionRequest")],
        "error_response": [("vllm.entrypoints.openai.engine.protocol", "ErrorResponse")],
        "create_error_response": [("vllm.entrypoints.utils", "create_error_response")],
        "engine_dead_error": [("vllm.v1.engine.exceptions", "EngineDeadError")],
        "engine_generate_error": [("vllm.v1.engine.exceptions", "EngineGenerateError")],
        "responses_request": [("vllm.entrypoints.openai.responses.protocol", "ResponsesRequest")],
        "embedding_request": [("vllm.entrypoints.pooling.embed.protocol",
                               "EmbeddingCompletionRequest")],
    },
    limits=_limits,
)
