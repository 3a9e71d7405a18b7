"""What a supported vLLM line's serving classes do not keep, beyond chat: the features vLLM
itself breaks on that line, each with the reason, as seen on real vLLM CPU runs (the recorded
event sequences under tests/fixtures/vllm-responses/<version>/ are the evidence).

Feature names (keys of :func:`limitations`): ``responses`` (``OpenAIServingResponses``),
``responses.stream_tool_calls`` (a streamed Responses answer with function tools), ``models``
(``OpenAIServingModels``), ``embeddings`` (``ServingEmbedding`` of a pooling engine: a
deployment's choice, see :data:`NO_EMBEDDINGS_ENGINE`). Which profile operation needs which feature is the adapter's rule
(:mod:`vllm_nnrp_adapter.adapter`), not this package's.
"""

from __future__ import annotations

from .versions import _parse_release

__all__ = [
    "FEATURE_EMBEDDINGS",
    "FEATURE_MODELS",
    "FEATURE_RESPONSES",
    "FEATURE_RESPONSES_STREAM_TOOLS",
    "NO_EMBEDDINGS_ENGINE",
    "RESPONSES_STREAM_TOOLS_FROM",
    "limitations",
]

FEATURE_RESPONSES = "responses"
FEATURE_RESPONSES_STREAM_TOOLS = "responses.stream_tool_calls"
FEATURE_MODELS = "models"
FEATURE_EMBEDDINGS = "embeddings"

#: Why embeddings are not served without a second engine: vLLM runs one runner per engine
#: (``--runner generate`` or ``pooling``), and a generating engine has no embeddings serving
#: object, as ``vllm serve`` of a chat model answers ``/v1/embeddings`` with an error.
NO_EMBEDDINGS_ENGINE = (
    "no embeddings engine: vLLM runs one runner per engine and this one generates; start the "
    "adapter with --nnrp-embeddings-engine 'MODEL --runner pooling ...' to serve embeddings "
    "from a pooling engine beside it"
)

#: The first line whose Responses stream keeps function tools: 0.22 (0.22.1 tested). On 0.18.1
#: (the lower bound) vLLM's own stream fails as soon as the request has function tools: it
#: cannot build its own events (pydantic rejects them): with ``tool_choice`` "required" or a
#: named function its ``response.created`` (a ``json_schema`` text format without its schema),
#: so no event at all; with "auto" its function-call item (``arguments`` None), right after
#: ``response.in_progress``. Its non-streamed tool call and its streamed text are right.
#: 0.19-0.21 are not tested, so they are not trusted with it.
RESPONSES_STREAM_TOOLS_FROM: tuple[int, int] = (0, 22)


def limitations(version: str) -> dict[str, str]:
    """Feature -> why this vLLM line cannot keep it (empty when it keeps them all)."""
    release = _parse_release(version) or (0,)
    out: dict[str, str] = {}
    if release[:2] < RESPONSES_STREAM_TOOLS_FROM:
        out[FEATURE_RESPONSES_STREAM_TOOLS] = (
            f"vLLM {version}'s Responses stream fails when the request has function tools (it "
            "cannot build its own events: required or named tool_choice, no event at all; "
            "auto, none after response.in_progress), so Level 2's streaming tool-call semantics "
            "are not kept; the first line that keeps them is "
            f"{'.'.join(map(str, RESPONSES_STREAM_TOOLS_FROM))}"
        )
    return out
