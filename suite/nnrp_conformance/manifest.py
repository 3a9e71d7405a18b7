"""Adapter capability manifests and the capability tokens they (or a capability document) grant.

Owns: loading a manifest (JSON or YAML, schema-validated, every problem named by file and
field) and turning a manifest or a capability document into the set of capability tokens
that recipes require. The token rules fix selection loopholes of upstream's runner (its capability inference
pools flags across operations):

* **Levels.** A claimed level ``N`` grants ``api.level1`` … ``api.levelN`` ("a higher level
  includes the lower levels", §4): ``compatibility_levels: [2]`` implies ``api.level1``.
  ``Manifest.levels`` is the closed, sorted set of those implied levels.
* **Operations.** Each listed operation grants ``api.<name>``.
* **Operation flags are not pooled.** ``streaming``/``non_streaming``/``tool_calls``/
  ``cancellation`` grant the qualified token ``api.<operation>.<flag>`` for the operation
  that sets them. The *unqualified* tokens (``api.streaming`` …) belong to the Level 1
  operation ``chat.completions.create`` only (every recipe that requires them targets it);
  a flag set on ``responses.create`` never grants ``api.streaming``. For a recipe aimed at
  another operation, :func:`capabilities_for_operation` reads the unqualified tokens from
  *that* operation.
* **Extensions.** ``api.extension.<name>``, plus ``api.extension.<name>.critical`` when the
  extension is critical.

What a claimed level *requires* (the mandatory recipes of the level run even when a flag is
missing) is the planner's rule, not a token rule; see :mod:`nnrp_conformance.planner`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnrp_conformance import contract, validation
from nnrp_conformance.documents import DocumentSyntaxError, is_yaml, parse_document

__all__ = [
    "Manifest",
    "ManifestError",
    "ManifestProblem",
    "capabilities_for_operation",
    "capabilities_of",
    "implied_levels",
    "load_manifest",
    "manifest_from_dict",
    "operation_flags",
]


@dataclass(frozen=True)
class ManifestProblem:
    path: Path | None
    pointer: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '<manifest>'}: {self.pointer or '/'}: {self.message}"


class ManifestError(Exception):
    """A manifest that cannot be used. ``path``/``pointer``/``message`` are the first problem,
    ``problems`` all of them."""

    def __init__(self, problems: list[ManifestProblem]) -> None:
        self.problems = tuple(problems)
        first = self.problems[0]
        self.path, self.pointer, self.message = first.path, first.pointer, first.message
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class Manifest:
    """A validated adapter capability manifest (upstream format)."""

    path: Path | None
    data: dict[str, Any] = field(repr=False, hash=False, compare=False)
    adapter: str
    levels: tuple[int, ...]
    capabilities: frozenset[str]
    extensions: dict[str, bool] = field(hash=False)
    #: claimed levels exactly as listed (``levels`` adds the implied lower ones)
    claimed_levels: tuple[int, ...] = ()
    #: operation name -> its flags (``cancellation`` defaults to false)
    operations: dict[str, dict[str, bool]] = field(default_factory=dict, hash=False)

    @property
    def max_level(self) -> int:
        return max(self.levels)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(m["id"] for m in self.data.get("models") or () if isinstance(m, dict))

    def claims_operation(self, name: str) -> bool:
        return name in self.operations

    def capabilities_for(self, operation: str) -> frozenset[str]:
        return capabilities_for_operation(self.data, operation)


#: Level 3's operations: each optional, a Level 3 claim lists at least one (docs/levels.md)
LEVEL3_OPERATIONS = tuple(op for op, level in contract.OPERATION_LEVELS.items()
                          if level == contract.LEVEL_DISCOVERY)


def implied_levels(claimed: list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """Claimed levels plus every lower level."""
    top = max((lv for lv in claimed if isinstance(lv, int)), default=0)
    return tuple(range(1, top + 1))


def operation_flags(doc: Mapping[str, Any]) -> dict[str, dict[str, bool]]:
    """``{operation name: {flag: bool}}`` for every operation in a manifest or document."""
    out: dict[str, dict[str, bool]] = {}
    for op in doc.get("operations") or ():
        if isinstance(op, Mapping) and isinstance(op.get("name"), str):
            out[op["name"]] = {
                flag: op.get(flag) is True for flag in contract.OPERATION_FLAG_CAPABILITIES
            }
    return out


def stated_flags(doc: Mapping[str, Any]) -> dict[str, dict[str, bool]]:
    """``{operation name: {flag: value}}`` with only the flags ``doc`` states (a boolean is
    there): what agreement compares. An absent flag is unstated, never read as false."""
    out: dict[str, dict[str, bool]] = {}
    for op in doc.get("operations") or ():
        if isinstance(op, Mapping) and isinstance(op.get("name"), str):
            out[op["name"]] = {flag: op[flag] for flag in contract.OPERATION_FLAG_CAPABILITIES
                               if isinstance(op.get(flag), bool)}
    return out


def _extensions(doc: Mapping[str, Any]) -> dict[str, bool]:
    return {
        ext["name"]: ext.get("critical") is True
        for ext in doc.get("extensions") or ()
        if isinstance(ext, Mapping) and isinstance(ext.get("name"), str)
    }


def capabilities_for_operation(doc: Mapping[str, Any], operation: str) -> frozenset[str]:
    """Tokens of ``doc`` with the unqualified flag tokens taken from ``operation``'s flags."""
    tokens: set[str] = set()
    for level in implied_levels(list(doc.get("compatibility_levels") or ())):
        tokens.add(contract.level_capability(level))
    ops = operation_flags(doc)
    for name, flags in ops.items():
        tokens.add(contract.operation_capability(name))
        for flag, on in flags.items():
            if on:
                tokens.add(f"{contract.operation_capability(name)}.{flag}")
    for flag, on in ops.get(operation, {}).items():
        if on:
            tokens.add(contract.OPERATION_FLAG_CAPABILITIES[flag])
    for name, critical in _extensions(doc).items():
        tokens.add(contract.extension_capability(name))
        if critical:
            tokens.add(contract.extension_capability(name, critical=True))
    return frozenset(tokens)


