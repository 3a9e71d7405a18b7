"""Conditions (a) and (b): Level 1 is claimed and every Level 1 recipe the planner selects
for the manifest was selected on each gated version, and every selected recipe passed."""

from __future__ import annotations

from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.gate.verdicts import (
    GateInputs,
    GateVerdict,
    _diag,
    _failure_text,
    _gated,
    _results_by_id,
    _verdict,
)
from nnrp_conformance.planner import PlanError, build_plan


def _expected_level1(inputs: GateInputs, failures: list[str]) -> tuple[list[str], list[str]]:
    """(mandatory Level 1 ids, claimed optional Level 1 ids) the planner selects."""
    if inputs.recipes is None:
        failures.append(f"cannot load the recipes: {inputs.recipes_problem}")
        return [], []
    if inputs.manifest is None:
        return [], []
    level1 = [r for r in inputs.recipes if r.level == contract.LEVEL_CHAT]
    if not level1:
        failures.append("the recipe set has no Level 1 recipe")
        return [], []
    try:
        plan = build_plan(level1, inputs.manifest, level=contract.LEVEL_CHAT)
    except PlanError as exc:
        failures.append(f"cannot plan the Level 1 recipes for the manifest: {exc}")
        return [], []
    mandatory = [c.id for c in plan.cases if c.status == contract.STATUS_MANDATORY]
    optional = [
        c.id for c in plan.cases if c.selected and c.status != contract.STATUS_MANDATORY
    ]
    return mandatory, optional


def _manifest_label(inputs: GateInputs) -> str:
    return inputs.evidence.rel(inputs.manifest_path) if inputs.manifest_path else ""


def _manifest_failures(inputs: GateInputs) -> list[str]:
    m = inputs.manifest
    if m is None:
        return [f"no usable manifest: {inputs.manifest_problem}"]
    where = _manifest_label(inputs) or "manifest"
    out = []
    if contract.LEVEL_CHAT not in m.claimed_levels:
        out.append(
            f"{where}: compatibility_levels {list(m.claimed_levels)} does not claim Level 1"
        )
    flags = m.operations.get(contract.OP_CHAT_COMPLETIONS_CREATE)
    if flags is None:
        out.append(f"{where}: operations does not list {contract.OP_CHAT_COMPLETIONS_CREATE}")
    else:
        out += [
            f"{where}: {contract.OP_CHAT_COMPLETIONS_CREATE}.{flag} is not true (Level 1 needs it)"
            for flag in ("streaming", "non_streaming")
            if not flags.get(flag)
        ]
    return out


def level1_implemented(inputs: GateInputs) -> GateVerdict:
    req = inputs.requirements
    failures = _manifest_failures(inputs)
    evidence = [_manifest_label(inputs)] if inputs.manifest_path else []
    mandatory, optional = _expected_level1(inputs, failures)
    details: dict[str, Any] = {"mandatory": mandatory, "claimed_optional": optional}
    for role, version, ve in _gated(inputs):
        if ve is None:
            failures.append(f"no evidence for the {role} ({req.target} {version}): no execution plan")
            continue
        plan = ve.plan
        if not plan.ok:
            failures += [f"{req.target} {version} execution plan: {p}" for p in plan.problems]
            continue
        evidence.append(plan.label)
        selected = {c["id"] for c in plan.data["cases"]}
        if inputs.manifest is not None and plan.data["adapter"] != inputs.manifest.adapter:
            failures.append(
                f"{plan.label}: adapter {plan.data['adapter']!r} is not the manifest's "
                f"{inputs.manifest.adapter!r}"
            )
        results = _results_by_id(ve.case_results)
        for case_id in mandatory + optional:
            kind = "mandatory" if case_id in mandatory else "claimed optional"
            if case_id not in selected:
                failures.append(
                    f"{req.target} {version}: Level 1 {kind} recipe {case_id} was not selected "
                    f"({plan.path.name} does not list it)"
                )
                continue
            selection = _diag(results.get(case_id, {})).get("selection")
            if selection not in (None, contract.SEL_SELECTED):
                failures.append(
                    f"{req.target} {version}: Level 1 {kind} recipe {case_id} is recorded as "
                    f"{selection!r} in {ve.case_results.path.name}"
                )
    ok = f"Level 1 claimed; {len(mandatory)} mandatory and {len(optional)} claimed optional " \
         f"Level 1 recipes selected for every gated {req.target} version"
    return _verdict(contract.GATE_LEVEL1_IMPLEMENTED, failures, ok, evidence=evidence,
                    details=details)


def _row(case: dict[str, Any], result: dict[str, Any] | None) -> dict[str, Any]:
    row: dict[str, Any] = {"id": case["id"], "status": case.get("status", "mandatory")}
    if case.get("level") is not None:
        row["level"] = case["level"]
    if case.get("rule"):
        row["rule"] = case["rule"]
    if result is None:
        row["outcome"] = contract.OUTCOME_FAILED
        row["message"] = "no result recorded"
        return row
    row["outcome"] = result["outcome"]
    if _diag(result).get("verdict") == "non-strict":
        # The release gate is strict: the reference adapter follows this project's
        # recommendations too (docs/verdicts.md#levels).
        row["outcome"] = contract.OUTCOME_FAILED
        notes = [f"[{f.get('rule')}] {f.get('message')}" for f in _diag(result).get("findings")
                 or () if isinstance(f, dict) and f.get("level") == "non-strict"]
        row["message"] = "non-strict (the release gate is strict): " + "; ".join(notes)[:2000]
    row["terminal"] = result["terminal"]
    duration = _diag(result).get("duration_s")
    if isinstance(duration, int | float) and not isinstance(duration, bool) and duration >= 0:
        row["duration_ms"] = round(duration * 1000.0, 3)
    if result["outcome"] != contract.OUTCOME_PASSED:
        row["message"] = _failure_text(result)
    return row


def recipes_pass(inputs: GateInputs) -> GateVerdict:
    req = inputs.requirements
    failures: list[str] = []
    evidence: list[str] = []
    tables: dict[str, list[dict[str, Any]]] = {}
    adapter = inputs.manifest.adapter if inputs.manifest else None
    for role, version, ve in _gated(inputs):
        if ve is None:
            failures.append(f"no case results for the {role} ({req.target} {version})")
            continue
        doc = ve.case_results
        if not doc.ok:
            failures += [f"{req.target} {version} case results: {p}" for p in doc.problems]
            continue
        evidence.append(doc.label)
        if adapter is not None and doc.data["adapter"] != adapter:
            failures.append(f"{doc.label}: adapter {doc.data['adapter']!r} is not {adapter!r}")
        if not ve.plan.ok:
            failures.append(f"{req.target} {version}: no valid execution plan, the selected recipes "
                            f"are unknown ({ve.plan.problems[0]})")
            continue
        results = _results_by_id(doc)
        rows = []
        for case in ve.plan.data["cases"]:
            row = _row(case, results.get(case["id"]))
            rows.append(row)
            if row["outcome"] != contract.OUTCOME_PASSED:
                failures.append(
                    f"{req.target} {version}: {row['status']} recipe {case['id']} {row['outcome']}: "
                    f"{row.get('message', '')}"
                )
        tables[version] = rows
    count = sum(len(rows) for rows in tables.values())
    ok = f"all {count} selected recipe runs passed across {len(tables)} {req.target} version(s)"
    return _verdict(contract.GATE_RECIPES_PASS, failures, ok, evidence=evidence,
                    details={"versions": tables})
