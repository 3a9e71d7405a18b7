"""Shared wording of the reports: verdict labels, counts, and h2spec-style finding lines."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from nnrp_conformance import rules
from nnrp_conformance.events import CaseRecord
from nnrp_conformance.findings import Finding

__all__ = [
    "MAX_FINDINGS_SHOWN",
    "clip",
    "counts",
    "event_runs",
    "finding_lines",
    "findings_block",
    "not_run",
    "reason_text",
    "render_value",
    "shrink_note",
    "summary_line",
    "verdict_label",
]

_MAX_VALUE = 240  # characters of an expected/seen value shown inline
#: findings printed per case; the case results JSON keeps all of them
MAX_FINDINGS_SHOWN = 8


def verdict_label(record: CaseRecord) -> str:
    """passed / non-strict / failed / informational / skipped (rules.py levels), or
    not-exercised (a case that ran, ``skipped`` in upstream's outcome: checks/exercise.py)."""
    if record.not_exercised:
        return "not-exercised"
    if record.skipped:
        return "skipped"
    return record.verdict or record.outcome


def clip(text: str, width: int | None) -> str:
    if width is None or len(text) <= width:
        return text
    return text[: max(width - 1, 0)] + "…"


def reason_text(record: CaseRecord, width: int | None = None) -> str:
    """The one-line reason of a row: a failure's first failed finding (and how many more
    findings: a recommendation found before it is not why the case failed), else the verdict
    message, else why the case was skipped."""
    if record.failed and record.findings:
        first = next((f for f in record.findings if f.level == rules.LEVEL_FAILED),
                     record.findings[0])
        text = f"{first.rule}: {first.message}"
        if len(record.findings) > 1:
            more = f" (+{len(record.findings) - 1} more)"
            return clip(text, None if width is None else width - len(more)) + more
        return clip(text, width)
    if record.failed and record.message:
        return clip(record.message, width)
    if record.findings and (not record.skipped or record.not_exercised):
        first = record.findings[0]
        return clip(f"{first.level}: {first.rule}: {first.message}", width)
    return clip(record.reason or "", width)


def not_run(record: CaseRecord) -> str | None:
    """``deselected`` (pytest's -k/-m) or ``not run`` (interrupted) for a case this session
    never ran, else None (a case the plan skipped is skipped, as pytest says)."""
    diagnostics = record.upstream.get("diagnostics") if isinstance(record.upstream, dict) \
        else None
    mark = diagnostics.get("not_run") if isinstance(diagnostics, dict) else None
    if mark == "deselected":
        return "deselected"
    return "not run" if mark is True else None


def counts(records: Iterable[CaseRecord]) -> dict[str, int]:
    """Cases per outcome as pytest counts them; a waived failure counts as ``waived``, not as
    failed or passed; a case never run is ``deselected`` or ``not run``, not skipped; a case
    that ran without exercising what it is about is ``not exercised``, not skipped."""
    out = {"passed": 0, "failed": 0, "skipped": 0, "waived": 0, "deselected": 0, "not run": 0,
           "not exercised": 0}
    for r in records:
        key = "waived" if r.waived else "not exercised" if r.not_exercised else (
            not_run(r) if r.skipped else None) or r.outcome
        out[key] = out.get(key, 0) + 1
    return out


def summary_line(records: Sequence[CaseRecord]) -> str:
    """'N passed, N failed[, N waived], N skipped[, N not exercised][, N deselected][, N not
    run]' (the plain closing line CI readers understand, counting as pytest does, which counts
    a not-exercised case as skipped), then how many of the passed were non-strict or
    informational."""
    c = counts(records)
    waived = f", {c['waived']} waived" if c["waived"] else ""
    line = f"{c['passed']} passed, {c['failed']} failed{waived}, {c['skipped']} skipped"
    line += "".join(f", {c[k]} {k}" for k in ("not exercised", "deselected", "not run") if c[k])
    notes = [f"{n} {label}" for label in ("non-strict", "informational")
             if (n := sum(1 for r in records if verdict_label(r) == label))]
    return line + (f" ({', '.join(notes)})" if notes else "")


def render_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=repr)
    if len(text) > _MAX_VALUE:
        text = text[: _MAX_VALUE - 1] + "…"
    return text


def finding_lines(case_id: str, finding: Finding) -> list[str]:
    """One finding as an indented block: rule and citation, where, expected vs seen."""
    head = f"{case_id}: [{finding.rule}]"
    if finding.level != "failed":
        head += f" {finding.level.upper()}"
    if finding.spec:
        head += f" ({finding.spec})"
    lines = [head, f"  {finding.message}"]
    if finding.event_index is not None:
        lines.append(f"  at event #{finding.event_index}")
    # a twin finding (twin/) holds the HTTP API's answer and the NNRP one: side by side
    twin = finding.rule.startswith("twin.")
    if finding.expected is not None:
        label = "HTTP:" if twin else "recommended:" if finding.level == "non-strict" \
            else "expected:"
        lines.append(f"  {label} {render_value(finding.expected)}")
    if finding.seen is not None:
        lines.append(f"  {'NNRP:' if twin else 'seen:    '} {render_value(finding.seen)}")
    return lines


def findings_block(record: CaseRecord, *, numbered: bool = False) -> list[str]:
    """Every finding's lines (at most :data:`MAX_FINDINGS_SHOWN`), then how many were left out."""
    lines: list[str] = []
    shown = record.findings[:MAX_FINDINGS_SHOWN]
    for n, finding in enumerate(shown, 1):
        block = finding_lines(record.id, finding)
        lines.append(f"finding {n}: {block[0]}" if numbered else block[0])
        lines += block[1:]
    hidden = len(record.findings) - len(shown)
    if hidden > 0:
        lines.append(f"… and {hidden} more finding(s) (all of them are in the case results)")
    return lines


def shrink_note(record: CaseRecord) -> str | None:
    """How shrinking a generated failure went, when it drops the session (``generate/run.py``):
    ``shrinking stopped after 4 tries / 10.2 s: the case drops the session``."""
    generated = (record.upstream.get("diagnostics") or {}).get("generated")
    note = generated.get("shrink_note") if isinstance(generated, dict) else None
    return note if isinstance(note, str) else None


def event_runs(types: Sequence[str]) -> str:
    """``#0-#15 response.output_text.delta ×16, #16 response.completed``."""
    parts: list[str] = []
    i = 0
    while i < len(types):
        j = i
        while j + 1 < len(types) and types[j + 1] == types[i]:
            j += 1
        parts.append(f"#{i} {types[i]}" if i == j else f"#{i}-#{j} {types[i]} ×{j - i + 1}")
        i = j + 1
    return ", ".join(parts) or "none"
