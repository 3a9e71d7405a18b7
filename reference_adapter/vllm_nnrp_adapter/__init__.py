"""vllm-nnrp-adapter: vLLM's OpenAI-compatible serving layer bound to the NNRP wire.

The reference implementation of the ``openai-compatible/1`` profile. vLLM itself is an
optional extra (``nnrp-conformance[vllm]``); nothing here imports it at module import.
"""

__version__ = "0.1.0"
SUPPORTED_VLLM: str = ">=0.18.0,<0.23"
LOWER_BOUND_TESTED: str = "0.18.1"
CURRENT_LINE_TESTED: str = "0.22.1"
