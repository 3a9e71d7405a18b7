"""The profile's normative texts as this repository keeps them, and how a quote is found in them.

Owns where the verbatim copies live (``upstream/`` at the repository root, named by
``rules.DOCUMENTS``), reading them, and the one comparison every citation check uses: text
normalized (whitespace runs to one space, a table cell's padding dropped), a Markdown section
(under its heading, up to the next heading of the same or a higher level) and a JSON member
path. ``tests/unit/test_rule_sources.py`` (is each quote there?) and the coverage page (which
statement does each quote fall on?) both read the texts through here, so they cannot disagree.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from nnrp_conformance import rules

__all__ = [
    "REPO",
    "TextsMissingError",
    "document_path",
    "json_member",
    "markdown_section",
    "normalized",
    "read_document",
]

#: the repository checkout this package sits in (the texts are not in the wheel)
REPO = Path(__file__).resolve().parents[3]

_HEADING = re.compile(r"^(#+)\s+(.*?)\s*$")


class TextsMissingError(FileNotFoundError):
    """The normative texts are not beside this package: it does not run from a checkout."""


def normalized(text: str) -> str:
    """Whitespace runs to one space; a table cell's padding dropped (``| a  |`` -> ``| a |``)."""
    return re.sub(r"\s*\|\s*", " | ", " ".join(text.split()))


def markdown_section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same or a higher level; a
    KeyError naming the heading when the text has none."""
    lines = text.splitlines()
    for n, line in enumerate(lines):
        m = _HEADING.match(line)
        if m and m.group(2) == heading:
            depth = len(m.group(1))
            end = next((k for k in range(n + 1, len(lines))
                        if (h := re.match(r"^(#+)\s", lines[k])) and len(h.group(1)) <= depth),
                       len(lines))
            return "\n".join(lines[n + 1:end])
    raise KeyError(f"no heading {heading!r}")


def json_member(data: Any, path: str) -> Any:
    """The member at dotted ``path`` (``wireMapping.terminalResult``); a KeyError if none. A
    key that itself holds dots (``response.tool_call.started``) is matched whole."""
    for_keys = path
    while for_keys:
        if not isinstance(data, dict):
            raise KeyError(f"no member {path!r}")
        key = next((k for k in sorted(data, key=len, reverse=True)
                    if for_keys == k or for_keys.startswith(k + ".")), None)
        if key is None:
            raise KeyError(f"no member {path!r}")
        data, for_keys = data[key], for_keys[len(key) + 1:]
    return data


def document_path(document: str) -> Path:
    """The repository's copy of ``document`` (a ``rules.DOCUMENTS`` key)."""
    return REPO / rules.DOCUMENTS[document][1]


def read_document(document: str) -> str:
    """The text of the repository's copy of ``document``."""
    path = document_path(document)
    if not path.is_file():
        raise TextsMissingError(
            f"{path}: the profile's texts are read from a repository checkout (upstream/ at its "
            "root); this package is not running from one")
    return path.read_text(encoding="utf-8")
