"""The rulebook: every rule id the suite reports, tagged ``profile`` or ``recommendation``.

Owns loading ``rulebook.json`` (validated by ``rulebook.schema.json``; a ``profile`` rule
quotes the profile's own documents, a ``recommendation`` gives its rationale), looking a rule id up
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
    "DOCUMENTS",
    "LEVELS",
    "LEVEL_FAILED",
    "LEVEL_INFORMATIONAL",
    "LEVEL_NON_STRICT",
    "LEVEL_PASSED",
    "TAG_PROFILE",
    "TAG_RECOMMENDATION",
    "VERDICT_WAIVED",
    "Rule",
    "Source",
    "case_level",
    "citation",
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


#: the profile's documents a ``profile`` rule may quote: key -> (title, path of the verbatim
#: copy in this repository; an upstream recipe's path is this folder plus the section)
DOCUMENTS: Mapping[str, tuple[str, str]] = MappingProxyType({
    "profile-design": ("profile design", "upstream/nnrp-doc/docs/en/design/openai-compatible-profile.md"),
    "contract": ("public contract JSON", "upstream/nnrp-doc/docs/public/contracts/openai-compatible-1.json"),
    "data-plane": ("NNRP data-plane spec", "upstream/nnrp-doc/docs/en/protocol/v1/data-plane.md"),
    "upstream-recipe": ("upstream recipe", "recipes/upstream"),
})


@dataclass(frozen=True)
class Source:
    """Where the profile says what a rule enforces: document, section, the words themselves."""

    document: str
    section: str
    quote: str

    @property
    def title(self) -> str:
        """``profile design §7.1 Partial-Result Wire Mapping`` (the citation's words)."""
        name = DOCUMENTS[self.document][0]
        return f"{name} {self.section}" if self.document == "upstream-recipe" \
            else f"{name} §{self.section}"


@dataclass(frozen=True)
class Rule:
    id: str
    tag: str
    summary: str
    sources: tuple[Source, ...] = ()  # a profile rule's quotes
    rationale: str = ""  # a recommendation's reason

    @property
    def citation(self) -> str:
        """One line: the sections a profile rule quotes, or a recommendation's rationale."""
        if self.tag == TAG_PROFILE:
            return "; ".join(dict.fromkeys(src.title for src in self.sources))
        return self.rationale


@functools.cache
def rulebook() -> Mapping[str, Rule]:
    """Rule id -> rule, from ``rulebook.json`` (schema-checked once)."""
    data = json.loads(_FILE.read_text(encoding="utf-8"))
    validation.check("rulebook", data)
    return MappingProxyType({
        r["id"]: Rule(r["id"], r["tag"], r["summary"],
                      tuple(Source(**src) for src in r.get("sources", ())),
                      r.get("rationale", ""))
        for r in data["rules"]
    })


def lookup(rule_id: str) -> Rule | None:
    """The rule for ``rule_id``: exact, else its longest family (``wire.`` for ``wire.x.y``)."""
    book = rulebook()
    if rule_id in book:
        return book[rule_id]
    families = [k for k in book if k.endswith(".") and rule_id.startswith(k)]
    return book[max(families, key=len)] if families else None


def citation(rule_id: str) -> str:
    """What a finding of ``rule_id`` cites: the profile's sections it quotes, or (a
    recommendation) its rationale; empty for an unknown id."""
    rule = lookup(rule_id)
    return rule.citation if rule is not None else ""


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
