"""Several operations in flight at once: a concurrency recipe's group (on one session, or on
two when an operation says ``session: another``), or a batch of ordinary cases
(``--concurrency N``), and their judged results.

Owns: submitting every operation before any is read to its end (a barrier on the client's
``submit``; each operation then runs through :func:`runner.run_case` unchanged, so each is
judged by its own expectations as usual), recording the overlap the endpoint allowed (an
operation it ended before the last submit went out was served one after another: allowed, and
reported), judging the operations side by side (``checks/concurrency.py``), and folding a
group into the one :class:`CaseResult` of its recipe. The runner stays one case, one
operation; this module never reads frames itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from nnrp_conformance import authority, case_results, contract, rules, runner
from nnrp_conformance.checks.concurrency import Member, judge_group
from nnrp_conformance.checks.model import verdict_of
from nnrp_conformance.findings import Finding
from nnrp_conformance.recipes import LEAD_OPERATION, SESSION_ANOTHER

if TYPE_CHECKING:
    from nnrp_conformance.planner import PlannedCase

__all__ = ["group_result", "judged_alone", "judged_alone_after_loss", "lost_in_batch",
           "members_of", "refused_in_batch", "run_batch", "run_group"]


class _Barrier:
    """Holds each submitted operation until all ``n`` are submitted (a submit that failed
    counts too, so nobody waits for it); later submits (a cancel race's rerun) pass."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.done = anyio.Event()
        self.submitted = 0
        self.ops: dict[str, list[Any]] = {}
        self.last_submit_ns: int | None = None

    async def submit(self, client: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            op = await client.submit(*args, **kwargs)
            self.ops.setdefault(name, []).append(op)
            self.last_submit_ns = getattr(op, "submitted_at_ns", None)
            return op
        finally:
            self.submitted += 1
            if self.submitted >= self.n:
                self.done.set()
            await self.done.wait()

    def overlap(self, names: Sequence[str]) -> dict[str, Any]:
        """What overlapped: the operations already ended (their terminal received) when the
        last one was submitted were served one after another."""
        last = self.last_submit_ns
        early = [n for n in names for op in self.ops.get(n, [])[:1]
                 if last is not None and _ended_at(op) is not None and _ended_at(op) < last]
        return {"submitted": len(names), "in_flight_at_last_submit": len(names) - len(early),
                "ended_before_last_submit": early}


def _ended_at(op: Any) -> Any:
    return getattr(getattr(op, "terminal", None), "received_at_ns", None)


@dataclasses.dataclass(frozen=True)
class _Submitter:
    """What the runner sees as its client: submits go through the barrier, by name, to the
    client of the operation's session."""

    barrier: _Barrier
    client: Any
    name: str

    async def submit(self, *args: Any, **kwargs: Any) -> Any:
        return await self.barrier.submit(self.client, self.name, *args, **kwargs)


async def run_group(client: Any, cases: Sequence[PlannedCase], *, other_client: Any = None,
                    **run_options: Any) -> tuple[list[case_results.CaseResult], dict[str, Any]]:
    """Run ``cases`` as operations in flight together (module doc): each result as
    :func:`runner.run_case` judges it, in the order of ``cases``, and the overlap achieved.
    An operation whose ``session`` is ``another`` is submitted with ``other_client`` (a
    second session, opened by the caller), every other with ``client``."""
    names = [_name(c) for c in cases]
    barrier = _Barrier(len(cases))
    results: list[case_results.CaseResult | None] = [None] * len(cases)

    def client_of(case: PlannedCase) -> Any:
        if case.session != SESSION_ANOTHER:
            return client
        if other_client is None:
            raise ValueError(f"{case.id} is submitted on another session, and none is open")
        return other_client

    async def one(i: int) -> None:
        results[i] = await runner.run_case(_Submitter(barrier, client_of(cases[i]), names[i]),
                                            cases[i], **run_options)

    async with anyio.create_task_group() as tg:
        for i in range(len(cases)):
            tg.start_soon(one, i)
    done = [r for r in results if r is not None]
    return done, barrier.overlap(names)


def _name(case: PlannedCase) -> str:
    return case.name or (LEAD_OPERATION if case.companions else case.id)


def members_of(cases: Sequence[PlannedCase], results: Sequence[case_results.CaseResult]
               ) -> list[Member]:
    """Each judged operation as the cross-operation checks read it."""
    members = []
    for case, result in zip(cases, results, strict=True):
        # the runner appends the terminal event (when there was one) after the partials
        events = list(result.events)
        ended = bool(events) and events[-1].get("type") in contract.TERMINAL_EVENT_TYPES \
            and result.terminal is not None
        terminal = events.pop() if ended else None
        members.append(Member(
            _name(case), case.expected_terminal, result.terminal, events, terminal,
            result.diagnostics.get("cancelled_after_event") is not None,
            list(result.verdict.findings), span_ns=result.span_ns,
            status_code=result.diagnostics.get("status_code"),
            drop_reason=result.diagnostics.get("drop_reason"),
            terminal_rule=authority.terminal_rule(case.expect), session=case.session))
    return members


def _rejudged(result: case_results.CaseResult, findings: list[Finding], extra: dict[str, Any]
              ) -> case_results.CaseResult:
    """``result`` with ``findings`` (its own and the group's) as its verdict."""
    verdict = result.verdict if findings == result.verdict.findings else \
        verdict_of(result.id, result.terminal, findings, len(result.events))
    return dataclasses.replace(result, outcome=verdict.outcome, verdict=verdict,
                               diagnostics={**result.diagnostics, **extra})


async def run_batch(client: Any, cases: Sequence[PlannedCase], *, strict: bool = False,
                    **run_options: Any) -> list[case_results.CaseResult]:
    """``--concurrency N``: ordinary cases in flight together, each judged as usual plus the
    cross-operation rules; each result's diagnostics say what it overlapped with. A case the
    endpoint refused admission (the overload row, :func:`refused_in_batch`) is run again on
    its own by the caller (``run_cases``, on a clean session) and judged by
    :func:`judged_alone`."""
    results, overlap = await run_group(client, cases, strict=strict, **run_options)
    members = members_of(cases, results)
    judge_group(members, strict=strict)
    return [_rejudged(r, m.findings, {"concurrency": {**overlap, "batch": [c.id for c in cases]}})
            for r, m in zip(results, members, strict=True)]


def refused_in_batch(result: case_results.CaseResult) -> bool:
    """The batch case was refused admission (its verdict rests on ``concurrency.refused``)."""
    return "batch" in (result.diagnostics.get("concurrency") or {}) and any(
        f.rule == "concurrency.refused" for f in result.verdict.findings)


def judged_alone(refused: case_results.CaseResult,
                 again: case_results.CaseResult) -> case_results.CaseResult:
    """A batch case the endpoint refused, judged on its run with nothing else in flight
    (``again``). Which operations of a batch an endpoint over its limit refuses is a race
    (which of its earlier operations had ended when each submit arrived), and a refused case
    was never tested: the verdict is the lone run's, so it does not depend on that race
    (docs/verdicts.md#stable-verdicts). The refusal is kept in
    ``diagnostics.concurrency.refused`` (its error and findings), and its own faults (its error
    body, event, frames, terminal) still count."""
    own = [f for f in refused.verdict.findings
           if f.rule != "concurrency.refused" and f.level != rules.LEVEL_INFORMATIONAL]
    err = refused.events[-1].get("error") if refused.events else None
    note: dict[str, Any] = {"error": err, "ran_again": "alone",
                            "findings": [f.to_dict() for f in refused.verdict.findings]}
    if "left_open_earlier" in refused.diagnostics:
        note["left_open_earlier"] = refused.diagnostics["left_open_earlier"]
    batch = {**refused.diagnostics["concurrency"], "refused": note}
    return _rejudged(again, [*again.verdict.findings, *own], {"concurrency": batch})


def lost_in_batch(result: case_results.CaseResult) -> bool:
    """The batch case's operation was never ended on the session (``run_cases`` marks it
    ``left_open``, or ``session_dropped`` when the client saw the session go)."""
    diag = result.diagnostics
    return "batch" in (diag.get("concurrency") or {}) and (
        "left_open" in diag or "session_dropped" in diag)


def judged_alone_after_loss(lost: case_results.CaseResult,
                            again: case_results.CaseResult) -> case_results.CaseResult:
    """A batch case whose operation the session never ended, judged on its run alone on a
    fresh session (``again``). An endpoint that drops a whole session or stops serving it
    (``drop-on-tools``) leaves every operation in flight beside the one that caused it
    unended, and nothing on the wire says which one did (nnrp-py tells the client nothing
    when the server closes a session; docs/verdicts.md#stable-verdicts): the lone run says
    it. The case that causes it fails there again, once; the others pass. The batch run is
    kept in ``diagnostics.concurrency.left_open`` (its findings)."""
    note: dict[str, Any] = {"ran_again": "alone",
                            "terminal_delivery": lost.diagnostics.get("terminal_delivery"),
                            "findings": [f.to_dict() for f in lost.verdict.findings]}
    batch = {**lost.diagnostics["concurrency"], "left_open": note}
    return _rejudged(again, list(again.verdict.findings), {"concurrency": batch})


def group_result(case: PlannedCase, results: Sequence[case_results.CaseResult],
                 overlap: dict[str, Any], *, strict: bool = False) -> case_results.CaseResult:
    """A concurrency recipe's one result: its operations judged side by side; the case fails
    when any operation does. The lead operation's events are the case's events; every
    operation's outcome, terminal and findings are in ``diagnostics.concurrency``."""
    cases = [case, *case.companions]
    members = members_of(cases, results)
    judge_group(members, strict=strict)
    findings = [dataclasses.replace(f, message=f"[{m.name}] {f.message}")
                for m in members for f in m.findings]
    lead = results[0]
    operations = [{"name": m.name, "session": m.session,
                   "request_id": r.diagnostics.get("request_id"),
                   "outcome": verdict_of(m.name, r.terminal, m.findings, 0).outcome,
                   "expected_terminal": m.expected_terminal, "terminal": r.terminal, "events": len(r.events),
                   "findings": [f.to_dict() for f in m.findings],
                   "timings_ms": r.diagnostics.get("timings_ms")}
                  for m, r in zip(members, results, strict=True)]
    out = _rejudged(lead, findings, {"concurrency": {**overlap, "operations": operations}})
    return dataclasses.replace(out, duration_s=max(r.duration_s for r in results))
