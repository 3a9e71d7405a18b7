"""The release gate's three report files, written from the gate's report document: the JSON
itself (schema ``release-gate-report``), the Markdown page and the self-contained HTML page."""

from __future__ import annotations

import json
from pathlib import Path

from nnrp_conformance.gate import GateResult
from nnrp_conformance.reports.gate_html import render_gate_html
from nnrp_conformance.reports.gate_markdown import render_gate_markdown

__all__ = ["REPORT_HTML", "REPORT_JSON", "REPORT_MARKDOWN", "write_reports"]

REPORT_JSON = "release-gate.json"
REPORT_MARKDOWN = "release-gate.md"
REPORT_HTML = "release-gate.html"


def write_reports(result: GateResult, out_dir: Path) -> dict[str, Path]:
    """Write the JSON, Markdown and HTML reports into ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out_dir / REPORT_JSON,
        "markdown": out_dir / REPORT_MARKDOWN,
        "html": out_dir / REPORT_HTML,
    }
    paths["json"].write_text(json.dumps(result.report, indent=2, ensure_ascii=False) + "\n",
                             encoding="utf-8")
    paths["markdown"].write_text(render_gate_markdown(result.report), encoding="utf-8")
    paths["html"].write_text(render_gate_html(result.report), encoding="utf-8")
    return paths
