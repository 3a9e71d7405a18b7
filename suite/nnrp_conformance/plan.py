"""The execution plan as data: one :class:`PlannedCase` per recipe (its selection, status,
level, the resolved request and expectations) and the :class:`Plan` with its coverage matrix
and its ``execution-plan`` document; :class:`PlanError` for a plan that cannot be built."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from nnrp_conformance import contract, validation
from nnrp_conformance.recipes import SESSION_SAME, Recipe

__all__ = ["Plan", "PlanError", "PlannedCase"]

class PlanError(Exception):
    """The plan cannot be built (unknown parameter, bad level or extension selection)."""


@dataclass
class PlannedCase:
    """One recipe with its selection decision and the exact request the suite will send."""

    id: str
    recipe: Recipe
    status: str
    selection: str
    reason: str | None
    operation: str
    required_capabilities: tuple[str, ...]
    level: int
    request: dict[str, Any]
    expect: dict[str, Any]
    envelope: dict[str, Any]
    parameters: dict[str, str] = field(default_factory=dict)
    checks: tuple[str, ...] = ()
    timeout_ms: int | None = None
    #: what the recipe expects beyond the profile (rule, reading): checks.judge_beyond_profile
    beyond_profile: dict[str, str] | None = None
    #: required capabilities the manifest does not claim (mandatory cases run anyway)
    missing_capabilities: tuple[str, ...] = ()
    #: extensions the case depends on: name -> critical
    extensions: dict[str, bool] = field(default_factory=dict)
    #: planner decisions worth showing in a report (retargeted operation, …)
    notes: tuple[str, ...] = ()
    #: a concurrency recipe's other operations (``concurrent``), each planned like a case of
    #: its own (id ``<recipe id>/<name>``, its own request and expectations), submitted
    #: together with this one (``concurrency.py``)
    companions: tuple[PlannedCase, ...] = ()
    #: this operation's name within its group (``recipes.LEAD_OPERATION`` for the recipe's own)
    name: str | None = None
    #: the session a companion is submitted on (``recipes.SESSION_SAME`` or
    #: ``SESSION_ANOTHER``: a second session opened for the group, ``run_cases.py``)
    session: str = SESSION_SAME

    @property
    def selected(self) -> bool:
        return self.selection == contract.SEL_SELECTED

    @property
    def rule(self) -> str | None:
        return self.recipe.rule

    @property
    def description(self) -> str | None:
        return self.recipe.description

    @property
    def expected_terminal(self) -> str:
        return str(self.expect.get("terminal", contract.TERMINAL_SUCCESS))

    @property
    def raw(self) -> dict[str, Any] | None:
        return self.request.get("raw")

    @property
    def cancel_after_events(self) -> int | None:
        """After how many events the client cancels: the recipe's ``request.cancel``, else
        one event past the in-band hint ``nnrp.cancel_after_events``. Upstream's documents
        call the hint caller-driven, and the profile never says the endpoint acts on it: so
        the client, as the caller, cancels itself, and an endpoint that acts on the hint simply
        ends first. Both readings end the operation cancelled (issue 27). One event past it,
        not at it: an endpoint that acts on the hint never sends that event, so its own ending
        never races the client's cancel, and an endpoint that does not act on it always sent
        it before the cancel: the verdict is the same run after run, with ``--concurrency``
        too (docs/verdicts.md#stable-verdicts; issue 36)."""
        cancel = self.request.get("cancel")
        if isinstance(cancel, dict):
            return cancel.get("after_events")
        nnrp = self.envelope.get("nnrp") if isinstance(self.envelope, dict) else None
        hint = nnrp.get("cancel_after_events") if isinstance(nnrp, dict) else None
        return hint + 1 if isinstance(hint, int) and not isinstance(hint, bool) and hint > 0 \
            else None

    @property
    def streaming(self) -> bool:
        body = self.envelope.get("body")
        return isinstance(body, dict) and body.get("stream") is True

    def to_plan_case(self) -> dict[str, Any]:
        """This case as an execution-plan ``cases[]`` item."""
        out: dict[str, Any] = {
            "id": self.id,
            "operation": self.operation,
            "status": self.status,
            "required_capabilities": sorted(set(self.required_capabilities)),
            "request": copy.deepcopy(self.request),
            "expect": copy.deepcopy(self.expect),
            "level": self.level,
        }
        for key in ("description", "rule"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.timeout_ms is not None:
            out["timeout_ms"] = self.timeout_ms
        if self.checks:
            out["checks"] = list(self.checks)
        if self.companions:
            out["concurrent"] = [
                {"name": c.name, "operation": c.operation,
                 **({"session": c.session} if c.session != SESSION_SAME else {}),
                 "request": copy.deepcopy(c.request),
                 "expect": copy.deepcopy(c.expect)} for c in self.companions]
        return out


@dataclass
class Plan:
    profile: str
    schema_version: str
    adapter: str
    cases: list[PlannedCase]
    parameters: dict[str, str]
    model: str | None = None
    #: operation -> its model, where it is not ``model`` (``model_choice.py``)
    models: dict[str, str] = field(default_factory=dict)
    level: int = contract.LEVEL_CHAT
    extensions: tuple[str, ...] = ()
    generated_at: str = field(
        default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))

    def selected(self) -> list[PlannedCase]:
        return [c for c in self.cases if c.selected]

    def case(self, case_id: str) -> PlannedCase:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise KeyError(case_id)

    def coverage_matrix(self) -> list[dict[str, Any]]:
        by_feature: dict[str, list[PlannedCase]] = {}
        for c in self.cases:
            by_feature.setdefault(c.operation, []).append(c)
        matrix = []
        for feature in sorted(by_feature):
            cases = by_feature[feature]
            matrix.append({
                "feature": feature,
                "required_capabilities": sorted(
                    {cap for c in cases for cap in c.required_capabilities}),
                "summary": {
                    "selected_cases": sum(c.selection == contract.SEL_SELECTED for c in cases),
                    "not_claimed_cases": sum(
                        c.selection in (contract.SEL_NOT_CLAIMED, contract.SEL_EXTENSION_NOT_SELECTED)
                        for c in cases),
                    "informational_cases": sum(c.selection == contract.SEL_INFORMATIONAL for c in cases),
                },
                "statuses": {
                    f"{status}_cases": sum(c.status == status for c in cases)
                    for status in contract.RECIPE_STATUSES
                },
                "case_ids": [c.id for c in cases],
            })
        return matrix

    def to_json(self, results_path: str = "artifacts/nnrp-results.json",
                evidence_dir: str = "artifacts/nnrp-evidence") -> dict[str, Any]:
        """The plan document: upstream format (only selected cases listed) plus our fields.

        Validated against the ``execution-plan`` schema before it is returned.
        """
        doc: dict[str, Any] = {
            "$schema": validation.schema_uri("execution-plan"),
            "profile": self.profile,
            "schema_version": self.schema_version,
            "adapter": self.adapter,
            "artifacts": {"results_path": str(results_path), "evidence_dir": str(evidence_dir)},
            "coverage_matrix": self.coverage_matrix(),
            "cases": [c.to_plan_case() for c in self.selected()],
            "generated_at": self.generated_at,
        }
        if self.model:
            doc["model"] = self.model
        if self.models:
            doc["models"] = dict(self.models)
        validation.check("execution-plan", doc)
        return doc
