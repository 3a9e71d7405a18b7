"""The soak's operation mix and its exact expectations: which operation the i-th one is
(streaming text, tool calls, non-streaming, malformed, cancelled), the events each must
produce, and the client side that drives the sessions and checks every operation for lost,
duplicated and misordered events."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import anyio

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient

from .backend import MODEL, _text
from .memory import _mib, _rss, object_census

OP_TIMEOUT_S = 30.0


#: i % 10 -> kind; 6 is a streaming text operation the client cancels right after submitting
KINDS = {7: "non_streaming", 8: "tools", 9: "malformed", 6: "cancelled"}


def _kind(i: int) -> str:
    return KINDS.get(i % 10, "text")


def _envelope(i: int) -> dict[str, Any] | bytes:
    kind = _kind(i)
    if kind == "malformed":
        return b'{"schema_version": "openai-compatible/1", "operation": '
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"q{i}"}],
        "stream": kind != "non_streaming",
    }
    if kind == "tools":
        body["tools"] = [{"type": "function", "function": {"name": "fn", "parameters": {}}}]
    return {
        "schema_version": contract.SCHEMA_VERSION,
        "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
        "body": body,
    }


def _expected(kind: str, tokens: int) -> list[tuple[str, str]]:
    """The partial events (type, payload key) an operation of ``kind`` must carry, in order."""
    if kind in ("non_streaming", "malformed"):
        return []
    usage = (contract.EV_USAGE, "")
    if kind == "tools":
        args = [f'{{"a{i}":{i}}}' for i in range(1, tokens)]
        return [
            (contract.EV_TOOL_CALL_STARTED, "call-0"),
            *((contract.EV_TOOL_CALL_DELTA, a) for a in args),
            (contract.EV_TOOL_CALL_COMPLETED, "call-0"),
            usage,
        ]
    return [(contract.EV_OUTPUT_TEXT_DELTA, f"t{i} ") for i in range(tokens)] + [usage]


def _key(ev: dict[str, Any] | None) -> tuple[str, str]:
    if not isinstance(ev, dict):
        return "<undecodable>", ""
    t = ev.get("type", "")
    if t == contract.EV_OUTPUT_TEXT_DELTA:
        return t, str(ev.get("delta"))
    if t == contract.EV_TOOL_CALL_DELTA:
        return t, str(ev.get("arguments_delta"))
    if t in (contract.EV_TOOL_CALL_STARTED, contract.EV_TOOL_CALL_COMPLETED):
        return t, str(ev.get("call_id"))
    return t, ""


def _classify(got: list[tuple[str, str]], want: list[tuple[str, str]], seqs: list[int]) -> str:
    """'' when ``got`` is exactly ``want`` with contiguous result sequences, else the defect."""
    if len(set(seqs)) != len(seqs):
        return "duplicated"
    if seqs != sorted(seqs):
        return "misordered"
    if got == want and seqs == list(range(1, len(seqs) + 1)):
        return ""
    have, need = Counter(got), Counter(want)
    if any(have[k] > need[k] for k in have):
        return "duplicated"
    if have == need:
        return "misordered" if got != want else "lost"  # same events, a gap in the sequence
    return "lost"


class _Checker:
    """Judges every operation against its kind's exact expectation."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.counts = Counter({"lost": 0, "duplicated": 0, "misordered": 0})
        self.outcomes: Counter[str] = Counter()
        self.bad_terminals = 0
        self.wire_findings: Counter[str] = Counter()
        self.events = 0
        self.cancel_races = 0
        self.examples: list[str] = []

    def _problem(self, i: int, what: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(f"op {i} ({_kind(i)}): {what}")

    def judge(self, i: int, op: Any, term: Any) -> None:
        kind = _kind(i)
        got = [_key(e) for e in op.events]
        seqs = [r.metadata.get("result_sequence") for r in op.received if r.kind == "partial"]
        want = _expected(kind, self.tokens)
        outcome = str(term.outcome)
        self.outcomes[f"{kind}:{outcome}"] += 1
        self.events += len(got) + 1
        event = term.event if isinstance(term.event, dict) else {}
        findings = [f["rule"] for f in op.wire_findings]
        if kind == "cancelled":
            # Cancelled right after the submit: any prefix of the text, then a cancelled
            # terminal, or the whole text when the operation finished before the cancel
            # landed. The known race (reports/reliability.md): the server pushed its result
            # before it polled the cancel; the client SDK has already cancelled locally, so it
            # discards the partials and surfaces only the push (wire.result_after_cancel).
            raced = outcome == contract.TERMINAL_SUCCESS and "wire.result_after_cancel" in findings
            if raced:
                self.cancel_races += 1
                findings.remove("wire.result_after_cancel")
            ok = (
                outcome == contract.TERMINAL_CANCELLED
                or raced
                or (outcome == contract.TERMINAL_SUCCESS and got == want)
            )
            if outcome == contract.TERMINAL_CANCELLED or raced:
                want = want[: len(got)]
        elif kind == "malformed":
            ok = (
                event.get("type") == contract.EV_ERROR
                and (event.get("error") or {}).get("code") == contract.ERR_INVALID_REQUEST
            )
        elif kind == "non_streaming":
            body = event.get("body") or {}
            content = ((body.get("choices") or [{}])[0].get("message") or {}).get("content")
            ok = event.get("type") == contract.EV_COMPLETED and content == _text(self.tokens)
        else:
            ok = event.get("type") == contract.EV_COMPLETED
        if not ok:
            self.bad_terminals += 1
            self._problem(i, f"terminal {term.delivery} {outcome} {str(term.event)[:120]}")
            if term.delivery in ("timeout", "transport_error"):
                self.counts["lost"] += 1  # the terminal itself never arrived
        defect = _classify(got, want, seqs)
        if defect:
            self.counts[defect] += 1
            self._problem(i, f"{defect}: got {got[:6]}… seq {seqs[:10]}")
        for rule in findings:
            self.wire_findings[rule] += 1
            self._problem(i, f"wire finding {rule}")


async def _drive(
    address: str, ops: int, sessions: int, tokens: int, reconnect_every: int = 0
) -> dict[str, Any]:
    """The client side: ``sessions`` connections share ``ops`` operations, each checked;
    with ``reconnect_every`` each connection is replaced after that many operations."""

    check = _Checker(tokens)
    rss_start = _rss()
    done = 0
    finished = 0
    all_done = anyio.Event()
    live: dict[str, Any] = {}
    t0 = time.perf_counter()
    wall = 0.0

    async def worker(n: int) -> None:
        nonlocal done
        mine = list(range(n, ops, sessions))
        per = reconnect_every or max(1, len(mine))
        chunks = [mine[k : k + per] for k in range(0, len(mine), per)] or [[]]
        for c, chunk in enumerate(chunks):
            async with await NnrpClient.connect(address) as client:
                for i in chunk:
                    op = await client.submit(_envelope(i), timeout=OP_TIMEOUT_S)
                    if _kind(i) == "cancelled":
                        await op.cancel()
                    term = await op.result()
                    check.judge(i, op, term)
                    done += 1
                if c == len(chunks) - 1:
                    await last(client)

    async def last(client: Any) -> None:
        # Every session stays open until all are done, so what the clients still hold is
        # counted before closing them frees it (``client`` is held open by the caller).
        nonlocal finished, wall
        finished += 1
        if finished == sessions:
            wall = time.perf_counter() - t0
            live["rss_mib"] = _mib(_rss())
            live["objects_top"] = dict(object_census().most_common(6))
            all_done.set()
        await all_done.wait()

    async with anyio.create_task_group() as tg:
        for n in range(sessions):
            tg.start_soon(worker, n)
    return {
        "operations": done,
        "wall_s": round(wall, 3),
        "ops_per_s": round(done / wall, 1) if wall else 0.0,
        "events": check.events,
        "lost": check.counts["lost"],
        "duplicated": check.counts["duplicated"],
        "misordered": check.counts["misordered"],
        "bad_terminals": check.bad_terminals,
        "wire_findings": dict(check.wire_findings),
        "cancel_races": check.cancel_races,
        "outcomes": dict(sorted(check.outcomes.items())),
        "problems": check.examples,
        "client_rss_start_mib": _mib(rss_start),
        "client_rss_end_mib": live.get("rss_mib", _mib(_rss())),
        "client_objects_top": live.get("objects_top", {}),
    }
