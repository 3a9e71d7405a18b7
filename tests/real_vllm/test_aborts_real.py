"""Aborts proven on the real engine: after a client cancel, a session close, a killed client,
an ``nnrp.timeout_ms`` expiry and a server shutdown, vLLM's own request count reaches 0 at once
(and its engine-core process goes idle), although each generation would otherwise run for many
more seconds; a cancel storm leaves no orphan request.

The generations cannot finish inside the test window: the tiny model is built with a long
context and asked for ``MAX_TOKENS`` with ``ignore_eos``, so only an abort ends them. Each test
first checks that its request is really running, then measures the time from the cause to
the engine's count reaching 0 (printed; the bound asserted, ``ABORT_BOUND_S``, is far below
the time the generation still needed, which the test also measures and checks, so a missing
abort fails rather than passing late). Latencies are wall time, as an operator sees them.

The engine's count is asked from outside, through the discovery operation's diagnostics
(``engine.unfinished_requests``, vLLM's output processor); the engine-core process's own CPU
time (``/proc``) shows that the engine itself stopped generating.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from long_context import MAX_TOKENS
from probe import connect, engine_count

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient, NnrpClientError
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess

pytestmark = [pytest.mark.anyio, pytest.mark.real_vllm, pytest.mark.wire]

ABORT_BOUND_S = 3.0  # asserted; the target (<= 1 s) is what the printed figures are read against
# 30 s give 16 lanes some hundreds of random cancels and disconnects at every stage of a stream
STORM_SECONDS = float(os.environ.get("NNRP_STORM_SECONDS", "30"))
FIGURES: dict[str, list[float]] = {}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def adapter(vllm_env, long_adapter: AdapterProcess) -> Iterator[AdapterProcess]:  # type: ignore[no-untyped-def]
    yield long_adapter  # shared with test_levels_real (conftest)
    version = vllm_env["version"]
    lines = [f"abort latency on vLLM {version} (cause -> engine count 0), seconds:"]
    for cause, values in sorted(FIGURES.items()):
        if cause.startswith(version):
            values = sorted(values)
            lines.append(f"  {cause}: n={len(values)} median={values[len(values) // 2]:.3f} "
                         f"max={values[-1]:.3f}")
    print("\n" + "\n".join(lines))


def chat(max_tokens: int = MAX_TOKENS, **nnrp: object) -> dict:
    env: dict = {
        "schema_version": contract.SCHEMA_VERSION,
        "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
        "body": {"messages": [{"role": "user", "content": "Count from one to one hundred."}],
                 "max_tokens": max_tokens, "stream": True, "temperature": 0, "ignore_eos": True},
    }
    if nnrp:
        env["nnrp"] = nnrp
    return env


def log_tail(adapter: AdapterProcess, lines: int = 40) -> str:
    if adapter.log_path is None or not adapter.log_path.exists():
        return "(no log)"
    return "\n".join(adapter.log_path.read_text(errors="replace").splitlines()[-lines:])


async def seconds_to_count(client: NnrpClient, want: int, since: float, limit: float = 20.0) -> float:
    """Poll the engine's count until it is ``want``; seconds since ``since``, inf when it never
    got there within ``limit`` seconds."""
    start = time.monotonic()
    while await engine_count(client) != want:
        if time.monotonic() - start > limit:
            return float("inf")
        await anyio.sleep(0.02)
    return time.monotonic() - since


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def engine_goes_idle(adapter: AdapterProcess, windows: int = 3) -> list[float]:
    """The engine core's CPU seconds in consecutive 1 s windows, until one is idle (< 0.3 s).

    A generation still running keeps every window near a full core; one idle window within
    ``windows`` seconds shows the engine itself stopped (a single window can catch the tail
    of the engine's own bookkeeping on a loaded machine)."""
    pid = adapter.engine_core_pid()
    seen: list[float] = []
    for _ in range(windows):
        before = cpu_seconds(pid)
        await anyio.sleep(1.0)
        seen.append(cpu_seconds(pid) - before)
        if seen[-1] < 0.3:
            break
    return seen


def assert_idle(seen: list[float]) -> None:
    assert seen[-1] < 0.3, f"the engine core kept working after the abort: CPU s per 1 s window {seen}"


async def running_stream(client: NnrpClient, partials: int = 20):  # type: ignore[no-untyped-def]
    """Start a long generation and wait until it streams; returns (op, its token rate)."""
    op = await client.submit(chat(), timeout=600)
    t0 = time.monotonic()
    with anyio.fail_after(120):
        while len(op.received) < partials:
            await anyio.sleep(0.01)
    rate = len(op.received) / max(time.monotonic() - t0, 1e-3)
    return op, rate


async def three_running_streams(client: NnrpClient, address: str):  # type: ignore[no-untyped-def]
    """Three long generations on ``client``, each streaming (10 partials) and all three held by
    the engine (asked through a separate observer session); returns (ops, partials received by
    the fastest, its rate per second)."""
    started = time.monotonic()
    ops = [await client.submit(chat(), timeout=600) for _ in range(3)]
    with anyio.fail_after(120):
        while min(len(o.received) for o in ops) < 10:
            await anyio.sleep(0.01)
    async with await connect(address) as observer:
        assert await engine_count(observer) == 3
    received = max(len(o.received) for o in ops)
    return ops, received, received / (time.monotonic() - started)


def check_abort(cause: str, version: str, latency: float, still_needed_s: float) -> None:
    FIGURES.setdefault(f"{version} {cause}", []).append(latency)
    # the generation still needed far longer than the bound: only an abort can explain 0
    assert still_needed_s > 3 * ABORT_BOUND_S, f"{cause}: generation too fast to prove an abort ({still_needed_s:.1f} s left)"
    assert latency <= ABORT_BOUND_S, f"{cause}: engine still held the request {latency:.2f} s after it"


async def test_client_cancel_aborts_the_engine_request(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    async with (
        await connect(adapter.address) as client,
        await connect(adapter.address) as observer,
    ):
        op, rate = await running_stream(client)
        assert await engine_count(observer) == 1
        t0 = time.monotonic()
        await op.cancel()
        latency = await seconds_to_count(observer, 0, t0)
        term = await op.result()
        assert term.outcome == contract.TERMINAL_CANCELLED, term
        check_abort("client cancel", vllm_env["version"], latency, (MAX_TOKENS - len(op.received)) / rate)
        assert_idle(await engine_goes_idle(adapter))


async def test_session_close_aborts_every_engine_request(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    client = await connect(adapter.address)
    _ops, received, rate = await three_running_streams(client, adapter.address)
    async with await connect(adapter.address) as observer:
        t0 = time.monotonic()
        await client.aclose()  # SESSION_CLOSE with three generations in flight
        latency = await seconds_to_count(observer, 0, t0)
        check_abort("session close", vllm_env["version"], latency, (MAX_TOKENS - received) / rate)
        assert_idle(await engine_goes_idle(adapter))


async def test_timeout_ms_aborts_the_engine_request(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    async with (
        await connect(adapter.address) as client,
        await connect(adapter.address) as observer,
    ):
        op = await client.submit(chat(timeout_ms=1500), timeout=600)
        term = await op.result()
        t0 = time.monotonic()
        assert term.event and term.event["error"]["code"] == contract.ERR_TIMEOUT, term
        rate = len(op.received) / 1.5
        latency = await seconds_to_count(observer, 0, t0)
        check_abort("timeout_ms", vllm_env["version"], latency, (MAX_TOKENS - len(op.received)) / max(rate, 1))
        assert_idle(await engine_goes_idle(adapter))


_KILLED_CLIENT = textwrap.dedent("""
    import asyncio, json, sys
    from nnrp_conformance.client import NnrpClient, NnrpClientError

    async def main():
        client = await NnrpClient.connect(sys.argv[1], connect_timeout=60)
        ops = [await client.submit(json.loads(sys.argv[2]), timeout=600) for _ in range(2)]
        while min(len(o.received) for o in ops) < 10:
            await asyncio.sleep(0.01)
        print("STREAMING", flush=True)
        await asyncio.sleep(600)   # killed here, mid-stream, without closing anything

    asyncio.run(main())
""")


async def test_killed_client_is_noticed_aborted_and_others_undisturbed(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    async with (
        await connect(adapter.address) as other,
        await connect(adapter.address) as observer,
    ):
        mine, rate = await running_stream(other)
        proc = subprocess.Popen([sys.executable, "-c", _KILLED_CLIENT, adapter.address, json.dumps(chat())],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            assert proc.stdout is not None
            with anyio.fail_after(120):
                line = await anyio.to_thread.run_sync(proc.stdout.readline)
            if line.strip() != b"STREAMING":
                # the child failed before streaming: show all it said (bounded), not one line
                with anyio.move_on_after(10):
                    line += await anyio.to_thread.run_sync(proc.stdout.read, abandon_on_cancel=True)
                pytest.fail(f"the client to be killed failed before streaming:\n"
                            f"{line.decode(errors='replace')[-4000:]}")
            assert await engine_count(observer) == 3
            t0 = time.monotonic()
            proc.send_signal(signal.SIGKILL)
            latency = await seconds_to_count(observer, 1, t0)  # only our own stream is left
        finally:
            proc.kill()
            proc.wait(timeout=10)
        check_abort("client killed", vllm_env["version"], latency, (MAX_TOKENS - 100) / max(rate, 1))
        # the surviving session still streams after all of it, and still ends cleanly
        before = len(mine.received)
        with anyio.fail_after(30):
            while len(mine.received) <= before:
                await anyio.sleep(0.01)
        assert mine.terminal is None
        await mine.cancel()
        assert (await mine.result()).outcome == contract.TERMINAL_CANCELLED
        assert await seconds_to_count(observer, 0, time.monotonic()) <= ABORT_BOUND_S
        assert not [f for f in mine.wire_findings if f["rule"].startswith("wire.")]


async def test_cancel_storm_leaves_no_orphan_request(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    """16 concurrent streams for STORM_SECONDS: random cancels after random numbers of events,
    random disconnects (a client closed with its streams in flight); every operation ends
    exactly once, no event arrives after a terminal, and the engine holds nothing at the end."""
    rng = random.Random(16)
    started = time.monotonic()

    def storm_running() -> bool:
        return time.monotonic() - started < STORM_SECONDS

    connect_s: list[float] = []
    tally = {"ops": 0, "cancelled": 0, "disconnected": 0, "after_terminal": 0, "other": 0,
             "crossed": 0}
    anomalies: list[str] = []
    # An answer can end on the wire while our cancel is on its way (a short answer, a reader
    # behind the wire): its RESULT_PUSH then crosses the cancel. That is one terminal, counted
    # and printed; a frame after an operation's terminal is the failure.
    crossing = ("wire.partial_after_cancel", "wire.result_after_cancel")

    async def lane(n: int) -> None:
        while storm_running():
            try:
                t0 = time.monotonic()
                client = await connect(adapter.address)
                connect_s.append(time.monotonic() - t0)
            except NnrpClientError as exc:
                # the adapter's own account of why (an accept thread that died once showed
                # up only as this)
                raise AssertionError(f"lane {n}: {exc}; adapter log tail:\n"
                                     f"{log_tail(adapter)}") from exc
            try:
                for _ in range(rng.randint(1, 4)):
                    if not storm_running():
                        break
                    op = await client.submit(chat(rng.choice([200, MAX_TOKENS])), timeout=300)
                    tally["ops"] += 1
                    stop_after = rng.randint(0, 40)
                    if rng.random() < 0.15:  # disconnect mid-stream: close the client
                        while len(op.received) < stop_after and op.terminal is None:
                            await anyio.sleep(0.005)
                        tally["disconnected"] += 1
                        break
                    n_ev = 0
                    async for _ in op:
                        n_ev += 1
                        if n_ev >= stop_after:
                            await op.cancel()
                    term = op.terminal
                    assert term is not None
                    late = [f for f in op.wire_findings if f["rule"] == "wire.frame_after_terminal"]
                    tally["crossed"] += any(f["rule"] in crossing for f in op.wire_findings)
                    tally["cancelled"] += term.outcome == contract.TERMINAL_CANCELLED
                    odd = term.outcome not in (contract.TERMINAL_CANCELLED, contract.TERMINAL_SUCCESS)
                    tally["other"] += odd
                    tally["after_terminal"] += len(late)
                    if odd or late:
                        anomalies.append(f"op {op.operation_id} (stop after {stop_after}, got {n_ev}): "
                                         f"{term.delivery} {term.outcome} {term.event!r} {term.detail!r} {late}")
            finally:
                await client.aclose()

    async with anyio.create_task_group() as tg:
        for n in range(16):
            tg.start_soon(lane, n)
    async with await connect(adapter.address) as observer:
        leftover = await seconds_to_count(observer, 0, time.monotonic())
    print(f"\ncancel storm on vLLM {vllm_env['version']}: {tally} in "
          f"{time.monotonic() - started:.1f} s; engine empty after {leftover:.3f} s")
    print("\n".join(anomalies))
    assert tally["after_terminal"] == 0 and tally["other"] == 0, anomalies
    assert tally["ops"] >= 16 and tally["cancelled"] > 0 and tally["disconnected"] > 0, (
        f"{tally}; storm ran {time.monotonic() - started:.1f} s; connects took "
        f"{sorted(round(c, 1) for c in connect_s)} s; adapter log tail:\n{log_tail(adapter)}")
    assert leftover <= ABORT_BOUND_S, f"orphan engine requests {leftover} s after the storm"


async def test_cancel_of_one_of_three_on_a_session_aborts_only_that_request(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    """Three generations multiplexed on one session, one cancelled mid-stream (issue 30): vLLM's
    own count falls from 3 to exactly 2 and stays there while both neighbours keep streaming;
    the cancelled operation ends cancelled, the neighbours are untouched until we end them."""
    async with await connect(adapter.address) as client, await connect(adapter.address) as observer:
        ops, received, rate = await three_running_streams(client, adapter.address)
        victim, neighbours = ops[1], (ops[0], ops[2])
        t0 = time.monotonic()
        await victim.cancel()
        latency = await seconds_to_count(observer, 2, t0)
        if latency == float("inf"):
            left = await engine_count(observer)
            pytest.fail(f"vLLM's count never became 2 after one of three was cancelled: it holds {left}"
                        + (" (a neighbour was aborted too)" if left < 2 else ""))
        assert (await victim.result()).outcome == contract.TERMINAL_CANCELLED
        check_abort("cancel one of three", vllm_env["version"], latency, (MAX_TOKENS - received) / rate)
        # the two neighbours still stream, and vLLM still holds exactly their two requests
        before = [len(o.received) for o in neighbours]
        with anyio.fail_after(30):
            while any(len(o.received) <= b + 5 for o, b in zip(neighbours, before, strict=True)):
                await anyio.sleep(0.01)
        assert await engine_count(observer) == 2
        assert all(o.terminal is None for o in neighbours), [o.terminal for o in neighbours]
        for o in neighbours:
            await o.cancel()
            assert (await o.result()).outcome == contract.TERMINAL_CANCELLED
        assert await seconds_to_count(observer, 0, time.monotonic()) <= ABORT_BOUND_S
        assert not [f for o in ops for f in o.wire_findings if f["rule"].startswith("wire.")]


@pytest.mark.stops_shared_adapter
async def test_server_shutdown_aborts_every_engine_request(long_adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    """SIGTERM with three generations in flight: each operation gets its one terminal, vLLM
    holds no request before the engine stops (the adapter's ``SHUTDOWN`` line: requests held
    at the signal and left at the end, seconds from the signal until vLLM held none), and the
    process exits 0. It stops the shared long-context adapter, so it runs last of all."""
    adapter = long_adapter
    client = await connect(adapter.address)
    try:
        ops, received, rate = await three_running_streams(client, adapter.address)
        t0 = time.monotonic()
        code = await anyio.to_thread.run_sync(adapter.stop)
        stopped_s = time.monotonic() - t0
        with anyio.fail_after(30):
            terms = [await o.result() for o in ops]
    finally:
        await client.aclose()
    assert code == 0, f"adapter exit status {code} after SIGTERM"
    assert all(t.outcome != contract.TERMINAL_SUCCESS for t in terms), terms
    assert not [f for o in ops for f in o.wire_findings if f["rule"] == "wire.frame_after_terminal"]
    assert adapter.log_path is not None
    lines = [ln for ln in adapter.log_path.read_text(errors="replace").splitlines()
             if ln.startswith("SHUTDOWN ")]
    assert lines, f"no SHUTDOWN line in {adapter.log_path}"
    report = json.loads(lines[-1].split(" ", 1)[1])
    assert report["requests_at_signal"] == 3, report
    assert report["requests_left"] == 0, f"vLLM still held requests when the engine stopped: {report}"
    print(f"\nserver shutdown on vLLM {vllm_env['version']}: {report} (seconds from the signal), "
          f"process gone after {stopped_s:.2f} s")
    check_abort("server shutdown", vllm_env["version"], report["drained_s"],
                (MAX_TOKENS - received) / rate)
