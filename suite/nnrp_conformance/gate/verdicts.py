"""What every release condition shares: its inputs (:class:`GateInputs`: the evidence, the
policy's requirements, the README, the manifest and recipes), its verdict
(:class:`GateVerdict`), and which versions are gated (:class:`Gated`: for every declared
line, its lower bound and the newest recorded version of its current line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from nnrp_conformance.gate.evidence import Document, Evidence, VersionEvidence
from nnrp_conformance.gate.requirements import Line, Requirements
from nnrp_conformance.manifest import Manifest
from nnrp_conformance.recipes import Recipe

__all__ = ["GateInputs", "GateVerdict", "Gated", "about", "gated_versions", "recorded_versions"]

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


#: the two roles a gated version plays in its line, and their key in the reports' details
ROLE_LOWER, ROLE_CURRENT = "lower bound", "current line"
_ROLE_KEYS = {ROLE_LOWER: "lower_bound", ROLE_CURRENT: "current"}


@dataclass(frozen=True)
class Gated:
    """One version a line's release conditions judge: ``role`` is the lower bound or the
    current line; ``version`` is the recorded one, else what was wanted (the lower bound
    exactly, or ``CURRENT_LINE.x``) with ``evidence`` None."""

    line: Line
    role: str
    version: str
    evidence: VersionEvidence | None

    @property
    def key(self) -> str:
        """The role's key in the reports' details (``lower_bound`` or ``current``)."""
        return _ROLE_KEYS[self.role]


def gated_versions(ev: Evidence, req: Requirements) -> list[Gated]:
    """For every declared line (in the policy's order): its lower bound (exactly) and the
    newest recorded version of its current line, each with its evidence or None."""
    out: list[Gated] = []
    for line in req.lines:
        lower = ev.versions.get(line.lower_bound)
        out.append(Gated(line, ROLE_LOWER, line.lower_bound, lower))
        current = [v for v in ev.sorted_versions() if line.on_current_line(v)]
        if current:
            out.append(Gated(line, ROLE_CURRENT, current[-1], ev.versions[current[-1]]))
        else:
            out.append(Gated(line, ROLE_CURRENT, f"{line.current_line}.x", None))
    return out


def recorded_versions(ev: Evidence, req: Requirements) -> list[str]:
    """The gated versions that have evidence, each once, oldest first."""
    return sorted({g.version for g in gated_versions(ev, req) if g.evidence is not None},
                  key=Version)


def about(g: Gated, target: str, messages: list[str]) -> list[str]:
    """``messages`` about gated version ``g``, each naming its line (prefixed with it where
    it does not already)."""
    return [m if g.line.name in m else f"{target} {g.line.name}: {m}" for m in messages]


def _gated(inputs: GateInputs) -> list[Gated]:
    """The gated versions of ``inputs`` (:func:`gated_versions`)."""
    return gated_versions(inputs.evidence, inputs.requirements)


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
