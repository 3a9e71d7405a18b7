"""The features a vLLM release may not keep, beyond chat, by name: which release breaks which
is its version family's to say (:func:`.families.limitations`, each with the reason, as seen on
real vLLM CPU runs; the recorded event sequences under tests/fixtures/vllm-responses/<version>/
are the evidence).

Feature names: ``responses`` (``OpenAIServingResponses``),
``responses.stream_tool_calls`` (a streamed Responses answer with function tools), ``models``
(``OpenAIServingModels``), ``embeddings`` (``ServingEmbedding`` of a pooling engine: a
deployment's choice, see :data:`NO_EMBEDDINGS_ENGINE`). Which profile operation needs which feature is the adapter's rule
(:mod:`vllm_nnrp_adapter.adapter.adapter`), not this package's.
"""

from __future__ import annotations

__all__ = [
    "FEATURE_EMBEDDINGS",
    "FEATURE_MODELS",
    "FEATURE_RESPONSES",
    "FEATURE_RESPONSES_STREAM_TOOLS",
    "NO_EMBEDDINGS_ENGINE",
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
