"""A valid generated request's refusal is judged one way, whatever else its answer holds
(checks/generated.py, issue 47): a fault elsewhere in the answer (an event before the
terminal) stays a finding of its own and never turns the refusal into a failed expectation.
The upstream adapter's identical context-length errors were judged two ways: a
recommendation in 25 results and a failed ``expect.success`` in 37, wherever a diagnostics
event before them broke the event schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_checks import MANIFEST, obs

from nnrp_conformance import contract, rules
from nnrp_conformance.checks import judge
from nnrp_conformance.generate.recipe_files import recipe_data, recipe_of
from nnrp_conformance.generate.strategies import Draft
from nnrp_conformance.planner import build_plan

CONTEXT = {"type": "response.error", "error": {
    "type": "server_error", "code": "backend_error",
    "message": "This model's maximum context length is 512 tokens. However, your request has "
               "600 input tokens. Please reduce the length of the input messages."}}
#: an event no profile table lists, before the terminal
FOREIGN = {"type": "response.trace", "trace": {"queue_ms": 3}}


def generated_case(tmp: Path) -> Any:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "a " * 600}],
            "stream": True}
    draft = Draft("valid", contract.OP_CHAT_COMPLETIONS_CREATE, body)
    data = recipe_data(draft, case_id="generated.valid.chat.1-0001", seed=1, index=1,
                       model="tiny")
    return build_plan([recipe_of(data, tmp / "r.yaml")], MANIFEST, model_id="tiny").cases[0]


def levels(verdict: Any) -> dict[str, str]:
    return {f.rule: f.level for f in verdict.findings}


def test_a_refusal_is_judged_the_same_beside_a_fault_of_its_own(tmp_path: Path) -> None:
    case = generated_case(tmp_path)
    alone = levels(judge(case, obs([], "error", CONTEXT), manifest=MANIFEST))
    beside = levels(judge(case, obs([FOREIGN], "error", CONTEXT), manifest=MANIFEST))
    assert alone == {"generated.server-error": rules.LEVEL_NON_STRICT}
    # the foreign event is its own finding; the refusal is judged exactly as alone
    assert beside.pop("event.schema") == rules.LEVEL_FAILED
    assert beside == alone


def test_a_malformed_refusal_is_not_a_refusal(tmp_path: Path) -> None:
    """A terminal error that breaks the error body is judged by what the request expected."""
    case = generated_case(tmp_path)
    broken = {"type": "response.error", "error": {"message": "no type, no code"}}
    found = levels(judge(case, obs([], "error", broken), manifest=MANIFEST))
    assert found.get("expect.success") == rules.LEVEL_FAILED, found
    assert "generated.server-error" not in found
