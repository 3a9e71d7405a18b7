"""``vllm-nnrp bench hotpath``: where the serving process's CPU goes per generated token.

Owns the profile behind docs/performance.md. It starts the adapter (and, with
``--path both``, vLLM's own HTTP server on the same engine flags, one after the other),
drives ``--concurrency`` closed-loop streaming chats (short prompt, greedy, ``ignore_eos``,
32 tokens) from this process, or with ``--rate R`` starts R chats a second whatever the
answers do (open loop: both servers then stream the same tokens/s, so per-second costs weigh
the same per token on both), samples the serving process with py-spy (PyPI ``py-spy``, ``--threads``) and reads each
of its threads' CPU seconds from ``/proc`` over the same window. py-spy's own idle
detection is no measure of CPU here (it counted threads blocked in nnrp-py's native accept
and poll as busy, and its ``--gil`` mode reported the GIL held 190 % of the time), so each
thread's exact CPU is shared among the categories of its samples, waits dropped. Each sampled stack is given to
the *deepest* frame that matches a category (:data:`CATEGORIES`), so ``json.loads`` called
by the backend's SSE parser counts as SSE parsing, not as JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess
from vllm_nnrp_adapter.launch.embedded import (
    EMBEDDED_ENGINE_ARGS,
    TINY_MODEL_NAME,
    ConformanceSetupError,
    tiny_model,
    vllm_python,
)
from vllm_nnrp_adapter.profile.policy import NEWEST_TESTED

from ..lib.streams import PROMPT, load_average
from ..parity.http_sse import HttpServer, RequestSample
from ..parity.run import HttpPath, LeanPath, NnrpPath
from .categories import (
    CATEGORIES,
    NATIVE,
    OTHER,
    attribute,
    by_thread,
    categorise,
    parse_raw,
    shares,
)
from .threads import per_token_by_pool, pool_table, read_threads

# the attribution is categories.py's; the tests read it from here too
__all__ = [
    "CATEGORIES",
    "NATIVE",
    "OTHER",
    "attribute",
    "by_thread",
    "categorise",
    "main",
    "parse_raw",
    "shares",
]

RATE = 200  # py-spy samples per second
LOAD_MARGIN_S = 12.0


async def _drive(
    path: Any, concurrency: int, seconds: float, rate: float | None = None
) -> list[RequestSample]:
    """Closed loop (``concurrency`` workers back to back) or, with ``rate``, open loop: one
    chat started every 1/rate s, at most ``concurrency`` in flight, each on a free worker
    (an HTTP connection carries one request at a time)."""
    samples: list[RequestSample] = []
    one = path.one(PROMPT)
    stop = time.monotonic() + seconds

    async def worker(w: int) -> None:
        while time.monotonic() < stop:
            samples.append(await one(w))

    limiter, free = anyio.CapacityLimiter(concurrency), list(range(concurrency))

    async def started() -> None:
        async with limiter:
            w = free.pop()
            try:
                samples.append(await one(w))
            finally:
                free.append(w)

    await path.open()
    try:
        for w in range(2):  # warm-up
            await one(w)
        samples.clear()
        async with anyio.create_task_group() as tg:
            if rate is None:
                for w in range(concurrency):
                    tg.start_soon(worker, w)
                return samples
            t0, i = time.monotonic(), 0
            while time.monotonic() < stop:
                await anyio.sleep(max(0.0, t0 + i / rate - time.monotonic()))
                tg.start_soon(started)
                i += 1
    finally:
        await path.close()
    return samples


def profile_one(
    name: str,
    pid: int,
    path: Any,
    concurrency: int,
    seconds: float,
    out: Path,
    py_spy: str,
    rate: float | None = None,
) -> dict[str, Any]:
    """Load the server at ``pid`` and sample it for ``seconds`` in the middle of the load."""
    raw = out / f"{name}.pyspy.txt"
    holder: dict[str, Any] = {}

    async def run() -> None:
        async with anyio.create_task_group() as tg:

            async def load() -> None:
                # py-spy takes a while to attach and to write: the load outlasts it
                holder["samples"] = await _drive(
                    path, concurrency, seconds + LOAD_MARGIN_S, rate
                )

            tg.start_soon(load)
            await anyio.sleep(2)  # past the warm-up, streams running
            holder["pools0"], t0 = read_threads(pid), time.perf_counter_ns()
            holder["load_average"] = load_average()
            spy = await anyio.run_process(
                [
                    py_spy,
                    "record",
                    "--pid",
                    str(pid),
                    "--duration",
                    str(int(seconds)),
                    "--format",
                    "raw",
                    "--nolineno",
                    "--threads",
                    "--rate",
                    str(RATE),
                    "--output",
                    str(raw),
                ],
                check=False,
            )
            holder["pools1"], t1 = read_threads(pid), time.perf_counter_ns()
            holder["window"] = (t0, t1)
            holder["spy_rc"] = spy.returncode
            holder["spy_err"] = spy.stderr.decode(errors="replace")[-2000:]
            # threads that ended in the window are lost; the process total is exact
            before = holder["pools0"]
            holder["cpu_by_tid"] = {t: r.cpu_s - (before[t].cpu_s if t in before else 0.0)
                                    for t, r in holder["pools1"].items()}

    anyio.run(run)
    samples: list[RequestSample] = holder["samples"]
    ok = [s for s in samples if not s.error and s.content_ns]
    t0, t1 = holder["window"]
    # tokens streamed inside the CPU window: content chunks received in it (one token each)
    window_tokens = sum(1 for s in ok for t in s.content_ns if t0 <= t <= t1)
    window_s = (t1 - t0) / 1e9
    if holder["spy_rc"] != 0 or not raw.is_file():
        raise RuntimeError(f"py-spy failed ({holder['spy_rc']}): {holder['spy_err']}")
    threads = by_thread(parse_raw(raw.read_text(encoding="utf-8", errors="replace")))
    cats, names = attribute(holder["cpu_by_tid"], threads, window_tokens)
    cpu_s = sum(holder["cpu_by_tid"].values())
    return {
        "path": name,
        "concurrency": concurrency,
        "rate_per_s": rate,
        "requests": len(samples),
        "errors": len(samples) - len(ok),
        "tokens_per_s": window_tokens / window_s if window_s else 0.0,
        "cpu_s": cpu_s,
        "window_s": window_s,
        "cpu_per_token_us": cpu_s / window_tokens * 1e6 if window_tokens else 0.0,
        "load_average": holder["load_average"],
        "us_per_token_by_category": cats,
        "us_per_token_by_thread": names,
        "thread_pools": per_token_by_pool(
            holder["pools0"],
            holder["pools1"],
            window_tokens,
            {tid: name for tid, (name, _c) in threads.items()},
        ),
        "rate_hz": RATE,
        "raw": str(raw),
    }


def table(result: Mapping[str, Any]) -> str:
    """Markdown tables: µs of CPU per token by category, then by thread."""
    total = result["cpu_per_token_us"] or 1.0
    lines = [
        f"**{result['path']}**, c={result['concurrency']}"
        + (f", {result['rate_per_s']:g} requests/s" if result.get("rate_per_s") else "")
        + f": {result['tokens_per_s']:.0f} tokens/s, "
        f"{result['cpu_per_token_us']:.0f} µs CPU per token (serving process), "
        f"load average {result['load_average']}",
        "",
        "| category | µs per token | share |",
        "|---|---|---|",
    ]
    for cat, us in result["us_per_token_by_category"].items():
        lines.append(f"| {cat} | {us:.0f} | {us / total * 100:.1f} % |")
    lines += ["", "| thread | µs per token |", "|---|---|"]
    for name, us in result["us_per_token_by_thread"].items():
        if us >= 0.5:
            lines.append(f"| {name} | {us:.0f} |")
    if result.get("thread_pools"):
        lines += ["", pool_table(result["thread_pools"])]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp bench hotpath",
        description="Profile the serving process (py-spy) under concurrent streaming load and "
        "attribute its CPU per token to categories.",
    )
    p.add_argument("--vllm-version", default=None)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--path", choices=("nnrp", "http", "both"), default="nnrp")
    p.add_argument("--adapter-arg", action="append", default=[])
    p.add_argument(
        "--rate",
        type=float,
        default=None,
        help="open loop: start this many chats a second on both paths (same tokens/s)",
    )
    p.add_argument(
        "--client",
        choices=("lean", "suite"),
        default="lean",
        help="NNRP client (one session): the lean one (default) or the suite's",
    )
    p.add_argument("--transport", choices=("tcp", "ipc"), default="tcp",
                   help="the NNRP path's transport: loopback TCP, or ipc:// (a Unix socket)")
    p.add_argument("--out", type=Path, default=Path("artifacts/hotpath"))
    args = p.parse_args(list(argv))
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(py_spy).is_file():
        print(
            "vllm-nnrp bench hotpath: py-spy is not installed (pip install py-spy)", file=sys.stderr
        )
        return 2
    if args.concurrency < 1 or args.seconds < 1:
        p.error("--concurrency and --seconds must be at least 1")
    if args.rate is not None and args.rate <= 0:
        p.error("--rate must be positive")

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        python = vllm_python(args.vllm_version or NEWEST_TESTED, build=False)
        model_dir = tiny_model(python)
        if args.path in ("nnrp", "both"):
            ipc = args.transport == "ipc"
            # a short socket path (a Unix socket's is limited to ~107 bytes)
            listen = f"ipc://{tempfile.mkdtemp(prefix='nnrp-hotpath-')}/nnrp.sock" if ipc \
                else "127.0.0.1:0"
            with AdapterProcess(
                python, model_dir, extra_args=tuple(args.adapter_arg),
                log_path=out / "adapter.log", listen=listen,
            ) as adapter:
                assert adapter.pid is not None
                path: LeanPath | NnrpPath = (
                    LeanPath(adapter.address, TINY_MODEL_NAME, 1)
                    if args.client == "lean"
                    else NnrpPath(adapter.address, TINY_MODEL_NAME, 1)
                )
                results.append(
                    profile_one(
                        "nnrp_ipc" if ipc else "nnrp",
                        adapter.pid,
                        path,
                        args.concurrency,
                        args.seconds,
                        out,
                        py_spy,
                        args.rate,
                    )
                )
        if args.path in ("http", "both"):
            with HttpServer(
                python, model_dir, EMBEDDED_ENGINE_ARGS, out / "http-server.log"
            ) as srv:
                assert srv.pid is not None
                hpath = HttpPath(srv.port, TINY_MODEL_NAME)
                results.append(
                    profile_one(
                        "http",
                        srv.pid,
                        hpath,
                        args.concurrency,
                        args.seconds,
                        out,
                        py_spy,
                        args.rate,
                    )
                )
    except (
        ConformanceSetupError,
        OSError,
        RuntimeError,
        ValueError,
        subprocess.SubprocessError,
    ) as exc:
        print(f"vllm-nnrp bench hotpath: {exc}", file=sys.stderr)
        return 2
    for r in results:
        print(table(r))
        print()
    doc_path = out / "hotpath.json"
    doc_path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"  wrote {doc_path}")
    return 0
