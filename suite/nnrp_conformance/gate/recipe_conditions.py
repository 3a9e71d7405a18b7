"""Conditions (a) and (b): Level 1 is claimed; on every declared line, each gated version (the
lower bound and the current line) claims exactly the levels the release policy declares for
it, and every recipe of each claimed level that the planner selects for its manifest was
selected (the per-level list is in the details); and every selected recipe passed."""

from __future__ import annotations

from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.gate.evidence import VersionEvidence
from nnrp_conformance.gate.verdicts import (
    Gated,
    GateInputs,
    GateVerdict,
    _diag,
    _failure_text,
    _gated,
    _results_by_id,
    _verdict,
    about,
)
from nnrp_conformance.manifest import Manifest, ManifestError, implied_levels, load_manifest
from nnrp_conformance.planner import PlanError, build_plan

Expected = dict[int, tuple[list[str], list[str]]]


def _expected_levels(inputs: GateInputs, manifest: Manifest | None,
                     failures: list[str]) -> Expected:
    """Claimed level -> (its mandatory recipe ids, its claimed optional ids) the planner selects
    for ``manifest`` at its highest claimed level (Level 3's unlisted operations excluded:
    they are each optional, docs/levels.md#claims)."""
    if inputs.recipes is None:
        failures.append(f"cannot load the recipes: {inputs.recipes_problem}")
        return {}
    if manifest is None:
        return {}
    if not any(r.level == contract.LEVEL_CHAT for r in inputs.recipes):
        failures.append("the recipe set has no Level 1 recipe")
        return {}
    try:
        plan = build_plan(inputs.recipes, manifest)
    except PlanError as exc:
        failures.append(f"cannot plan the recipes for the manifest: {exc}")
        return {}
    out: Expected = {}
    for level in manifest.levels:
        cases = [c for c in plan.cases if c.level == level]
        mandatory = [c.id for c in cases if c.status == contract.STATUS_MANDATORY
                     and c.selection != contract.SEL_NOT_CLAIMED]
        optional = [c.id for c in cases if c.selected and c.status != contract.STATUS_MANDATORY]
        if not mandatory:
            failures.append(f"Level {level} is claimed, but the recipe set selects no mandatory "
                            f"Level {level} recipe for the manifest")
        out[level] = (mandatory, optional)
    return out


def _manifest_label(inputs: GateInputs) -> str:
    return inputs.evidence.rel(inputs.manifest_path) if inputs.manifest_path else ""


def _manifest_failures(m: Manifest | None, where: str, problem: str | None) -> list[str]:
    if m is None:
        return [f"no usable manifest: {problem}"]
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


def _version_manifest(inputs: GateInputs, ve: VersionEvidence,
                      failures: list[str]) -> tuple[Manifest | None, str]:
    """The manifest a version's run used: its own ``manifest.json`` when the release recorded
    one (it may claim less: a serving-target version that cannot keep a level), else the
    adapter's. Its own must describe the same adapter and claim no level the adapter's lacks."""
    if ve.manifest_path is None:
        return inputs.manifest, _manifest_label(inputs)
    label = inputs.evidence.rel(ve.manifest_path)
    try:
        own = load_manifest(ve.manifest_path)
    except ManifestError as exc:
        failures.append(str(exc).replace(str(ve.manifest_path), label))
        return None, label
    failures += _manifest_failures(own, label, None)
    top = inputs.manifest
    if top is not None:
        if own.adapter != top.adapter:
            failures.append(f"{label}: adapter {own.adapter!r} is not the manifest's "
                            f"{top.adapter!r}")
        extra = sorted(set(own.levels) - set(top.levels))
        if extra:
            failures.append(f"{label}: claims Level(s) {extra}, which the adapter's manifest "
                            f"{_manifest_label(inputs)} does not")
    return own, label


def _level_rows(expected: Expected) -> list[dict[str, Any]]:
    return [{"level": level, "claimed": level in expected,
             "mandatory": expected.get(level, ([], []))[0],
             "claimed_optional": expected.get(level, ([], []))[1]}
            for level in contract.LEVELS]


