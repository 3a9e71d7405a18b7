"""Hostile input to the adapter: every corpus case gets its precise profile error, the next
request is served normally, and nothing stays open afterwards (operations, handler tasks,
backend requests, operation contexts, asyncio tasks)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient
from nnrp_conformance.validation import validate_event

sys.path.insert(0, str(Path(__file__).parent))
from corpus import Tally, corpus
from scripted_backend import BUILTIN, expected_text

from conftest import chat, envelope, live_contexts, serve_adapter

pytestmark = [pytest.mark.anyio, pytest.mark.wire]

CASES = corpus()


def test_corpus_size_and_shape() -> None:
    hand = [c for c in CASES if not c.generated]
    gen = [c for c in CASES if c.generated]
    assert len(CASES) >= 200 and len(hand) >= 100 and len(gen) >= 100, (len(hand), len(gen))
    assert len({c.id for c in CASES}) == len(CASES)
    assert all(c.expect in contract.ERROR_CODES for c in CASES)
    print(f"\ncorpus: {len(CASES)} cases ({len(hand)} hand-written, {len(gen)} generated)")
    for cat, n in sorted(Tally.of(CASES).by_category.items()):
        print(f"  {cat:40s} {n}")


def _problems(case, op, term) -> list[str]:  # type: ignore[no-untyped-def]
    out = []
    ev = term.event
    if term.delivery != "result_push" or not ev or ev.get("type") != contract.EV_ERROR:
        return [f"ended with {term.delivery} {ev!r} {term.detail}"]
    err = ev.get("error") or {}
    if err.get("code") != case.expect:
        out.append(f"code {err.get('code')!r} != {case.expect!r} ({err.get('message')!r})")
    if err.get("type") != contract.ERROR_CODES.get(case.expect):
        out.append(f"error.type {err.get('type')!r} is not the family of {case.expect!r}")
    if case.rule and case.rule not in str(err.get("message")):
        out.append(f"message does not name {case.rule}: {err.get('message')!r}")
    if len(str(err.get("message"))) > 4096:
        out.append("message longer than 4096 characters (echoes the request)")
    want = contract.WIRE_STATUS_ERROR if err.get("type") == contract.ERR_TYPE_INVALID_REQUEST \
        else contract.WIRE_STATUS_SERVER_ERROR
    if term.status_code != want:
        out.append(f"RESULT_PUSH status {term.status_code} != {want}")
    out += [f"schema: {v}" for v in validate_event(ev)]
    if op.events:
        out.append(f"{len(op.events)} partial events before the error")
    out += [f"wire: {f['rule']}: {f['detail']}" for f in op.wire_findings]
    return out


async def test_every_case_gets_its_error_and_the_adapter_keeps_serving() -> None:
    good = envelope(chat("short"))
    want_text = expected_text(BUILTIN["short"])
    failures: list[str] = []
    async with serve_adapter() as a, await NnrpClient.connect(a.address) as client:
        tasks_before = len(asyncio.all_tasks())
        for case in CASES:
            op = await client.submit(**case.submit_args(), timeout=5)
            term = await op.result()
            failures += [f"{case.id}: {p}" for p in _problems(case, op, term)]
            nxt = await client.submit(good, timeout=15)
            t2 = await nxt.result()
            texts = [e.get("delta") for e in nxt.events if e and e.get("type") == contract.EV_OUTPUT_TEXT_DELTA]
            if not (t2.event and t2.event.get("type") == contract.EV_COMPLETED and texts == want_text):
                failures.append(f"{case.id}: the next valid request got {t2.delivery} {t2.event!r}")
        leaks = await a.settle()
        tasks_after = len(asyncio.all_tasks())
    assert not failures, f"{len(failures)} problems:\n" + "\n".join(failures[:60])
    assert leaks == []
    assert tasks_after <= tasks_before, (tasks_before, tasks_after)
    assert live_contexts() == 0
    assert a.backend.unfinished == set()
    print(f"\n{len(CASES)} malformed requests, each answered precisely; "
          f"{len(CASES)} valid requests between them all served")


async def test_envelope_cap_is_configurable() -> None:
    small = 4096
    async with serve_adapter(max_envelope_bytes=small) as a, await NnrpClient.connect(a.address) as client:
        over = await client.submit(envelope(chat("short", text="x" * (small + 512))), timeout=10)
        t = await over.result()
        assert t.event and t.event["error"]["code"] == contract.ERR_REQUEST_TOO_LARGE, t
        assert str(small) in t.event["error"]["message"]
        under = await client.submit(envelope(chat("short", text="x" * (small // 2))), timeout=10)
        t = await under.result()
        assert t.event and t.event["type"] == contract.EV_COMPLETED, t
        assert await a.settle() == []
