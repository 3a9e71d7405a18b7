"""The release gate's HTML page: one self-contained file (inline CSS and SVG, no scripts).

Rendered from the release-gate report document alone: the five conditions with their
evidence, links to every evidence file (each vLLM line's report, case results, logs and
benchmark documents), latency distributions (CDF polylines from the recorded values, p50/p95
bars for every metric), the per-version recipe tables and the environment. Links are relative
(``environment.evidence_dir`` + the file's path), so the page works from any clone.
"""

from __future__ import annotations

import posixpath
from html import escape
from typing import Any

from nnrp_conformance.reports.gate_markdown import level_rows

__all__ = ["render_gate_html"]

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
"""

_W, _H = 520, 200  # CDF chart size
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 48, 16, 12, 32


def _badge(passed: bool | None, *, label: str | None = None, big: bool = False) -> str:
    cls = "pass" if passed else ("skip" if passed is None else "fail")
    text = label or ("PASS" if passed else "FAIL")
    return f'<span class="badge {cls}{" big" if big else ""}">{escape(text)}</span>'


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return escape(str(value) if value is not None else "—")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:,.1f}"
        return f"{value:.3g}" if abs(value) < 0.01 else f"{value:.3f}"
    return escape(str(value))


def _gate(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next((g for g in report["gates"] if g["name"] == name), {})


# --- charts ---------------------------------------------------------------------------------


def _cdf_svg(metric: dict[str, Any]) -> str:
    values = sorted(float(v) for v in metric.get("values") or [] if v >= 0)
    lo, hi = values[0], values[-1]
    span = hi - lo or (abs(hi) or 1.0)
    lo_x, hi_x = lo - span * 0.04, hi + span * 0.04
    plot_w, plot_h = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B

    def x(v: float) -> float:
        return _PAD_L + (v - lo_x) / (hi_x - lo_x) * plot_w

    def y(p: float) -> float:
        return _PAD_T + (1 - p) * plot_h

    n = len(values)
    points = [f"{x(lo):.1f},{y(0):.1f}"]
    for i, v in enumerate(values):
        points.append(f"{x(v):.1f},{y(i / n):.1f}")
        points.append(f"{x(v):.1f},{y((i + 1) / n):.1f}")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" role="img" aria-label="CDF of {escape(metric["name"])}">',
        f'<rect x="{_PAD_L}" y="{_PAD_T}" width="{plot_w}" height="{plot_h}" fill="#fbfcfd" '
        'stroke="#d0d7de"/>',
    ]
    for p in (0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{_PAD_L}" x2="{_PAD_L + plot_w}" y1="{y(p):.1f}" '
                     f'y2="{y(p):.1f}" stroke="#eaeef2"/>')
        parts.append(f'<text x="{_PAD_L - 6}" y="{y(p) + 4:.1f}" text-anchor="end">'
                     f'{int(p * 100)}%</text>')
    for label, key, color in (("p50", "p50", "#0969da"), ("p95", "p95", "#bf3989")):
        v = float(metric[key])
        if lo_x <= v <= hi_x:
            parts.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{_PAD_T}" '
                         f'y2="{_PAD_T + plot_h}" stroke="{color}" stroke-dasharray="4 3"/>')
            right = x(v) > _PAD_L + plot_w * 0.7
            anchor, dx = ("end", -3) if right else ("start", 3)
            dy = 11 if label == "p50" else 24
            parts.append(f'<text x="{x(v) + dx:.1f}" y="{_PAD_T + dy}" text-anchor="{anchor}" '
                         f'style="fill:{color}">{label} {_fmt(v)}</text>')
    parts.append(f'<polyline fill="none" stroke="#1a7f37" stroke-width="1.8" '
                 f'points="{" ".join(points)}"/>')
    for v in (lo, (lo + hi) / 2, hi):
        parts.append(f'<text x="{x(v):.1f}" y="{_H - _PAD_B + 14}" text-anchor="middle">'
                     f'{_fmt(v)}</text>')
    parts.append(f'<text x="{_PAD_L + plot_w / 2:.1f}" y="{_H - 4}" text-anchor="middle" '
                 f'style="fill:#57606a">{escape(metric["unit"])} (n={n})</text>')
    parts.append("</svg>")
    return "".join(parts)


def _bars_svg(metrics: list[dict[str, Any]]) -> str:
    """p50/p95 bars, one row per metric, each on its own scale (units differ)."""
    row_h, label_w, bar_w, width = 34, 190, 210, 540
    height = row_h * len(metrics) + 22
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="p50 and p95 per metric">']
    parts.append('<rect x="0" y="0" width="10" height="8" fill="#0969da" '
                 f'transform="translate({label_w},{height - 14})"/>'
                 f'<text x="{label_w + 14}" y="{height - 6}">p50</text>'
                 f'<rect x="0" y="0" width="10" height="8" fill="#d8b9e8" '
                 f'transform="translate({label_w + 50},{height - 14})"/>'
                 f'<text x="{label_w + 64}" y="{height - 6}">p95</text>')
    for i, m in enumerate(metrics):
        top = i * row_h + 4
        scale = max(float(m["p50"]), float(m["p95"]), float(m.get("p99", 0)), 1e-12)
        w50 = float(m["p50"]) / scale * bar_w
        w95 = float(m["p95"]) / scale * bar_w
        name = m["name"] if len(m["name"]) <= 30 else m["name"][:29] + "…"
        parts.append(f'<text x="0" y="{top + 15}">{escape(name)}</text>')
        parts.append(f'<rect x="{label_w}" y="{top + 2}" width="{w95:.1f}" height="12" '
                     'fill="#d8b9e8"/>')
        parts.append(f'<rect x="{label_w}" y="{top + 15}" width="{w50:.1f}" height="12" '
                     'fill="#0969da"/>')
        parts.append(f'<text x="{label_w + bar_w + 8}" y="{top + 12}">p95 {_fmt(m["p95"])} '
                     f'{escape(m["unit"])}</text>')
        parts.append(f'<text x="{label_w + bar_w + 8}" y="{top + 26}">p50 {_fmt(m["p50"])} '
                     f'{escape(m["unit"])}</text>')
    parts.append("</svg>")
    return "".join(parts)


# --- sections -------------------------------------------------------------------------------


def _conditions(report: dict[str, Any]) -> list[str]:
    out = ["<h2>Release conditions</h2>"]
    for gate in report["gates"]:
        state = "passed" if gate["passed"] else "failed"
        out.append(f'<div class="card {state}"><h3>{_badge(gate["passed"])}'
                   f'<code>{escape(gate["name"])}</code></h3>')
        failures = gate.get("details", {}).get("failures") or []
        if not failures:
            out.append(f"<div>{escape(gate['reason'])}</div>")
        if failures:
            out.append('<ul class="failures">' + "".join(
                f"<li>{escape(f)}</li>" for f in failures) + "</ul>")
        if gate["evidence"]:
            out.append('<ul class="evidence">' + "".join(
                f"<li>{escape(e)}</li>" for e in gate["evidence"]) + "</ul>")
        out.append("</div>")
    return out


def _href(report: dict[str, Any], path: str) -> str:
    """A relative link to ``path`` (relative to the evidence folder) from the report's folder."""
    base = report["environment"].get("evidence_dir") or "."
    return escape(posixpath.normpath(posixpath.join(base, path)))


