"""The plugin middleware's NNRP server over the real wire, bound to what ``app.state`` holds.

No vLLM here: the backend seam (:meth:`NnrpServing._bind_backend`) gets a small scripted
backend built from the state's serving object, so the lifespan wiring, the shared serving code
(:func:`vllm_nnrp_adapter.launch.serve.nnrp_serving`), the ready file, the diagnostics and the clean
stop are checked in the dev venv; tests/real_vllm/test_vllm_plugin_real.py does the same inside
real vLLM.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient
from vllm_nnrp_adapter import vllm_plugin
from vllm_nnrp_adapter.launch.processes import listening_tcp_ports
from vllm_nnrp_adapter.vllm_backend import StreamChunk

pytestmark = [pytest.mark.anyio, pytest.mark.wire]


class ServingChat:
    """Stands in for ``app.state.openai_serving_chat``: the words it streams."""

    words = ("hel", "lo")


class Backend:
    """The adapter's backend protocol over :class:`ServingChat`."""

    version = "0.0-scripted"
    startup_path = vllm_plugin.STARTUP_PATH
    max_model_len = 512

    def __init__(self, chat: ServingChat) -> None:
        self.chat_obj = chat
        self.served_model_names = ["scripted"]
        self.aborted_in_flight = False

    async def chat(self, body: dict[str, Any], *, request_id: str) -> Any:
        return self._stream(request_id)

    async def _stream(self, request_id: str):  # type: ignore[no-untyped-def]
        base = {"id": f"chatcmpl-{request_id}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": "scripted"}

        def chunk(delta: dict, finish: str | None = None) -> StreamChunk:
            data = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            return StreamChunk(data=data, raw=json.dumps(data))

        yield chunk({"role": "assistant", "content": ""})
        for word in self.chat_obj.words:
            yield chunk({"content": word})
        yield chunk({}, "stop")
        usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        yield StreamChunk(data={**base, "choices": [], "usage": usage}, raw="")

    async def abort(self, request_id: str) -> bool:
        return False

    async def num_unfinished_requests(self) -> int:
        return 0

    async def abort_in_flight(self) -> None:
        self.aborted_in_flight = True


class Serving(vllm_plugin.NnrpServing):
    bound: Backend | None = None

    def _bind_backend(self, state: Any, config: Any) -> Backend:
        Serving.bound = Backend(state.openai_serving_chat)
        return Serving.bound


