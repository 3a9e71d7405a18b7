"""The parity benchmark's workload and one round of it: the prompts (short, and long up to a
token budget), the paths (vLLM's HTTP/SSE server; the adapter over NNRP through the lean or
the suite's client, one session per stream or one for all) with their clients, and a round
that measures every workload on every path, back to back, the order reversed from round to
round, with the serving and engine processes' CPU read around each measurement.
Shared facts (the metric names, the paths, the workloads) are :mod:`.parity_facts`'s."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import anyio

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient, NnrpClientError
from vllm_nnrp_adapter.launch.embedded import engine_environment
from vllm_nnrp_adapter.observability.proc_cpu import TreeCpu, tree_cpu

from ..lib.results import (
    run_concurrent,
)
from ..lib.streams import chat_envelope, load_average, run_stream
from .facts import (
    CONCURRENCY,
    LEAN,
    LONG_UNIT,
    MAX_TOKENS,
    NNRP_COLUMNS,
    PATHS,
    PER_STREAM,
    Workload,
)
from .http_sse import (
    HttpConnection,
    RequestSample,
)
from .lean_client import LeanSession

_C = TypeVar("_C")


def long_prompt(python: str, model_dir: Path, budget: int) -> tuple[str, int]:
    """The longest repetition of :data:`LONG_UNIT` whose chat prompt fits ``budget`` tokens."""

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


def round_order(r: int, paths: tuple[str, ...] = PATHS) -> tuple[str, ...]:
    """The order the paths run in round ``r``: reversed every other round, so no path
    always goes first or last."""
    return paths if r % 2 == 0 else tuple(reversed(paths))


def http_body(model: str, content: str) -> dict[str, Any]:
    """The OpenAI body both servers get (the adapter adds ``include_usage`` itself)."""
    body = dict(chat_envelope(max_tokens=MAX_TOKENS, model=model, content=content)["body"])
    body["stream_options"] = {"include_usage": True}
    return body


async def _nnrp_one(client: NnrpClient, env: dict[str, Any]) -> RequestSample:
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


class _SessionsPath(Generic[_C]):
    """The adapter's side through ``sessions`` NNRP sessions of one client kind; worker ``w``
    uses session ``w % sessions``. A kind says how it connects, streams and closes."""

    #: how long closing one session may take
    close_limit_s = 10.0

    def __init__(self, address: str, model: str, sessions: int) -> None:
        self.address, self.model, self.sessions = address, model, sessions
        self.clients: list[_C] = []

    async def _connect(self) -> _C:
        raise NotImplementedError

    async def _run(self, client: _C, env: dict[str, Any]) -> RequestSample:
        raise NotImplementedError

    async def _close(self, client: _C) -> None:
        raise NotImplementedError

    async def open(self) -> None:
        for _ in range(self.sessions):
            self.clients.append(await self._connect())

    async def close(self) -> None:
        for client in self.clients:
            with anyio.move_on_after(self.close_limit_s):
                await self._close(client)

    def one(self, content: str) -> Callable[[int], Awaitable[RequestSample]]:
        return self.one_env(chat_envelope(max_tokens=MAX_TOKENS, model=self.model, content=content))

    def one_env(self, env: dict[str, Any]) -> Callable[[int], Awaitable[RequestSample]]:
        return lambda w: self._run(self.clients[w % len(self.clients)], env)


class NnrpPath(_SessionsPath[NnrpClient]):
    """Through the suite's client (one session per :class:`NnrpClient`)."""

    async def _connect(self) -> NnrpClient:
        return await NnrpClient.connect(self.address, default_timeout=120.0)

    async def _run(self, client: NnrpClient, env: dict[str, Any]) -> RequestSample:
        return await _nnrp_one(client, env)

    async def _close(self, client: NnrpClient) -> None:
        await client.aclose()


class LeanPath(_SessionsPath[LeanSession]):
    """Through the lean client (:mod:`.lean_client`); one session alone is shared by the
    concurrent streams, so it polls in short waits."""

    close_limit_s = 20.0

    async def _connect(self) -> LeanSession:
        return await LeanSession.connect(self.address, shared=self.sessions == 1)

    async def _run(self, client: LeanSession, env: dict[str, Any]) -> RequestSample:
        return await client.run(env)

    async def _close(self, client: LeanSession) -> None:
        await client.close()


def nnrp_path(name: str, address: str, model: str) -> LeanPath | NnrpPath:
    """The path of NNRP column ``name`` (:data:`.parity_facts.NNRP_COLUMNS`)."""
    client, sessions = NNRP_COLUMNS[name]
    n = max(CONCURRENCY) if sessions == PER_STREAM else 1
    return LeanPath(address, model, n) if client == LEAN else NnrpPath(address, model, n)


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
    """Every workload on every path, round after round, the order reversed every round."""
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
                for name in round_order(r, tuple(paths)):
                    # the other server: the first path served by another process
                    other = next((p for p in paths if pids.get(p) != pids.get(name)), name)
                    result = await one_round(
                        name,
                        r,
                        paths[name].one(content),
                        plan.requests[c],
                        c,
                        pids.get(name),
                        pids.get(other) if other != name else None,
                    )
                    out.setdefault((prompt, c), []).append(result)
        progress(
            f"    round {r + 1}/{plan.rounds} ({' then '.join(round_order(r, tuple(paths)))}) "
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


async def one_round(
    name: str,
    r: int,
    one: Callable[[int], Awaitable[RequestSample]],
    n: int,
    c: int,
    pid: int | None,
    other_pid: int | None,
) -> RoundResult:
    """One path's measurement of one workload: ``n`` requests ``c`` at a time, with the CPU
    of its server (``pid``'s tree), of the idle other one and of this client around it."""
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
