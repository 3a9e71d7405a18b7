"""The release gate's charts, as inline SVG (no script, nothing fetched): the parity ratios
against vLLM's HTTP server per concurrency, p50/p95 bars per metric and latency CDFs."""

from __future__ import annotations

from html import escape
from typing import Any

from nnrp_conformance.reports.gate_summary import PARITY_COLUMNS, PARITY_METRICS, ParityRow

__all__ = ["bars_svg", "cdf_svg", "fmt", "parity_series", "parity_svg"]


def fmt(value: Any) -> str:
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


_W, _H = 520, 200  # CDF chart size
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 48, 16, 12, 32


def cdf_svg(metric: dict[str, Any]) -> str:
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
                         f'style="fill:{color}">{label} {fmt(v)}</text>')
    parts.append(f'<polyline fill="none" stroke="#1a7f37" stroke-width="1.8" '
                 f'points="{" ".join(points)}"/>')
    for v in (lo, (lo + hi) / 2, hi):
        parts.append(f'<text x="{x(v):.1f}" y="{_H - _PAD_B + 14}" text-anchor="middle">'
                     f'{fmt(v)}</text>')
    parts.append(f'<text x="{_PAD_L + plot_w / 2:.1f}" y="{_H - 4}" text-anchor="middle" '
                 f'style="fill:#57606a">{escape(metric["unit"])} (n={n})</text>')
    parts.append("</svg>")
    return "".join(parts)


def bars_svg(metrics: list[dict[str, Any]]) -> str:
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
        parts.append(f'<text x="{label_w + bar_w + 8}" y="{top + 12}">p95 {fmt(m["p95"])} '
                     f'{escape(m["unit"])}</text>')
        parts.append(f'<text x="{label_w + bar_w + 8}" y="{top + 26}">p50 {fmt(m["p50"])} '
                     f'{escape(m["unit"])}</text>')
    parts.append("</svg>")
    return "".join(parts)


#: bar colours per (NNRP column, workload): the gate's tcp column blue, the ipc column orange
_SERIES_COLOURS = {("nnrp", "short"): "#0969da", ("nnrp", "long"): "#80ccff",
                   ("nnrp_ipc", "short"): "#bc4c00", ("nnrp_ipc", "long"): "#ffb77c"}


def parity_series(rows: list[ParityRow]) -> list[tuple[str, str]]:
    """The (column, workload) pairs recorded, the gate's column first, short before long."""
    have = {(r.column, r.workload) for r in rows}
    workloads = sorted({r.workload for r in rows}, key=lambda w: (w != "short", w))
    return [(c, w) for c in PARITY_COLUMNS for w in workloads if (c, w) in have]


def parity_svg(rows: list[ParityRow]) -> str:
    """One vLLM version's NNRP/HTTP ratios: a panel per metric, a group per concurrency, a bar
    per (column, workload) with its per-round range as a whisker; the dashed line is parity
    (1.0). Scales to its container's width (viewBox), so it never widens the page."""
    series = parity_series(rows)
    metrics = [m for m in PARITY_METRICS if any(r.metric == m for r in rows)]
    conc = sorted({r.concurrency for r in rows})
    by_key = {(r.metric, r.column, r.workload, r.concurrency): r for r in rows}
    panel_w, gap, top, plot_h, bottom = 330, 24, 34, 150, 74
    width = len(metrics) * panel_w + (len(metrics) - 1) * gap
    height = top + plot_h + bottom
    peak = max([1.25] + [max(r.value, r.high or 0) * 1.08 for r in rows])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
             f'width="100%" style="max-width:{width}px" role="img" '
             'aria-label="NNRP to HTTP ratios per concurrency">']

    def y(v: float) -> float:
        return top + plot_h - v / peak * plot_h

    for i, metric in enumerate(metrics):
        x0, left = i * (panel_w + gap), 34
        plot_w = panel_w - left - 6
        label, better = PARITY_METRICS[metric]
        parts.append(f'<text x="{x0 + left}" y="14" style="font-weight:600">'
                     f'{escape(label)} NNRP / HTTP</text>'
                     f'<text x="{x0 + left}" y="27" style="fill:#57606a">{better}</text>')
        parts.append(f'<rect x="{x0 + left}" y="{top}" width="{plot_w}" height="{plot_h}" '
                     'fill="#fbfcfd" stroke="#d0d7de"/>')
        for tick in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0):
            if tick < peak:
                parts.append(f'<text x="{x0 + left - 4}" y="{y(tick) + 4:.1f}" '
                             f'text-anchor="end">{tick:g}</text>')
        group_w = plot_w / max(len(conc), 1)
        bar_w = min(22.0, (group_w - 16) / max(len(series), 1))
        for j, c in enumerate(conc):
            gx = x0 + left + j * group_w + (group_w - bar_w * len(series)) / 2
            for k, (col, wl) in enumerate(series):
                r = by_key.get((metric, col, wl, c))
                if r is None:
                    continue
                bx = gx + k * bar_w
                parts.append(f'<rect x="{bx:.1f}" y="{y(r.value):.1f}" width="{bar_w - 2:.1f}" '
                             f'height="{y(0) - y(r.value):.1f}" fill="{_SERIES_COLOURS[col, wl]}">'
                             f'<title>{escape(col)} {escape(wl)} c={c}: {r.value:.3f}</title>'
                             '</rect>')
                if r.low is not None and r.high is not None:
                    mid = bx + (bar_w - 2) / 2
                    parts.append(f'<line x1="{mid:.1f}" x2="{mid:.1f}" y1="{y(r.low):.1f}" '
                                 f'y2="{y(r.high):.1f}" stroke="#1b1f24"/>')
            parts.append(f'<text x="{x0 + left + (j + 0.5) * group_w:.1f}" '
                         f'y="{top + plot_h + 14}" text-anchor="middle">c={c}</text>')
        parts.append(f'<line x1="{x0 + left}" x2="{x0 + left + plot_w}" y1="{y(1.0):.1f}" '
                     f'y2="{y(1.0):.1f}" stroke="#cf222e" stroke-dasharray="5 3"/>')
    lx = 34
    for col, wl in series:
        parts.append(f'<rect x="{lx}" y="{height - 34}" width="10" height="10" '
                     f'fill="{_SERIES_COLOURS[col, wl]}"/><text x="{lx + 14}" '
                     f'y="{height - 25}">{escape(col)} ({escape(wl)} prompt)</text>')
        lx += 190
    parts.append(f'<text x="34" y="{height - 7}" style="fill:#57606a">whisker: range over '
                 'rounds · dashed line: parity (1.0)</text>')
    parts.append("</svg>")
    return "".join(parts)