def capabilities_of(doc: Mapping[str, Any]) -> frozenset[str]:
    """Capability tokens granted by a manifest or capability document (rules: module doc).

    The unqualified flag tokens come from ``chat.completions.create`` (the Level 1 operation).
    """
    return capabilities_for_operation(doc, contract.OP_CHAT_COMPLETIONS_CREATE)


def manifest_from_dict(data: Any, path: Path | str | None = None) -> Manifest:
    """Validate ``data`` against the manifest schema and build a :class:`Manifest`."""
    where = Path(path) if path is not None else None
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise ManifestError([ManifestProblem(where, "", f"a manifest must be an object, got "
                                             f"{kind}")])
    violations = validation.validate("manifest", data)
    if violations:
        raise ManifestError([
            ManifestProblem(where, v.pointer, f"{v.message} [{v.rule}]") for v in violations
        ])
    names = [op["name"] for op in data["operations"]]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ManifestError([ManifestProblem(
            where, "/operations", f"operation listed more than once: {', '.join(dupes)}")])
    levels = implied_levels(data["compatibility_levels"])
    if contract.LEVEL_DISCOVERY in levels and not set(names) & set(LEVEL3_OPERATIONS):
        raise ManifestError([ManifestProblem(
            where, "/compatibility_levels", f"Level {contract.LEVEL_DISCOVERY} is claimed, but "
            f"operations lists none of its operations ({', '.join(LEVEL3_OPERATIONS)}): each "
            f"is optional, at least one is the claim (docs/levels.md#claims)")])
    return Manifest(
        path=where,
        data=data,
        adapter=data["adapter"],
        levels=levels,
        capabilities=capabilities_of(data),
        extensions=_extensions(data),
        claimed_levels=tuple(sorted(data["compatibility_levels"])),
        operations=operation_flags(data),
    )


def load_manifest(path: Path | str) -> Manifest:
    """Read a manifest file (JSON, or YAML for ``.yaml``/``.yml``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError([ManifestProblem(path, "", "no such file")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError([ManifestProblem(path, "", f"cannot read: {exc}")]) from None
    try:
        data = parse_document(text, yaml_syntax=is_yaml(path))
    except DocumentSyntaxError as exc:
        raise ManifestError([ManifestProblem(path, "", str(exc))]) from None
    return manifest_from_dict(data, path)
