"""vllm_backend against a real vLLM CPU engine (run inside a vLLM venv).

One engine per module (tiny random model): streaming, usage, non-streaming, forced tool
call, abort (explicit and by closing the stream) with the engine's unfinished count back
to 0, and the rejection families. Invoked as
``<vllm-venv>/bin/python -m pytest tests/real_vllm/test_backend_real.py``; the tiny model
comes from ``NNRP_TINY_MODEL`` or is built into the test's temporary folder.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")

import anyio
from probe import SCHEMA_IGNORED_BY_FORCED_TOOL_CALLS

from vllm_nnrp_adapter import TESTED_VERSIONS
from vllm_nnrp_adapter.tiny_model import build_tiny_model
from vllm_nnrp_adapter.vllm_backend import (
    BackendError,
    VllmBackend,
    detect_vllm_version,
)

pytestmark = [pytest.mark.real_vllm, pytest.mark.anyio]

MODEL = "tiny-model"
MESSAGES = [{"role": "user", "content": "Say hello."}]
TOOLS = [{"type": "function", "function": {
    "name": "lookup",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                   "required": ["q"]},
}}]
LONG = {"model": MODEL, "messages": MESSAGES, "stream": True, "max_tokens": 400,
        "ignore_eos": True, "temperature": 0}


def _engine_env() -> None:
    """Fill in the engine environment the venv builder recorded, unless already set.

    The engine core and worker are spawned processes: they inherit os.environ as it is
    when the engine starts, so setting it here (before start-up) is enough.
    """
    recorded = Path(sys.prefix) / "nnrp-vllm-env.json"
    if recorded.is_file():
        for key, value in json.loads(recorded.read_text()).items():
            os.environ.setdefault(key, value)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("NNRP_TINY_MODEL")
    if given:
        return build_tiny_model(Path(given))
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
async def backend(model_dir: Path):
    _engine_env()
    argv = [str(model_dir), "--dtype", "bfloat16", "--max-model-len", "512",
            "--enforce-eager", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
            "--served-model-name", MODEL, "--seed", "0"]
    async with VllmBackend.from_cli_args(argv) as b:
        yield b


async def _settled(backend: VllmBackend) -> int:
    """The unfinished count once it stops changing (bounded: at most ~5 s of polling)."""
    count = await backend.num_unfinished_requests()
    for _ in range(100):
        if count == 0:
            return 0
        await anyio.sleep(0.05)
        count = await backend.num_unfinished_requests()
    return count


async def test_identity(backend: VllmBackend) -> None:
    assert backend.version == detect_vllm_version()
    assert backend.version in TESTED_VERSIONS
    assert backend.served_model_names == [MODEL]
    assert backend.max_model_len == 512
    assert backend.startup_path == "explicit"
    assert await backend.health() is True


async def test_stream_text_with_usage(backend: VllmBackend) -> None:
    body = {"model": MODEL, "messages": MESSAGES, "stream": True, "max_tokens": 8,
            "temperature": 0, "stream_options": {"include_usage": True}}
    stream = await backend.chat(body, request_id="t-stream")
    chunks = [c async for c in stream]
    assert chunks[0].data["object"] == "chat.completion.chunk"
    assert chunks[0].data["choices"][0]["delta"]["role"] == "assistant"
    assert all(json.loads(c.raw) == c.data for c in chunks)
    usage = chunks[-1].data
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 8
    assert usage["usage"]["total_tokens"] == (
        usage["usage"]["prompt_tokens"] + usage["usage"]["completion_tokens"])
    finishes = [ch["finish_reason"] for c in chunks for ch in c.data["choices"]
                if ch.get("finish_reason")]
    assert finishes == ["length"]
    assert chunks[0].data["id"] == "chatcmpl-t-stream"
    assert await _settled(backend) == 0


async def test_non_streaming_body(backend: VllmBackend) -> None:
    body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 5, "temperature": 0}
    result = await backend.chat(body, request_id="t-plain")
    assert isinstance(result, dict)
    assert result["object"] == "chat.completion"
    assert result["choices"][0]["message"]["role"] == "assistant"
    assert result["usage"]["completion_tokens"] == 5
    json.dumps(result)  # JSON-ready as returned


async def test_forced_named_tool_call_streams_tool_deltas(backend: VllmBackend) -> None:
    body = {"model": MODEL, "messages": MESSAGES, "stream": True, "max_tokens": 12,
            "temperature": 0, "tools": TOOLS,
            "tool_choice": {"type": "function", "function": {"name": "lookup"}}}
    stream = await backend.chat(body, request_id="t-tool")
    calls = [tc for c in [c async for c in stream] for ch in c.data["choices"]
             for tc in ch["delta"].get("tool_calls") or []]
    assert calls[0]["function"]["name"] == "lookup"
    assert calls[0]["type"] == "function" and calls[0]["id"]
    args = "".join(tc["function"].get("arguments", "") for tc in calls)
    if backend.version not in SCHEMA_IGNORED_BY_FORCED_TOOL_CALLS:
        assert args.startswith("{")


async def test_abort_mid_stream(backend: VllmBackend) -> None:
    stream = await backend.chat(LONG, request_id="t-abort")
    seen = 0
    accepted = None
    last = None
    async for chunk in stream:
        seen += 1
        last = chunk
        if seen == 3:
            accepted = await backend.abort("t-abort")
    assert accepted is True
    assert seen < 400
    assert last is not None and last.data["choices"][0]["finish_reason"] == "abort"
    assert await _settled(backend) == 0
    assert await backend.health() is True


async def test_closing_stream_early_aborts(backend: VllmBackend) -> None:
    stream = await backend.chat(LONG, request_id="t-close")
    seen = 0
    async for _chunk in stream:
        seen += 1
        if seen == 3:
            break
    assert await backend.num_unfinished_requests() == 1
    await stream.aclose()
    assert await _settled(backend) == 0
    assert await backend.abort("t-close") is False


async def test_cancelling_consumer_aborts(backend: VllmBackend) -> None:
    stream = await backend.chat(LONG, request_id="t-cancel")
    with anyio.CancelScope() as scope:
        seen = 0
        async for _chunk in stream:
            seen += 1
            if seen == 3:
                scope.cancel()
    assert await _settled(backend) == 0


async def test_abort_before_first_chunk(backend: VllmBackend) -> None:
    stream = await backend.chat(LONG, request_id="t-early")
    assert await backend.abort("t-early") is True
    assert [c async for c in stream] == []
    assert await _settled(backend) == 0


async def test_abort_of_unknown_request_is_not_accepted(backend: VllmBackend) -> None:
    assert await backend.abort("never-submitted") is False


async def test_unknown_model(backend: VllmBackend) -> None:
    with pytest.raises(BackendError) as err:
        await backend.chat({"model": "no-such-model", "messages": MESSAGES}, request_id="e1")
    e = err.value
    assert (e.family, e.status, e.error_type) == ("unknown_model", 404, "NotFoundError")
    assert "no-such-model" in e.message
    assert e.original["error"]["code"] == 404


async def test_missing_messages(backend: VllmBackend) -> None:
    with pytest.raises(BackendError) as err:
        await backend.chat({"model": MODEL}, request_id="e2")
    e = err.value
    assert (e.family, e.status) == ("request_validation", 400)
    assert "messages" in e.message and "Field required" in e.message


@pytest.mark.parametrize("body", [
    {"model": MODEL, "messages": MESSAGES, "max_tokens": 100000},
    {"model": MODEL, "messages": [{"role": "user", "content": "word " * 600}],
     "max_tokens": 4},
], ids=["max_tokens", "long_prompt"])
async def test_context_too_long(backend: VllmBackend, body: dict) -> None:
    with pytest.raises(BackendError) as err:
        await backend.chat(body, request_id="e3")
    e = err.value
    assert (e.family, e.status) == ("context_too_long", 400)
    assert "512" in e.message


async def test_other_bad_values_are_request_validation(backend: VllmBackend) -> None:
    for i, body in enumerate([
        {"model": MODEL, "messages": "not a list"},
        {"model": MODEL, "messages": MESSAGES, "max_tokens": -1},
        {"model": MODEL, "messages": MESSAGES, "tool_choice": "required"},
    ]):
        with pytest.raises(BackendError) as err:
            await backend.chat(body, request_id=f"e4-{i}")
        assert (err.value.family, err.value.status) == ("request_validation", 400), body
    assert await _settled(backend) == 0
    assert await backend.health() is True
