"""The minimal endpoint's API key (``--api-key KEY``), as the reference adapter takes one: a
session authenticates with its first operation, ``nnrp.session.authenticate``, the key in
``nnrp.api_key`` (NNRP's CLIENT_HELLO auth block is out of reach of nnrp-py's native
carriers: docs/sdk-defects.md#auth-block); until it has, every other operation ends in
``invalid_api_key``. The capability document then claims it (``security``, the suite's field:
docs/pytest-plugin.md#security). ``--api-key-unenforced`` claims the key and serves every
session anyway: what the suite's security cases are there to catch.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from config import Config
from envelope import OP_CAPABILITIES, Plan, error_plan

OP_AUTHENTICATE = "nnrp.session.authenticate"
#: the capability document's claim while a key is set
CLAIM = {"api_key": OP_AUTHENTICATE}


def _envelope(request: Any) -> dict[str, Any]:
    if not isinstance(request, bytes | bytearray):
        return {}
    try:
        envelope = json.loads(request)
    except ValueError:
        return {}
    return envelope if isinstance(envelope, dict) else {}


def gate(session: Any, config: Config, request: Any) -> Plan | None:
    """The answer to a request the key decides (an authentication, or any operation of a
    session that has not authenticated), else None: the request is served as usual."""
    if config.api_key is None or isinstance(request, Plan):
        return None
    envelope = _envelope(request)
    if envelope.get("operation") == OP_AUTHENTICATE:
        nnrp = envelope.get("nnrp")
        given = nnrp.get("api_key") if isinstance(nnrp, dict) else None
        good = isinstance(given, str) and hmac.compare_digest(
            given.encode("utf-8"), config.api_key.encode("utf-8"))
        if not good and config.enforce_api_key:
            return error_plan("invalid_api_key", "the API key given is not valid")
        session.authenticated = True
        return Plan(partials=(), terminal={"type": "response.completed", "body": {
            "object": "nnrp.session", "authenticated": True, "api_key_required": True}})
    if session.authenticated or not config.enforce_api_key:
        return None
    return error_plan("invalid_api_key", f"authenticate the session first with "
                                         f"{OP_AUTHENTICATE!r}, the key in nnrp.api_key")


def claimed(plan: Plan, config: Config, request: Any) -> Plan:
    """``plan`` with the key claimed in the capability document it carries, if any."""
    body = plan.terminal.get("body") if isinstance(plan.terminal, dict) else None
    if config.api_key is not None and isinstance(body, dict) \
            and _envelope(request).get("operation") == OP_CAPABILITIES:
        body["security"] = dict(CLAIM)
    return plan
