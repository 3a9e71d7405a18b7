"""Several runs' case results as one: one column per run (a replica, a transport, a version),
one row per recipe, and where the runs disagree.

:func:`load_run` reads one case-results document (schema-checked; errors name the file);
:func:`merge_runs` lines the runs up. A run is named by its ``diagnostics.run`` metadata
(target and transport, ``metadata.py``) or, for results written before runs carried it, by
its file. The merged verdict passes only when no run has a failed case (a case a baseline
waived counts as waived, as in its own run; a non-strict one passed). Called out:

* a recipe with different outcomes among the runs that ran it;
* runs whose capability documents, manifests or recipe sets differ (digests), since their
  verdicts then answer different questions;
* the runs that disagree with the others (:attr:`MergedRuns.outliers`): on each such point,
  the runs outside the largest group that agrees (every run, when no group is largest).

A *fleet* (``merge_runs(..., fleet=True)``, the targets of one ``run --target A --target B``:
replicas of one service) is held to more: every target must have been judged (``unjudged``
names those that could not be, with the reason) and all must announce the same capability
document, since a client cannot tell which replica it reaches.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrp_conformance import contract, rules, validation
from nnrp_conformance.metadata import run_label

__all__ = ["MergeError", "MergedRuns", "RunResults", "load_run", "merge_runs"]

#: the metadata digests that must agree for runs to be comparable, with their names
DIGESTS = (("capabilities_digest", "capability document"), ("manifest_digest", "manifest"),
           ("recipe_set_digest", "recipe set"))


class MergeError(ValueError):
    """A case-results file that cannot be merged; the message names it."""


@dataclass(frozen=True)
class RunResults:
    path: Path
    label: str
    metadata: dict[str, Any]
    outcomes: dict[str, str]  # recipe id -> passed / failed / skipped / waived
    adapter: str

    @property
    def failed(self) -> list[str]:
        return [i for i, o in self.outcomes.items() if o == contract.OUTCOME_FAILED]


@dataclass
class MergedRuns:
    runs: list[RunResults]
    recipes: list[str]
    disagreements: dict[str, dict[str, str]] = field(default_factory=dict)
    mismatched: list[str] = field(default_factory=list)  # "capability document: a vs b, c"
    #: run label -> why it stands apart from the others (one line per point)
    outliers: dict[str, list[str]] = field(default_factory=dict)
    #: the targets of one fleet run, held to the fleet rules (module docstring)
    fleet: bool = False
    #: fleet targets that could not be judged -> the reason (unreachable, no document)
    unjudged: dict[str, str] = field(default_factory=dict)
    #: the capability documents differ (a fleet then fails)
    capabilities_differ: bool = False

    @property
    def passed(self) -> bool:
        if any(r.failed for r in self.runs):
            return False
        return not (self.fleet and (self.unjudged or self.capabilities_differ))

    @property
    def exit_code(self) -> int:
        return contract.EXIT_OK if self.passed else contract.EXIT_FAILED


def load_run(path: Path) -> RunResults:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MergeError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise MergeError(f"{path}: not JSON: {exc}") from None
    problems = validation.validate("case-results", doc)
    if problems:
        raise MergeError(f"{path}: not a case-results document: {problems[0]}")
    results = doc["results"]
    meta: dict[str, Any] = {}
    for r in results:
        run = (r.get("diagnostics") or {}).get("run")
        if isinstance(run, dict):
            meta = run
            break
    label = run_label(meta) if meta.get("target") else str(path)
    return RunResults(path, label, meta, {r["id"]: _merged_outcome(r) for r in results},
                      doc["adapter"])


def _merged_outcome(result: dict[str, Any]) -> str:
    """What one case counts as in a merge: its run's own verdict. A case a baseline waived
    keeps upstream's outcome ``failed`` in the file (the truth) but did not fail its run, and
    does not fail the merge; a non-strict case is ``passed`` already."""
    # baseline.py writes diagnostics.waived only when every failing rule had a live waiver
    waived = (result.get("diagnostics") or {}).get("waived")
    return rules.VERDICT_WAIVED if waived else str(result["outcome"])


def _odd_ones(groups: dict[str, list[str]]) -> list[tuple[list[str], str]]:
    """(labels, what they hold) for every group outside the one largest group; all groups
    when no group is largest."""
    sizes = sorted((len(labels) for labels in groups.values()), reverse=True)
    tie = len(sizes) > 1 and sizes[0] == sizes[1]
    largest = max(groups, key=lambda k: len(groups[k]))
    return [(labels, key) for key, labels in groups.items() if tie or key != largest]


def merge_runs(paths: Sequence[Path], *, fleet: bool = False,
               unjudged: dict[str, str] | None = None) -> MergedRuns:
    unjudged = dict(unjudged or {})
    if len(paths) + len(unjudged) < 2:
        raise MergeError("merge needs at least two case-results files")
    runs = [load_run(Path(p)) for p in paths]
    seen: dict[str, int] = {}
    for i, run in enumerate(runs):  # two runs of one target (two versions): number them
        n = seen[run.label] = seen.get(run.label, 0) + 1
        if n > 1:
            runs[i] = RunResults(run.path, f"{run.label} #{n}", run.metadata, run.outcomes,
                                 run.adapter)
    recipes: list[str] = []
    for run in runs:
        recipes += [i for i in run.outcomes if i not in recipes]
    merged = MergedRuns(runs, recipes, fleet=fleet, unjudged=unjudged)
    for recipe in recipes:
        ran = {r.label: r.outcomes[recipe] for r in runs
               if r.outcomes.get(recipe, contract.OUTCOME_SKIPPED) != contract.OUTCOME_SKIPPED}
        if len(set(ran.values())) > 1:
            merged.disagreements[recipe] = ran
            by_outcome: dict[str, list[str]] = {}
            for label, outcome in ran.items():
                by_outcome.setdefault(outcome, []).append(label)
            for labels, outcome in _odd_ones(by_outcome):
                for label in labels:
                    merged.outliers.setdefault(label, []).append(f"{recipe}: {outcome}")
    for key, what in DIGESTS:
        groups: dict[str, list[str]] = {}
        for run in runs:
            digest = run.metadata.get(key)
            if digest:
                groups.setdefault(str(digest), []).append(run.label)
        if len(groups) > 1:
            merged.mismatched.append(
                f"{what} differs: " + " vs ".join(", ".join(labels) for labels in groups.values()))
            merged.capabilities_differ |= key == "capabilities_digest"
            for labels, _digest in _odd_ones(groups):
                for label in labels:
                    merged.outliers.setdefault(label, []).append(f"its {what} differs")
    return merged
