"""nnrp-conformance: the conformance suite for the NNRP ``openai-compatible/1`` API profile."""

__version__ = "0.1.0"
