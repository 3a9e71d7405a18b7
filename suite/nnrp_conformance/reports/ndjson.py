"""The run's event stream as NDJSON (``--nnrp-report-ndjson PATH``): one JSON object per line,
one line per run event, written and flushed as it happens (schemathesis's ``--report ndjson``
is the model), so a CI log or a dashboard can follow a run live and a crashed run still leaves
every event up to the crash.

Lines: ``{"event": "RunStarted", ...}`` (target, adapter, profile, model, the plan's cases with
selection, and the run's metadata: ``metadata.py``), ``CaseStarted`` (``case_id``),
``CaseFinished`` (the case's record: verdict, findings with rule ids, reproduce command, trace),
``RunFinished`` (counts, duration, interrupted, exit code). Every line has ``at``, the wall
time it was written (seconds since the epoch).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Any

from nnrp_conformance.events import (
    CaseFinished,
    CaseStarted,
    RunEvent,
    RunFinished,
    RunStarted,
)
from nnrp_conformance.jsonsafe import jsonable

__all__ = ["NdjsonHandler", "event_line"]


def event_line(event: RunEvent) -> dict[str, Any]:
    """The JSON object of one run event."""
    line: dict[str, Any] = {"event": type(event).__name__, "at": round(time.time(), 6)}
    if isinstance(event, RunStarted):
        line.update(
            target=event.target, adapter=event.adapter, profile=event.profile,
            schema_version=event.schema_version, model=event.model_id,
            manifest=event.manifest_path, plan=event.plan_path,
            metadata=dict(event.metadata or {}),
            cases=[{"id": c.id, "selection": c.selection, "status": c.status,
                    "level": c.level} for c in event.cases],
        )
    elif isinstance(event, CaseStarted):
        line.update(case_id=event.case_id)
    elif isinstance(event, CaseFinished):
        record = event.record.to_dict()
        record.pop("upstream", None)  # the case-results document's copy; not repeated here
        line.update(record=record)
    elif isinstance(event, RunFinished):
        counts: dict[str, int] = {}
        for r in event.records:
            counts[r.verdict or r.outcome] = counts.get(r.verdict or r.outcome, 0) + 1
        line.update(duration_s=round(event.duration_s, 3), interrupted=event.interrupted,
                    exit_code=event.exit_code, counts=counts,
                    failed=[r.id for r in event.failed],
                    baseline_problems=list(event.baseline_problems))
    safe: dict[str, Any] = jsonable(line)
    return safe


class NdjsonHandler:
    """Writes each run event as one line, flushed at once."""

    name = "ndjson"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._out: IO[str] | None = None

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._out = self.path.open("w", encoding="utf-8", errors="backslashreplace")

    def handle_event(self, event: RunEvent) -> None:
        if self._out is None:
            self.start()
        assert self._out is not None
        self._out.write(json.dumps(event_line(event), ensure_ascii=False) + "\n")
        self._out.flush()

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
