"""The statement-coverage page (issue 43 item 5): docs/coverage.md lists every normative
statement of the profile's three texts with the rules and recipes that test it, or the
stated reason it is not tested; it is generated, and checked in as generated.

Fails when the page is stale, when a statement has neither a test nor a reason, when a
reason is stale (its statement is tested) or names no statement, and when a ``profile``
rule (or a recipe) quotes text that is no statement on the page. The checks themselves can
fail: each is run once on a changed rulebook or reasons list.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest

from nnrp_conformance import contract, recipes, rules, validation
from nnrp_conformance.checks import NAMED_CHECKS
from nnrp_conformance.coverage import __main__ as command
from nnrp_conformance.coverage import build, mapping, page, statements
from nnrp_conformance.coverage.texts import normalized, read_document

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "coverage.md"

STATEMENTS = statements.all_statements()
REASONS = mapping.load_reasons()
RECIPES = recipes.load_recipes()
PROFILE_RULES = [r for r in rules.rulebook().values() if r.tag == rules.TAG_PROFILE]
COVERAGE = build()
OPERATIONS = {*contract.PROFILE_OPERATIONS, contract.OP_CAPABILITIES_GET}


def coverage_with(book: dict[str, rules.Rule] | None = None,
                  reasons: list[mapping.Reason] | None = None,
                  recipe_list: list[recipes.Recipe] | None = None) -> mapping.Coverage:
    return mapping.compute(STATEMENTS, dict(rules.rulebook()) if book is None else book,
                           RECIPES if recipe_list is None else recipe_list,
                           REASONS if reasons is None else reasons)


def test_the_page_is_generated_and_current() -> None:
    """Regenerate after changing a text, a rule, a recipe or a reason:
    ``python -m nnrp_conformance.coverage --out docs/coverage.md``."""
    assert PAGE.read_text(encoding="utf-8") == page.render(COVERAGE), \
        "docs/coverage.md is stale: run python -m nnrp_conformance.coverage --out docs/coverage.md"
    assert page.COMMAND in PAGE.read_text(encoding="utf-8").split("## Summary")[0]


def test_every_statement_is_tested_or_has_a_reason() -> None:
    cov = COVERAGE
    assert cov.problems == [], "\n".join(cov.problems)
    for st in cov.statements:
        assert cov.tested[st.id].tested or st.id in cov.reasons, st.id


def test_every_profile_rule_quote_falls_on_a_statement_listed_on_the_page() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for rule in PROFILE_RULES:
        for source in rule.sources:
            hit = [st for st in STATEMENTS if mapping.falls_on(source, st)]
            assert hit, f"{rule.id} quotes no statement: {source.quote!r}"
            assert all(f"| `{st.id}` |" in text for st in hit)


def test_the_page_lists_each_statement_once_with_the_counts() -> None:
    text = PAGE.read_text(encoding="utf-8")
    ids = re.findall(r"^\| `((?:pd|c|dp)-[^`]+)` \|", text, re.M)
    assert sorted(ids) == sorted(st.id for st in STATEMENTS)
    assert len(set(ids)) == len(ids)
    cov = COVERAGE
    n_tested = sum(t.tested for t in cov.tested.values())
    assert f"| **all three** | **{len(STATEMENTS)}** | **{n_tested}** | " \
           f"**{len(STATEMENTS) - n_tested}** |" in text
    assert len(cov.reasons) == len(STATEMENTS) - n_tested


def test_every_normative_word_of_the_texts_is_inside_a_statement() -> None:
    """The extraction misses nothing: each MUST / SHOULD / MAY / REQUIRED sentence of the
    Markdown texts is inside one of the statements."""
    for document in ("profile-design", "data-plane"):
        text = read_document(document)
        mine = [normalized(st.text) for st in STATEMENTS if st.document == document]
        for m in re.finditer(r"[^.\n|]*\b(?:MUST|SHOULD|MAY|REQUIRED)\b[^.\n|]*", text):
            words = normalized(m.group(0))
            assert any(words in s for s in mine), f"{document}: {words!r}"


def test_the_statements_are_what_the_page_says_they_are() -> None:
    by_doc = {d: [s for s in STATEMENTS if s.document == d]
              for d in ("profile-design", "contract", "data-plane")}
    design = [s.text for s in by_doc["profile-design"]]
    assert "The operation itself still ends exactly once through its NNRP terminal outcome." \
        in design
    assert not any("Keep application payloads compatible" in t for t in design)  # §2
    event_rows = [s for s in by_doc["profile-design"]
                  if s.table == normalized("| Event type | Required fields | Description |")]
    assert len(event_rows) == 9
    contract = {s.section for s in by_doc["contract"]}
    assert {"toolCallEvents.response.tool_call.delta", "ordering.rules",
            "wireMapping.terminalResult.metadataMustMatchBody"} <= contract
    assert "$schema" not in contract and "contractVersion" not in contract
    reserved = [s for s in by_doc["data-plane"] if s.kind == "row"]
    assert len(reserved) == 5 and all("MUST be zero" in s.text for s in reserved)
    assert len({s.id for s in STATEMENTS}) == len(STATEMENTS)


def test_the_named_checks_map_to_rules() -> None:
    assert set(mapping.CHECK_RULES) == set(NAMED_CHECKS)
    for rule_ids in mapping.CHECK_RULES.values():
        assert all(rid in rules.rulebook() for rid in rule_ids)


# --- the checks themselves can fail ------------------------------------------------------------


def test_a_removed_reason_fails() -> None:
    first = REASONS[0]
    fewer = [dataclasses.replace(first, statements=first.statements[1:]), *REASONS[1:]] \
        if len(first.statements) > 1 else REASONS[1:]
    problems = coverage_with(reasons=fewer).problems
    assert any(first.statements[0] in p and "no reason" in p for p in problems), problems


def test_a_profile_rule_quoting_no_statement_fails() -> None:
    book = dict(rules.rulebook())
    book["made.up"] = rules.Rule("made.up", rules.TAG_PROFILE, "a rule quoting a design goal", (
        rules.Source("profile-design", "2. Design Goals", "Keep application payloads "
                     "compatible with existing OpenAI-style request bodies where practical."),))
    problems = coverage_with(book=book).problems
    assert any("made.up quotes text that is no statement" in p for p in problems), problems


def test_a_reason_for_a_tested_statement_is_stale() -> None:
    tested = next(st for st in STATEMENTS if COVERAGE.tested[st.id].tested)
    more = [*REASONS, mapping.Reason("informative", "a reason that is no longer true",
                                     (tested.id,))]
    problems = coverage_with(reasons=more).problems
    assert any(tested.id in p and "stale" in p for p in problems), problems
    unknown = [*REASONS, mapping.Reason("informative", "a reason for a changed text",
                                        ("pd-9-000000",))]
    assert any("pd-9-000000" in p and "no statement" in p
               for p in coverage_with(reasons=unknown).problems)


def test_a_recipe_citation_tests_a_statement_and_must_fall_on_one() -> None:
    """A recipe that quotes a statement tests it (its reason goes stale); one that quotes
    text that is no statement is a problem, as a rule's would be."""
    untested = next(st for st in STATEMENTS if st.id == "pd-9-b7b8be")  # timeouts: policy
    source = RECIPES[0]
    data = copy.deepcopy(source.data)
    data["expect"]["citations"] = [{"document": "profile-design",
                                    "section": "9. Cancellation and Timeouts",
                                    "quote": "Timeouts are client policy"}]
    citing = dataclasses.replace(source, data=data)
    cov = coverage_with(recipe_list=[citing, *RECIPES[1:]])
    assert cov.tested[untested.id].citing == (source.id,)
    assert any(untested.id in p and "stale" in p for p in cov.problems)
    data["expect"]["citations"][0]["quote"] = "Timeouts are whatever the endpoint wants"
    wrong = dataclasses.replace(source, data=data)
    assert any("cites text that is no statement" in p
               for p in coverage_with(recipe_list=[wrong, *RECIPES[1:]]).problems)


