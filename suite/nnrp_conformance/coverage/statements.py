"""The normative statements of the profile's three texts, each with a stable id.

Owns splitting the profile design, the data-plane spec (Markdown) and the contract JSON into
statements, and the criterion of what counts as one (the coverage page states it):

* Markdown: a paragraph's sentences, a list item, a table's data row, a fenced example. In the
  profile design every one of these counts in the normative sections (§3 to §14: these texts
  state requirements in declarative sentences too, "The operation itself still ends exactly
  once …"), and a sentence with a normative word (MUST, SHOULD, MAY, REQUIRED, in either
  case, and "require") counts wherever it is. §1 (status), §2 (design goals) and §15 (first
  implementation slice) are informative. In the data-plane spec every sentence and list item
  counts, and a table row when its rule says MUST (the other rows describe the layout).
* The contract JSON: each tool-call event (its required and optional fields and their
  constraints), the ordering scope and each ordering rule, each ``nnrpMapping`` member and
  each ``wireMapping`` field. ``$schema``, ``contract`` and ``contractVersion`` name the
  document itself.

An id is the document's short name, the section (the profile design's number, a data-plane
heading's slug, a contract member path) and, in Markdown, the first six hex digits of the
SHA-1 of the statement's normalized text: it changes only when the statement's own text does.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from nnrp_conformance.coverage.texts import normalized, read_document

__all__ = ["Statement", "all_statements", "contract_statements", "markdown_statements"]

#: the short names in statement ids
PREFIX = {"profile-design": "pd", "contract": "c", "data-plane": "dp"}
#: the profile design's informative sections (by number)
INFORMATIVE = frozenset({"1", "2", "15"})
#: the normative words, strongest first (the statement's level is the strongest it has)
_WORDS = (("MUST NOT", r"\bmust not\b"), ("MUST", r"\bmust\b"),
          ("SHOULD NOT", r"\bshould not\b"), ("SHOULD", r"\bshould\b"),
          ("NOT REQUIRED", r"\bnot require[ds]?\b|\bnever required\b"),
          ("REQUIRED", r"\brequire[ds]?\b"), ("MAY", r"\bmay\b"), ("OPTIONAL", r"\boptional\b"))
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"(])")
_LIST_ITEM = re.compile(r"^(\d+\.|-)\s+")


@dataclass(frozen=True)
class Statement:
    """One normative statement: where it is, its kind and level, and its exact text."""

    id: str
    document: str  # a rules.DOCUMENTS key
    section: str  # the Markdown heading as written, or the contract member path
    kind: str  # sentence, list item, row, example, member
    level: str  # MUST, MUST NOT, SHOULD, SHOULD NOT, MAY, REQUIRED, or the kind
    text: str  # as written (a row with its pipes; a member as JSON)
    #: a table row's header row, normalized (a quote of the header cites the whole table)
    table: str = ""
    #: the Markdown headings it is under, its own first (a quote of a section covers its
    #: subsections, as ``texts.markdown_section`` reads them)
    within: tuple[str, ...] = ()

    @property
    def matched(self) -> str:
        """The text a quote is compared with (see :func:`comparable`)."""
        return comparable(self.text, json_text=self.document == "contract")


def comparable(text: str, *, json_text: bool = False) -> str:
    """``normalized`` text; JSON also without the spaces around its punctuation, so a quote
    copied from the file as written meets a member rendered on one line."""
    out = normalized(text)
    return re.sub(r"\s*([{}\[\]:,])\s*", r"\1", out) if json_text else out


def level_of(text: str, default: str) -> str:
    return next((name for name, word in _WORDS if re.search(word, text, re.I)), default)


def _short_hash(text: str) -> str:
    return hashlib.sha1(normalized(text).encode("utf-8")).hexdigest()[:6]


def _section_key(document: str, heading: str) -> str:
    if document == "profile-design":
        m = re.match(r"(\d+(?:\.\d+)?)\.?\s", heading)
        if m:
            return m.group(1)
    return re.sub(r"[^a-z0-9]+", "-", heading.lower().replace("`", "")).strip("-")


def _blocks(text: str) -> Iterator[tuple[tuple[str, ...], str, list[str]]]:
    """(headings, block kind, lines) for each paragraph, list item, table and fenced block;
    the headings are the block's own and its ancestors', innermost first."""
    lines = text.splitlines()
    if lines and lines[0] == "---":  # front matter (the site's navigation), not the text
        lines = lines[lines.index("---", 1) + 1:]
    stack: list[tuple[int, str]] = []
    kind, block = "", list[str]()
    fenced = False

    def heading() -> tuple[str, ...]:
        return tuple(title for _depth, title in reversed(stack))

    for line in lines:
        if fenced:
            if line.startswith("```"):
                yield heading(), "example", block
                fenced, kind, block = False, "", []
            else:
                block.append(line)
            continue
        if kind in ("item", "paragraph") and line.startswith(" ") and line.strip():
            block.append(line)  # a wrapped line of the same item or paragraph
            continue
        new = ("heading" if line.startswith("#") else "fence" if line.startswith("```")
               else "blank" if not line.strip() else "table" if line.startswith("|")
               else "item" if _LIST_ITEM.match(line) else "paragraph")
        if block and (new != kind or new == "item"):
            yield heading(), kind, block
            kind, block = "", []
        if new == "heading":
            depth = len(line) - len(line.lstrip("#"))
            stack = [(d, t) for d, t in stack if d < depth] + [(depth, line.lstrip("#").strip())]
        elif new == "fence":
            fenced = True
        elif new != "blank":
            kind = new
            block.append(line)
    if block:
        yield heading(), kind, block


def _pieces(kind: str, lines: list[str]) -> Iterator[tuple[str, str, str]]:
    """(statement kind, text, table header) for one block."""
    if kind == "example":
        yield "example", "\n".join(lines), ""
    elif kind == "table":
        header = normalized(lines[0])
        for row in lines[2:]:
            yield "row", row.strip(), header
    elif kind == "item":
        yield "list item", " ".join(x.strip() for x in lines), ""
    else:
        for sentence in _SENTENCE_END.split(" ".join(x.strip() for x in lines)):
            yield "sentence", sentence, ""


#: the levels that make a data-plane table row a statement
_ROW_REQUIREMENTS = frozenset({"MUST", "MUST NOT", "SHOULD", "SHOULD NOT", "REQUIRED"})


def _counts(document: str, heading: str, kind: str, text: str) -> bool:
    if document == "data-plane":
        return kind != "row" or level_of(text, "") in _ROW_REQUIREMENTS
    number = _section_key(document, heading).split(".")[0]
    return number not in INFORMATIVE or (kind == "sentence" and level_of(text, "") != "")


def markdown_statements(document: str) -> list[Statement]:
    """The statements of the profile design or the data-plane spec, in document order."""
    found: list[Statement] = []
    seen: set[str] = set()
    for within, kind, lines in _blocks(read_document(document)):
        if not within:
            continue
        heading = within[0]
        for piece_kind, text, table in _pieces(kind, lines):
            if not _counts(document, heading, piece_kind, text):
                continue
            base = f"{PREFIX[document]}-{_section_key(document, heading)}-{_short_hash(text)}"
            sid, n = base, 1
            while sid in seen:  # the same words twice in one section
                n += 1
                sid = f"{base}-{n}"
            seen.add(sid)
            found.append(Statement(sid, document, heading, piece_kind,
                                   level_of(text, piece_kind), text, table, within))
    return found


def _member(path: str, key: str, value: object) -> Statement:
    text = f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}"
    return Statement(f"c-{path}", "contract", path, "member", level_of(text, "member"), text)


def contract_statements() -> list[Statement]:
    """The contract's normative members, in document order."""
    data = json.loads(read_document("contract"))
    found = [_member(f"toolCallEvents.{event}", event, spec)
             for event, spec in data["toolCallEvents"].items()]
    ordering = data["ordering"]
    found.append(_member("ordering.scope", "scope", ordering["scope"]))
    for rule in ordering["rules"]:
        found.append(Statement(f"c-ordering.rules-{_short_hash(rule)}", "contract",
                               "ordering.rules", "member", level_of(rule, "member"), rule))
    found += [_member(f"nnrpMapping.{key}", key, value)
              for key, value in data["nnrpMapping"].items()]
    for group, members in data["wireMapping"].items():
        found += [_member(f"wireMapping.{group}.{key}", key, value)
                  for key, value in members.items()]
    return found


def all_statements() -> list[Statement]:
    """Every statement of the three texts: the profile design, the contract, the data plane."""
    return [*markdown_statements("profile-design"), *contract_statements(),
            *markdown_statements("data-plane")]
