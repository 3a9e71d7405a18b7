"""The data of a verdict: :class:`Observation` (what the suite saw of one operation),
:class:`Finding` (one broken rule, expected vs seen, with its citation) and :class:`Verdict`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from nnrp_conformance import contract, rules


@dataclass(frozen=True)
class Finding:
    """One broken rule: stable rule id, what went wrong, where, expected vs seen, citation."""

    rule: str
    message: str
    event_index: int | None = None
    expected: Any = None  # for a non-strict finding: the recommended value
    seen: Any = None
    spec: str = ""
    level: str = rules.LEVEL_FAILED  # failed | non-strict | informational (rules.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        at = f" (event #{self.event_index})" if self.event_index is not None else ""
        cite = f" — {self.spec}" if self.spec else ""
        lv = "" if self.level == rules.LEVEL_FAILED else f" ({self.level})"
        return f"[{self.rule}]{lv}{at} {self.message}{cite}"


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
