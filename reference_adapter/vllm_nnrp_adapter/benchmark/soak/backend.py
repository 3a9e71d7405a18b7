"""The soak's deterministic synthetic backend: vLLM-shaped chunks without an engine (the
soak measures the adapter and the wire, not generation), scripted per request by its
``metadata`` (text of N tokens, tool calls, a rejection)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio

MODEL = "soak-model"


TOKENS = 8


@dataclass
class _Chunk:
    data: dict[str, Any]


class SyntheticBackend:
    """vLLM's chunk shape for a fixed answer; counts unfinished requests like the engine."""

    version = "synthetic"

    def __init__(self, tokens: int = TOKENS) -> None:
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
            return {
                "id": f"chatcmpl-{request_id}",
                "object": "chat.completion",
                "created": 0,
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": _text(self.tokens)},
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


def _text(tokens: int) -> str:
    return "".join(f"t{i} " for i in range(tokens))
