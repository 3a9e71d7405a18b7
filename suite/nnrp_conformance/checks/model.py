"""The data of a verdict: :class:`Observation` (what the suite saw of one operation) and
:class:`Verdict`; a verdict's findings are :class:`nnrp_conformance.findings.Finding`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nnrp_conformance import contract, rules
from nnrp_conformance.findings import Finding

__all__ = ["NOT_EXERCISED_NOTES", "Finding", "Observation", "Verdict", "verdict_of"]

#: the notes that say a case's exercise did not happen (checks/exercise.py): with nothing
#: failed, such a case is ``skipped`` with the verdict ``not-exercised``
NOT_EXERCISED_NOTES = frozenset({"cancel.not-sent", "cancel.crossed", "timeout.not-reached"})


@dataclass
class Verdict:
    """``outcome`` is upstream's (passed / failed / skipped: a non-strict case passed);
    ``level`` is the Autobahn-style verdict (rules.LEVELS, or skipped)."""

    outcome: str
    terminal: str | None
    findings: list[Finding]
    message: str
    level: str = ""

    def __post_init__(self) -> None:
        if not self.level:
            self.level = contract.OUTCOME_SKIPPED if self.outcome == contract.OUTCOME_SKIPPED \
                else rules.case_level(f.level for f in self.findings)

    @property
    def passed(self) -> bool:
        return self.outcome == contract.OUTCOME_PASSED

    @property
    def upstream_outcome(self) -> str:
        """The outcome upstream's own runner would give: ``failed`` also where only an upstream
        recipe's expectation beyond the normative text was missed (rules.TAG_UPSTREAM)."""
        if self.outcome == contract.OUTCOME_PASSED and any(
                (rule := rules.lookup(f.rule)) is not None and rule.tag == rules.TAG_UPSTREAM
                for f in self.findings):
            return contract.OUTCOME_FAILED
        return self.outcome


def verdict_of(case_id: str, terminal: str | None, findings: list[Finding], events: int
               ) -> Verdict:
    """The verdict of a case with ``findings``: its outcome (failed when any finding fails;
    skipped, verdict not-exercised, when a note says its exercise did not happen), level and
    message (the first three findings, or the ``events`` seen and the terminal)."""
    level = rules.case_level(f.level for f in findings)
    outcome = contract.OUTCOME_FAILED if level == rules.LEVEL_FAILED else contract.OUTCOME_PASSED
    missed = next((f for f in findings if f.rule in NOT_EXERCISED_NOTES
                   and f.level == rules.LEVEL_INFORMATIONAL), None)
    if missed is not None and outcome != contract.OUTCOME_FAILED:
        return Verdict(contract.OUTCOME_SKIPPED, terminal, findings,
                       f"{case_id}: not exercised: {missed.message}", rules.VERDICT_NOT_EXERCISED)
    if findings:
        head = "; ".join(str(f) for f in findings[:3])
        more = f" (+{len(findings) - 3} more)" if len(findings) > 3 else ""
        message = f"{case_id}: {level}: {len(findings)} finding(s): {head}{more}"
    else:
        message = f"{case_id}: {events} event(s), terminal {terminal}"
    return Verdict(outcome, terminal, findings, message, level)


@dataclass
class Observation:
    """What the suite saw for one operation.

    ``events`` are the partial events in arrival order (``None`` where a frame did not decode);
    ``terminal_kind`` is the logical terminal (success/error/cancelled) or ``None`` when there
    was none. ``extra`` keys the checks read: ``late_events`` (events received after the
    terminal), ``decode_errors`` ({index: text}), ``terminal_decode_error``, ``flooded``,
    ``max_events``, ``delivery``, ``drop_reason``, ``status_code``, ``exception``.
    """

    # What the endpoint sent is untrusted JSON: typed Any, every check tests its shape first.
    events: list[Any] = field(default_factory=list)
    raw_events: list[Any] = field(default_factory=list)
    terminal_kind: str | None = None
    terminal_event: Any = None
    wire_findings: list[dict[str, Any]] = field(default_factory=list)
    timed_out: bool = False
    cancelled_at_index: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def sequence(self) -> list[Any]:
        """Partial events then the terminal event (when it has one)."""
        seq = list(self.events)
        if self.terminal_event is not None:
            seq.append(self.terminal_event)
        return seq

    @property
    def terminal_index(self) -> int | None:
        return len(self.events) if self.terminal_event is not None else None
