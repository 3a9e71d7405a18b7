"""``vllm-nnrp bench soak``: 10,000 operations through the real adapter handler and NNRP server
binding over loopback TCP, with the server's resident memory sampled over time.

It owns a deterministic synthetic backend (vLLM-shaped chunks, no engine: the soak measures
the adapter and the wire, not generation), the operation mix (streaming text, tool calls,
non-streaming, malformed, cancelled), the exact per-operation event check (lost, duplicated
and misordered events), RSS sampling, and the verdict "RSS flat within ±10 % after warm-up".

The server (adapter, binding, backend) runs in this process and is what the RSS figures are
about; the client sessions run in a child process (``--drive``) over 127.0.0.1, so client
bookkeeping is not counted as server memory (``--in-process`` puts both in one process, as
the first version of this benchmark did). The warm-up point is the first sample at or past
``--warmup`` operations; the baseline is the RSS of that sample and the deviation is the
largest ``|rss - baseline| / baseline`` of every later sample, up to the last one (taken
after the client closed its sessions).

To say where any growth is, every sample also carries Python's allocated block count and
glibc malloc's bytes in use and held free (native code included), and the Python object
counts by type are compared between the warm-up point and the "late" point (the first
sample at 90 % of the operations, sessions still open); ``--tracemalloc`` adds the Python
allocation sites that grew, ``--reconnect-every N`` replaces each client session after N
operations (session-scoped growth then shows as flat).

``vllm-nnrp bench soak --out reports/soak.json`` (or ``python -m
vllm_nnrp_adapter.benchmark.soak.soak``); exit 0 only when RSS is flat, no event was lost,
duplicated or misordered, every terminal was the expected one and nothing stayed open.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console

from vllm_nnrp_adapter.adapter.adapter import VllmNnrpAdapter
from vllm_nnrp_adapter.launch.settings import default_manifest_path
from vllm_nnrp_adapter.nnrp_server import NnrpServer
from vllm_nnrp_adapter.observability.observability import Recorder
from vllm_nnrp_adapter.profile.profile import load_manifest_document

from ..lib.results import BENCH_LOAD, BENCH_SOAK, write_results
from .backend import TOKENS, SyntheticBackend
from .memory import _LIBC, _malloc, _mib, _rss, object_census
from .mix import (
    _classify,
    _drive,
    _envelope,
    _expected,
    _key,
    _kind,
)
from .report import _print, _verdict
from .results import results_for_gate

# SyntheticBackend and the mix's helpers are read from here by the tests
__all__ = ["SyntheticBackend", "_classify", "_envelope", "_expected", "_key", "_kind",
           "build_parser", "main"]


def _manifest() -> dict[str, Any]:
    return load_manifest_document(default_manifest_path())


async def _soak(args: argparse.Namespace) -> dict[str, Any]:
    tracing = None
    if args.tracemalloc:
        tracemalloc.start(6)
        tracing = tracemalloc
    backend = SyntheticBackend(args.tokens)
    recorder = Recorder()
    adapter = VllmNnrpAdapter(backend, _manifest(), recorder=recorder)
    samples: list[dict[str, Any]] = []
    marks: dict[str, Any] = {}
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    async with NnrpServer(adapter.handle, "127.0.0.1:0") as server:

        def sample() -> dict[str, Any]:
            s = {
                "t_s": round(time.perf_counter() - t0, 2),
                "operations": server.stats["operations"],
                "rss_mib": _mib(_rss()),
                "py_blocks": sys.getallocatedblocks(),
            }
            malloc = _malloc()
            if malloc is not None:
                s["malloc_in_use_mib"], s["malloc_free_held_mib"] = map(_mib, malloc)
            samples.append(s)
            return s

        async def sampler() -> None:
            while True:
                s = sample()
                if "warmup" not in marks and s["operations"] >= args.warmup:
                    marks["warmup"] = len(samples) - 1
                    marks["census"] = object_census()
                    if tracing is not None:
                        marks["trace"] = tracing.take_snapshot()
                elif "late" not in marks and s["operations"] >= args.ops * 0.9:
                    # the sessions are still open here (what they hold is freed at close)
                    marks["late"] = len(samples) - 1
                    marks["census_late"] = object_census()
                    if tracing is not None and "trace" in marks:
                        diff = tracing.take_snapshot().compare_to(marks["trace"], "lineno")
                        marks["trace_top"] = [str(d) for d in diff[:10]]
                await anyio.sleep(args.sample_interval)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler)
            if args.in_process:
                client = await _drive(
                    server.address, args.ops, args.sessions, args.tokens, args.reconnect_every
                )
            else:
                client = await _drive_child(server.address, args)
            # bounded: whatever is still open after this is reported, not waited for
            with anyio.move_on_after(10):
                while (
                    backend.unfinished
                    or server._tasks
                    or any(s.ops for s in server.sessions.values())
                ):
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        open_ops = sum(len(s.ops) for s in server.sessions.values())
        open_tasks = len(server._tasks)
        unfinished = len(backend.unfinished)
        in_flight = recorder.snapshot()["in_flight"]
        census_end = object_census()
        final = sample()
        trimmed = None
        if _LIBC is not None:
            _LIBC.malloc_trim(0)  # what the allocator keeps but no longer uses goes back
            trimmed = _mib(_rss())
        trace_top: list[str] = marks.get("trace_top", [])
        if tracing is not None:
            tracing.stop()
        server_ops = server.stats["operations"]
    load_end = os.getloadavg()
    return _verdict(
        args,
        client,
        samples,
        marks,
        final,
        census_end,
        trace_top,
        {
            "server_operations": server_ops,
            "open_operations": open_ops,
            "open_handler_tasks": open_tasks,
            "unfinished_backend_requests": unfinished,
            "recorder_in_flight": in_flight,
            "rss_after_malloc_trim_mib": trimmed,
            "load_average_start": [round(x, 2) for x in load_start],
            "load_average_end": [round(x, 2) for x in load_end],
        },
    )


async def _drive_child(address: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "vllm_nnrp_adapter.benchmark.soak.soak",
        "--drive",
        address,
        "--ops",
        str(args.ops),
        "--sessions",
        str(args.sessions),
        "--tokens",
        str(args.tokens),
        "--reconnect-every",
        str(args.reconnect_every),
    ]
    # bounded: 30 s per operation is the client's own limit; the whole run gets a generous cap
    limit = 120 + args.ops * 0.1
    with anyio.fail_after(limit):
        done = await anyio.run_process(cmd, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"soak driver exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    # the driver (this module's --drive) prints its summary object as its last line
    summary: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return summary


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vllm-nnrp bench soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=TOKENS, help="chunks per synthetic stream")
    parser.add_argument(
        "--reconnect-every",
        type=int,
        default=0,
        metavar="N",
        help="replace each client session after N operations (0: one session each throughout)",
    )
    parser.add_argument("--warmup", type=int, default=1_000, help="operations before RSS is judged")
    parser.add_argument(
        "--sample-interval", type=float, default=0.25, help="seconds between RSS samples"
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the client sessions in this process too (RSS then counts both)",
    )
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="also record the Python allocation sites that grew (slow)",
    )
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument(
        "--results",
        type=Path,
        help="also write the run as a benchmark-results document here, for the release gate",
    )
    parser.add_argument(
        "--name",
        choices=(BENCH_SOAK, BENCH_LOAD),
        default=BENCH_SOAK,
        help="the document's name: soak (RSS judged too) or load (events judged)",
    )
    parser.add_argument("--drive", metavar="ADDRESS", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 256 or args.tokens < 2 or args.reconnect_every < 0:
        parser.error("--sessions must be 1..256, --tokens at least 2, --reconnect-every ≥ 0")
    if args.drive:
        host = args.drive.rsplit(":", 1)[0]
        if host not in ("127.0.0.1", "localhost", "[::1]"):
            parser.error("the soak driver only talks to loopback")
        doc = anyio.run(
            _drive,
            args.drive,
            args.ops,
            args.sessions,
            args.tokens,
            args.reconnect_every,
            backend="asyncio",
        )
        print(json.dumps(doc))
        return 0
    if args.ops <= args.warmup:
        parser.error("--ops must exceed --warmup")
    doc = anyio.run(_soak, args, backend="asyncio")
    _print(doc, Console(highlight=False))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    if args.results:
        write_results(results_for_gate(doc, args.name), args.results)
    rss_judged = args.name == BENCH_SOAK
    return 0 if doc["clean"] and (doc["flat_within_10_percent"] or not rss_judged) else 1


if __name__ == "__main__":
    raise SystemExit(main())
