"""The pytest face of the suite (entry point ``pytest11: nnrp_conformance``).

Owns the run's life in pytest: the configuration (options and ini keys in
:mod:`.plugin_options`), one :class:`TargetRun` per target (one, or each target of a fleet:
``--nnrp-target`` repeated, :mod:`.fleet`), collecting each target's plan as test items (the
nodes are :mod:`.plugin_items`: nodeid ``nnrp-conformance::<recipe id>``, with a fleet
``nnrp-conformance[<target>]::<recipe id>``), shipping each case's record from xdist workers to
the controller, and the reports written at the end (with a fleet, the merged one too).

Rules (documented in docs/):

* Without ``--nnrp-target`` (or the ``nnrp_target`` ini key) the plugin changes nothing:
  no collection, no output, no files. Its fixtures then skip.
* With a target, ``--manifest`` is required (a usage error otherwise).
* Recipes are collected when no test paths are given (bare ``pytest`` or only the
  ``testpaths``/invocation directory: then *only* the recipes run) or when ``--recipes`` is
  given explicitly (then they run beside the given paths).
* Strict verdicts: every selected recipe that fails, mandatory or optional, is a failed test,
  so the exit code is non-zero. Recipes the manifest does not claim are skipped with the reason.
* Files (plan, case results, Markdown/HTML report) are written by the controller (or the only
  process), never by an xdist worker, and only when recipes are collected.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance.events import CaseFinished, CaseRecord, CaseStarted, EventBus, RunFinished
from nnrp_conformance.fixtures import (
    CORE_KEY,
    nnrp_capabilities,
    nnrp_client,
    nnrp_manifest,
    nnrp_recipe_runner,
)
from nnrp_conformance.fleet import (
    fleet_report_path,
    fleet_targets,
    target_options,
    target_slug,
)
from nnrp_conformance.generate.report import generated_line
from nnrp_conformance.merge import MergedRuns, MergeError, merge_runs
from nnrp_conformance.plugin_items import (
    BASE_MARKERS,
    RecipeFailure,
    RecipeItem,
    RecipeSuite,
    capability_marker,
)

# pytest finds the hook here, in the module its pytest11 entry point names
from nnrp_conformance.plugin_options import _options, _targets, pytest_addoption
from nnrp_conformance.recording import fill_not_run, finish_run
from nnrp_conformance.reports import CaseResultsHandler, file_handlers
from nnrp_conformance.reports.merged import print_merged, write_merged_reports
from nnrp_conformance.reports.terminal import render_summary, summary_console
from nnrp_conformance.session import ConformanceCore, RunOptions, SetupError, TargetError

__all__ = [
    "SUITE_NODE",
    "NnrpConformancePlugin",
    "RecipeFailure",
    "RecipeItem",
    "RecipeSuite",
    "capability_marker",
    "nnrp_capabilities",
    "nnrp_client",
    "nnrp_manifest",
    "nnrp_recipe_runner",
    "pytest_addoption",
]

SUITE_NODE = "nnrp-conformance"
_PLUGIN_NAME = "nnrp-conformance-run"
_RECORD_ATTR = "nnrp_case"  # the TestReport attribute xdist serialises with the report
_WORKER_CAPS = "nnrp_capabilities_json"

# --- configuration ---------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    for name, text in BASE_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    options = _options(config)
    if options is None:
        return
    try:
        plugin = NnrpConformancePlugin(config, options, _targets(config))
    except SetupError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(plugin, _PLUGIN_NAME)
    try:
        plugin.setup()
    except SetupError as exc:
        plugin.close()
        raise pytest.UsageError(str(exc)) from None


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.pluginmanager.get_plugin(_PLUGIN_NAME)
    if plugin is not None:
        plugin.close()


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _is_xdist_controller(config: pytest.Config) -> bool:
    if _is_worker(config):
        return False
    try:
        dist = config.getoption("dist")
    except ValueError:
        return False
    return dist not in (None, "no") and not config.getoption("collectonly")


@dataclass
class TargetRun:
    """One target's share of the pytest run: its options and core, the event bus its reports
    hang on, and what it wrote. A single-target run has one; a fleet one per target."""

    options: RunOptions
    core: ConformanceCore
    #: the collector's node id: ``nnrp-conformance``, or ``nnrp-conformance[<target slug>]``
    node: str
    bus: EventBus = field(default_factory=EventBus)
    results: CaseResultsHandler | None = None
    finished: RunFinished | None = None
    written: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: a fleet target that could not be judged: why (it then has no plan and no items)
    unjudged: str | None = None

    @property
    def prefix(self) -> str:
        return f"{self.node}::"


class NnrpConformancePlugin:
    """Per-run state registered as a plugin when a target is configured."""

    def __init__(self, config: pytest.Config, options: RunOptions,
                 targets: Sequence[str] = ()) -> None:
        self.config = config
        self.options = options
        self.fleet = len(targets) > 1
        if self.fleet:
            self.runs = [TargetRun(o, ConformanceCore(o), f"{SUITE_NODE}[{target_slug(t)}]")
                         for t in fleet_targets(targets) for o in [target_options(options, t)]]
        else:
            self.runs = [TargetRun(options, ConformanceCore(options), SUITE_NODE)]
        # the provider fixtures (nnrp_client, …) talk to the first target
        config.stash[CORE_KEY] = self.core
        self.worker = _is_worker(config)
        self.controller = _is_xdist_controller(config)
        explicit_recipes = config.getoption("nnrp_recipes") is not None
        no_paths = config.args_source != pytest.Config.ArgsSource.ARGS
        self.collect_recipes = no_paths or explicit_recipes
        if no_paths:
            # The recipes replace testpaths / the invocation directory (workers do the same).
            config.args = []
        self.begin = time.monotonic()
        self.merged: MergedRuns | None = None
        self.fleet_written: list[str] = []
        #: case ids pytest deselected (-k / -m)
        self.deselected: set[str] = set()
        self._ready = False  # ready() ran

    @property
    def core(self) -> ConformanceCore:
        return self.runs[0].core

    def close(self) -> None:
        for run in self.runs:
            run.core.close()

    # setup ------------------------------------------------------------------------------
    def setup(self) -> None:
        if not self.collect_recipes:
            self.core.load_manifest()
            self.core.load_recipes()
            return  # provider tests only: the fixtures connect on demand
        if self.worker:
            # a worker plans exactly what the controller planned, from the same documents
            workerinput = self.config.workerinput  # type: ignore[attr-defined]
            shared = json.loads(workerinput[_WORKER_CAPS]) if _WORKER_CAPS in workerinput else None
            for i, run in enumerate(self.runs):
                if shared is None:
                    run.core.prepare(write=False, generate=False)
                elif shared[i]["unjudged"] is not None:
                    run.unjudged = shared[i]["unjudged"]
                else:
                    run.core.capabilities_error = shared[i]["error"]
                    run.core.options.seed = shared[i]["seed"]
                    run.core.prepare(shared[i]["capabilities"], fetch=False, write=False,
                                     generate=False)
            return
        if self.fleet:
            self.options.artifacts().prepare()  # the default folder ignores itself
        for run in self.runs:
            try:
                run.core.prepare(write=False, generate=False)
            except TargetError as exc:
                if not self.fleet:
                    raise
                run.unjudged = str(exc)  # the other targets are judged all the same
                continue
            # the reports are built once, here, and see the whole run (workers send records)
            run.results, handlers = file_handlers(run.options.artifacts())
            run.bus = EventBus(handlers)
            if self.controller:
                run.core.close()  # the controller runs no case; workers hold their own link

    def ready(self) -> None:
        """The generated cases drawn into each plan, the plan written and the run started, once,
        at the first of the report header, an xdist node's configuration and the collection:
        after pytest's initialization, which ends at the session's start. hypothesis warns
        about any draw before that ("Slow code in plugin"), and --nnrp-generate draws."""
        if self._ready or not self.collect_recipes:
            return
        self._ready = True
        for run in self.runs:
            if run.core.plan is None:
                continue  # a fleet target not judged
            try:
                run.core.add_generated()
                if not self.worker:
                    run.core.write_plan()
            except SetupError as exc:
                raise pytest.UsageError(str(exc)) from None
            if not self.worker:
                run.bus.start()
                run.bus.emit(run.core.run_started())

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        self.ready()  # the seed a worker draws from is the controller's
        if any(run.core.plan is not None for run in self.runs):
            # every worker must plan (and so collect) exactly what the controller planned
            node.workerinput[_WORKER_CAPS] = json.dumps([
                {"capabilities": run.core.capabilities, "error": run.core.capabilities_error,
                 "unjudged": run.unjudged, "seed": run.core.options.seed}
                for run in self.runs])

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        self.ready()
        lines: list[str] = []
        for run in self.runs:
            target = run.options.target
            plan = run.core.plan
            if run.unjudged is not None:
                lines.append(f"nnrp-conformance: target {target}: NOT JUDGED: {run.unjudged}")
                continue
            if not self.collect_recipes or plan is None:
                lines.append(f"nnrp-conformance: target {target}")
                continue
            if run.core.capabilities_error and run.options.capabilities_file is None:
                # with the provider's file given, the missing discovery is no surprise
                lines.append(f"nnrp-conformance: WARNING: {run.core.capabilities_error}")
            lines += [
                f"nnrp-conformance: target {target}, adapter {plan.adapter}, "
                f"model {run.core.model_id or '-'}, level {plan.level}",
                f"nnrp-conformance: {len(plan.selected())} of {len(plan.cases)} recipes "
                f"selected; plan {run.options.artifacts().plan}",
            ]
            if run.core.generated is not None:
                lines.append(f"nnrp-conformance: {generated_line(run.core.generated)}")
        return lines

    # collection -------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        report = yield
        if (self.collect_recipes and isinstance(collector, pytest.Session)
                and report.outcome == "passed"):
            self.ready()
            for run in self.runs:
                if run.core.plan is not None:
                    report.result.append(RecipeSuite.from_parent(
                        collector, name=run.node, nodeid=run.node, core=run.core))
        return report

    # running ----------------------------------------------------------------------------
    def _run_of(self, nodeid: str) -> TargetRun | None:
        for run in self.runs:
            if nodeid.startswith(run.prefix):
                return run
        return None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if isinstance(item, RecipeItem):
            record = item.record
            if record is None and call.when == "setup" and report.skipped:
                record = item.skipped_record()
            if record is not None and (call.when == "call" or report.skipped):
                setattr(report, _RECORD_ATTR, record.to_dict())
                item.record = None  # one record per case, even with a teardown error
        return report

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        run = None if self.worker else self._run_of(nodeid)
        if run is not None:
            run.bus.emit(CaseStarted(nodeid.removeprefix(run.prefix)))

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        """Remember the cases -k/-m deselected: the summary counts them as pytest does."""
        self.deselected.update(case.id for item in items
                               if (case := getattr(item, "case", None)) is not None)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, _RECORD_ATTR, None)
        run = None if self.worker else self._run_of(report.nodeid)
        if data and run is not None:
            run.bus.emit(CaseFinished(CaseRecord.from_dict(data)))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if (self.worker or not self.collect_recipes
                or self.config.getoption("collectonly")):
            return
        self.ready()  # a session ended before its collection still writes its reports
        duration = time.monotonic() - self.begin
        for run in self.runs:
            if run.core.plan is not None:
                self._finish(run, duration, interrupted=session.shouldstop is not False)
        if self.fleet:
            self._finish_fleet(session)

    def _finish(self, run: TargetRun, duration: float, *, interrupted: bool) -> None:
        art = run.options.artifacts()
        # deselected (-k/-m/--lf) or never reached
        fill_not_run(run.core.plan, run.bus, self.deselected)
        run.finished = finish_run(run.core, run.bus.ordered_records(), duration,
                                  interrupted=interrupted)
        run.bus.emit(run.finished)
        run.bus.close()
        run.problems += [str(e) for e in run.bus.errors]
        run.written = [w for w in art.written() if Path(w).exists()]
        if run.results is not None and run.results.violations:
            run.problems.append("case results break the case-results schema: " + "; ".join(
                str(v) for v in run.results.violations))

    def _finish_fleet(self, session: pytest.Session) -> None:
        judged = [run.options.artifacts().results for run in self.runs
                  if run.finished is not None]
        unjudged = {str(run.options.target): run.unjudged for run in self.runs
                    if run.unjudged is not None}
        try:
            self.merged = merge_runs(judged, fleet=True, unjudged=unjudged)
            self.fleet_written = [str(p) for p in
                                  write_merged_reports(self.merged, fleet_report_path(self.options))]
        except (MergeError, OSError) as exc:
            self.runs[0].problems.append(f"fleet report not written: {exc}")
            return
        if not self.merged.passed and session.exitstatus == pytest.ExitCode.OK:
            # a fleet fails on more than failed tests: a target not judged, or the targets'
            # capability documents differing
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tw = terminalreporter._tw
        for run in self.runs:
            if run.finished is None:
                continue
            buffer = io.StringIO()
            console = summary_console(buffer, color=tw.hasmarkup, width=tw.fullwidth)
            render_summary(console, run.finished.records, started=run.bus.run_started,
                           written=run.written, baseline_problems=run.finished.baseline_problems)
            title = "nnrp-conformance summary"
            terminalreporter.section(f"{title}: {run.options.target}" if self.fleet else title)
            terminalreporter.write(buffer.getvalue())
            for problem in run.problems:
                terminalreporter.write_line(f"nnrp-conformance: {problem}", red=True)
        if self.merged is not None:
            buffer = io.StringIO()
            print_merged(summary_console(buffer, color=tw.hasmarkup, width=tw.fullwidth),
                         self.merged)
            terminalreporter.section("nnrp-conformance fleet")
            terminalreporter.write(buffer.getvalue())
            for path in self.fleet_written:
                terminalreporter.write_line(f"wrote {path}")


