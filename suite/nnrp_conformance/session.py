"""The run core shared by both faces (pytest plugin and ``nnrp-conformance`` CLI).

Owns: :meth:`ConformanceCore.prepare`, the one set-up sequence (manifest, recipes, the
capability document, the plan, written), turning every bad input (manifest, recipes, an
unreachable target) into one :class:`SetupError` whose message names the file and field,
the long-lived anyio blocking portal that holds one client connection per process (pytest
items and the CLI are synchronous). Running the cases on the run's sessions is
:mod:`.run_cases`'s; what a result becomes for the reports, the run loop and the run's end
are :mod:`.recording`'s; the run's options are :mod:`.options`'s.

Artifacts: the case results default to ``nnrp-conformance/case-results.json`` under the
base directory (pytest's invocation directory, or the CLI's working directory); the plan
defaults to ``execution-plan.json`` and the evidence directory to ``evidence/``, both beside
the results file. ``--nnrp-report PATH`` writes ``PATH.md`` and ``PATH.html`` (a path ending
in ``.md``/``.html`` names one of the pair).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal

from nnrp_conformance import contract
from nnrp_conformance.artifacts import Artifacts, write_json
from nnrp_conformance.baseline import Baseline, BaselineError, load_baseline
from nnrp_conformance.events import RunStarted
from nnrp_conformance.manifest import ManifestError, load_manifest
from nnrp_conformance.metadata import run_metadata
from nnrp_conformance.model_choice import choose_models
from nnrp_conformance.options import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_RESULTS,
    DEFAULT_TIMEOUT,
    RunOptions,
    SetupError,
    TargetError,
    load_json_object,
    parse_params,
)
from nnrp_conformance.planner import PlanError, build_plan
from nnrp_conformance.recipes import RecipeError, load_recipes
from nnrp_conformance.run_cases import CaseSessions
from nnrp_conformance.security import is_security_case, run_security_case, security_cases
from nnrp_conformance.twin import open_twin
from nnrp_conformance.validation import SchemaViolationError

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_RESULTS",
    "DEFAULT_TIMEOUT",
    "Artifacts",
    "ConformanceCore",
    "RunOptions",
    "SetupError",
    "TargetError",
    "default_model",
    "load_json_object",
    "parse_params",
]

def default_model(capabilities: Mapping[str, Any] | None) -> str | None:
    """The first model the endpoint's capability document lists (fills ``${MODEL_ID}``)."""
    for model in (capabilities or {}).get("models") or ():
        if isinstance(model, Mapping) and isinstance(model.get("id"), str) and model["id"]:
            return str(model["id"])
    return None


def _problems_text(exc: Exception) -> str:
    return str(exc).strip() or type(exc).__name__


