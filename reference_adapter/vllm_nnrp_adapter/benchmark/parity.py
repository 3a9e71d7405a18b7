"""``vllm-nnrp bench parity``: vLLM's own OpenAI HTTP/SSE server against the adapter over NNRP.

Owns the side-by-side run: the same vLLM version, engine flags, tiny model, prompts and
sampling parameters, first through ``python -m vllm.entrypoints.openai.api_server`` (an
HTTP/1.1 keep-alive client on raw loopback sockets parsing chunked SSE, no dependency),
then through the adapter (the suite's NNRP client). The two servers never run at once.
Per request it records time to first content, the gaps between content chunks, total
time and tokens per second, at concurrency 1 and 8 with a short and a long prompt (long =
as close to ``max_model_len`` minus ``max_tokens`` as the model's tokenizer allows), and
derives the adapter's own overhead (NNRP minus HTTP) and the NNRP/HTTP ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import itertools
import json
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient, NnrpClientError
from nnrp_conformance.gate.requirements import BENCH_PARITY

from .common import median, metric, print_results, ratio, results_document, write_results
from .vllm import PROMPT, chat_envelope, gaps_ms, load_average, required_metrics, run_stream

__all__ = [
    "ChunkedDecoder",
    "HttpServer",
    "RequestSample",
    "SseParser",
    "content_of_chunk",
    "http_stream",
    "main",
    "summarise",
]

NNRP_TPS, HTTP_TPS = required_metrics(BENCH_PARITY)
NNRP, HTTP = NNRP_TPS.split(".", 1)[0], HTTP_TPS.split(".", 1)[0]
MAX_TOKENS = 32
LONG_UNIT = "one two three four five six seven eight nine ten "
CONCURRENCY = (1, 8)


# --- HTTP/SSE, parsed by hand -----------------------------------------------------------------


class ChunkedDecoder:
    """HTTP/1.1 ``Transfer-Encoding: chunked`` → body bytes, fed incrementally."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._need: int | None = None  # bytes of chunk data still expected
        self.done = False

    def feed(self, data: bytes) -> bytes:
        self._buf += data
        out = bytearray()
        while not self.done:
            if self._need is None:
                end = self._buf.find(b"\r\n")
                if end < 0:
                    break
                size_text = bytes(self._buf[:end]).split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise ValueError(f"bad chunk size line {bytes(self._buf[:end])!r}") from None
                del self._buf[: end + 2]
                if size == 0:
                    self.done = True  # trailers, if any, are not needed
                    break
                self._need = size
            if len(self._buf) < self._need + 2:
                break
            out += self._buf[: self._need]
            del self._buf[: self._need + 2]
            self._need = None
        return bytes(out)


