"""Report handlers: one module per output, each an :class:`~nnrp_conformance.events.EventHandler`.

``terminal`` prints the rich summary table, ``case_results`` writes the upstream-compatible
JSON, ``markdown`` and ``html`` write the human reports, ``ndjson`` streams every run event. :func:`file_handlers` builds the
handlers a run's artifacts ask for, once, for both faces (the CLI adds its terminal handler;
pytest prints its own summary section). The core never imports this package.
"""

from __future__ import annotations

from nnrp_conformance.artifacts import Artifacts
from nnrp_conformance.events import EventHandler
from nnrp_conformance.reports.case_results import CaseResultsHandler
from nnrp_conformance.reports.html import HtmlHandler
from nnrp_conformance.reports.markdown import MarkdownHandler
from nnrp_conformance.reports.ndjson import NdjsonHandler

__all__ = ["CaseResultsHandler", "file_handlers"]


def file_handlers(art: Artifacts) -> tuple[CaseResultsHandler, list[EventHandler]]:
    """(the case-results handler, every file handler the artifacts ask for, it first)."""
    results = CaseResultsHandler(art.results)
    handlers: list[EventHandler] = [results]
    if art.report_md is not None and art.report_html is not None:
        handlers += [MarkdownHandler(art.report_md), HtmlHandler(art.report_html)]
    if art.report_ndjson is not None:
        handlers.append(NdjsonHandler(art.report_ndjson))
    return results, handlers