class ConformanceCore(CaseSessions):
    """One process's run state: portal, client, capability document, manifest, plan.

    All methods are synchronous; the async work happens in the portal's event loop thread,
    which outlives single cases so one connection serves the run (per xdist worker) until a
    case leaves it unclean (running the cases: :class:`~.run_cases.CaseSessions`).
    """

    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self.capabilities: dict[str, Any] | None = None
        self.capabilities_error: str | None = None
        self.manifest: Any = None
        self.recipes: list[Any] | None = None
        self.plan: Any = None
        self.model_id: str | None = None
        self.baseline: Baseline | None = None
        #: the run's generated requests (``generate.GeneratedRun``), with --nnrp-generate
        self.generated: Any = None
        self._client: Any = None
        self._portal: BlockingPortal | None = None
        self._init_case_sessions()
        self._stack = contextlib.ExitStack()
        self.twin: Any = None  # --nnrp-http-twin (twin/), made by prepare()

    # --- connection --------------------------------------------------------------------
    @property
    def portal(self) -> BlockingPortal:
        if self._portal is None:
            self._portal = self._stack.enter_context(start_blocking_portal(backend="asyncio"))
        return self._portal

    @property
    def client(self) -> Any:
        """The connected client (connects on first use)."""
        if self._client is None:
            self.connect()
        return self._client

    def connect(self) -> Any:
        """Open the run's session (a fresh one when there was one)."""
        self._client = self.open_session()
        return self._client

    def open_session(self) -> Any:
        """A connected client on a new session of the target, which the caller owns (the
        run's session is :meth:`connect`'s; a group across sessions opens a second one)."""
        # lazy on purpose: nnrp-py's native library loads only when a run connects (the
        # pytest plugin, and with it this module, loads in every pytest run of the venv)
        from nnrp_conformance.client import NnrpClient
        from nnrp_conformance.client.refused import CASE_SETTLE_S

        target = self.options.target
        if not target:
            raise SetupError("no target: give --nnrp-target HOST:PORT (or a scheme URL)")
        try:
            return self.portal.call(
                functools.partial(
                    NnrpClient.connect, target, connect_timeout=self.options.connect_timeout,
                    settle_window=CASE_SETTLE_S, api_key=self.options.api_key,
                    tls_ca=self.options.tls_ca, tls_server_name=self.options.tls_server_name,
                )
            )
        except Exception as exc:
            raise TargetError(f"cannot connect to NNRP target {target!r}: "
                             f"{_problems_text(exc)}") from None

    def fetch_capabilities(self) -> dict[str, Any]:
        """The endpoint's capability document; a TargetError when it cannot be had."""
        # bounded by the case timeout too: a silent endpoint must not stall the run's start
        timeout = min(self.options.timeout, DEFAULT_CONNECT_TIMEOUT, self.options.idle_timeout)
        before = self.client.frames_received
        try:
            doc = self.portal.call(functools.partial(self.client.capabilities, timeout=timeout))
        except SetupError:
            raise
        except Exception as exc:
            raise TargetError(f"cannot fetch the capability document from "
                             f"{self.options.target!r}: {_problems_text(exc)}") from None
        finally:
            self._note_frames(before, contract.OP_CAPABILITIES_GET)
        if not isinstance(doc, dict):
            raise TargetError(f"the capability document from {self.options.target!r} is not a "
                             f"JSON object (got {type(doc).__name__})")
        self.capabilities = doc
        return doc

    def try_capabilities(self) -> dict[str, Any] | None:
        """Like :meth:`fetch_capabilities`, but a broken discovery operation is an endpoint
        defect for the recipes to judge, not a reason to stop: the error is kept in
        ``capabilities_error`` and ``None`` returned. An unreachable target still raises."""
        client = self.client  # connection failures raise TargetError here
        del client
        try:
            return self.fetch_capabilities()
        except TargetError as exc:
            self.capabilities_error = str(exc)
        if self.options.capabilities_file is None:
            return None
        # The provider's own statement of its document, for an endpoint without (a working)
        # discovery operation: it feeds selection and the model, and the capability case.
        self.capabilities = load_json_object(self.options.capabilities_file)
        return self.capabilities

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run an async callable in the portal and return its result."""
        return self.portal.call(functools.partial(fn, *args, **kwargs))

    def run_case(self, case: Any, **kwargs: Any) -> Any:
        """A security case on sessions of its own (``security.py``); any other case on the
        run's (``run_cases.CaseSessions.run_case``, which takes ``kwargs``)."""
        if is_security_case(case):
            return run_security_case(self, case)
        return super().run_case(case, **kwargs)

    # --- plan --------------------------------------------------------------------------
    def load_manifest(self) -> Any:
        if self.options.manifest is None:
            raise SetupError("no manifest: give --manifest PATH (the adapter capability "
                             "manifest is required with a target)")
        try:
            self.manifest = load_manifest(self.options.manifest)
        except ManifestError as exc:
            raise SetupError(f"invalid manifest:\n{_problems_text(exc)}") from None
        return self.manifest

    def load_baseline(self) -> Baseline | None:
        """The accepted failures (``--nnrp-baseline``); a file that does not exist yet is an
        empty baseline when the run is to write it (``--nnrp-baseline-update``)."""
        path = self.options.baseline
        if path is None:
            return None
        if self.options.baseline_update and not path.exists():
            self.baseline = Baseline(path, [])
            return self.baseline
        try:
            self.baseline = load_baseline(path)
        except BaselineError as exc:
            raise SetupError(f"invalid baseline: {exc}") from None
        return self.baseline

    def load_recipes(self) -> list[Any]:
        try:
            self.recipes = load_recipes(list(self.options.recipes) if self.options.recipes
                                        else None)
        except RecipeError as exc:
            raise SetupError(f"invalid recipes:\n{_problems_text(exc)}") from None
        return self.recipes

    def build_plan(self, capabilities: Mapping[str, Any] | None = None, *,
                   generate: bool = True) -> Any:
        """Manifest + recipes + (capability document for the default model) -> plan; with
        ``generate``, the generated cases too (else :meth:`add_generated` adds them later)."""
        if capabilities is not None:
            self.capabilities = dict(capabilities)
        if self.manifest is None:
            self.load_manifest()
        recipes = self.recipes if self.recipes is not None else self.load_recipes()
        choice = choose_models(contract.PROFILE_OPERATIONS, run_wide=self.options.model,
                               per_operation=self.options.models,
                               capabilities=self.capabilities, manifest=self.manifest.data)
        self.model_id = choice.default
        if self.model_id is None and self.options.target:
            # Never run every recipe against the recipes' placeholder model (issue 14).
            given = self.options.capabilities_file
            if given is not None:  # the provider's file was read: say what it lacks
                why, more = f"the capability document {given} lists no model", ""
            else:
                why = self.capabilities_error or "the capability document lists no model"
                more = ", or the document with --nnrp-capabilities FILE"
            raise SetupError(f"no model to test: {why}, and the manifest "
                             f"{self.options.manifest} lists none; give one with --nnrp-model ID "
                             f"(CLI: --model ID){more}")
        try:
            self.plan = build_plan(
                recipes,
                self.manifest,
                model_id=self.model_id,
                params=dict(self.options.params),
                extensions=tuple(self.options.extensions),
                level=self.options.level,
                models=choice.by_operation,
                model_notes=choice.notes,
            )
        except PlanError as exc:
            raise SetupError(f"cannot build the execution plan: {_problems_text(exc)}") from None
        # the endpoint's security claim, tested from sessions of the suite's own (security.py)
        self.plan.cases.extend(security_cases(self))
        self.generated = None
        if generate:
            self.add_generated()
        return self.plan

    def add_generated(self) -> None:
        """With ``--nnrp-generate``, the generated cases join the plan (once per plan)."""
        if not self.options.generate or self.generated is not None or self.plan is None:
            return
        # lazy on purpose: hypothesis loads only for a generating run
        from nnrp_conformance.generate import generated_cases

        self.plan.cases.extend(generated_cases(self))

    def plan_document(self) -> dict[str, Any]:
        art = self.options.artifacts()
        doc: dict[str, Any] = self.plan.to_json(self.options.shown(art.results),
                                                self.options.shown(art.evidence_dir))
        return doc

    def prepare(self, capabilities: Mapping[str, Any] | None = None, *,
                fetch: bool = True, write: bool = True, generate: bool = True) -> Any:
        """The one set-up sequence every face runs: the baseline (if any), manifest, recipes,
        the capability document (``capabilities`` when the caller has it, else, with ``fetch``, fetched from
        the target when there is one: a broken discovery operation is kept in
        ``capabilities_error``, an unreachable target raises :class:`TargetError`), the plan
        (its generated cases too with ``generate``), and, with ``write``, the plan written."""
        self.load_baseline()
        self.twin = self.twin or open_twin(self.options)
        self.load_manifest()
        self.load_recipes()
        if capabilities is None and fetch and self.options.target:
            capabilities = self.try_capabilities()
        plan = self.build_plan(capabilities, generate=generate)
        if write:
            self.write_plan()
        return plan

    def write_plan(self) -> Path:
        art = self.options.artifacts()
        path = art.plan
        try:
            document = self.plan_document()
        except SchemaViolationError as exc:
            # The plan is ours, so this is a suite bug; the user still gets the details.
            raise SetupError(f"the execution plan breaks its schema:\n{exc}") from None
        try:
            art.prepare()
            write_json(path, document)
        except OSError as exc:
            raise SetupError(f"cannot write the execution plan to {path}: "
                             f"{exc.strerror or exc}") from None
        return path

    def run_started(self) -> RunStarted:
        art = self.options.artifacts()
        return RunStarted(
            target=self.options.target,
            adapter=self.plan.adapter,
            profile=getattr(self.plan, "profile", contract.PROFILE),
            schema_version=getattr(self.plan, "schema_version", contract.SCHEMA_VERSION),
            cases=tuple(self.plan.cases),
            plan_path=self.options.shown(art.plan),
            manifest_path=self.options.shown(self.options.manifest) if self.options.manifest else None,
            model_id=self.model_id,
            capabilities=self.capabilities,
            metadata=self.metadata(),
        )

    def metadata(self) -> dict[str, Any]:
        """What this run tests with what (``metadata.py``), once the plan is built."""
        return run_metadata(target=self.options.target, manifest=self.options.manifest,
                            recipes=self.recipes or (), model_id=self.model_id,
                            adapter=getattr(self.plan, "adapter", None),
                            capabilities=self.capabilities)

    def close(self) -> None:
        client, self._client = self._client, None
        try:
            for closing in (client, self.twin):
                if closing is not None and self._portal is not None:
                    with contextlib.suppress(Exception):
                        self._portal.call(closing.aclose)
        finally:
            self._portal = None
            self._stack.close()

