"""Real-wire tests: NnrpServer and NnrpClient over loopback TCP with nnrp-py (no mocks)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient, NnrpClientError
from nnrp_conformance.wire import nodelay
from nnrp_conformance.wire.codec import RawFrame, dump_json
from vllm_nnrp_adapter.nnrp_server import NnrpServer

pytestmark = [pytest.mark.anyio, pytest.mark.wire]
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
from wire_handlers import Recorder, make_handler  # noqa: E402


def env(body: dict, **nnrp: object) -> dict:
    e = {
        "schema_version": contract.SCHEMA_VERSION,
        "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
        "body": body,
    }
    if nnrp:
        e["nnrp"] = nnrp
    return e


async def test_echo_round_trip_and_nodelay() -> None:
    async with NnrpServer(make_handler()) as srv, await NnrpClient.connect(srv.address) as client:
        op = await client.submit(env({"mode": "echo", "text": "héllo"}), timeout=10)
        events = [e async for e in op]
        assert [e.kind for e in events] == ["partial", "terminal"]
        assert events[0].event == {
            "type": contract.EV_OUTPUT_TEXT_DELTA,
            "index": 0,
            "delta": "héllo",
        }
        assert events[0].metadata["result_sequence"] == 1
        assert events[0].metadata["operation_id"] == op.operation_id
        assert op.terminal is not None and op.terminal.delivery == "result_push"
        assert op.terminal.status_code == contract.WIRE_STATUS_OK
        assert op.terminal.event == {"type": contract.EV_COMPLETED, "body": {"echo": "héllo"}}
        assert events[1].metadata["payload_kind_bitmap"] == contract.WIRE_PAYLOAD_KIND_BITMAP
        assert op.wire_findings == []
        socks = nodelay.connected_tcp_sockets()
        assert socks and all(nodelay.has_nodelay(s.fd) for s in socks)
        assert await client.capabilities() == {"profile": contract.PROFILE}


async def test_thousand_events_complete_and_ordered() -> None:
    async with (
        NnrpServer(make_handler(), queue_size=32) as srv,
        await NnrpClient.connect(srv.address) as client,
    ):
        op = await client.submit(env({"mode": "stream", "n": 1000}), timeout=60)
        events = [e async for e in op]
        partials = [e for e in events if e.kind == "partial"]
        assert [e.event["delta"] for e in partials] == [f"d{i}" for i in range(1000)]
        assert [e.metadata["result_sequence"] for e in partials] == list(range(1, 1001))
        assert op.terminal.event["type"] == contract.EV_COMPLETED
        assert op.wire_findings == []


async def test_burst_reaches_the_reader_before_the_stream_resumes() -> None:
    """The client holds the reader's wake-up while a burst arrives; a pause must release it:
    events never wait in the client for the next frame. Judged by events, not by a clock: the
    handler sends nothing more (not even the terminal) until the reader has seen the whole
    burst, so a client that kept the last events back until the next frame never gets them
    and the handler's gate runs out (20 s: no load makes a working client that slow)."""
    rec = Recorder()
    async with NnrpServer(make_handler(rec)) as srv, await NnrpClient.connect(srv.address) as client:
        op = await client.submit(env({"mode": "burst_then_gate", "n": 200, "gate_s": 20}), timeout=60)
        partials = 0
        async for e in op:
            if e.kind == "partial":
                partials += 1
                if partials == 200:
                    rec.gate.set()
        assert partials == 200 and op.terminal is not None
        assert op.terminal.delivery == "result_push"
        assert rec.gate_timed_out is False, "the burst's last events reached the reader only with the terminal"
        assert op.wire_findings == []


async def test_handler_without_terminal_gets_empty_success() -> None:
    async with NnrpServer(make_handler()) as srv, await NnrpClient.connect(srv.address) as client:
        op = await client.submit(env({"mode": "stream", "n": 3, "no_terminal": True}), timeout=10)
        term = await op.result()
        assert (
            term.delivery == "result_push"
            and term.event is None
            and term.outcome == contract.TERMINAL_SUCCESS
        )
        assert op.received[-1].metadata["payload_frame_count"] == 0
        assert op.wire_findings == []


