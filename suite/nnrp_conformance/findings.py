"""A finding: one broken rule of one case, h2spec style (rule id, what went wrong, where,
expected vs seen, the spec citation) with its Autobahn-style level. The one type for it: the
checks produce findings, the case records and every report carry them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from nnrp_conformance import rules
from nnrp_conformance.jsonsafe import jsonable

__all__ = ["Finding"]


@dataclass(frozen=True)
class Finding:
    """One broken rule: stable rule id, what went wrong, where, expected vs seen, citation."""

    rule: str
    message: str
    event_index: int | None = None
    expected: Any = None  # for a non-strict finding: the recommended value
    seen: Any = None
    spec: str = ""
    level: str = rules.LEVEL_FAILED  # failed | non-strict | informational (rules.py)

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON (expected and seen made JSON-safe)."""
        return {
            "rule": self.rule,
            "message": self.message,
            "event_index": self.event_index,
            "expected": jsonable(self.expected),
            "seen": jsonable(self.seen),
            "spec": self.spec,
            "level": self.level,
        }

    def json_safe(self) -> Finding:
        """A copy whose expected and seen survive JSON (what a case record keeps)."""
        return replace(self, message=jsonable(self.message), expected=jsonable(self.expected),
                       seen=jsonable(self.seen))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        """The inverse of :meth:`to_dict` (a record that crossed an xdist worker boundary)."""
        index = data.get("event_index")
        return cls(
            rule=str(data.get("rule", "")),
            message=str(data.get("message", "")),
            event_index=index if isinstance(index, int) else None,
            expected=data.get("expected"),
            seen=data.get("seen"),
            spec=str(data.get("spec") or ""),
            level=str(data.get("level", rules.LEVEL_FAILED)),
        )

    def __str__(self) -> str:
        at = f" (event #{self.event_index})" if self.event_index is not None else ""
        cite = f" — {self.spec}" if self.spec else ""
        lv = "" if self.level == rules.LEVEL_FAILED else f" ({self.level})"
        return f"[{self.rule}]{lv}{at} {self.message}{cite}"
