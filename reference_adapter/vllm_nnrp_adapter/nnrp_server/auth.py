"""The server binding's API-key gate: which operations of a session may run.

Owns the session authentication operation's answer (``nnrp.session.authenticate``,
:data:`contract.OP_SESSION_AUTHENTICATE`) and the refusal of every other operation of a
session that has not authenticated. NNRP's own place for a key is the CLIENT_HELLO auth block,
refused with ``session.auth_failed``; nnrp-py's native carriers cannot carry one
(docs/sdk-defects.md#auth-block), so a session authenticates with its first operation
instead, and until it has, everything else it submits ends in the profile error
``invalid_api_key``.

Keys are compared in constant time over their SHA-256 digests (equal lengths: the comparison
says nothing about a key's length either), and no message, log line or diagnostic ever
carries a key, given or expected.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Iterable
from typing import Any

from nnrp_conformance import contract
from vllm_nnrp_adapter.profile import profile

from .operation import _Terminal
from .terminal import error_terminal

__all__ = ["ApiKeyGate", "admit"]

log = logging.getLogger("vllm_nnrp_adapter.nnrp_server")

#: wrong keys one session may try; then its authentication is refused without a comparison
#: (a guesser must open a new session per few tries, each one counted in the stats)
MAX_FAILURES_PER_SESSION = 3

_NEED_KEY = (
    "this endpoint requires an API key: authenticate the session first with the operation "
    f"{contract.OP_SESSION_AUTHENTICATE!r} and the key in nnrp.{contract.NNRP_API_KEY_FIELD}"
)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class ApiKeyGate:
    """The keys a session may authenticate with (several, as vLLM's ``--api-key`` takes)."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._digests = tuple(_digest(k) for k in keys if k)
        if not self._digests:
            raise ValueError("an API key gate needs at least one non-empty key")

    def __repr__(self) -> str:  # never the keys, not even their digests
        return f"ApiKeyGate({len(self._digests)} key(s))"

    def accepts(self, presented: object) -> bool:
        if not isinstance(presented, str) or not presented:
            return False
        given = _digest(presented)
        # every key compared, whichever matches: the time does not say which one did
        matched = False
        for expected in self._digests:
            matched |= hmac.compare_digest(given, expected)
        return matched

    def admit(self, sess: Any, envelope: dict[str, Any], stats: dict[str, int]) -> _Terminal | None:
        """None when the operation may run; else the terminal that ends it.

        ``sess`` carries ``authenticated`` and ``auth_failures`` (the session's pump)."""
        if envelope.get("operation") == contract.OP_SESSION_AUTHENTICATE:
            return self._authenticate(sess, envelope, stats)
        if sess.authenticated:
            return None
        stats["unauthenticated"] = stats.get("unauthenticated", 0) + 1
        return error_terminal(contract.ERR_INVALID_API_KEY, _NEED_KEY)

    def _authenticate(
        self, sess: Any, envelope: dict[str, Any], stats: dict[str, int]
    ) -> _Terminal:
        if sess.auth_failures >= MAX_FAILURES_PER_SESSION:
            stats["auth_refused"] = stats.get("auth_refused", 0) + 1
            return error_terminal(
                contract.ERR_INVALID_API_KEY,
                f"{MAX_FAILURES_PER_SESSION} wrong API keys on this session: open a new session",
            )
        nnrp = envelope.get("nnrp")
        presented = nnrp.get(contract.NNRP_API_KEY_FIELD) if isinstance(nnrp, dict) else None
        if not self.accepts(presented):
            sess.auth_failures += 1
            stats["auth_refused"] = stats.get("auth_refused", 0) + 1
            log.info("session %s: API key refused (%s)", sess.session_id,
                     "none given" if presented is None else "wrong key")
            what = ("no API key given" if presented is None
                    else "the API key given is not valid")
            return error_terminal(contract.ERR_INVALID_API_KEY, f"{what}; {_NEED_KEY}")
        sess.authenticated = True
        return authenticated_terminal(required=True)


def admit(
    gate: ApiKeyGate | None, sess: Any, envelope: object, stats: dict[str, int]
) -> _Terminal | None:
    """None when the operation may run; else the terminal that ends it. Without a gate every
    operation runs, and ``nnrp.session.authenticate`` succeeds saying no key is required."""
    if gate is not None:
        return gate.admit(sess, envelope if isinstance(envelope, dict) else {}, stats)
    if isinstance(envelope, dict) and envelope.get("operation") == contract.OP_SESSION_AUTHENTICATE:
        return authenticated_terminal(required=False)
    return None


def authenticated_terminal(*, required: bool) -> _Terminal:
    """The success of ``nnrp.session.authenticate`` (also on an endpoint without a key:
    a client that always sends one learns the key was not needed)."""
    return _Terminal("push", profile.completed_event(
        {"object": "nnrp.session", "authenticated": True, "api_key_required": required}))
