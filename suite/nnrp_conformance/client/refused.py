"""Frames nnrp-py refused for an operation that had ended: recorded, and attributed to the
operation that owned them when the wire leaves only one owner.

nnrp-py's client forgets a frame id once that operation's terminal is in; a later frame for
it is not handed over but raised from the poll as ``NativeInvalidStateError(3/4/105)``, with
nothing else: no frame id, no operation id, no message type, and the poll's event buffer
is not written (docs/sdk-defects.md item 14). A refusal while a cancel of ours is unanswered
is that cancel's race (``stale_after_cancel``, judged by the cancel rules); every other
refusal is a frame the endpoint sent after an operation's terminal, recorded here.

Attribution: an operation whose terminal came from the endpoint *settles* for
``settle_window`` seconds after it, while the pump keeps polling; its reader's iteration
ends only then (``Operation`` waits), so a refusal seen meanwhile reaches the case's
result before the case is judged. A refusal while exactly one operation settles belongs to
it: frames for operations still in flight are delivered, not refused, and no other
operation ended within the window. With several settling (concurrent cases), or none (the
frame came after the window), the refusal is a session-level record naming the candidates.
The window only bounds how long the client looks; the verdict comes from the frame seen.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

from nnrp_conformance.terminals import DELIVERIES_FROM_ENDPOINT

#: the finding a refused frame attributed to an operation raises (judged by checks.stream)
RULE_REFUSED = "wire.refused_after_terminal"
#: how long a case's operation settles after the endpoint's terminal (ConformanceCore's
#: client): a frame sent right after a terminal is on loopback within a millisecond or two
CASE_SETTLE_S = 0.03
#: session-level records kept (the oldest go first)
_LOG_MAX = 256
#: recently ended operations named as candidates of an unattributed refusal
_CANDIDATES_MAX = 4


@dataclass(slots=True)
class RefusedFrame:
    """One frame nnrp-py refused outside our own cancels."""

    received_at_ns: int
    status: str  # the SDK's status, all it says about the frame
    operation_id: int | None = None  # the owner, when attributed
    frame_id: int | None = None
    attribution: str = ""  # how the owner was told (or why it was not)
    candidates: list[int] = field(default_factory=list)  # operation ids, when ambiguous

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "operation_id": self.operation_id,
                "frame_id": self.frame_id, "attribution": self.attribution,
                "candidates": list(self.candidates)}


def unowned_since(log: Any, shown_ns: int, owned: set[Any]) -> tuple[list[dict[str, Any]], int]:
    """The records of ``log`` newer than ``shown_ns`` whose operation is not in ``owned``
    (frames several operations settling, a late window or the discovery operation left
    unattributed), and the newest time now shown."""
    new = [r for r in log if r.received_at_ns > shown_ns]
    if new:
        shown_ns = new[-1].received_at_ns
    return [r.to_dict() for r in new if r.operation_id is None or r.operation_id not in owned], shown_ns


class _RefusalLedger:
    """The refusal half of the client's pump (a mixin over the client's state)."""

    settle_window: float
    _settling: dict[Any, int]  # Operation -> settle end (perf_counter_ns), in end order
    _ended_recently: collections.deque[Any]
    refused_frames: collections.deque[RefusedFrame]

    def _init_refusals(self, settle_window: float) -> None:
        self.settle_window = settle_window
        self._settling = {}
        self._ended_recently = collections.deque(maxlen=_CANDIDATES_MAX)
        self.refused_frames = collections.deque(maxlen=_LOG_MAX)

    def _start_settle(self, op: Any, now: int) -> None:
        """``op`` just ended; from the endpoint's terminal, it settles (any thread)."""
        if op.terminal is None or op.terminal.delivery not in DELIVERIES_FROM_ENDPOINT:
            op.settle_until_ns = now  # a local end: nothing to wait for
            return
        self._ended_recently.append(op)
        until = now + int(self.settle_window * 1e9)
        op.settle_until_ns = until
        if self.settle_window > 0:
            self._settling[op] = until

    def _settling_now(self, now: int) -> bool:
        """Whether an operation still settles (expired ones are dropped, in end order)."""
        while self._settling:
            op, until = next(iter(self._settling.items()))
            if now < until:
                return True
            del self._settling[op]
        return False

    def _on_refused(self, status: str, now: int) -> RefusedFrame:
        """A frame refused with no cancel of ours unanswered: attribute it and record it."""
        self._settling_now(now)
        rec = RefusedFrame(now, status)
        settling = list(self._settling)
        if len(settling) == 1:
            op = settling[0]
            rec.operation_id, rec.frame_id = op.operation_id, op.frame_id
            rec.attribution = ("the only operation that ended within the settle window "
                               f"({self.settle_window * 1000:.0f} ms)")
            op.refused_after_terminal.append(rec)
            op.finding(RULE_REFUSED,
                       f"a frame arrived after the operation's terminal "
                       f"({op.terminal.delivery}); nnrp-py refused it ({status}) and says "
                       f"nothing else about it (message type unknown)",
                       received_at_ns=now)
        else:
            pool = settling or list(self._ended_recently)
            rec.candidates = [op.operation_id for op in pool]
            rec.attribution = (f"ambiguous: {len(settling)} operations settling"
                               if settling else
                               "after every settle window: owner unknown (session-level)")
        self.refused_frames.append(rec)
        return rec
