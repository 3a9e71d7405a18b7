"""The pytest face of the suite (entry point ``pytest11: nnrp_conformance``).

Owns: the ``--nnrp-*`` options and their ini keys, turning the execution plan into test items
(one per recipe, nodeid ``nnrp-conformance::<recipe id>``, marked ``level<N>``, the status and
one marker per required capability), running each through the shared core
(:mod:`nnrp_conformance.session`), h2spec-style failure output, shipping each case's record
from xdist workers to the controller, and the reports written at the end.

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
import re
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import contract, runner
from nnrp_conformance.events import CaseFinished, CaseRecord, CaseStarted, EventBus, RunFinished
from nnrp_conformance.fixtures import (
    CORE_KEY,
    nnrp_capabilities,
    nnrp_client,
    nnrp_manifest,
    nnrp_recipe_runner,
)

# pytest finds the hook here, in the module its pytest11 entry point names
from nnrp_conformance.plugin_options import _options, pytest_addoption
from nnrp_conformance.recording import case_record, fill_not_run, finish_run
from nnrp_conformance.reports import CaseResultsHandler, file_handlers
from nnrp_conformance.reports.format import event_runs, findings_block
from nnrp_conformance.reports.terminal import render_summary, summary_console
from nnrp_conformance.session import (
    ConformanceCore,
    RunOptions,
    SetupError,
)

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
_WORKER_CAPS_ERROR = "nnrp_capabilities_error"

_BASE_MARKERS = {
    **{f"level{lv}": f"NNRP recipe of compatibility Level {lv}" for lv in contract.LEVELS},
    **{s: f"NNRP recipe with status {s}" for s in contract.RECIPE_STATUSES},
    "nnrp": "an NNRP openai-compatible/1 conformance recipe",
}


def capability_marker(token: str) -> str:
    """A capability token as a marker name (``-m`` needs identifiers): ``api.streaming`` ->
    ``streaming``, ``api.extension.x-y.critical`` -> ``extension_x_y_critical``."""
    name = token.removeprefix("api.")
    name = re.sub(r"[^0-9A-Za-z_]+", "_", name).strip("_").lower()
    return name if name and not name[0].isdigit() else f"cap_{name}"


# --- configuration ---------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    for name, text in _BASE_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    options = _options(config)
    if options is None:
        return
    plugin = NnrpConformancePlugin(config, options)
    config.pluginmanager.register(plugin, _PLUGIN_NAME)
    try:
        plugin.setup()
    except SetupError as exc:
        plugin.core.close()
        raise pytest.UsageError(str(exc)) from None


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.pluginmanager.get_plugin(_PLUGIN_NAME)
    if plugin is not None:
        plugin.core.close()


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


class RecipeFailure(Exception):
    """A selected recipe failed; carries its record for the h2spec-style report."""

    def __init__(self, record: CaseRecord) -> None:
        self.record = record
        super().__init__(f"{record.id}: {record.message or 'failed'}")


class NnrpConformancePlugin:
    """Per-run state registered as a plugin when a target is configured."""

    def __init__(self, config: pytest.Config, options: RunOptions) -> None:
        self.config = config
        self.options = options
        self.core = ConformanceCore(options)
        config.stash[CORE_KEY] = self.core
        self.worker = _is_worker(config)
        self.controller = _is_xdist_controller(config)
        explicit_recipes = config.getoption("nnrp_recipes") is not None
        no_paths = config.args_source != pytest.Config.ArgsSource.ARGS
        self.collect_recipes = no_paths or explicit_recipes
        if no_paths:
            # The recipes replace testpaths / the invocation directory (workers do the same).
            config.args = []
        self.bus = EventBus()
        self.results: CaseResultsHandler | None = None
        self.finished: RunFinished | None = None
        self.begin = time.monotonic()
        self.written: list[str] = []
        self.problems: list[str] = []

    # setup ------------------------------------------------------------------------------
    def setup(self) -> None:
        core = self.core
        if not self.collect_recipes:
            core.load_manifest()
            core.load_recipes()
            return  # provider tests only: the fixtures connect on demand
        if self.worker:
            # a worker plans exactly what the controller planned, from the same document
            workerinput = self.config.workerinput  # type: ignore[attr-defined]
            if _WORKER_CAPS in workerinput:
                core.capabilities_error = workerinput.get(_WORKER_CAPS_ERROR)
                core.prepare(json.loads(workerinput[_WORKER_CAPS]), fetch=False, write=False)
            else:
                core.prepare(write=False)
            return
        core.prepare()
        # the reports are built once, here, and see the whole run (workers send their records)
        self.results, handlers = file_handlers(self.options.artifacts())
        self.bus = EventBus(handlers)
        self.bus.start()
        self.bus.emit(core.run_started())
        if self.controller:
            core.close()  # the controller runs no case; workers hold their own connection

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        if self.core.plan is not None:
            # every worker must plan (and so collect) exactly what the controller planned
            node.workerinput[_WORKER_CAPS] = json.dumps(self.core.capabilities)
            node.workerinput[_WORKER_CAPS_ERROR] = self.core.capabilities_error

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if not self.collect_recipes or self.core.plan is None:
            return [f"nnrp-conformance: target {self.options.target}"]
        plan = self.core.plan
        selected = len(plan.selected())
        warning = []
        if self.core.capabilities_error:
            warning = [f"nnrp-conformance: WARNING: {self.core.capabilities_error}"]
        return [
            *warning,
            f"nnrp-conformance: target {self.options.target}, adapter {plan.adapter}, "
            f"model {self.core.model_id or '-'}, level {plan.level}",
            f"nnrp-conformance: {selected} of {len(plan.cases)} recipes selected; plan "
            f"{self.options.artifacts().plan}",
        ]

    # collection -------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        report = yield
        if (self.collect_recipes and isinstance(collector, pytest.Session)
                and report.outcome == "passed" and self.core.plan is not None):
            report.result.append(RecipeSuite.from_parent(collector, name=SUITE_NODE,
                                                         nodeid=SUITE_NODE))
        return report

    # running ----------------------------------------------------------------------------
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
        if not self.worker and nodeid.startswith(f"{SUITE_NODE}::"):
            self.bus.emit(CaseStarted(nodeid.removeprefix(f"{SUITE_NODE}::")))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, _RECORD_ATTR, None)
        if data and not self.worker:
            self.bus.emit(CaseFinished(CaseRecord.from_dict(data)))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if (self.worker or not self.collect_recipes or self.core.plan is None
                or self.config.getoption("collectonly")):
            return
        art = self.options.artifacts()
        fill_not_run(self.core.plan, self.bus)  # deselected (-k/-m/--lf) or never reached
        self.finished = finish_run(self.core, self.bus.ordered_records(),
                                   time.monotonic() - self.begin,
                                   interrupted=session.shouldstop is not False)
        self.bus.emit(self.finished)
        self.bus.close()
        self.problems += [str(e) for e in self.bus.errors]
        self.written = [w for w in art.written() if Path(w).exists()]
        if self.results is not None and self.results.violations:
            self.problems.append("case results break the case-results schema: " + "; ".join(
                str(v) for v in self.results.violations))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.finished is None:
            return
        buffer = io.StringIO()
        tw = terminalreporter._tw
        console = summary_console(buffer, color=tw.hasmarkup, width=tw.fullwidth)
        render_summary(console, self.finished.records, started=self.bus.run_started,
                       written=self.written, baseline_problems=self.finished.baseline_problems)
        terminalreporter.section("nnrp-conformance summary")
        terminalreporter.write(buffer.getvalue())
        for problem in self.problems:
            terminalreporter.write_line(f"nnrp-conformance: {problem}", red=True)


# --- nodes ------------------------------------------------------------------------------------


class RecipeSuite(pytest.Collector):
    """The plan as a collector: one item per recipe, in plan order."""

    def collect(self) -> list[pytest.Item]:
        core = self.config.stash[CORE_KEY]
        items: list[pytest.Item] = []
        for case in core.plan.cases:
            items.append(RecipeItem.from_parent(self, name=case.id, case=case))
        return items


class RecipeItem(pytest.Item):
    """One recipe run against the target; a failure raises :class:`RecipeFailure`."""

    def __init__(self, *, case: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.record: CaseRecord | None = None
        names = ["nnrp", f"level{case.level}", case.status]
        names += [capability_marker(t) for t in case.required_capabilities]
        registered = {line.split(":", 1)[0].strip() for line in self.config.getini("markers")}
        for name in dict.fromkeys(names):
            if name not in registered:
                self.config.addinivalue_line("markers", f"{name}: NNRP recipe capability")
            self.add_marker(name)
        self.extra_keyword_matches.update(case.required_capabilities)
        self.user_properties += [("nnrp_recipe", case.id), ("nnrp_level", str(case.level)),
                                 ("nnrp_status", case.status)]
        if case.selection != contract.SEL_SELECTED:
            self.add_marker(pytest.mark.skip(reason=f"{case.selection}: {case.reason or ''}"
                                             .rstrip(": ")))

    def skipped_record(self) -> CaseRecord:
        return CaseRecord.from_result(runner.skipped_result(self.case))

    def runtest(self) -> None:
        core: ConformanceCore = self.config.stash[CORE_KEY]
        try:
            result = core.run_case(self.case)
        except SetupError as exc:
            pytest.fail(str(exc), pytrace=False)
        self.record = record = case_record(core, self.case, result)
        if record.waived:
            rules = ", ".join(sorted({f.rule for f in record.findings}))
            pytest.xfail(f"waived by the baseline ({rules})")
        if record.failed:
            raise RecipeFailure(record)
        if record.skipped:
            pytest.skip(record.reason or record.message or "skipped by the runner")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str | Any:
        if isinstance(excinfo.value, RecipeFailure):
            return format_failure(excinfo.value.record, self.case)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # a line number is required for skip reports; recipes have no meaningful one
        return self.case.recipe.path, 0, f"recipe {self.case.id}"


def format_failure(record: CaseRecord, case: Any) -> str:
    expected = case.expect.get("terminal", contract.TERMINAL_SUCCESS)
    lines = [
        f"recipe {record.id} ({record.status}, level {record.level}) FAILED",
        f"  recipe file: {case.recipe.path}",
        f"  terminal: seen {record.terminal!r}, expected {expected!r}",
        f"  events ({len(record.event_types)}): {event_runs(record.event_types)}",
    ]
    if record.message and not record.findings:
        lines.append(f"  verdict: {record.message}")
    lines += findings_block(record, numbered=True)
    if record.reproduce:
        lines.append(f"  reproduce: {record.reproduce}")
    if record.trace:
        lines.append(f"  frame trace: {record.trace}")
    return "\n".join(lines)
