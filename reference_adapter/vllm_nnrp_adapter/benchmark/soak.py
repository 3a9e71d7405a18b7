"""The soak benchmark: 10,000 operations through the real adapter handler and NNRP server
binding over loopback, with resident memory sampled after warm-up.

It owns a deterministic synthetic backend (vLLM-shaped chunks, no engine: the soak measures
the adapter and the wire, not generation), the operation mix (streaming text, tool calls,
non-streaming, malformed, cancelled), RSS sampling, and the verdict "RSS flat within
±10 % after warm-up". ``python -m vllm_nnrp_adapter.benchmark.soak --out soak.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.table import Table

from nnrp_conformance import contract

__all__ = ["main"]

MODEL = "soak-model"


@dataclass
class _Chunk:
    data: dict[str, Any]


class SyntheticBackend:
    """vLLM's chunk shape for a fixed answer; counts unfinished requests like the engine."""

    version = "synthetic"

    def __init__(self, tokens: int = 8) -> None:
        self.served_model_names = [MODEL]
        self.tokens = tokens
        self.unfinished: set[str] = set()

    async def num_unfinished_requests(self) -> int:
        return len(self.unfinished)

    async def abort(self, request_id: str) -> bool:
        known = request_id in self.unfinished
        self.unfinished.discard(request_id)
        return known

    async def chat(self, body: dict[str, Any], *, request_id: str) -> Any:
        self.unfinished.add(request_id)
        if not body.get("stream"):
            self.unfinished.discard(request_id)
            text = "".join(f"t{i} " for i in range(self.tokens))
            return {
                "id": f"chatcmpl-{request_id}",
                "object": "chat.completion",
                "created": 0,
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "length",
                    }
                ],
                "usage": {
                    "prompt_tokens": 4,
                    "completion_tokens": self.tokens,
                    "total_tokens": 4 + self.tokens,
                },
            }
        return self._stream(request_id, bool(body.get("tools")))

    async def _stream(self, request_id: str, tools: bool) -> AsyncIterator[_Chunk]:
        base = {
            "id": f"chatcmpl-{request_id}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": MODEL,
        }
        try:
            for i in range(self.tokens):
                await anyio.sleep(0)
                delta: dict[str, Any] = {"content": f"t{i} "}
                if tools:
                    delta = (
                        {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call-0",
                                    "type": "function",
                                    "function": {"name": "fn", "arguments": ""},
                                }
                            ]
                        }
                        if i == 0
                        else {
                            "tool_calls": [
                                {"index": 0, "function": {"arguments": f'{{"a{i}":{i}}}'}}
                            ]
                        }
                    )
                yield _Chunk(
                    {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                )
            yield _Chunk(
                {
                    **base,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {},
                            "finish_reason": "tool_calls" if tools else "length",
                        }
                    ],
                }
            )
            yield _Chunk(
                {
                    **base,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 4,
                        "completion_tokens": self.tokens,
                        "total_tokens": 4 + self.tokens,
                    },
                }
            )
        finally:
            self.unfinished.discard(request_id)


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _envelope(i: int) -> dict[str, Any] | bytes:
    kind = i % 10
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"q{i}"}],
        "stream": True,
    }
    if kind == 7:
        body["stream"] = False
    elif kind == 8:
        body["tools"] = [{"type": "function", "function": {"name": "fn", "parameters": {}}}]
    elif kind == 9:
        return b'{"schema_version": "openai-compatible/1", "operation": '  # malformed
    return {
        "schema_version": contract.SCHEMA_VERSION,
        "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
        "body": body,
    }


async def _soak(ops: int, sessions: int, warmup: int, sample_every: int) -> dict[str, Any]:
    from nnrp_conformance.client import NnrpClient
    from vllm_nnrp_adapter.adapter import VllmNnrpAdapter
    from vllm_nnrp_adapter.nnrp_server import NnrpServer
    from vllm_nnrp_adapter.observability import Recorder

    manifest = (
        json.loads(
            (
                Path(__file__).resolve().parents[3] / "manifests" / "vllm-nnrp-adapter.json"
            ).read_text()
        )
        if (Path(__file__).resolve().parents[3] / "manifests").exists()
        else {
            "adapter": "vllm-nnrp-adapter",
            "profile": contract.PROFILE,
            "schema_version": contract.SCHEMA_VERSION,
            "compatibility_levels": [1],
            "operations": [
                {
                    "name": contract.OP_CHAT_COMPLETIONS_CREATE,
                    "streaming": True,
                    "non_streaming": True,
                    "tool_calls": True,
                    "cancellation": True,
                }
            ],
        }
    )
    backend = SyntheticBackend()
    recorder = Recorder()
    adapter = VllmNnrpAdapter(backend, manifest, recorder=recorder)
    samples: list[tuple[int, int]] = []
    outcomes: dict[str, int] = {}
    done = 0
    t0 = time.perf_counter()
    async with NnrpServer(adapter.handle) as server:

        async def worker(n: int) -> None:
            nonlocal done
            async with await NnrpClient.connect(server.address) as client:
                i = n
                while i < ops:
                    op = await client.submit(_envelope(i), timeout=30)
                    if i % 10 == 6:
                        await op.cancel()
                    term = await op.result()
                    key = str(term.outcome)
                    outcomes[key] = outcomes.get(key, 0) + 1
                    done += 1
                    if done % sample_every == 0:
                        samples.append((done, _rss()))
                    i += sessions

        async with anyio.create_task_group() as tg:
            for n in range(sessions):
                tg.start_soon(worker, n)
        wall = time.perf_counter() - t0
        with anyio.move_on_after(10):
            while backend.unfinished or any(s.ops for s in server.sessions.values()):
                await anyio.sleep(0.01)
        unfinished = len(backend.unfinished)
    after = [rss for n, rss in samples if n > warmup]
    base = after[0] if after else 0
    lo, hi = (min(after), max(after)) if after else (0, 0)
    spread = max(hi - base, base - lo) / base * 100 if base else 0.0
    return {
        "operations": ops,
        "sessions": sessions,
        "warmup_operations": warmup,
        "wall_s": round(wall, 2),
        "ops_per_s": round(ops / wall, 1),
        "outcomes": outcomes,
        "unfinished_backend_requests": unfinished,
        "rss_after_warmup_mib": round(base / 2**20, 1),
        "rss_min_mib": round(lo / 2**20, 1),
        "rss_max_mib": round(hi / 2**20, 1),
        "rss_spread_percent": round(spread, 2),
        "flat_within_10_percent": spread <= 10.0,
        "samples": [{"operations": n, "rss_mib": round(r / 2**20, 2)} for n, r in samples],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vllm_nnrp_adapter.benchmark.soak", description=__doc__
    )
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1_000, help="operations before RSS is judged")
    parser.add_argument("--sample-every", type=int, default=250)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    if args.ops <= args.warmup:
        parser.error("--ops must exceed --warmup")
    doc = anyio.run(
        _soak, args.ops, args.sessions, args.warmup, args.sample_every, backend="asyncio"
    )
    table = Table(title=f"soak: {doc['operations']} operations, {doc['sessions']} sessions")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key in (
        "wall_s",
        "ops_per_s",
        "outcomes",
        "unfinished_backend_requests",
        "rss_after_warmup_mib",
        "rss_min_mib",
        "rss_max_mib",
        "rss_spread_percent",
        "flat_within_10_percent",
    ):
        table.add_row(key, str(doc[key]))
    Console().print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if doc["flat_within_10_percent"] and doc["unfinished_backend_requests"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
