"""An operation's one terminal as frames: the profile error terminal with the wire status its
code's family calls for, and sending a terminal from the pump thread (a pushed
``response.completed``/``error``/``cancelled`` result, or a drop with its reason), with the
sent-event counts of a stopped operation's diagnostics made final as it goes.
"""

from __future__ import annotations

from typing import Any

from nnrp.runtime import ResultDropReasonMetadata, RuntimeRole

from nnrp_conformance import contract
from nnrp_conformance.wire import codec
from vllm_nnrp_adapter.profile import profile

from . import sdk
from .operation import _Op, _Terminal

__all__ = ["error_status", "error_terminal", "final_counts", "send_terminal"]


def error_status(code: str) -> int:
    """The wire status of an error terminal: a client error for an invalid request's family,
    a server error otherwise."""
    family = contract.ERROR_CODES.get(code, contract.ERR_TYPE_SERVER)
    return (
        contract.WIRE_STATUS_ERROR
        if family == contract.ERR_TYPE_INVALID_REQUEST
        else contract.WIRE_STATUS_SERVER_ERROR
    )


def error_terminal(code: str, message: str, diag: dict[str, Any] | None = None) -> _Terminal:
    """The pushed profile ``error`` terminal for ``code``, with the diagnostics if any."""
    return _Terminal(
        "push",
        codec.with_diagnostics(profile.error_event(code, message), diag),
        error_status(code),
    )


def send_terminal(op: _Op, term: _Terminal) -> None:
    """Send ``term`` as ``op``'s terminal (pump thread only): the pushed result or the drop.
    Raises nnrp-py's ``NativeRuntimeError`` when the session refuses it."""
    if term.kind == "push":
        md, body = codec.encode_result_push(op.frame_id, term.event, status_code=term.status_code)
        sdk.send_result(op.native, md, body)
    else:
        diag = codec.dump_json(term.event) if term.event is not None else b""
        sdk.send_drop(
            op.native,
            ResultDropReasonMetadata(
                op.operation_id,
                op.seq + 1,
                term.drop_reason,
                RuntimeRole.SERVER,
                0,
                len(diag),
            ),
            diag,
        )


def final_counts(event: dict[str, Any] | None, sent: int) -> None:
    """Set the sent-event counts of a stopped op's diagnostics from the pump's final count.

    The loop builds the diagnostics while the pump thread may be finishing a send it began
    before the stop, so its reading of ``op.sent`` can be one short; on the pump thread, the
    only one that sends, with the terminal about to go, the count is final.
    """
    if not isinstance(event, dict):
        return
    _, diag = codec.split_diagnostics(event)  # the event's own diagnostics object, or {}
    if "events_emitted" in diag:
        diag["events_emitted"] = sent
    cancellation = diag.get("cancellation")
    if isinstance(cancellation, dict) and "events_sent" in cancellation:
        cancellation["events_sent"] = sent