def _link(report: dict[str, Any], path: str, text: str | None = None) -> str:
    return f'<a href="{_href(report, path)}"><code>{escape(text or path)}</code></a>'


def _files(report: dict[str, Any]) -> list[str]:
    """Each vLLM line's reports, case results, logs and benchmark documents, linked."""
    groups: dict[str | None, list[str]] = {}
    for f in report.get("files", []):
        groups.setdefault(f["vllm"], []).append(f["path"])
    if not groups:
        return []
    out = ["<h2>Evidence files</h2>", "<table><tr><th></th><th>files</th></tr>"]
    for version, paths in groups.items():
        where = f"vLLM {version}" if version else "version-independent"
        prefix = f"vllm-{version}/" if version else ""
        links = " · ".join(_link(report, p, p.removeprefix(prefix)) for p in paths)
        out.append(f"<tr><th>{escape(where)}</th><td>{links}</td></tr>")
    out.append("</table>")
    return out


def _benchmarks(report: dict[str, Any]) -> list[str]:
    benches = _gate(report, "benchmark_baseline").get("details", {}).get("benchmarks", [])
    out = ["<h2>Benchmarks</h2>"]
    if not benches:
        return [*out, '<p class="muted">No valid benchmark documents recorded.</p>']
    for b in benches:
        where = f"vLLM {b['vllm']}" if b.get("vllm") else "version-independent"
        m = b["machine"]
        out.append(f"<h3>{escape(b['name'])} <span class='muted'>— {escape(where)}"
                   f"{' — ' + escape(b['title']) if b.get('title') else ''}</span></h3>")
        versions = ", ".join(f"{k} {v}" for k, v in b["versions"].items() if v is not None)
        out.append(f"<p class='muted'>{escape(m['cpu'])}, {m['cores']} core(s), Python "
                   f"{escape(m['python'])}, {escape(m['platform'])} · {escape(versions)} · "
                   f"{b['runs']} run(s) · {_link(report, b['file'])}</p>")
        out.append("<table><tr><th>metric</th><th>unit</th><th>median</th><th>p50</th>"
                   "<th>p95</th><th>p99</th><th>samples</th></tr>")
        for metric in b["metrics"]:
            out.append(
                f"<tr><td><code>{escape(metric['name'])}</code></td>"
                f"<td>{escape(metric['unit'])}</td><td class='num'>{_fmt(metric['median'])}</td>"
                f"<td class='num'>{_fmt(metric['p50'])}</td>"
                f"<td class='num'>{_fmt(metric['p95'])}</td>"
                f"<td class='num'>{_fmt(metric.get('p99'))}</td>"
                f"<td class='num'>{_fmt(metric['samples'])}</td></tr>")
        for r in b.get("ratios", []):
            out.append(f"<tr><td>ratio <code>{escape(r['name'])}</code></td>"
                       f"<td>{escape(r['numerator'])} / {escape(r['denominator'])}</td>"
                       f"<td class='num'>{_fmt(r['value'])}</td><td></td><td></td><td></td>"
                       f"<td></td></tr>")
        out.append("</table>")
        if b.get("targets_missed"):
            out.append("<p class='fail'>Performance targets missed (shown, not gating): "
                       + ", ".join(f"<code>{escape(t)}</code>" for t in b["targets_missed"])
                       + "</p>")
        out.append("<div class='charts'>")
        out.append(f"<figure>{_bars_svg(b['metrics'])}<figcaption>p50 / p95 per metric"
                   f"</figcaption></figure>")
        if b.get("latency"):
            for metric in b["metrics"]:
                if len(metric.get("values") or []) >= 2:
                    out.append(f"<figure>{_cdf_svg(metric)}<figcaption>CDF of "
                               f"<code>{escape(metric['name'])}</code></figcaption></figure>")
        out.append("</div>")
    return out


