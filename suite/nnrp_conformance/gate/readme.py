"""What the README must document: the serving target's supported lines and the extras.

Owns: reading README.md (Markdown, tables or prose) for every declared line's range, lower
bound tested and current line tested (rows or sentences naming 'declared range', 'lower
bound', 'current line'; a table may give each line a column), and the extras; and
cross-checking the target's extra (the policy's target key, e.g. ``vllm``), in the README's
'Optional dependencies' section and in a ``pyproject.toml`` beside it, against the lines
joined. Returns facts and problems; the gate turns them into a verdict.
"""

from __future__ import annotations

import posixpath
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from nnrp_conformance.gate.requirements import Line, Requirements

__all__ = ["ReadmeFacts", "read_readme"]

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE = re.compile(r"`([^`]+)`")
_VERSION = re.compile(r"(?<![\w.])(\d+\.\d+(?:\.(?:\d+|x))?)(?![\w])")
_SPEC_OPS = re.compile(r"(?:===|==|!=|~=|<=|>=|<|>)")


@dataclass
class ReadmeFacts:
    path: Path
    declared_ranges: list[str] = field(default_factory=list)
    lower_bound: list[str] = field(default_factory=list)
    current_line: list[str] = field(default_factory=list)
    extras_found: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)


def _lines_mentioning(lines: list[str], phrase: str) -> list[tuple[int, str]]:
    return [(i + 1, line) for i, line in enumerate(lines) if phrase in line.lower()]


def _specifiers_in(line: str, key: str) -> list[str]:
    """Every version specifier in ``line``'s code spans (the whole line if it has none)."""
    found = []
    for text in _CODE.findall(line) or [line]:
        candidate = str(text).strip()
        if candidate.lower().startswith(key):
            candidate = candidate[len(key) :].strip()
        start = _SPEC_OPS.search(candidate)
        if start is None:
            continue
        candidate = candidate[start.start() :].split("|")[0].strip().rstrip(".;)")
        try:
            SpecifierSet(candidate)
        except InvalidSpecifier:
            continue
        found.append(candidate)
    return found


def _section(lines: list[str], title: str) -> list[str] | None:
    for i, line in enumerate(lines):
        head = _HEADING.match(line)
        if head and title in head.group(2).lower():
            depth = len(head.group(1))
            body = []
            for nxt in lines[i + 1 :]:
                inner = _HEADING.match(nxt)
                if inner and len(inner.group(1)) <= depth:
                    break
                body.append(nxt)
            return body
    return None


def _pyproject_line(pyproject: Path, key: str) -> str | None:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    for entry in data.get("project", {}).get("optional-dependencies", {}).get(key, []):
        try:
            req = Requirement(entry)
        except InvalidRequirement:
            continue
        if req.name.lower() == key:
            return str(req.specifier)
    return None


def _same(spec: str, other: str) -> bool:
    return SpecifierSet(spec) == SpecifierSet(other)


def _check_ranges(lines: list[str], req: Requirements, shown: str, facts: ReadmeFacts) -> None:
    """Every line's range on a 'declared range' row or sentence; no range the policy lacks."""
    key = req.target_key
    ranges = [(n, spec) for n, line in _lines_mentioning(lines, "declared range")
              for spec in _specifiers_in(line, key)]
    facts.declared_ranges = [spec for _, spec in ranges]
    if not ranges:
        expected = ", ".join(f"`{key}{ln.declared}`" for ln in req.lines)
        facts.problems.append(
            f"{shown}: no 'declared range' with a {req.target} version specifier "
            f"(expected {expected})")
        return
    known = [ln.declared for ln in req.lines] + [req.declared_line]
    for line_no, spec in ranges:
        if not any(_same(spec, k) for k in known):
            facts.problems.append(
                f"{shown}:{line_no}: declared range {spec!r} is none of the {req.target} "
                f"lines ({', '.join(repr(ln.declared) for ln in req.lines)}) nor their join")
    for ln in req.lines:
        hit = next(((n, s) for n, s in ranges if _same(s, ln.declared)), None)
        if hit is None:
            facts.problems.append(
                f"{shown}: the {req.target} {ln.name} has no 'declared range' "
                f"(expected `{key}{ln.declared}`; found: {', '.join(facts.declared_ranges)})")
        else:
            facts.evidence.append(f"{shown}:{hit[0]}: declared range {hit[1]}")


