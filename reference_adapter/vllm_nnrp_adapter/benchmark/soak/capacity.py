"""``vllm-nnrp bench capacity``: the most concurrent streaming sessions the adapter serves
without an error, on real vLLM.

Owns one measurement. For each step N (``--sessions 8,32,64,128,256``), N NNRP sessions are
opened to the adapter, one client connection each, as N independent users would; then every
session streams ``--answers`` chat answers back to back, all sessions at once, so N answers
are in flight together. Everything that is not a clean answer is an error of the step, counted
by kind:

* a session that could not be opened (refused, timed out),
* an operation that raised on the client (submit refused, timeout),
* a terminal other than success, an answer with no text delta,
* a wire finding of the client on the operation (e.g. a frame after its terminal).

Per step the document records the errors, aggregate tokens/s, TTFT p50/p95/max, the adapter
process's CPU per 1,000 tokens and the engine's (read from ``/proc``: the clients run in this
process, so their CPU is not in it), and the adapter's threads and resident memory at the end
of the step. Steps stop at the first N with an error (``--keep-going`` runs them all); the
result names the largest N served without one (``capacity.max_sessions_without_errors``).
Between steps the engine is left to drain (no unfinished request) and the sessions are closed.

The adapter is started on the cached vLLM venv (``--vllm-version``), or measured where it
already serves (``--target HOST:PORT``, no CPU figures then: its pid is not ours).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient, NnrpClientError
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess
from vllm_nnrp_adapter.launch.embedded import tiny_model, vllm_python
from vllm_nnrp_adapter.observability.proc_cpu import TreeCpu, rss_bytes, thread_count, tree_cpu
from vllm_nnrp_adapter.profile.policy import NEWEST_TESTED

from ..lib.results import (
    add_adapter_choice,
    median,
    metric,
    percentile,
    print_results,
    results_document,
    write_results,
)
from ..lib.streams import chat_envelope, engine_info, engine_settled, load_average, run_stream

__all__ = ["main"]

STEPS = (8, 32, 64, 128, 256)
MAX_TOKENS = 32
#: how long one answer may take, submit to terminal, before it counts as an error
ANSWER_TIMEOUT_S = 600.0
#: sessions opened at once while a step connects (the accept loop is not what is measured)
CONNECT_BATCH = 16


@dataclass
class Step:
    """What one step (N sessions at once) produced."""

    sessions: int
    errors: Counter[str] = field(default_factory=Counter)
    #: first error message of each kind, to say what happened
    examples: dict[str, str] = field(default_factory=dict)
    ttft_ms: list[float] = field(default_factory=list)
    tokens: int = 0
    answers: int = 0
    wall_s: float = 0.0
    server: TreeCpu | None = None
    threads: int | None = None
    rss_bytes: int | None = None
    load_average: str = ""

    def error(self, kind: str, message: str) -> None:
        self.errors[kind] += 1
        self.examples.setdefault(kind, message)

    @property
    def failed(self) -> int:
        return sum(self.errors.values())


async def _session(
    client: NnrpClient,
    step: Step,
    answers: int,
    request: Callable[[], dict[str, Any]],
    timeout: float,
) -> None:
    for _ in range(answers):
        env = request()
        try:
            s = await run_stream(client, env, timeout=timeout)
        except (NnrpClientError, TimeoutError) as exc:
            step.error("operation_raised", f"{type(exc).__name__}: {exc}")
            continue
        findings = sorted({str(f.get("rule")) for f in (s.op.wire_findings or [])})
        if s.outcome != contract.TERMINAL_SUCCESS:
            step.error(f"terminal_{s.outcome}", f"terminal {s.outcome} ({s.delivery})")
        elif s.ttft_ns is None:
            step.error("no_text", "a successful answer without a text delta")
        elif findings:
            step.error("wire_finding", ", ".join(findings))
        else:
            step.answers += 1
            step.ttft_ms.append(s.ttft_ns / 1e6)
            step.tokens += s.output_tokens or len(s.text_ns)


async def _connect(address: str, n: int, step: Step) -> list[NnrpClient]:
    clients: list[NnrpClient] = []

    async def one() -> None:
        try:
            clients.append(await NnrpClient.connect(address))
        except (NnrpClientError, OSError, TimeoutError) as exc:
            step.error("session_not_opened", f"{type(exc).__name__}: {exc}")

    for start in range(0, n, CONNECT_BATCH):
        async with anyio.create_task_group() as tg:
            for _ in range(min(CONNECT_BATCH, n - start)):
                tg.start_soon(one)
    return clients



def chat_request(model: str | None) -> Callable[[], dict[str, Any]]:
    """The request every session streams: a greedy chat answer of MAX_TOKENS tokens."""
    return lambda: chat_envelope(max_tokens=MAX_TOKENS, model=model)


async def run_step(
    address: str,
    n: int,
    answers: int,
    request: Callable[[], dict[str, Any]],
    pid: int | None = None,
    timeout: float = ANSWER_TIMEOUT_S,
) -> Step:
    """Open ``n`` sessions, stream ``answers`` answers of ``request()`` on each, all at once,
    then close them; ``pid``, when given, is the serving process whose CPU is read; an answer
    not ended within ``timeout`` seconds is an error."""
    step = Step(sessions=n, load_average=load_average())
    clients = await _connect(address, n, step)
    try:
        before = tree_cpu(pid) if pid else None
        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(_session, client, step, answers, request, timeout)
        step.wall_s = time.perf_counter() - t0
        if pid:
            assert before is not None
            step.server = tree_cpu(pid).since(before)
            step.threads, step.rss_bytes = thread_count(pid), rss_bytes(pid)
    finally:
        for client in clients:
            with anyio.move_on_after(10):
                await client.aclose()
    return step


def _per_1k(seconds: float, tokens: int) -> float | None:
    return seconds * 1000.0 / tokens if tokens else None


def build_document(
    steps: Sequence[Step], answers: int, vllm_version: str, context: dict[str, Any]
) -> dict[str, Any]:
    clean = [s.sessions for s in steps if not s.failed]
    first_failed = next((s for s in steps if s.failed), None)
    best = max((n for n in clean if first_failed is None or n < first_failed.sessions), default=0)
    metrics = [
        metric(
            "capacity.max_sessions_without_errors",
            "sessions",
            [best],
            description="the largest step below the first step with an error",
        )
    ]
    params: dict[str, Any] = {
        "steps": ",".join(str(s.sessions) for s in steps),
        "answers_per_session": answers,
        "max_tokens": MAX_TOKENS,
        "first_step_with_errors": first_failed.sessions if first_failed else None,
        **context,
    }
    notes = []
    for s in steps:
        n = s.sessions
        params[f"sessions_{n}.errors"] = s.failed
        params[f"sessions_{n}.answers"] = s.answers
        params[f"sessions_{n}.tokens_per_s"] = round(s.tokens / s.wall_s, 1) if s.wall_s else 0
        params[f"sessions_{n}.load_average"] = s.load_average
        if s.threads is not None:
            params[f"sessions_{n}.adapter_threads"] = s.threads
            params[f"sessions_{n}.adapter_rss_mib"] = round((s.rss_bytes or 0) / 2**20, 1)
        if s.server is not None:
            params[f"sessions_{n}.adapter_cpu_s_per_1k_tokens"] = _per_1k(
                s.server.serving, s.tokens
            )
            params[f"sessions_{n}.engine_cpu_s_per_1k_tokens"] = _per_1k(s.server.engine, s.tokens)
        if s.ttft_ms:
            metrics.append(
                metric(
                    f"capacity.sessions_{n}.ttft_ms",
                    "ms",
                    s.ttft_ms,
                    keep_values=False,
                    description=f"submit → first text delta, {n} sessions streaming at once",
                )
            )
        if s.failed:
            kinds = "; ".join(f"{k} ×{v} (first: {s.examples[k]})" for k, v in s.errors.items())
            notes.append(f"{n} sessions: {s.failed} error(s): {kinds}")
    return results_document(
        "capacity",
        metrics,
        runs=1,
        vllm=vllm_version,
        parameters=params,
        notes=notes or ["no step had an error"],
        description="Concurrent streaming sessions on real vLLM through the adapter, one client "
        "connection per session, every session streaming at once.",
    )


def _line(s: Step) -> str:
    ttft = (
        f"TTFT p50 {median(s.ttft_ms):.0f} ms, p95 {percentile(s.ttft_ms, 95):.0f} ms"
        if s.ttft_ms
        else "no answer"
    )
    cpu = ""
    if s.server is not None and s.tokens:
        cpu = (
            f", adapter {_per_1k(s.server.serving, s.tokens):.2f} CPU s/1k tokens, "
            f"{s.threads} threads, {(s.rss_bytes or 0) / 2**20:.0f} MiB"
        )
    rate = s.tokens / s.wall_s if s.wall_s else 0.0
    return (
        f"  {s.sessions:>4} sessions: {s.answers} answers, {s.failed} errors, "
        f"{rate:.0f} tokens/s, {ttft}{cpu} (load {s.load_average})"
    )


@dataclass
class Options:
    steps: Sequence[int]
    answers: int
    keep_going: bool
    model: str | None
    answer_timeout: float
    json: Path | None


def record(opts: Options, done: Sequence[Step], context: dict[str, Any]) -> dict[str, Any]:
    """The document of the steps done so far, written to ``--json`` (after every step, so an
    interrupted run keeps what it measured)."""
    doc = build_document(done, opts.answers, str(context.get("vllm_version", "unknown")), context)
    if opts.json:
        write_results(doc, opts.json)
    return doc


async def _bench(
    address: str, opts: Options, pid: int | None, context: dict[str, Any], done: list[Step]
) -> None:
    probe = await NnrpClient.connect(address, default_timeout=120.0)
    try:
        info = await engine_info(probe)
        context["vllm_version"] = str(
            info.get("vllm_version") or context.get("vllm_version") or "unknown"
        )
        # warm-up: the first answers pay vLLM's start-up costs
        for _ in range(2):
            await run_stream(probe, chat_envelope(max_tokens=MAX_TOKENS, model=opts.model))
        for n in opts.steps:
            step = await run_step(
                address, n, opts.answers, chat_request(opts.model), pid, opts.answer_timeout
            )
            left = await engine_settled(probe, wait_s=60.0)
            if left > 0:
                step.error("engine_not_drained", f"{left} request(s) left in the engine")
            done.append(step)
            print(_line(step), flush=True)
            record(opts, done, context)
            if step.failed and not opts.keep_going:
                break
    finally:
        with anyio.move_on_after(10):
            await probe.aclose()


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp bench capacity",
        description="The most concurrent streaming sessions the adapter serves without an "
        "error, on real vLLM (tiny local model).",
    )
    add_adapter_choice(p)
    p.add_argument("--sessions", default=",".join(map(str, STEPS)), help="steps, ascending")
    p.add_argument("--answers", type=int, default=2, help="answers streamed by each session")
    p.add_argument(
        "--answer-timeout",
        type=float,
        default=ANSWER_TIMEOUT_S,
        help="seconds an answer may take, submit to terminal, before it is an error "
        f"(default {ANSWER_TIMEOUT_S:.0f})",
    )
    p.add_argument("--keep-going", action="store_true", help="run every step despite errors")
    p.add_argument(
        "--adapter-arg",
        action="append",
        default=[],
        help="extra `vllm-nnrp serve` flag for the adapter started here (repeatable)",
    )
    p.add_argument("--model", default=None, help="model id (default: the adapter's first)")
    p.add_argument("--json", type=Path, default=None, help="write the results document here")
    args = p.parse_args(list(argv))
    try:
        steps = [int(x) for x in args.sessions.split(",")]
    except ValueError:
        p.error(f"--sessions takes comma-separated integers, not {args.sessions!r}")
    if not steps or any(n < 1 for n in steps) or steps != sorted(steps):
        p.error(f"--sessions takes ascending positive integers, not {args.sessions!r}")
    if args.answers < 1:
        p.error("--answers must be at least 1")
    if args.answer_timeout <= 0:
        p.error("--answer-timeout must be positive")
    opts = Options(steps, args.answers, args.keep_going, args.model, args.answer_timeout, args.json)
    if args.target and args.adapter_arg:
        p.error("--adapter-arg applies to an adapter started here, not to --target")
    context: dict[str, Any] = {
        "load_average_start": load_average(),
        "answer_timeout_s": args.answer_timeout,
        "adapter_args": " ".join(args.adapter_arg),
    }
    done: list[Step] = []
    try:
        if args.target:
            context["adapter"] = "external"
            anyio.run(_bench, args.target, opts, None, context, done)
        else:

            version = args.vllm_version or NEWEST_TESTED
            python = vllm_python(version, build=False)
            print(f"==> starting the adapter on vLLM {version}", flush=True)
            with AdapterProcess(
                python, tiny_model(python), extra_args=tuple(args.adapter_arg)
            ) as adapter:
                context["adapter"] = "self-started"
                anyio.run(_bench, adapter.address, opts, adapter.pid, context, done)
    except KeyboardInterrupt:
        print(
            f"vllm-nnrp bench capacity: interrupted; {len(done)} step(s) done"
            + (f", recorded in {args.json}" if args.json and done else ""),
            file=sys.stderr,
        )
        return 130
    except (NnrpClientError, OSError, RuntimeError, ValueError) as exc:
        print(f"vllm-nnrp bench capacity: {exc}", file=sys.stderr)
        return 2
    context["load_average_end"] = load_average()
    doc = record(opts, done, context)
    print_results(doc)
    best = doc["metrics"][0]["median"]
    print(f"  largest step without an error: {best:.0f} sessions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
