"""Conditions (d) and (e): on every declared line, the serving target's smoke passed on the
lower bound and the current line, both inside that line; the README (and the pyproject beside
it) documents every line, its tested versions, the lines joined and the extras."""

from __future__ import annotations

from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.gate.evidence import VersionEvidence
from nnrp_conformance.gate.readme import read_readme
from nnrp_conformance.gate.requirements import Line, Requirements
from nnrp_conformance.gate.smoke import sequence_problems, smoke_problems
from nnrp_conformance.gate.verdicts import (
    Gated,
    GateInputs,
    GateVerdict,
    _diag,
    _failure_text,
    _gated,
    _verdict,
    about,
)


def _smoke_failures(version: str, ve: VersionEvidence, line: Line,
                    req: Requirements) -> list[str]:
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
        if isinstance(recorded, str) and not line.contains(recorded):
            out.append(f"{doc.label}: {r['id']}: {target} {recorded} is outside the declared "
                       f"{line.name}")
        if r["outcome"] != contract.OUTCOME_PASSED:
            out.append(f"{doc.label}: {r['id']} {r['outcome']}: {_failure_text(r)}")
        out += [f"{doc.label}: {r['id']}: {p}" for p in sequence_problems(r.get("events"),
                                                                           r["terminal"])]
    out += [f"{doc.label}: {p}" for p in smoke_problems(results)]
    return out


def _gated_smoke(g: Gated, req: Requirements, evidence: list[str]) -> list[str]:
    """Why the smoke of one gated version fails (empty: it passed)."""
    ve = g.evidence
    if ve is None:
        return [f"no smoke for the {g.role} of the {req.target} {g.line.name} "
                f"({req.target} {g.version}): {req.target_key}-{g.version}/ is missing"]
    # a gated version is inside its line by construction (the policy's lower bound is
    # checked on load, a current-line version is chosen inside the line); what the smoke
    # recorded running on is checked below
    mine = _smoke_failures(g.version, ve, g.line, req)
    if not ve.case_results.ok:
        mine.append(f"{req.target} {g.version} ({g.line.name}): no valid case results "
                    f"({ve.case_results.problems[0]})")
    evidence += [d.label for d in (ve.smoke, ve.case_results) if d.ok and d.label not in evidence]
    return mine


def vllm_smoke(inputs: GateInputs) -> GateVerdict:
    """On every declared line, the lower bound and the current line each have a passing
    smoke inside the line; the details list per line what was gated and whether it passed."""
    req = inputs.requirements
    failures: list[str] = []
    evidence: list[str] = []
    lines: dict[str, dict[str, Any]] = {}
    for g in _gated(inputs):
        mine = about(g, req.target, _gated_smoke(g, req, evidence))
        entry = lines.setdefault(g.line.declared, {"declared": g.line.declared})
        entry[g.key] = {"vllm": g.version, "passed": not mine}
        failures += mine
    ok = "; ".join(f"smoke passed on {req.target} {d['lower_bound']['vllm']} (lower bound) and "
                   f"{d['current']['vllm']} (current line), both inside {declared}"
                   for declared, d in lines.items())
    details = {"lines": list(lines.values()), "declared_line": req.declared_line}
    return _verdict(contract.GATE_VLLM_SMOKE, failures, ok, evidence=evidence, details=details)


def readme_documents(inputs: GateInputs) -> GateVerdict:
    facts = read_readme(inputs.readme, inputs.requirements,
                        label=inputs.evidence.rel(inputs.readme))
    details = {
        "declared_ranges": facts.declared_ranges,
        "lower_bound": facts.lower_bound,
        "current_line": facts.current_line,
        "extras": facts.extras_found,
    }
    req = inputs.requirements
    ok = (f"README documents the {req.target} lines {', '.join(ln.declared for ln in req.lines)}, "
          f"their tested versions and the extras {', '.join(req.extras)}")
    return _verdict(contract.GATE_README_DOCUMENTS, list(facts.problems), ok,
                    evidence=facts.evidence, details=details)
