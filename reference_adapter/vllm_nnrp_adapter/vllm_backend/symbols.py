"""The vLLM objects the binding uses, as one record (:class:`_Symbols`). Where each lives on a
given vLLM is its version family's to say (:mod:`.families`); this module only names them."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = ["SYMBOL_NAMES", "_Symbols"]


@dataclass(frozen=True)
class _Symbols:
    """The vLLM objects of one installed vLLM, located by its family's binding."""

    #: ``FlexibleArgumentParser``: the parser ``vllm serve`` builds its flags on
    parser_cls: Any
    #: ``make_arg_parser(parser)``: the ``vllm serve`` flag set
    make_arg_parser: Any
    #: ``validate_parsed_serve_args(args)``: ``vllm serve``'s own checks of the parsed flags
    validate_args: Any
    #: ``cli_env_setup()``: the process environment ``vllm serve`` sets up (spawned engine core)
    cli_env_setup: Any
    #: ``build_async_engine_client(args)``: async context manager yielding the engine client
    build_engine_client: Any
    #: ``init_app_state(engine_client, state, args[, supported_tasks])``: the serving objects
    init_app_state: Any
    #: ``build_app(args[, supported_tasks])``: the API server's app, with ``--middleware``
    #: mounted (the plugin path's hook)
    build_app: Any
    #: ``ChatCompletionRequest``
    chat_request: Any
    #: ``ErrorResponse``: what a serving object answers a rejection with
    error_response: Any
    #: ``create_error_response(exc)``: the mapping vLLM's HTTP server applies to an exception
    create_error_response: Any
    #: ``EngineDeadError``
    engine_dead_error: Any
    #: ``EngineGenerateError``
    engine_generate_error: Any
    #: ``ResponsesRequest``
    responses_request: Any
    #: ``EmbeddingCompletionRequest`` (an ``input`` body)
    embedding_request: Any

    @property
    def engine_errors(self) -> tuple[type[BaseException], ...]:
        """The engine's own failures (dead engine, failed generation)."""
        return (self.engine_dead_error, self.engine_generate_error)


#: every field of :class:`_Symbols`: what a family must place
SYMBOL_NAMES: tuple[str, ...] = tuple(f.name for f in fields(_Symbols))
