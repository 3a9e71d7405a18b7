"""What the README must document: the serving target's supported line and the extras.

Owns: reading README.md (Markdown, tables or prose) for the declared range, the lower bound
tested, the current line tested and the extras, and cross-checking the target's extra (the
policy's target key, e.g. ``vllm``) in a ``pyproject.toml`` beside it. Returns facts and problems; the gate turns them into a verdict.
"""

from __future__ import annotations

import posixpath
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from nnrp_conformance.gate.requirements import Requirements

__all__ = ["ReadmeFacts", "read_readme"]

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE = re.compile(r"`([^`]+)`")
_VERSION = re.compile(r"(?<![\w.])(\d+\.\d+(?:\.(?:\d+|x))?)(?![\w])")
_SPEC_OPS = re.compile(r"(?:===|==|!=|~=|<=|>=|<|>)")


@dataclass
class ReadmeFacts:
    path: Path
    declared_range: str | None = None
    lower_bound: list[str] = field(default_factory=list)
    current_line: list[str] = field(default_factory=list)
    extras_found: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)


def _lines_mentioning(lines: list[str], phrase: str) -> list[tuple[int, str]]:
    return [(i + 1, line) for i, line in enumerate(lines) if phrase in line.lower()]


def _specifier_in(line: str, key: str) -> str | None:
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
        return candidate
    return None


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


def read_readme(path: Path, req: Requirements, *, label: str | None = None) -> ReadmeFacts:
    """Judge ``path`` against ``req``; ``facts.problems`` is empty when the README is complete.

    Problems and evidence name the file as ``label`` (the gate: relative to the evidence
    folder), and the ``pyproject.toml`` beside it likewise."""
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

    key = req.target_key
    ranges = [(n, spec) for n, line in _lines_mentioning(lines, "declared range")
              if (spec := _specifier_in(line, key))]
    if not ranges:
        facts.problems.append(
            f"{shown}: no 'declared range' with a {req.target} version specifier "
            f"(expected `{key}{req.declared_line}`)"
        )
    else:
        line_no, declared_range = ranges[0]
        facts.declared_range = declared_range
        if SpecifierSet(declared_range) != req.specifier:
            facts.problems.append(
                f"{shown}:{line_no}: declared range {facts.declared_range!r} differs from the "
                f"release's line {req.declared_line!r}"
            )
        else:
            facts.evidence.append(f"{shown}:{line_no}: declared range {facts.declared_range}")

    lower = _lines_mentioning(lines, "lower bound")
    facts.lower_bound = [v for _, line in lower for v in _VERSION.findall(line)]
    if req.lower_bound not in facts.lower_bound:
        seen = ", ".join(facts.lower_bound) or "none"
        facts.problems.append(
            f"{shown}: the lower bound tested ({req.lower_bound}) is not documented "
            f"(versions on 'lower bound' lines: {seen})"
        )
    else:
        facts.evidence.append(f"{shown}:{lower[0][0]}: lower bound tested {req.lower_bound}")

    current = _lines_mentioning(lines, "current line")
    facts.current_line = [v for _, line in current for v in _VERSION.findall(line)]
    on_line = [v for v in facts.current_line if v.startswith(f"{req.current_line}.") or
               v == req.current_line]
    if not on_line:
        seen = ", ".join(facts.current_line) or "none"
        facts.problems.append(
            f"{shown}: the current line tested ({req.current_line}.x) is not documented "
            f"(versions on 'current line' lines: {seen})"
        )
    else:
        facts.evidence.append(f"{shown}:{current[0][0]}: current line tested {', '.join(on_line)}")

    section = _section(lines, "optional dependencies")
    if section is None:
        facts.problems.append(f"{shown}: no 'Optional dependencies' section")
    else:
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

    pyproject = path.parent / "pyproject.toml"
    pyproject_shown = posixpath.join(posixpath.dirname(shown), pyproject.name)
    if pyproject.is_file():
        declared = _pyproject_line(pyproject, key)
        if declared is not None and SpecifierSet(declared) != req.specifier:
            facts.problems.append(
                f"{pyproject_shown}: the `{key}` extra declares {declared!r}, the release's line "
                f"is {req.declared_line!r}"
            )
        elif declared is not None:
            facts.evidence.append(f"{pyproject_shown}: extra {key}{declared}")
    return facts
