"""A generated request as a recipe: the project's recipe format (``recipe.schema.json``),
so a generated case is planned, run, judged and reported exactly as a recipe is, and a
failure is saved as a readable YAML file a provider can add to its own recipes.

The recipe's ``generated`` member says where the case came from (family, seed, index,
mutation); the judge reads its family (``checks/generated.py``). Its body names the model
``${MODEL_ID}``, so a saved file runs against any endpoint.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from nnrp_conformance import contract, validation
from nnrp_conformance.documents import dump_yaml, load_yaml
from nnrp_conformance.generate.envelopes import AS_RECIPES, ENVELOPES, request_members
from nnrp_conformance.generate.mutations import MUTATIONS, mutate
from nnrp_conformance.generate.strategies import FAMILY_INVALID, FAMILY_VALID, Draft
from nnrp_conformance.recipes import SESSION_SAME, Recipe, recipe_level

__all__ = ["SHORT_NAMES", "case_id_of", "recipe_data", "recipe_of", "save_recipe"]

#: the operation's part of a generated case id
SHORT_NAMES = {
    contract.OP_CHAT_COMPLETIONS_CREATE: "chat",
    contract.OP_RESPONSES_CREATE: "responses",
    contract.OP_EMBEDDINGS_CREATE: "embeddings",
}
_MODEL = "${MODEL_ID}"
# each expectation names its authority (authority.py): what the profile makes mandatory
# (a valid request served, an invalid one not) is strict; the response.error body and its
# family are this project's recommendations, the terminal after a cancel a reading
_EXPECT_SUCCESS: dict[str, Any] = {"events": [], "terminal": contract.TERMINAL_SUCCESS,
                                   "terminal_rule": "expect.success"}
_EXPECT_INVALID: dict[str, Any] = {
    "events": [{"type": contract.EV_ERROR, "min_count": 1, "rule": "error.body-missing",
                "fields": {"error": {"type": "invalid_request_error"}},
                "fields_rule": "error.family"}],
    "terminal": contract.TERMINAL_ERROR,
    "terminal_rule": "expect.invalid-request",
}
_EXPECT_CANCELLED: dict[str, Any] = {"events": [], "terminal": contract.TERMINAL_CANCELLED,
                                     "terminal_rule": "cancel.terminal"}


#: a chat stream that asks for usage (``stream_options.include_usage``) carries a response.usage:
#: the same expectation, under the same rule, as the chat-usage-shape recipe's (a
#: recommendation: the profile's §7 places a usage summary, "Final or near-final
#: PARTIAL_RESULT event", but no normative text says when one is sent). Not asked: not judged
_EXPECT_USAGE: dict[str, Any] = {"type": contract.EV_USAGE, "min_count": 1,
                                 "rule": "usage.include-usage"}


def _success(operation: str, body: dict[str, Any]) -> dict[str, Any]:
    """What a valid request's answer is expected to hold: a success, and a usage when a chat
    stream asks for one."""
    expect = copy.deepcopy(_EXPECT_SUCCESS)
    options = body.get("stream_options")
    if operation == contract.OP_CHAT_COMPLETIONS_CREATE and body.get("stream") is True \
            and isinstance(options, dict) and options.get("include_usage") is True:
        expect["events"].append(copy.deepcopy(_EXPECT_USAGE))
    return expect


def case_id_of(family: str, operation: str, seed: int, index: int) -> str:
    """The id of the generated case ``index`` of ``seed``."""
    return f"generated.{family}.{SHORT_NAMES[operation]}.{seed}-{index:04d}"


def _with_placeholder(body: dict[str, Any], model: str) -> dict[str, Any]:
    return {k: _MODEL if k == "model" and v == model else v for k, v in body.items()}


def _capabilities(draft: Draft) -> list[str]:
    level = contract.OPERATION_LEVELS[draft.operation]
    caps = [contract.level_capability(level), contract.operation_capability(draft.operation)]
    if draft.body.get("stream") is True:
        caps.append("api.streaming")
    if draft.body.get("tools") and draft.mutation is None:
        caps.append("api.tool_calls")
    if draft.cancel_after is not None:
        caps.append("api.cancellation")
    return caps


def recipe_data(draft: Draft, *, case_id: str, seed: int, index: int,
                model: str, note: str | None = None) -> dict[str, Any]:
    """The recipe document of ``draft`` (validated: a generated recipe is always valid);
    ``note``: how its shrinking went, when the reader must know (it ends the description)."""
    request: dict[str, Any] = {"body": _with_placeholder(draft.body, model)}
    expect = _success(draft.operation, draft.body)
    generated: dict[str, Any] = {"family": draft.family, "seed": seed, "index": index}
    what = f"a {draft.family} {draft.operation} request"
    data: dict[str, Any] = {}
    if draft.family == FAMILY_INVALID and draft.mutation is not None:
        mutation = MUTATIONS[draft.mutation]
        body, envelope = mutate(draft.mutation, draft.body)
        request = {"body": _with_placeholder(body, model)}
        if envelope:
            request["envelope"] = envelope
        expect = copy.deepcopy(_EXPECT_INVALID)
        if mutation.event_rule is not None:
            expect["events"][0]["rule"] = mutation.event_rule
        if mutation.terminal_rule is not None:
            expect["terminal_rule"] = mutation.terminal_rule
        if not mutation.strict:  # OpenAI's request semantics: every element its reading
            expect["terminal_rule"] = expect["events"][0]["rule"] = \
                "generated.invalid-accepted"
        generated["mutation"] = draft.mutation
        what = f"an invalid {draft.operation} request: {mutation.description}"
        if not mutation.strict:
            data["beyond_profile"] = {
                "rule": "generated.invalid-accepted",
                "reading": f"{mutation.description}: invalid under OpenAI's request semantics, "
                           "which the profile adopts without fixing how an endpoint validates "
                           "them; answering it is shown, not failed"}
    if draft.envelope is not None and draft.family != FAMILY_INVALID:
        request.update(request_members(draft.envelope))
        generated["envelope"] = draft.envelope
        if draft.envelope != AS_RECIPES:
            what += f", in an envelope with {ENVELOPES[draft.envelope].description}"
    if draft.repeats is not None:
        first, change = draft.repeats
        generated["repeats"] = {"case": case_id_of(FAMILY_VALID, draft.operation, seed, first),
                                "change": change}
        what += f" repeating case {first}" + ("" if change == "none" else f", {change}")
    if draft.cancel_after is not None:
        request["cancel"] = {"after_events": draft.cancel_after}
        expect = copy.deepcopy(_EXPECT_CANCELLED)
        what += f", cancelled by the client after {draft.cancel_after} event(s)"
    out: dict[str, Any] = {
        "id": case_id,
        "profile": contract.PROFILE,
        "schema_version": contract.SCHEMA_VERSION,
        "status": contract.STATUS_OPTIONAL,
        "rule": f"generated ({draft.family}): docs/generation.md#oracles",
        "description": f"Generated by --nnrp-generate (seed {seed}, case {index}): {what}"
                       + _companions_said(draft.companions) + "."
                       + (f" {note[:1].upper()}{note[1:]}." if note else ""),
        "operation": draft.operation,
        "required_capabilities": _capabilities(draft),
        "parameters": {"MODEL_ID": contract.PLACEHOLDER_MODEL_ID},
        "generated": generated,
        "request": request,
        "expect": expect,
        **data,
    }
    if draft.companions:
        out["concurrent"] = [
            {"name": f"op-{i + 1}", "operation": c.operation,
             **({"session": c.session} if c.session != SESSION_SAME else {}),
             "request": {"body": _with_placeholder(c.body, model)},
             "expect": _success(c.operation, c.body)} for i, c in enumerate(draft.companions)]
    validation.check("recipe", out)
    return out


def _companions_said(companions: tuple[Draft, ...]) -> str:
    """What a recipe's description says of its companions."""
    if not companions:
        return ""
    elsewhere = sum(c.session != SESSION_SAME for c in companions)
    return f", with {len(companions)} more in flight on the session" if not elsewhere else \
        f", with {len(companions)} more in flight ({elsewhere} on another session)"


def recipe_of(data: dict[str, Any], path: Path) -> Recipe:
    """The :class:`Recipe` of a generated document (``path``: where it is, or would be, saved)."""
    return Recipe(id=data["id"], path=path, data=data, status=data["status"],
                  operation=data["operation"],
                  required_capabilities=tuple(data["required_capabilities"]),
                  level=recipe_level(data), rule=data.get("rule"),
                  description=data.get("description"))


def save_recipe(data: dict[str, Any], directory: Path) -> Path:
    """Write ``data`` as ``<id>.yaml`` in ``directory`` (as JSON, ``<id>.json``, when YAML
    would not read back the same document: a control character YAML cannot keep)."""
    directory.mkdir(parents=True, exist_ok=True)
    text = dump_yaml(data, sort_keys=False, allow_unicode=True, width=100)
    path = directory / f"{data['id']}.yaml"
    if load_yaml(text) != data:
        text, path = json.dumps(data, ensure_ascii=False, indent=2) + "\n", \
            directory / f"{data['id']}.json"
    path.write_text(text, encoding="utf-8")
    return path
