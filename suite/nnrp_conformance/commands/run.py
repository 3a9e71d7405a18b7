"""``nnrp-conformance run``: the pytest plugin's run without pytest (same core, same files).

With one ``--target`` it judges that endpoint. With several it judges a fleet (``fleet.py``):
each target in turn, with files of its own, then the merged report and the fleet's verdict.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from nnrp_conformance import contract
from nnrp_conformance.commands._options import add_run_options, error, options_from_args
from nnrp_conformance.events import EventBus
from nnrp_conformance.fleet import fleet_report_path, fleet_targets, target_options
from nnrp_conformance.generate.report import generated_line
from nnrp_conformance.merge import MergeError, merge_runs
from nnrp_conformance.options import RunOptions
from nnrp_conformance.recording import run_plan
from nnrp_conformance.reports import file_handlers
from nnrp_conformance.reports.merged import print_merged, write_merged_reports
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
        targets = list(args.target)
        if len(targets) > 1:
            return _run_fleet(options, fleet_targets(targets), console)
    except SetupError as exc:
        error(exc)
        return contract.EXIT_USAGE
    return _run_one(options, console)[0]


def _run_one(options: RunOptions, console: Console) -> tuple[int, str | None]:
    """Judge one target; returns the exit code and, for a target that could not be judged,
    why."""
    core = ConformanceCore(options)
    try:
        try:
            core.prepare()
            if core.capabilities_error and core.options.capabilities_file is None:
                console.print(f"[yellow]warning:[/] {core.capabilities_error}", markup=True,
                              highlight=False)
        except TargetError as exc:
            error(exc)
            return contract.EXIT_TARGET, str(exc)
        except SetupError as exc:
            error(exc)
            return contract.EXIT_USAGE, str(exc)
        if core.generated is not None:
            console.print(generated_line(core.generated), markup=False, highlight=False)
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
        return contract.EXIT_FAILED, None
    if results.violations:
        console.print("[bold red]case results break the case-results schema:[/]")
        for v in results.violations:
            console.print(f"  {v}", markup=False)
        return contract.EXIT_FAILED, None
    if finished.interrupted:
        return contract.EXIT_INTERRUPTED, None
    return finished.exit_code, None


def _run_fleet(options: RunOptions, targets: list[str], console: Console) -> int:
    """Judge each target in turn (never two at once), then merge them into one verdict."""
    per_target = [target_options(options, t) for t in targets]  # SetupErrors before any run
    options.artifacts().prepare()  # the default folder ignores itself, as a single run's
    judged: list[Path] = []
    unjudged: dict[str, str] = {}
    for n, target_run in enumerate(per_target, 1):
        console.rule(f"target {n} of {len(targets)}: {target_run.target}")
        code, problem = _run_one(target_run, console)
        if code == contract.EXIT_USAGE:
            return code  # the same manifest and recipes would fail every target alike
        if code == contract.EXIT_INTERRUPTED:
            return code
        if problem is not None:
            unjudged[str(target_run.target)] = problem
        else:
            judged.append(target_run.artifacts().results)
    console.rule(f"fleet of {len(targets)} targets")
    try:
        merged = merge_runs(judged, fleet=True, unjudged=unjudged)
    except MergeError as exc:
        error(SetupError(str(exc)))
        return contract.EXIT_FAILED
    print_merged(console, merged)
    try:
        for path in write_merged_reports(merged, fleet_report_path(options)):
            console.print(f"wrote {path}", markup=False, highlight=False)
    except OSError as exc:
        error(SetupError(f"cannot write the fleet report: {exc.strerror or exc}"))
        return contract.EXIT_FAILED
    if merged.passed:
        return contract.EXIT_OK
    if unjudged and not any(r.failed for r in merged.runs):
        return contract.EXIT_TARGET
    return contract.EXIT_FAILED
