"""Owns ``vllm-nnrp conformance``: the adapter on real vLLM judged by the suite, and its twin.
May import: `profile`, `vllm_backend`, `launch`.

``conformance`` (the command, the manifest per vLLM line, the run), ``twin`` (the suite with
vLLM's own HTTP server as the HTTP twin). The command's names are re-exported here, so
``vllm_nnrp_adapter.conformance.run_suite`` means what it did before this was a room.
"""

from .conformance import (
    LIMITED_LINE_MANIFEST,
    main,
    manifest_for_vllm,
    run_suite,
    suite_command,
)

__all__ = ["LIMITED_LINE_MANIFEST", "main", "manifest_for_vllm", "run_suite", "suite_command"]
