"""A scripted stand-in for the vLLM backend: the adapter's backend protocol, no engine.

It owns deterministic chunk sequences in vLLM's own ``chat.completion.chunk`` shape (text,
tool calls, the trailing usage chunk), the failure modes the fault tests need (reject at
submit, raise at chunk N, hang at chunk N, die mid-stream, per-chunk delays), the request
validation vLLM applies to absurd sampling parameters (so the corpus sees the same
``request_validation`` / ``context_too_long`` families the real serving layer raises), and
the bookkeeping the tests read: which requests are still unfinished and which were aborted.

A request picks its script with ``body["metadata"]["script"]`` (a name registered with
:meth:`ScriptedBackend.add` or one of :data:`BUILTIN`); without one it gets ``default``.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from typing import Any

import anyio

from vllm_nnrp_adapter.vllm_backend import BackendError

__all__ = ["BUILTIN", "Chunk", "Script", "ScriptedBackend", "expected_text"]

MAX_MODEL_LEN = 2048


@dataclass(frozen=True)
class Script:
    """What one request does. Indexes count content/tool chunks from 0."""

    kind: str = "text"             # "text" | "tools"
    n: int = 8                     # text chunks, or argument fragments per tool call
    calls: int = 1                 # tool calls (kind "tools")
    delay_s: float = 0.0           # before every chunk
    first_delay_s: float = 0.0     # before the first chunk only
    reject: str | None = None      # BackendError family raised by chat() itself
    raise_at: int | None = None    # BackendError("engine_failure") instead of chunk N
    crash_at: int | None = None    # a bare RuntimeError instead of chunk N (a backend bug)
    hang_at: int | None = None     # sleeps forever instead of chunk N
    die_at: int | None = None      # the stream just ends before chunk N: no finish, no usage
    usage: bool = True


BUILTIN: dict[str, Script] = {
    "default": Script(),
    "short": Script(n=3),
    "long": Script(n=400, delay_s=0.0005),
    "slow": Script(n=200, delay_s=0.002),
    "tools": Script(kind="tools", n=3, calls=2),
    "reject": Script(reject="engine_failure"),
    "raise": Script(n=10, raise_at=4),
    "crash": Script(n=10, crash_at=4),
    "hang": Script(n=10, hang_at=3),
    "hang-first": Script(n=10, hang_at=0),
    "die": Script(n=10, die_at=5),
    "endless": Script(n=10**9, delay_s=0.001),
}


@dataclass
class Chunk:
    """What the adapter reads off the real backend's stream items (``.data``)."""

    data: dict[str, Any]


def expected_text(script: Script) -> list[str]:
    """The content deltas a complete ``text`` script produces, in order."""
    return [f"t{i} " for i in range(script.n)]


class ScriptedBackend:
    """The backend protocol of :class:`vllm_nnrp_adapter.adapter.adapter.VllmNnrpAdapter`."""

    version = "scripted"

    def __init__(self, served_model_names: list[str] | None = None,
                 scripts: dict[str, Script] | None = None) -> None:
        self.served_model_names = list(served_model_names or ["scripted-model"])
        self.scripts = {**BUILTIN, **(scripts or {})}
        self.unfinished: set[str] = set()
        self.aborted: list[str] = []
        self.aborts_accepted = 0
        self.started = 0
        self.finished = 0
        self.prompts_seen = 0

    def add(self, name: str, script: Script) -> None:
        self.scripts[name] = script

    # --- the backend protocol ----------------------------------------------------------
    async def num_unfinished_requests(self) -> int:
        return len(self.unfinished)

    async def abort(self, request_id: str) -> bool:
        self.aborted.append(request_id)
        known = request_id in self.unfinished
        self.unfinished.discard(request_id)
        self.aborts_accepted += known
        return known

    async def chat(self, body: dict[str, Any], *, request_id: str) -> Any:
        if not isinstance(request_id, str) or not request_id:
            raise BackendError("internal", "request_id must be a non-empty string")
        if request_id in self.unfinished:
            raise BackendError("internal", f"request id {request_id!r} is already in flight")
        self.prompts_seen += 1
        script = self._script(body)
        _validate(body, self.served_model_names)
        if script.reject is not None:
            raise BackendError(script.reject, f"scripted rejection ({script.reject})", status=500,
                               error_type="InternalServerError")
        self.started += 1
        self.unfinished.add(request_id)
        if body.get("stream"):
            return self._stream(body, request_id, script)
        try:
            return await self._complete(body, request_id, script)
        finally:
            self._done(request_id)

    # --- internals -----------------------------------------------------------------------
    def _script(self, body: dict[str, Any]) -> Script:
        meta = body.get("metadata")
        name = meta.get("script", "default") if isinstance(meta, dict) else "default"
        script = self.scripts.get(name)
        if script is None:
            raise BackendError("request_validation", f"unknown script {name!r}", status=400,
                               error_type="BadRequestError")
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, int) and script.kind == "text" and max_tokens < script.n:
            script = replace(script, n=max_tokens)
        return script

    def _done(self, request_id: str) -> None:
        if request_id in self.unfinished:
            self.unfinished.discard(request_id)
            self.finished += 1

    async def _complete(self, body: dict[str, Any], request_id: str, script: Script) -> dict[str, Any]:
        chunks = [c async for c in self._chunks(body, request_id, script)]
        if not any(ch.get("finish_reason") for c in chunks for ch in c.get("choices") or ()):
            # what vLLM does when the engine dies under a non-streaming request
            raise BackendError("engine_failure", "scripted engine died before finishing",
                               status=500, error_type="EngineDeadError")
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
        usage = next((c["usage"] for c in chunks if c.get("usage")), None)
        return {
            "id": f"chatcmpl-{request_id}", "object": "chat.completion", "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "logprobs": None, "finish_reason": "length" if script.n else "stop"}],
            "usage": usage or {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
        }

    async def _stream(self, body: dict[str, Any], request_id: str, script: Script) -> AsyncIterator[Chunk]:
        try:
            async for data in self._chunks(body, request_id, script):
                yield Chunk(data)
        finally:
            # closing early (the adapter's aclose on cancel) is what frees a vLLM request too
            self._done(request_id)

    async def _chunks(self, body: dict[str, Any], request_id: str, script: Script) -> AsyncIterator[dict]:
        base = {"id": f"chatcmpl-{request_id}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": body["model"]}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish}]}

        yield chunk({"role": "assistant", "content": ""})
        if script.first_delay_s:
            await anyio.sleep(script.first_delay_s)
        count = 0
        for i, delta in enumerate(_pieces(script)):
            if script.delay_s:
                await anyio.sleep(script.delay_s)
            if i == script.raise_at:
                raise BackendError("engine_failure", f"scripted engine failure at chunk {i}",
                                   status=500, error_type="EngineDeadError")
            if i == script.crash_at:
                raise RuntimeError(f"scripted backend crash at chunk {i}")
            if i == script.hang_at:
                await anyio.sleep_forever()
            if i == script.die_at:
                return
            count += 1
            yield chunk(delta)
        finish = "tool_calls" if script.kind == "tools" else "length"
        yield chunk({}, finish)
        if script.usage:
            prompt = _prompt_tokens(body)
            out = count
            yield {**base, "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": out,
                                                    "total_tokens": prompt + out}}


