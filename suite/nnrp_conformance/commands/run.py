"""``nnrp-conformance run``: the pytest plugin's run without pytest (same core, same files)."""

from __future__ import annotations

import argparse

from rich.markup import escape

from nnrp_conformance import contract
from nnrp_conformance.commands._options import add_run_options, error, options_from_args
from nnrp_conformance.events import EventBus
from nnrp_conformance.recording import run_plan
from nnrp_conformance.reports import file_handlers
from nnrp_conformance.reports.terminal import TerminalHandler, summary_console
from nnrp_conformance.session import ConformanceCore, SetupError, TargetError

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
            core.prepare()
            if core.capabilities_error:
                console.print(f"[yellow]warning:[/] {core.capabilities_error}", markup=True,
                              highlight=False)
        except TargetError as exc:
            error(exc)
            return contract.EXIT_TARGET
        except SetupError as exc:
            error(exc)
            return contract.EXIT_USAGE
        art = options.artifacts()
        results, handlers = file_handlers(art)
        terminal = TerminalHandler(console, progress=True)
        terminal.written = art.written()
        bus = EventBus([*handlers, terminal])
        bus.start()
        finished = run_plan(core, bus)
        bus.close()
    finally:
        core.close()
    for problem in bus.errors:
        console.print(f"[bold red]{escape(str(problem))}[/]")
    if bus.errors:
        return contract.EXIT_FAILED
    if results.violations:
        console.print("[bold red]case results break the case-results schema:[/]")
        for v in results.violations:
            console.print(f"  {v}", markup=False)
        return contract.EXIT_FAILED
    if finished.interrupted:
        return contract.EXIT_INTERRUPTED
    return finished.exit_code
