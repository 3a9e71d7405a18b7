"""Report handlers: one module per output, each an :class:`~nnrp_conformance.events.EventHandler`.

``terminal`` prints the rich summary table, ``case_results`` writes the upstream-compatible
JSON, ``markdown`` and ``html`` write the human reports. :func:`report_paths` resolves the
``--nnrp-report`` argument into the Markdown/HTML pair.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["report_paths"]


def report_paths(path: str | Path) -> tuple[Path, Path]:
    """``--nnrp-report PATH`` -> (PATH.md, PATH.html).

    A path already ending in ``.md`` or ``.html`` names one of the pair; the other is the
    same stem with the other suffix (``out/report.html`` -> ``out/report.md`` + itself).
    """
    p = Path(path)
    if p.suffix.lower() in (".md", ".html", ".htm"):
        p = p.with_suffix("")
    return p.with_name(p.name + ".md"), p.with_name(p.name + ".html")