def test_the_reasons_file_is_schema_checked() -> None:
    data = json.loads(mapping.REASONS_FILE.read_text(encoding="utf-8"))
    validation.check("coverage-reasons", data)
    vague = copy.deepcopy(data)
    vague["reasons"][0]["kind"] = "later"
    with pytest.raises(validation.SchemaViolationError):
        validation.check("coverage-reasons", vague)
    bare = copy.deepcopy(data)
    del bare["reasons"][0]["reason"]
    with pytest.raises(validation.SchemaViolationError):
        validation.check("coverage-reasons", bare)


def test_the_command_writes_the_page_only_without_problems(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "coverage.md"
    assert command.main(["--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8")
    broken = coverage_with(reasons=REASONS[1:])
    monkeypatch.setattr(command, "build", lambda: broken)
    out.unlink()
    assert command.main(["--out", str(out)]) == 1
    assert not out.exists()
    assert "no reason" in capsys.readouterr().err


def test_the_reasons_name_real_rules_and_recipes() -> None:
    """A reason is a doc sentence: each rule id and recipe id it names exists (``x.*`` names
    every rule, or recipe, whose id starts with ``x.``)."""
    assert any("event.schema" in r.reason for r in REASONS)  # the pattern finds ids
    recipe_ids = {r.id for r in RECIPES}
    prefixes = {rid.split(".")[0] for rid in rules.rulebook()}
    for reason in REASONS:
        for name in re.findall(r"\b[a-z][a-z0-9_-]*\.[\w.*-]*[\w*]", reason.reason):
            if name.endswith((".py", ".json", ".md")) or name in OPERATIONS \
                    or name.split(".")[0] not in prefixes | {"level1", "level2", "level3"}:
                continue  # a file, an operation, or no id at all
            if name.endswith(".*"):
                stem = name[:-1]
                assert any(i.startswith(stem) for i in [*recipe_ids, *rules.rulebook()]), name
            elif name.startswith("level"):
                assert name in recipe_ids, name
            else:
                assert rules.lookup(name) is not None, name


def test_a_broken_reasons_file_is_a_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "reasons.json"
    broken.write_text('{"reasons": [', encoding="utf-8")
    monkeypatch.setattr(mapping, "REASONS_FILE", broken)
    assert command.main([]) == 2
    err = capsys.readouterr().err
    assert f"{broken}: invalid JSON at line 1" in err and "Traceback" not in err


def test_what_a_recipe_asks_for_names_real_rules() -> None:
    book = rules.rulebook()
    for recipe in RECIPES:
        for ask in mapping.recipe_asks(recipe):
            assert any(rid == ask or (ask.endswith(".") and rid.startswith(ask))
                       for rid in book), (recipe.id, ask)


def test_a_recipe_is_listed_where_it_asks_for_what_the_statement_s_rules_judge() -> None:
    """A recipe citing §10 for an invalid body is listed beside §10's invalid-body row, not
    beside its overload row (concurrency.refused judges operations in flight together)."""
    def row(words: str) -> mapping.Tested:
        return COVERAGE.tested[next(s.id for s in STATEMENTS if words in s.text)]

    invalid, overload = row("| Invalid request body"), row("| Model overload")
    assert "level1.chat.invalid-body.missing-messages" in invalid.recipes
    assert overload.rules == ("concurrency.refused",) and overload.recipes == ()
    cancel = row("OpenAI-compatible client cancellation maps to NNRP frame cancellation")
    assert "level1.chat.cancel.client" in cancel.recipes
    assert "level1.chat.timeout" not in cancel.recipes  # cites §9, sends no cancel


def test_the_changelog_gives_the_page_s_counts() -> None:
    """The changelog's note repeats the counts: regenerate both together."""
    note = " ".join((REPO / "CHANGELOG.md").read_text(encoding="utf-8").split())
    by_doc = {d: sum(s.document == d for s in STATEMENTS)
              for d in ("profile-design", "contract", "data-plane")}
    n_tested = sum(t.tested for t in COVERAGE.tested.values())
    kinds = {k: sum(r.kind == k for r in COVERAGE.reasons.values()) for k in page.KINDS}
    assert (f"({len(STATEMENTS)}: {by_doc['profile-design']} of the profile design, "
            f"{by_doc['contract']} of the contract JSON, {by_doc['data-plane']} of the "
            f"data-plane spec)") in note
    assert (f"{n_tested} are tested; {len(COVERAGE.reasons)} give a reason, of which "
            f"{kinds['uncited']} are judged by a rule that quotes another text (`uncited`), "
            f"{kinds['client']} are the client's, {kinds['transport']} nnrp-py's framing, "
            f"{kinds['permission']} freedoms, {kinds['informative']} informative, "
            f"{kinds['recipes']} about recipes and {kinds['untested']} untested") in note
