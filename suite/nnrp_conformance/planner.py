"""The execution plan: which recipes run against an endpoint, and with which exact request.

Owns: parameter resolution and ``${NAME}`` substitution, case selection from a manifest's
claims, the envelope each case sends, and the plan document (upstream execution-plan
format plus our optional fields). It never talks to an endpoint.

Parameter precedence (spec §8), highest first, for each recipe:

1. ``--nnrp-param <recipe id>:NAME=VALUE`` — an explicit value scoped to one recipe.
2. ``--nnrp-param NAME=VALUE`` — an explicit run-wide value; it overrides every recipe's
   ``parameters`` (so ``MODEL_ID`` given this way also replaces ``backend-error``: use
   ``--nnrp-model`` to choose the served model instead).
3. A recipe ``parameters`` value that differs from the profile's placeholder default
   (``contract.PLACEHOLDER_MODEL_ID``, ``"example-model"``) — e.g. the backend-error recipe's
   ``MODEL_ID = "backend-error"`` is the value that triggers its case and survives rule 4.
4. The model of the recipe's operation (``model_choice.py``: ``--nnrp-model OP=ID``, then
   ``--nnrp-model ID``, then the model the capability document or the manifest says serves
   the operation, else their first; the caller resolves them and passes ``models`` and the
   run-wide ``model_id``) — fills ``MODEL_ID`` where the recipe carries the placeholder
   default or no ``MODEL_ID`` at all, and the case carries the note when that model is a
   guess. A body ``model`` that an upstream recipe hard-codes as the placeholder literal
   (``"example-model"``, as ``chat-unsupported-operation.json`` does) is replaced as well.
5. The recipe's placeholder default itself (``example-model``).
6. Planner defaults: ``UNSUPPORTED_OPERATION`` = an operation the manifest does not claim.

A placeholder is ``${NAME}`` (NAME: letters, digits, ``_``), as a whole string (replaced by the
value) or embedded in a longer string (interpolated); ``$${NAME}`` is a literal ``${NAME}``.
An unknown NAME is a :class:`PlanError` naming the recipe, its file, the JSON pointer and the
variable. Substitution covers ``operation``, ``request`` (body, nnrp and our members) and
``expect``.

Selection (fixing upstream-notes §11.E):

* ``experimental``/``deprecated`` recipes are ``informational``: listed, never run.
* A recipe above the run's level (``level``, default the manifest's highest claimed level,
  which implies all lower levels) is ``not_claimed``.
* A recipe that depends on a **critical** extension (it requires
  ``api.extension.X.critical``, or ``api.extension.X``/``nnrp.extensions: [X]`` where the
  manifest marks X critical) is ``extension_not_selected`` unless X is passed in
  ``extensions``; selected extensions must be declared by the manifest.
* A Level 3 recipe of an operation the manifest does not list is ``not_claimed``: Level 3's
  operations are each optional (docs/levels.md#claims).
* A **mandatory** recipe of a claimed level that needs no extension is always ``selected``.
  If the manifest lacks one of its required capabilities (e.g. Level 1 claimed with
  ``streaming: false``) the case still runs, records ``missing_capabilities``, and the
  judgement fails it with rule ``capability.not-claimed`` whatever the endpoint does: Level 1
  requires what that recipe tests, and the run's evidence shows the endpoint's behaviour.
* Any other recipe (optional, or needing an extension) is ``selected`` when every required
  capability is claimed, else ``not_claimed`` (skipped with the reason, never failed).

Unsupported-operation probes: a recipe that expects ``error.code = unsupported_operation``
must not target an operation the manifest claims (an operation is claimed when it is listed,
or when it is the single operation of Level 1 or 2 and that level is claimed). If it does,
and the operation did not come from an explicit ``--nnrp-param``, the planner retargets it
to the first profile operation the manifest does not claim, or, when every profile
operation is claimed, to :data:`UNCLAIMED_OPERATION_FALLBACK`, a name outside the profile.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.manifest import Manifest
from nnrp_conformance.plan import Plan, PlanError, PlannedCase
from nnrp_conformance.recipes import SESSION_SAME, Recipe, field_alternatives
from nnrp_conformance.substitution import (
    PARAM_MODEL_ID,
    PARAM_UNSUPPORTED_OPERATION,
    resolve_parameters,
    substitute,
)

__all__ = [
    "SELECTIONS",
    "SEL_EXTENSION_NOT_SELECTED",
    "SEL_INFORMATIONAL",
    "SEL_NOT_CLAIMED",
    "SEL_SELECTED",
    "UNCLAIMED_OPERATION_FALLBACK",
    "Plan",
    "PlanError",
    "PlannedCase",
    "build_envelope",
    "build_plan",
    "resolve_parameters",
    "substitute",
    "unclaimed_operation",
]


# the selection values are the contract's (the plan and the case results carry them)
SEL_SELECTED = contract.SEL_SELECTED
SEL_NOT_CLAIMED = contract.SEL_NOT_CLAIMED
SEL_INFORMATIONAL = contract.SEL_INFORMATIONAL
SEL_EXTENSION_NOT_SELECTED = contract.SEL_EXTENSION_NOT_SELECTED
SELECTIONS = contract.SELECTIONS

#: the operation an unsupported-operation probe uses when the manifest claims every profile one
UNCLAIMED_OPERATION_FALLBACK = "conformance.unclaimed-operation"


_EXTENSION_TOKEN = re.compile(r"api\.extension\.(.+?)(\.critical)?\Z")


def _operation_claimed(manifest: Manifest, operation: str) -> bool:
    if operation == contract.OP_CAPABILITIES_GET or manifest.claims_operation(operation):
        return True
    level = contract.OPERATION_LEVELS.get(operation)
    # Levels 1 and 2 each consist of one operation, so claiming the level claims it.
    return level in (contract.LEVEL_CHAT, contract.LEVEL_RESPONSES) and level in manifest.levels


def unclaimed_operation(manifest: Manifest) -> str:
    """The operation an unsupported-operation probe targets (see module doc)."""
    for op in contract.PROFILE_OPERATIONS:
        if not _operation_claimed(manifest, op):
            return op
    return UNCLAIMED_OPERATION_FALLBACK


def _expects_unsupported_operation(expect: Mapping[str, Any]) -> bool:
    for entry in expect.get("events") or ():
        for fields in field_alternatives(entry) or ():
            err = fields.get("error") if isinstance(fields, dict) else None
            if isinstance(err, dict) and err.get("code") == contract.ERR_UNSUPPORTED_OPERATION:
                return True
    return False


def _required_extensions(recipe: Recipe, request: Mapping[str, Any],
                         manifest: Manifest) -> dict[str, bool]:
    """Extensions the recipe depends on, name -> critical."""
    out: dict[str, bool] = {}
    for token in recipe.required_capabilities:
        m = _EXTENSION_TOKEN.match(token)
        if m:
            name = m.group(1)
            out[name] = bool(m.group(2)) or manifest.extensions.get(name, False) or out.get(
                name, False)
    nnrp = request.get("nnrp") or {}
    for name in nnrp.get("extensions") or () if isinstance(nnrp, dict) else ():
        if isinstance(name, str):
            out[name] = out.get(name, False) or manifest.extensions.get(name, False)
    return out


def build_envelope(operation: str, request: Mapping[str, Any], request_id: str) -> dict[str, Any]:
    """The envelope a case sends: profile fields, body, nnrp, then ``request.envelope``
    overrides (verbatim values; ``omit`` removes fields)."""
    env: dict[str, Any] = {
        "schema_version": contract.SCHEMA_VERSION,
        "operation": operation,
        "request_id": request_id,
        "body": copy.deepcopy(request.get("body", {})),
    }
    if "nnrp" in request:
        env["nnrp"] = copy.deepcopy(request["nnrp"])
    overrides = request.get("envelope") or {}
    for key, value in overrides.items():
        if key != "omit":
            env[key] = copy.deepcopy(value)
    for key in overrides.get("omit") or ():
        env.pop(key, None)
    return env


def _plan_case(recipe: Recipe, manifest: Manifest, *, model_id: str | None,
               params: Mapping[str, str], extensions: frozenset[str], run_level: int,
               probe_operation: str, models: Mapping[str, str],
               model_notes: Mapping[str, str]) -> PlannedCase:
    where = f"recipe {recipe.id} ({recipe.path})"
    # the model of the recipe's own operation (model_choice.py), else the run-wide one
    model_id = models.get(str(recipe.data.get("operation")), None) or model_id
    values, explicit = resolve_parameters(
        recipe, model_id=model_id, params=params,
        defaults={PARAM_UNSUPPORTED_OPERATION: probe_operation})
    data = recipe.data
    operation = substitute(data["operation"], values, where=where, pointer="/operation")
    request = substitute(data["request"], values, where=where, pointer="/request")
    expect = substitute(data["expect"], values, where=where, pointer="/expect")
    required = tuple(substitute(list(recipe.required_capabilities), values, where=where,
                                pointer="/required_capabilities"))
    notes: list[str] = []
    if PARAM_MODEL_ID not in explicit and operation in model_notes \
            and request.get("body", {}).get("model") == model_id:
        notes.append(model_notes[operation])

    raw_model = data["request"].get("body", {}).get("model")
    if model_id and raw_model == contract.PLACEHOLDER_MODEL_ID \
            and PARAM_MODEL_ID not in explicit:
        request["body"]["model"] = model_id
        notes.append(f"hard-coded body.model {raw_model!r} replaced by the run's model "
                     f"{model_id!r}")

    if _expects_unsupported_operation(expect) and _operation_claimed(manifest, operation) \
            and not (PARAM_UNSUPPORTED_OPERATION in explicit
                     and PARAM_UNSUPPORTED_OPERATION in data["operation"]):
        notes.append(f"operation {operation!r} is claimed by the manifest; the "
                     f"unsupported-operation probe targets {probe_operation!r} instead")
        operation = probe_operation

    case_exts = _required_extensions(recipe, request, manifest)
    caps = manifest.capabilities_for(operation)
    missing = tuple(c for c in required if c not in caps)
    status = recipe.status
    selection, reason = SEL_SELECTED, None
    critical_unselected = sorted(n for n, crit in case_exts.items()
                                 if crit and n not in extensions)
    if status in (contract.STATUS_EXPERIMENTAL, contract.STATUS_DEPRECATED):
        selection, reason = SEL_INFORMATIONAL, f"{status} recipe: informational, not run"
    elif critical_unselected:
        selection = SEL_EXTENSION_NOT_SELECTED
        reason = ("critical extension needs explicit selection: "
                  + ", ".join(f"{n} (--nnrp-extension {n})" for n in critical_unselected))
    elif recipe.level > run_level:
        selection = SEL_NOT_CLAIMED
        reason = f"Level {recipe.level} recipe; the run covers Level {run_level}"
    elif recipe.level == contract.LEVEL_DISCOVERY \
            and contract.OPERATION_LEVELS.get(operation) == contract.LEVEL_DISCOVERY \
            and not _operation_claimed(manifest, operation):
        selection = SEL_NOT_CLAIMED
        reason = (f"Level {recipe.level}'s operations are each optional; the manifest does "
                  f"not list {operation}")
    elif status == contract.STATUS_MANDATORY and not case_exts:
        if missing:
            reason = (f"mandatory for Level {recipe.level}, which the manifest claims, but the "
                      f"manifest does not claim {', '.join(missing)}: the case runs and fails "
                      f"with capability.not-claimed")
    elif missing:
        selection, reason = SEL_NOT_CLAIMED, f"not claimed: {', '.join(missing)}"

    return dataclasses.replace(PlannedCase(
        id=recipe.id,
        recipe=recipe,
        status=status,
        selection=selection,
        reason=reason,
        operation=operation,
        required_capabilities=required,
        level=recipe.level,
        request=request,
        expect=expect,
        envelope=build_envelope(operation, request, recipe.id),
        parameters=values,
        checks=recipe.checks,
        timeout_ms=recipe.timeout_ms,
        beyond_profile=recipe.beyond_profile,
        missing_capabilities=missing if selection == SEL_SELECTED else (),
        extensions=case_exts,
        notes=tuple(notes),
    ), companions=_companions(recipe, manifest, model_id=model_id, params=params,
                              extensions=extensions, run_level=run_level,
                              probe_operation=probe_operation, models=models,
                              model_notes=model_notes))


def _companions(recipe: Recipe, manifest: Manifest, **planning: Any) -> tuple[PlannedCase, ...]:
    """A concurrency recipe's other operations, each planned as the recipe with its own
    ``request``/``expect`` (so parameters, selection and the envelope follow the same rules;
    its request_id, the case id, is ``<recipe id>/<name>``)."""
    out: list[PlannedCase] = []
    for entry in recipe.concurrent:
        data = {k: v for k, v in recipe.data.items() if k != "concurrent"}
        data.update(id=f"{recipe.id}/{entry['name']}", request=entry["request"],
                    expect=entry["expect"], operation=entry.get("operation", data["operation"]))
        member = dataclasses.replace(recipe, id=data["id"], data=data,
                                     operation=data["operation"])
        out.append(dataclasses.replace(_plan_case(member, manifest, **planning),
                                       name=entry["name"],
                                       session=entry.get("session", SESSION_SAME)))
    return tuple(out)


def build_plan(recipes: Sequence[Recipe], manifest: Manifest, *, model_id: str | None = None,
               params: Mapping[str, str] | None = None, extensions: Iterable[str] = (),
               level: int | None = None, models: Mapping[str, str] | None = None,
               model_notes: Mapping[str, str] | None = None) -> Plan:
    """Plan every recipe against ``manifest`` (rules: module doc). Cases keep recipe order.
    ``models``: the model of each operation (``model_choice.py``; ``model_id`` for the
    others); ``model_notes``: what each case of an operation says about a guessed model."""
    selected_exts = frozenset(extensions)
    undeclared = sorted(selected_exts - set(manifest.extensions))
    if undeclared:
        declared = ", ".join(sorted(manifest.extensions)) or "none"
        raise PlanError(f"selected extension(s) not declared by the manifest: "
                        f"{', '.join(undeclared)} (declared: {declared})")
    run_level = manifest.max_level if level is None else level
    if run_level not in contract.LEVELS:
        raise PlanError(f"level {run_level} is not a profile level {list(contract.LEVELS)}")
    if run_level > manifest.max_level:
        raise PlanError(f"the run targets Level {run_level} but the manifest claims only "
                        f"Level {manifest.max_level}")
    probe = unclaimed_operation(manifest)
    cases = [
        _plan_case(r, manifest, model_id=model_id, params=params or {},
                   extensions=selected_exts, run_level=run_level, probe_operation=probe,
                   models=models or {}, model_notes=model_notes or {})
        for r in recipes
    ]
    return Plan(
        profile=contract.PROFILE,
        schema_version=contract.SCHEMA_VERSION,
        adapter=manifest.adapter,
        cases=cases,
        parameters=dict(params or {}),
        model=model_id,
        models={op: m for op, m in (models or {}).items() if m != model_id},
        level=run_level,
        extensions=tuple(sorted(selected_exts)),
    )
