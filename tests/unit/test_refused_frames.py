"""The client's ledger of frames nnrp-py refused after an operation's terminal
(``client/refused.py``): which operation a refusal is given to, and when it stays a
session-level record. The real-wire side (the example endpoint's two-terminals, a drop
after a success push) is tests/suite/test_trace.py and the kill-rate test."""

from __future__ import annotations

from typing import Any

from nnrp_conformance.client.operation import Terminal
from nnrp_conformance.client.refused import RULE_REFUSED, _RefusalLedger

MS = 1_000_000


class _Op:
    def __init__(self, op_id: int, delivery: str = "result_push") -> None:
        self.operation_id = self.frame_id = op_id
        self.terminal = Terminal(delivery, None)
        self.refused_after_terminal: list[Any] = []
        self.settle_until_ns: int | None = None
        self.rules: list[str] = []

    def finding(self, rule: str, detail: str, **extra: Any) -> None:
        self.rules.append(rule)


def _ledger(window_s: float = 0.03) -> _RefusalLedger:
    ledger = _RefusalLedger()
    ledger._init_refusals(window_s)
    return ledger


def test_a_refusal_while_one_operation_settles_is_that_operations() -> None:
    ledger, op = _ledger(), _Op(1)
    ledger._start_settle(op, 0)
    assert op.settle_until_ns == 30 * MS and ledger._settling_now(1 * MS)
    rec = ledger._on_refused("3/4/105", 2 * MS)
    assert rec.operation_id == 1 and op.refused_after_terminal == [rec]
    assert op.rules == [RULE_REFUSED]
    assert list(ledger.refused_frames) == [rec]


def test_with_two_settling_the_refusal_is_session_level_and_names_both() -> None:
    ledger, a, b = _ledger(), _Op(1), _Op(2)
    ledger._start_settle(a, 0)
    ledger._start_settle(b, 1 * MS)
    rec = ledger._on_refused("3/4/105", 2 * MS)
    assert rec.operation_id is None and sorted(rec.candidates) == [1, 2]
    assert a.rules == b.rules == [] and "ambiguous" in rec.attribution


def test_after_the_window_nobody_is_blamed() -> None:
    ledger, op = _ledger(), _Op(1)
    ledger._start_settle(op, 0)
    rec = ledger._on_refused("3/4/105", 31 * MS)
    assert rec.operation_id is None and rec.candidates == [1] and op.rules == []
    assert not ledger._settling_now(31 * MS)


def test_a_local_end_never_settles_and_a_zero_window_attributes_nothing() -> None:
    ledger, timed_out = _ledger(), _Op(1, "timeout")
    ledger._start_settle(timed_out, 0)
    assert timed_out.settle_until_ns == 0 and not ledger._settling_now(0)
    assert ledger._on_refused("3/4/105", 1).candidates == []
    off, op = _ledger(0.0), _Op(2)
    off._start_settle(op, 0)
    assert off._on_refused("3/4/105", 0).operation_id is None and op.rules == []


def test_the_pump_gives_a_refusal_to_the_ledger_unless_a_cancel_of_ours_explains_it() -> None:
    """The pump's triage of 3/4/105 (client/pump.py): with a cancel unanswered it is the
    cancel's race (counted, judged by the cancel rules); otherwise a frame after a terminal."""
    import asyncio
    import time

    from nnrp.native import NativeInvalidStateError, NativeStatus

    from nnrp_conformance.client import NnrpClient

    async def triage(cancel_unanswered: bool) -> tuple[_Op, NnrpClient]:
        client = NnrpClient()
        client._init_refusals(60.0)  # a window no test machine outlasts
        op = _Op(1)
        client._start_settle(op, time.perf_counter_ns())
        if cancel_unanswered:
            client._unconfirmed_cancels[9] = time.perf_counter_ns() + 60 * 10**9
        client._on_invalid_state(NativeInvalidStateError(NativeStatus(3, 4, 0, 105)))
        return op, client

    op, client = asyncio.run(triage(False))
    assert op.rules == [RULE_REFUSED] and len(client.refused_frames) == 1
    assert "detail=105" in client.refused_frames[0].status
    op, client = asyncio.run(triage(True))
    assert op.rules == [] and not client.refused_frames and client.stale_errors == 1
