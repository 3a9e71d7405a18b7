"""The Markdown report: run facts, a table of every recipe, then each failure's findings."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from nnrp_conformance.events import CaseRecord, RunEvent, RunFinished, RunStarted
from nnrp_conformance.reports.format import (
    event_runs,
    findings_block,
    reason_text,
    summary_line,
    verdict_label,
)

__all__ = ["VERDICT_ICONS", "MarkdownHandler", "render_markdown"]

#: how a verdict reads in a Markdown table (the merged report uses the same)
VERDICT_ICONS = {"passed": "✅ passed", "failed": "❌ failed", "skipped": "⏭️ skipped",
          "non-strict": "⚠️ non-strict", "informational": "ℹ️ informational",
          "waived": "🔕 waived", "not-exercised": "⏭️ not exercised"}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def run_facts(started: RunStarted | None, finished: RunFinished) -> list[tuple[str, str]]:
    facts: list[tuple[str, str]] = []
    if started is not None:
        facts += [
            ("adapter", started.adapter),
            ("profile", f"{started.profile} ({started.schema_version})"),
            ("target", started.target or "-"),
            ("manifest", started.manifest_path or "-"),
            ("model", started.model_id or "-"),
            ("plan", started.plan_path or "-"),
            ("started", time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started.started_at))),
        ]
        meta = started.metadata or {}
        facts += [(label, str(meta[key])) for key, label in (
            ("transport", "transport"), ("suite_version", "suite version"),
            ("nnrp_py_version", "nnrp-py version"), ("python", "Python"),
            ("manifest_digest", "manifest digest"), ("recipe_set_digest", "recipe set digest"),
        ) if meta.get(key) is not None]
    facts.append(("duration", f"{finished.duration_s:.2f}s"))
    facts.append(("result", summary_line(finished.records)))
    return facts


def render_markdown(started: RunStarted | None, finished: RunFinished) -> str:
    records: Sequence[CaseRecord] = finished.records
    out = ["# NNRP openai-compatible/1 conformance report", ""]
    verdict = "FAILED" if finished.failed else "PASSED"
    out += [f"**{verdict}**: {summary_line(records)}", ""]
    out += ["| | |", "|---|---|"]
    out += [f"| {_cell(k)} | {_cell(v)} |" for k, v in run_facts(started, finished)]
    out += ["", "## Recipes", ""]
    out += ["| recipe | verdict | level | status | events | duration | reason |"]
    out += ["|---|---|---|---|---:|---:|---|"]
    for r in records:
        selected = not r.skipped or r.not_exercised  # a case that ran
        reason = reason_text(r, 240)
        out.append(
            "| "
            + " | ".join(
                _cell(x)
                for x in (
                    f"`{r.id}`",
                    VERDICT_ICONS.get(verdict_label(r), r.outcome),
                    "" if r.level is None else r.level,
                    r.status,
                    len(r.event_types) if selected else "",
                    f"{r.duration_s:.2f}s" if selected else "",
                    reason,
                )
            )
            + " |"
        )
    failed = [r for r in records if r.failed and not r.waived]
    waived = [r for r in records if r.waived]
    noted = [r for r in records if verdict_label(r) in ("non-strict", "informational")]
    unexercised = [r for r in records if r.not_exercised]
    if finished.baseline_problems:
        out += ["", "## Baseline", ""] + [f"- {p}" for p in finished.baseline_problems]
    for title, group in (("Failures", failed), ("Waived (accepted by the baseline)", waived),
                         ("Non-strict and informational", noted),
                         ("Not exercised (judged nothing about what they are about)",
                          unexercised)):
        if not group:
            continue
        out += ["", f"## {title}", ""]
        for r in group:
            out += [f"### `{r.id}` ({r.status})", ""]
            if r.event_types:
                out += [f"Events seen: {event_runs(r.event_types)}", ""]
            out.append("```text")
            if not r.findings and r.message:
                out.append(r.message)
            out += findings_block(r)
            out += ["```", ""]
            for w in r.upstream.get("diagnostics", {}).get("waived", []):
                out += [f"Waived: `{w['rule']}` until {w['expires']}: {w['reason']}", ""]
            if r.reproduce:
                out += ["Reproduce:", "", "```sh", r.reproduce, "```", ""]
            if r.trace:
                out += [f"Frame trace: `{r.trace}`", ""]
    return "\n".join(out).rstrip() + "\n"


class MarkdownHandler:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.started: RunStarted | None = None

    def handle_event(self, event: RunEvent) -> None:
        if isinstance(event, RunStarted):
            self.started = event
        elif isinstance(event, RunFinished):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # backslashreplace: endpoint text the record did not escape (its capability
            # document) is shown, never a reason to leave the file empty
            self.path.write_text(render_markdown(self.started, event), encoding="utf-8",
                                 errors="backslashreplace")