async def test_cancel_after_first_event() -> None:
    rec = Recorder()
    async with (
        NnrpServer(make_handler(rec)) as srv,
        await NnrpClient.connect(srv.address) as client,
    ):
        op = await client.submit(env({"mode": "forever", "gap_ms": 5}), timeout=10)
        async for ev in op:
            if ev.kind == "partial":
                await op.cancel()
        term = op.terminal
        assert term.delivery == "result_drop", term
        assert term.drop_reason == contract.WIRE_DROP_PEER_CANCELLED
        assert (
            term.event["type"] == contract.EV_CANCELLED
            and term.outcome == contract.TERMINAL_CANCELLED
        )
        cancel = term.diagnostics["cancellation"]
        assert cancel["source"] == contract.CANCEL_SOURCE_CLIENT
        assert cancel["operation_id"] == op.operation_id and cancel["abort_accepted"] is True
        assert [a[1].source for a in rec.aborts] == [contract.CANCEL_SOURCE_CLIENT]
        # the session stays usable
        op2 = await client.submit(env({"mode": "echo", "text": "after"}), timeout=10)
        assert (await op2.result()).event["body"] == {"echo": "after"}


async def test_pump_cancels_after_n_partials_however_far_the_reader_lags() -> None:
    """``cancel_after_partials``: the cancel leaves when the N-th partial arrives, not when a
    reader gets to it. The reader here reads nothing until the terminal (a reader lagging by
    the whole answer), on a stream that would end by itself after 300 events."""
    rec = Recorder()
    async with (
        NnrpServer(make_handler(rec)) as srv,
        await NnrpClient.connect(srv.address) as client,
    ):
        op = await client.submit(env({"mode": "stream", "n": 300, "gap_ms": 2}), timeout=30,
                                 cancel_after_partials=5)
        with anyio.fail_after(20):
            while op.terminal is None:
                await anyio.sleep(0.05)
        term = await op.result()
        assert term.outcome == contract.TERMINAL_CANCELLED, term
        assert op.cancel_sent_at_ns is not None
        partials = [r for r in op.received if r.kind == "partial"]
        before = [r for r in partials if r.received_at_ns <= op.cancel_sent_at_ns]
        assert len(before) == 5, len(before)
        assert len(partials) < 300, "the stream ran to its end: the cancel left too late"
        assert [a[1].source for a in rec.aborts] == [contract.CANCEL_SOURCE_CLIENT]


async def test_cancel_after_events_hint_ends_with_pushed_cancelled() -> None:
    rec = Recorder()
    async with (
        NnrpServer(make_handler(rec)) as srv,
        await NnrpClient.connect(srv.address) as client,
    ):
        op = await client.submit(
            env({"mode": "forever", "gap_ms": 1}, cancel_after_events=1), timeout=10
        )
        term = await op.result()
        assert len(op.events) == 1
        assert term.delivery == "result_push" and term.event["type"] == contract.EV_CANCELLED
        assert term.diagnostics["cancellation"]["source"] == contract.CANCEL_SOURCE_HINT
        assert rec.aborts and rec.aborts[0][1].source == contract.CANCEL_SOURCE_HINT


async def test_timeout_stops_emission_and_aborts() -> None:
    rec = Recorder()
    async with (
        NnrpServer(make_handler(rec)) as srv,
        await NnrpClient.connect(srv.address) as client,
    ):
        op = await client.submit(env({"mode": "forever", "gap_ms": 10}, timeout_ms=150), timeout=10)
        term = await op.result()
        assert term.delivery == "result_push"
        assert term.event["error"]["code"] == contract.ERR_TIMEOUT
        assert term.event["error"]["type"] == contract.ERROR_CODES[contract.ERR_TIMEOUT]
        assert term.diagnostics["cancellation"]["source"] == contract.CANCEL_SOURCE_TIMEOUT
        assert term.diagnostics["cancellation"]["abort_accepted"] is True
        assert rec.aborts[0][1].source == contract.CANCEL_SOURCE_TIMEOUT
        assert term.diagnostics["events_emitted"] == len(op.events)
        silent = await client.submit(env({"mode": "silent"}, timeout_ms=100), timeout=10)
        assert (await silent.result()).event["error"]["code"] == contract.ERR_TIMEOUT