def _who(g: Gated, target: str) -> str:
    """``TARGET VERSION (line SPEC)``: a recorded version, naming its line."""
    return f"{target} {g.version} ({g.line.name})"


def _policy_levels(g: Gated, manifest: Manifest | None, label: str, target: str) -> list[str]:
    """The levels the run's manifest claims are exactly the policy's for that version (the
    lower levels a claim implies count on both sides)."""
    declared = g.line.levels_of(g.version)
    if declared is None:
        return [f"{_who(g, target)}: the release policy's levels name no claim for "
                f"{target} {g.version} (they name {', '.join(g.line.levels)}): declare the "
                "levels claimed there"]
    if manifest is None:
        return []
    wanted = implied_levels(declared)
    if tuple(manifest.levels) != wanted:
        return [f"{_who(g, target)}: the run's manifest {label} claims Level(s) "
                f"{list(manifest.levels)}, the release policy declares {list(wanted)} for "
                f"{target} {g.version}"]
    return []


def _check_selected(inputs: GateInputs, who: str, ve: VersionEvidence, expected: Expected,
                    failures: list[str]) -> None:
    """Every expected recipe is in the version's recorded plan and recorded as selected."""
    plan = ve.plan
    selected = {c["id"] for c in plan.data["cases"]}
    results = _results_by_id(ve.case_results)
    for level, (level_mandatory, level_optional) in expected.items():
        for case_id in level_mandatory + level_optional:
            kind = "mandatory" if case_id in level_mandatory else "claimed optional"
            if case_id not in selected:
                failures.append(
                    f"{who}: Level {level} {kind} recipe {case_id} was not "
                    f"selected ({plan.path.name} does not list it)"
                )
                continue
            selection = _diag(results.get(case_id, {})).get("selection")
            if selection not in (None, contract.SEL_SELECTED):
                failures.append(
                    f"{who}: Level {level} {kind} recipe {case_id} is "
                    f"recorded as {selection!r} in {ve.case_results.path.name}"
                )


def _judge_claims(inputs: GateInputs, g: Gated, expected: Expected, evidence: list[str],
                  failures: list[str]) -> list[dict[str, Any]] | None:
    """One gated version: its manifest claims the policy's levels and its plan selected each
    claimed level's recipes. Returns its Levels rows (None: no usable plan)."""
    req = inputs.requirements
    ve, version, who = g.evidence, g.version, _who(g, req.target)
    if ve is None:
        failures.append(f"no evidence for the {g.role} of the {req.target} {g.line.name} "
                        f"({req.target} {version}): no execution plan")
        return None
    if not ve.plan.ok:
        failures += [f"{who} execution plan: {p}" for p in ve.plan.problems]
        return None
    evidence.append(ve.plan.label)
    manifest, label = _version_manifest(inputs, ve, failures)
    if ve.manifest_path is not None:
        evidence.append(label)
    failures += _policy_levels(g, manifest, label, req.target)
    mine = expected if manifest is inputs.manifest else \
        _expected_levels(inputs, manifest, failures)
    if manifest is not None and ve.plan.data["adapter"] != manifest.adapter:
        failures.append(f"{ve.plan.label}: adapter {ve.plan.data['adapter']!r} is not the "
                        f"manifest's {manifest.adapter!r}")
    _check_selected(inputs, who, ve, mine, failures)
    rows = _level_rows(mine)
    for row in rows:
        if not row["claimed"]:
            row["reason"] = _not_claimed(row["level"], g, manifest, label, inputs.manifest,
                                         req.target)
    return rows


def _not_claimed(level: int, g: Gated, manifest: Manifest | None, label: str,
                 top: Manifest | None, target: str) -> str:
    """Why ``g``'s version does not claim ``level``, from what the gate read: the run's
    manifest (its levels, and the level's operations the adapter's manifest lists but it does
    not) and the levels the release policy declares for the version."""
    parts = []
    if manifest is not None:
        parts.append(f"the run's manifest {label} claims Level(s) {list(manifest.levels)}")
        if top is not None and level in top.levels:
            lost = sorted(op for op in top.operations if op not in manifest.operations
                          and contract.OPERATION_LEVELS.get(op) == level)
            parts.append(f"the adapter's manifest claims Level {level}" + (
                f", but the run's lists none of its operations ({', '.join(lost)})"
                if lost else ""))
    declared = g.line.levels_of(g.version)
    if declared is not None:
        parts.append(f"the release policy declares Level(s) {list(declared)} for {target} "
                     f"{g.version}")
    return "; ".join(parts) or "no manifest recorded for this version"


