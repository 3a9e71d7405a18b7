"""The envelope's ``nnrp`` member as the server binding acts on it: the operation's deadline
(``timeout_ms``), the in-band cancel hint (``cancel_after_events``) and whether the terminal
carries diagnostics. Invalid values are ignored here: the handler's envelope check reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Hints"]


@dataclass(frozen=True, slots=True)
class Hints:
    """The envelope's ``nnrp`` member as the binding acts on it (invalid values ignored: the
    handler's envelope check reports them)."""

    timeout_ms: int | None
    cancel_after: int | None
    want_diagnostics: bool

    @classmethod
    def of(cls, envelope: dict[str, Any]) -> Hints:
        raw = envelope.get("nnrp")
        nnrp: dict[str, Any] = raw if isinstance(raw, dict) else {}
        timeout_ms = nnrp.get("timeout_ms")
        cancel_after = nnrp.get("cancel_after_events")
        return cls(
            timeout_ms if _positive_int(timeout_ms, 1) else None,
            # 0 is not a valid hint: the envelope check rejects it
            cancel_after if _positive_int(cancel_after, 1) else None,
            nnrp.get("diagnostics") is True,
        )


def _positive_int(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least
