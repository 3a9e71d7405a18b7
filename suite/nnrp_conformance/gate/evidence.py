"""Reading the recorded release evidence tree (layout: :mod:`nnrp_conformance.gate`).

Owns: finding the per-version directories, reading each JSON document once and judging it
against its schema, so every condition works from the same parsed evidence and every
problem names its file (and the JSON pointer, for schema violations).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from nnrp_conformance import validation

__all__ = [
    "ADAPTER_LOG",
    "BENCH_DIR",
    "CASE_RESULTS_FILE",
    "DEFAULT_EVIDENCE_DIR",
    "EXECUTION_PLAN_FILE",
    "HTTP_SERVER_LOG",
    "MANIFEST_FILE",
    "PARITY_ADAPTER_LOG",
    "PARITY_HTTP_SERVER_LOG",
    "POLICY_FILE",
    "ROOT_FILES",
    "SMOKE_FILE",
    "VERSION_FILES",
    "Document",
    "Evidence",
    "EvidenceError",
    "VersionEvidence",
    "check_evidence_root",
    "evidence_files",
    "load_document",
    "load_evidence",
    "relative_to_evidence",
]

#: where recorded release evidence conventionally lives in a provider's repository (relative to
#: the working directory); ``gate`` reads it when no ``--evidence`` is given
DEFAULT_EVIDENCE_DIR = Path("reports/evidence")
CASE_RESULTS_FILE = "case-results.json"
EXECUTION_PLAN_FILE = "execution-plan.json"
SMOKE_FILE = "smoke.json"
MANIFEST_FILE = "manifest.json"
#: the provider's release policy the run was made for (``release-policy`` schema)
POLICY_FILE = "release-policy.json"
BENCH_DIR = "bench"
#: the suite run's adapter (``KEY-VERSION/``): its log sits beside the case results it served
ADAPTER_LOG = "adapter.log"
#: the serving target's own HTTP server, when a run beside the suite started one
HTTP_SERVER_LOG = "http-server.log"
#: the parity benchmark starts its own adapter and HTTP server; their logs get their own names
#: so they never overwrite the suite run's ``adapter.log``
PARITY_ADAPTER_LOG = f"{BENCH_DIR}/parity-adapter.log"
PARITY_HTTP_SERVER_LOG = f"{BENCH_DIR}/parity-http-server.log"
#: what a release run writes into ``KEY-VERSION/`` (besides ``bench/*.json``), in the order
#: the reports link them; each is linked only when present (older evidence lacks some logs)
VERSION_FILES = (
    MANIFEST_FILE,
    "report.html",
    "report.md",
    CASE_RESULTS_FILE,
    EXECUTION_PLAN_FILE,
    SMOKE_FILE,
    "smoke-checks.json",
    "adapter.json",
    ADAPTER_LOG,
    HTTP_SERVER_LOG,
    PARITY_ADAPTER_LOG,
    PARITY_HTTP_SERVER_LOG,
)
#: what the release run writes at the evidence root (besides ``bench/*.json``)
ROOT_FILES = (MANIFEST_FILE, POLICY_FILE, "release-run.json")
_MAX_PROBLEMS = 5  # schema violations quoted per document


class EvidenceError(Exception):
    """The evidence directory itself cannot be read (missing, not a directory)."""


def relative_to_evidence(path: Path | str, root: Path | str) -> str:
    """``path`` as every report writes it: relative to the evidence folder ``root``, POSIX.

    The evidence is committed and read in clones at other paths and on other machines, so a
    report never carries the absolute path of the machine that wrote it; a file outside the
    folder (the README the gate checks) is reached with ``../``."""
    return Path(os.path.relpath(Path(path).resolve(), Path(root).resolve())).as_posix()


@dataclass(frozen=True)
class Document:
    """One evidence file: its data when it parsed and met its schema, else the problems."""

    path: Path
    schema: str | None
    data: Any = None
    problems: tuple[str, ...] = ()
    #: the path as the reports show it (relative to the evidence folder)
    label: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def exists(self) -> bool:
        return self.path.is_file()


def load_document(path: Path, schema: str | None, root: Path | None = None) -> Document:
    """Parse ``path`` as JSON and validate it against ``schema`` (no schema: parse only).

    Problems name the file relative to the evidence folder ``root`` (as given without it)."""
    label = relative_to_evidence(path, root) if root is not None else str(path)

    def doc(data: Any = None, *problems: str) -> Document:
        return Document(path, schema, data, problems, label)

    if not path.is_file():
        return doc(None, f"{label}: missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        return doc(None, f"{label}: not UTF-8 ({exc.reason})")
    except json.JSONDecodeError as exc:
        return doc(None, f"{label}: invalid JSON at line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg}")
    except OSError as exc:
        return doc(None, f"{label}: cannot read: {exc.strerror or exc}")
    if schema is None:
        return doc(data)
    violations = validation.validate(schema, data)
    if violations:
        shown = [f"{label}: {v} ({schema} schema)" for v in violations[:_MAX_PROBLEMS]]
        if len(violations) > _MAX_PROBLEMS:
            shown.append(f"{label}: … and {len(violations) - _MAX_PROBLEMS} more violation(s)")
        return doc(data, *shown)
    return doc(data)


def _bench_documents(directory: Path, root: Path) -> list[Document]:
    if not directory.is_dir():
        return []
    return [load_document(p, "benchmark-results", root)
            for p in sorted(directory.glob("*.json"))]


@dataclass
class VersionEvidence:
    """Everything recorded for one version of the serving target (``DIR/KEY-VERSION/``)."""

    version: str
    directory: Path
    case_results: Document
    plan: Document
    smoke: Document
    benchmarks: list[Document] = field(default_factory=list)
    #: the manifest this version's run used when it claims less than the adapter's
    #: (``KEY-VERSION/manifest.json``: a serving-target version that cannot keep a level)
    manifest_path: Path | None = None


@dataclass
class Evidence:
    root: Path
    versions: dict[str, VersionEvidence]
    benchmarks: list[Document]
    #: version directories whose suffix is not a version (reported, never gated)
    unparsable: list[Path] = field(default_factory=list)

    def rel(self, path: Path | str) -> str:
        """``path`` relative to this evidence folder (:func:`relative_to_evidence`)."""
        return relative_to_evidence(path, self.root)

    def sorted_versions(self) -> list[str]:
        return sorted(self.versions, key=Version)

    def all_benchmarks(self) -> list[tuple[str | None, Document]]:
        out: list[tuple[str | None, Document]] = [(None, d) for d in self.benchmarks]
        for v in self.sorted_versions():
            out += [(v, d) for d in self.versions[v].benchmarks]
        return out


def check_evidence_root(root: Path | str) -> Path:
    """``root`` as a Path; raises :class:`EvidenceError` if it is no directory."""
    root = Path(root)
    if not root.exists():
        hint = (f" (the default, ./{DEFAULT_EVIDENCE_DIR}; pass --evidence DIR, the --out of the "
                f"release run)" if root == DEFAULT_EVIDENCE_DIR else "")
        raise EvidenceError(f"{root}: evidence directory does not exist{hint}")
    if not root.is_dir():
        raise EvidenceError(f"{root}: not a directory")
    return root


def load_evidence(root: Path, target_key: str) -> Evidence:
    """Read the whole tree under ``root``, one ``TARGET_KEY-VERSION/`` directory per version
    of the serving target; raises :class:`EvidenceError` only if it is unusable."""
    root = check_evidence_root(root)
    versions: dict[str, VersionEvidence] = {}
    unparsable: list[Path] = []
    version_dir = re.compile(rf"{re.escape(target_key)}-(?P<version>.+)\Z")
    for child in sorted(root.iterdir()):
        match = version_dir.match(child.name)
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
            case_results=load_document(child / CASE_RESULTS_FILE, "case-results", root),
            plan=load_document(child / EXECUTION_PLAN_FILE, "execution-plan", root),
            smoke=load_document(child / SMOKE_FILE, "case-results", root),
            benchmarks=_bench_documents(child / BENCH_DIR, root),
            manifest_path=child / MANIFEST_FILE if (child / MANIFEST_FILE).is_file() else None,
        )
    return Evidence(root, versions, _bench_documents(root / BENCH_DIR, root), unparsable)


def _present(directory: Path, names: tuple[str, ...]) -> list[Path]:
    """The named files that exist, then every other JSON or log under ``directory/bench``."""
    named = [directory / n for n in names if (directory / n).is_file()]
    bench = directory / BENCH_DIR
    extra = sorted(p for p in bench.glob("*") if p.is_file() and p.suffix in (".json", ".log")
                   and p not in named) if bench.is_dir() else []
    return named + extra


def evidence_files(ev: Evidence) -> list[dict[str, str | None]]:
    """Every evidence file present, for the reports to link: ``{"vllm", "path"}`` with the
    path relative to the evidence folder and ``vllm`` None for the version-independent ones."""
    out: list[dict[str, str | None]] = [
        {"vllm": None, "path": ev.rel(p)} for p in _present(ev.root, ROOT_FILES)]
    for version in ev.sorted_versions():
        out += [{"vllm": version, "path": ev.rel(p)}
                for p in _present(ev.versions[version].directory, VERSION_FILES)]
    return out
