"""The one rule deciding which profile terminal kind an operation's ending amounts to.

Owns :func:`terminal_kind`: client delivery (+ the endpoint's terminal event, status code
and drop reason) -> ``success`` / ``error`` / ``cancelled``, or ``None`` when the endpoint
itself sent no terminal. The client's ``Terminal.outcome``, the runner's observation and
every report read it from here; nothing else restates it (docs/verdicts.md#terminal-kind).

The mapping, and why:

* ``result_push``: the kind of its terminal event (``response.completed`` -> success,
  ``response.error`` -> error, ``response.cancelled`` -> cancelled). Without one (an empty
  push, or a non-terminal event that ``terminal.kind`` reports), the status decides: a
  status >= 400 is an error, else success. That is this project's reading, not the
  profile's: no profile document mentions a status (its §2 goal 3 keeps HTTP status codes
  out of the contract), so a status is read only when the push carries no profile event.
  (Before issue 14 the client called an event-less status-500 push a success.)
* ``result_drop``: cancelled when it carries ``response.cancelled`` or reason
  ``PEER_CANCELLED``; any other drop (``DEADLINE_EXPIRED``, ``BACKPRESSURE``, …) is an error:
  the operation did not end as asked. (Before issue 14 the client called every event-less
  drop a cancel.)
* ``local_cancelled``, ``timeout``, ``transport_error``: ``None``. The client's own lifecycle
  ``CANCELLED`` is nnrp-py acknowledging *our* cancel locally, not the endpoint's answer;
  a verdict never counts it as a terminal (issue 14 item 1).
"""

from __future__ import annotations

from typing import Any

from nnrp_conformance import contract

__all__ = ["DELIVERIES_FROM_ENDPOINT", "terminal_kind", "terminal_kind_of"]

#: client deliveries that are frames the endpoint sent (the others are local conclusions)
DELIVERIES_FROM_ENDPOINT = frozenset(("result_push", "result_drop"))

_KIND_OF_EVENT = {v: k for k, v in contract.TERMINAL_EVENT_FOR.items()}


def _drop_is_cancel(reason: Any) -> bool:
    if isinstance(reason, int) and not isinstance(reason, bool):
        return reason == contract.WIRE_DROP_PEER_CANCELLED
    name = str(getattr(reason, "name", reason) or "").lower()
    return name.endswith("peer_cancelled")


def terminal_kind(delivery: str | None, event: Any = None, *, status_code: Any = None,
                  drop_reason: Any = None) -> str | None:
    """The profile terminal kind of one delivery (mapping and reasons: module doc)."""
    etype = event.get("type") if isinstance(event, dict) else None
    if delivery == "result_push":
        kind = _KIND_OF_EVENT.get(etype) if isinstance(etype, str) else None
        if kind is not None:
            return kind
        if isinstance(status_code, int) and status_code >= contract.WIRE_STATUS_ERROR:
            return contract.TERMINAL_ERROR
        return contract.TERMINAL_SUCCESS
    if delivery == "result_drop":
        if etype == contract.EV_CANCELLED or _drop_is_cancel(drop_reason):
            return contract.TERMINAL_CANCELLED
        return contract.TERMINAL_ERROR
    return None


def terminal_kind_of(terminal: Any) -> str | None:
    """:func:`terminal_kind` of a client ``Terminal`` (or anything with its attributes)."""
    if terminal is None:
        return None
    return terminal_kind(getattr(terminal, "delivery", None), getattr(terminal, "event", None),
                         status_code=getattr(terminal, "status_code", None),
                         drop_reason=getattr(terminal, "drop_reason", None))
