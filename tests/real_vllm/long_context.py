"""A tiny model whose generations cannot end inside a test's window.

Built with a long context and asked for ``MAX_TOKENS`` with ``ignore_eos``, a generation runs
for many seconds on the CI machine class, so only an abort, a cancel or the engine's death can
end it. Tests of those causes use it; with a short answer (400 tokens) a loaded machine let
the engine finish every answer before the cause was applied, and the test had nothing to judge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess
from vllm_nnrp_adapter.launch.embedded import EMBEDDED_ENGINE_ARGS, tiny_model

LONG_CONTEXT = 32768
MAX_TOKENS = 30000


def long_engine_args() -> list[str]:
    """The embedded default's engine flags with the long context."""
    args = list(EMBEDDED_ENGINE_ARGS)
    args[args.index("--max-model-len") + 1] = str(LONG_CONTEXT)
    return args


def long_context_model(vllm_env: dict, base: Path) -> Path:
    """The tiny model with ``LONG_CONTEXT`` positions, built once per vLLM line under ``base``."""
    return tiny_model(vllm_env["python"], base / f"tiny-long-{vllm_env['version']}",
                      max_position_embeddings=LONG_CONTEXT)


def long_context_adapter(vllm_env: dict, tmp_path_factory: Any, label: str) -> AdapterProcess:
    """An adapter serving the long-context model on ``vllm_env``'s line (enter it to start it),
    logging under a fresh ``label-VERSION`` directory: a module's fixture for cause tests."""
    model = long_context_model(vllm_env, tmp_path_factory.getbasetemp())
    log_path = tmp_path_factory.mktemp(f"{label}-{vllm_env['version']}") / "adapter.log"
    return AdapterProcess(vllm_env["python"], model, long_engine_args(), log_path=log_path)
