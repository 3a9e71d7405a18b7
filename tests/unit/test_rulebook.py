"""One rulebook (issue 14 item 2): the case verdicts and the release smoke judge a stream with
the same checks, the tool-call lifecycle has one judge and a terminal's kind one function.
Where the former copies disagreed, the kept answer is pinned here (docs/verdicts.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import contract
from nnrp_conformance.checks import Observation, judge, judge_recorded
from nnrp_conformance.gate.smoke import sequence_problems
from nnrp_conformance.manifest import manifest_from_dict
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import load_recipes

SUITE = Path(__file__).resolve().parents[2] / "suite" / "nnrp_conformance"
BASE = {"index": 0, "item_id": "i1", "call_id": "c1"}
MANIFEST = manifest_from_dict({
    "adapter": "t", "profile": contract.PROFILE, "schema_version": contract.SCHEMA_VERSION,
    "compatibility_levels": [1],
    "operations": [{"name": contract.OP_CHAT_COMPLETIONS_CREATE, "streaming": True,
                    "non_streaming": True, "tool_calls": True, "cancellation": True}],
    "models": [{"id": "tiny"}]})
CASE = build_plan([r for r in load_recipes() if r.id == "level1.chat.tool-call-forced"],
                  MANIFEST, model_id="tiny").cases[0]


def started() -> dict[str, Any]:
    return {"type": contract.EV_TOOL_CALL_STARTED, **BASE, "name": "lookup"}


def delta(text: str) -> dict[str, Any]:
    return {"type": contract.EV_TOOL_CALL_DELTA, **BASE, "arguments_delta": text}


def completed(args: str) -> dict[str, Any]:
    return {"type": contract.EV_TOOL_CALL_COMPLETED, **BASE, "name": "lookup", "arguments": args}


DONE = {"type": contract.EV_COMPLETED, "body": {}}
CANCELLED = {"type": contract.EV_CANCELLED, "reason": "client"}


def tool_rules_of_case(partials: list[Any], terminal: dict[str, Any], kind: str) -> set[str]:
    v = judge(CASE, Observation(events=partials, raw_events=[None] * len(partials),
                                terminal_kind=kind, terminal_event=terminal))
    return {f.rule for f in v.findings if f.rule in ("order.tool-call", "tool-call.arguments")}


def tool_rules_of_smoke(partials: list[Any], terminal: dict[str, Any], kind: str) -> set[str]:
    found = judge_recorded([*partials, terminal], kind)
    return {f.rule for f in found if f.rule in ("order.tool-call", "tool-call.arguments")}


@pytest.mark.parametrize(("partials", "terminal", "kind", "want"), [
    # kept: a cancel may end the operation mid-call (the smoke's copy failed it)
    ([started(), delta('{"q":')], CANCELLED, "cancelled", set()),
    # kept: deltas are optional, completed carries the full arguments (the smoke's copy failed it)
    ([started(), completed('{"q": 1}')], DONE, "success", set()),
    # kept: started after other events of its call fails (the smoke's copy accepted it)
    ([delta("{}"), started(), completed("{}")], DONE, "success", {"order.tool-call"}),
    ([started(), delta('{"q":'), completed('{"q": 2}')], DONE, "success",
     {"tool-call.arguments"}),
    ([started(), delta("{}")], DONE, "success", {"order.tool-call"}),
], ids=["open-call-then-cancel", "completed-without-deltas", "started-late", "args-differ",
        "never-completed"])
def test_case_verdict_and_smoke_agree(partials: list[Any], terminal: dict[str, Any], kind: str,
                                      want: set[str]) -> None:
    assert tool_rules_of_case(partials, terminal, kind) == want
    assert tool_rules_of_smoke(partials, terminal, kind) == want
    smoke = sequence_problems([*partials, terminal], kind)
    about_the_call = [p for p in smoke if "'c1'" in p]
    assert {p[1:p.index("]")] for p in about_the_call} == want, smoke


def test_smoke_reports_late_events_with_the_case_rule() -> None:
    text = sequence_problems([{"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": "a"},
                              DONE, {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0,
                                     "delta": "late"}], "success")
    assert any("[terminal.after]" in p and "after the terminal" in p for p in text)


def test_one_copy_of_each_rule_in_the_suite() -> None:
    """grep: the drop-reason mapping and the tool-call lifecycle live in one module each."""
    owners = {r"WIRE_DROP_PEER_CANCELLED": {"terminals.py", "contract.py"},
              r"arguments_delta": {"tool_calls.py"},
              r"def terminal_kind": {"terminals.py"}}
    for pattern, allowed in owners.items():
        found = {p.name for p in SUITE.rglob("*.py") if re.search(pattern, p.read_text())}
        assert found <= allowed, (pattern, found)


# --- the rulebook: tags, levels, and the table in the docs ------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "verdicts.md"


def _reported_ids() -> set[str]:
    ids = set()
    for path in SUITE.rglob("*.py"):
        text = path.read_text()
        ids |= set(re.findall(r'(?:ctx\.fail|ctx\.note|Finding)\(\s*"([a-z][a-z0-9_.\-]+)"',
                              text))
        # the client's wire findings are reported as wire.<id> (checks.stream.check_wire)
        ids |= {i if i.startswith("wire.") else f"wire.{i}" for i in re.findall(
            r'(?:\.finding|WireViolation)\(\s*"([a-z][a-z0-9_.\-]+)"', text)}
    return ids


def test_every_reported_rule_is_in_the_rulebook() -> None:
    from nnrp_conformance import rules

    ids = _reported_ids()
    assert len(ids) > 30
    assert [i for i in ids if rules.lookup(i) is None] == []
    assert {r.tag for r in rules.rulebook().values()} == {"profile", "recommendation",
                                                          "upstream"}


def test_docs_alias_table_is_the_contract() -> None:
    # the rules themselves are on the generated page docs/reference/rules.md
    # (tests/unit/test_rule_sources.py keeps it the rulebook)
    text = DOCS.read_text()
    aliases = dict(re.findall(r"^\| `([a-z_]+)` \| `([a-z_]+)` \| `[a-z_]+` \|$", text, re.M))
    assert aliases == dict(contract.ERROR_CODE_ALIASES)


def test_aliases_never_stand_for_a_code_the_profile_fixes() -> None:
    assert set(contract.ERROR_CODE_ALIASES.values()) <= set(contract.ERROR_CODES)
    assert not set(contract.ERROR_CODE_ALIASES.values()) & set(contract.UPSTREAM_RECIPE_ERROR_CODES)
    assert not set(contract.ERROR_CODE_ALIASES) & set(contract.ERROR_CODES)


def _case(recipe_id: str) -> Any:
    return build_plan([r for r in load_recipes() if r.id == recipe_id], MANIFEST,
                      model_id="tiny").cases[0]


def _err(code: str, typ: str = "invalid_request_error", **extra: Any) -> dict[str, Any]:
    return {"type": contract.EV_ERROR, "error": {"type": typ, "code": code, "message": "no"},
            **extra}


def _judge(recipe_id: str, partials: list[Any], terminal: Any, kind: str,
           strict: bool = False) -> Any:
    return judge(_case(recipe_id), Observation(events=partials, raw_events=[None] * len(partials),
                                               terminal_kind=kind, terminal_event=terminal),
                 strict=strict)


def test_alias_of_a_recommended_code_is_non_strict_and_strict_fails_it() -> None:
    seen = _err("unsupported_schema_version")
    v = _judge("level1.envelope.wrong-schema-version", [], seen, "error")
    assert (v.outcome, v.level) == ("passed", "non-strict"), v.findings
    assert [(f.rule, f.expected) for f in v.findings] == [
        ("error.code-alias", "invalid_schema_version")]
    v = _judge("level1.envelope.wrong-schema-version", [], seen, "error", strict=True)
    assert (v.outcome, v.level) == ("failed", "failed")


def _rules_levels(v: Any) -> set[tuple[str, str]]:
    return {(f.rule, f.level) for f in v.findings}


def test_a_code_upstreams_recipe_expects_is_non_strict_and_named() -> None:
    """Issue 36 item 1: no normative document fixes a code; upstream's recipe does. Another
    code there is non-strict (the finding names upstream's recipe and cites it alone),
    failed with --strict; upstream's own runner would fail it; no alias stands for it."""
    for code in ("missing_required_parameter", "invalid_body"):
        v = _judge("openai-compatible.chat.invalid-body", [], _err(code), "error")
        assert v.outcome == "passed" and ("error.code", "non-strict") in _rules_levels(v)
        assert v.upstream_outcome == "failed"
        (finding,) = [f for f in v.findings if f.rule == "error.code"]
        assert "upstream's recipe chat-invalid-body.json expects error.code " \
            "'missing_messages'" in finding.message
        assert finding.spec == "beyond the profile's normative text: upstream recipe " \
            "chat-invalid-body.json"
        v = _judge("openai-compatible.chat.invalid-body", [], _err(code), "error", strict=True)
        assert v.outcome == "failed" and ("error.code", "failed") in _rules_levels(v)
    v = _judge("openai-compatible.chat.invalid-body", [], _err("missing_messages"), "error")
    assert (v.outcome, v.level, v.upstream_outcome) == ("passed", "passed", "passed")


def test_what_the_profile_fixes_stays_strict() -> None:
    # an invalid body is not served (§10): a success fails, citing the quote
    done = {"type": contract.EV_COMPLETED, "body": {}}
    v = _judge("level1.chat.invalid-body.messages-not-array", [], done, "success")
    assert v.outcome == "failed" and ("expect.invalid-request", "failed") in _rules_levels(v)
    # the family a recipe names for it is not the profile's (issue 43): another is non-strict
    v = _judge("level1.chat.invalid-body.messages-not-array", [],
               _err("bad_messages", "server_error"), "error")
    assert v.outcome == "passed" and ("error.family", "non-strict") in _rules_levels(v)
    # a required field of an event the profile defines
    text = {"type": contract.EV_OUTPUT_TEXT_DELTA, "delta": "hi"}
    v = _judge("level1.chat.streaming-text", [text], {"type": contract.EV_COMPLETED, "body": {}},
               "success")
    assert v.outcome == "failed" and ("event.schema", "failed") in _rules_levels(v)


def test_what_is_this_suites_is_non_strict() -> None:
    """Issue 27 item 2: the code list, the families and closed objects are recommendations."""
    cases = [
        # an own code of the family the case expects
        ("level1.envelope.wrong-schema-version", [], _err("bad_version"), "error",
         {("error.code-choice", "non-strict")}),
        # an alias in another family than its recommended code's, for an expired deadline:
        # any error the endpoint sends for it is a reading of the profile (item 5)
        ("level1.chat.timeout", [], _err("request_timeout", "server_error"), "error",
         {("error.code-choice", "non-strict"), ("timeout.total-deadline", "non-strict")}),
        # backend_error in either family: the profile fixes the code, not its family
        ("level1.chat.backend-error", [], _err("backend_error"), "error", set()),
        # OpenAI's own error field param
        ("level1.chat.invalid-body.missing-messages", [],
         {"type": contract.EV_ERROR, "error": {"type": "invalid_request_error",
                                               "code": "missing_messages", "message": "no",
                                               "param": None}}, "error",
         {("event.extra-field", "non-strict")}),
    ]
    for recipe, partials, terminal, kind, want in cases:
        v = _judge(recipe, partials, terminal, kind)
        assert v.outcome == "passed" and _rules_levels(v) == want, (recipe, v.findings)
        if want:
            assert _judge(recipe, partials, terminal, kind, strict=True).outcome == "failed"
    # an undeclared field beside the standard ones
    text = {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": "hi", "acme_trace": 1}
    v = _judge("level1.chat.streaming-text", [text], {"type": contract.EV_COMPLETED, "body": {}},
               "success")
    assert v.outcome == "passed" and _rules_levels(v) == {("event.extra-field", "non-strict")}


def test_diagnostics_field_and_cancel_reason_are_non_strict() -> None:
    text = {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": "hi",
            "diagnostics": {"queue_ms": 1}}
    v = _judge("level1.chat.streaming-text", [text], {"type": contract.EV_COMPLETED, "body": {}},
               "success")
    assert (v.outcome, v.level) == ("passed", "non-strict"), v.findings
    assert {f.rule for f in v.findings} == {"event.diagnostics-field"}
    # issue 43 item 6: the place is this suite's recommendation, not the profile's (§11 only
    # says unknown diagnostic fields must be ignored)
    said = v.findings[0].message
    assert "this suite recommends" in said and "the profile's place" not in said, said
    o = Observation(events=[{"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": "hi"}],
                    raw_events=[None], terminal_kind="cancelled", terminal_event={"type": contract.EV_CANCELLED,
                                                   "reason": "user_pressed_stop"})
    o.cancelled_at_index = 0
    v = judge(_case("level1.chat.cancel.client"), o)
    assert (v.outcome, v.level) == ("passed", "non-strict"), v.findings
    assert [f.rule for f in v.findings] == ["cancel.reason"]


def test_a_recipes_surplus_over_the_profile_is_a_recommendation() -> None:
    text = [{"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": w} for w in "abc"]
    done = {"type": contract.EV_COMPLETED, "body": {}}
    v = _judge("level1.chat.timeout", text, done, "success")
    assert (v.outcome, v.level) == ("passed", "non-strict"), v.findings
    assert [f.rule for f in v.findings] == ["timeout.total-deadline"]
    v = _judge("level1.chat.timeout", text, done, "success", strict=True)
    assert (v.outcome, [f.rule for f in v.findings]) == ("failed", ["timeout.total-deadline"])
    # anything beyond the expectation rules still fails as itself
    bad = [*text, {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0}]
    v = _judge("level1.chat.timeout", bad, done, "success")
    assert v.outcome == "failed" and "event.schema" in {f.rule for f in v.findings}
    # issue 43: another finding in the case never turns the ignored deadline into a failure
    deadline = [f for f in v.findings if f.rule != "event.schema"]
    assert deadline and {(f.rule, f.level) for f in deadline} == {
        ("timeout.total-deadline", "non-strict")}, v.findings


def test_beyond_profile_must_name_a_recommendation(tmp_path: Path) -> None:
    from nnrp_conformance.recipes import RecipeError, load_recipe_file

    src = (Path(__file__).resolve().parents[2] / "recipes" / "level1" / "chat-timeout.yaml")
    bad = tmp_path / "r.yaml"
    bad.write_text(src.read_text().replace("rule: timeout.total-deadline",
                                           "rule: terminal.kind"))
    with pytest.raises(RecipeError, match=r"beyond_profile/rule.*not a recommendation"):
        load_recipe_file(bad)
