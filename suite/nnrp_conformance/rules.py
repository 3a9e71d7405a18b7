"""The rulebook: every rule id the suite reports, tagged ``profile``, ``recommendation`` or
``upstream``.

Which text binds: only the profile's normative documents (the profile design, the public
contract JSON, the NNRP data-plane spec). A ``profile`` rule quotes them; a ``recommendation``
gives this project's rationale; an ``upstream`` rule quotes one of upstream's recipes (the
profile authors' examples) where it expects more than the normative text, e.g. an exact
``error.code``. Owns loading ``rulebook.json`` (validated by ``rulebook.schema.json``), looking a rule id up
(an exact id, else the longest family id ending in ``.`` that prefixes it), and the verdict
levels (Autobahn's Pass / Non-Strict / Fail / Info): a finding of a ``profile`` rule is
``failed``; of a ``recommendation`` or ``upstream`` rule, ``non-strict`` (``failed`` when the
run is strict);
evidence worth showing but judging nothing is ``informational``. A case's verdict is its
worst finding's level, ``passed`` without findings (docs/verdicts.md#levels).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
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
    "TAG_UPSTREAM",
    "VERDICT_NOT_EXERCISED",
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
#: what an upstream recipe expects beyond the normative documents (judged like a
#: recommendation; upstream's own runner fails it)
TAG_UPSTREAM = "upstream"
#: the tags judged non-strict unless the run is strict
_NON_STRICT_TAGS = frozenset((TAG_RECOMMENDATION, TAG_UPSTREAM))

LEVEL_PASSED = "passed"
LEVEL_NON_STRICT = "non-strict"
LEVEL_FAILED = "failed"
LEVEL_INFORMATIONAL = "informational"
#: verdict levels, worst first
LEVELS = (LEVEL_FAILED, LEVEL_NON_STRICT, LEVEL_INFORMATIONAL, LEVEL_PASSED)
#: a case's verdict (not a finding's level) when a baseline waives its failure (baseline.py)
VERDICT_WAIVED = "waived"
#: a case's verdict (outcome ``skipped``) when what it is about did not happen: a cancel never
#: sent or crossed by the terminal, a deadline never reached (checks/exercise.py)
VERDICT_NOT_EXERCISED = "not-exercised"

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
    sources: tuple[Source, ...] = ()  # a profile rule's quotes (an upstream rule's recipes)
    rationale: str = ""  # a recommendation's (an upstream rule's) reason

    @property
    def citation(self) -> str:
        """One line: the sections a profile rule quotes, an upstream rule's recipes, or a
        recommendation's rationale."""
        if self.tag == TAG_PROFILE:
            return "; ".join(dict.fromkeys(src.title for src in self.sources))
        if self.tag == TAG_UPSTREAM:
            return "beyond the profile's normative text: " + "; ".join(
                dict.fromkeys(src.title for src in self.sources))
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


#: a quote that names one event type or one recipe file is about that subject only
_SUBJECT = re.compile(r"response\.[a-z_]+(?:\.[a-z_]+)*|[\w-]+\.json")


def _about(source: Source, subject: str) -> bool:
    """Whether ``source`` may be cited for a finding about ``subject`` (an event type, a
    recipe file): it names the subject, or names no subject at all (a general sentence)."""
    text = f"{source.quote} {source.section}"
    named = set(_SUBJECT.findall(text))
    return subject in named or subject in text or not named


def citation(rule_id: str, about: str | None = None) -> str:
    """What a finding of ``rule_id`` cites: the profile's sections it quotes, or (a
    recommendation) its rationale; empty for an unknown id. ``about`` (the event type or the
    recipe file the finding is about) keeps only the quotes that apply to it: a text delta's
    finding never cites the contract's tool-call events."""
    rule = lookup(rule_id)
    if rule is None:
        return ""
    if about and rule.sources:
        kept = tuple(src for src in rule.sources if _about(src, about))
        if kept and kept != rule.sources:
            return dataclasses.replace(rule, sources=kept).citation
    return rule.citation


def finding_level(rule_id: str, *, strict: bool = False) -> str:
    """The level of a finding of ``rule_id`` (an unknown id is judged as a profile rule)."""
    rule = lookup(rule_id)
    if rule is not None and rule.tag in _NON_STRICT_TAGS and not strict:
        return LEVEL_NON_STRICT
    return LEVEL_FAILED


def case_level(levels: Iterable[str]) -> str:
    """A case's verdict: its worst finding's level, ``passed`` when it has none."""
    seen = set(levels)
    return next((lv for lv in LEVELS if lv in seen), LEVEL_PASSED)
