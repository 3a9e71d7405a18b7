"""Strict only from a quoted sentence, element by element (issue 43 item 1).

Every element of every bundled recipe (ours, and upstream's with the authorities
``upstream_authority.json`` attaches) and of every generated family is judged under a rule of
the rulebook. Each strict one is an ``expect.*`` profile rule whose every quote is really in
the section of the normative text it names; the rest are non-strict. The loader refuses a
recipe of ours whose element names no authority, naming the file and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from test_rule_sources import normalized, where

from nnrp_conformance import authority, contract, recipes, rules
from nnrp_conformance.generate.mutations import MUTATIONS
from nnrp_conformance.generate.recipe_files import recipe_data
from nnrp_conformance.generate.strategies import Draft
from nnrp_conformance.recipes import RecipeError, load_recipe_file, load_recipes

REPO = Path(__file__).resolve().parents[2]
OURS = REPO / "recipes" / "level1" / "chat-invalid-body-missing-messages.yaml"
#: the elements of upstream's recipes the profile's normative text makes strict
UPSTREAM_STRICT = {
    "openai-compatible.chat.invalid-body": {"terminal"},
    "openai-compatible.chat.unsupported-operation": {"terminal"},
    "openai-compatible.chat.non-streaming": {"terminal", "events[0]"},
    "openai-compatible.chat.streaming-text": {"terminal", "events[0]"},
    "openai-compatible.chat.tool-call-delta": {"terminal"},
    "openai-compatible.chat.usage": {"terminal"},
    "openai-compatible.chat.backend-error": set(),
    "openai-compatible.chat.cancellation": set(),
}


def elements(data: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(element, rule) of each element of a recipe that can miss."""
    expects = [("", data["expect"])] + [(f"{op['name']}/", op["expect"])
                                        for op in data.get("concurrent") or ()]
    for prefix, expect in expects:
        yield f"{prefix}terminal", authority.terminal_rule(expect)
        for k, entry in enumerate(expect["events"]):
            needed = entry.get("min_count", 0 if entry.get("optional") else 1)
            if needed or "max_count" in entry:
                yield f"{prefix}events[{k}]", authority.entry_rule(entry)
            if "fields" in entry or "fields_any_of" in entry:
                yield f"{prefix}events[{k}].fields", authority.fields_rule(entry)


def strict(rule_id: str) -> bool:
    return rules.finding_level(rule_id) == rules.LEVEL_FAILED


def assert_quoted(rule_id: str) -> None:
    rule = rules.rulebook()[rule_id]
    assert rule.tag == rules.TAG_PROFILE and rule_id.startswith(authority.PROFILE_FAMILY)
    assert rule.sources
    for source in rule.sources:
        assert source.document != "upstream-recipe"
        assert normalized(source.quote) in where(source), (rule_id, source.quote)


def generated() -> Iterator[dict[str, Any]]:
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    yield recipe_data(Draft("valid", contract.OP_CHAT_COMPLETIONS_CREATE, chat),
                      case_id="generated.v.0", seed=1, index=0, model="m")
    yield recipe_data(Draft("sequence", contract.OP_CHAT_COMPLETIONS_CREATE, chat,
                            cancel_after=1,
                            companions=(Draft("valid", contract.OP_CHAT_COMPLETIONS_CREATE,
                                              chat),)),
                      case_id="generated.s.0", seed=1, index=1, model="m")
    for name, mutation in MUTATIONS.items():
        op = mutation.operations[0]
        body = chat if op == contract.OP_CHAT_COMPLETIONS_CREATE else \
            {"model": "m", "input": "hi"}
        yield recipe_data(Draft("invalid", op, body, mutation=name),
                          case_id=f"generated.i.{name}", seed=1, index=2, model="m")


def test_every_strict_element_cites_a_quote_in_the_normative_text() -> None:
    loaded = load_recipes()
    assert len(loaded) >= 49
    seen_strict: set[str] = set()
    for data in [r.data for r in loaded] + list(generated()):
        for element, rule_id in elements(data):
            assert rules.rulebook().get(rule_id) is not None, (data["id"], element, rule_id)
            if strict(rule_id):
                assert_quoted(rule_id)
                seen_strict.add(rule_id)
    # the profile's own expectations are still strict (not everything became a recommendation)
    assert {"expect.success", "expect.streamed-text", "expect.result-body", "expect.tool-call",
            "expect.invalid-request", "expect.unsupported-operation",
            "expect.invalid-submit"} <= seen_strict


