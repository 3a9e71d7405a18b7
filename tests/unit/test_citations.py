"""Every "§" the project writes is an upstream document's own section (issue 36 item 2).

A bare ``§N`` (or ``openai-compatible/1 §N``, ``the profile's §N``) is a numbered section of
the profile design; ``vLLM adapter design §N`` one of the adapter design's; ``contract JSON
§a.b`` a member of the public contract JSON; ``data-plane spec §Title`` a heading of the NNRP
data-plane spec. Their copies are this repository's ``upstream/`` (byte for byte the documents
under ``shared/upstream`` beside the clone, which ``test_rule_sources`` keeps honest). This
project's working summary (``spec §…``, ``upstream-notes §…``, ``D §``/``V §``) and the nnrp-py
notes are never cited with a "§": their numbers are not the profile's.

Scope: README.md, docs/ (prose, the example endpoint, the reference hook), the rulebook and
the schemas (whose descriptions are the generated reference pages), our recipes, and the
suite's code (its rule messages). Left to their owners this session (see LEFT_OUT).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "upstream" / "nnrp-doc" / "docs"
DESIGN = DOCS / "en" / "design" / "openai-compatible-profile.md"
ADAPTER = DOCS / "en" / "design" / "vllm-nnrp-adapter.md"
DATA_PLANE = DOCS / "en" / "protocol" / "v1" / "data-plane.md"
CONTRACT = DOCS / "public" / "contracts" / "openai-compatible-1.json"

#: not this project's to edit here: the changelogs (history), the architecture page and the
#: files another engineer is splitting this session (to be brought in scope after the merge)
LEFT_OUT = {
    "docs/changelog.md", "docs/architecture.md",
    "suite/nnrp_conformance/planner.py", "suite/nnrp_conformance/client",
}


def numbered(path: Path) -> set[str]:
    """The section numbers of a Markdown document: ``## 7.1 Title`` -> ``7.1``."""
    text = path.read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^#+\s+(\d+(?:\.\d+)?)\.?\s", text, re.M)}


def headings(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [m.group(1).strip().strip("`") for m in re.finditer(r"^#+\s+(.*)$", text, re.M)]


def members(data: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{prefix}{key}"
            yield path
            yield from members(value, path + ".")


SECTIONS = numbered(DESIGN)
ADAPTER_SECTIONS = numbered(ADAPTER)
DATA_PLANE_HEADINGS = [h.replace("`", "") for h in headings(DATA_PLANE)]
CONTRACT_MEMBERS = set(members(json.loads(CONTRACT.read_text(encoding="utf-8"))))

#: words before a "§" that cite something other than the upstream documents
_FORBIDDEN = re.compile(r"(?:\b(?:spec|notes|upstream-notes|upstream|D|V|C|nc)|notes/[\w.-]+)"
                        r"\s*$")


def problems_in(text: str) -> list[str]:
    """Each "§" of ``text`` that is not an upstream document's own section, with why."""
    found = []
    for m in re.finditer("§", text):
        # the words before it, across a line break (a comment's or quote's markers dropped)
        before = re.sub(r"\s*\n\s*(?:#:?|//|>|\*)?\s*", " ", text[max(0, m.start() - 60):m.start()])
        after = text[m.end():m.end() + 80]
        where = f"...{before}§{after.split(chr(10))[0][:30]}"
        number = re.match(r"(\d+(?:\.\d+)?)(\.[A-Z]\b)?", after)
        if after.startswith("{"):
            continue  # a format template (rules.Source.title), filled from the rulebook
        if re.search(r"\bRFC \d+ $", before):
            continue  # an IETF RFC's own section (RFC 8259 §8.2), named with its number
        if before.endswith("contract JSON "):
            path = re.match(r"[A-Za-z][\w.]*[A-Za-z]", after)
            if path is None or path.group(0) not in CONTRACT_MEMBERS:
                found.append(f"no such contract JSON member: {where}")
        elif before.endswith("data-plane spec "):
            if not any(after.replace("`", "").startswith(h) for h in DATA_PLANE_HEADINGS):
                found.append(f"no such data-plane spec heading: {where}")
        elif _FORBIDDEN.search(before) and not before.endswith("adapter design "):
            found.append(f"cites this project's summary or notes, not the profile: {where}")
        elif number is None or number.group(2):
            found.append(f"not a numbered section of the profile: {where}")
        elif before.endswith("adapter design "):
            if number.group(1) not in ADAPTER_SECTIONS:
                found.append(f"no such section of the vLLM adapter design: {where}")
        elif number.group(1) not in SECTIONS:
            found.append(f"no such section of the profile design: {where}")
    return found


def text_of(path: Path) -> str:
    """The file's text; a JSON file's strings with their escapes read (``\\u00a7`` is §)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.dumps(json.loads(text), ensure_ascii=False, indent=1)
    return text


def scoped_files() -> list[Path]:
    files = [REPO / "README.md", *sorted((REPO / "docs").rglob("*")),
             REPO / "suite" / "nnrp_conformance" / "rulebook.json",
             *sorted((REPO / "suite" / "nnrp_conformance" / "schemas").glob("*.json")),
             *sorted((REPO / "recipes").glob("level*/*.yaml")),
             *sorted((REPO / "suite" / "nnrp_conformance").rglob("*.py"))]
    out = []
    for path in files:
        rel = path.relative_to(REPO).as_posix()
        if path.is_file() and path.suffix in (".md", ".py", ".json", ".yaml", ".yml") \
                and not any(rel == x or rel.startswith(x + "/") for x in LEFT_OUT):
            out.append(path)
    return out


def test_the_upstream_documents_number_their_sections() -> None:
    assert {"4", "6", "6.1", "7", "7.1", "8.1", "10", "13"} <= SECTIONS
    assert "10.4" in ADAPTER_SECTIONS and "Runtime Correlation" in DATA_PLANE_HEADINGS
    assert "toolCallEvents" in CONTRACT_MEMBERS and "wireMapping.terminalResult" in \
        CONTRACT_MEMBERS


def test_every_section_sign_is_an_upstream_documents_own_section() -> None:
    files = scoped_files()
    assert len(files) > 100
    found = [f"{p.relative_to(REPO)}: {problem}" for p in files
             for problem in problems_in(text_of(p))]
    assert found == [], "\n".join(found)


def test_the_check_itself_can_fail() -> None:
    assert problems_in("the profile's levels (§4), events (§7.1), errors (§10)") == []
    assert problems_in("RFC 8259 §8.2 and I-JSON (RFC 7493 §2.1)") == []
    assert problems_in("contract JSON §wireMapping.terminalResult; data-plane spec "
                       "§Runtime Correlation; the vLLM adapter design §10.4") == []
    for wrong in ("spec §3", "upstream-notes §8.2", "(D §6.1)", "V §10.4", "notes §6",
                  "§16", "§7.3", "contract JSON §toolCalls", "data-plane spec §Nowhere",
                  "§ alone", "the vLLM adapter design §14", "upstream-notes\n§11.E",
                  "stricter than upstream, §11.C", "RFC §8.2"):
        assert problems_in(wrong), wrong