async def test_client_side_timeout_records_and_cancels() -> None:
    async with NnrpServer(make_handler()) as srv, await NnrpClient.connect(srv.address) as client:
        op = await client.submit(env({"mode": "silent"}), timeout=0.3)
        term = await op.result()
        assert term.delivery == "timeout" and op.cancel_sent_at_ns is not None


MALFORMED = [
    ("not utf-8", b"\xff\xfe{}", None, "submit.payload.utf8"),
    ("not json", b"{nope", None, "submit.payload.json"),
    ("json array", b"[1,2]", None, "submit.payload.object"),
    (
        "extra frame",
        None,
        [RawFrame(dump_json({"a": 1})), RawFrame(dump_json({"b": 2}))],
        "submit.payload_frame_count",
    ),
    ("wrong kind", None, [RawFrame(b"{}", payload_kind=64)], "submit.payload_kind_bitmap"),
    ("append semantics", None, [RawFrame(b"{}", stream_semantics=2)], "submit.stream_semantics"),
    ("profile id", None, [RawFrame(b"{}", profile_id=7)], "submit.profile_id"),
    ("schema id", None, [RawFrame(b"{}", schema_id=3)], "submit.schema_id"),
    ("descriptor flags", None, [RawFrame(b"{}", descriptor_flags=1)], "submit.descriptor_flags"),
]