def test_upstreams_recipes_are_strict_only_where_the_profile_is() -> None:
    ups = {r.id: r for r in load_recipes() if not r.is_ours and "upstream" in r.path.parts}
    assert set(ups) == set(UPSTREAM_STRICT)
    for rid, recipe in ups.items():
        found = {e for e, rule_id in elements(recipe.data) if strict(rule_id)}
        assert found == UPSTREAM_STRICT[rid], rid
        for element, rule_id in elements(recipe.data):
            if not strict(rule_id):
                assert rules.rulebook()[rule_id].tag == rules.TAG_UPSTREAM, (rid, element)
        # the overlay never touches upstream's bytes
        on_disk = json.loads(recipe.path.read_text(encoding="utf-8"))
        assert "terminal_rule" not in on_disk["expect"]


def test_what_no_normative_text_fixes_is_non_strict() -> None:
    """The readings the profile leaves open (issue 43): an error family, the terminal after a
    cancel, a chat usage event, a Responses stream's final body, an unserved model's error."""
    by_id = {r.id: dict(elements(r.data)) for r in load_recipes()}
    open_ones = {
        ("level1.chat.invalid-body.missing-messages", "events[0].fields"): "error.family",
        ("level1.chat.invalid-body.missing-messages", "events[0]"): "error.body-missing",
        ("level1.chat.cancel.client", "terminal"): "cancel.terminal",
        ("level2.responses.cancel.client", "terminal"): "cancel.terminal",
        ("level1.chat.usage-shape", "events[1]"): "usage.include-usage",
        ("level2.responses.streaming-text", "events[4].fields"): "expect.result-body",
        ("level1.chat.backend-error", "terminal"): "error.unserved-model",
        ("level1.chat.timeout", "terminal"): "timeout.total-deadline",
        ("level1.chat.text-delta-ordering", "events[1]"): "stream.several-deltas",
        ("level1.capabilities.document", "terminal"): "capability.discovery",
    }
    for (rid, element), rule_id in open_ones.items():
        assert by_id[rid].get(element) == rule_id, (rid, element, by_id[rid])
    # a Responses stream's final body is optional (§8.1 MAY): only its shape, when sent
    assert "events[4]" not in by_id["level2.responses.streaming-text"]
    assert not strict("error.family") and not strict("cancel.terminal")


@pytest.fixture
def ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder the loader takes for the bundled recipes: a recipe there is ours."""
    monkeypatch.setattr(recipes, "bundled_recipes_dir", lambda: tmp_path)
    return tmp_path


def test_the_loader_refuses_an_element_without_authority(ours: Path) -> None:
    text = OURS.read_text(encoding="utf-8")
    cases = {
        "terminal_rule": (text.replace("  terminal_rule: expect.invalid-request\n", ""),
                          "/expect/terminal_rule", "names no authority"),
        "rule": (text.replace("      rule: error.body-missing\n", ""),
                 "/expect/events/0/rule", "names no authority"),
        "catch-all": (text.replace("terminal_rule: expect.invalid-request",
                                   "terminal_rule: terminal.kind"),
                      "/expect/terminal_rule", "not one of the expect.* rules"),
        "unknown": (text.replace("fields_rule: error.family", "fields_rule: error.famliy"),
                    "/expect/events/0/fields_rule", "not a rule of the rulebook"),
    }
    for name, (changed, pointer, words) in cases.items():
        assert changed != text, name
        path = ours / "level1" / f"{name}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(changed, encoding="utf-8")
        with pytest.raises(RecipeError) as err:
            load_recipe_file(path)
        assert str(path) in str(err.value) and pointer in str(err.value), str(err.value)
        assert words in str(err.value), str(err.value)
    # the same file outside our recipes (a provider's own): its elements are upstream's
    elsewhere = ours.parent / "elsewhere.yaml"
    elsewhere.write_text(cases["terminal_rule"][0], encoding="utf-8")
    recipe = load_recipe_file(elsewhere)
    assert authority.terminal_rule(recipe.data["expect"]) == "terminal.expected"
    assert not strict("terminal.expected") and not strict("sequence.expected")