def _levels(report: dict[str, Any]) -> list[str]:
    names, rows = level_rows(report)
    if not rows:
        return []
    head = "".join(f"<th>vLLM {escape(v)}</th>" for v in names)
    out = ["<h2>Levels</h2>", f"<table><tr><th>level</th>{head}</tr>"]
    out += [f"<tr><td class='num'>{level}</td>"
            + "".join(f"<td>{_badge(c.ok, label=c.text)}</td>" for c in cells) + "</tr>"
            for level, cells in rows]
    return [*out, "</table>"]


def _recipes(report: dict[str, Any]) -> list[str]:
    versions = _gate(report, "recipes_pass").get("details", {}).get("versions", {})
    out = ["<h2>Recipes</h2>"]
    if not versions:
        return [*out, '<p class="muted">No recipe results recorded.</p>']
    for version, rows in versions.items():
        passed = sum(r["outcome"] == "passed" for r in rows)
        out.append(f"<h3>vLLM {escape(version)} <span class='muted'>— {passed}/{len(rows)} "
                   f"passed</span></h3>")
        out.append("<table><tr><th>recipe</th><th>status</th><th>level</th><th>outcome</th>"
                   "<th>terminal</th><th>ms</th><th>message</th></tr>")
        for r in rows:
            ok = {"passed": True, "skipped": None}.get(r["outcome"], False)
            out.append(
                f"<tr><td><code>{escape(r['id'])}</code></td><td>{escape(r['status'])}</td>"
                f"<td class='num'>{_fmt(r.get('level'))}</td>"
                f"<td>{_badge(ok, label=r['outcome'])}</td>"
                f"<td>{escape(r.get('terminal') or '—')}</td>"
                f"<td class='num'>{_fmt(r.get('duration_ms'))}</td>"
                f"<td>{escape(r.get('message') or '')}</td></tr>")
        out.append("</table>")
    return out


def _environment(report: dict[str, Any]) -> list[str]:
    rows = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(str(v))}</td></tr>"
                   for k, v in report["environment"].items())
    return ["<h2>Environment</h2>", f"<table>{rows}</table>"]


def render_gate_html(report: dict[str, Any]) -> str:
    passed = report["passed"]
    failed = [g["name"] for g in report["gates"] if not g["passed"]]
    summary = ("all five release conditions hold" if passed
               else f"{len(failed)} of 5 conditions failed: {', '.join(failed)}")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>Release gate — NNRP openai-compatible/1</title>",
        f"<style>{_CSS}</style></head><body><main>",
        "<h1>Release gate — NNRP <code>openai-compatible/1</code></h1>",
        f"<p>{_badge(passed, label='RELEASE READY' if passed else 'NOT READY', big=True)} "
        f"{escape(summary)} <span class='muted'>· generated "
        f"{escape(report['generated_at'])}</span></p>",
        *_conditions(report),
        *_files(report),
        *_benchmarks(report),
        *_levels(report),
        *_recipes(report),
        *_environment(report),
        "</main></body></html>",
    ]
    return "\n".join(parts) + "\n"
