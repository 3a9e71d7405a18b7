"""What a run's cases become for the reports, and how a run goes and ends, for both faces.

:func:`case_record` turns a case's result into the reports' record: the baseline's waivers
(``baseline.py``), the frame trace written (``trace.py``), and for a failed or non-strict case
the command that re-runs just it (``reproduce.py``). :func:`finish_run` ends a run: the
baseline's expired and stale waivers, and the baseline rewritten when asked.
:func:`fill_not_run` gives every case that never ran a record, and :func:`run_plan` is the
CLI's run loop (the pytest face runs the cases as test items and calls the same functions;
``--concurrency N`` batches are the CLI's).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Collection, Sequence
from typing import Any

from nnrp_conformance import case_results
from nnrp_conformance.baseline import Baseline, updated_baseline, write_baseline
from nnrp_conformance.events import (
    CaseFinished,
    CaseRecord,
    CaseStarted,
    EventBus,
    RunFinished,
)
from nnrp_conformance.options import SetupError
from nnrp_conformance.reproduce import reproduce_command
from nnrp_conformance.rules import LEVEL_NON_STRICT
from nnrp_conformance.security import is_security_case
from nnrp_conformance.session import ConformanceCore
from nnrp_conformance.trace import trace_file_name, write_trace

__all__ = ["NOT_RUN_REASON", "STOPPED_REASON", "case_record", "fill_not_run", "finish_run", "run_plan"]

NOT_RUN_REASON = "not run in this session (deselected or interrupted)"
STOPPED_REASON = "not run: the run stopped after {n} failed case(s) (--max-failures {n})"
DESELECTED_REASON = "deselected (-k / -m)"


def case_record(core: ConformanceCore, case: Any, result: Any) -> CaseRecord:
    """The reports' record of ``result``; the trace path and the reproduce command go in the
    record and in the case's diagnostics."""
    options = core.options
    if core.generated is not None:
        # lazy on purpose: hypothesis loads only for a generating run (see session.py)
        from nnrp_conformance.generate import settle

        case, result = settle(core, case, result)
    rec = CaseRecord.from_result(result)
    if core.baseline is not None:
        rec = core.baseline.apply(rec, dt.date.today())
    added: dict[str, Any] = {}
    trace_path = None
    if getattr(result, "trace", None) is not None and options.trace_dir is not None:
        trace_path = write_trace(options.trace_dir / trace_file_name(case.id), result.trace)
        added["trace"] = options.shown(trace_path)
    command = None
    if rec.failed or rec.verdict == LEVEL_NON_STRICT:
        # the model the case ran against: its operation's own (model_choice.py), pinned
        own = (getattr(core.plan, "models", None) or {}).get(case.operation)
        model = f"{case.operation}={own}" if own else core.model_id
        command = reproduce_command(options, case.recipe.path, case.id, model)
        added["reproduce"] = command
    if not added:
        return rec
    upstream = {**rec.upstream, "diagnostics": {**rec.upstream.get("diagnostics", {}),
                                                **added}}
    return dataclasses.replace(rec, reproduce=command, upstream=upstream,
                               trace=None if trace_path is None else str(trace_path))


def finish_run(core: ConformanceCore, records: Sequence[CaseRecord], duration_s: float,
               interrupted: bool = False) -> RunFinished:
    """The run's end. With ``--nnrp-baseline-update`` the baseline is rewritten from the run
    (not after an interrupted run: it would drop the waivers of the cases that never ran)."""
    problems: tuple[str, ...] = ()
    baseline = core.baseline
    if baseline is not None:
        today = dt.date.today()
        if core.options.baseline_update and not interrupted:
            waivers = updated_baseline(baseline, records, today)
            try:
                write_baseline(baseline.path, waivers)
            except OSError as exc:
                raise SetupError(f"cannot write the baseline {baseline.path}: "
                                 f"{exc.strerror or exc}") from None
            baseline = core.baseline = Baseline(baseline.path, waivers)
        problems = tuple(baseline.problems(records, today))
    return RunFinished(records, duration_s, interrupted, problems)


def fill_not_run(plan: Any, bus: EventBus, deselected: Collection[str] = (),
                 stopped_after: int | None = None) -> None:
    """Give every plan case without a record a skipped one, so the case results always
    hold one result per case and a partial run never passes for a complete one. A case
    pytest deselected (``-k``/``-m``) is marked so (``diagnostics.not_run: "deselected"``):
    the summary counts it as pytest does, deselected, not skipped. ``stopped_after``: the
    run stopped at its ``--max-failures`` count, which the reason names."""
    not_run = NOT_RUN_REASON if stopped_after is None else \
        STOPPED_REASON.format(n=stopped_after)
    for case in plan.cases:
        if case.id not in bus.records:
            rec = CaseRecord.from_result(case_results.skipped_result(case))
            why = DESELECTED_REASON if case.id in deselected else not_run
            upstream = {**rec.upstream, "message": why}
            upstream["diagnostics"] = {**upstream.get("diagnostics", {}), "reason": why,
                                       "not_run": "deselected" if case.id in deselected
                                       else True}
            bus.records[case.id] = dataclasses.replace(
                rec, reason=why, message=why, upstream=upstream)


def _batches(cases: Sequence[Any], n: int) -> list[list[Any]]:
    """The plan's cases in the order they run: with ``--concurrency N``, the selected ordinary
    cases N at a time; a case that is not run, or a concurrency recipe (already a group of
    its own) or a security case (on sessions of its own, ``security.py``), alone."""
    out: list[list[Any]] = []
    batch: list[Any] = []
    for case in cases:
        if n > 1 and case.selected and not case.companions and not is_security_case(case):
            batch.append(case)
            if len(batch) == n:
                out.append(batch)
                batch = []
        else:
            out.append([case])
    return [*out, batch] if batch else out


def run_plan(core: ConformanceCore, bus: EventBus) -> RunFinished:
    """Run every case of the plan in order, emitting the events; return the RunFinished."""
    begin = time.monotonic()
    bus.emit(core.run_started())
    interrupted = False
    limit = core.options.max_failures
    failed = 0
    try:
        for batch in _batches(core.plan.cases, core.options.concurrency):
            if limit is not None and failed >= limit:
                break
            for case in batch:
                bus.emit(CaseStarted(case.id))
            results = core.run_batch(batch) if len(batch) > 1 \
                else [core.run_case(case) for case in batch]
            for case, result in zip(batch, results, strict=True):
                record = case_record(core, case, result)
                failed += record.failed
                bus.emit(CaseFinished(record))
    except KeyboardInterrupt:
        interrupted = True
    stopped = limit if limit is not None and failed >= limit else None
    fill_not_run(core.plan, bus, stopped_after=stopped)
    finished = finish_run(core, bus.ordered_records(), time.monotonic() - begin, interrupted)
    bus.emit(finished)
    return finished
