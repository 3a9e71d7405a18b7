"""A model per operation (issue 36 item 3): ``--nnrp-model [OP=]ID``, a model entry's
``operations`` in the capability document and the manifest, the note when the run's model
for an operation is a guess, and ``error.about-input`` for an invalid-input case answered
with an error about the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import contract, validation
from nnrp_conformance.checks import Observation, judge
from nnrp_conformance.manifest import manifest_from_dict
from nnrp_conformance.model_choice import choose_models, parse_model_options
from nnrp_conformance.options import SetupError
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import load_recipes

CHAT, EMB = contract.OP_CHAT_COMPLETIONS_CREATE, contract.OP_EMBEDDINGS_CREATE
OPS = contract.PROFILE_OPERATIONS
REPO = Path(__file__).resolve().parents[2]
LEVELS_MANIFEST = REPO / "docs" / "examples" / "minimal_endpoint" / "manifest-levels.json"


def test_the_option_takes_a_run_wide_model_and_one_per_operation() -> None:
    assert parse_model_options(None) == (None, {})
    assert parse_model_options("chat-m") == ("chat-m", {})
    assert parse_model_options(["chat-m", f"{EMB}=emb-m"]) == ("chat-m", {EMB: "emb-m"})
    # a model id may contain '=' where the part before it is no operation name
    assert parse_model_options(["org/model=v2"]) == ("org/model=v2", {})
    for bad, says in ((["embedding.make=x"], "not an operation"), ([f"{EMB}="], "no model id"),
                      (["a", "b"], "two run-wide models"), ([""], "needs a model id")):
        with pytest.raises(SetupError, match=says):
            parse_model_options(bad)


def doc(*models: dict[str, Any]) -> dict[str, Any]:
    return {"models": list(models)}


def test_the_documents_say_which_model_serves_which_operation() -> None:
    caps = doc({"id": "chat-m", "operations": [CHAT]}, {"id": "emb-m", "operations": [EMB]})
    choice = choose_models(OPS, run_wide=None, per_operation={}, capabilities=caps,
                           manifest=None)
    assert choice.by_operation[CHAT] == "chat-m" and choice.by_operation[EMB] == "emb-m"
    assert choice.default == "chat-m"
    # an operation no model states: the first open model (none here), said on its cases
    assert choice.by_operation[contract.OP_RESPONSES_CREATE] == "chat-m"
    assert "does not say which of its models serves responses.create" in \
        choice.notes[contract.OP_RESPONSES_CREATE]
    assert EMB not in choice.notes
    # the manifest says it when the capability document does not
    choice = choose_models(OPS, run_wide=None, per_operation={}, capabilities=doc(
        {"id": "chat-m"}, {"id": "emb-m"}), manifest=doc({"id": "emb-m", "operations": [EMB]}))
    assert choice.by_operation[EMB] == "emb-m"


def test_the_first_of_several_models_is_a_guess_that_is_said_and_options_win() -> None:
    caps = doc({"id": "chat-m"}, {"id": "emb-m"})
    choice = choose_models(OPS, run_wide=None, per_operation={}, capabilities=caps,
                           manifest=None)
    assert choice.by_operation[EMB] == "chat-m"
    assert f"--nnrp-model {EMB}=ID" in choice.notes[EMB]
    # one model and nothing stated: no guess to speak of
    assert choose_models(OPS, run_wide=None, per_operation={}, capabilities=doc(
        {"id": "only"}), manifest=None).notes == {}
    choice = choose_models(OPS, run_wide="run-m", per_operation={EMB: "emb-m"},
                           capabilities=caps, manifest=None)
    assert choice.by_operation == {**dict.fromkeys(OPS, "run-m"), EMB: "emb-m"}
    assert choice.notes == {}


def test_each_recipe_runs_against_its_operations_model_and_says_a_guess() -> None:
    manifest = manifest_from_dict(json.loads(LEVELS_MANIFEST.read_text()))
    recipes = load_recipes(None)
    choice = choose_models(OPS, run_wide=None, per_operation={},
                           capabilities=doc({"id": "chat-m"}, {"id": "emb-m"}), manifest=None)
    plan = build_plan(recipes, manifest, model_id=choice.default, models=choice.by_operation,
                      model_notes=choice.notes)
    emb = plan.case("level3.embeddings.shape")
    assert emb.request["body"]["model"] == "chat-m"
    assert any("does not say which of its models serves embeddings.create" in n
               for n in emb.notes)
    stated = choose_models(OPS, run_wide=None, per_operation={EMB: "emb-m"},
                           capabilities=doc({"id": "chat-m"}, {"id": "emb-m"}), manifest=None)
    plan = build_plan(recipes, manifest, model_id=stated.default, models=stated.by_operation,
                      model_notes=stated.notes)
    assert plan.case("level3.embeddings.shape").request["body"]["model"] == "emb-m"
    assert plan.case("level1.chat.streaming-text").request["body"]["model"] == "chat-m"
    # the backend-error recipes keep the model nobody serves
    assert plan.case("level1.chat.backend-error").request["body"]["model"] == "backend-error"
    document = plan.to_json()
    assert document["models"] == {EMB: "emb-m"}
    validation.check("execution-plan", document)
    validation.check("capability-document", {
        "profile": contract.PROFILE, "schema_version": contract.SCHEMA_VERSION,
        "compatibility_levels": [1, 3], "operations": [
            {"name": CHAT, "streaming": True, "non_streaming": True, "tool_calls": False}],
        "models": [{"id": "emb-m", "operations": [EMB]}]})


def _invalid_input_case(model: str = "chat-m") -> Any:
    manifest = manifest_from_dict(json.loads(LEVELS_MANIFEST.read_text()))
    plan = build_plan(load_recipes(None), manifest, model_id=model)
    return plan.case("level3.embeddings.invalid-input")


@pytest.mark.parametrize(("error", "about_model"), [
    ({"type": "invalid_request_error", "code": "invalid_request",
      "message": "input must be a string or an array", "param": "input"}, False),
    ({"type": "invalid_request_error", "code": "unsupported_model",
      "message": "The requested model is not available."}, True),
    ({"type": "invalid_request_error", "code": "invalid_request",
      "message": "model 'chat-m' does not support embeddings"}, True),
    ({"type": "invalid_request_error", "code": "invalid_request", "message": "bad",
      "param": "model"}, True),
])
def test_an_invalid_input_case_passes_cleanly_only_on_an_error_about_the_input(
        error: dict[str, Any], about_model: bool) -> None:
    case = _invalid_input_case()
    obs = Observation()
    obs.terminal_kind = contract.TERMINAL_ERROR
    obs.terminal_event = {"type": "response.error", "error": error}
    verdict = judge(case, obs)
    found = [f for f in verdict.findings if f.rule == "error.about-input"]
    assert bool(found) == about_model
    if about_model:
        assert found[0].level == "non-strict"
        assert judge(case, obs, strict=True).outcome == contract.OUTCOME_FAILED
