"""The HTML report: one self-contained page (inline CSS, no scripts, no external assets)."""

from __future__ import annotations

import os
from html import escape
from pathlib import Path

from nnrp_conformance.events import RunEvent, RunFinished, RunStarted
from nnrp_conformance.reports.format import (
    findings_block,
    reason_text,
    summary_line,
    verdict_label,
)
from nnrp_conformance.reports.markdown import run_facts

__all__ = ["HtmlHandler", "render_html"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#1b1f24}
h1{font-size:1.4rem;margin-bottom:.3rem}
.verdict{font-weight:700;padding:.2rem .6rem;border-radius:.3rem;display:inline-block}
.v-passed{background:#dafbe1;color:#116329}.v-failed{background:#ffebe9;color:#a40e26}.v-waived{background:#ddf4ff;color:#0a3069}
.v-skipped,.v-not-exercised{background:#fff8c5;color:#7d4e00}
table{border-collapse:collapse;margin:1rem 0;font-size:.9rem}
th,td{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.85rem}
pre{background:#f6f8fa;padding:.6rem;border-radius:.3rem;overflow-x:auto;white-space:pre-wrap}
details{margin:.4rem 0}summary{cursor:pointer}
"""


def _verdict(label: str) -> str:
    return f'<span class="verdict v-{escape(label)}">{escape(label)}</span>'


def _href(target: str, base: Path | None) -> str:
    """``target`` as a link from a page in ``base`` (relative, so the folder can move)."""
    if base is None:
        return Path(target).as_uri()
    return Path(os.path.relpath(target, base)).as_posix()


def render_html(started: RunStarted | None, finished: RunFinished,
                base: Path | None = None) -> str:
    """The page; ``base`` is the folder it is written to (links to traces are relative)."""
    records = finished.records
    overall = "failed" if finished.failed else "passed"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>NNRP openai-compatible/1 conformance report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>NNRP openai-compatible/1 conformance report</h1>",
        f"<p>{_verdict(overall)} {escape(summary_line(records))}</p>",
        "<table>",
    ]
    parts += [f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in run_facts(
        started, finished)]
    parts.append("</table>")
    if finished.baseline_problems:
        parts.append("<h2>Baseline</h2><ul>")
        parts += [f"<li>{escape(p)}</li>" for p in finished.baseline_problems]
        parts.append("</ul>")
    parts += [
        "<h2>Recipes</h2>",
        "<table><tr><th>recipe</th><th>verdict</th><th>level</th><th>status</th>"
        "<th>events</th><th>duration</th><th>reason</th></tr>",
    ]
    for r in records:
        selected = not r.skipped or r.not_exercised  # a case that ran
        reason = reason_text(r, 240)
        anchor = f' href="#case-{escape(r.id)}"' if r.failed or r.event_types else ""
        name = f"<a{anchor}><code>{escape(r.id)}</code></a>" if anchor else (
            f"<code>{escape(r.id)}</code>")
        parts.append(
            f"<tr><td>{name}</td><td>{_verdict(verdict_label(r))}</td>"
            f"<td class=num>{'' if r.level is None else r.level}</td><td>{escape(r.status)}</td>"
            f"<td class=num>{len(r.event_types) if selected else ''}</td>"
            f"<td class=num>{f'{r.duration_s:.2f}s' if selected else ''}</td>"
            f"<td>{escape(reason)}</td></tr>"
        )
    parts.append("</table>")
    detailed = [r for r in records if r.failed or r.event_types]
    if detailed:
        parts.append("<h2>Details</h2>")
    for r in detailed:
        parts.append(f'<section id="case-{escape(r.id)}"><h3><code>{escape(r.id)}</code> '
                     f"{_verdict(verdict_label(r))}</h3>")
        if r.findings or (r.failed and r.message):
            lines: list[str] = []
            if not r.findings and r.message:
                lines.append(r.message)
            lines += findings_block(r)
            parts.append(f"<pre>{escape(chr(10).join(lines))}</pre>")
        for w in r.upstream.get("diagnostics", {}).get("waived", []):
            parts.append(f"<p>Waived: <code>{escape(w['rule'])}</code> until "
                         f"{escape(w['expires'])}: {escape(w['reason'])}</p>")
        if r.reproduce:
            parts.append(f'<p>Reproduce: <code class="reproduce">{escape(r.reproduce)}</code></p>')
        if r.trace and (r.failed or r.findings):
            parts.append(f'<p><a class="trace" href="{escape(_href(r.trace, base))}">frame '
                         f"trace</a> (NDJSON: every frame sent and received)</p>")
        if r.event_types:
            items = "".join(
                f"<li><code>#{i} {escape(t)}</code></li>" for i, t in enumerate(r.event_types)
            )
            parts.append(f"<details><summary>{len(r.event_types)} events</summary>"
                         f"<ol start=0>{items}</ol></details>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


class HtmlHandler:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.started: RunStarted | None = None

    def handle_event(self, event: RunEvent) -> None:
        if isinstance(event, RunStarted):
            self.started = event
        elif isinstance(event, RunFinished):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(render_html(self.started, event, self.path.parent.resolve()),
                                 encoding="utf-8", errors="backslashreplace")  # markdown.py
