"""The merged report of several runs (``nnrp-conformance merge``, and a fleet run's
``run --target A --target B``): Markdown, HTML and the terminal table, one column per run,
one row per recipe; disagreements, mismatched digests, the runs that disagree with the others
and (for a fleet) the targets that could not be judged called out."""

from __future__ import annotations

from html import escape
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from nnrp_conformance.artifacts import report_paths
from nnrp_conformance.merge import MergedRuns
from nnrp_conformance.reports.markdown import VERDICT_ICONS

__all__ = ["print_merged", "render_merged_html", "render_merged_markdown",
           "write_merged_reports"]

_STYLES = {"passed": "green", "failed": "bold red", "skipped": "dim"}


def _title(merged: MergedRuns) -> str:
    what = (f"fleet of {len(merged.runs) + len(merged.unjudged)} targets" if merged.fleet
            else "merged runs")
    return f"NNRP openai-compatible/1 conformance: {what}"


def _verdict(merged: MergedRuns) -> str:
    noun = "targets" if merged.fleet else "runs"
    failing = [r.label for r in merged.runs if r.failed]
    reasons = []
    if failing:
        reasons.append(f"{len(failing)} of {len(merged.runs)} {noun} have failures "
                       f"({', '.join(failing)})")
    if merged.fleet and merged.unjudged:
        reasons.append(f"{len(merged.unjudged)} could not be judged "
                       f"({', '.join(merged.unjudged)})")
    if merged.fleet and merged.capabilities_differ:
        reasons.append("the targets announce different capability documents")
    if reasons:
        return "FAILED: " + "; ".join(reasons)
    return f"PASSED: every case of all {len(merged.runs)} {noun} passed or was skipped"


def _callouts(merged: MergedRuns) -> list[tuple[str, str]]:
    """The lines of the 'Disagreements' section: (kind, plain text)."""
    lines = [("unjudged", f"{label}: not judged: {why}")
             for label, why in merged.unjudged.items()]
    lines += [("mismatch", m) for m in merged.mismatched]
    lines += [("disagreement", f"{recipe}: " + ", ".join(f"{k}: {v}" for k, v in seen.items()))
              for recipe, seen in merged.disagreements.items()]
    lines += [("disagreement", f"{label} disagrees with the others: {'; '.join(points)}")
              for label, points in merged.outliers.items()]
    return lines


def _run_rows(merged: MergedRuns) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for r in merged.runs:
        m = r.metadata
        rows.append((r.label, str(r.path), str(m.get("transport") or "-"),
                     f"{m.get('suite_version') or '-'} / {m.get('nnrp_py_version') or '-'}",
                     f"{len(r.failed)} failed"))
    return rows


def render_merged_markdown(merged: MergedRuns) -> str:
    out = [f"# {_title(merged)}", "", f"**{_verdict(merged)}**", ""]
    out += ["| run | results file | transport | suite / nnrp-py | failures |", "|---|---|---|---|---|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"
            for row in _run_rows(merged)]
    callouts = _callouts(merged)
    if callouts:
        out += ["", "## Disagreements", ""]
        out += [f"- {line}" for _kind, line in callouts]
    out += ["", "## Recipes", ""]
    out.append("| recipe | " + " | ".join(r.label.replace("|", "\\|") for r in merged.runs) + " |")
    out.append("|---|" + "---|" * len(merged.runs))
    for recipe in merged.recipes:
        cells = [VERDICT_ICONS.get(r.outcomes.get(recipe, ""), "—") for r in merged.runs]
        flag = " ⚠️" if recipe in merged.disagreements else ""
        out.append(f"| `{recipe}`{flag} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def render_merged_html(merged: MergedRuns) -> str:
    title = _title(merged)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{escape(title)}</title>",
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:.3em .6em}.failed{color:#b00}"
             ".passed{color:#070}.skipped{color:#777}.disagree{background:#fff3cd}</style>",
             f"</head><body><h1>{escape(title)}</h1><p><strong>{escape(_verdict(merged))}"
             "</strong></p>",
             "<table><tr><th>run</th><th>results file</th><th>transport</th>"
             "<th>suite / nnrp-py</th><th>failures</th></tr>"]
    parts += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>"
              for row in _run_rows(merged)]
    parts.append("</table>")
    callouts = _callouts(merged)
    if callouts:
        parts.append("<h2>Disagreements</h2><ul>")
        parts += [f"<li>{escape(line)}</li>" for _kind, line in callouts]
        parts.append("</ul>")
    parts.append("<h2>Recipes</h2><table><tr><th>recipe</th>"
                 + "".join(f"<th>{escape(r.label)}</th>" for r in merged.runs) + "</tr>")
    for recipe in merged.recipes:
        cls = ' class="disagree"' if recipe in merged.disagreements else ""
        cells = "".join(
            f'<td class="{escape(o)}">{escape(o or "—")}</td>'
            for o in (r.outcomes.get(recipe, "") for r in merged.runs))
        parts.append(f"<tr{cls}><td><code>{escape(recipe)}</code></td>{cells}</tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts) + "\n"


def print_merged(console: Console, merged: MergedRuns) -> None:
    """The merged table, the call-outs and the verdict on the terminal."""
    noun = "targets" if merged.fleet else "runs"
    table = Table(title=f"{len(merged.runs)} {noun} merged", title_justify="left")
    table.add_column("recipe", overflow="fold")
    for run in merged.runs:
        table.add_column(run.label, overflow="fold")
    for recipe in merged.recipes:
        cells = [Text(o or "—", style=_STYLES.get(o, ""))
                 for o in (r.outcomes.get(recipe, "") for r in merged.runs)]
        name = Text(recipe + (" (disagree)" if recipe in merged.disagreements else ""),
                    style="yellow" if recipe in merged.disagreements else "")
        table.add_row(name, *cells)
    if merged.runs:
        console.print(table)
    for kind, line in _callouts(merged):
        console.print(f"{kind}: {line}", markup=False, style="yellow", highlight=False)
    label = "fleet verdict" if merged.fleet else "merged verdict"
    console.print(Text(f"{label}: {_verdict(merged)}",
                       style="bold green" if merged.passed else "bold red"))


def write_merged_reports(merged: MergedRuns, path: Path) -> tuple[Path, Path]:
    md, html = report_paths(path)
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text(render_merged_markdown(merged), encoding="utf-8")
    html.write_text(render_merged_html(merged), encoding="utf-8")
    return md, html
