"""Planner: selection tables, capability tokens, substitution, envelopes, the plan document."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import contract, validation
from nnrp_conformance.manifest import (
    ManifestError,
    capabilities_for_operation,
    capabilities_of,
    load_manifest,
    manifest_from_dict,
)
from nnrp_conformance.planner import (
    UNCLAIMED_OPERATION_FALLBACK,
    PlanError,
    build_plan,
    substitute,
)
from nnrp_conformance.recipes import Recipe, load_recipes, recipe_level

CHAT = contract.OP_CHAT_COMPLETIONS_CREATE


def _op(name: str = CHAT, **flags: bool) -> dict[str, Any]:
    base = {"streaming": True, "non_streaming": True, "tool_calls": True, "cancellation": True}
    base.update(flags)
    return {"name": name, **base}


def _manifest(levels: list[int] | None = None, ops: list[dict] | None = None,
              extensions: list[dict] | None = None) -> Any:
    data: dict[str, Any] = {
        "adapter": "test-adapter", "profile": contract.PROFILE,
        "schema_version": contract.SCHEMA_VERSION,
        "compatibility_levels": levels or [1], "operations": ops or [_op()],
    }
    if extensions is not None:
        data["extensions"] = extensions
    return manifest_from_dict(data)


def _recipe(rid: str, *, status: str = "mandatory", caps: tuple[str, ...] = (
        "api.level1", "api.chat.completions.create"), operation: str = CHAT,
        body: dict | None = None, expect: dict | None = None, **extra: Any) -> Recipe:
    data = {
        "id": rid, "profile": contract.PROFILE, "schema_version": contract.SCHEMA_VERSION,
        "operation": operation, "status": status, "required_capabilities": list(caps),
        "request": {"body": body if body is not None else {"model": "${MODEL_ID}"}},
        "expect": expect or {"events": [], "terminal": "success"},
        **extra,
    }
    validation.check("recipe", data)
    return Recipe(id=rid, path=Path(f"<{rid}>"), data=data, status=status, operation=operation,
                  required_capabilities=caps, level=recipe_level(data))


def _selection(plan: Any) -> dict[str, str]:
    return {c.id: c.selection for c in plan.cases}


# --- capability tokens ------------------------------------------------------------------


def test_levels_imply_lower_levels_and_level2_implies_level1() -> None:
    m = _manifest(levels=[2], ops=[_op(), _op(contract.OP_RESPONSES_CREATE)])
    assert m.levels == (1, 2)
    assert {"api.level1", "api.level2"} <= m.capabilities
    assert "api.level3" not in m.capabilities


def test_flags_are_not_pooled_across_operations() -> None:
    doc = {"compatibility_levels": [2], "operations": [
        _op(CHAT, streaming=False, tool_calls=False, cancellation=False),
        _op(contract.OP_RESPONSES_CREATE)]}
    caps = capabilities_of(doc)
    assert contract.CAP_STREAMING not in caps and contract.CAP_TOOL_CALLS not in caps
    assert "api.responses.create.streaming" in caps
    assert contract.CAP_STREAMING in capabilities_for_operation(doc, contract.OP_RESPONSES_CREATE)


def test_extension_tokens() -> None:
    m = _manifest(extensions=[{"name": "vllm.diagnostics", "critical": False},
                              {"name": "acme.strict", "critical": True}])
    assert "api.extension.vllm.diagnostics" in m.capabilities
    assert "api.extension.vllm.diagnostics.critical" not in m.capabilities
    assert "api.extension.acme.strict.critical" in m.capabilities
    assert m.extensions == {"vllm.diagnostics": False, "acme.strict": True}


def test_manifest_errors_name_file_and_field(tmp_path: Path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("adapter: x\nprofile: openai-compatible\nschema_version: openai-compatible/1\n"
                 "compatibility_levels: []\noperations:\n  - {name: chat.completions.create}\n")
    with pytest.raises(ManifestError) as info:
        load_manifest(f)
    text = str(info.value)
    assert f"{f}: /compatibility_levels:" in text
    assert f"{f}: /operations/0/streaming: missing required field 'streaming'" in text
    with pytest.raises(ManifestError, match="no such file"):
        load_manifest(tmp_path / "missing.json")


# --- selection ----------------------------------------------------------------------------

STREAM = ("api.level1", "api.chat.completions.create", "api.streaming")


@pytest.mark.parametrize(
    ("op_flags", "status", "caps", "selection", "missing"),
    [
        ({}, "mandatory", STREAM, "selected", ()),
        ({"streaming": False}, "mandatory", STREAM, "selected", ("api.streaming",)),
        ({"streaming": False}, "optional", STREAM, "not_claimed", ()),
        ({}, "optional", (*STREAM, "api.tool_calls"), "selected", ()),
        ({"tool_calls": False}, "optional", (*STREAM, "api.tool_calls"), "not_claimed", ()),
        ({}, "experimental", STREAM, "informational", ()),
        ({}, "deprecated", STREAM, "informational", ()),
    ],
)
def test_selection_table(op_flags: dict, status: str, caps: tuple, selection: str,
                         missing: tuple) -> None:
    plan = build_plan([_recipe("r", status=status, caps=caps)], _manifest(ops=[_op(**op_flags)]))
    case = plan.cases[0]
    assert (case.selection, case.missing_capabilities) == (selection, missing)
    if selection != "selected":
        assert case.reason
    if missing:
        assert "capability.not-claimed" in case.reason


def test_level2_claim_keeps_every_mandatory_level1_recipe() -> None:
    recipes = load_recipes()
    m = _manifest(levels=[2], ops=[_op(streaming=False, non_streaming=False, tool_calls=False,
                                       cancellation=False), _op(contract.OP_RESPONSES_CREATE)])
    plan = build_plan(recipes, m, model_id="tiny")
    mandatory = [c for c in plan.cases if c.status == "mandatory" and c.level <= 2]
    assert mandatory and all(c.selected for c in mandatory)
    assert {c.level for c in mandatory} == {1, 2}
    # chat's optional cases need the chat flags the manifest denies; Level 3 is not claimed
    assert all(not c.selected for c in plan.cases
               if (c.status == "optional" and c.level == 1) or c.level == 3)
    assert plan.case("level2.responses.cancel.client").selected
    assert plan.case("level2.responses.timeout").selected


def test_recipes_above_the_run_level_are_not_claimed() -> None:
    r2 = _recipe("r2", caps=("api.level2", "api.responses.create"),
                 operation=contract.OP_RESPONSES_CREATE)
    plan = build_plan([r2, _recipe("r1")], _manifest())
    assert _selection(plan) == {"r2": "not_claimed", "r1": "selected"}
    assert "Level 2" in plan.cases[0].reason
    m2 = _manifest(levels=[2], ops=[_op(), _op(contract.OP_RESPONSES_CREATE)])
    assert _selection(build_plan([r2], m2))["r2"] == "selected"
    assert _selection(build_plan([r2], m2, level=1))["r2"] == "not_claimed"
    with pytest.raises(PlanError, match="claims only Level 1"):
        build_plan([r2], _manifest(), level=2)


def test_critical_extension_needs_explicit_selection() -> None:
    exts = [{"name": "acme.strict", "critical": True}, {"name": "vllm.diagnostics",
                                                         "critical": False}]
    m = _manifest(extensions=exts)
    crit = _recipe("crit", status="optional", caps=("api.level1", "api.extension.acme.strict"))
    crit_token = _recipe("crit2", status="optional",
                         caps=("api.level1", "api.extension.acme.strict.critical"))
    via_hint = _recipe("hint", status="optional", caps=("api.level1",))
    via_hint.data["request"]["nnrp"] = {"extensions": ["acme.strict"]}
    soft = _recipe("soft", status="optional", caps=("api.level1", "api.extension.vllm.diagnostics"))
    plan = build_plan([crit, crit_token, via_hint, soft], m)
    assert _selection(plan) == {"crit": "extension_not_selected", "crit2": "extension_not_selected",
                                "hint": "extension_not_selected", "soft": "selected"}
    assert "--nnrp-extension acme.strict" in plan.cases[0].reason
    plan = build_plan([crit, crit_token, via_hint, soft], m, extensions=["acme.strict"])
    assert set(_selection(plan).values()) == {"selected"}
    with pytest.raises(PlanError, match=r"not declared by the manifest: nope"):
        build_plan([crit], m, extensions=["nope"])


def test_mandatory_recipe_needing_an_extension_is_not_forced() -> None:
    m = _manifest()
    r = _recipe("ext", caps=("api.level1", "api.extension.vllm.diagnostics"))
    assert build_plan([r], m).cases[0].selection == "not_claimed"


# --- unsupported-operation probe ----------------------------------------------------------

UNSUPPORTED_EXPECT = {"events": [{"type": "response.error",
                                  "fields": {"error": {"code": "unsupported_operation"}}}],
                      "terminal": "error"}


def test_unsupported_operation_never_targets_a_claimed_operation() -> None:
    r = _recipe("u", caps=("api.level1",), operation="${UNSUPPORTED_OPERATION}",
                expect=UNSUPPORTED_EXPECT, parameters={"UNSUPPORTED_OPERATION": "responses.create"})
    assert build_plan([r], _manifest()).cases[0].operation == contract.OP_RESPONSES_CREATE
    m2 = _manifest(levels=[2], ops=[_op(), _op(contract.OP_RESPONSES_CREATE)])
    case = build_plan([r], m2).cases[0]
    assert case.operation == contract.OP_MODELS_LIST
    assert case.envelope["operation"] == contract.OP_MODELS_LIST
    assert case.notes
    everything = _manifest(levels=[3], ops=[_op(name) for name in contract.PROFILE_OPERATIONS])
    assert build_plan([r], everything).cases[0].operation == UNCLAIMED_OPERATION_FALLBACK
    # an explicit choice is the user's: kept
    explicit = build_plan([r], m2, params={"UNSUPPORTED_OPERATION": "embeddings.create"})
    assert explicit.cases[0].operation == contract.OP_EMBEDDINGS_CREATE


# --- substitution -------------------------------------------------------------------------


def test_substitute_whole_embedded_and_escaped() -> None:
    params = {"A": "x", "B": "y"}
    obj = {"w": "${A}", "e": "pre-${A}-${B}", "lit": "$${A}", "n": [1, {"k": "${B}"}],
           "num": 3, "none": None}
    assert substitute(obj, params, where="recipe r") == {
        "w": "x", "e": "pre-x-y", "lit": "${A}", "n": [1, {"k": "y"}], "num": 3, "none": None}


def test_unknown_variable_names_recipe_pointer_and_variable() -> None:
    r = _recipe("needs-var", body={"model": "${MODEL_ID}",
                                   "messages": [{"role": "user", "content": "hi ${WHO}"}]})
    with pytest.raises(PlanError) as info:
        build_plan([r], _manifest())
    text = str(info.value)
    assert "recipe needs-var (<needs-var>)" in text
    assert "/request/body/messages/0/content" in text
    assert "unknown parameter ${WHO}" in text and "--nnrp-param WHO=VALUE" in text
    ok = build_plan([r], _manifest(), params={"WHO": "you"})
    assert ok.cases[0].envelope["body"]["messages"][0]["content"] == "hi you"


def test_malformed_placeholder_is_an_error() -> None:
    with pytest.raises(PlanError, match="malformed placeholder"):
        substitute({"a": "${not valid}"}, {}, where="recipe r")


def test_bad_param_name() -> None:
    with pytest.raises(PlanError, match="parameter names"):
        build_plan([_recipe("r")], _manifest(), params={"bad-name": "1"})


# --- envelope and plan document ---------------------------------------------------------


def test_envelope_overrides_and_omit() -> None:
    r = _recipe("env", body={"model": "m"})
    r.data["request"]["nnrp"] = {"timeout_ms": 1000}
    r.data["request"]["envelope"] = {"schema_version": "openai-compatible/0", "omit": ["body"]}
    env = build_plan([r], _manifest()).cases[0].envelope
    assert env == {"schema_version": "openai-compatible/0", "operation": CHAT,
                   "request_id": "env", "nnrp": {"timeout_ms": 1000}}
    plain = build_plan([_recipe("p", body={"model": "m", "stream": True})], _manifest())
    env = plain.cases[0].envelope
    assert env["schema_version"] == contract.SCHEMA_VERSION and "nnrp" not in env
    assert validation.validate("envelope", env) == []
    assert plain.cases[0].streaming


def test_plan_document_is_schema_valid_and_lists_selected_cases_only() -> None:
    recipes = load_recipes()
    m = _manifest(ops=[_op(tool_calls=False)])
    plan = build_plan(recipes, m, model_id="tiny")
    doc = plan.to_json("out/results.json", "out/evidence")
    assert validation.validate("execution-plan", doc) == []
    listed = {c["id"] for c in doc["cases"]}
    assert listed == {c.id for c in plan.selected()}
    assert "level1.chat.tool-call-forced" not in listed
    assert doc["artifacts"] == {"results_path": "out/results.json", "evidence_dir": "out/evidence"}
    assert doc["model"] == "tiny"
    chat = next(e for e in doc["coverage_matrix"] if e["feature"] == CHAT)
    assert chat["summary"]["not_claimed_cases"] == 2
    assert sum(e["summary"]["selected_cases"] for e in doc["coverage_matrix"]) == len(listed)
    # the plan never shares structure with the recipes it came from
    before = copy.deepcopy(recipes[0].data)
    plan.cases[0].request["body"]["mutated"] = True
    assert recipes[0].data == before
