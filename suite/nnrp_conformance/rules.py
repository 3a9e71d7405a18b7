"""The rulebook: every rule id the suite reports, tagged ``profile`` or ``recommendation``.

Owns loading ``rulebook.json`` (validated by ``rulebook.schema.json``), looking a rule id up
(an exact id, else the longest family id ending in ``.`` that prefixes it), and the verdict
levels (Autobahn's Pass / Non-Strict / Fail / Info): a finding of a ``profile`` rule is
``failed``; of a ``recommendation`` rule, ``non-strict`` (``failed`` when the run is strict);
evidence worth showing but judging nothing is ``informational``. A case's verdict is its
worst finding's level, ``passed`` without findings (docs/verdicts.md#levels).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from nnrp_conformance import validation

__all__ = [
    "LEVELS",
    "LEVEL_FAILED",
    "LEVEL_INFORMATIONAL",
    "LEVEL_NON_STRICT",
    "LEVEL_PASSED",
    "TAG_PROFILE",
    "TAG_RECOMMENDATION",
    "VERDICT_WAIVED",
    "Rule",
    "case_level",
    "finding_level",
    "lookup",
    "rulebook",
]

TAG_PROFILE = "profile"
TAG_RECOMMENDATION = "recommendation"

LEVEL_PASSED = "passed"
LEVEL_NON_STRICT = "non-strict"
LEVEL_FAILED = "failed"
LEVEL_INFORMATIONAL = "informational"
#: verdict levels, worst first
LEVELS = (LEVEL_FAILED, LEVEL_NON_STRICT, LEVEL_INFORMATIONAL, LEVEL_PASSED)
#: a case's verdict (not a finding's level) when a baseline waives its failure (baseline.py)
VERDICT_WAIVED = "waived"

_FILE = Path(__file__).with_name("rulebook.json")


@dataclass(frozen=True)
class Rule:
    id: str
    tag: str
    citation: str
    summary: str


@functools.cache
def rulebook() -> Mapping[str, Rule]:
    """Rule id -> rule, from ``rulebook.json`` (schema-checked once)."""
    data = json.loads(_FILE.read_text(encoding="utf-8"))
    validation.check("rulebook", data)
    return MappingProxyType({r["id"]: Rule(**r) for r in data["rules"]})


def lookup(rule_id: str) -> Rule | None:
    """The rule for ``rule_id``: exact, else its longest family (``wire.`` for ``wire.x.y``)."""
    book = rulebook()
    if rule_id in book:
        return book[rule_id]
    families = [k for k in book if k.endswith(".") and rule_id.startswith(k)]
    return book[max(families, key=len)] if families else None


def finding_level(rule_id: str, *, strict: bool = False) -> str:
    """The level of a finding of ``rule_id`` (an unknown id is judged as a profile rule)."""
    rule = lookup(rule_id)
    if rule is not None and rule.tag == TAG_RECOMMENDATION and not strict:
        return LEVEL_NON_STRICT
    return LEVEL_FAILED


def case_level(levels: Iterable[str]) -> str:
    """A case's verdict: its worst finding's level, ``passed`` when it has none."""
    seen = set(levels)
    return next((lv for lv in LEVELS if lv in seen), LEVEL_PASSED)
