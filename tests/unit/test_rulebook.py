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
