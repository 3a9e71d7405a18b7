"""The adapter's release policy: the vLLM lines it supports and the versions each is tested on.

Owns where the policy file is (the copy packaged in the wheel, else the checkout's
``manifests/vllm-nnrp-adapter.release-policy.json``) and what the adapter reads from it at
import: :data:`LINES` (each declared line: its range, lower bound, current line and the levels
claimed per tested version), :data:`SUPPORTED_VLLM` (the ``vllm`` extra's specifier: the lines
joined), :data:`TESTED_VERSIONS`, :data:`CURRENT_TESTED` and :data:`NEWEST_TESTED`. The
same file is what the release gate judges the evidence against (``nnrp-conformance gate
--policy``), so each line is written once. Read with ``json`` only: vLLM imports this package
in every process it starts (the plugin entry point).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CURRENT_TESTED",
    "LINES",
    "NEWEST_TESTED",
    "POLICY_NAME",
    "SUPPORTED_VLLM",
    "TESTED_VERSIONS",
        "Line",
    "policy_document",
    "policy_path",
]

#: the file's name in the checkout's manifests/ (the wheel packages it as release-policy.json)
POLICY_NAME = "vllm-nnrp-adapter.release-policy.json"
_PACKAGED = Path(__file__).parent.with_name("release-policy.json")


def policy_path() -> Path:
    """The release policy file: the packaged copy, else the source checkout's."""
    if _PACKAGED.is_file():
        return _PACKAGED
    return Path(__file__).resolve().parents[3] / "manifests" / POLICY_NAME


def policy_document() -> dict[str, Any]:
    """The policy as parsed JSON (the gate validates it against ``release-policy``)."""
    return dict(json.loads(policy_path().read_text(encoding="utf-8")))


@dataclass(frozen=True)
class Line:
    """One declared vLLM line of the policy."""

    #: PEP 440 specifier of the line (``>=0.23.0,<0.33``)
    declared: str
    #: the exact lowest version a release is tested on
    lower_bound: str
    #: MAJOR.MINOR of the newest line
    current_line: str
    #: the version of the current line tested today
    current_tested: str
    #: tested version -> the compatibility levels the adapter claims on it
    levels: dict[str, tuple[int, ...]]

    @property
    def tested(self) -> tuple[str, str]:
        return (self.lower_bound, self.current_tested)


def _line(doc: dict[str, Any]) -> Line:
    return Line(doc["declared"], doc["lower_bound"], doc["current_line"], doc["current_tested"],
                {v: tuple(levels) for v, levels in doc.get("levels", {}).items()})


def _joined(lines: tuple[Line, ...]) -> str:
    """The lines as one specifier: the first line's lower and the last line's upper bound.
    That the lines follow each other without a gap, so the join says exactly what they say,
    is the release gate's to judge when it loads this same file (``gate.requirements.
    joined_range``; tests/unit/test_gate.py holds the two joins equal): here only the bounds
    are read, with ``json`` and ``re`` alone."""
    bounds = [re.fullmatch(r">=\s*([\w.]+)\s*,\s*<\s*([\w.]+)", line.declared.strip())
              for line in (lines[0], lines[-1])] if lines else []
    if len(bounds) != 2 or bounds[0] is None or bounds[1] is None:
        raise ValueError(f"{POLICY_NAME}: each line's range must read '>=A,<B' "
                         f"({[line.declared for line in lines]})")
    return f">={bounds[0].group(1)},<{bounds[1].group(2)}"


LINES: tuple[Line, ...] = tuple(_line(d) for d in policy_document()["lines"])
#: the ``vllm`` extra's specifier: every declared line
SUPPORTED_VLLM: str = _joined(LINES)
#: every version a release is tested on (each line's lower bound and current line), oldest first
TESTED_VERSIONS: tuple[str, ...] = tuple(v for line in LINES for v in line.tested)
#: the newest tested version: what a tool runs when it is given none, and what the test command
#: runs real vLLM on (docs/testing.md#real-vllm)
NEWEST_TESTED: str = LINES[-1].current_tested
#: each line's current tested version: where the release run measures parity
CURRENT_TESTED: tuple[str, ...] = tuple(line.current_tested for line in LINES)