class SseParser:
    """Server-sent events → the ``data`` payload of each complete event, fed incrementally."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[str]:
        self._buf += data.replace(b"\r\n", b"\n")
        out: list[str] = []
        while True:
            end = self._buf.find(b"\n\n")
            if end < 0:
                return out
            block, self._buf = self._buf[:end], self._buf[end + 2 :]
            lines = [
                line[5:].removeprefix(b" ")
                for line in block.split(b"\n")
                if line.startswith(b"data:")
            ]
            if lines:
                out.append(b"\n".join(lines).decode("utf-8"))


def content_of_chunk(data: str) -> tuple[str | None, int | None]:
    """(content delta or None, completion tokens from a usage chunk or None) of one SSE data."""
    obj = json.loads(data)
    usage = obj.get("usage") or None
    tokens = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
    for choice in obj.get("choices") or ():
        content = (choice.get("delta") or {}).get("content")
        if content:
            return content, tokens
    return None, tokens


@dataclass
class RequestSample:
    """One streamed request as its client saw it (perf_counter_ns in this process)."""

    started_ns: int
    content_ns: list[int] = field(default_factory=list)
    finished_ns: int | None = None
    tokens: int | None = None
    text: str = ""
    error: str | None = None

    @property
    def ttft_ms(self) -> float | None:
        return (self.content_ns[0] - self.started_ns) / 1e6 if self.content_ns else None

    @property
    def total_ms(self) -> float | None:
        return None if self.finished_ns is None else (self.finished_ns - self.started_ns) / 1e6

    @property
    def tokens_per_s(self) -> float | None:
        n = self.tokens or len(self.content_ns)
        total = self.total_ms
        return n / (total / 1e3) if total and n else None


_IDLE_CLOSED = "connection closed before the response started"


class HttpConnection:
    """One keep-alive HTTP/1.1 connection to the server on loopback."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _open(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        sock = self._writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
            self._reader = self._writer = None

    async def stream_chat(self, body: Mapping[str, Any], timeout: float = 120.0) -> RequestSample:
        sample = await self._stream_chat(body, timeout)
        if sample.error == _IDLE_CLOSED:
            # the server closed the idle keep-alive connection (uvicorn: after 5 s) before
            # reading the request; a fresh connection and a new start time, as any client
            sample = await self._stream_chat(body, timeout)
        return sample

    async def _stream_chat(self, body: Mapping[str, Any], timeout: float) -> RequestSample:
        if self._writer is None:
            await self._open()
        assert self._reader is not None and self._writer is not None
        payload = json.dumps(body).encode()
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        ).encode()
        sample = RequestSample(time.perf_counter_ns())
        self._writer.write(head + payload)
        with anyio.fail_after(timeout):
            try:
                status_line = await self._reader.readline()
                while status_line in (b"\r\n", b"\n"):
                    # the CRLF closing the previous response's last chunk may arrive late
                    status_line = await self._reader.readline()
            except ConnectionError:
                status_line = b""
            headers: dict[str, str] = {}
            while True:
                line = await self._reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                k, _, v = line.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            parts = status_line.split()
            if not status_line:
                sample.error = _IDLE_CLOSED
                await self.close()
                return sample
            if len(parts) < 2 or parts[1] != b"200":
                sample.error = f"HTTP {status_line.decode('latin-1').strip()}"
                await self.close()
                return sample
            if "chunked" not in headers.get("transfer-encoding", ""):
                sample.error = f"expected a chunked SSE response, headers {headers}"
                await self.close()
                return sample
            decoder, sse = ChunkedDecoder(), SseParser()
            while not decoder.done:
                data = await self._reader.read(65536)
                now = time.perf_counter_ns()
                if not data:
                    sample.error = "connection closed mid-stream"
                    await self.close()
                    return sample
                for event in sse.feed(decoder.feed(data)):
                    if event.strip() == "[DONE]":
                        sample.finished_ns = now
                        continue
                    content, tokens = content_of_chunk(event)
                    if content:
                        sample.content_ns.append(now)
                        sample.text += content
                    if tokens is not None:
                        sample.tokens = tokens
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return sample


async def http_stream(host: str, port: int, body: Mapping[str, Any]) -> RequestSample:
    """One streamed chat on a fresh connection (the benchmark itself reuses connections)."""
    conn = HttpConnection(host, port)
    try:
        return await conn.stream_chat(body)
    finally:
        await conn.close()


