"""The rich terminal summary: one row per recipe, then the failures' findings, then counts."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from nnrp_conformance import contract
from nnrp_conformance.events import CaseFinished, CaseRecord, RunEvent, RunFinished, RunStarted
from nnrp_conformance.generate.report import saved_line
from nnrp_conformance.reports.format import (
    findings_block,
    reason_text,
    shrink_note,
    summary_line,
    verdict_label,
)

__all__ = ["MIN_WIDTH", "TerminalHandler", "render_summary", "summary_console"]

#: the summary is laid out for at least this many columns (CI logs do not wrap; a narrower
#: terminal wraps long rows instead of squeezing the columns to nothing)
MIN_WIDTH = 132


def summary_console(file: object = None, *, color: bool | None = None,
                    width: int | None = None) -> Console:
    """A console for the summary: never narrower than :data:`MIN_WIDTH`."""
    probe = Console(file=file) if file is not None else Console()  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {"highlight": False, "width": max(width or probe.width, MIN_WIDTH)}
    if file is not None:
        kwargs["file"] = file
    if color is not None:
        kwargs["force_terminal"] = color
        kwargs["color_system"] = "standard" if color else None
        kwargs["no_color"] = not color
    return Console(**kwargs)

#: a generated case's id starts so (``generate/run.py``)
GENERATED_PREFIX = "generated."
#: a run with generated cases prints its progress at least this often (seconds, as cases end)
PROGRESS_EVERY_S = 15.0

_STYLES = {"passed": "green", "failed": "bold red", "skipped": "yellow", "non-strict": "magenta",
           "informational": "cyan", "waived": "blue", "not-exercised": "yellow"}


def _table(records: Sequence[CaseRecord], title: str, width: int) -> Table:
    table = Table(title=title, title_justify="left", expand=False, show_lines=False)
    longest = max((len(r.id) for r in records), default=6)
    # Rich squeezes wrappable columns to nothing when a row is too wide, so every column is
    # no_wrap and the reason is clipped to what is left (the full findings follow the table).
    fixed = longest + 7 + 5 + 9 + 6 + 8 + 3 * 7 + 1
    budget = max(width - fixed, 16)
    for name, justify in (("recipe", "left"), ("verdict", "left"), ("level", "right"),
                          ("status", "left"), ("events", "right"), ("duration", "right")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    table.add_column("reason", no_wrap=True)
    for r in records:
        label = verdict_label(r)
        table.add_row(
            r.id,
            Text(label, style=_STYLES.get(label, "")),
            "" if r.level is None else str(r.level),
            r.status,
            str(len(r.event_types)) if not r.skipped or r.not_exercised else "",
            f"{r.duration_s:.2f}s" if not r.skipped or r.not_exercised else "",
            reason_text(r, budget),
        )
    return table


def render_summary(
    console: Console,
    records: Sequence[CaseRecord],
    *,
    started: RunStarted | None = None,
    written: Sequence[str] = (),
    baseline_problems: Sequence[str] = (),
) -> None:
    """Print the whole summary (table, failure details, artifacts, counts) to ``console``."""
    title = "NNRP openai-compatible/1 conformance"
    if started is not None:
        title += f": {started.adapter}"
        if started.target:
            title += f" @ {started.target}"
    console.print(_table(records, title, console.width), crop=False)
    meta = (started.metadata if started is not None else None) or {}
    if meta:
        console.print(
            f"transport {meta.get('transport') or '-'} · suite {meta.get('suite_version')} · "
            f"nnrp-py {meta.get('nnrp_py_version') or '-'} · Python {meta.get('python')} · "
            f"recipe set {str(meta.get('recipe_set_digest'))[:19]}…",
            markup=False, highlight=False, style="dim")
    failed = [r for r in records if r.failed and not r.waived]
    for r in failed:
        console.print(Text(f"FAILED {r.id} ({r.status})", style="bold red"))
        if not r.findings and r.message:
            console.print(f"  {r.message}", markup=False, highlight=False, soft_wrap=True)
        for line in findings_block(r):
            console.print("  " + line, markup=False, highlight=False, soft_wrap=True)
        if shrink_note(r):
            console.print(f"  {shrink_note(r)}", markup=False, highlight=False, soft_wrap=True)
        if r.reproduce:
            console.print(f"  reproduce: {r.reproduce}", markup=False, highlight=False,
                          soft_wrap=True)
        if r.trace:
            console.print(f"  frame trace: {r.trace}", markup=False, highlight=False,
                          soft_wrap=True)
    for r in records:
        if verdict_label(r) not in ("non-strict", "informational", "not-exercised"):
            continue
        console.print(Text(f"{verdict_label(r).upper()} {r.id} ({r.status})",
                           style=_STYLES[verdict_label(r)]))
        for line in findings_block(r):
            console.print("  " + line, markup=False, highlight=False, soft_wrap=True)
    for r in records:
        if r.waived:
            waivers = r.upstream.get("diagnostics", {}).get("waived", [])
            console.print(Text(f"WAIVED {r.id} ({r.status})", style=_STYLES["waived"]))
            for w in waivers:
                console.print(f"  [{w['rule']}] until {w['expires']}: {w['reason']}",
                              markup=False, highlight=False, soft_wrap=True)
    for problem in baseline_problems:
        console.print(Text(f"BASELINE {problem}", style="yellow"))
    for path in written:
        console.print(f"wrote {path}", markup=False, highlight=False, soft_wrap=True)
    saved = saved_line(records)
    if saved is not None:
        console.print(saved, markup=False, highlight=False, soft_wrap=True)
    style = "bold red" if [r for r in failed if r.blocking] else "bold green"
    console.print(Text(summary_line(records), style=style))


class TerminalHandler:
    """Prints the summary when the run finishes (the CLI face; the plugin calls render_summary).
    With ``progress``, a line per case as it ends and, in a run with generated cases, a
    progress line (cases done of all, failures so far) every tenth of the run and at least
    every :data:`PROGRESS_EVERY_S`."""

    def __init__(self, console: Console | None = None, *, progress: bool = False) -> None:
        self.console = console or summary_console()
        self.progress = progress
        self.started: RunStarted | None = None
        self.written: list[str] = []
        self._counted = _Progress()

    def handle_event(self, event: RunEvent) -> None:
        if isinstance(event, RunStarted):
            self.started = event
            self._counted = _Progress(len(event.cases), generating=any(
                c.id.startswith(GENERATED_PREFIX) for c in event.cases))
            if self.progress:
                selected = sum(1 for c in event.cases if c.selection == contract.SEL_SELECTED)
                self.console.print(
                    f"nnrp-conformance: {event.adapter} @ {event.target}: {selected} of "
                    f"{len(event.cases)} recipes selected (model {event.model_id or '-'})",
                    markup=False)
        elif isinstance(event, CaseFinished) and self.progress:
            r = event.record
            label = verdict_label(r)
            line = Text(f"{label.upper():8}", style=_STYLES.get(label, ""))
            line.append(f" {r.id}")
            if r.selection == contract.SEL_SELECTED:
                line.append(f" ({r.duration_s:.2f}s)")
            if shrink_note(r):
                line.append(f": {shrink_note(r)}")
            self.console.print(line)
            progress = self._counted.line(r)
            if progress is not None:
                self.console.print(progress, markup=False, highlight=False)
            # shown as it happens, in a pipe too (a CI log): stdout there is block-buffered
            self.console.file.flush()
        elif isinstance(event, RunFinished):
            render_summary(self.console, event.records, started=self.started, written=self.written,
                           baseline_problems=event.baseline_problems)


@dataclass
class _Progress:
    """The cases ended so far and the failures among them; the progress line when one is due."""

    total: int = 0
    generating: bool = False
    done: int = 0
    failed: int = 0
    begin: float = field(default_factory=time.monotonic)
    shown: float = field(default_factory=time.monotonic)

    def line(self, record: CaseRecord) -> str | None:
        self.done += 1
        self.failed += record.failed
        now = time.monotonic()
        step = max(1, self.total // 10)
        due = self.done % step == 0 or now - self.shown >= PROGRESS_EVERY_S
        if not self.generating or not (self.done == self.total
                                       or (due and now - self.shown >= 1.0)):
            return None
        self.shown = now
        return (f"progress: {self.done}/{self.total} cases done, {self.failed} failed so far "
                f"({now - self.begin:.0f} s)")
