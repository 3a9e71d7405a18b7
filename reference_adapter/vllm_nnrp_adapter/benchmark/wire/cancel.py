"""``vllm-nnrp bench cancel``: cancellation under fan-out, N fast streams on one session,
each cancelled mid-stream.

A server learns of a cancel only by polling (notes §3, §6.7), and a poll returns one frame,
so how a binding interleaves its sends and polls decides how long a cancel waits when many
streams share one session, and how many stale frames the client must drain meanwhile.
For N = 1, 4, 16 and 32 streams (the wire benchmark's handler, effectively endless, no pacing),
the client cancels each stream after ``--after`` events and measures, per cancel:

* cancel sent → the operation's terminal seen by the client (p50/p95/max),
* stale frames (3/4/105 polls) drained on its account,
* how the operation ended (the server's drop, or the client's local grace).

The server runs in its own process (``vllm-nnrp bench wire --serve ours``) over loopback TCP.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import anyio
from rich.console import Console
from rich.table import Table

from nnrp_conformance.client import NnrpClient

from ..lib.results import metric, write_results
from ..lib.results import results_document as build
from .servers import envelope
from .wire import pct, server_process

FANOUTS = (1, 4, 16, 32)
ENDLESS = 10_000_000  # events asked of the handler: far more than any run lets it send


async def _round(client: NnrpClient, n: int, after: int) -> list[dict[str, Any]]:
    ops = [await client.submit(envelope(ENDLESS), timeout=60) for _ in range(n)]

    async def drive(op: Any) -> None:
        seen = 0
        async for ev in op:
            if ev.kind == "partial":
                seen += 1
                if seen == after:
                    await op.cancel()

    async with anyio.create_task_group() as tg:
        for op in ops:
            tg.start_soon(drive, op)
    out = []
    for op in ops:
        term = op.terminal
        sent = op.cancel_sent_at_ns
        out.append(
            {
                "cancel_to_terminal_ms": (
                    (term.received_at_ns - sent) / 1e6
                    if term is not None and sent and term.received_at_ns
                    else None
                ),
                "stale": op.stale_after_cancel,
                "ended": f"{term.delivery}/{term.outcome}" if term else "none",
            }
        )
    return out


async def measure(target: str, fanouts: Sequence[int], rounds: int, after: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    client = await NnrpClient.connect(target)
    try:
        for n in fanouts:
            samples: list[dict[str, Any]] = []
            for _ in range(rounds):
                samples += await _round(client, n, after)
            lat = [s["cancel_to_terminal_ms"] for s in samples if s["cancel_to_terminal_ms"]]
            stale = [s["stale"] for s in samples]
            results[str(n)] = {
                "cancel_to_terminal_ms": lat,
                "stale": stale,
                "ended": dict(Counter(s["ended"] for s in samples)),
                "broken": client._broken,
            }
    finally:
        await client.aclose()
    return results


def render(results: dict[str, Any], console: Console) -> None:
    table = Table(
        title="cancel under fan-out (one session, server cross-process)", title_justify="left"
    )
    for col in (
        "streams",
        "cancels",
        "cancel→terminal p50 ms",
        "p95 ms",
        "max ms",
        "stale frames p50 / max",
        "ended",
    ):
        table.add_column(col, justify="left" if col == "ended" else "right")
    for n, r in results.items():
        lat, stale = r["cancel_to_terminal_ms"], r["stale"]
        table.add_row(
            n,
            str(len(stale)),
            f"{pct(lat, 50):.1f}",
            f"{pct(lat, 95):.1f}",
            f"{max(lat, default=float('nan')):.1f}",
            f"{pct(stale, 50):.0f} / {max(stale, default=0)}",
            ", ".join(f"{k} {v}" for k, v in sorted(r["ended"].items()))
            + (f"; BROKEN: {r['broken']}" if r["broken"] else ""),
        )
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vllm-nnrp bench cancel", description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="cancel-benchmark.json", help="where to write the results")
    ap.add_argument("--rounds", type=int, default=8, help="rounds per fan-out (default 8)")
    ap.add_argument("--after", type=int, default=20, help="events seen before each cancel")
    ap.add_argument(
        "--fanout",
        type=int,
        action="append",
        help=f"streams per round (repeatable; default {', '.join(map(str, FANOUTS))})",
    )
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.after < 1 or any(n < 1 for n in args.fanout or ()):
        ap.error("--rounds, --after and --fanout must be at least 1")
    fanouts = args.fanout or list(FANOUTS)
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 140)
    with server_process("ours") as (addr, _pid):
        t = time.monotonic()
        results = anyio.run(measure, addr, fanouts, args.rounds, args.after)
        wall = time.monotonic() - t
    render(results, console)
    metrics = []
    for n, r in results.items():
        if r["cancel_to_terminal_ms"]:
            metrics.append(
                metric(
                    f"cancel_fanout.{n}.cancel_to_terminal",
                    "ms",
                    r["cancel_to_terminal_ms"],
                    description=f"cancel sent → terminal seen, {n} concurrent streams",
                )
            )
        metrics.append(
            metric(
                f"cancel_fanout.{n}.stale_frames",
                "count",
                [float(x) for x in r["stale"]],
                description=f"stale frames drained per cancel, {n} concurrent streams",
            )
        )
    doc = build(
        "cancel_fanout",
        metrics,
        runs=args.rounds,
        parameters={"after_events": args.after, "rounds": args.rounds},
        notes=[
            f"ended: {n}: {r['ended']}"
            + (f"; session broken: {r['broken']}" if r["broken"] else "")
            for n, r in results.items()
        ]
        + [f"wall {wall:.1f} s; load average after: {os.getloadavg()}"],
        description="cancel latency with N fast streams sharing one session",
    )
    write_results(doc, args.json)
    console.print(f"load average after the run: {os.getloadavg()}; results written to {args.json}")
    broken = [n for n, r in results.items() if r["broken"]]
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
