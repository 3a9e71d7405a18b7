"""Accepted failures (``--nnrp-baseline FILE``): waivers, each one recipe + one rule, with a
reason and an expiry date (schema ``baseline``).

A failed case whose failing rules are all covered by unexpired waivers of that recipe reads
``waived``, never ``passed``, and does not fail the run; its case result keeps the upstream
outcome ``failed`` (the truth) with the waivers in ``diagnostics.waived``. An expired waiver
waives nothing: the failure fails, and the case's diagnostics say which waiver expired when.
A waiver that matched no failure is stale and reported, so the file shrinks as fixes land.
``--nnrp-baseline-update`` writes the file from a run: the entries that still match keep their
reason and date, a new failure gets one for the provider to state why (and a date 90 days on).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nnrp_conformance import validation
from nnrp_conformance.documents import DocumentSyntaxError, dump_yaml, is_yaml, parse_document
from nnrp_conformance.events import CaseRecord
from nnrp_conformance.rules import LEVEL_FAILED, VERDICT_WAIVED

__all__ = ["Baseline", "BaselineError", "Waiver", "load_baseline",
           "updated_baseline", "write_baseline"]

#: how long a waiver written by --nnrp-baseline-update lasts, unless the provider edits it
NEW_WAIVER_DAYS = 90
NEW_WAIVER_REASON = ("accepted by --nnrp-baseline-update on {today}: replace this with why the "
                     "failure is accepted (issue, upstream bug, fix to come)")


class BaselineError(ValueError):
    """A baseline file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Waiver:
    recipe: str
    rule: str
    reason: str
    expires: dt.date

    def expired(self, today: dt.date) -> bool:
        return today > self.expires

    def to_json(self) -> dict[str, str]:
        return {"recipe": self.recipe, "rule": self.rule, "reason": self.reason,
                "expires": self.expires.isoformat()}


def _failing_rules(record: CaseRecord) -> set[str]:
    return {f.rule for f in record.findings if f.level == LEVEL_FAILED}


@dataclass
class Baseline:
    path: Path
    waivers: list[Waiver]

    def for_recipe(self, recipe: str) -> list[Waiver]:
        return [w for w in self.waivers if w.recipe == recipe]

    def apply(self, record: CaseRecord, today: dt.date) -> CaseRecord:
        """``record`` waived when every failing rule has an unexpired waiver; an expired one
        that would have covered it is named in the diagnostics."""
        if not record.failed:
            return record
        rules = _failing_rules(record)
        waivers = self.for_recipe(record.id)
        live = [w for w in waivers if not w.expired(today) and w.rule in rules]
        expired = [w for w in waivers if w.expired(today) and w.rule in rules]
        covered = {w.rule for w in live}
        diagnostics = dict(record.upstream.get("diagnostics", {}))
        if rules and rules <= covered:
            diagnostics["waived"] = [w.to_json() for w in live]
            upstream = {**record.upstream, "diagnostics": diagnostics}
            return dataclasses.replace(record, verdict=VERDICT_WAIVED, upstream=upstream)
        if expired:
            diagnostics["expired_waivers"] = [w.to_json() for w in expired]
            return dataclasses.replace(record, upstream={**record.upstream,
                                                         "diagnostics": diagnostics})
        return record

    def problems(self, records: Iterable[CaseRecord], today: dt.date) -> list[str]:
        """Expired waivers, and waivers no failure of this run matched (stale)."""
        failing = {(r.id, rule) for r in records if r.failed for rule in _failing_rules(r)}
        out = []
        for w in self.waivers:
            if w.expired(today):
                state = "matched a failure, which fails" if (w.recipe, w.rule) in failing \
                    else "matched nothing"
                out.append(f"expired waiver {w.recipe} [{w.rule}] (expired {w.expires}; {state})")
            elif (w.recipe, w.rule) not in failing:
                out.append(f"stale waiver {w.recipe} [{w.rule}]: no failure of this run matched "
                           f"it (remove it from {self.path})")
        return out


def load_baseline(path: Path) -> Baseline:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read the baseline: {exc.strerror or exc}") from None
    try:
        data = parse_document(text, yaml_syntax=is_yaml(path))
    except DocumentSyntaxError as exc:
        raise BaselineError(f"{path}: {exc}") from None
    problems = validation.validate("baseline", data)
    if problems:
        raise BaselineError(f"{path}: {problems[0]}")
    waivers = []
    for i, w in enumerate(data["waivers"]):
        try:
            expires = dt.date.fromisoformat(w["expires"])
        except ValueError:
            raise BaselineError(f"{path}: /waivers/{i}/expires: {w['expires']!r} is not a date "
                                f"(YYYY-MM-DD)") from None
        waivers.append(Waiver(w["recipe"], w["rule"], w["reason"], expires))
    return Baseline(path, waivers)


def updated_baseline(previous: Baseline | None, records: Sequence[CaseRecord],
                     today: dt.date) -> list[Waiver]:
    """The waivers a run supports: the previous entries still matched keep their reason and
    date; each other failing (recipe, rule) gets a new entry."""
    kept = {(w.recipe, w.rule): w for w in (previous.waivers if previous else ())}
    out: list[Waiver] = []
    for r in records:
        if not r.failed:
            continue
        for rule in sorted(_failing_rules(r)):
            out.append(kept.get((r.id, rule)) or Waiver(
                r.id, rule, NEW_WAIVER_REASON.format(today=today.isoformat()),
                today + dt.timedelta(days=NEW_WAIVER_DAYS)))
    return out


def write_baseline(path: Path, waivers: Sequence[Waiver]) -> None:
    document = {"waivers": [w.to_json() for w in waivers]}
    validation.check("baseline", document)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix in (".yaml", ".yml"):
        path.write_text(dump_yaml(document, sort_keys=False, allow_unicode=True),
                        encoding="utf-8")
    else:
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
