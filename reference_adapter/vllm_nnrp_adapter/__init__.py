"""vllm-nnrp-adapter: vLLM's OpenAI-compatible serving layer bound to the NNRP wire.

The reference implementation of the ``openai-compatible/1`` profile. vLLM itself is an
optional extra (``nnrp-conformance[vllm]``); nothing here imports it at module import.

The supported vLLM lines and the versions tested are read from the adapter's release policy
(:mod:`.policy`, ``manifests/vllm-nnrp-adapter.release-policy.json``), their one place.
"""

from .policy import CURRENT_TESTED, LINES, NEWEST_TESTED, SUPPORTED_VLLM, TESTED_VERSIONS

__version__ = "0.1.0"
__all__ = ["CURRENT_TESTED", "LINES", "NEWEST_TESTED", "SUPPORTED_VLLM", "TESTED_VERSIONS",
           "__version__"]
