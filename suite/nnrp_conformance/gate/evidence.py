"""Reading the recorded release evidence tree (layout: :mod:`nnrp_conformance.gate`).

Owns: finding the per-version directories, reading each JSON document once and judging it
against its schema, so every condition works from the same parsed evidence and every
problem names its file (and the JSON pointer, for schema violations).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from nnrp_conformance import validation

__all__ = [
    "BENCH_DIR",
    "CASE_RESULTS_FILE",
    "EXECUTION_PLAN_FILE",
    "MANIFEST_FILE",
    "SMOKE_FILE",
    "Document",
    "Evidence",
    "EvidenceError",
    "VersionEvidence",
    "load_document",
    "load_evidence",
]

CASE_RESULTS_FILE = "case-results.json"
EXECUTION_PLAN_FILE = "execution-plan.json"
SMOKE_FILE = "smoke.json"
MANIFEST_FILE = "manifest.json"
BENCH_DIR = "bench"
_VERSION_DIR = re.compile(r"vllm-(?P<version>.+)\Z")
_MAX_PROBLEMS = 5  # schema violations quoted per document


class EvidenceError(Exception):
    """The evidence directory itself cannot be read (missing, not a directory)."""


@dataclass(frozen=True)
class Document:
    """One evidence file: its data when it parsed and met its schema, else the problems."""

    path: Path
    schema: str | None
    data: Any = None
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def exists(self) -> bool:
        return self.path.is_file()


def load_document(path: Path, schema: str | None) -> Document:
    """Parse ``path`` as JSON and validate it against ``schema`` (no schema: parse only)."""
    if not path.is_file():
        return Document(path, schema, problems=(f"{path}: missing",))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        return Document(path, schema, problems=(f"{path}: not UTF-8 ({exc.reason})",))
    except json.JSONDecodeError as exc:
        return Document(
            path,
            schema,
            problems=(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",),
        )
    except OSError as exc:
        return Document(path, schema, problems=(f"{path}: cannot read: {exc.strerror or exc}",))
    if schema is None:
        return Document(path, schema, data)
    violations = validation.validate(schema, data)
    if violations:
        shown = [f"{path}: {v} ({schema} schema)" for v in violations[:_MAX_PROBLEMS]]
        if len(violations) > _MAX_PROBLEMS:
            shown.append(f"{path}: … and {len(violations) - _MAX_PROBLEMS} more violation(s)")
        return Document(path, schema, data, tuple(shown))
    return Document(path, schema, data)


def _bench_documents(directory: Path) -> list[Document]:
    if not directory.is_dir():
        return []
    return [load_document(p, "benchmark-results") for p in sorted(directory.glob("*.json"))]


@dataclass
class VersionEvidence:
    """Everything recorded for one vLLM version (``DIR/vllm-<version>/``)."""

    version: str
    directory: Path
    case_results: Document
    plan: Document
    smoke: Document
    benchmarks: list[Document] = field(default_factory=list)


@dataclass
class Evidence:
    root: Path
    versions: dict[str, VersionEvidence]
    benchmarks: list[Document]
    #: version directories whose suffix is not a version (reported, never gated)
    unparsable: list[Path] = field(default_factory=list)

    def sorted_versions(self) -> list[str]:
        return sorted(self.versions, key=Version)

    def all_benchmarks(self) -> list[tuple[str | None, Document]]:
        out: list[tuple[str | None, Document]] = [(None, d) for d in self.benchmarks]
        for v in self.sorted_versions():
            out += [(v, d) for d in self.versions[v].benchmarks]
        return out


def load_evidence(root: Path) -> Evidence:
    """Read the whole tree under ``root``; raises :class:`EvidenceError` only if it is unusable."""
    root = Path(root)
    if not root.exists():
        raise EvidenceError(f"{root}: evidence directory does not exist")
    if not root.is_dir():
        raise EvidenceError(f"{root}: not a directory")
    versions: dict[str, VersionEvidence] = {}
    unparsable: list[Path] = []
    for child in sorted(root.iterdir()):
        match = _VERSION_DIR.match(child.name)
        if not child.is_dir() or match is None:
            continue
        try:
            version = str(Version(match["version"]))
        except InvalidVersion:
            unparsable.append(child)
            continue
        versions[version] = VersionEvidence(
            version=version,
            directory=child,
            case_results=load_document(child / CASE_RESULTS_FILE, "case-results"),
            plan=load_document(child / EXECUTION_PLAN_FILE, "execution-plan"),
            smoke=load_document(child / SMOKE_FILE, "case-results"),
            benchmarks=_bench_documents(child / BENCH_DIR),
        )
    return Evidence(root, versions, _bench_documents(root / BENCH_DIR), unparsable)
