"""Who vouches for each thing a recipe expects (issue 43 item 1): strict only from a quoted
sentence, element by element.

Every element of a recipe's ``expect`` is judged under the rule that is its authority, and
the rulebook (the one place a rule's tag lives) says how strict a miss is:

* an ``events`` entry's presence and counts (``min_count``, ``max_count``): its ``rule``;
* the fields it pins (``fields`` / ``fields_any_of``, an error's family): its
  ``fields_rule``, else its ``rule`` (an error's *code* is never a field here: no normative
  text fixes one, ``checks/errors.py`` judges it);
* the terminal kind (``expect.terminal``): ``expect.terminal_rule``.

An ``expect.*`` profile rule quotes the sentence that makes the element mandatory (a miss
fails and cites it); a recommendation (this project's reading) or an upstream rule (what
upstream's recipe fixes beyond the profile) is non-strict. A recipe of ours names the
authority of every element that can miss (the loader refuses one that does not: no strict
expectation without a normative source). Upstream's recipes are upstream's bytes: the
authorities the profile gives their elements are attached from ``upstream_authority.json``,
keyed by recipe id and entry index; any other element of a recipe that names none (upstream's,
a provider's own, a saved generated case) is upstream's: ``sequence.expected`` /
``terminal.expected``, tag ``upstream``.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from nnrp_conformance import rules

__all__ = [
    "DEFAULT_EVENT_RULE",
    "DEFAULT_TERMINAL_RULE",
    "PROFILE_FAMILY",
    "entry_rule",
    "expectation_rules",
    "fields_rule",
    "problems",
    "terminal_rule",
    "with_upstream_authority",
]

#: an entry that names no authority (only outside our recipes): upstream's expectation
DEFAULT_EVENT_RULE = "sequence.expected"
#: a terminal kind that names no authority (only outside our recipes): upstream's
DEFAULT_TERMINAL_RULE = "terminal.expected"
#: the profile rules a recipe element may name: each quotes what makes such an element
#: mandatory (a catch-all like §14's "3. Expected event sequence." makes nothing mandatory)
PROFILE_FAMILY = "expect."

_OVERLAY = Path(__file__).with_name("upstream_authority.json")


def entry_rule(entry: Mapping[str, Any]) -> str:
    """The authority of an ``expect.events`` entry's presence and counts."""
    return str(entry.get("rule") or DEFAULT_EVENT_RULE)


def fields_rule(entry: Mapping[str, Any]) -> str:
    """The authority of the fields an ``expect.events`` entry pins."""
    return str(entry.get("fields_rule") or entry_rule(entry))


def terminal_rule(expect: Mapping[str, Any] | None) -> str:
    """The authority of ``expect.terminal``."""
    return str((expect or {}).get("terminal_rule") or DEFAULT_TERMINAL_RULE)


def expectation_rules(expect: Mapping[str, Any] | None) -> frozenset[str]:
    """Every rule a miss of ``expect`` can be reported under (the judge's and the generated
    cases' readings replace exactly these findings, nothing else)."""
    found = {terminal_rule(expect)}
    for entry in (expect or {}).get("events") or ():
        found |= {entry_rule(entry), fields_rule(entry)}
    return frozenset(found)


def _can_miss(entry: Mapping[str, Any]) -> bool:
    """Whether an entry can fail at all: a count it needs, a limit, or fields it pins (an
    optional entry without them only places the cursor)."""
    needed = entry.get("min_count", 0 if entry.get("optional") else 1)
    return bool(needed) or "max_count" in entry or "fields" in entry or \
        "fields_any_of" in entry


def _expects(data: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(pointer, expect) of the recipe's request and of each concurrent operation."""
    if isinstance(data.get("expect"), dict):
        yield "/expect", data["expect"]
    for i, op in enumerate(data.get("concurrent") or ()):
        if isinstance(op, dict) and isinstance(op.get("expect"), dict):
            yield f"/concurrent/{i}/expect", op["expect"]


def _named_problem(rule_id: str) -> str | None:
    rule = rules.rulebook().get(rule_id)
    if rule is None:
        return f"{rule_id!r} is not a rule of the rulebook (docs/reference/rules.md)"
    if rule.tag == rules.TAG_PROFILE and not rule_id.startswith(PROFILE_FAMILY):
        return (f"{rule_id!r} is a profile rule but not one of the {PROFILE_FAMILY}* rules "
                f"that quote what makes an expectation mandatory")
    return None


def problems(data: Mapping[str, Any], *, ours: bool) -> list[tuple[str, str]]:
    """(pointer, message) for each authority a recipe names wrongly, and, in a recipe of
    ours, each element that can miss but names none."""
    found: list[tuple[str, str]] = []
    for where, expect in _expects(data):
        named: list[tuple[str, str]] = []
        for i, entry in enumerate(expect.get("events") or ()):
            if not isinstance(entry, dict):
                continue
            at = f"{where}/events/{i}"
            named += [(f"{at}/{key}", entry[key]) for key in ("rule", "fields_rule")
                      if isinstance(entry.get(key), str)]
            if ours and _can_miss(entry) and "rule" not in entry:
                found.append((f"{at}/rule", f"this {entry.get('type')} expectation names no "
                              f"authority: name the {PROFILE_FAMILY}* profile rule quoting what "
                              f"makes it mandatory, or the recommendation it is"))
        if isinstance(expect.get("terminal_rule"), str):
            named.append((f"{where}/terminal_rule", expect["terminal_rule"]))
        elif ours:
            found.append((f"{where}/terminal_rule", f"the expected terminal "
                          f"{expect.get('terminal')!r} names no authority: name the "
                          f"{PROFILE_FAMILY}* profile rule quoting what makes it mandatory, "
                          f"or the recommendation it is"))
        found += [(pointer, msg) for pointer, rule_id in named
                  if (msg := _named_problem(rule_id)) is not None]
    return found


@functools.cache
def _overlay() -> Mapping[str, Any]:
    data = json.loads(_OVERLAY.read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if not k.startswith("$")}


def with_upstream_authority(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Upstream's recipe ``data`` with the authorities the profile gives its elements
    (``upstream_authority.json``), and the problems of that overlay (an entry it names that
    the recipe does not have). The recipe's own bytes are never changed."""
    extra = _overlay().get(str(data.get("id")))
    if not isinstance(extra, dict) or not isinstance(data.get("expect"), dict):
        return data, []
    out = copy.deepcopy(data)
    expect, issues = out["expect"], []
    if "terminal_rule" in extra:
        expect["terminal_rule"] = extra["terminal_rule"]
    events = expect.get("events") or []
    for key, authority in (extra.get("events") or {}).items():
        k = int(key)
        if not 0 <= k < len(events) or not isinstance(events[k], dict):
            issues.append(f"upstream_authority.json names expect.events[{k}], which this "
                          f"recipe does not have")
            continue
        events[k].update(authority)
    return out, issues
