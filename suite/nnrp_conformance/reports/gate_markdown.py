"""The release gate's Markdown page, rendered from the release-gate report document alone."""

from __future__ import annotations

import posixpath
from typing import Any, NamedTuple

__all__ = ["Cell", "level_rows", "render_gate_markdown"]


class Cell(NamedTuple):
    """One cell of the levels table: its text, and whether it is good (None: neutral)."""

    text: str
    ok: bool | None


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
    lines += _levels_table(report)
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


def level_rows(report: dict[str, Any]) -> tuple[list[str], list[tuple[int, list[Cell]]]]:
    """(versions, one row per profile level: the level and per version a cell "claimed: k/n
    passed" (ok when all passed) or "not claimed" (ok None)), from the report alone: the first
    condition's per-version ``levels`` and the recipe rows' levels."""
    claims = _gate(report, "level1_implemented").get("details", {}).get("versions") or {}
    results = _gate(report, "recipes_pass").get("details", {}).get("versions", {})
    rows = []
    for level in sorted({e["level"] for entries in claims.values() for e in entries}):
        cells = []
        for version, entries in claims.items():
            entry = next((e for e in entries if e["level"] == level), None)
            if not entry or not entry["claimed"]:
                cells.append(Cell("not claimed", None))
                continue
            mine = [r for r in results.get(version, []) if r.get("level") == level]
            ok = sum(r["outcome"] == "passed" for r in mine)
            cells.append(Cell(f"claimed: {ok}/{len(mine)} passed", ok == len(mine) > 0))
        rows.append((level, cells))
    return list(claims), rows


def _levels_table(report: dict[str, Any]) -> list[str]:
    names, rows = level_rows(report)
    if not rows:
        return []
    lines = ["", "## Levels", "", "| level | " + " | ".join(f"vLLM {v}" for v in names) + " |",
             "|---|" + "---|" * len(names)]
    lines += [f"| {level} | " + " | ".join(_cell(c.text) for c in cells) + " |"
              for level, cells in rows]
    return lines


def _gate(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next((g for g in report["gates"] if g["name"] == name), {})
