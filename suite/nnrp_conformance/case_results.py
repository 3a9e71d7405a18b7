"""A case's result and the case-results document: :class:`CaseResult` (outcome, verdict,
events, timings and diagnostics of one case, and its ``results[]`` item in upstream's
case-results schema), the results of cases that did not run (skipped by the plan, or not
sent because the endpoint stopped answering), and :func:`case_results_document`.

Upstream case results require ``terminal`` to be success, error or cancelled. A case whose
operation never ended (timeout, transport loss, flood) is reported with ``terminal: "error"``
(it did not end successfully) and ``diagnostics.terminal_observed: null``; a skipped case
reports the terminal its recipe expects, with ``diagnostics.selection`` saying why it did
not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from nnrp_conformance import contract, rules, validation
from nnrp_conformance.checks import Finding, Verdict
from nnrp_conformance.jsonsafe import jsonable

if TYPE_CHECKING:
    from nnrp_conformance.planner import Plan, PlannedCase

__all__ = [
    "CaseResult",
    "case_results_document",
    "skipped_result",
    "started_now",
    "unresponsive_result",
]


def started_now() -> str:
    """Now, in UTC, as a case result's ``started_at``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class CaseResult:
    id: str
    outcome: str
    terminal: str | None
    verdict: Verdict
    events: list[dict[str, Any]]
    duration_s: float
    started_at: str
    level: int
    status: str
    selection: str
    reason: str | None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    #: the case's frame trace (``trace.frame_trace``) when the run asked for one
    trace: list[dict[str, Any]] | None = None
    #: when the operation was submitted and when the endpoint's terminal arrived
    #: (perf_counter ns; None: no terminal from the endpoint): which operations were in flight
    #: together (``checks/concurrency.py``); never written to a report
    span_ns: tuple[int, int | None] | None = field(default=None, repr=False, compare=False)

    @property
    def findings(self) -> list[Finding]:
        return self.verdict.findings

    @property
    def message(self) -> str:
        return self.verdict.message

    @property
    def passed(self) -> bool:
        return self.outcome == contract.OUTCOME_PASSED

    def to_upstream(self) -> dict[str, Any]:
        """One case-results ``results[]`` item (terminal rule: module doc)."""
        if self.terminal in contract.TERMINALS:
            terminal = self.terminal
        elif self.outcome == contract.OUTCOME_SKIPPED:
            terminal = self.diagnostics.get("expected_terminal", contract.TERMINAL_SUCCESS)
        else:
            terminal = contract.TERMINAL_ERROR
        diagnostics = jsonable({
            **self.diagnostics,
            "verdict": self.verdict.level,
            "upstream_outcome": self.verdict.upstream_outcome,
            "terminal_observed": self.terminal,
            "findings": [f.to_dict() for f in self.verdict.findings],
            "level": self.level,
            "status": self.status,
            "selection": self.selection,
            "reason": self.reason,
            "duration_s": round(self.duration_s, 6),
            "started_at": self.started_at,
        })
        return {
            "id": self.id,
            "outcome": self.outcome,
            "terminal": terminal,
            "events": [e for e in self.events
                       if isinstance(e, dict) and isinstance(e.get("type"), str) and e["type"]],
            "diagnostics": diagnostics,
            "message": self.verdict.message[:65536],
        }



def unresponsive_result(case: PlannedCase, why: str) -> CaseResult:
    """A case failed at once by the run-level rule: the endpoint stopped answering."""
    finding = Finding("endpoint.unresponsive", why, expected="frames from the endpoint",
                      seen="nothing", spec=rules.citation("endpoint.unresponsive"))
    verdict = Verdict(contract.OUTCOME_FAILED, None, [finding], f"{case.id}: 1 finding(s): "
                      f"{finding}")
    return CaseResult(
        id=case.id, outcome=contract.OUTCOME_FAILED, terminal=None, verdict=verdict, events=[],
        duration_s=0.0, started_at=started_now(), level=case.level, status=case.status,
        selection=case.selection, reason=case.reason,
        diagnostics={"expected_terminal": case.expected_terminal, "operation": case.operation,
                     "not_run": "endpoint unresponsive"},
    )


def skipped_result(case: PlannedCase) -> CaseResult:
    """The result of a case the plan did not select (not claimed, informational, …)."""
    reason = case.reason or f"not selected ({case.selection})"
    verdict = Verdict(contract.OUTCOME_SKIPPED, None, [], f"{case.id}: skipped: {reason}")
    return CaseResult(
        id=case.id, outcome=contract.OUTCOME_SKIPPED, terminal=None, verdict=verdict, events=[],
        duration_s=0.0, started_at=started_now(), level=case.level, status=case.status,
        selection=case.selection, reason=reason,
        diagnostics={"expected_terminal": case.expected_terminal, "operation": case.operation},
    )


def case_results_document(plan: Plan, results: Sequence[CaseResult]) -> dict[str, Any]:
    """The upstream case-results document for ``results``, validated against its schema."""
    doc = {
        "$schema": validation.schema_uri("case-results"),
        "profile": plan.profile,
        "schema_version": plan.schema_version,
        "adapter": plan.adapter,
        "results": [r.to_upstream() for r in results],
    }
    validation.check("case-results", doc)
    return doc