def _check_tested(lines: list[str], req: Requirements, shown: str, facts: ReadmeFacts) -> None:
    """Every line's lower bound (exactly) and a version of its current line documented."""
    lower = _lines_mentioning(lines, "lower bound")
    facts.lower_bound = [v for _, line in lower for v in _VERSION.findall(line)]
    current = _lines_mentioning(lines, "current line")
    facts.current_line = [v for _, line in current for v in _VERSION.findall(line)]
    for ln in req.lines:
        if ln.lower_bound not in facts.lower_bound:
            seen = ", ".join(facts.lower_bound) or "none"
            facts.problems.append(
                f"{shown}: the lower bound tested of the {req.target} {ln.name} "
                f"({ln.lower_bound}) is not documented (versions on 'lower bound' lines: {seen})")
        else:
            facts.evidence.append(f"{shown}:{lower[0][0]}: {ln.name}: lower bound tested "
                                  f"{ln.lower_bound}")
        on_line = _on_current_line(facts.current_line, ln)
        if not on_line:
            seen = ", ".join(facts.current_line) or "none"
            facts.problems.append(
                f"{shown}: the current line tested of the {req.target} {ln.name} "
                f"({ln.current_line}.x) is not documented (versions on 'current line' lines: "
                f"{seen})")
        else:
            facts.evidence.append(f"{shown}:{current[0][0]}: {ln.name}: current line tested "
                                  f"{', '.join(on_line)}")


def _on_current_line(versions: list[str], ln: Line) -> list[str]:
    return [v for v in versions if v.startswith(f"{ln.current_line}.") or v == ln.current_line]


def _check_extras(lines: list[str], req: Requirements, shown: str, facts: ReadmeFacts) -> None:
    """The 'Optional dependencies' section documents each extra; where it shows the target's
    extra with a specifier, that is the lines joined."""
    section = _section(lines, "optional dependencies")
    if section is None:
        facts.problems.append(f"{shown}: no 'Optional dependencies' section")
        return
    body = "\n".join(section)
    for extra in req.extras:
        pattern = rf"`{re.escape(extra)}`|\[{re.escape(extra)}\]"
        if re.search(pattern, body):
            facts.extras_found.append(extra)
        else:
            facts.problems.append(
                f"{shown}: the 'Optional dependencies' section does not document the "
                f"extra `{extra}`"
            )
    if facts.extras_found:
        facts.evidence.append(f"{shown}: extras documented: {', '.join(facts.extras_found)}")
    key = req.target_key
    for row in section:
        if not re.search(rf"`{re.escape(key)}`", row):
            continue
        for spec in _specifiers_in(row, key):
            if not _same(spec, req.declared_line):
                facts.problems.append(
                    f"{shown}: the 'Optional dependencies' row of `{key}` declares {spec!r}, "
                    f"the {req.target} lines joined are {req.declared_line!r}")


def _check_pyproject(path: Path, req: Requirements, shown: str, facts: ReadmeFacts) -> None:
    """The target's extra in a ``pyproject.toml`` beside the README is the lines joined."""
    pyproject = path.parent / "pyproject.toml"
    pyproject_shown = posixpath.join(posixpath.dirname(shown), pyproject.name)
    if not pyproject.is_file():
        return
    key = req.target_key
    declared = _pyproject_line(pyproject, key)
    if declared is not None and not _same(declared, req.declared_line):
        facts.problems.append(
            f"{pyproject_shown}: the `{key}` extra declares {declared!r}, the {req.target} "
            f"lines joined are {req.declared_line!r}"
        )
    elif declared is not None:
        facts.evidence.append(f"{pyproject_shown}: extra {key}{declared}")


def read_readme(path: Path, req: Requirements, *, label: str | None = None) -> ReadmeFacts:
    """Judge ``path`` against ``req``; ``facts.problems`` is empty when the README is complete.

    Problems and evidence name the file as ``label`` (the gate: relative to the evidence
    folder), and the ``pyproject.toml`` beside it likewise; each problem about one line
    names that line."""
    facts = ReadmeFacts(path)
    shown = label if label is not None else str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        facts.problems.append(f"{shown}: missing")
        return facts
    except (OSError, UnicodeDecodeError) as exc:
        facts.problems.append(f"{shown}: cannot read: {getattr(exc, 'strerror', None) or exc}")
        return facts
    facts.evidence.append(shown)
    lines = text.splitlines()
    _check_ranges(lines, req, shown, facts)
    _check_tested(lines, req, shown, facts)
    _check_extras(lines, req, shown, facts)
    _check_pyproject(path, req, shown, facts)
    return facts
