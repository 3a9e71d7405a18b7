"""Which rules and recipes test each statement, which statements are left untested and why,
and what is wrong with that mapping.

Owns the criterion the coverage page states: a statement is tested by every ``profile`` rule
with a source whose quote falls on it (the quote inside the statement, the statement inside
the quote, or the quote is the header row of the statement's table), within the section the
source names (a section includes its subsections; a contract member its members). A recipe
tests it when one of its citations (a ``{document, section, quote}`` object anywhere in the
recipe) falls on it; a recipe is listed beside a tested statement when it names one of the
statement's rules (a rule id, or a ``checks:`` entry judged by the rule), or cites the
statement's profile-design section in its ``rule:`` line and asks for something one of the
statement's rules judges (:func:`recipe_asks`). Every other statement needs a
reason in ``reasons.json``; a reason for a tested statement is stale.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrp_conformance import rules, validation
from nnrp_conformance.coverage.statements import PREFIX, Statement, comparable
from nnrp_conformance.documents import DocumentSyntaxError, parse_document
from nnrp_conformance.recipes import Recipe

__all__ = [
    "CHECK_RULES",
    "REASONS_FILE",
    "Coverage",
    "Reason",
    "Tested",
    "compute",
    "falls_on",
    "load_reasons",
]

REASONS_FILE = Path(__file__).with_name("reasons.json")
#: the rules each named check of a recipe (``checks:``) judges (checks/__init__.py)
CHECK_RULES: Mapping[str, tuple[str, ...]] = {
    "capability-document": ("capability.document", "capability.agreement"),
    "usage-shape": ("usage.shape",),
    "text-order": ("order.text-index",),
}
#: the keys under which a recipe names a rule id
_RULE_KEYS = frozenset({"rule", "rules", "fields_rule", "terminal_rule"})
_RULE_ID = re.compile(r"^[a-z][a-z0-9_.-]*$")
#: a profile-design section in a recipe's ``rule:`` line (not the adapter design's); the
#: section sign is written as its escape so this pattern is not read as a citation
_SECTION = re.compile(r"(?<!adapter design )\u00a7(\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class Reason:
    """Why some statements are not tested: a kind (summarised on the page) and the words."""

    kind: str
    reason: str
    statements: tuple[str, ...]


@dataclass(frozen=True)
class Tested:
    """What tests one statement (empty tuples: nothing)."""

    rules: tuple[str, ...] = ()
    recipes: tuple[str, ...] = ()
    #: recipes that cite the statement itself (these alone make it tested)
    citing: tuple[str, ...] = ()

    @property
    def tested(self) -> bool:
        return bool(self.rules or self.citing)


@dataclass
class Coverage:
    """The statements, what tests each, each untested one's reason, and the problems."""

    statements: list[Statement]
    tested: dict[str, Tested]
    reasons: dict[str, Reason]
    problems: list[str] = field(default_factory=list)


def load_reasons(path: Path | None = None) -> list[Reason]:
    """The reasons file, schema-checked (``coverage-reasons.schema.json``); a
    DocumentSyntaxError or SchemaViolationError naming the file when it is not valid."""
    path = REASONS_FILE if path is None else path
    try:
        data = parse_document(path.read_text(encoding="utf-8"), yaml_syntax=False)
    except DocumentSyntaxError as exc:
        raise DocumentSyntaxError(f"{path}: {exc}") from None
    validation.check("coverage-reasons", data)
    return [Reason(r["kind"], r["reason"], tuple(r["statements"])) for r in data["reasons"]]


def falls_on(source: rules.Source, statement: Statement) -> bool:
    """Whether ``source``'s quote falls on ``statement`` (the module's criterion)."""
    if source.document != statement.document:
        return False
    if statement.document == "contract":
        if statement.section != source.section \
                and not statement.section.startswith(source.section + "."):
            return False
    elif source.section not in statement.within:
        return False
    quote = comparable(source.quote, json_text=statement.document == "contract")
    text = statement.matched
    return quote in text or text in quote or (bool(statement.table) and quote == statement.table)


