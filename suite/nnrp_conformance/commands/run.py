"""``nnrp-conformance run``: the pytest plugin's run without pytest (same core, same files)."""

from __future__ import annotations

import argparse
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.commands._options import add_run_options, error, options_from_args
from nnrp_conformance.events import EventBus
from nnrp_conformance.reports.case_results import CaseResultsHandler
from nnrp_conformance.reports.html import HtmlHandler
from nnrp_conformance.reports.markdown import MarkdownHandler
from nnrp_conformance.reports.terminal import TerminalHandler, summary_console
from nnrp_conformance.session import ConformanceCore, SetupError, TargetError, run_plan

NAME = "run"
HELP = "run the selected recipes against an NNRP endpoint and write the reports"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_options(parser)


def main(args: argparse.Namespace) -> int:
    console = summary_console()
    try:
        options = options_from_args(args)
    except SetupError as exc:
        error(exc)
        return contract.EXIT_USAGE
    core = ConformanceCore(options)
    try:
        try:
            core.load_manifest()
            core.load_recipes()
            core.build_plan(core.try_capabilities())
            if core.capabilities_error:
                console.print(f"[yellow]warning:[/] {core.capabilities_error}", markup=True,
                              highlight=False)
            core.write_plan()
        except TargetError as exc:
            error(exc)
            return contract.EXIT_TARGET
        except SetupError as exc:
            error(exc)
            return contract.EXIT_USAGE
        art = options.artifacts()
        results = CaseResultsHandler(art.results)
        handlers: list[Any] = [results]
        if art.report_md is not None and art.report_html is not None:
            handlers += [MarkdownHandler(art.report_md), HtmlHandler(art.report_html)]
        terminal = TerminalHandler(console, progress=True)
        terminal.written = art.written()
        handlers.append(terminal)
        finished = run_plan(core, EventBus(handlers))
    finally:
        core.close()
    if results.violations:
        console.print("[bold red]case results break the case-results schema:[/]")
        for v in results.violations:
            console.print(f"  {v}", markup=False)
        return contract.EXIT_FAILED
    if finished.interrupted:
        return contract.EXIT_INTERRUPTED
    return finished.exit_code
