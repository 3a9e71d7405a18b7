"""Only the profile is strict (issue 27 item 1): every ``profile`` rule of the rulebook quotes
the profile's own documents, and each quote is really there.

The documents are verbatim copies in this repository (``upstream/``, ``recipes/upstream/``).
A quote must occur, whitespace and table padding aside, inside the section it names: under
that Markdown heading (up to the next heading of the same or a higher level), at that member
path of the contract JSON, in that upstream recipe (the comparison is
``nnrp_conformance.coverage.texts``, which the statement-coverage page shares). A rule without
a quote is a ``recommendation`` and gives its rationale instead; the schema refuses anything
else.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from nnrp_conformance import rules, validation
from nnrp_conformance.coverage.texts import json_member, markdown_section, normalized

REPO = Path(__file__).resolve().parents[2]
RULEBOOK = REPO / "suite" / "nnrp_conformance" / "rulebook.json"


def where(source: rules.Source) -> str:
    """The text of the section ``source`` names, normalized (an error when there is none)."""
    _title, rel = rules.DOCUMENTS[source.document]
    if source.document == "upstream-recipe":
        path = REPO / rel / source.section
        assert path.is_file(), f"no upstream recipe {source.section!r}"
        return normalized(path.read_text(encoding="utf-8"))
    path = REPO / rel
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        json_member(json.loads(text), source.section)  # the member must exist
        # the quote is checked against the file as written (its own formatting)
        return normalized(text)
    return normalized(markdown_section(text, source.section))


PROFILE_RULES = [r for r in rules.rulebook().values() if r.tag == rules.TAG_PROFILE]


def test_the_profile_rules_are_the_quoted_ones() -> None:
    """Issue 36 item 1: only the normative documents bind. A profile rule quotes only them;
    an upstream recipe's expectation beyond them is an ``upstream`` rule, quoting the
    recipe and saying why it is not the profile's."""
    assert len(PROFILE_RULES) >= 20
    for rule in rules.rulebook().values():
        if rule.tag == rules.TAG_PROFILE:
            assert rule.sources and not rule.rationale, rule.id
            assert all(s.document != "upstream-recipe" for s in rule.sources), rule.id
        elif rule.tag == rules.TAG_UPSTREAM:
            assert rule.sources and rule.rationale, rule.id
            assert {s.document for s in rule.sources} == {"upstream-recipe"}, rule.id
        else:
            assert rule.rationale and not rule.sources, rule.id


UPSTREAM_RULES = [r for r in rules.rulebook().values() if r.tag == rules.TAG_UPSTREAM]


@pytest.mark.parametrize("rule", UPSTREAM_RULES, ids=lambda r: r.id)
def test_each_upstream_recipe_quote_is_in_that_recipe(rule: rules.Rule) -> None:
    for source in rule.sources:
        assert normalized(source.quote) in where(source), (rule.id, source.quote)


@pytest.mark.parametrize("rule", PROFILE_RULES, ids=lambda r: r.id)
def test_each_quote_is_in_the_section_it_names(rule: rules.Rule) -> None:
    for source in rule.sources:
        assert normalized(source.quote) in where(source), (
            f"{rule.id}: not found in {source.title}: {source.quote!r}")


def test_a_profile_rule_without_a_quote_is_refused() -> None:
    data = json.loads(RULEBOOK.read_text(encoding="utf-8"))
    validation.check("rulebook", data)
    bare = copy.deepcopy(data)
    first = next(r for r in bare["rules"] if r["tag"] == "profile")
    del first["sources"]
    with pytest.raises(validation.SchemaViolationError):
        validation.check("rulebook", bare)
    # a recommendation cannot borrow the profile's authority by quoting without the tag
    mixed = copy.deepcopy(data)
    rec = next(r for r in mixed["rules"] if r["tag"] == "recommendation")
    rec["sources"] = first.get("sources") or [
        {"document": "profile-design", "section": "1. Status", "quote": "This document freezes"}]
    with pytest.raises(validation.SchemaViolationError):
        validation.check("rulebook", mixed)


def test_a_misquote_is_caught() -> None:
    """The check itself can fail: a quote changed by one word is not found."""
    source = rules.lookup("nonstreaming.single-result").sources[0]  # type: ignore[union-attr]
    wrong = rules.Source(source.document, source.section,
                         source.quote.replace("one logical", "one or more"))
    assert normalized(wrong.quote) not in where(wrong)
    moved = rules.Source(source.document, "9. Cancellation and Timeouts", source.quote)
    assert normalized(moved.quote) not in where(moved)


def test_the_rule_reference_page_is_the_rulebook() -> None:
    """docs/reference/rules.md is generated and checked in: regenerate it after a rule change
    (``python -m nnrp_conformance.rule_reference > docs/reference/rules.md``)."""
    from nnrp_conformance import rule_reference

    page = (REPO / "docs" / "reference" / "rules.md").read_text(encoding="utf-8")
    assert page == rule_reference.render(), "docs/reference/rules.md is stale: regenerate it"
    for rule in rules.rulebook().values():
        name = rule.id + "*" if rule.id.endswith(".") else rule.id
        assert f"### `{name}`" in page
        for source in rule.sources:
            assert source.quote.splitlines()[0] in page
