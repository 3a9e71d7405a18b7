"""The release gate's Markdown page, rendered from the release-gate report document alone."""

from __future__ import annotations

import posixpath
from typing import Any

__all__ = ["render_gate_markdown"]


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    return _cell(value)


def render_gate_markdown(report: dict[str, Any]) -> str:
    verdict = "PASSED" if report["passed"] else "FAILED"
    lines = [
        "# Release gate — NNRP openai-compatible/1",
        "",
        f"**{verdict}** — generated {report['generated_at']}",
        "",
        "## Conditions",
        "",
        "| condition | verdict | reason |",
        "|---|---|---|",
    ]
    for gate in report["gates"]:
        mark = "pass" if gate["passed"] else "**FAIL**"
        lines.append(f"| `{gate['name']}` | {mark} | {_cell(gate['reason'])} |")
    for gate in report["gates"]:
        lines += ["", f"### `{gate['name']}`", ""]
        failures = gate.get("details", {}).get("failures")
        if failures:
            lines += [f"- {_cell(f)}" for f in failures]
        lines.append(f"- {'passed' if gate['passed'] else 'failed'}: {gate['reason']}")
        lines += [f"- evidence: `{e}`" for e in gate["evidence"]]

    if report.get("files"):
        # relative links (the evidence folder as seen from this page), valid in any clone
        base = report["environment"].get("evidence_dir") or "."
        lines += ["", "## Evidence files", ""]
        for f in report["files"]:
            where = f"vLLM {f['vllm']}" if f["vllm"] else "version-independent"
            href = posixpath.normpath(posixpath.join(base, f["path"]))
            lines.append(f"- {where}: [`{f['path']}`]({href})")

    versions = _gate(report, "recipes_pass").get("details", {}).get("versions", {})
    lines += _levels_table(report, versions)
    for version, rows in versions.items():
        lines += ["", f"## Recipes — vLLM {version}", "",
                  "| recipe | status | level | outcome | terminal | ms | message |",
                  "|---|---|---|---|---|---|---|"]
        lines += [
            f"| `{r['id']}` | {r['status']} | {_cell(r.get('level'))} | {r['outcome']} | "
            f"{_cell(r.get('terminal'))} | {_num(r.get('duration_ms'))} | "
            f"{_cell(r.get('message'))} |"
            for r in rows
        ]

    benches = _gate(report, "benchmark_baseline").get("details", {}).get("benchmarks", [])
    if benches:
        lines += ["", "## Benchmarks", "",
                  "| benchmark | vLLM | metric | unit | median | p50 | p95 | samples |",
                  "|---|---|---|---|---|---|---|---|"]
        for b in benches:
            for m in b["metrics"]:
                lines.append(
                    f"| {b['name']} | {_cell(b.get('vllm') or '—')} | `{m['name']}` | "
                    f"{m['unit']} | {_num(m['median'])} | {_num(m['p50'])} | "
                    f"{_num(m['p95'])} | {m['samples']} |"
                )
            for r in b.get("ratios", []):
                lines.append(f"| {b['name']} | {_cell(b.get('vllm') or '—')} | "
                             f"ratio `{r['name']}` | `{r['numerator']}` / "
                             f"`{r['denominator']}` | {_num(r['value'])} | | | |")
        missed = _gate(report, "benchmark_baseline").get("details", {}).get("targets_missed")
        if missed:
            lines += ["", "**Performance targets missed** (shown, not gating):", ""]
            lines += [f"- ❌ `{_cell(t)}`" for t in missed]

    lines += ["", "## Environment", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in report["environment"].items()]
    return "\n".join(lines) + "\n"


def level_rows(report: dict[str, Any]) -> list[tuple[int, str, str, list[str]]]:
    """(level, claimed, expected recipes, passed per version) for every profile level, from
    the report alone: the first condition's ``levels`` and the recipe rows' levels."""
    levels = _gate(report, "level1_implemented").get("details", {}).get("levels", [])
    versions = _gate(report, "recipes_pass").get("details", {}).get("versions", {})
    out = []
    for entry in levels:
        level = entry["level"]
        expected = len(entry["mandatory"]) + len(entry["claimed_optional"])
        passed = []
        for version, rows in versions.items():
            mine = [r for r in rows if r.get("level") == level]
            ok = sum(r["outcome"] == "passed" for r in mine)
            passed.append(f"{version}: {ok}/{len(mine)}")
        out.append((level, "yes" if entry["claimed"] else "no",
                    f"{len(entry['mandatory'])} mandatory + {len(entry['claimed_optional'])} "
                    f"optional" if entry["claimed"] else "—",
                    passed if entry["claimed"] and expected else []))
    return out


def _levels_table(report: dict[str, Any], versions: dict[str, Any]) -> list[str]:
    rows = level_rows(report)
    if not rows:
        return []
    lines = ["", "## Levels", "", "| level | claimed | recipes selected | passed |",
             "|---|---|---|---|"]
    lines += [f"| {level} | {claimed} | {expected} | {_cell(', '.join(passed)) or '—'} |"
              for level, claimed, expected, passed in rows]
    return lines


def _gate(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next((g for g in report["gates"] if g["name"] == name), {})
