"""Admission limits of the minimal endpoint: how many operations one session may hold, what
an operation over the limit gets, and whether a client cancel ends an operation at all.

Variants (``variants.py``) switch them on; without them every operation is admitted and
every cancel answered:

* ``cancel-leak-cap``: never ends an operation its client cancelled (it stops streaming and
  sends no terminal, as the upstream vLLM adapter answering ``FRAME_CANCEL`` with
  ``frame_cancel_unsupported`` does) and admits at most ``LEAK_CAP`` operations per session,
  refusing the excess with the upstream adapter's ``adapter_operation_limit`` (its limit is
  4; 2 here, so that the two cancel cases of Level 1 fill it). Leaked operations fill the
  limit: a client that ran every case on one session would see every case after the cancel
  cases refused. A defect of cancel handling only.
* ``own-overload``: admits at most ``OWN_CAP`` operations per session and refuses the excess
  with a profile error body under its own code (``session_capacity_exceeded``), the
  profile's "Model overload or scheduling rejection" row (§10), before any output. Conformant.
* ``drop-on-tools``: drops the whole session (closes it with operations open) once a request
  with ``tools`` has streamed its first event: a defect of that one case, which must not fail
  the cases after it.
* ``limit-before-validation``: the upstream adapter's own admission, exactly: it admits
  ``UPSTREAM_CAP`` (4) operations per session and refuses the rest with
  ``adapter_operation_limit`` (``server_error``, "Adapter session operation limit 4 is
  active.") **before it reads their bodies**, so an invalid body over the limit gets the
  refusal, not its own error. Conformant: §10's overload row, whatever the request was.
* ``drop-on-tool-results``: drops the whole session, before any answer, on a valid request
  that carries a tool result (a ``tool`` message: a tool round trip). The client sees nothing
  at all, on that operation or on any later one of the session: a silent defect of that one
  case, which must neither fail the cases after it nor make the endpoint look unresponsive.

Otherwise an invalid request is answered with its own error before admission (as a server
validates a request before it schedules it), so a limit never hides an input error. The
``context-length`` variant (``context_window.py``) is checked here too, after admission: vLLM
rejects a prompt too long for the model before it schedules it.

The ``every-freedom`` variant's ``overload-refusal`` (``freedom_acts.py``) refuses the same way
past its own limit.
"""

from __future__ import annotations

import re
from typing import Any, Final

import context_window
import freedom_acts
from envelope import STATUS_FOR_TYPE, Plan

CANCEL_LEAK_CAP: Final = "cancel-leak-cap"
OWN_OVERLOAD: Final = "own-overload"
DROP_ON_TOOLS: Final = "drop-on-tools"
LIMIT_BEFORE_VALIDATION: Final = "limit-before-validation"
DROP_ON_TOOL_RESULTS: Final = "drop-on-tool-results"
#: a tool message in a request's JSON, however it is spaced
_TOOL_RESULT: Final = re.compile(rb'"role"\s*:\s*"tool"')

#: operations in flight per session: tight ones, that two leaked operations fill and that
#: the five-operation concurrency recipe exceeds
LEAK_CAP: Final = 2
OWN_CAP: Final = 2
#: the upstream adapter's own limit per session (its max_operations_per_session default)
UPSTREAM_CAP: Final = 4

_REFUSALS: Final = {
    CANCEL_LEAK_CAP: (LEAK_CAP, "server_error", "adapter_operation_limit"),
    OWN_OVERLOAD: (OWN_CAP, "server_error", "session_capacity_exceeded"),
    LIMIT_BEFORE_VALIDATION: (UPSTREAM_CAP, "server_error", "adapter_operation_limit"),
}


def _is_error(plan: Plan) -> bool:
    terminal = plan.terminal
    return isinstance(terminal, dict) and terminal.get("type") == "response.error"


def admit(session: Any, plan: Plan, request: Any) -> Plan:
    """``plan``, or the refusal of an operation over the session's limit (module doc)."""
    if session.config.variant == DROP_ON_TOOLS and isinstance(request, bytes) \
            and b'"tools"' in request:
        plan.extra[DROP_ON_TOOLS] = True
    if session.config.variant == DROP_ON_TOOL_RESULTS and isinstance(request, bytes) \
            and _TOOL_RESULT.search(request) and not _is_error(plan):
        plan.extra[DROP_ON_TOOL_RESULTS] = True
    variant = session.config.variant or ""
    limits = _REFUSALS.get(variant) or freedom_acts.overload_limits(session.config)
    if limits is None or (_is_error(plan) and variant != LIMIT_BEFORE_VALIDATION):
        return context_window.fit(variant, plan, request)
    cap, family, code = limits
    held = sum(1 for state in session.ops.values() if not state.finished)
    if held < cap:
        return context_window.fit(variant, plan, request)
    message = f"Adapter session operation limit {cap} is active." \
        if variant == LIMIT_BEFORE_VALIDATION \
        else f"this session already holds {held} operations (limit {cap})"
    event = {"type": "response.error", "error": {"type": family, "code": code,
                                                 "message": message}}
    return Plan(partials=(), terminal=event, status=STATUS_FOR_TYPE[family],
                request_id=plan.request_id, operation=plan.operation)


def leaks_cancelled(session: Any, state: Any) -> bool:
    """cancel-leak-cap: the cancelled operation stops streaming and is never ended (it keeps
    its place in the session's limit until the session closes)."""
    if session.config.variant != CANCEL_LEAK_CAP:
        return False
    state.exhausted = True
    return True


def drops_session(session: Any) -> bool:
    """drop-on-tools: a request with tools has sent an event; drop-on-tool-results: a request
    with a tool result arrived. The session is to be dropped."""
    if session.config.variant == DROP_ON_TOOL_RESULTS:
        return any(state.plan.extra.get(DROP_ON_TOOL_RESULTS) for state in session.ops.values())
    return session.config.variant == DROP_ON_TOOLS and any(
        state.plan.extra.get(DROP_ON_TOOLS) and state.sent for state in session.ops.values())
