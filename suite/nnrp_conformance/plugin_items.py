"""The pytest plugin's nodes: a target's plan as a collector (:class:`RecipeSuite`), one item per
recipe (:class:`RecipeItem`, marked ``level<N>``, its status and one marker per required
capability), the failure it raises and its h2spec-style text (:func:`format_failure`).

Each item runs its case through the core it was collected for (one per target of a fleet).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import case_results, contract
from nnrp_conformance.events import CaseRecord
from nnrp_conformance.recording import case_record
from nnrp_conformance.reports.format import event_runs, findings_block, shrink_note
from nnrp_conformance.session import ConformanceCore, SetupError

__all__ = ["BASE_MARKERS", "RecipeFailure", "RecipeItem", "RecipeSuite", "capability_marker",
           "format_failure"]

BASE_MARKERS = {
    **{f"level{lv}": f"NNRP recipe of compatibility Level {lv}" for lv in contract.LEVELS},
    **{s: f"NNRP recipe with status {s}" for s in contract.RECIPE_STATUSES},
    "nnrp": "an NNRP openai-compatible/1 conformance recipe",
}


def capability_marker(token: str) -> str:
    """A capability token as a marker name (``-m`` needs identifiers): ``api.streaming`` ->
    ``streaming``, ``api.extension.x-y.critical`` -> ``extension_x_y_critical``."""
    name = token.removeprefix("api.")
    name = re.sub(r"[^0-9A-Za-z_]+", "_", name).strip("_").lower()
    return name if name and not name[0].isdigit() else f"cap_{name}"


class RecipeFailure(Exception):
    """A selected recipe failed; carries its record for the h2spec-style report."""

    def __init__(self, record: CaseRecord) -> None:
        self.record = record
        super().__init__(f"{record.id}: {record.message or 'failed'}")


# --- nodes ------------------------------------------------------------------------------------


class RecipeSuite(pytest.Collector):
    """One target's plan as a collector: one item per recipe, in plan order."""

    def __init__(self, *, core: ConformanceCore, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.core = core

    def collect(self) -> list[pytest.Item]:
        core = self.core
        return [RecipeItem.from_parent(self, name=case.id, case=case, core=core)
                for case in core.plan.cases]


class RecipeItem(pytest.Item):
    """One recipe run against the target; a failure raises :class:`RecipeFailure`."""

    def __init__(self, *, case: Any, core: ConformanceCore, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.core = core
        self.record: CaseRecord | None = None
        names = ["nnrp", f"level{case.level}", case.status]
        names += [capability_marker(t) for t in case.required_capabilities]
        registered = {line.split(":", 1)[0].strip() for line in self.config.getini("markers")}
        for name in dict.fromkeys(names):
            if name not in registered:
                self.config.addinivalue_line("markers", f"{name}: NNRP recipe capability")
            self.add_marker(name)
        self.extra_keyword_matches.update(case.required_capabilities)
        self.user_properties += [("nnrp_recipe", case.id), ("nnrp_level", str(case.level)),
                                 ("nnrp_status", case.status)]
        if case.selection != contract.SEL_SELECTED:
            self.add_marker(pytest.mark.skip(reason=f"{case.selection}: {case.reason or ''}"
                                             .rstrip(": ")))

    def skipped_record(self) -> CaseRecord:
        return CaseRecord.from_result(case_results.skipped_result(self.case))

    def runtest(self) -> None:
        core = self.core
        try:
            result = core.run_case(self.case)
        except SetupError as exc:
            pytest.fail(str(exc), pytrace=False)
        self.record = record = case_record(core, self.case, result)
        if record.waived:
            rules = ", ".join(sorted({f.rule for f in record.findings}))
            pytest.xfail(f"waived by the baseline ({rules})")
        if record.failed:
            raise RecipeFailure(record)
        if record.not_exercised:  # it ran: its message says what did not happen
            pytest.skip(record.message or "not exercised")
        if record.skipped:
            pytest.skip(record.reason or record.message or "skipped by the runner")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str | Any:
        if isinstance(excinfo.value, RecipeFailure):
            return format_failure(excinfo.value.record, self.case)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # a line number is required for skip reports; recipes have no meaningful one
        return self.case.recipe.path, 0, f"recipe {self.case.id}"


def format_failure(record: CaseRecord, case: Any) -> str:
    expected = case.expect.get("terminal", contract.TERMINAL_SUCCESS)
    lines = [
        f"recipe {record.id} ({record.status}, level {record.level}) FAILED",
        f"  recipe file: {case.recipe.path}",
        f"  terminal: seen {record.terminal!r}, expected {expected!r}",
        f"  events ({len(record.event_types)}): {event_runs(record.event_types)}",
    ]
    if record.message and not record.findings:
        lines.append(f"  verdict: {record.message}")
    lines += findings_block(record, numbered=True)
    if shrink_note(record):
        lines.append(f"  {shrink_note(record)}")
    if record.reproduce:
        lines.append(f"  reproduce: {record.reproduce}")
    if record.trace:
        lines.append(f"  frame trace: {record.trace}")
    return "\n".join(lines)
