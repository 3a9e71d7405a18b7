"""The merged report of several runs (``nnrp-conformance merge``): Markdown and HTML, one
column per run, one row per recipe, disagreements and mismatched digests called out."""

from __future__ import annotations

from html import escape
from pathlib import Path

from nnrp_conformance.artifacts import report_paths
from nnrp_conformance.merge import MergedRuns

__all__ = ["render_merged_html", "render_merged_markdown", "write_merged_reports"]

_MARK = {"passed": "✅ passed", "failed": "❌ failed", "skipped": "⏭️ skipped"}
_TITLE = "NNRP openai-compatible/1 conformance: merged runs"


def _verdict(merged: MergedRuns) -> str:
    failing = [r.label for r in merged.runs if r.failed]
    if not failing:
        return f"PASSED: every case of all {len(merged.runs)} runs passed or was skipped"
    return f"FAILED: {len(failing)} of {len(merged.runs)} runs have failures ({', '.join(failing)})"


def _run_rows(merged: MergedRuns) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for r in merged.runs:
        m = r.metadata
        rows.append((r.label, str(r.path), str(m.get("transport") or "-"),
                     f"{m.get('suite_version') or '-'} / {m.get('nnrp_py_version') or '-'}",
                     f"{len(r.failed)} failed"))
    return rows


def render_merged_markdown(merged: MergedRuns) -> str:
    out = [f"# {_TITLE}", "", f"**{_verdict(merged)}**", ""]
    out += ["| run | results file | transport | suite / nnrp-py | failures |", "|---|---|---|---|---|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"
            for row in _run_rows(merged)]
    if merged.mismatched or merged.disagreements:
        out += ["", "## Disagreements", ""]
        out += [f"- {m}" for m in merged.mismatched]
        out += [f"- `{recipe}`: " + ", ".join(f"{k}: {v}" for k, v in seen.items())
                for recipe, seen in merged.disagreements.items()]
    out += ["", "## Recipes", ""]
    out.append("| recipe | " + " | ".join(r.label.replace("|", "\\|") for r in merged.runs) + " |")
    out.append("|---|" + "---|" * len(merged.runs))
    for recipe in merged.recipes:
        cells = [_MARK.get(r.outcomes.get(recipe, ""), "—") for r in merged.runs]
        flag = " ⚠️" if recipe in merged.disagreements else ""
        out.append(f"| `{recipe}`{flag} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def render_merged_html(merged: MergedRuns) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{escape(_TITLE)}</title>",
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:.3em .6em}.failed{color:#b00}"
             ".passed{color:#070}.skipped{color:#777}.disagree{background:#fff3cd}</style>",
             f"</head><body><h1>{escape(_TITLE)}</h1><p><strong>{escape(_verdict(merged))}"
             "</strong></p>",
             "<table><tr><th>run</th><th>results file</th><th>transport</th>"
             "<th>suite / nnrp-py</th><th>failures</th></tr>"]
    parts += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>"
              for row in _run_rows(merged)]
    parts.append("</table>")
    if merged.mismatched or merged.disagreements:
        parts.append("<h2>Disagreements</h2><ul>")
        parts += [f"<li>{escape(m)}</li>" for m in merged.mismatched]
        parts += [f"<li><code>{escape(recipe)}</code>: " + escape(", ".join(
            f"{k}: {v}" for k, v in seen.items())) + "</li>"
            for recipe, seen in merged.disagreements.items()]
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


def write_merged_reports(merged: MergedRuns, path: Path) -> tuple[Path, Path]:
    md, html = report_paths(path)
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text(render_merged_markdown(merged), encoding="utf-8")
    html.write_text(render_merged_html(merged), encoding="utf-8")
    return md, html
