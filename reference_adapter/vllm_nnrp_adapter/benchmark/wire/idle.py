"""``vllm-nnrp bench idle``: the server binding's CPU while sessions sit idle.

Owns one measurement: a server process (the adapter's NNRP server binding with the wire
benchmark's handler; what an idle session costs does not depend on the backend) is given
1, 32 and 256 connected sessions with nothing in flight, each after one finished operation,
and its CPU seconds are read from ``/proc`` over a window. Several idle-poll waits can be
compared in one run (``--idle-poll-ms 25,250``): for each session count the variants are
measured back to back, alternating which goes first, each in its own server process.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import anyio

from nnrp_conformance.client import NnrpClient
from vllm_nnrp_adapter.nnrp_server import NnrpServer
from vllm_nnrp_adapter.observability.proc_cpu import cpu_seconds

from ..lib.results import metric, print_results, results_document, write_results
from ..lib.streams import load_average
from .servers import bench_handler, envelope

__all__ = ["main"]


async def _serve(idle_poll_ms: int) -> None:
    async with NnrpServer(bench_handler, "127.0.0.1:0", session_idle_poll_ms=idle_poll_ms) as srv:
        print(srv.address, flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)  # until the parent closes stdin


@contextlib.contextmanager
def _server(idle_poll_ms: int) -> Iterator[tuple[str, int]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm_nnrp_adapter.benchmark.wire.idle", "--serve", str(idle_poll_ms)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        addr = proc.stdout.readline().strip()
        if not addr:
            raise RuntimeError(f"idle server did not start (exit {proc.poll()})")
        yield addr, proc.pid
    finally:
        with contextlib.suppress(Exception):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


async def _idle_cpu(addr: str, pid: int, sessions: int, window_s: float) -> float:
    """Percent of one core the server spends with ``sessions`` idle sessions."""
    clients: list[NnrpClient] = []
    try:
        for _ in range(sessions):
            client = await NnrpClient.connect(addr, default_timeout=30.0)
            clients.append(client)
            op = await client.submit(envelope(3), timeout=30)
            await op.result()  # one finished operation: the session is past its first submit
        await anyio.sleep(1.0)
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        await anyio.sleep(window_s)
        cpu1, t1 = cpu_seconds(pid), time.monotonic()
    finally:
        for client in clients:
            with anyio.move_on_after(10):
                await client.aclose()
    return ((cpu1 or 0.0) - (cpu0 or 0.0)) / (t1 - t0) * 100.0


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp bench idle",
        description="Server CPU with 1, 32 and 256 idle sessions.",
    )
    p.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--sessions", default="1,32,256")
    p.add_argument("--idle-poll-ms", default="25", help="comma-separated variants to compare")
    p.add_argument("--window", type=float, default=10.0, help="seconds measured per point")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", default=None)
    args = p.parse_args(list(argv))
    if args.serve is not None:
        anyio.run(_serve, args.serve)
        return 0
    try:
        counts = [int(x) for x in args.sessions.split(",")]
        variants = [int(x) for x in args.idle_poll_ms.split(",")]
    except ValueError:
        p.error("--sessions and --idle-poll-ms take comma-separated integers")
    results: dict[tuple[int, int], list[float]] = {}
    loads: list[str] = []
    for r in range(args.rounds):
        for n in counts:
            order = variants if r % 2 == 0 else list(reversed(variants))
            for v in order:
                with _server(v) as (addr, pid):
                    loads.append(load_average())
                    pct = anyio.run(_idle_cpu, addr, pid, n, args.window)
                results.setdefault((n, v), []).append(pct)
                print(
                    f"  round {r + 1}: {n} idle sessions, idle poll {v} ms: {pct:.2f} % of a core",
                    flush=True,
                )
    metrics = [
        metric(
            f"idle.sessions_{n}.poll_{v}ms.cpu_percent",
            "% of a core",
            vals,
            description=f"server CPU with {n} idle sessions, idle poll wait {v} ms",
        )
        for (n, v), vals in results.items()
    ]
    params: dict[str, Any] = {
        "sessions": args.sessions,
        "idle_poll_ms": args.idle_poll_ms,
        "window_s": args.window,
        "interleaved": True,
        "load_average_by_point": " | ".join(loads),
    }
    doc = results_document(
        "idle-sessions",
        metrics,
        runs=args.rounds,
        parameters=params,
        description="Server binding CPU while sessions sit idle.",
    )
    print_results(doc)
    if args.json:
        write_results(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
