"""What a release must show, read from the provider's release policy (a data file).

Owns :class:`Requirements` (the serving target, its declared version lines, the benchmark
baseline and the README extras), :class:`Line` (one line: its range, lower bound, current line
and the levels claimed per tested version) and :func:`load_policy`, which reads a
``release-policy`` document (``schemas/release-policy.schema.json``, format 2) and names the
file and field of anything wrong. The gate's engine is provider-neutral: no target, version
or benchmark is written here; the reference adapter's policy is
``manifests/vllm-nnrp-adapter.release-policy.json``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Final

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from nnrp_conformance import validation

__all__ = [
    "POLICY_VERSION",
    "SCOPE_SHARED",
    "SCOPE_VERSION",
    "BenchmarkRequirement",
    "Line",
    "Requirements",
    "RequirementsError",
    "load_policy",
    "requirements_from_document",
]

#: the policy format this gate reads (``policy_version``): 2 declares ``lines``
POLICY_VERSION: Final = 2
#: a benchmark recorded once, independent of the target's version (``DIR/bench/``)
SCOPE_SHARED: Final = "shared"
#: a benchmark recorded per target version (``DIR/KEY-VERSION/bench/``), each line's current
#: line required
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


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


@dataclass(frozen=True)
class Line:
    """One declared version line: its range and what a release is tested on within it.

    ``levels`` maps a tested version to the compatibility levels the adapter claims there
    (the gate compares them with the manifest each gated version's run used)."""

    declared: str
    lower_bound: str
    current_line: str
    current_tested: str
    levels: Mapping[str, tuple[int, ...]] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        where = f"line {self.declared!r}"
        try:
            SpecifierSet(self.declared)
        except InvalidSpecifier as exc:
            raise RequirementsError(f"{where}: {exc}") from None
        parts = self.current_line.split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise RequirementsError(
                f"{where}: current line {self.current_line!r} must be MAJOR.MINOR (two numbers)"
            )
        for name, value in (("lower bound", self.lower_bound),
                            ("current tested", self.current_tested), *(
                                (f"levels key {v!r}", v) for v in self.levels)):
            if _version(value) is None:
                raise RequirementsError(f"{where}: {name} {value!r} is not a version")
            if not self.contains(value):
                raise RequirementsError(f"{where}: {name} {value} is outside the line")
        if not self.on_current_line(self.current_tested):
            raise RequirementsError(f"{where}: current tested {self.current_tested} is not on "
                                    f"the current line {self.current_line}")
        missing = [v for v in (self.lower_bound, self.current_tested) if v not in self.levels]
        if missing:
            raise RequirementsError(f"{where}: levels names no claim for the tested "
                                    f"version(s) {', '.join(missing)}")

    @property
    def name(self) -> str:
        """How every message names the line: its declared range."""
        return f"line {self.declared}"

    @property
    def specifier(self) -> SpecifierSet:
        return SpecifierSet(self.declared)

    def contains(self, version: str) -> bool:
        """``version`` is inside this line (pre-releases included: canaries count)."""
        v = _version(version)
        return v is not None and self.specifier.contains(v, prereleases=True)

    def on_current_line(self, version: str) -> bool:
        """``version`` is on this line's current MAJOR.MINOR and inside the line."""
        v = _version(version)
        return (v is not None and f"{v.major}.{v.minor}" == self.current_line
                and self.contains(version))

    def levels_of(self, version: str) -> tuple[int, ...] | None:
        """The levels the policy claims on ``version`` (sorted), or None if it names none."""
        claimed = self.levels.get(version)
        if claimed is None:
            v = _version(version)
            claimed = next((c for k, c in self.levels.items() if _version(k) == v), None)
        return tuple(sorted(claimed)) if claimed is not None else None


def _bounds(line: Line) -> tuple[Version, Version]:
    """(LOW, HIGH) of a line that reads ``>=LOW,<HIGH``; raises naming the line otherwise."""
    specs = {s.operator: s.version for s in line.specifier}
    low, high = specs.get(">="), specs.get("<")
    if len(line.specifier) != 2 or low is None or high is None:
        raise RequirementsError(
            f"{line.name}: with more than one line each must read '>=LOW,<HIGH', so that "
            "the lines joined are one specifier (the extra's)")
    return Version(low), Version(high)


def joined_range(lines: tuple[Line, ...]) -> str:
    """The lines as one specifier (the target extra's): one line's own range, else the first
    line's ``>=LOW`` and the last line's ``<HIGH``. Lines after the first must follow each
    other without a gap or an overlap, oldest first, so the join says exactly what they say."""
    if not lines:
        raise RequirementsError("no line declared")
    if len(lines) == 1:
        return str(lines[0].specifier)
    bounds = [_bounds(line) for line in lines]
    for (first, (_, high)), (second, (low, _)) in pairwise(zip(lines, bounds, strict=True)):
        if high != low:
            raise RequirementsError(
                f"{second.name} must start where {first.name} ends (>={high}): the lines "
                "leave a gap or overlap, oldest first")
    return f">={bounds[0][0]},<{bounds[-1][1]}"


@dataclass(frozen=True)
class Requirements:
    """One release's requirements (:func:`load_policy` builds them from a policy file).

    ``target`` names the serving target in reports; ``target_key`` is its distribution name:
    the extra and requirement that pin it, the evidence directory prefix (``KEY-VERSION/``)
    and the ``versions``/``diagnostics`` field recording the version a run used. ``lines``
    are the declared lines, oldest first; each is gated on its own."""

    target: str
    target_key: str
    lines: tuple[Line, ...]
    extras: tuple[str, ...] = ()
    benchmarks: tuple[BenchmarkRequirement, ...] = ()

    def __post_init__(self) -> None:
        joined_range(self.lines)  # raises when the lines cannot be joined

    @property
    def declared_line(self) -> str:
        """Every line joined: the specifier the target's extra declares."""
        return joined_range(self.lines)

    @property
    def specifier(self) -> SpecifierSet:
        return SpecifierSet(self.declared_line)

    def in_line(self, version: str) -> bool:
        """``version`` is inside a declared line (pre-releases included: canaries count)."""
        return self.line_of(version) is not None

    def line_of(self, version: str) -> Line | None:
        """The declared line ``version`` is inside, or None."""
        return next((line for line in self.lines if line.contains(version)), None)

    def metrics_of(self, benchmark: str) -> tuple[str, ...]:
        """The metric names the baseline requires of ``benchmark`` (empty if not required)."""
        for b in self.benchmarks:
            if b.name == benchmark:
                return b.metrics
        return ()


def _line(doc: Mapping[str, Any]) -> Line:
    return Line(doc["declared"], doc["lower_bound"], doc["current_line"], doc["current_tested"],
                {v: tuple(levels) for v, levels in doc["levels"].items()})


def requirements_from_document(doc: Any, *, source: str = "release policy") -> Requirements:
    """:class:`Requirements` from a parsed policy document; errors name ``source`` and field."""
    if isinstance(doc, dict) and doc.get("policy_version") == 1 and "line" in doc:
        raise RequirementsError(
            f"{source}: policy_version 1 (one 'line') is no longer read: write policy_version "
            f"{POLICY_VERSION} with 'lines', a list of {{declared, lower_bound, current_line, "
            "current_tested, levels} (docs/reference/release-policy.md)")
    problems = validation.validate("release-policy", doc)
    if problems:
        raise RequirementsError(
            f"{source}: " + "; ".join(f"{v.pointer or '/'}: {v.message}" for v in problems)
        )
    lines = []
    for i, line in enumerate(doc["lines"]):
        try:
            lines.append(_line(line))
        except RequirementsError as exc:
            raise RequirementsError(f"{source}: /lines/{i}: {exc}") from None
    try:
        return Requirements(
            target=doc["target"]["name"],
            target_key=doc["target"]["key"],
            lines=tuple(lines),
            extras=tuple(doc["readme"]["extras"]),
            benchmarks=tuple(
                BenchmarkRequirement(b["name"], b["scope"], tuple(b["metrics"]), b["title"],
                                     bool(b.get("latency", False)))
                for b in doc["benchmarks"]
            ),
        )
    except RequirementsError as exc:
        raise RequirementsError(f"{source}: /lines: {exc}") from None


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
