"""What a release must show, read from the provider's release policy (a data file).

Owns :class:`Requirements` (the serving target and its version line, the benchmark baseline
and the README extras) and :func:`load_policy`, which reads a ``release-policy`` document
(``schemas/release-policy.schema.json``) and names the file and field of anything wrong.
The gate's engine is provider-neutral: no target, version or benchmark is written here;
the reference adapter's policy is ``manifests/vllm-nnrp-adapter.release-policy.json``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from nnrp_conformance import validation

__all__ = [
    "SCOPE_SHARED",
    "SCOPE_VERSION",
    "BenchmarkRequirement",
    "Requirements",
    "RequirementsError",
    "load_policy",
]

#: a benchmark recorded once, independent of the target's version (``DIR/bench/``)
SCOPE_SHARED: Final = "shared"
#: a benchmark recorded per target version (``DIR/KEY-VERSION/bench/``), current line required
SCOPE_VERSION: Final = "version"


@dataclass(frozen=True)
class BenchmarkRequirement:
    """One benchmark-results document (its ``name``) and the metric names it must carry."""

    name: str
    scope: str
    metrics: tuple[str, ...]
    title: str
    #: metrics drawn as latency distributions in the HTML report
    latency: bool = False


class RequirementsError(ValueError):
    """A policy that cannot be used (unreadable file, schema violation, bad specifier)."""


@dataclass(frozen=True)
class Requirements:
    """One release's requirements (:func:`load_policy` builds them from a policy file).

    ``target`` names the serving target in reports; ``target_key`` is its distribution name:
    the extra and requirement that pin it, the evidence directory prefix (``KEY-VERSION/``)
    and the ``versions``/``diagnostics`` field recording the version a run used."""

    target: str
    target_key: str
    declared_line: str
    lower_bound: str
    current_line: str
    extras: tuple[str, ...] = ()
    benchmarks: tuple[BenchmarkRequirement, ...] = ()
    current_tested: str | None = None

    def __post_init__(self) -> None:
        try:
            SpecifierSet(self.declared_line)
        except InvalidSpecifier as exc:
            raise RequirementsError(f"declared line {self.declared_line!r}: {exc}") from None
        try:
            Version(self.lower_bound)
        except InvalidVersion:
            raise RequirementsError(
                f"lower bound {self.lower_bound!r} is not a version"
            ) from None
        parts = self.current_line.split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise RequirementsError(
                f"current line {self.current_line!r} must be MAJOR.MINOR (two numbers)"
            )

    def replace(self, **changes: Any) -> Requirements:
        """A copy with ``changes`` (``None`` values are ignored: the policy's value stays)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    @property
    def specifier(self) -> SpecifierSet:
        return SpecifierSet(self.declared_line)

    def in_line(self, version: str) -> bool:
        """``version`` satisfies the declared line (pre-releases included: canaries count)."""
        try:
            return self.specifier.contains(Version(version), prereleases=True)
        except InvalidVersion:
            return False

    def on_current_line(self, version: str) -> bool:
        try:
            v = Version(version)
        except InvalidVersion:
            return False
        return f"{v.major}.{v.minor}" == self.current_line

    def metrics_of(self, benchmark: str) -> tuple[str, ...]:
        """The metric names the baseline requires of ``benchmark`` (empty if not required)."""
        for b in self.benchmarks:
            if b.name == benchmark:
                return b.metrics
        return ()


def requirements_from_document(doc: Any, *, source: str = "release policy") -> Requirements:
    """:class:`Requirements` from a parsed policy document; errors name ``source`` and field."""
    problems = validation.validate("release-policy", doc)
    if problems:
        raise RequirementsError(
            f"{source}: " + "; ".join(f"{v.pointer or '/'}: {v.message}" for v in problems)
        )
    line = doc["line"]
    try:
        return Requirements(
            target=doc["target"]["name"],
            target_key=doc["target"]["key"],
            declared_line=line["declared"],
            lower_bound=line["lower_bound"],
            current_line=line["current_line"],
            current_tested=line.get("current_tested"),
            extras=tuple(doc["readme"]["extras"]),
            benchmarks=tuple(
                BenchmarkRequirement(b["name"], b["scope"], tuple(b["metrics"]), b["title"],
                                     bool(b.get("latency", False)))
                for b in doc["benchmarks"]
            ),
        )
    except RequirementsError as exc:
        raise RequirementsError(f"{source}: /line: {exc}") from None


def load_policy(path: Path | str) -> Requirements:
    """Read and check the release policy at ``path``."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RequirementsError(f"release policy {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RequirementsError(f"release policy {path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise RequirementsError(
            f"release policy {path}: invalid JSON at line {exc.lineno} column {exc.colno}: "
            f"{exc.msg}"
        ) from None
    return requirements_from_document(doc, source=f"release policy {path}")
