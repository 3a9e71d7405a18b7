"""The run event stream both faces (pytest plugin, CLI) emit and every report handler reads.

Owns: the four run events (:class:`RunStarted`, :class:`CaseStarted`, :class:`CaseFinished`,
:class:`RunFinished`), :class:`CaseRecord` (one case's outcome in a plain, JSON-serialisable
form, so that a pytest-xdist worker can ship it to the controller), the :class:`EventHandler`
protocol and the :class:`EventBus` that fans events out to handlers.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from nnrp_conformance import contract
from nnrp_conformance.findings import Finding
from nnrp_conformance.jsonsafe import jsonable
from nnrp_conformance.rules import VERDICT_NOT_EXERCISED, VERDICT_WAIVED

if TYPE_CHECKING:
    from nnrp_conformance.case_results import CaseResult
    from nnrp_conformance.planner import PlannedCase

__all__ = [
    "CaseFinished",
    "CaseRecord",
    "CaseStarted",
    "EventBus",
    "EventHandler",
    "HandlerError",
    "RunEvent",
    "RunFinished",
    "RunStarted",
]


@dataclass(frozen=True)
class CaseRecord:
    """What the reports need to know about one case, detached from live objects.

    ``upstream`` is the case's entry for the upstream case-results document (already
    carrying our own evidence inside ``diagnostics``); the other fields feed the human
    reports.
    """

    id: str
    outcome: str
    terminal: str | None
    level: int | None
    status: str
    selection: str
    reason: str | None
    duration_s: float
    event_types: tuple[str, ...]
    findings: tuple[Finding, ...]
    message: str | None
    upstream: dict[str, Any]
    started_at: str | None = None
    #: the Autobahn-style verdict: passed / non-strict / failed / informational / skipped /
    #: not-exercised (a case that ran without exercising what it is about) / waived
    verdict: str = ""
    #: for a failed or non-strict case: the command that re-runs just this case
    reproduce: str | None = None
    #: where the case's frame trace was written (``--nnrp-trace``), absolute
    trace: str | None = None

    @property
    def passed(self) -> bool:
        return self.outcome == contract.OUTCOME_PASSED

    @property
    def failed(self) -> bool:
        return self.outcome == contract.OUTCOME_FAILED

    @property
    def skipped(self) -> bool:
        return self.outcome == contract.OUTCOME_SKIPPED

    @property
    def not_exercised(self) -> bool:
        """A case that ran but whose exercise did not happen (checks/exercise.py): outcome
        ``skipped``, judged nothing about what it is about."""
        return self.verdict == VERDICT_NOT_EXERCISED

    @property
    def waived(self) -> bool:
        """A failure a baseline accepts (``baseline.py``): reported, never a pass."""
        return self.verdict == VERDICT_WAIVED

    @property
    def blocking(self) -> bool:
        """A failure that fails the run: every selected case, mandatory or optional (strict),
        unless a baseline waives it."""
        return self.failed and self.selection == contract.SEL_SELECTED and not self.waived

    @classmethod
    def from_result(cls, result: CaseResult) -> CaseRecord:
        verdict = getattr(result, "verdict", None)
        findings = tuple(
            f.json_safe() for f in (getattr(verdict, "findings", None) or ())
        )
        message = jsonable(getattr(verdict, "message", None) or None)
        upstream = jsonable(result.to_upstream())
        if message is None and isinstance(upstream.get("message"), str):
            message = upstream["message"]
        events = getattr(result, "events", None) or ()
        event_types = tuple(
            str(e.get("type", "?")) if isinstance(e, Mapping) else type(e).__name__ for e in events
        )
        return cls(
            id=result.id,
            outcome=result.outcome,
            terminal=result.terminal,
            level=getattr(result, "level", None),
            status=str(getattr(result, "status", contract.STATUS_MANDATORY)),
            selection=str(getattr(result, "selection", contract.SEL_SELECTED)),
            reason=getattr(result, "reason", None),
            duration_s=float(getattr(result, "duration_s", 0.0) or 0.0),
            event_types=event_types,
            findings=findings,
            message=message,
            upstream=upstream,
            started_at=jsonable(getattr(result, "started_at", None)),
            verdict=str(getattr(verdict, "level", "") or result.outcome),
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["event_types"] = list(self.event_types)
        data["findings"] = [f.to_dict() for f in self.findings]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseRecord:
        return cls(
            id=str(data["id"]),
            outcome=str(data["outcome"]),
            terminal=data.get("terminal"),
            level=data.get("level"),
            status=str(data.get("status", contract.STATUS_MANDATORY)),
            selection=str(data.get("selection", contract.SEL_SELECTED)),
            reason=data.get("reason"),
            duration_s=float(data.get("duration_s", 0.0)),
            event_types=tuple(data.get("event_types", ())),
            findings=tuple(Finding.from_dict(f) for f in data.get("findings", ())),
            message=data.get("message"),
            upstream=dict(data.get("upstream", {})),
            started_at=data.get("started_at"),
            verdict=str(data.get("verdict", "")),
            reproduce=data.get("reproduce"),
            trace=data.get("trace"),
        )


@dataclass(frozen=True)
class RunStarted:
    """The plan is built and written; cases are about to run."""

    target: str | None
    adapter: str
    profile: str
    schema_version: str
    cases: Sequence[PlannedCase]
    plan_path: str | None
    manifest_path: str | None
    model_id: str | None = None
    capabilities: Mapping[str, Any] | None = None
    started_at: float = field(default_factory=time.time)
    #: what the run tests with what (``metadata.run_metadata``)
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class CaseStarted:
    case_id: str
    started_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class CaseFinished:
    record: CaseRecord


@dataclass(frozen=True)
class RunFinished:
    """Every case has a record, in plan order."""

    records: Sequence[CaseRecord]
    duration_s: float
    interrupted: bool = False
    #: expired and stale waivers of the run's baseline (``baseline.py``)
    baseline_problems: tuple[str, ...] = ()

    @property
    def failed(self) -> list[CaseRecord]:
        return [r for r in self.records if r.blocking]

    @property
    def exit_code(self) -> int:
        return contract.EXIT_FAILED if self.failed or self.interrupted else contract.EXIT_OK


RunEvent = RunStarted | CaseStarted | CaseFinished | RunFinished


class EventHandler(Protocol):
    """A report: it sees every run event, in order, and writes its output when it can.

    A handler may also define ``start()`` (called once before the first event) and
    ``close()`` (once after the last); :class:`EventBus` calls them when present."""

    def handle_event(self, event: RunEvent) -> None: ...


@dataclass(frozen=True)
class HandlerError:
    """A report handler that raised: which one, at what point, and why."""

    handler: str
    phase: str  # "start", the event's class name, or "close"
    message: str

    def __str__(self) -> str:
        return f"report {self.handler} failed at {self.phase}: {self.message}"


def _name(handler: object) -> str:
    return str(getattr(handler, "name", None) or type(handler).__name__)


class EventBus:
    """Delivers each event to every handler, in order, with a lifecycle and error isolation.

    ``start()`` and ``close()`` frame the run. A handler that raises is reported in
    :attr:`errors` and gets no further events; the run and the other reports go on (one
    broken output never costs the others, nor the verdicts)."""

    def __init__(self, handlers: Iterable[EventHandler] = ()) -> None:
        self.handlers: list[EventHandler] = list(handlers)
        self.errors: list[HandlerError] = []
        self.run_started: RunStarted | None = None
        self.records: dict[str, CaseRecord] = {}
        self._failed: set[int] = set()

    def add(self, handler: EventHandler) -> None:
        self.handlers.append(handler)

    def _call(self, handler: EventHandler, phase: str, fn: Callable[[], object]) -> None:
        if id(handler) in self._failed:
            return
        try:
            fn()
        except Exception as exc:  # isolation is the point: any error of a report
            self._failed.add(id(handler))
            self.errors.append(HandlerError(_name(handler), phase,
                                            f"{type(exc).__name__}: {exc}"))

    def start(self) -> None:
        for handler in self.handlers:
            start = getattr(handler, "start", None)
            if callable(start):
                self._call(handler, "start", start)

    def emit(self, event: RunEvent) -> None:
        if isinstance(event, RunStarted):
            self.run_started = event
        elif isinstance(event, CaseFinished):
            self.records[event.record.id] = event.record
        phase = type(event).__name__
        for handler in self.handlers:
            self._call(handler, phase, functools.partial(handler.handle_event, event))

    def close(self) -> None:
        for handler in self.handlers:
            close = getattr(handler, "close", None)
            if callable(close):
                self._call(handler, "close", close)

    def ordered_records(self) -> list[CaseRecord]:
        """Records in plan order (xdist delivers them in completion order)."""
        order: dict[str, int] = {}
        if self.run_started is not None:
            order = {c.id: i for i, c in enumerate(self.run_started.cases)}
        return sorted(self.records.values(), key=lambda r: (order.get(r.id, len(order)), r.id))
