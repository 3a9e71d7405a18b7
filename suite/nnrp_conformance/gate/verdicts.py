"""What every release condition shares: its inputs (:class:`GateInputs`: the evidence, the
policy's requirements, the README, the manifest and recipes), its verdict
(:class:`GateVerdict`), and which versions are gated (the lower bound and the newest
recorded one of the current line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrp_conformance.gate.evidence import Document, Evidence, VersionEvidence
from nnrp_conformance.gate.requirements import Requirements
from nnrp_conformance.manifest import Manifest
from nnrp_conformance.recipes import Recipe

__all__ = ["GateInputs", "GateVerdict", "gated_versions"]

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


def _failure_text(result: dict[str, Any]) -> str:
    findings = _diag(result).get("findings")
    if isinstance(findings, list) and findings and isinstance(findings[0], dict):
        first = findings[0]
        return f"[{first.get('rule', '?')}] {first.get('message', '')}".strip()
    return str(result.get("message") or "no message recorded")
