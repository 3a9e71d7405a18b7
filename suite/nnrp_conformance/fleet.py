"""A fleet: one run judging several targets (the replicas of a service, or its transports),
each on its own, and the one verdict over all of them.

Owns how a fleet run lays out its files and what its verdict is made of:

* :func:`fleet_targets` checks the list of targets (at least two, none twice);
* :func:`target_options` gives each target the run's options with files of its own: plan,
  case results, reports and NDJSON stream in ``<results folder>/<target slug>/``, traces in
  ``<trace folder>/<target slug>/``, so no target's evidence overwrites another's;
* :func:`fleet_report_path` is where the merged report goes (``--report PATH``, else
  ``<results folder>/fleet``);
* the verdict is :func:`merge.merge_runs` with the fleet rules (``fleet=True``): every target
  judged, none with a failed case, one capability document for all; the targets that disagree
  with the others are named (``merge.py``).

Targets are judged one after the other, never at the same time, so one target's load cannot
change another's verdict. The CLI (``nnrp-conformance run``) and the pytest plugin both use
this module.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path

from nnrp_conformance.options import RunOptions, SetupError

__all__ = ["FLEET_REPORT", "fleet_report_path", "fleet_targets", "target_options", "target_slug"]

#: the merged report's name in the results folder when ``--report`` is not given
FLEET_REPORT = "fleet"


def target_slug(target: str) -> str:
    """A target as a folder name: ``127.0.0.1:4433`` -> ``127.0.0.1_4433``,
    ``ws://h:80/nnrp`` -> ``ws_h_80_nnrp``."""
    return re.sub(r"[^0-9A-Za-z.-]+", "_", target).strip("_.") or "target"


def fleet_targets(targets: Sequence[str]) -> list[str]:
    """The targets of a fleet run; a SetupError for a list that is not one."""
    out = [t.strip() for t in targets]
    if len(out) < 2:
        raise SetupError("a fleet run needs at least two targets")
    slugs: dict[str, str] = {}
    for target in out:
        if not target:
            raise SetupError("an empty --target was given")
        slug = target_slug(target)
        if slug in slugs:
            same = "given twice" if slugs[slug] == target else f"and {slugs[slug]!r} would " \
                "write to the same folder"
            raise SetupError(f"target {target!r} {same}: each target of a fleet run must be "
                             "a different endpoint")
        slugs[slug] = target
    return out


def target_options(options: RunOptions, target: str) -> RunOptions:
    """The run's options for one target of the fleet, with the target's own files."""
    if options.baseline_update:
        raise SetupError("--baseline-update takes one target: with several, which run's "
                         "failures should the baseline hold?")
    results = options.artifacts().results
    folder = results.parent / target_slug(target)
    return dataclasses.replace(
        options,
        target=target,
        results=folder / results.name,
        plan=folder / (options.plan.name if options.plan else "execution-plan.json"),
        report=None if options.report is None else folder / "report",
        report_ndjson=None if options.report_ndjson is None
        else folder / options.report_ndjson.name,
        trace_dir=None if options.trace_dir is None
        else options.trace_dir / target_slug(target),
    )


def fleet_report_path(options: RunOptions) -> Path:
    """Where the fleet's merged report (PATH.md and PATH.html) goes."""
    art = options.artifacts()
    return art.report_md or art.results.parent / FLEET_REPORT