@pytest.fixture
def enabled(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in list(os.environ):
        if name.startswith(vllm_plugin.ENV_PREFIX):
            monkeypatch.delenv(name)
    ready = tmp_path / "ready.json"
    monkeypatch.setenv(vllm_plugin.ENV_LISTEN, "127.0.0.1:0")
    monkeypatch.setenv(vllm_plugin.ENV_PREFIX + "READY_FILE", str(ready))
    # what register() leaves behind in vLLM's main process (it needs vLLM to check the version)
    monkeypatch.setattr(vllm_plugin, "_armed", vllm_plugin.settings_from_environ())
    return ready


async def _lifespan(app: Any, scope: dict, while_started) -> list[dict]:  # type: ignore[no-untyped-def]
    send_in, receive_from = anyio.create_memory_object_stream[dict](4)
    sent: list[dict] = []

    async def inner(scope, receive, send):  # type: ignore[no-untyped-def]
        assert (await receive())["type"] == "lifespan.startup"
        await send({"type": "lifespan.startup.complete"})
        assert (await receive())["type"] == "lifespan.shutdown"
        await send({"type": "lifespan.shutdown.complete"})

    async def send(message: dict) -> None:
        sent.append(message)
        if message["type"] == "lifespan.startup.complete":
            await while_started()
        if message["type"].startswith("lifespan.startup."):
            await send_in.send({"type": "lifespan.shutdown"})

    app.app = inner
    await send_in.send({"type": "lifespan.startup"})
    with anyio.fail_after(60):
        await app(scope, receive_from.receive, send)
    return sent


def _state(api_server_count: int | None = None, rank: int | None = None) -> SimpleNamespace:
    """``app.state`` as vLLM builds it; with ``rank``, the API server's place as vLLM records
    it in the engine client's config (``parallel_config._api_process_rank``/``_count``)."""
    client: Any = object()
    if rank is not None:
        parallel = SimpleNamespace(_api_process_rank=rank, _api_process_count=api_server_count)
        client = SimpleNamespace(vllm_config=SimpleNamespace(parallel_config=parallel))
    return SimpleNamespace(
        args=SimpleNamespace(api_server_count=api_server_count),
        engine_client=client,
        openai_serving_chat=ServingChat(),
    )


async def test_serves_nnrp_for_the_life_of_the_app(enabled: Path) -> None:
    mw = Serving(None)
    state = _state()
    seen: dict[str, Any] = {}

    async def while_started() -> None:
        info = json.loads(enabled.read_text())
        seen["info"] = info
        assert info == mw.info and info["startup_path"] == "vllm-plugin"
        seen["port"] = int(info["address"].rsplit(":", 1)[1])
        assert seen["port"] in listening_tcp_ports(os.getpid())
        async with await NnrpClient.connect(info["address"]) as client:
            op = await client.submit(
                {"schema_version": contract.SCHEMA_VERSION,
                 "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
                 "body": {"messages": [{"role": "user", "content": "hi"}], "stream": True}},
                timeout=10,
            )
            deltas = [e.event.get("delta") async for e in op
                      if e.event and e.event["type"] == contract.EV_OUTPUT_TEXT_DELTA]
            assert deltas == ["hel", "lo"]  # the serving object from app.state answered
            caps = await client.submit(
                {"schema_version": contract.SCHEMA_VERSION,
                 "operation": contract.OP_CAPABILITIES_GET, "body": {},
                 "nnrp": {"diagnostics": True}},
                timeout=10,
            )
            term = await caps.result()
            assert term.diagnostics["startup_path"] == "vllm-plugin"

    sent = await _lifespan(mw, {"type": "lifespan", "app": SimpleNamespace(state=state)},
                           while_started)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert "info" in seen
    assert seen["port"] not in listening_tcp_ports(os.getpid())  # closed on shutdown
    assert Serving.bound is not None and Serving.bound.aborted_in_flight
    assert Serving.bound.chat_obj is state.openai_serving_chat


async def test_refuses_several_api_servers_when_the_rank_is_unknown(enabled: Path) -> None:
    async def never() -> None:
        raise AssertionError("must not start")

    mw = Serving(None)
    sent = await _lifespan(mw, {"type": "lifespan", "app": SimpleNamespace(state=_state(2))}, never)
    assert sent[0]["type"] == "lifespan.startup.failed"
    assert "--api-server-count 2, but this API server's rank is not in the engine client's " \
        "config" in sent[0]["message"]
    assert not enabled.exists() and mw.info is None


def _free_port_pair() -> int:
    """A port P with P and P + 1 both free just now."""
    import socket

    for _ in range(50):
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            try:
                b.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise AssertionError("no two adjacent free ports")


async def test_each_api_server_serves_its_own_address(enabled: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    port = _free_port_pair()
    monkeypatch.setattr(vllm_plugin._armed, "listen", f"127.0.0.1:{port}")
    ready = [enabled, enabled.with_name("ready.1.json")]
    servers = [Serving(None), Serving(None)]
    answered: list[list[str]] = []

    async def both_up(rank: int, started: anyio.Event, done: anyio.Event) -> None:
        started.set()
        await done.wait()  # both API servers are up at once, as under vLLM

    async def serve(rank: int, started: anyio.Event, done: anyio.Event) -> None:
        await _lifespan(servers[rank], {"type": "lifespan", "app": SimpleNamespace(
            state=_state(2, rank))}, lambda: both_up(rank, started, done))

    events = [(anyio.Event(), anyio.Event()) for _ in range(2)]
    async with anyio.create_task_group() as tg:
        for rank in range(2):
            tg.start_soon(serve, rank, *events[rank])
        for started, _ in events:
            with anyio.fail_after(30):
                await started.wait()
        for rank in range(2):
            info = json.loads(ready[rank].read_text())
            assert info["address"] == f"127.0.0.1:{port + rank}", info
            assert info["api_server"] == {"rank": rank, "count": 2}
            async with await NnrpClient.connect(info["address"]) as client:
                op = await client.submit(
                    {"schema_version": contract.SCHEMA_VERSION,
                     "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
                     "body": {"messages": [{"role": "user", "content": "hi"}], "stream": True}},
                    timeout=10)
                answered.append([e.event.get("delta") async for e in op
                                 if e.event and e.event["type"] == contract.EV_OUTPUT_TEXT_DELTA])
        for _, done in events:
            done.set()
    assert answered == [["hel", "lo"], ["hel", "lo"]]
    assert not {port, port + 1} & set(listening_tcp_ports(os.getpid()))


async def test_a_port_in_use_fails_the_start_up(enabled: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setattr(vllm_plugin._armed, "listen", f"127.0.0.1:{port}")

        async def never() -> None:
            raise AssertionError("must not start")

        sent = await _lifespan(Serving(None), {"type": "lifespan",
                                               "app": SimpleNamespace(state=_state())}, never)
    assert sent[0]["type"] == "lifespan.startup.failed"
    assert "did not start" in sent[0]["message"]
    assert f"address 127.0.0.1:{port} already in use" in sent[0]["message"]
