"""Judgement of the security cases (``security.py`` runs them): what one session of the
suite's own showed, against what the endpoint claims (docs/pytest-plugin.md#security).

The rules, all recommendations (the profile is silent on security; its §2 leaves transport
to NNRP): ``security.key-required`` (no key: refused), ``security.wrong-key-refused`` (a
wrong key: refused), ``security.key-accepted`` (the run's key: served),
``security.tls-plaintext-refused`` (a plaintext client against a TLS target: refused within
the connect timeout). Refused means the session's open (its authentication too) failed, or
its operation ended in an error of any code or kind: the profile fixes none for this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nnrp_conformance import contract
from nnrp_conformance.checks.context import Context, show
from nnrp_conformance.checks.model import Observation, Verdict, verdict_of

if TYPE_CHECKING:
    from nnrp_conformance.planner import PlannedCase

__all__ = ["Attempt", "judge_attempt"]

_SERVED = "security.key-accepted"
_TLS = "security.tls-plaintext-refused"


@dataclass(frozen=True)
class Attempt:
    """What one session of a security case showed: whether it opened (and authenticated,
    when it had a key) and in how long, the terminal of its one operation, the client's
    words."""

    target: str
    opened: bool
    open_s: float
    terminal: str | None = None
    event: dict[str, Any] | None = None
    events: int = 0
    message: str = ""

    @property
    def served(self) -> bool:
        return self.opened and self.terminal == contract.TERMINAL_SUCCESS

    def seen(self) -> str:
        """What happened, in one line."""
        if not self.opened:
            return f"session refused after {self.open_s:.2f}s: {self.message}"
        if self.terminal is None:
            return f"session opened; the operation got no terminal ({self.message})"
        err = (self.event or {}).get("error")
        code = err.get("code") if isinstance(err, dict) else None
        said = f" (error code {code!r})" if code is not None else \
            f" ({show(self.event)})" if self.event is not None else ""
        return f"session opened; the operation ended in {self.terminal}{said}"


def judge_attempt(case: PlannedCase, attempt: Attempt, rule: str, *, connect_timeout: float,
                  strict: bool = False) -> tuple[Verdict, dict[str, Any]]:
    """The verdict of a security case judged by ``rule``, and its evidence (rule, expected,
    seen) for the case's diagnostics, whatever the verdict."""
    ctx = Context(case, Observation(), None, None, strict=strict)
    seen = attempt.seen()
    if rule == _SERVED:
        expected = "the session authenticates and the chat request ends in success"
        if not attempt.served:
            ctx.fail(rule, f"a session with the run's API key was not served: {seen}",
                     expected=expected, seen=seen)
    elif rule == _TLS:
        expected = (f"the plaintext session refused within the connect timeout "
                    f"({connect_timeout:g}s), the client naming TLS")
        if attempt.opened:
            ctx.fail(rule, f"a plaintext client opened a session on the TLS target "
                     f"({attempt.target}): {seen}", expected=expected, seen=seen)
        elif attempt.open_s >= connect_timeout:
            ctx.fail(rule, f"a plaintext client against the TLS target ({attempt.target}) was "
                     f"not refused, it waited out the connect timeout: {seen}",
                     expected=expected, seen=seen)
    else:
        expected = "the session's open refused, or the chat request ends in an error"
        if attempt.served:
            what = "without a key" if rule == "security.key-required" else "with a wrong key"
            ctx.fail(rule, f"the endpoint claims an API key and served a session {what}: "
                     f"{seen}", expected=expected, seen=seen)
    evidence = {"rule": rule, "target": attempt.target, "expected": expected, "seen": seen,
                "opened": attempt.opened, "open_s": round(attempt.open_s, 3)}
    return verdict_of(case.id, attempt.terminal, ctx.findings, attempt.events), evidence
