"""The five release conditions, each judged from the recorded evidence alone.

Owns one function per condition (``contract.RELEASE_GATES`` order) returning a
:class:`GateVerdict`: pass/fail, a one-line reason, the evidence paths and facts, every
failure in words that name the file and field, and gate-specific details for the reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.gate.evidence import BENCH_DIR, Document, Evidence, VersionEvidence
from nnrp_conformance.gate.readme import read_readme
from nnrp_conformance.gate.requirements import SCOPE_SHARED, Requirements
from nnrp_conformance.gate.smoke import sequence_problems, smoke_problems
from nnrp_conformance.manifest import Manifest
from nnrp_conformance.planner import PlanError, build_plan
from nnrp_conformance.recipes import Recipe

__all__ = ["GateInputs", "GateVerdict", "gated_versions", "judge_all"]

_MAX_VALUES = 400  # raw benchmark values carried into the report for plots


@dataclass
class GateVerdict:
    name: str
    passed: bool
    reason: str
    evidence: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "passed": self.passed,
            "evidence": list(self.evidence),
            "reason": self.reason,
        }
        details = dict(self.details)
        if self.failures:
            details["failures"] = list(self.failures)
        if details:
            out["details"] = details
        return out


@dataclass
class GateInputs:
    evidence: Evidence
    requirements: Requirements
    readme: Path
    manifest: Manifest | None
    manifest_path: Path | None
    manifest_problem: str | None
    recipes: list[Recipe] | None
    recipes_problem: str | None


def _verdict(name: str, failures: list[str], ok_reason: str, **kw: Any) -> GateVerdict:
    if failures:
        more = f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""
        reason = failures[0] + more
    else:
        reason = ok_reason
    return GateVerdict(name, not failures, reason, failures=failures, **kw)


def gated_versions(ev: Evidence, req: Requirements) -> tuple[str | None, str | None]:
    """(lower bound, newest recorded version on the current line); None where not recorded."""
    lower = req.lower_bound if req.lower_bound in ev.versions else None
    current = [v for v in ev.sorted_versions() if req.on_current_line(v)]
    return lower, (current[-1] if current else None)


def _gated(inputs: GateInputs) -> list[tuple[str, str, VersionEvidence | None]]:
    """[(role, version, evidence or None)] for the lower bound and the current line."""
    ev, req = inputs.evidence, inputs.requirements
    lower, current = gated_versions(ev, req)
    return [
        ("lower bound", lower or req.lower_bound, ev.versions.get(lower) if lower else None),
        ("current line", current or f"{req.current_line}.x", ev.versions.get(current)
         if current else None),
    ]


def _results_by_id(doc: Document) -> dict[str, dict[str, Any]]:
    if not doc.ok:
        return {}
    return {r["id"]: r for r in doc.data["results"]}


def _diag(result: dict[str, Any]) -> dict[str, Any]:
    diag = result.get("diagnostics")
    return diag if isinstance(diag, dict) else {}


# --- (a) Level 1 implemented ----------------------------------------------------------------


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


# --- (b) recipes pass -----------------------------------------------------------------------


def _failure_text(result: dict[str, Any]) -> str:
    findings = _diag(result).get("findings")
    if isinstance(findings, list) and findings and isinstance(findings[0], dict):
        first = findings[0]
        return f"[{first.get('rule', '?')}] {first.get('message', '')}".strip()
    return str(result.get("message") or "no message recorded")


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


# --- (c) benchmark baseline -----------------------------------------------------------------


def _summary(
    version: str | None, doc: Document, title: str | None, latency: bool
) -> dict[str, Any]:
    data = doc.data
    metrics = []
    for m in data["metrics"]:
        item = {k: m[k] for k in ("name", "unit", "median", "p50", "p95", "samples")}
        for k in ("p99", "min", "max", "mean"):
            if k in m:
                item[k] = m[k]
        if isinstance(m.get("values"), list):
            item["values"] = m["values"][:_MAX_VALUES]
        metrics.append(item)
    out: dict[str, Any] = {
        "name": data["name"],
        "file": doc.label,
        "vllm": version,
        "latency": latency,
        "runs": data["runs"],
        "machine": data["machine"],
        "versions": data["versions"],
        "metrics": metrics,
        "ratios": data.get("ratios", []),
    }
    if title:
        out["title"] = title
    if data.get("generated_at"):
        out["generated_at"] = data["generated_at"]
    return out


def benchmark_baseline(inputs: GateInputs) -> GateVerdict:
    ev, req = inputs.evidence, inputs.requirements
    failures: list[str] = []
    evidence: list[str] = []
    _, current = gated_versions(ev, req)
    for _version, doc in ev.all_benchmarks():
        failures += [f"schema-invalid benchmark: {p}" for p in doc.problems]
    wanted = {b.name: b for b in req.benchmarks}
    summaries = []
    for b in req.benchmarks:
        if b.scope == SCOPE_SHARED:
            where, version, docs = BENCH_DIR, None, ev.benchmarks
        elif current is None:
            failures.append(
                f"no {b.name!r} benchmark: no {req.target} {req.current_line}.x evidence directory"
            )
            continue
        else:
            ve = ev.versions[current]
            where, version, docs = ev.rel(ve.directory / BENCH_DIR), current, ve.benchmarks
        named = [d for d in docs if d.ok and d.data["name"] == b.name]
        if not named:
            failures.append(f"no benchmark-results document named {b.name!r} under {where}/")
            continue
        doc = named[-1]
        have = {m["name"] for m in doc.data["metrics"]}
        missing = [m for m in b.metrics if m not in have]
        if missing:
            failures.append(f"{doc.label}: benchmark {b.name!r} lacks metric(s) "
                            f"{', '.join(missing)}")
        recorded = doc.data["versions"].get(req.target_key)
        if version is not None and recorded != version:
            failures.append(f"{doc.label}: versions.{req.target_key} is {recorded!r}, the "
                            f"directory is for {req.target} {version}")
        evidence.append(doc.label)
    targets_missed: list[str] = []
    for version, doc in ev.all_benchmarks():
        if doc.ok:
            spec = wanted.get(doc.data["name"])
            summary = _summary(version, doc, spec.title if spec else None,
                               bool(spec and spec.latency))
            failures += benchmark_own_failures(doc)
            summary["targets_missed"] = missed_targets(doc)
            targets_missed += [f"{doc.label}: {t}" for t in summary["targets_missed"]]
            summaries.append(summary)
    names = ", ".join(b.name for b in req.benchmarks)
    ok = f"benchmark baseline recorded ({names}), machine and versions included"
    return _verdict(contract.GATE_BENCHMARK_BASELINE, failures, ok, evidence=evidence,
                    details={"benchmarks": summaries, "targets_missed": targets_missed})


#: parameters by which a benchmark records that its run failed a correctness check (a cancel
#: that did not take effect, a frame after a terminal): such evidence can never pass the gate
_MUST_BE_ZERO = ("cancel_not_effective", "events_after_terminal")


def benchmark_own_failures(doc: Document) -> list[str]:
    """Correctness failures a benchmark recorded about its own run (they fail the gate)."""
    params = doc.data.get("parameters") or {}
    out = []
    for key, value in params.items():
        if key.endswith("_verdict") and value == "fail":
            out.append(f"{doc.label}: the benchmark's own verdict {key} is 'fail'")
    for key in _MUST_BE_ZERO:
        value = params.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            out.append(f"{doc.label}: {key} = {value} (must be 0)")
    return out


def missed_targets(doc: Document) -> list[str]:
    """Performance targets (``target.*`` parameters) the recorded run did not meet.

    Shown in every gate report, in red; they do not fail the release: speed on a shared
    machine is evidence to read, correctness (``benchmark_own_failures``) is a gate."""
    params = doc.data.get("parameters") or {}
    return sorted(k for k, v in params.items() if k.startswith("target.") and v is False)


# --- (d) target smoke -----------------------------------------------------------------------


def _smoke_failures(version: str, ve: VersionEvidence, req: Requirements) -> list[str]:
    out: list[str] = []
    doc = ve.smoke
    if not doc.ok:
        return [f"{req.target} {version} smoke: {p}" for p in doc.problems]
    results = doc.data["results"]
    if not results:
        return [f"{doc.label}: no smoke result recorded"]
    for r in results:
        key, target = req.target_key, req.target
        recorded = _diag(r).get(key)
        if not isinstance(recorded, str):
            out.append(f"{doc.label}: {r['id']}: diagnostics.{key} (the {target} version) is "
                       "missing")
        elif recorded != version:
            out.append(f"{doc.label}: {r['id']}: ran on {target} {recorded}, the directory is "
                       f"for {version}")
        if isinstance(recorded, str) and not req.in_line(recorded):
            out.append(f"{doc.label}: {r['id']}: {target} {recorded} is outside the declared "
                       f"line {req.declared_line}")
        if r["outcome"] != contract.OUTCOME_PASSED:
            out.append(f"{doc.label}: {r['id']} {r['outcome']}: {_failure_text(r)}")
        out += [f"{doc.label}: {r['id']}: {p}" for p in sequence_problems(r.get("events"),
                                                                           r["terminal"])]
    out += [f"{doc.label}: {p}" for p in smoke_problems(results)]
    return out


def vllm_smoke(inputs: GateInputs) -> GateVerdict:
    req = inputs.requirements
    failures: list[str] = []
    evidence: list[str] = []
    details: dict[str, Any] = {}
    for (role, version, ve), key in zip(_gated(inputs), ("lower_bound", "current"), strict=True):
        mine: list[str] = []
        if ve is None:
            mine.append(f"no smoke for the {role} ({req.target} {version}): "
                        f"{req.target_key}-{version}/ is missing")
        else:
            if not req.in_line(version):
                mine.append(f"the {role} {req.target} {version} is outside the declared line "
                            f"{req.declared_line}")
            mine += _smoke_failures(version, ve, req)
            if not ve.case_results.ok:
                mine.append(f"{req.target} {version}: no valid case results "
                            f"({ve.case_results.problems[0]})")
            for d in (ve.smoke, ve.case_results):
                if d.ok:
                    evidence.append(d.label)
        details[key] = {"vllm": version, "passed": not mine}
        failures += mine
    ok = (f"smoke passed on the lower bound {details['lower_bound']['vllm']} and the current "
          f"line {details['current']['vllm']}, both inside {req.declared_line}")
    details["declared_line"] = req.declared_line
    return _verdict(contract.GATE_VLLM_SMOKE, failures, ok, evidence=evidence, details=details)


# --- (e) README -----------------------------------------------------------------------------


def readme_documents(inputs: GateInputs) -> GateVerdict:
    facts = read_readme(inputs.readme, inputs.requirements,
                        label=inputs.evidence.rel(inputs.readme))
    details = {
        "declared_range": facts.declared_range,
        "lower_bound": facts.lower_bound,
        "current_line": facts.current_line,
        "extras": facts.extras_found,
    }
    ok = (f"README documents {inputs.requirements.declared_line}, the tested versions and the "
          f"extras {', '.join(inputs.requirements.extras)}")
    return _verdict(contract.GATE_README_DOCUMENTS, list(facts.problems), ok,
                    evidence=facts.evidence, details=details)


_JUDGES = {
    contract.GATE_LEVEL1_IMPLEMENTED: level1_implemented,
    contract.GATE_RECIPES_PASS: recipes_pass,
    contract.GATE_BENCHMARK_BASELINE: benchmark_baseline,
    contract.GATE_VLLM_SMOKE: vllm_smoke,
    contract.GATE_README_DOCUMENTS: readme_documents,
}


def judge_all(inputs: GateInputs) -> list[GateVerdict]:
    """The five verdicts, in ``contract.RELEASE_GATES`` order."""
    return [_JUDGES[name](inputs) for name in contract.RELEASE_GATES]
