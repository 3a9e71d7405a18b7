"""The case-results JSON: upstream's format (its api-profile-case-results schema), our evidence in ``diagnostics``.

The document is validated against the ``case-results`` schema before it is written; a
document that breaks it is still written (so the evidence is not lost) and the violations
are kept on the handler for the face to report.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nnrp_conformance import validation
from nnrp_conformance.artifacts import write_json
from nnrp_conformance.events import CaseRecord, RunEvent, RunFinished, RunStarted

__all__ = ["CaseResultsHandler", "case_results_document"]


def case_results_document(started: RunStarted, records: Sequence[CaseRecord]) -> dict[str, Any]:
    """The upstream document: profile, schema_version, adapter, one result per case in order;
    each result's ``diagnostics.run`` says what the run tested with what (``metadata.py``:
    the upstream document has no other open place, and so every result stands on its own)."""
    results = []
    for r in records:
        item = dict(r.upstream)
        if started.metadata:
            item["diagnostics"] = {**item.get("diagnostics", {}), "run": dict(started.metadata)}
        results.append(item)
    return {
        "$schema": validation.schema_uri("case-results"),
        "profile": started.profile,
        "schema_version": started.schema_version,
        "adapter": started.adapter,
        "results": results,
    }



class CaseResultsHandler:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.started: RunStarted | None = None
        self.violations: list[validation.Violation] = []
        self.document: dict[str, Any] | None = None

    def handle_event(self, event: RunEvent) -> None:
        if isinstance(event, RunStarted):
            self.started = event
        elif isinstance(event, RunFinished) and self.started is not None:
            self.document = case_results_document(self.started, event.records)
            self.violations = list(validation.validate("case-results", self.document))
            write_json(self.path, self.document)