# --- vLLM's own HTTP server ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class HttpServer:
    """``python -m vllm.entrypoints.openai.api_server`` in its own process group."""

    python: str
    model_dir: Path
    engine_args: Sequence[str]
    log_path: Path
    start_timeout: float = 600.0
    port: int = 0
    started_in_s: float | None = None
    _proc: subprocess.Popen | None = None

    def start(self) -> HttpServer:
        from vllm_nnrp_adapter.conformance import engine_environment

        self.port = self.port or free_port()
        cmd = [
            self.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            *self.engine_args,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=engine_environment(self.python),
                start_new_session=True,
            )
        while not self._healthy():
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"vLLM's HTTP server exited with {self._proc.returncode}; see {self.log_path}"
                )
            if time.monotonic() - t0 > self.start_timeout:
                self.stop()
                raise RuntimeError(
                    f"vLLM's HTTP server not healthy within "
                    f"{self.start_timeout:.0f} s; see {self.log_path}"
                )
            time.sleep(0.5)
        self.started_in_s = time.monotonic() - t0
        return self

    def _healthy(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            conn.request("GET", "/health")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def stop(self, timeout: float = 60.0) -> None:
        from vllm_nnrp_adapter.conformance import stop_process_group

        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process_group(proc, timeout)

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


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


@dataclass
class Plan:
    repeats: int
    c1_requests: int  # per repeat
    c8_requests: int  # per repeat
    warmup: int = 4


QUICK = Plan(repeats=2, c1_requests=8, c8_requests=16, warmup=2)
FULL = Plan(repeats=3, c1_requests=34, c8_requests=68)


def http_body(model: str, content: str) -> dict[str, Any]:
    """The OpenAI body both servers get (the adapter adds ``include_usage`` itself)."""
    body = dict(chat_envelope(max_tokens=MAX_TOKENS, model=model, content=content)["body"])
    body["stream_options"] = {"include_usage": True}
    return body


async def run_concurrent(
    n: int, concurrency: int, one: Callable[[int], Awaitable[RequestSample]]
) -> tuple[list[RequestSample], float]:
    """``n`` requests from ``concurrency`` workers; (samples, wall seconds)."""
    counter = itertools.count()
    samples: list[RequestSample] = []

    async def worker(w: int) -> None:
        while next(counter) < n:
            samples.append(await one(w))

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for w in range(concurrency):
            tg.start_soon(worker, w)
    return samples, time.perf_counter() - t0


Workload = tuple[str, int]  # (prompt name, concurrency)


async def measure_http(
    port: int, model: str, prompts: Mapping[str, str], plan: Plan
) -> dict[Workload, list[tuple[list[RequestSample], float]]]:
    conns = [HttpConnection("127.0.0.1", port) for _ in range(max(CONCURRENCY))]
    try:
        for name in prompts:  # warm-up: the first requests pay vLLM's start-up costs
            for _ in range(plan.warmup):
                await conns[0].stream_chat(http_body(model, prompts[name]))
        out: dict[Workload, list[tuple[list[RequestSample], float]]] = {}
        for _ in range(plan.repeats):
            for name, content in prompts.items():
                for c in CONCURRENCY:
                    n = plan.c1_requests if c == 1 else plan.c8_requests
                    body = http_body(model, content)
                    out.setdefault((name, c), []).append(
                        await run_concurrent(n, c, lambda w, b=body: conns[w].stream_chat(b))
                    )
        return out
    finally:
        for conn in conns:
            await conn.close()


async def _nnrp_one(client: NnrpClient, model: str, content: str) -> RequestSample:
    env = chat_envelope(max_tokens=MAX_TOKENS, model=model, content=content)
    s = await run_stream(client, env)
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


async def measure_nnrp(
    address: str, model: str, prompts: Mapping[str, str], plan: Plan
) -> dict[Workload, list[tuple[list[RequestSample], float]]]:
    client = await NnrpClient.connect(address, default_timeout=120.0)
    try:
        for name in prompts:
            for _ in range(plan.warmup):
                await _nnrp_one(client, model, prompts[name])
        out: dict[Workload, list[tuple[list[RequestSample], float]]] = {}
        for _ in range(plan.repeats):
            for name, content in prompts.items():
                for c in CONCURRENCY:
                    n = plan.c1_requests if c == 1 else plan.c8_requests
                    out.setdefault((name, c), []).append(
                        await run_concurrent(
                            n, c, lambda _w, t=content: _nnrp_one(client, model, t)
                        )
                    )
        return out
    finally:
        with anyio.move_on_after(10):
            await client.aclose()


# --- the document -------------------------------------------------------------------------------


def summarise(runs: Sequence[tuple[Sequence[RequestSample], float]]) -> dict[str, Any]:
    """Pooled per-request samples of one workload, plus per-repeat aggregate throughput."""
    ttft: list[float] = []
    itl: list[float] = []
    total: list[float] = []
    tps: list[float] = []
    aggregate: list[float] = []
    errors = 0
    first_error: Any = None
    for samples, wall in runs:
        tokens = 0
        for s in samples:
            if s.error or s.ttft_ms is None or s.total_ms is None:
                errors += 1
                first_error = first_error or s.error or "no content or no end of stream"
                continue
            ttft.append(s.ttft_ms)
            itl += gaps_ms(s.content_ns)
            total.append(s.total_ms)
            if s.tokens_per_s is not None:
                tps.append(s.tokens_per_s)
            tokens += s.tokens or len(s.content_ns)
        if wall > 0:
            aggregate.append(tokens / wall)
    return {
        "ttft_ms": ttft,
        "itl_ms": itl,
        "total_ms": total,
        "tokens_per_s": tps,
        "aggregate_tokens_per_s": aggregate,
        "errors": [float(errors)],
        "first_error": first_error,
    }


def _workload_metrics(
    prefix: str, key: Workload, s: Mapping[str, list[float]]
) -> list[dict[str, Any]]:
    name, c = key
    base = f"{prefix}.{name}.c{c}"
    out = []
    for field_, unit, what in (
        ("ttft_ms", "ms", "request sent → first content chunk"),
        ("itl_ms", "ms", "gap between content chunks"),
        ("total_ms", "ms", "request sent → end of stream"),
        ("tokens_per_s", "tokens/s", "completion tokens / total time"),
        ("aggregate_tokens_per_s", "tokens/s", "all completion tokens of a repeat / its wall time"),
    ):
        if s[field_]:
            out.append(
                metric(
                    f"{base}.{field_}",
                    unit,
                    s[field_],
                    description=what,
                    keep_values=field_ != "itl_ms",
                )
            )
    return out


def build_document(
    http: Mapping[Workload, Any],
    nnrp: Mapping[Workload, Any],
    *,
    plan: Plan,
    vllm_version: str,
    parameters: dict[str, Any],
    notes: list[str],
) -> dict[str, Any]:
    metrics: list[dict[str, Any]] = []
    ratios: list[dict[str, Any]] = []
    summaries = {
        HTTP: {k: summarise(v) for k, v in http.items()},
        NNRP: {k: summarise(v) for k, v in nnrp.items()},
    }
    headline = ("short", 1)
    for prefix, tps_name in ((NNRP, NNRP_TPS), (HTTP, HTTP_TPS)):
        vals = summaries[prefix][headline]["tokens_per_s"]
        if not vals:
            raise RuntimeError(f"{prefix}: no successful request in the short c=1 workload")
        metrics.append(
            metric(
                tps_name, "tokens/s", vals, description="per request, short prompt, concurrency 1"
            )
        )
    for prefix in (NNRP, HTTP):
        for key, s in summaries[prefix].items():
            metrics += _workload_metrics(prefix, key, s)
            parameters[f"{prefix}.{key[0]}.c{key[1]}.errors"] = int(s["errors"][0])
            if s["first_error"]:
                parameters[f"{prefix}.{key[0]}.c{key[1]}.first_error"] = s["first_error"]
    ratios.append(
        ratio(
            f"{NNRP}/{HTTP}.tokens_per_s",
            NNRP_TPS,
            HTTP_TPS,
            median(summaries[NNRP][headline]["tokens_per_s"])
            / median(summaries[HTTP][headline]["tokens_per_s"]),
            description="> 1: the adapter is faster",
        )
    )
    for key in summaries[NNRP]:
        if key not in summaries[HTTP]:
            continue
        base = f"{key[0]}.c{key[1]}"
        for field_ in ("ttft_ms", "itl_ms", "total_ms", "aggregate_tokens_per_s"):
            a, b = summaries[NNRP][key][field_], summaries[HTTP][key][field_]
            if not a or not b or median(b) == 0:
                continue
            ratios.append(
                ratio(
                    f"{NNRP}/{HTTP}.{base}.{field_}",
                    f"{NNRP}.{base}.{field_}",
                    f"{HTTP}.{base}.{field_}",
                    median(a) / median(b),
                )
            )
            if field_ != "aggregate_tokens_per_s":
                # overhead may be negative, so it is a parameter, not a (≥ 0) metric
                parameters[f"overhead.{base}.{field_}"] = round(median(a) - median(b), 4)
    return results_document(
        BENCH_PARITY,
        metrics,
        runs=plan.repeats,
        vllm=vllm_version,
        parameters=parameters,
        ratios=ratios,
        notes=notes,
        description="The same engine (version, flags, tiny model), prompts and sampling "
        f"(greedy, ignore_eos, max_tokens {MAX_TOKENS}) through vLLM's own OpenAI HTTP/SSE "
        "server and through the adapter over NNRP, one after the other, loopback only.",
    )


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="vllm-nnrp bench parity",
        description="vLLM's own HTTP/SSE server vs the adapter over NNRP, same engine.",
    )
    p.add_argument("--vllm-version", default=None, help="cached vLLM venv (default current line)")
    p.add_argument("--quick", action="store_true", help="fewer samples (about two minutes)")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder; writes OUT/bench/parity.json "
        "(default artifacts/bench-vllm/vllm-VERSION)",
    )
    args = p.parse_args(list(argv))
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
            "c1_requests_per_repeat": plan.c1_requests,
            "c8_requests_per_repeat": plan.c8_requests,
            "quick": bool(args.quick),
            "order": f"{HTTP} then {NNRP}",
        }
        notes = [
            f"long prompt: {long_tokens} prompt tokens of max_model_len {max_len} "
            f"(minus max_tokens {MAX_TOKENS} and a margin of 8)"
        ]
        print(
            f"==> vLLM {version}: HTTP server first (long prompt {long_tokens} tokens)", flush=True
        )
        parameters["load_average_http"] = load_average()
        with HttpServer(python, model_dir, EMBEDDED_ENGINE_ARGS, out / "http-server.log") as srv:
            parameters["http_start_s"] = round(srv.started_in_s or 0.0, 2)
            t0 = time.monotonic()
            http = anyio.run(measure_http, srv.port, TINY_MODEL_NAME, prompts, plan)
            print(f"    measured in {time.monotonic() - t0:.1f} s", flush=True)
        parameters["load_average_nnrp"] = load_average()
        print("==> the adapter over NNRP", flush=True)
        with AdapterProcess(python, model_dir, log_path=out / "adapter.log") as adapter:
            parameters["nnrp_start_s"] = round(adapter.started_in_s or 0.0, 2)
            vllm_version = str(adapter.info.get("vllm_version") or version)
            t0 = time.monotonic()
            nnrp = anyio.run(measure_nnrp, adapter.address, TINY_MODEL_NAME, prompts, plan)
            print(f"    measured in {time.monotonic() - t0:.1f} s", flush=True)
        parameters["load_average_end"] = load_average()
        same = [
            http[k][0][0][0].text == nnrp[k][0][0][0].text for k in http if k in nnrp and k[1] == 1
        ]
        parameters["same_content_c1"] = all(same) if same else None
        notes.append(
            f"load average (1/5/15 min): HTTP run {parameters['load_average_http']}, "
            f"NNRP run {parameters['load_average_nnrp']}, end "
            f"{parameters['load_average_end']} (shared 2-core machine)"
        )
        notes.append(
            "client receive stamps: HTTP when the asyncio read returned, NNRP when "
            "the suite client's pump thread decoded the frame"
        )
        doc = build_document(
            http, nnrp, plan=plan, vllm_version=vllm_version, parameters=parameters, notes=notes
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
    print_results(doc, Console(width=132, highlight=False))
    print(f"  wrote {path}")
    return 0
