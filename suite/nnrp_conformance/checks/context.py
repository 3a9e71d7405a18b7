"""What every check is handed: :class:`Context` (the planned case, the observation, the
manifest and the capability document, and the findings so far), and the small helpers the
checks share to quote what they saw (:func:`show`, :func:`at`) and to match expectations
(:func:`json_contains`, :func:`mismatch`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nnrp_conformance import contract, rules
from nnrp_conformance.checks.model import Finding, Observation

if TYPE_CHECKING:
    from nnrp_conformance.manifest import Manifest
    from nnrp_conformance.planner import PlannedCase




_SHOW = 400  # characters of event JSON quoted in a finding


def show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr, sort_keys=False)
    return text if len(text) <= _SHOW else f"{text[:_SHOW]}… ({len(text)} chars)"


def type_of(event: Any) -> str | None:
    return event.get("type") if isinstance(event, dict) else None


def chat_completion_body(ctx: Context) -> dict[str, Any] | None:
    """The chat completion the terminal's ``response.completed`` carries, or None."""
    term = ctx.obs.terminal_event
    body = term.get("body") if type_of(term) == contract.EV_COMPLETED else None
    return body if isinstance(body, dict) and body.get("object") == "chat.completion" else None


def at(seq: list[Any], i: int) -> str:
    return f"event #{i}: {show(seq[i])}"


def json_contains(actual: Any, expected: Any) -> bool:
    """Recursive subset: objects by key, arrays element-wise as a prefix, scalars equal."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and json_contains(actual[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) >= len(expected) and all(
            json_contains(a, e) for a, e in zip(actual, expected, strict=False))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and bool(expected == actual)
    return bool(expected == actual)


def mismatch(actual: Any, expected: Any, path: str = "") -> str | None:
    """The first place where ``actual`` does not contain ``expected``, as a readable line."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path or '/'}: expected an object, seen {show(actual)}"
        for k, v in expected.items():
            if k not in actual:
                return f"{path}/{k}: missing (expected {show(v)})"
            sub = mismatch(actual[k], v, f"{path}/{k}")
            if sub:
                return sub
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) < len(expected):
            return f"{path or '/'}: expected an array starting with {show(expected)}, " \
                   f"seen {show(actual)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=False)):
            sub = mismatch(a, e, f"{path}/{i}")
            if sub:
                return sub
        return None
    if not json_contains(actual, expected):
        return f"{path or '/'}: expected {show(expected)}, seen {show(actual)}"
    return None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def usage_names(usage: Any) -> tuple[str, str, str] | None:
    """The profile's name set (input, output, total) ``usage`` uses with three non-negative
    integer counts, or None (contract.USAGE_NAME_SETS: either reading passes)."""
    if not isinstance(usage, dict):
        return None
    return next((names for names in contract.USAGE_NAME_SETS
                 if all(_count(usage.get(k)) for k in names)), None)


def usage_counts(usage: Any) -> tuple[int, int, int] | None:
    """``usage``'s (input, output, total) under whichever of the profile's names it uses."""
    names = usage_names(usage)
    return (usage[names[0]], usage[names[1]], usage[names[2]]) if names else None


@dataclass
class Context:
    case: PlannedCase
    obs: Observation
    manifest: Manifest | None
    capability_document: dict[str, Any] | None
    findings: list[Finding] = field(default_factory=list)
    strict: bool = False
    capability_file: str | None = None

    def fail(self, rule: str, message: str, *, index: int | None = None, expected: Any = None,
             seen: Any = None, about: str | None = None) -> None:
        """A broken rule: ``failed`` for a profile rule, ``non-strict`` for a recommendation
        or an upstream recipe's expectation (``failed`` when strict); the rule's tag and its
        citation live in the rulebook. The finding cites only the rule's quotes that apply to
        what it is ``about`` (default: the type of the event at ``index``)."""
        level = rules.finding_level(rule, strict=self.strict)
        if about is None and index is not None and 0 <= index < len(self.seq):
            about = type_of(self.seq[index]) or None
        self.findings.append(Finding(rule, message, index, expected, seen,
                                     rules.citation(rule, about), level))

    def note(self, rule: str, message: str, *, seen: Any = None) -> None:
        """Evidence worth reporting that judges nothing (``informational``)."""
        self.findings.append(Finding(rule, message, None, None, seen, rules.citation(rule),
                                     rules.LEVEL_INFORMATIONAL))

    @property
    def seq(self) -> list[Any]:
        return self.obs.sequence

    @property
    def body(self) -> dict[str, Any]:
        body = self.case.envelope.get("body") if isinstance(self.case.envelope, dict) else None
        return body if isinstance(body, dict) else {}
