"""``vllm-nnrp bench parity``: vLLM's own OpenAI HTTP/SSE server against the adapter over NNRP.

Owns the interleaved comparison. Both servers run for the whole benchmark on the same vLLM
version, engine flags, tiny model, prompts and sampling (greedy, ``ignore_eos``,
``max_tokens`` 32): ``python -m vllm.entrypoints.openai.api_server`` (what ``vllm serve``
runs; client in :mod:`.http_sse`) and the adapter (the suite's NNRP client). Each *round*
measures every workload (short and long prompt × concurrency 1, 8 and 32) on both paths,
back to back, the path that goes first alternating from round to round (HTTP, NNRP | NNRP,
HTTP | ...), so drift in the machine's load falls on both alike.

Per path and workload it reports aggregate tokens/s per round, TTFT and inter-token gap
(p50/p95 of every request), and the CPU seconds per 1,000 generated tokens of the serving
process (the API server, or the adapter) and of its engine (the engine-core process), read
from ``/proc`` (:mod:`...observability.proc_cpu`) around each round. The clients run in this process and
their CPU (``process_time``) is reported apart, never in the servers' figures; the idle
server's CPU during the other's round is reported too (what it takes from the machine).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console

from nnrp_conformance.client import NnrpClientError
from nnrp_conformance.gate.evidence import PARITY_ADAPTER_LOG, PARITY_HTTP_SERVER_LOG
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess
from vllm_nnrp_adapter.launch.embedded import (
    EMBEDDED_ENGINE_ARGS,
    TINY_MODEL_NAME,
    ConformanceSetupError,
    tiny_model,
    vllm_python,
)
from vllm_nnrp_adapter.profile.policy import NEWEST_TESTED

from ..lib.results import (
    BENCH_PARITY,
    print_results,
    write_results,
)
from ..lib.streams import PROMPT, load_average
from .facts import (
    CONCURRENCY,
    HTTP,
    HTTP_TPS,
    IPC_COLUMNS,
    MAX_TOKENS,
    NNRP,
    NNRP_COLUMNS,
    NNRP_TPS,
    PATHS,
    PER_STREAM,
    Workload,
)
from .http_sse import (
    ChunkedDecoder,
    HttpConnection,
    HttpServer,
    RequestSample,
    SseParser,
    content_of_chunk,
    http_stream,
)
from .report import build_document, print_summary, summarise, targets
from .run import (
    FULL,
    QUICK,
    HttpPath,
    Plan,
    RoundResult,
    long_prompt,
    measure,
    nnrp_path,
    round_order,
)

# what the tests and the hot-path profile read from here (defined in the pieces)
__all__ = [
    "HTTP",
    "HTTP_TPS",
    "NNRP",
    "NNRP_TPS",
    "ChunkedDecoder",
    "HttpConnection",
    "HttpServer",
    "Plan",
    "RequestSample",
    "RoundResult",
    "SseParser",
    "build_document",
    "content_of_chunk",
    "http_stream",
    "main",
    "round_order",
    "summarise",
    "targets",
]


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp bench parity",
        description="vLLM's own HTTP/SSE server vs the adapter over NNRP, same engine, "
        "interleaved rounds.",
    )
    p.add_argument("--vllm-version", default=None, help="cached vLLM venv (default current line)")
    p.add_argument("--quick", action="store_true", help="fewer samples (a few minutes)")
    p.add_argument("--rounds", type=int, default=None, help="override the plan's rounds")
    p.add_argument(
        "--paths",
        default=",".join(PATHS),
        help=f"comma-separated paths to measure (default all: {','.join(PATHS)}); "
        f"{HTTP} and {NNRP} are always measured",
    )
    p.add_argument(
        "--adapter-arg",
        action="append",
        default=[],
        help="extra `vllm-nnrp serve` flag for the adapter (repeatable)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder; writes OUT/bench/parity.json "
        "(default artifacts/bench-vllm/vllm-VERSION)",
    )
    args = p.parse_args(list(argv))
    if args.rounds is not None and args.rounds < 1:
        p.error("--rounds must be at least 1")
    wanted = {x.strip() for x in args.paths.split(",") if x.strip()}
    unknown = sorted(wanted - set(PATHS))
    if unknown:
        p.error(f"--paths: unknown {', '.join(unknown)} (known: {', '.join(PATHS)})")
    chosen = tuple(x for x in PATHS if x in wanted | {HTTP, NNRP})

    version = args.vllm_version or NEWEST_TESTED
    out = (args.out or Path(f"artifacts/bench-vllm/vllm-{version}")).resolve()
    plan = QUICK if args.quick else FULL
    if args.rounds:
        plan = Plan(args.rounds, plan.requests, plan.warmup)
    max_len = int(EMBEDDED_ENGINE_ARGS[EMBEDDED_ENGINE_ARGS.index("--max-model-len") + 1])
    try:
        python = vllm_python(version, build=False)
        model_dir = tiny_model(python)
        long_text, long_tokens = long_prompt(python, model_dir, max_len - MAX_TOKENS - 8)
        prompts = {"short": PROMPT, "long": long_text}
        parameters: dict[str, Any] = {
            "max_tokens": MAX_TOKENS,
            "max_model_len": max_len,
            "long_prompt_tokens": long_tokens,
            "concurrency": ",".join(str(c) for c in CONCURRENCY),
            **{f"c{c}_requests_per_round": n for c, n in plan.requests.items()},
            "rounds": plan.rounds,
            "quick": bool(args.quick),
            "interleaved": True,
            "order": "both servers up for the whole run; per round every workload on both "
            "paths back to back, the first path alternating: "
            + "; ".join(
                " then ".join(round_order(r, chosen)) for r in range(min(plan.rounds, 2))
            ),
            "paths": ",".join(chosen),
            **{
                f"{col}.client": f"{client}, "
                + ("one session per concurrent stream" if sess == PER_STREAM else "one session")
                + (", over ipc:// (the same adapter's second listener)"
                   if col in IPC_COLUMNS else "")
                for col, (client, sess) in NNRP_COLUMNS.items()
                if col in chosen
            },
            "gate_column": NNRP,
            "http_connections": max(CONCURRENCY),
            "adapter_args": " ".join(args.adapter_arg),
            "load_average_start": load_average(),
        }
        notes = [
            f"long prompt: {long_tokens} prompt tokens of max_model_len {max_len} "
            f"(minus max_tokens {MAX_TOKENS} and a margin of 8)",
            "client receive stamps: HTTP when the asyncio read returned, NNRP when "
            "the client's pump thread (lean or suite) polled the frame",
            f"the release gate's parity figures and the targets read the {NNRP!r} column: "
            "the lean client with one session per concurrent stream, what a user runs",
            "CPU: /proc/PID/stat user+system of the serving process (vLLM's API server, or "
            "the adapter) and of its descendants (the engine core), read around each round; "
            "both clients run in the benchmark process, whose CPU is reported apart",
        ]
        print(
            f"==> vLLM {version}: starting both servers (long prompt {long_tokens} tokens)",
            flush=True,
        )
        adapter_log, http_log = log_paths(out)
        # the ipc columns reach the same adapter through its second listener (a Unix socket)
        sock_dir = Path(tempfile.mkdtemp(prefix="nnrp-parity-"))
        also = (("--nnrp-also-listen", f"ipc://{sock_dir / 'nnrp.sock'}")
                if IPC_COLUMNS & set(chosen) else ())
        srv = HttpServer(python, model_dir, EMBEDDED_ENGINE_ARGS, http_log)
        adapter = AdapterProcess(python, model_dir, extra_args=(*args.adapter_arg, *also),
                                 log_path=adapter_log)
        with contextlib.ExitStack() as servers:
            servers.callback(srv.stop)
            servers.callback(adapter.stop)
            start_side_by_side(srv, adapter)
            parameters["servers_started"] = ("side by side: each start-up time was taken "
                                             "beside the other's")
            addresses = {name: str(adapter.info["also_address"]) if name in IPC_COLUMNS
                         else adapter.address for name in chosen if name != HTTP}
            parameters["http_start_s"] = round(srv.started_in_s or 0.0, 2)
            parameters["nnrp_start_s"] = round(adapter.started_in_s or 0.0, 2)
            vllm_version = str(adapter.info.get("vllm_version") or version)
            t0 = time.monotonic()
            measured = anyio.run(
                _measure_both,
                srv.port,
                srv.pid,
                addresses,
                adapter.pid,
                TINY_MODEL_NAME,
                prompts,
                plan,
                chosen,
            )
            print(f"    measured in {time.monotonic() - t0:.1f} s", flush=True)
        shutil.rmtree(sock_dir, ignore_errors=True)
        parameters["load_average_end"] = load_average()
        firsts = {
            (rr.path, w): rr.samples[0].text
            for w, rounds in measured.items()
            if w[1] == 1
            for rr in rounds
            if rr.samples
        }
        same = [
            firsts[(HTTP, w)] == firsts[(NNRP, w)]
            for (p_, w) in firsts
            if p_ == HTTP and (NNRP, w) in firsts
        ]
        parameters["same_content_c1"] = all(same) if same else None
        doc = build_document(
            measured, plan=plan, vllm_version=vllm_version, parameters=parameters, notes=notes
        )
    except (
        ConformanceSetupError,
        NnrpClientError,
        OSError,
        RuntimeError,
        ValueError,
        subprocess.SubprocessError,
    ) as exc:
        print(f"vllm-nnrp bench parity: {exc}", file=sys.stderr)
        return 2
    path = write_results(doc, out / "bench" / f"{BENCH_PARITY}.json")
    console = Console(width=160, highlight=False)
    print_results(doc, console)
    print_summary(doc, console)
    print(f"  wrote {path}")
    return 0


def start_side_by_side(srv: HttpServer, adapter: AdapterProcess) -> None:
    """Start both servers at once (each waits for its engine alone, and the measurement
    begins only once both are up): on 2 cores that saves a start-up, about 20 s, of a
    release run. The first start-up error is raised once both have returned."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="parity-http-start") as pool:
        http = pool.submit(srv.start)
        try:
            adapter.start()
        finally:
            wait([http])
        http.result()


def log_paths(out: Path) -> tuple[Path, Path]:
    """(adapter log, HTTP server log) of this benchmark's own servers in the folder ``out``.

    A release writes the parity run into the same ``vllm-<version>/`` folder as the suite
    run, whose adapter log must stay the one of the adapter the suite judged."""
    return out / PARITY_ADAPTER_LOG, out / PARITY_HTTP_SERVER_LOG


async def _measure_both(
    port: int,
    http_pid: int | None,
    addresses: Mapping[str, str],
    nnrp_pid: int | None,
    model: str,
    prompts: Mapping[str, str],
    plan: Plan,
    chosen: tuple[str, ...],
) -> dict[Workload, list[RoundResult]]:
    paths: dict[str, Any] = {
        name: HttpPath(port, model) if name == HTTP else nnrp_path(name, addresses[name], model)
        for name in chosen
    }
    try:
        for path in paths.values():
            await path.open()
        return await measure(
            paths,
            {name: http_pid if name == HTTP else nnrp_pid for name in chosen},
            prompts,
            plan,
            progress=lambda m: print(m, flush=True),
        )
    finally:
        for path in paths.values():
            await path.close()