@pytest.mark.parametrize(
    ("name", "payload", "frames", "rule"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
async def test_malformed_frames_get_error_terminal(
    name: str, payload: bytes | None, frames, rule: str
) -> None:
    rec = Recorder()
    async with (
        NnrpServer(make_handler(rec)) as srv,
        await NnrpClient.connect(srv.address) as client,
    ):
        op = await client.submit(payload, frames=frames, timeout=10)
        term = await op.result()
        assert term.delivery == "result_push", term
        assert term.event["type"] == contract.EV_ERROR
        assert term.event["error"]["code"] == contract.ERR_INVALID_REQUEST
        assert rule in term.event["error"]["message"]
        assert term.status_code == contract.WIRE_STATUS_ERROR
        assert rec.started == []  # the handler never saw it
        ok = await client.submit(env({"mode": "echo", "text": "still up"}), timeout=10)
        assert (await ok.result()).event["body"] == {"echo": "still up"}


async def test_oversized_envelope_and_handler_failures() -> None:
    async with (
        NnrpServer(make_handler(), max_envelope_bytes=1000) as srv,
        await NnrpClient.connect(srv.address) as client,
    ):
        big = await client.submit(env({"mode": "echo", "text": "x" * 5000}), timeout=10)
        assert (await big.result()).event["error"]["code"] == contract.ERR_REQUEST_TOO_LARGE
        crash = await client.submit(env({"mode": "crash"}), timeout=10)
        term = await crash.result()
        assert len(crash.events) == 1 and term.event["error"]["code"] == contract.ERR_INTERNAL
        assert "boom" in term.event["error"]["message"]
        err = await client.submit(env({"mode": "error"}), timeout=10)
        term = await err.result()
        assert (
            term.event["error"]["code"] == "missing_messages"
            and term.status_code == contract.WIRE_STATUS_ERROR
        )


async def test_diagnostics_on_request() -> None:
    async with NnrpServer(make_handler()) as srv, await NnrpClient.connect(srv.address) as client:
        op = await client.submit(env({"mode": "stream", "n": 2}, diagnostics=True), timeout=10)
        term = await op.result()
        assert (
            term.diagnostics["operation_id"] == op.operation_id
            and term.diagnostics["events_emitted"] == 2
        )
        assert "nnrp" not in term.event


async def test_sixteen_sessions_interleaved() -> None:
    async with NnrpServer(make_handler()) as srv:
        clients = [await NnrpClient.connect(srv.address) for _ in range(16)]
        results: dict[tuple[int, int], list[str]] = {}

        async def run(ci: int, client: NnrpClient) -> None:
            ops = [
                await client.submit(env({"mode": "stream", "n": 20 + k, "gap_ms": 1}), timeout=60)
                for k in range(3)
            ]
            for k, op in enumerate(ops):
                await op.result()
                results[(ci, k)] = [e["delta"] for e in op.events]
                assert op.terminal.event["body"] == {"n": 20 + k} and op.wire_findings == []

        try:
            async with anyio.create_task_group() as tg:
                for i, c in enumerate(clients):
                    tg.start_soon(run, i, c)
        finally:
            for c in clients:
                await c.aclose()
        assert len(results) == 48
        assert all(v == [f"d{i}" for i in range(20 + k)] for (_, k), v in results.items())


async def test_client_disconnect_mid_stream_aborts_handler() -> None:
    rec = Recorder()
    async with NnrpServer(make_handler(rec)) as srv:
        client = await NnrpClient.connect(srv.address)
        op = await client.submit(env({"mode": "forever", "gap_ms": 2}), timeout=10)
        async for _ev in op:
            if len(op.events) >= 3:
                break
        await client.aclose()
        with anyio.fail_after(10):
            while not rec.aborts:
                await anyio.sleep(0.01)
        assert rec.aborts[0][1].source == contract.CANCEL_SOURCE_DISCONNECT
        async with await NnrpClient.connect(srv.address) as again:
            ok = await again.submit(env({"mode": "echo", "text": "next"}), timeout=10)
            assert (await ok.result()).event["body"] == {"echo": "next"}


def _spawn(args: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, *args], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    addr = proc.stdout.readline().strip()
    assert addr, "subprocess server did not start"
    return proc, addr


def _stop(proc: subprocess.Popen) -> None:
    try:
        proc.stdin.close()
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


async def test_cross_process_server() -> None:
    proc, addr = _spawn([str(Path(__file__).parent / "wire_handlers.py")])
    try:
        async with await NnrpClient.connect(addr) as client:
            op = await client.submit(env({"mode": "stream", "n": 200}), timeout=30)
            await op.result()
            assert [e["delta"] for e in op.events] == [f"d{i}" for i in range(200)]
            c = await client.submit(env({"mode": "forever", "gap_ms": 2}), timeout=10)
            async for ev in c:
                if ev.kind == "partial":
                    await c.cancel()
            assert c.terminal.outcome == contract.TERMINAL_CANCELLED
    finally:
        _stop(proc)


async def _cancel_after_partials(op, n: int) -> None:  # type: ignore[no-untyped-def]
    """Read ``op`` to its end, sending a real cancel once ``n`` partials have arrived."""
    seen = 0
    async for ev in op:
        seen += ev.kind == "partial"
        if seen == n:
            await op.cancel()


async def test_flat_out_streams_sharing_a_session_see_their_cancels_answered() -> None:
    """Regression: a handler yielding as fast as the pump sends kept the pump from ever polling
    again, so the server never saw the cancel and streamed on until the client hung up. Cross-
    process, because in one process the GIL hand-overs happened to hide it. The grace is long,
    so an op ends ``result_drop`` only if the server itself answered the cancel."""
    proc, addr = _spawn([str(Path(__file__).parent / "wire_handlers.py")])
    try:
        async with await NnrpClient.connect(addr) as client:
            client.cancel_grace = 30.0
            for _ in range(2):
                ops = [
                    await client.submit(env({"mode": "forever", "gap_ms": 0}), timeout=60)
                    for _ in range(4)
                ]

                async with anyio.create_task_group() as tg:
                    for op in ops:
                        tg.start_soon(_cancel_after_partials, op, 20)
                assert [op.terminal.delivery for op in ops] == ["result_drop"] * 4, [
                    str(op.terminal) for op in ops
                ]
                assert all(op.terminal.outcome == contract.TERMINAL_CANCELLED for op in ops)
            assert client._broken is None
            after = await client.submit(env({"mode": "echo", "text": "still here"}), timeout=10)
            assert (await after.result()).event["body"] == {"echo": "still here"}
    finally:
        _stop(proc)


async def test_bulk_stream_stays_complete_when_a_neighbour_is_cancelled() -> None:
    """A fast stream is polled several frames at a time while a flat-out neighbour on the
    same session is cancelled and its stale frames (3/4/105) drain. nnrp-py was seen to drop
    a whole batch on a stale frame (notes §6.6), so bulk polls stop while a cancel is
    unanswered; whatever the SDK does, the fast stream must arrive complete and in order."""
    proc, addr = _spawn([str(Path(__file__).parent / "wire_handlers.py")])
    try:
        async with await NnrpClient.connect(addr) as client:
            client.cancel_grace = 30.0
            n = 3000
            bulk = await client.submit(env({"mode": "stream", "n": n}), timeout=60)
            victim = await client.submit(env({"mode": "forever", "gap_ms": 0}), timeout=60)
            got: list[str] = []

            async def read_bulk() -> None:
                async for ev in bulk:
                    if ev.kind == "partial":
                        got.append(ev.event["delta"])

            async with anyio.create_task_group() as tg:
                tg.start_soon(read_bulk)
                tg.start_soon(_cancel_after_partials, victim, 300)
            assert client.bulk_polls > 0, "the fast stream was never polled in bulk"
            assert got == [f"d{i}" for i in range(n)]
            partials = [e for e in bulk.received if e.kind == "partial"]
            assert [e.metadata["result_sequence"] for e in partials] == list(range(1, n + 1))
            assert bulk.terminal.delivery == "result_push" and bulk.wire_findings == []
            assert victim.terminal.outcome == contract.TERMINAL_CANCELLED
            assert client._broken is None
    finally:
        _stop(proc)


CLIENT_SCRIPT = """
import anyio, sys
from nnrp_conformance.client import NnrpClient, NnrpClientError
async def main():
    c = await NnrpClient.connect(sys.argv[1])
    op = await c.submit({"schema_version": "openai-compatible/1", "operation": "chat.completions.create",
                         "body": {"mode": "forever", "gap_ms": 2}}, timeout=30)
    async for ev in op:
        print("event", flush=True)
        await anyio.sleep(30)
anyio.run(main)
"""


async def test_killed_client_process_aborts_handler() -> None:
    rec = Recorder()
    async with NnrpServer(make_handler(rec)) as srv:
        proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT_SCRIPT, srv.address],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            # read off-loop: the handler serving this client runs on this event loop
            line = await anyio.to_thread.run_sync(proc.stdout.readline)
            assert line.strip() == "event"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)
            with anyio.fail_after(15):
                while not rec.aborts:
                    await anyio.sleep(0.02)
            assert rec.aborts[0][1].source == contract.CANCEL_SOURCE_DISCONNECT
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)


