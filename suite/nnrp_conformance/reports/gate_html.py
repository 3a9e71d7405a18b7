"""The release gate's HTML page: one self-contained file (inline CSS and SVG, no scripts).

Rendered from the release-gate report document alone, summary first: the verdict and the
five conditions with their evidence (links relative to the page), the Levels per vLLM version
with the reason for every level not claimed, the recipes per version, and the parity ratios
against vLLM's HTTP server as a chart. Below, folded (``<details>``): every benchmark (its
title, its own run's size, its metrics, p50/p95 bars and latency CDFs), each version's recipe
table, the evidence files and the environment. The order is :data:`gate_summary.SECTIONS`;
each section is a ``<section id=...>``, so a browser test can check order and width.
"""

from __future__ import annotations

from html import escape
from typing import Any

from nnrp_conformance.reports import gate_summary as summary
from nnrp_conformance.reports.gate_charts import bars_svg, cdf_svg, fmt, parity_series, parity_svg

__all__ = ["render_gate_html"]

_fmt = fmt  # the number format every report of the gate shares

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1b1f24;
background:#f6f8fa}
main{max-width:1180px;margin:0 auto;padding:1.5rem 2rem 3rem}
h1{font-size:1.5rem;margin:.2rem 0 .4rem}h2{font-size:1.15rem;margin:2rem 0 .6rem;
border-bottom:1px solid #d0d7de;padding-bottom:.3rem}h3{font-size:1rem;margin:1.2rem 0 .4rem}
.badge{font-weight:700;padding:.15rem .55rem;border-radius:.3rem;display:inline-block;
font-size:.85rem;letter-spacing:.02em}
.pass{background:#dafbe1;color:#116329}.fail{background:#ffebe9;color:#a40e26}
.skip{background:#fff8c5;color:#7d4e00}
.big{font-size:1.1rem;padding:.3rem .8rem}
.muted{color:#57606a;font-size:.85rem}
.card{background:#fff;border:1px solid #d0d7de;border-radius:.4rem;padding:.7rem 1rem;
margin:.6rem 0}
.card.failed{border-left:4px solid #cf222e}.card.passed{border-left:4px solid #1a7f37}
.card h3{margin:0 0 .3rem;display:flex;gap:.6rem;align-items:center}
ul{margin:.3rem 0 .2rem 1.2rem;padding:0}li{margin:.15rem 0}
ul.failures li{color:#a40e26}
ul.evidence{list-style:none;margin-left:0}
ul.evidence li{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.78rem;
color:#57606a;word-break:break-all}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.85rem;background:#fff}
th,td{border:1px solid #d0d7de;padding:.28rem .55rem;text-align:left;vertical-align:top}
th{background:#eef1f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.82rem}
.charts{display:flex;flex-wrap:wrap;gap:.8rem;align-items:flex-start}
figure{margin:0;background:#fff;border:1px solid #d0d7de;border-radius:.4rem;padding:.4rem}
figcaption{font-size:.8rem;color:#57606a;padding:0 .2rem .2rem}
svg text{font-family:system-ui,sans-serif;font-size:11px;fill:#1b1f24}
td,th{overflow-wrap:anywhere}
.wide{overflow-x:auto;max-width:100%}
details{background:#fff;border:1px solid #d0d7de;border-radius:.4rem;margin:.5rem 0;
padding:.3rem .8rem}
details>summary{cursor:pointer;padding:.2rem 0}
details[open]>summary{border-bottom:1px solid #eaeef2;margin-bottom:.4rem}
summary h3{display:inline;margin:0;font-size:.95rem}
td.reason{font-size:.8rem;color:#57606a}
"""


def _badge(passed: bool | None, *, label: str | None = None, big: bool = False) -> str:
    cls = "pass" if passed else ("skip" if passed is None else "fail")
    text = label or ("PASS" if passed else "FAIL")
    return f'<span class="badge {cls}{" big" if big else ""}">{escape(text)}</span>'


def _link(report: dict[str, Any], path: str, text: str | None = None) -> str:
    return (f'<a href="{escape(summary.href(report, path))}"><code>{escape(text or path)}'
            '</code></a>')


def _evidence(report: dict[str, Any], entry: str) -> str:
    link = summary.evidence_link(report, entry)
    if link.href is None:
        return f"<li>{escape(link.text)}</li>"
    return f'<li><a href="{escape(link.href)}">{escape(link.text)}</a></li>'


# --- the summary ----------------------------------------------------------------------------


def _conditions(report: dict[str, Any]) -> list[str]:
    out = []
    for gate in report["gates"]:
        state = "passed" if gate["passed"] else "failed"
        out.append(f'<div class="card {state}"><h3>{_badge(gate["passed"])}'
                   f'<code>{escape(gate["name"])}</code></h3>')
        failures = gate.get("details", {}).get("failures") or []
        if failures:
            out.append('<ul class="failures">' + "".join(
                f"<li>{escape(f)}</li>" for f in failures) + "</ul>")
        else:
            out.append(f"<div>{escape(gate['reason'])}</div>")
        if gate["evidence"]:
            out.append('<details><summary class="muted">evidence '
                       f'({len(gate["evidence"])})</summary><ul class="evidence">'
                       + "".join(_evidence(report, e) for e in gate["evidence"])
                       + "</ul></details>")
        out.append("</div>")
    return out


def _levels(report: dict[str, Any]) -> list[str]:
    names, rows = summary.level_rows(report)
    if not rows:
        return ['<p class="muted">No level claims recorded.</p>']
    head = "".join(f"<th>vLLM {escape(v)}</th>" for v in names)
    out = [f"<table><tr><th>level</th>{head}</tr>"]
    out += [f"<tr><td class='num'>{level}</td>"
            + "".join(f"<td>{_badge(c.ok, label=c.text)}</td>" for c in cells) + "</tr>"
            for level, cells in rows]
    out.append("</table>")
    reasons = summary.level_reasons(report)
    if reasons:
        out.append("<table><tr><th>not claimed</th><th>why</th></tr>" + "".join(
            f"<tr><td>vLLM {escape(v)}, Level {level}</td><td class='reason'>{escape(why)}</td>"
            "</tr>" for v, level, why in reasons) + "</table>")
    return out


def _recipes(report: dict[str, Any]) -> list[str]:
    counts = summary.recipe_counts(report)
    if not counts:
        return ['<p class="muted">No recipe results recorded.</p>']
    out = ["<table><tr><th>vLLM</th><th>passed</th><th>not passed</th></tr>"]
    for version, passed, total, bad in counts:
        out.append(f"<tr><td>vLLM {escape(version)}</td><td>"
                   f"{_badge(passed == total, label=f'{passed}/{total}')}</td><td>"
                   + (", ".join(f"<code>{escape(b)}</code>" for b in bad) or "—") + "</td></tr>")
    out.append("</table>")
    versions = summary.gate(report, "recipes_pass").get("details", {}).get("versions", {})
    for version, rows in versions.items():
        out.append(f"<details><summary>every recipe on vLLM {escape(version)}</summary>"
                   "<div class='wide'><table><tr><th>recipe</th><th>status</th><th>level</th>"
                   "<th>outcome</th><th>terminal</th><th>ms</th><th>message</th></tr>")
        for r in rows:
            ok = {"passed": True, "skipped": None}.get(r["outcome"], False)
            out.append(
                f"<tr><td><code>{escape(r['id'])}</code></td><td>{escape(r['status'])}</td>"
                f"<td class='num'>{_fmt(r.get('level'))}</td>"
                f"<td>{_badge(ok, label=r['outcome'])}</td>"
                f"<td>{escape(r.get('terminal') or '—')}</td>"
                f"<td class='num'>{_fmt(r.get('duration_ms'))}</td>"
                f"<td>{escape(r.get('message') or '')}</td></tr>")
        out.append("</table></div></details>")
    return out


def _parity(report: dict[str, Any]) -> list[str]:
    rows = summary.parity_rows(report)
    if not rows:
        return ['<p class="muted">No parity run recorded.</p>']
    out = []
    for version in dict.fromkeys(r.version for r in rows):
        mine = [r for r in rows if r.version == version]
        series = parity_series(mine)
        out.append(f"<h3>vLLM {escape(version)}</h3><figure>{parity_svg(mine)}</figure>")
        head = "".join(f"<th>{escape(c)} ({escape(w)})</th>" for c, w in series)
        out.append(f"<details><summary>the ratios as numbers</summary><table><tr><th>ratio"
                   f"</th><th>c</th>{head}</tr>")
        keys = dict.fromkeys((r.metric, r.concurrency) for r in mine)
        by_key = {(r.metric, r.concurrency, r.column, r.workload): r for r in mine}
        for metric, c in keys:
            cells = []
            for col, wl in series:
                r = by_key.get((metric, c, col, wl))
                spread = (f" <span class='muted'>({r.low:.2f}–{r.high:.2f})</span>"
                          if r is not None and r.low is not None and r.high is not None else "")
                cells.append(f"<td class='num'>{f'{r.value:.3f}' if r else '—'}{spread}</td>")
            label, better = summary.PARITY_METRICS[metric]
            out.append(f"<tr><td>{escape(label)} <span class='muted'>({better})</span></td>"
                       f"<td class='num'>{c}</td>{''.join(cells)}</tr>")
        out.append("</table></details>")
    return out


# --- the detail (folded) --------------------------------------------------------------------


def _benchmark(report: dict[str, Any], b: dict[str, Any]) -> list[str]:
    where = f"vLLM {b['vllm']}" if b.get("vllm") else "version-independent"
    title = b.get("title") or b.get("description") or ""
    out = [f"<details><summary><h3>{escape(b['name'])}</h3> <span class='muted'>— "
           f"{escape(where)}{' — ' + escape(title) if title else ''}</span></summary>"]
    m = b["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in b["versions"].items() if v is not None)
    out.append(f"<p class='muted'>this run: {escape(summary.run_sizes(b))} · "
               f"{escape(m['cpu'])}, {m['cores']} core(s), Python {escape(m['python'])} · "
               f"{escape(versions)} · {_link(report, b['file'])}</p>")
    if b.get("targets_missed"):
        out.append("<p class='fail'>Performance targets missed (shown, not gating): "
                   + ", ".join(f"<code>{escape(t)}</code>" for t in b["targets_missed"])
                   + "</p>")
    out.append("<div class='charts'>")
    out.append(f"<figure>{bars_svg(b['metrics'][:12])}<figcaption>p50 / p95 per metric"
               f"{' (the first 12)' if len(b['metrics']) > 12 else ''}</figcaption></figure>")
    if b.get("latency"):
        for metric in b["metrics"]:
            if len(metric.get("values") or []) >= 2:
                out.append(f"<figure>{cdf_svg(metric)}<figcaption>CDF of "
                           f"<code>{escape(metric['name'])}</code></figcaption></figure>")
    out.append("</div>")
    # p50 is the median: one column, not two
    out.append("<div class='wide'><table><tr><th>metric</th><th>unit</th><th>p50</th>"
               "<th>p95</th><th>p99</th><th>samples</th></tr>")
    for metric in b["metrics"]:
        out.append(
            f"<tr><td><code>{escape(metric['name'])}</code></td>"
            f"<td>{escape(metric['unit'])}</td><td class='num'>{_fmt(metric['p50'])}</td>"
            f"<td class='num'>{_fmt(metric['p95'])}</td>"
            f"<td class='num'>{_fmt(metric.get('p99'))}</td>"
            f"<td class='num'>{_fmt(metric['samples'])}</td></tr>")
    for r in b.get("ratios", []):
        out.append(f"<tr><td>ratio <code>{escape(r['name'])}</code></td>"
                   f"<td>{escape(r['numerator'])} / {escape(r['denominator'])}</td>"
                   f"<td class='num'>{_fmt(r['value'])}</td><td></td><td></td><td></td></tr>")
    out.append("</table></div></details>")
    return out


def _benchmarks(report: dict[str, Any]) -> list[str]:
    benches = summary.benchmarks(report)
    if not benches:
        return ['<p class="muted">No valid benchmark documents recorded.</p>']
    return [line for b in benches for line in _benchmark(report, b)]


def _files(report: dict[str, Any]) -> list[str]:
    """Each vLLM line's reports, case results, logs and benchmark documents, linked."""
    groups: dict[str | None, list[str]] = {}
    for f in report.get("files", []):
        groups.setdefault(f["vllm"], []).append(f["path"])
    if not groups:
        return ['<p class="muted">No evidence files listed.</p>']
    out = ["<details><summary>every file, by vLLM version</summary>",
           "<table><tr><th></th><th>files</th></tr>"]
    for version, paths in groups.items():
        where = f"vLLM {version}" if version else "version-independent"
        prefix = f"vllm-{version}/" if version else ""
        links = " · ".join(_link(report, p, p.removeprefix(prefix)) for p in paths)
        out.append(f"<tr><th>{escape(where)}</th><td>{links}</td></tr>")
    out.append("</table></details>")
    return out


def _environment(report: dict[str, Any]) -> list[str]:
    rows = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>"
                   for k, v in report["environment"].items())
    return [f"<details><summary>machine and versions</summary><table>{rows}</table></details>"]


_RENDER = {"conditions": _conditions, "levels": _levels, "recipes": _recipes,
           "parity": _parity, "benchmarks": _benchmarks, "files": _files,
           "environment": _environment}


def render_gate_html(report: dict[str, Any]) -> str:
    passed = report["passed"]
    failed = [g["name"] for g in report["gates"] if not g["passed"]]
    verdict = ("all five release conditions hold" if passed
               else f"{len(failed)} of 5 conditions failed: {', '.join(failed)}")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>Release gate — NNRP openai-compatible/1</title>",
        f"<style>{_CSS}</style></head><body><main>",
        "<h1>Release gate — NNRP <code>openai-compatible/1</code></h1>",
        f"<p>{_badge(passed, label='RELEASE READY' if passed else 'NOT READY', big=True)} "
        f"{escape(verdict)} <span class='muted'>· generated "
        f"{escape(report['generated_at'])}</span></p>",
    ]
    for key, title in summary.SECTIONS:
        parts += [f'<section id="{key}"><h2>{escape(title)}</h2>', *_RENDER[key](report),
                  "</section>"]
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"
