"""Parameter precedence (spec §8) on the upstream-format recipe and manifest files."""

from __future__ import annotations

from pathlib import Path

import pytest

from nnrp_conformance import contract
from nnrp_conformance.manifest import load_manifest
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import load_recipes

UPSTREAM = Path(__file__).parent / "data" / "upstream"


@pytest.fixture(scope="module")
def recipes() -> list:
    return load_recipes([UPSTREAM / f for f in sorted(p.name for p in UPSTREAM.glob("chat-*"))])


@pytest.fixture(scope="module")
def manifest():
    return load_manifest(UPSTREAM / "adapter-capabilities.json")


def _models(plan) -> dict[str, str]:
    return {c.id.rsplit(".", 1)[-1]: c.envelope["body"].get("model") for c in plan.cases}


def test_all_upstream_recipes_selected_for_the_upstream_manifest(recipes, manifest) -> None:
    plan = build_plan(recipes, manifest, model_id="served")
    assert len(plan.cases) == 8
    assert all(c.selected for c in plan.cases)
    assert all(c.level == contract.LEVEL_CHAT for c in plan.cases)


def test_run_model_fills_placeholders_but_backend_error_survives(recipes, manifest) -> None:
    models = _models(build_plan(recipes, manifest, model_id="served"))
    assert models.pop("backend-error") == "backend-error"
    # including unsupported-operation's hard-coded placeholder literal
    assert set(models.values()) == {"served"}


def test_without_a_run_model_the_placeholder_default_is_sent(recipes, manifest) -> None:
    models = _models(build_plan(recipes, manifest))
    assert models.pop("backend-error") == "backend-error"
    assert set(models.values()) == {contract.PLACEHOLDER_MODEL_ID}


def test_explicit_param_overrides_every_recipe_value(recipes, manifest) -> None:
    models = _models(build_plan(recipes, manifest, model_id="served",
                                params={"MODEL_ID": "explicit"}))
    assert models["backend-error"] == "explicit"
    assert models["streaming-text"] == "explicit"
    # a hard-coded literal is not a placeholder: the explicit MODEL_ID does not touch it
    assert models["unsupported-operation"] == contract.PLACEHOLDER_MODEL_ID


def test_recipe_scoped_param_beats_run_wide_param(recipes, manifest) -> None:
    plan = build_plan(recipes, manifest, model_id="served", params={
        "MODEL_ID": "explicit",
        "openai-compatible.chat.backend-error:MODEL_ID": "backend-error"})
    models = _models(plan)
    assert models["backend-error"] == "backend-error"
    assert models["usage"] == "explicit"


def test_other_parameters_and_unchanged_request_shape(recipes, manifest) -> None:
    plan = build_plan(recipes, manifest, model_id="served")
    streaming = plan.case("openai-compatible.chat.streaming-text")
    assert streaming.request == {"body": {"model": "served", "messages": [
        {"role": "user", "content": "Say hello."}], "stream": True}}
    cancel = plan.case("openai-compatible.chat.cancellation")
    assert cancel.envelope["nnrp"] == {"cancel_after_events": 1}
    # upstream calls the hint caller-driven: the client cancels too (issue 27), one event
    # past the hint, so an endpoint that acts on it never races the client's cancel (issue 36)
    assert cancel.cancel_after_events == 2
    assert plan.case("openai-compatible.chat.unsupported-operation").operation == \
        contract.OP_RESPONSES_CREATE
