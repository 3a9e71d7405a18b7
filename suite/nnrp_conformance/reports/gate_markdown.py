"""The release gate's Markdown page, rendered from the release-gate report document alone, in
the HTML page's order (:data:`gate_summary.SECTIONS`): the verdict, the five conditions, the
Levels per vLLM version with the reason for every level not claimed, the recipes per version,
the parity ratios; then each benchmark, the evidence files and the environment."""

from __future__ import annotations

from typing import Any

from nnrp_conformance.reports import gate_summary as summary
from nnrp_conformance.reports.gate_charts import parity_series
from nnrp_conformance.reports.gate_summary import Cell, level_rows

__all__ = ["Cell", "level_rows", "render_gate_markdown"]


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    return _cell(value)


def _evidence(report: dict[str, Any], entry: str) -> str:
    link = summary.evidence_link(report, entry)
    return f"[{_cell(link.text)}]({link.href})" if link.href else _cell(link.text)


def _conditions(report: dict[str, Any]) -> list[str]:
    lines = ["| condition | verdict | reason |", "|---|---|---|"]
    for gate in report["gates"]:
        mark = "pass" if gate["passed"] else "**FAIL**"
        lines.append(f"| `{gate['name']}` | {mark} | {_cell(gate['reason'])} |")
    for gate in report["gates"]:
        lines += ["", f"### `{gate['name']}`", ""]
        failures = gate.get("details", {}).get("failures")
        if failures:
            lines += [f"- {_cell(f)}" for f in failures]
        lines.append(f"- {'passed' if gate['passed'] else 'failed'}: {gate['reason']}")
        lines += [f"- evidence: {_evidence(report, e)}" for e in gate["evidence"]]
    return lines


def _levels(report: dict[str, Any]) -> list[str]:
    names, rows = level_rows(report)
    if not rows:
        return ["No level claims recorded."]
    lines = ["| level | " + " | ".join(f"vLLM {v}" for v in names) + " |",
             "|---|" + "---|" * len(names)]
    lines += [f"| {level} | " + " | ".join(_cell(c.text) for c in cells) + " |"
              for level, cells in rows]
    reasons = summary.level_reasons(report)
    if reasons:
        lines += ["", "Not claimed, and why:", ""]
        lines += [f"- vLLM {v}, Level {level}: {_cell(why)}" for v, level, why in reasons]
    return lines


def _recipes(report: dict[str, Any]) -> list[str]:
    counts = summary.recipe_counts(report)
    if not counts:
        return ["No recipe results recorded."]
    lines = ["| vLLM | passed | not passed |", "|---|---|---|"]
    lines += [f"| {v} | {passed}/{total} | {', '.join(f'`{b}`' for b in bad) or '—'} |"
              for v, passed, total, bad in counts]
    versions = summary.gate(report, "recipes_pass").get("details", {}).get("versions", {})
    for version, rows in versions.items():
        lines += ["", f"<details><summary>Every recipe on vLLM {version}</summary>", "",
                  "| recipe | status | level | outcome | terminal | ms | message |",
                  "|---|---|---|---|---|---|---|"]
        lines += [
            f"| `{r['id']}` | {r['status']} | {_cell(r.get('level'))} | {r['outcome']} | "
            f"{_cell(r.get('terminal'))} | {_num(r.get('duration_ms'))} | "
            f"{_cell(r.get('message'))} |"
            for r in rows
        ]
        lines += ["", "</details>"]
    return lines


def _parity(report: dict[str, Any]) -> list[str]:
    rows = summary.parity_rows(report)
    if not rows:
        return ["No parity run recorded."]
    lines = ["NNRP / HTTP, median; in brackets the range over rounds where recorded."]
    for version in dict.fromkeys(r.version for r in rows):
        mine = [r for r in rows if r.version == version]
        series = parity_series(mine)
        by_key = {(r.metric, r.concurrency, r.column, r.workload): r for r in mine}
        lines += ["", f"### vLLM {version}", "",
                  "| ratio | c | " + " | ".join(f"{c} ({w})" for c, w in series) + " |",
                  "|---|---|" + "---|" * len(series)]
        for metric, c in dict.fromkeys((r.metric, r.concurrency) for r in mine):
            cells = []
            for col, wl in series:
                r = by_key.get((metric, c, col, wl))
                if r is None:
                    cells.append("—")
                    continue
                spread = (f" ({r.low:.2f}–{r.high:.2f})"
                          if r.low is not None and r.high is not None else "")
                cells.append(f"{r.value:.3f}{spread}")
            label, better = summary.PARITY_METRICS[metric]
            lines.append(f"| {label} ({better}) | {c} | " + " | ".join(cells) + " |")
    return lines


def _benchmarks(report: dict[str, Any]) -> list[str]:
    benches = summary.benchmarks(report)
    if not benches:
        return ["No valid benchmark documents recorded."]
    lines: list[str] = []
    for b in benches:
        where = f"vLLM {b['vllm']}" if b.get("vllm") else "version-independent"
        title = b.get("title") or b.get("description") or ""
        lines += [f"<details><summary><b>{b['name']}</b> — {where}"
                  f"{' — ' + title if title else ''}</summary>", "",
                  f"This run: {summary.run_sizes(b)} · "
                  f"[`{b['file']}`]({summary.href(report, b['file'])})", "",
                  "| metric | unit | p50 | p95 | samples |", "|---|---|---|---|---|"]
        lines += [f"| `{m['name']}` | {m['unit']} | {_num(m['p50'])} | {_num(m['p95'])} | "
                  f"{m['samples']} |" for m in b["metrics"]]
        lines += [f"| ratio `{r['name']}` | `{r['numerator']}` / `{r['denominator']}` | "
                  f"{_num(r['value'])} | | |" for r in b.get("ratios", [])]
        lines += ["", "</details>", ""]
    missed = summary.gate(report, "benchmark_baseline").get("details", {}).get("targets_missed")
    if missed:
        lines += ["**Performance targets missed** (shown, not gating):", ""]
        lines += [f"- ❌ `{_cell(t)}`" for t in missed]
    return lines


def _files(report: dict[str, Any]) -> list[str]:
    # relative links (the evidence folder as seen from this page), valid in any clone
    lines = ["<details><summary>Every file, by vLLM version</summary>", ""]
    for f in report.get("files", []):
        where = f"vLLM {f['vllm']}" if f["vllm"] else "version-independent"
        lines.append(f"- {where}: [`{f['path']}`]({summary.href(report, f['path'])})")
    return [*lines, "", "</details>"] if report.get("files") else ["No evidence files listed."]


def _environment(report: dict[str, Any]) -> list[str]:
    return ["| | |", "|---|---|",
            *[f"| {k} | {_cell(v)} |" for k, v in report["environment"].items()]]


_RENDER = {"conditions": _conditions, "levels": _levels, "recipes": _recipes,
           "parity": _parity, "benchmarks": _benchmarks, "files": _files,
           "environment": _environment}


def render_gate_markdown(report: dict[str, Any]) -> str:
    verdict = "PASSED" if report["passed"] else "FAILED"
    lines = ["# Release gate — NNRP openai-compatible/1", "",
             f"**{verdict}** — generated {report['generated_at']}"]
    for key, title in summary.SECTIONS:
        lines += ["", f"## {title}", "", *_RENDER[key](report)]
    return "\n".join(lines).rstrip("\n") + "\n"