def _pieces(script: Script) -> Iterator[dict[str, Any]]:
    # lazy: an "endless" script is a billion chunks long
    if script.kind == "text":
        for i in range(script.n):
            yield {"content": f"t{i} "}
        return
    for c in range(script.calls):
        yield {"tool_calls": [{"id": f"chatcmpl-tool-{c}", "type": "function", "index": c,
                               "function": {"name": f"fn_{c}", "arguments": ""}}]}
        for k in range(script.n):
            yield {"tool_calls": [{"index": c, "function": {"arguments": f'{{"a{k}":{k}}}'}}]}


def _prompt_tokens(body: dict[str, Any]) -> int:
    return sum(len(str(m.get("content") or "").split()) + 4 for m in body.get("messages") or ())


def _number(body: dict[str, Any], key: str) -> float | None:
    if key not in body or body[key] is None:
        return None
    value = body[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(f"{key}: Input should be a valid number")
    if isinstance(value, float) and not math.isfinite(value):
        raise _invalid(f"{key}: Input should be a finite number")
    return float(value)


def _invalid(message: str) -> BackendError:
    return BackendError("request_validation", message, status=400, error_type="BadRequestError")


def _validate(body: dict[str, Any], served: list[str]) -> None:
    """The checks vLLM's ChatCompletionRequest / SamplingParams apply (same families)."""
    if body.get("model") not in served:
        raise BackendError("unknown_model", f"The model `{body.get('model')}` does not exist.",
                           status=404, error_type="NotFoundError")
    ranges = {"temperature": (0.0, 2.0), "top_p": (1e-9, 1.0), "presence_penalty": (-2.0, 2.0),
              "frequency_penalty": (-2.0, 2.0)}
    for key, (lo, hi) in ranges.items():
        value = _number(body, key)
        if value is not None and not lo <= value <= hi:
            raise _invalid(f"{key} must be in [{lo}, {hi}], got {value}")
    for key in ("max_tokens", "max_completion_tokens", "n", "top_logprobs", "seed"):
        if key in body and body[key] is not None and (
                isinstance(body[key], bool) or not isinstance(body[key], int)):
            raise _invalid(f"{key}: Input should be a valid integer")
    n = body.get("n")
    if n is not None and not 1 <= n <= 128:
        raise _invalid(f"n must be in [1, 128], got {n}")
    seed = body.get("seed")
    if seed is not None and not -(2**63) <= seed < 2**63:
        raise _invalid("seed must fit a 64-bit integer")
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
    if max_tokens is not None:
        if max_tokens < 1:
            raise _invalid(f"max_tokens must be at least 1, got {max_tokens}")
        if max_tokens + _prompt_tokens(body) > MAX_MODEL_LEN:
            raise BackendError(
                "context_too_long",
                f"This model's maximum context length is {MAX_MODEL_LEN} tokens. However, you "
                f"requested {max_tokens + _prompt_tokens(body)} tokens.",
                status=400, error_type="BadRequestError")
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str | list):
        raise _invalid("stop: Input should be a valid string or list")
    for m in body.get("messages") or ():
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            raise _invalid("messages.content: Input should be a valid string or list")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise _invalid("tools: Input should be a valid list")