async def test_busy_sessions_share_one_poll_budget_and_still_see_their_cancels() -> None:
    """Sessions with an operation in flight are counted, and uncounted when it ends or when the
    session goes with it in flight; under a budget of 10 polls a second four sessions waiting
    on a silent handler poll every 400 ms each, and every cancel is still answered by the
    server (its drop, not the client's local grace)."""
    rec = Recorder()
    async with NnrpServer(make_handler(rec), busy_poll_budget_per_s=10) as srv:
        clients = [await NnrpClient.connect(srv.address) for _ in range(4)]
        try:
            ops = [await c.submit(env({"mode": "silent"}), timeout=30) for c in clients]
            with anyio.fail_after(10):
                while srv.busy_sessions < 4:
                    await anyio.sleep(0.01)
            assert srv.busy_poll_share_ns() == 400_000_000
            for op in ops[:3]:
                await op.cancel()
            for op in ops[:3]:
                with anyio.fail_after(10):
                    term = await op.result()
                assert term.outcome == contract.TERMINAL_CANCELLED
                assert term.delivery == "result_drop", term
            with anyio.fail_after(10):
                while srv.busy_sessions != 1:
                    await anyio.sleep(0.01)
        finally:
            for c in clients:
                await c.aclose()
        with anyio.fail_after(10):
            while srv.busy_sessions:
                await anyio.sleep(0.01)


async def test_connecting_to_nothing_says_nothing_listens(tmp_path: Path) -> None:
    """A refused connect names the address in words, not nnrp-py's internal status code; an
    address where something listens but speaks no NNRP keeps the runtime's own account."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for target, shown in ((f"127.0.0.1:{port}", f"127.0.0.1:{port}"),
                          (f"ipc://{tmp_path}/none.sock", f"{tmp_path}/none.sock")):
        with pytest.raises(NnrpClientError) as exc:
            await NnrpClient.connect(target, connect_timeout=5)
        assert str(exc.value) == f"nothing listening on {shown}"
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with pytest.raises(NnrpClientError) as exc:
            await NnrpClient.connect(f"127.0.0.1:{listener.getsockname()[1]}", connect_timeout=3)
        assert "nothing listening" not in str(exc.value)
