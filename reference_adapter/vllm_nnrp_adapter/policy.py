"""The adapter's release policy: the vLLM line it supports and the versions it is tested on.

Owns where the policy file is (the copy packaged in the wheel, else the checkout's
``manifests/vllm-nnrp-adapter.release-policy.json``) and the three facts the adapter reads
from it at import: :data:`SUPPORTED_VLLM`, :data:`LOWER_BOUND_TESTED`,
:data:`CURRENT_LINE_TESTED`. The same file is what the release gate judges the evidence
against (``nnrp-conformance gate --policy``), so the line is written once. Read with ``json``
only: vLLM imports this package in every process it starts (the plugin entry point).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = [
    "CURRENT_LINE_TESTED",
    "LOWER_BOUND_TESTED",
    "POLICY_NAME",
    "SUPPORTED_VLLM",
    "policy_document",
    "policy_path",
]

#: the file's name in the checkout's manifests/ (the wheel packages it as release-policy.json)
POLICY_NAME = "vllm-nnrp-adapter.release-policy.json"
_PACKAGED = Path(__file__).with_name("release-policy.json")


def policy_path() -> Path:
    """The release policy file: the packaged copy, else the source checkout's."""
    if _PACKAGED.is_file():
        return _PACKAGED
    return Path(__file__).resolve().parents[2] / "manifests" / POLICY_NAME


def policy_document() -> dict[str, Any]:
    """The policy as parsed JSON (the gate validates it against ``release-policy``)."""
    return json.loads(policy_path().read_text(encoding="utf-8"))


_LINE = policy_document()["line"]
#: the ``vllm`` extra's specifier
SUPPORTED_VLLM: str = _LINE["declared"]
#: the exact lowest vLLM version a release is tested on
LOWER_BOUND_TESTED: str = _LINE["lower_bound"]
#: the current line's version tested today
CURRENT_LINE_TESTED: str = _LINE["current_tested"]