def level1_implemented(inputs: GateInputs) -> GateVerdict:
    """Level 1 is claimed (by the adapter's manifest and by every version's own); on every
    declared line each gated version claims the policy's levels for it and every claimed
    level's recipes were selected; the details list per level what the adapter and each
    version claimed. The condition keeps its first name."""
    req = inputs.requirements
    failures = _manifest_failures(inputs.manifest, _manifest_label(inputs) or "manifest",
                                  inputs.manifest_problem)
    evidence = [_manifest_label(inputs)] if inputs.manifest_path else []
    expected = _expected_levels(inputs, inputs.manifest, failures)
    mandatory, optional = expected.get(contract.LEVEL_CHAT, ([], []))
    per_version: dict[str, list[dict[str, Any]]] = {}
    for g in _gated(inputs):
        if g.evidence is not None and g.version in per_version:
            continue  # a line whose lower bound is its current line's newest: judged once
        mine: list[str] = []
        rows = _judge_claims(inputs, g, expected, evidence, mine)
        if rows is not None:
            per_version[g.version] = rows
        failures += about(g, req.target, mine)
    details: dict[str, Any] = {"mandatory": mandatory, "claimed_optional": optional,
                               "levels": _level_rows(expected), "versions": per_version}
    claims = "; ".join(
        f"{req.target} {v}: levels {[r['level'] for r in rows if r['claimed']]}"
        for v, rows in per_version.items())
    ok = f"Level 1 claimed; every claimed level's recipes selected ({claims})"
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


def _judge_results(inputs: GateInputs, g: Gated, adapter: str | None, evidence: list[str],
                   failures: list[str]) -> list[dict[str, Any]] | None:
    """One gated version: every case of its plan passed. Returns its recipe rows (None: no
    usable case results or plan)."""
    req = inputs.requirements
    ve, who = g.evidence, _who(g, req.target)
    if ve is None:
        failures.append(f"no case results for the {g.role} of the {req.target} "
                        f"{g.line.name} ({req.target} {g.version})")
        return None
    doc = ve.case_results
    if not doc.ok:
        failures += [f"{who} case results: {p}" for p in doc.problems]
        return None
    evidence.append(doc.label)
    if adapter is not None and doc.data["adapter"] != adapter:
        failures.append(f"{doc.label}: adapter {doc.data['adapter']!r} is not {adapter!r}")
    if not ve.plan.ok:
        failures.append(f"{who}: no valid execution plan, the selected recipes "
                        f"are unknown ({ve.plan.problems[0]})")
        return None
    results = _results_by_id(doc)
    rows = []
    for case in ve.plan.data["cases"]:
        row = _row(case, results.get(case["id"]))
        rows.append(row)
        if row["outcome"] != contract.OUTCOME_PASSED:
            failures.append(f"{who}: {row['status']} recipe {case['id']} {row['outcome']}: "
                            f"{row.get('message', '')}")
    return rows


def recipes_pass(inputs: GateInputs) -> GateVerdict:
    req = inputs.requirements
    failures: list[str] = []
    evidence: list[str] = []
    tables: dict[str, list[dict[str, Any]]] = {}
    adapter = inputs.manifest.adapter if inputs.manifest else None
    for g in _gated(inputs):
        if g.evidence is not None and g.version in tables:
            continue  # a line whose lower bound is its current line's newest: judged once
        mine: list[str] = []
        rows = _judge_results(inputs, g, adapter, evidence, mine)
        if rows is not None:
            tables[g.version] = rows
        failures += about(g, req.target, mine)
    count = sum(len(rows) for rows in tables.values())
    ok = f"all {count} selected recipe runs passed across {len(tables)} {req.target} version(s)"
    return _verdict(contract.GATE_RECIPES_PASS, failures, ok, evidence=evidence,
                    details={"versions": tables})
