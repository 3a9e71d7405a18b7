"""The statement-coverage page (``docs/coverage.md``), rendered from a :class:`Coverage`.

Owns the page's words and layout: the criterion, the summary counts (per document and per
kind of reason), then one table per document section listing each statement with its level,
its text and what tests it (rules linked to the rule reference, recipes by id) or why not.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

from nnrp_conformance import rules
from nnrp_conformance.coverage.mapping import Coverage
from nnrp_conformance.coverage.statements import INFORMATIVE, Statement

COMMAND = "python -m nnrp_conformance.coverage --out docs/coverage.md"
_INFORMATIVE = ", ".join(f"§{n}" for n in sorted(INFORMATIVE, key=int))
_TITLES = {"profile-design": "Profile design", "contract": "Contract JSON",
           "data-plane": "Data-plane spec"}
#: what each kind of reason means (reasons.json's ``kind``; coverage-reasons.schema.json)
KINDS = {
    "uncited": "judged by a rule that quotes another text (the reason names it)",
    "client": "a requirement on the client: the suite is the client",
    "transport": "NNRP framing that nnrp-py encodes and decodes",
    "permission": "a freedom the profile gives: no rule may fail it",
    "informative": "a description, rationale or example",
    "recipes": "about how conformance cases are written",
    "untested": "a requirement no rule judges yet",
}

HEADER = f"""\
# Statement coverage

<!-- generated from the profile's texts in upstream/, suite/nnrp_conformance/rulebook.json,
     the recipes and suite/nnrp_conformance/coverage/reasons.json; do not edit -->

Regenerate this page with `{COMMAND}`.

Every normative statement of the profile's three texts, with the rules and recipes that test
it or the reason it is not tested, in the manner of test262 and web-platform-tests.
`tests/unit/test_coverage_page.py` fails when this page is stale, when a statement has neither
a test nor a reason, when a reason is given for a tested statement, and when a `profile` rule
quotes text that is no statement here.

**What counts as a statement.** In the profile design: every sentence, list item, table row
and example of the normative sections (§3 to §14; these texts state requirements in plain
declaratives too, "The operation itself still ends exactly once through its NNRP terminal
outcome."), and in the informative sections ({_INFORMATIVE}) a sentence with a normative word
(MUST, SHOULD, MAY, REQUIRED or "require", in either case). In the data-plane spec: every
sentence and list item, and a table row whose rule states a requirement (MUST, SHOULD,
REQUIRED); the other rows describe the layout. In the contract JSON: each tool-call event, the
ordering scope and each ordering rule, each `nnrpMapping` member and each `wireMapping` field.
The level is the strongest normative word the statement has, else its kind. An id is the
document (`pd`, `c`, `dp`), the section and, in Markdown, the start of a hash of the
statement's own text: it changes only when that text does.

**What tests a statement.** A `profile` rule tests it when one of the rule's quotes falls on
it, within the section the quote names: the quote is inside the statement, the statement is
inside the quote, or the quote is the header row of the statement's table (it cites the whole
table). A recipe tests it when the recipe cites it the same way. Listed beside a tested
statement are also the recipes that name one of its rules (a rule id, or a `checks:` entry
that rule judges), or that cite its profile-design section in their `rule:` line and ask for
something one of its rules judges: an answer (framed, decoded and ended once), an expected
terminal or events, an error, tool calls, usage, a cancel, operations in flight together, a
deadline, a non-streaming request, their operation. Every other statement gives its reason
([kinds](#kinds-of-reason)), from `suite/nnrp_conformance/coverage/reasons.json`
([its schema](reference/rulebook.md#schema-coverage-reasons)).
"""


def _slug(text: str) -> str:
    """The anchor Python-Markdown's toc gives a heading (its default slugify)."""
    value = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def _rule_link(rule_id: str) -> str:
    name = rule_id + "*" if rule_id.endswith(".") else rule_id
    return f"[`{name}`](reference/rules.md#{_slug(name)})"


def _cell(text: str) -> str:
    """A statement's text inside a table cell: one line, links as their words, pipes escaped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", " ".join(text.split()))
    # a pipe inside a code span does not split a cell (and a backslash there would show)
    parts = text.split("`")
    return "`".join(p if n % 2 else p.replace("|", "\\|") for n, p in enumerate(parts))


def _shown(st: Statement) -> str:
    if st.kind == "row":
        cells = [c.strip() for c in st.text.strip().strip("|").split("|")]
        return _cell(" · ".join(cells))
    if st.kind in ("example", "member"):
        return f"`{_cell(st.text)}`"
    return _cell(st.text)


def _what(cov: Coverage, st: Statement) -> str:
    tested = cov.tested[st.id]
    if tested.tested:
        parts = []
        if tested.rules:
            parts.append("rules " + ", ".join(_rule_link(r) for r in tested.rules))
        if tested.recipes:
            parts.append("recipes " + ", ".join(f"`{r}`" for r in tested.recipes))
        return "; ".join(parts)
    reason = cov.reasons.get(st.id)
    if reason is None:  # a problem of the mapping: the command refuses to write the page
        return "**not tested, and no reason given**"
    return f"*not tested ({reason.kind})*: {_cell(reason.reason)}"


def _summary(cov: Coverage) -> list[str]:
    out = ["## Summary", "",
           "| document | statements | tested | not tested, with reason |", "| --- | ---: | ---: | ---: |"]
    total = Counter[str]()
    for doc, title in _TITLES.items():
        mine = [s for s in cov.statements if s.document == doc]
        n_tested = sum(cov.tested[s.id].tested for s in mine)
        total.update(statements=len(mine), tested=n_tested, reason=len(mine) - n_tested)
        out.append(f"| {title} (`{rules.DOCUMENTS[doc][1]}`) | {len(mine)} | {n_tested} | "
                   f"{len(mine) - n_tested} |")
    out.append(f"| **all three** | **{total['statements']}** | **{total['tested']}** | "
               f"**{total['reason']}** |")
    kinds = Counter(r.kind for r in cov.reasons.values())
    out += ["", "### Kinds of reason", "", "| kind | meaning | statements |", "| --- | --- | ---: |"]
    out += [f"| `{kind}` | {meaning} | {kinds.get(kind, 0)} |" for kind, meaning in KINDS.items()]
    return out


def render(cov: Coverage) -> str:
    """The whole page."""
    out = [HEADER.rstrip("\n"), "", *_summary(cov)]
    for doc, title in _TITLES.items():
        out += ["", f"## {title}"]
        section = None
        for st in (s for s in cov.statements if s.document == doc):
            where = st.section.split(".")[0] if doc == "contract" else st.section
            if where != section:
                section = where
                name = f"`{where}`" if doc == "contract" else where.replace("`", "")
                out += ["", f"### {title}: {name}", "",
                        "| id | level | statement | tested by, or why not |",
                        "| --- | --- | --- | --- |"]
            out.append(f"| `{st.id}` | {st.level} | {_shown(st)} | {_what(cov, st)} |")
    return "\n".join(out) + "\n"
