"""``expect.events[].fields_any_of``: a recipe expectation that accepts one of several field
subsets, where the profile's documents allow more than one answer (issue 27: our backend-error
recipes accept upstream's backend_error and the profile design's unsupported_model, §10)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import contract, validation
from nnrp_conformance.checks import Observation, judge
from nnrp_conformance.manifest import manifest_from_dict
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import Recipe, RecipeError, load_recipe_file, load_recipes

REPO = Path(__file__).resolve().parents[2]
MANIFEST = manifest_from_dict({
    "adapter": "t", "profile": contract.PROFILE, "schema_version": contract.SCHEMA_VERSION,
    "compatibility_levels": [1, 2],
    "operations": [{"name": contract.OP_CHAT_COMPLETIONS_CREATE, "streaming": True,
                    "non_streaming": True, "tool_calls": True},
                   {"name": contract.OP_RESPONSES_CREATE, "streaming": True,
                    "non_streaming": True, "tool_calls": True}],
    "models": [{"id": "tiny"}],
})
BUNDLED = {r.id: r for r in load_recipes()}
#: our three recipes for a model the backend does not serve
OURS = ("level1.chat.backend-error", "level1.chat.backend-error.streaming",
        "level2.responses.backend-error")
ALTERNATIVES = [{"error": {"type": "server_error", "code": "backend_error"}},
                {"error": {"type": "invalid_request_error", "code": "unsupported_model"}}]


def error(code: str, typ: str) -> dict[str, Any]:
    return {"type": contract.EV_ERROR, "error": {"type": typ, "code": code, "message": "no"}}


def verdict(recipe_id: str, code: str, typ: str, *, strict: bool = False) -> Any:
    case = build_plan([BUNDLED[recipe_id]], MANIFEST, model_id="tiny").cases[0]
    o = Observation(events=[], raw_events=[], terminal_kind="error",
                    terminal_event=error(code, typ))
    return judge(case, o, strict=strict)


def failed(v: Any) -> set[str]:
    return {f.rule for f in v.findings if f.level == "failed"}


def test_our_backend_error_recipes_name_both_readings() -> None:
    for rid in OURS:
        (entry,) = [e for e in BUNDLED[rid].data["expect"]["events"]
                    if e["type"] == contract.EV_ERROR]
        assert entry["fields_any_of"] == ALTERNATIVES and "fields" not in entry, rid


@pytest.mark.parametrize("rid", OURS)
@pytest.mark.parametrize(("code", "typ"), [
    ("backend_error", "server_error"),
    ("backend_error", "invalid_request_error"),  # backend_error's family is open
    ("unsupported_model", "invalid_request_error"),  # the profile design's §10 example
])
def test_either_reading_passes_strict_or_not(rid: str, code: str, typ: str) -> None:
    for strict in (False, True):
        v = verdict(rid, code, typ, strict=strict)
        assert (v.outcome, v.findings) == ("passed", []), (strict, v.message)


def test_upstreams_recipe_expects_backend_error_beyond_the_profile() -> None:
    """Issue 36: no normative document fixes a code; upstream's recipe expects backend_error,
    so the profile design's own example is non-strict there, failed only when strict."""
    v = verdict("openai-compatible.chat.backend-error", "unsupported_model",
                "invalid_request_error")
    assert failed(v) == set() and {(f.rule, f.level) for f in v.findings} == {
        ("error.code", "non-strict")}, v.message
    v = verdict("openai-compatible.chat.backend-error", "unsupported_model",
                "invalid_request_error", strict=True)
    assert failed(v) == {"error.code"}, v.message


def test_a_code_neither_alternative_names_is_this_suites_recommendation() -> None:
    """Our recipes never fix more than the normative text: another code (of any family, the
    backend_error alternative naming none) is this suite's recommendation, error.code-choice,
    and the finding names every code the recipe maps the case to."""
    v = verdict("level1.chat.backend-error", "internal_error", "server_error")
    assert failed(v) == set(), v.message
    (code,) = [f for f in v.findings if f.rule == "error.code-choice"]
    assert code.level == "non-strict"
    assert code.expected == ["backend_error", "unsupported_model"]
    v = verdict("level1.chat.backend-error", "model_not_found", "invalid_request_error",
                strict=True)
    assert failed(v) == {"error.code-choice"}, v.message


def _recipe(path: Path, entry: dict[str, Any]) -> Path:
    data = copy.deepcopy(BUNDLED["level1.chat.backend-error"].data)
    data["expect"]["events"] = [{"type": contract.EV_ERROR, **entry}]
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(("entry", "why"), [
    ({"fields": ALTERNATIVES[0], "fields_any_of": ALTERNATIVES}, "not"),
    ({"fields_any_of": ALTERNATIVES[:1]}, "minItems"),
    ({"fields_any_of": [ALTERNATIVES[0], "backend_error"]}, "type"),
])
def test_the_schema_refuses_a_malformed_alternative(tmp_path: Path, entry: dict[str, Any],
                                                    why: str) -> None:
    with pytest.raises(RecipeError) as exc:
        load_recipe_file(_recipe(tmp_path / "r.json", entry))
    assert f"[{why}]" in str(exc.value) and "/expect/events/0" in str(exc.value)


def test_an_unsupported_operation_alternative_retargets_the_probe(tmp_path: Path) -> None:
    """The planner reads alternatives through the same helper as the checks."""
    data = copy.deepcopy(BUNDLED["level1.chat.backend-error"].data)
    data["operation"] = contract.OP_CHAT_COMPLETIONS_CREATE  # claimed: must be retargeted
    data["expect"]["events"] = [{"type": contract.EV_ERROR, "fields_any_of": [
        {"error": {"code": "unsupported_operation"}}, {"error": {"code": "backend_error"}}]}]
    validation.check("recipe", data)
    recipe = Recipe(id="t.alt", path=tmp_path, data=data, status="mandatory",
                    operation=data["operation"], required_capabilities=("api.level1",), level=1)
    (case,) = build_plan([recipe], MANIFEST, model_id="tiny").cases
    assert case.operation != contract.OP_CHAT_COMPLETIONS_CREATE
