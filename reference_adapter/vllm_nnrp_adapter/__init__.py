"""vllm-nnrp-adapter: vLLM's OpenAI-compatible serving layer bound to the NNRP wire.

The reference implementation of the ``openai-compatible/1`` profile. vLLM itself is an
optional extra (``nnrp-conformance[vllm]``); nothing here imports it at module import.

One folder per module of the design (docs/architecture.md, "The adapter"): ``profile/``,
``observability/``, ``vllm_backend/``, ``nnrp_server/``, ``adapter/``, ``launch/``,
``conformance/``, ``benchmark/``, beside ``release/`` and ``tiny_model/``; this folder holds
only ``cli.py`` and this file. Importing the package imports none of them.

The supported vLLM lines and the versions tested (``LINES``, ``SUPPORTED_VLLM``,
``TESTED_VERSIONS``, ``CURRENT_TESTED``, ``NEWEST_TESTED``) are the release policy's
(:mod:`.profile.policy`, ``manifests/vllm-nnrp-adapter.release-policy.json``), read on first use.

Old names (issue 46): the modules that sat in this folder before their rooms keep their dotted
names, which the docs, the plugin entry point ``vllm_nnrp_adapter.vllm_plugin:register`` and an
operator's ``vllm serve --middleware vllm_nnrp_adapter.vllm_plugin.NnrpServing`` use.
:data:`ALIASES` maps each old name to its module's new one; a finder on ``sys.meta_path``
answers an import of an old name with the new module itself (one module object under both
names), on demand. Four old names are rooms now and have no alias: ``profile``, ``adapter``,
``observability`` and ``conformance`` (whose ``__init__`` re-exports the command's names).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .profile.policy import (
        CURRENT_TESTED,
        LINES,
        NEWEST_TESTED,
        SUPPORTED_VLLM,
        TESTED_VERSIONS,
    )

__version__ = "0.1.0"
__all__ = ["ALIASES", "CURRENT_TESTED", "LINES", "NEWEST_TESTED", "SUPPORTED_VLLM",
           "TESTED_VERSIONS", "__version__"]

#: old dotted name -> the module's name in its room (what sat in this folder until issue 46)
ALIASES: dict[str, str] = {
    f"{__name__}.{old}": f"{__name__}.{new}"
    for old, new in (
        ("adapter_process", "launch.adapter_process"),
        ("backend_call", "adapter.backend_call"),
        ("bodies", "profile.bodies"),
        ("embedded", "launch.embedded"),
        ("handlers", "adapter.handlers"),
        ("logs", "launch.logs"),
        ("mapping", "profile.mapping"),
        ("policy", "profile.policy"),
        ("probe", "launch.probe"),
        ("proc_cpu", "observability.proc_cpu"),
        ("processes", "launch.processes"),
        ("responses_mapping", "profile.responses_mapping"),
        ("scaleout", "launch.scaleout"),
        ("security", "launch.security"),
        ("serve", "launch.serve"),
        ("settings", "launch.settings"),
        ("stall", "adapter.stall"),
        ("twin", "conformance.twin"),
        ("vllm_plugin", "launch.vllm_plugin"),
    )
}

_POLICY = frozenset({"CURRENT_TESTED", "LINES", "NEWEST_TESTED", "SUPPORTED_VLLM",
                     "TESTED_VERSIONS"})


class _AliasLoader(importlib.abc.Loader):
    """Loads an old name as the module of its new one: no second copy, no second run."""

    def __init__(self, target: str) -> None:
        self._target = target
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self._target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system gave the module the alias's spec: it keeps its own
        module.__spec__ = self._spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds the old names of :data:`ALIASES`, and nothing else."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = ALIASES.get(fullname)
        return None if new is None else importlib.machinery.ModuleSpec(fullname,
                                                                       _AliasLoader(new))


if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
    sys.meta_path.append(_AliasFinder())


def __getattr__(name: str) -> Any:
    """The release policy's names and the old modules, imported on first use."""
    if name in _POLICY:
        return getattr(importlib.import_module(f"{__name__}.profile.policy"), name)
    if f"{__name__}.{name}" in ALIASES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
