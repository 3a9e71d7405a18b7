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
from ``/proc`` (:mod:`.proc_cpu`) around each round. The clients run in this process and
their CPU (``process_time``) is reported apart, never in the servers' figures; the idle
server's CPU during the other's round is reported too (what it takes from the machine).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.table import Table

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient, NnrpClientError
from nnrp_conformance.gate.evidence import PARITY_ADAPTER_LOG, PARITY_HTTP_SERVER_LOG

from .common import (
    BENCH_PARITY,
    median,
    metric,
    percentile,
    print_results,
    ratio,
    required_metrics,
    results_document,
    run_concurrent,
    write_results,
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
from .proc_cpu import TreeCpu, tree_cpu
from .streams import PROMPT, chat_envelope, gaps_ms, load_average, run_stream

__all__ = [
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

NNRP_TPS, HTTP_TPS = required_metrics(BENCH_PARITY)
NNRP, HTTP = NNRP_TPS.split(".", 1)[0], HTTP_TPS.split(".", 1)[0]
PATHS = (HTTP, NNRP)
MAX_TOKENS = 32
LONG_UNIT = "one two three four five six seven eight nine ten "
CONCURRENCY = (1, 8, 32)

Workload = tuple[str, int]  # (prompt name, concurrency)


# --- the workload -------------------------------------------------------------------------------


def long_prompt(python: str, model_dir: Path, budget: int) -> tuple[str, int]:
    """The longest repetition of :data:`LONG_UNIT` whose chat prompt fits ``budget`` tokens."""
    from vllm_nnrp_adapter.conformance import engine_environment

    script = (
        "import json, sys\n"
        "from transformers import AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "unit, budget = sys.argv[2], int(sys.argv[3])\n"
        "def size(n):\n"
        "    ids = tok.apply_chat_template([{'role': 'user', 'content': unit * n}],\n"
        "                                  add_generation_prompt=True, tokenize=True)\n"
        "    ids = ids['input_ids'] if hasattr(ids, 'keys') else ids\n"
        "    return len(ids)\n"
        "lo, hi = 0, 1\n"
        "while size(hi) <= budget: lo, hi = hi, hi * 2\n"
        "while hi - lo > 1:\n"
        "    mid = (lo + hi) // 2\n"
        "    lo, hi = (mid, hi) if size(mid) <= budget else (lo, mid)\n"
        "print(json.dumps({'repeats': lo, 'tokens': size(lo)}))\n"
    )
    done = subprocess.run(
        [python, "-c", script, str(model_dir), LONG_UNIT, str(budget)],
        capture_output=True,
        text=True,
        timeout=300,
        env=engine_environment(python),
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"sizing the long prompt failed: {done.stderr[-2000:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return LONG_UNIT * int(found["repeats"]), int(found["tokens"])


@dataclass(frozen=True)
class Plan:
    rounds: int
    #: requests per round, by concurrency
    requests: Mapping[int, int]
    warmup: int = 4


QUICK = Plan(rounds=2, requests={1: 8, 8: 24, 32: 64}, warmup=2)
FULL = Plan(rounds=6, requests={1: 24, 8: 64, 32: 128})


def round_order(r: int) -> tuple[str, ...]:
    """The order the two paths run in round ``r``: alternating, so neither always goes first."""
    return PATHS if r % 2 == 0 else tuple(reversed(PATHS))


def http_body(model: str, content: str) -> dict[str, Any]:
    """The OpenAI body both servers get (the adapter adds ``include_usage`` itself)."""
    body = dict(chat_envelope(max_tokens=MAX_TOKENS, model=model, content=content)["body"])
    body["stream_options"] = {"include_usage": True}
    return body



async def _nnrp_one(client: NnrpClient, model: str, content: str) -> RequestSample:
    env = chat_envelope(max_tokens=MAX_TOKENS, model=model, content=content)
    started = time.perf_counter_ns()
    try:
        s = await run_stream(client, env)
    except (NnrpClientError, TimeoutError) as exc:
        # one failed sample, as on the HTTP side, never the end of the benchmark
        return RequestSample(started, error=f"{type(exc).__name__}: {exc}")
    text = "".join(
        ev.get("delta", "") for ev in s.events if ev.get("type") == contract.EV_OUTPUT_TEXT_DELTA
    )
    return RequestSample(
        s.submitted_ns,
        list(s.text_ns),
        s.terminal_ns,
        s.output_tokens,
        text,
        None if s.outcome == contract.TERMINAL_SUCCESS else f"terminal {s.outcome} ({s.delivery})",
    )


class NnrpPath:
    """The adapter's side: ``sessions`` NNRP clients (one session each); worker ``w`` uses
    client ``w % sessions``."""

    def __init__(self, address: str, model: str, sessions: int) -> None:
        self.address, self.model, self.sessions = address, model, sessions
        self.clients: list[NnrpClient] = []

    async def open(self) -> None:
        for _ in range(self.sessions):
            self.clients.append(await NnrpClient.connect(self.address, default_timeout=120.0))

    async def close(self) -> None:
        for client in self.clients:
            with anyio.move_on_after(10):
                await client.aclose()

    def one(self, content: str) -> Callable[[int], Awaitable[RequestSample]]:
        return lambda w: _nnrp_one(self.clients[w % len(self.clients)], self.model, content)


class HttpPath:
    """vLLM's HTTP side: one keep-alive connection per concurrent worker."""

    def __init__(self, port: int, model: str) -> None:
        self.model = model
        self.conns = [HttpConnection("127.0.0.1", port) for _ in range(max(CONCURRENCY))]

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        for conn in self.conns:
            await conn.close()

    def one(self, content: str) -> Callable[[int], Awaitable[RequestSample]]:
        body = http_body(self.model, content)
        return lambda w: self.conns[w].stream_chat(body)


@dataclass
class RoundResult:
    """One path's measurement of one workload in one round."""

    path: str
    round: int
    samples: list[RequestSample]
    wall_s: float
    #: CPU seconds of the serving process and of its engine during the round (None: no pid)
    server: TreeCpu | None
    #: CPU seconds of this (client) process during the round
    client_cpu_s: float
    #: CPU seconds the other, idle server (both its processes) spent meanwhile
    idle_other_cpu_s: float | None
    load_average: str
    tokens: int = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = sum(s.tokens or len(s.content_ns) for s in self.samples if _ok(s))

    def per_1k(self, seconds: float | None) -> float | None:
        return None if seconds is None or not self.tokens else seconds * 1000.0 / self.tokens


def _ok(s: RequestSample) -> bool:
    return not s.error and s.ttft_ms is not None and s.total_ms is not None


async def measure(
    paths: Mapping[str, Any],
    pids: Mapping[str, int | None],
    prompts: Mapping[str, str],
    plan: Plan,
    progress: Callable[[str], None] = lambda _m: None,
) -> dict[Workload, list[RoundResult]]:
    """Every workload on both paths, round after round, first path alternating."""
    for name, path in paths.items():
        for content in prompts.values():  # the first requests pay vLLM's start-up costs
            for w in range(plan.warmup):
                await path.one(content)(w)
        progress(f"    {name} warmed up")
    out: dict[Workload, list[RoundResult]] = {}
    for r in range(plan.rounds):
        t0 = time.monotonic()
        for prompt, content in prompts.items():
            for c in CONCURRENCY:
                for name in round_order(r):
                    other = next(p for p in paths if p != name)
                    result = await _one_round(
                        name,
                        r,
                        paths[name].one(content),
                        plan.requests[c],
                        c,
                        pids.get(name),
                        pids.get(other),
                    )
                    out.setdefault((prompt, c), []).append(result)
        progress(
            f"    round {r + 1}/{plan.rounds} ({' then '.join(round_order(r))}) "
            f"in {time.monotonic() - t0:.1f} s, load {load_average()}"
        )
    return out


def _tree(pid: int | None) -> TreeCpu | None:
    if pid is None:
        return None
    try:
        return tree_cpu(pid)
    except ProcessLookupError:
        return None


async def _one_round(
    name: str,
    r: int,
    one: Callable[[int], Awaitable[RequestSample]],
    n: int,
    c: int,
    pid: int | None,
    other_pid: int | None,
) -> RoundResult:
    load = load_average()
    mine0, other0, client0 = _tree(pid), _tree(other_pid), time.process_time()
    samples, wall = await run_concurrent(n, c, one)
    client = time.process_time() - client0
    mine1, other1 = _tree(pid), _tree(other_pid)
    server = mine1.since(mine0) if mine0 and mine1 else None
    idle = None
    if other0 and other1:
        spent = other1.since(other0)
        idle = spent.serving + spent.engine
    return RoundResult(name, r, samples, wall, server, client, idle, load)


# --- the document -------------------------------------------------------------------------------


def summarise(rounds: Sequence[RoundResult]) -> dict[str, Any]:
    """Pooled per-request samples of one path and workload, and per-round figures."""
    ttft: list[float] = []
    itl: list[float] = []
    total: list[float] = []
    tps: list[float] = []
    out: dict[str, Any] = {
        "aggregate_tokens_per_s": [],
        "ttft_p50_by_round": [],
        "serving_cpu_s_per_1k_tokens": [],
        "engine_cpu_s_per_1k_tokens": [],
        "client_cpu_s_per_1k_tokens": [],
        "idle_other_cpu_s": [],
        "load_average": [],
    }
    errors = 0
    first_error: Any = None
    for rr in rounds:
        round_ttft = []
        for s in rr.samples:
            if not _ok(s):
                errors += 1
                first_error = first_error or s.error or "no content or no end of stream"
                continue
            round_ttft.append(s.ttft_ms)
            itl.extend(gaps_ms(s.content_ns))
            total.append(s.total_ms)
            if s.tokens_per_s is not None:
                tps.append(s.tokens_per_s)
        ttft += round_ttft
        if round_ttft:
            out["ttft_p50_by_round"].append(median(round_ttft))
        if rr.wall_s > 0 and rr.tokens:
            out["aggregate_tokens_per_s"].append(rr.tokens / rr.wall_s)
        if rr.server is not None and rr.tokens:
            out["serving_cpu_s_per_1k_tokens"].append(rr.per_1k(rr.server.serving))
            out["engine_cpu_s_per_1k_tokens"].append(rr.per_1k(rr.server.engine))
        if rr.tokens:
            out["client_cpu_s_per_1k_tokens"].append(rr.per_1k(rr.client_cpu_s))
        if rr.idle_other_cpu_s is not None:
            out["idle_other_cpu_s"].append(rr.idle_other_cpu_s)
        out["load_average"].append(rr.load_average)
    out.update(
        ttft_ms=ttft,
        itl_ms=itl,
        total_ms=total,
        tokens_per_s=tps,
        errors=errors,
        first_error=first_error,
    )
    return out


#: (field, unit, description, keep raw values)
_FIELDS = (
    (
        "aggregate_tokens_per_s",
        "tokens/s",
        "all completion tokens of a round / its wall time",
        True,
    ),
    ("ttft_ms", "ms", "request sent → first content chunk, every request", False),
    ("ttft_p50_by_round", "ms", "median TTFT of each round (spread across rounds)", True),
    ("itl_ms", "ms", "gap between content chunks, every request", False),
    ("total_ms", "ms", "request sent → end of stream, every request", False),
    ("tokens_per_s", "tokens/s", "completion tokens / total time, every request", False),
    (
        "serving_cpu_s_per_1k_tokens",
        "s",
        "CPU s of the serving process (API server or "
        "adapter) per 1,000 completion tokens, per round",
        True,
    ),
    (
        "engine_cpu_s_per_1k_tokens",
        "s",
        "CPU s of the engine-core process per 1,000 completion tokens, per round",
        True,
    ),
    (
        "client_cpu_s_per_1k_tokens",
        "s",
        "CPU s of the benchmark's client per 1,000 "
        "completion tokens, per round (kept out of the server figures)",
        True,
    ),
    ("idle_other_cpu_s", "s", "CPU s the other, idle server spent during this path's round", True),
)

#: the ratios reported per workload: (name, summary field, statistic)
_RATIOS = (
    ("aggregate_tokens_per_s", "aggregate_tokens_per_s", "median"),
    ("ttft_p50", "ttft_ms", "p50"),
    ("ttft_p95", "ttft_ms", "p95"),
    ("itl_p50", "itl_ms", "p50"),
    ("itl_p95", "itl_ms", "p95"),
    ("serving_cpu_s_per_1k_tokens", "serving_cpu_s_per_1k_tokens", "median"),
    ("engine_cpu_s_per_1k_tokens", "engine_cpu_s_per_1k_tokens", "median"),
)


def _stat(values: Sequence[float], how: str) -> float:
    return median(values) if how == "median" else percentile(values, 95 if how == "p95" else 50)


def _key(w: Workload) -> str:
    return f"{w[0]}.c{w[1]}"


def targets(summaries: Mapping[str, Mapping[Workload, Mapping[str, Any]]]) -> dict[str, bool]:
    """The issue's parity targets, per workload: True where met in this run."""
    out: dict[str, bool] = {}
    for w, a in summaries[NNRP].items():
        b = summaries[HTTP].get(w)
        if b is None or not a["ttft_ms"] or not b["ttft_ms"]:
            continue
        k = _key(w)
        out[f"target.{k}.tokens_per_s_ratio_ge_0.97"] = median(
            a["aggregate_tokens_per_s"]
        ) >= 0.97 * median(b["aggregate_tokens_per_s"])
        out[f"target.{k}.ttft_p50_le_1.05x_plus_1ms"] = (
            percentile(a["ttft_ms"], 50) <= 1.05 * percentile(b["ttft_ms"], 50) + 1.0
        )
        if a["itl_ms"] and b["itl_ms"]:
            out[f"target.{k}.itl_p95_le_1.05x"] = percentile(a["itl_ms"], 95) <= 1.05 * percentile(
                b["itl_ms"], 95
            )
        if w[1] >= 8 and a["serving_cpu_s_per_1k_tokens"] and b["serving_cpu_s_per_1k_tokens"]:
            out[f"target.{k}.serving_cpu_per_1k_le_http"] = median(
                a["serving_cpu_s_per_1k_tokens"]
            ) <= median(b["serving_cpu_s_per_1k_tokens"])
    return out


def build_document(
    measured: Mapping[Workload, Sequence[RoundResult]],
    *,
    plan: Plan,
    vllm_version: str,
    parameters: dict[str, Any],
    notes: list[str],
) -> dict[str, Any]:
    summaries: dict[str, dict[Workload, dict[str, Any]]] = {p: {} for p in PATHS}
    for w, rounds in measured.items():
        for p in PATHS:
            mine = [rr for rr in rounds if rr.path == p]
            if mine:
                summaries[p][w] = summarise(mine)
    headline: Workload = ("short", 1)
    metrics: list[dict[str, Any]] = []
    for prefix, tps_name in ((NNRP, NNRP_TPS), (HTTP, HTTP_TPS)):
        vals = summaries[prefix].get(headline, {}).get("tokens_per_s")
        if not vals:
            raise RuntimeError(f"{prefix}: no successful request in the short c=1 workload")
        metrics.append(
            metric(tps_name, "tokens/s", vals, description="per request, short prompt, c=1")
        )
    for prefix in (NNRP, HTTP):
        for w, s in summaries[prefix].items():
            base = f"{prefix}.{_key(w)}"
            for field_, unit, what, keep in _FIELDS:
                if s[field_]:
                    metrics.append(
                        metric(
                            f"{base}.{field_}", unit, s[field_], description=what, keep_values=keep
                        )
                    )
            parameters[f"{base}.errors"] = s["errors"]
            if s["first_error"]:
                parameters[f"{base}.first_error"] = str(s["first_error"])[:500]
            parameters[f"{base}.load_average_by_round"] = " | ".join(s["load_average"])
    ratios = [
        ratio(
            f"{NNRP}/{HTTP}.tokens_per_s",
            NNRP_TPS,
            HTTP_TPS,
            median(summaries[NNRP][headline]["tokens_per_s"])
            / median(summaries[HTTP][headline]["tokens_per_s"]),
            description="> 1: the adapter is faster",
        )
    ]
    for w in summaries[NNRP]:
        a, b = summaries[NNRP][w], summaries[HTTP].get(w)
        if b is None:
            continue
        k = _key(w)
        for name, field_, how in _RATIOS:
            if not a[field_] or not b[field_] or _stat(b[field_], how) == 0:
                continue
            ratios.append(
                ratio(
                    f"{NNRP}/{HTTP}.{k}.{name}",
                    f"{NNRP}.{k}.{field_}",
                    f"{HTTP}.{k}.{field_}",
                    _stat(a[field_], how) / _stat(b[field_], how),
                    description=f"{how} over {'rounds' if how == 'median' else 'requests'}",
                )
            )
        # the same ratio round by round (the pair measured back to back): its spread
        by_round = [
            x / y
            for x, y in zip(a["aggregate_tokens_per_s"], b["aggregate_tokens_per_s"], strict=False)
            if y > 0
        ]
        if by_round:
            metrics.append(
                metric(
                    f"{NNRP}/{HTTP}.{k}.aggregate_tokens_per_s_by_round",
                    "ratio",
                    by_round,
                    description="NNRP/HTTP aggregate tokens/s of each round's back-to-back pair",
                )
            )
    parameters.update(targets(summaries))
    return results_document(
        BENCH_PARITY,
        metrics,
        runs=plan.rounds,
        vllm=vllm_version,
        parameters=parameters,
        ratios=ratios,
        notes=notes,
        description="The same engine (version, flags, tiny model), prompts and sampling "
        f"(greedy, ignore_eos, max_tokens {MAX_TOKENS}) through vLLM's own OpenAI HTTP/SSE "
        "server and through the adapter over NNRP, both up for the whole run and measured in "
        "interleaved rounds (the first path alternating), loopback only.",
    )


def print_summary(doc: Mapping[str, Any], console: Console) -> None:
    """The comparison at a glance: per workload, NNRP/HTTP ratios and CPU per 1k tokens."""
    by = {r["name"]: r["value"] for r in doc.get("ratios", ())}
    med = {m["name"]: m for m in doc["metrics"]}
    table = Table(title="parity (NNRP / HTTP, medians; CPU s per 1k tokens)", title_justify="left")
    for col in (
        "workload",
        "tok/s",
        "spread",
        "TTFT p50",
        "ITL p95",
        "srv CPU http",
        "srv CPU nnrp",
        "engine http",
        "engine nnrp",
    ):
        table.add_column(col, justify="right", no_wrap=True)
    found = {n.split(".")[1] + "." + n.split(".")[2] for n in by if n.count(".") >= 3}
    keys = [f"{p}.c{c}" for p in ("short", "long") for c in CONCURRENCY if f"{p}.c{c}" in found]

    def f(x: float | None) -> str:
        return "—" if x is None else f"{x:.3f}"

    for k in keys:
        spread = med.get(f"{NNRP}/{HTTP}.{k}.aggregate_tokens_per_s_by_round")
        cpu = {
            (p, what): (med.get(f"{p}.{k}.{what}_cpu_s_per_1k_tokens") or {}).get("median")
            for p in PATHS
            for what in ("serving", "engine")
        }
        table.add_row(
            k,
            f(by.get(f"{NNRP}/{HTTP}.{k}.aggregate_tokens_per_s")),
            "—" if not spread else f"{spread['min']:.2f}–{spread['max']:.2f}",
            f(by.get(f"{NNRP}/{HTTP}.{k}.ttft_p50")),
            f(by.get(f"{NNRP}/{HTTP}.{k}.itl_p95")),
            f(cpu[(HTTP, "serving")]),
            f(cpu[(NNRP, "serving")]),
            f(cpu[(HTTP, "engine")]),
            f(cpu[(NNRP, "engine")]),
        )
    console.print(table)
    missed = [k for k, v in doc.get("parameters", {}).items() if k.startswith("target.") and not v]
    console.print(f"  targets missed: {', '.join(missed) if missed else 'none'}", markup=False)


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
        "--nnrp-sessions",
        type=int,
        default=1,
        help="NNRP sessions the concurrent requests share (default 1: NNRP multiplexes; "
        "HTTP/1.1 needs one connection per concurrent request)",
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
    if args.nnrp_sessions < 1 or (args.rounds is not None and args.rounds < 1):
        p.error("--nnrp-sessions and --rounds must be at least 1")
    from vllm_nnrp_adapter import CURRENT_LINE_TESTED
    from vllm_nnrp_adapter.conformance import (
        EMBEDDED_ENGINE_ARGS,
        TINY_MODEL_NAME,
        AdapterProcess,
        ConformanceSetupError,
        tiny_model,
        vllm_python,
    )

    version = args.vllm_version or CURRENT_LINE_TESTED
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
            + "; ".join(" then ".join(round_order(r)) for r in range(min(plan.rounds, 2))),
            "nnrp_sessions": args.nnrp_sessions,
            "http_connections": max(CONCURRENCY),
            "adapter_args": " ".join(args.adapter_arg),
            "load_average_start": load_average(),
        }
        notes = [
            f"long prompt: {long_tokens} prompt tokens of max_model_len {max_len} "
            f"(minus max_tokens {MAX_TOKENS} and a margin of 8)",
            "client receive stamps: HTTP when the asyncio read returned, NNRP when "
            "the suite client's pump thread decoded the frame",
            "CPU: /proc/PID/stat user+system of the serving process (vLLM's API server, or "
            "the adapter) and of its descendants (the engine core), read around each round; "
            "both clients run in the benchmark process, whose CPU is reported apart",
        ]
        print(
            f"==> vLLM {version}: starting both servers (long prompt {long_tokens} tokens)",
            flush=True,
        )
        adapter_log, http_log = log_paths(out)
        with (
            HttpServer(python, model_dir, EMBEDDED_ENGINE_ARGS, http_log) as srv,
            AdapterProcess(
                python,
                model_dir,
                extra_args=tuple(args.adapter_arg),
                log_path=adapter_log,
            ) as adapter,
        ):
            parameters["http_start_s"] = round(srv.started_in_s or 0.0, 2)
            parameters["nnrp_start_s"] = round(adapter.started_in_s or 0.0, 2)
            vllm_version = str(adapter.info.get("vllm_version") or version)
            t0 = time.monotonic()
            measured = anyio.run(
                _measure_both,
                srv.port,
                srv.pid,
                adapter.address,
                adapter.pid,
                TINY_MODEL_NAME,
                prompts,
                plan,
                args.nnrp_sessions,
            )
            print(f"    measured in {time.monotonic() - t0:.1f} s", flush=True)
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
    console = Console(width=132, highlight=False)
    print_results(doc, console)
    print_summary(doc, console)
    print(f"  wrote {path}")
    return 0


def log_paths(out: Path) -> tuple[Path, Path]:
    """(adapter log, HTTP server log) of this benchmark's own servers in the folder ``out``.

    A release writes the parity run into the same ``vllm-<version>/`` folder as the suite
    run, whose adapter log must stay the one of the adapter the suite judged."""
    return out / PARITY_ADAPTER_LOG, out / PARITY_HTTP_SERVER_LOG


async def _measure_both(
    port: int,
    http_pid: int | None,
    address: str,
    nnrp_pid: int | None,
    model: str,
    prompts: Mapping[str, str],
    plan: Plan,
    sessions: int,
) -> dict[Workload, list[RoundResult]]:
    paths: dict[str, Any] = {HTTP: HttpPath(port, model), NNRP: NnrpPath(address, model, sessions)}
    try:
        for path in paths.values():
            await path.open()
        return await measure(
            paths,
            {HTTP: http_pid, NNRP: nnrp_pid},
            prompts,
            plan,
            progress=lambda m: print(m, flush=True),
        )
    finally:
        for path in paths.values():
            await path.close()