def _walk(data: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    yield key, data
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _walk(v, k)
    elif isinstance(data, list):
        for v in data:
            yield from _walk(v, key)


def recipe_citations(recipe: Recipe) -> list[rules.Source]:
    """The citations a recipe carries: each ``{document, section, quote}`` object in it that
    quotes one of the three normative texts."""
    return [rules.Source(v["document"], v["section"], v["quote"])
            for _k, v in _walk(recipe.data)
            if isinstance(v, dict) and {"document", "section", "quote"} <= set(v)
            and v["document"] in PREFIX]  # an upstream recipe's quote is no statement


def recipe_rules(recipe: Recipe) -> set[str]:
    """The rule ids a recipe names: under a ``rule``/``rules`` key, or through its checks."""
    named = {v for k, v in _walk(recipe.data) if k in _RULE_KEYS and isinstance(v, str)
             and _RULE_ID.match(v) and rules.lookup(v) is not None}
    for check in recipe.checks:
        named.update(CHECK_RULES.get(check, ()))
    return named


#: the rules that judge every answer: its frames, their decoding, its one terminal, its
#: expected terminal and events
_EVERY_ANSWER = ("wire.", "event.decode", "terminal.exactly-once", "terminal.after",
                 "terminal.kind", "sequence.expected")
#: what a recipe's operation asks of the endpoint, and the family of rules that judges it
_OPERATION_RULES = {"responses.create": "responses.", "models.list": "models.",
                    "embeddings.create": "embeddings."}


def recipe_asks(recipe: Recipe) -> set[str]:
    """The rules (ids, or families ending in ``.``) that judge what the recipe asks for: an
    answer (framed, decoded and ended once: ``_EVERY_ANSWER``), its
    expected terminal and events (``terminal.kind``, ``sequence.expected``; an expected error,
    ``error.body``; tool-call events, ``order.tool-call`` and ``tool-call.``; a usage event,
    ``usage.``), a cancel (``cancel.``), operations in flight together (``concurrency.``), a
    deadline (``timeout.``), a non-streaming request (``nonstreaming.``) and its operation's
    own family (checks/__init__.py says which check judges which)."""
    data = recipe.data
    request = data.get("request") or {}
    nnrp = request.get("nnrp") or {}
    expect = data.get("expect") or {}
    types = {str(e.get("type")) for e in expect.get("events") or () if isinstance(e, dict)}
    asks = set(_EVERY_ANSWER)
    conditions = {
        "error.body": expect.get("terminal") == "error" or "response.error" in types,
        "order.tool-call": any(t.startswith("response.tool_call.") for t in types),
        "tool-call.": any(t.startswith("response.tool_call.") for t in types),
        "usage.": "response.usage" in types,
        "cancel.": "cancel" in request or "cancel_after_events" in nnrp,
        "concurrency.": bool(recipe.concurrent),
        "timeout.": recipe.timeout_ms is not None or "timeout_ms" in nnrp,
        "nonstreaming.": (request.get("body") or {}).get("stream") is False,
    }
    asks.update(rule for rule, applies in conditions.items() if applies)
    if recipe.operation in _OPERATION_RULES:
        asks.add(_OPERATION_RULES[recipe.operation])
    return asks


def _asked(asks: set[str], rule_id: str) -> bool:
    return any(rule_id == a or (a.endswith(".") and rule_id.startswith(a)) for a in asks)


def recipe_sections(recipe: Recipe) -> set[str]:
    """The profile-design sections a recipe's ``rule:`` line cites (``§9``, ``§6.1``)."""
    return set(_SECTION.findall(recipe.rule or ""))


def _section_number(statement: Statement) -> str:
    m = re.match(r"(\d+(?:\.\d+)?)\.?\s", statement.section)
    return m.group(1) if m and statement.document == "profile-design" else ""


def compute(statements: Sequence[Statement], book: Mapping[str, rules.Rule],
            recipes: Iterable[Recipe], reasons: Iterable[Reason]) -> Coverage:
    """The mapping and its problems (see the module's docstring)."""
    problems: list[str] = []
    profile = [r for r in book.values() if r.tag == rules.TAG_PROFILE]
    by_rule: dict[str, set[str]] = {}
    for rule in profile:
        for source in rule.sources:
            hit = {s.id for s in statements if falls_on(source, s)}
            if not hit:
                problems.append(f"rule {rule.id} quotes text that is no statement on the page "
                                f"({source.title}): {source.quote!r}")
            by_rule.setdefault(rule.id, set()).update(hit)
    recipes = list(recipes)
    citing: dict[str, set[str]] = {}
    for recipe in recipes:
        for source in recipe_citations(recipe):
            hit = {s.id for s in statements if falls_on(source, s)}
            if not hit:
                problems.append(f"recipe {recipe.id} cites text that is no statement on the "
                                f"page ({source.title}): {source.quote!r}")
            for sid in hit:
                citing.setdefault(sid, set()).add(recipe.id)
    named = {r.id: recipe_rules(r) for r in recipes}
    sections = {r.id: recipe_sections(r) for r in recipes}
    asks = {r.id: recipe_asks(r) for r in recipes}
    tested: dict[str, Tested] = {}
    for st in statements:
        its_rules = sorted(rid for rid, hit in by_rule.items() if st.id in hit)
        listed = set(citing.get(st.id, ()))
        if its_rules:
            listed.update(rid for rid, names in named.items() if names & set(its_rules))
            listed.update(rid for rid, secs in sections.items() if _section_number(st) in secs
                          and any(_asked(asks[rid], r) for r in its_rules))
        tested[st.id] = Tested(tuple(its_rules), tuple(sorted(listed)),
                               tuple(sorted(citing.get(st.id, ()))))
    given: dict[str, Reason] = {}
    for reason in reasons:
        for sid in reason.statements:
            if sid not in tested:
                problems.append(f"a reason names {sid}, which is no statement on the page "
                                f"(was its text changed?)")
            elif sid in given:
                problems.append(f"{sid} has two reasons")
            elif tested[sid].tested:
                problems.append(f"{sid} is tested ({', '.join(tested[sid].rules)}): its reason "
                                f"is stale: {reason.reason!r}")
            else:
                given[sid] = reason
    for st in statements:
        if not tested[st.id].tested and st.id not in given:
            problems.append(f"{st.id} ({st.document} {st.section}) is not tested and has no "
                            f"reason: {st.text!r}")
    return Coverage(list(statements), tested, given, problems)
