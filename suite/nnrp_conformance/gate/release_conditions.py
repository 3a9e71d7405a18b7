"""Conditions (d) and (e): the serving target's smoke passed on the lower bound and the
current line, inside the declared line; the README (and the pyproject beside it) documents
the line, the tested versions and the extras."""

from __future__ import annotations

from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.gate.evidence import VersionEvidence
from nnrp_conformance.gate.readme import read_readme
from nnrp_conformance.gate.requirements import Requirements
from nnrp_conformance.gate.smoke import sequence_problems, smoke_problems
from nnrp_conformance.gate.verdicts import (
    GateInputs,
    GateVerdict,
    _diag,
    _failure_text,
    _gated,
    _verdict,
)


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
