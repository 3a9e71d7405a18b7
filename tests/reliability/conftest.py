"""The reliability tests' harness: the real adapter handler on the real NNRP server binding,
driving the scripted backend, with the suite's client over loopback TCP.

``serve_adapter()`` yields an :class:`AdapterUnderTest`; :meth:`AdapterUnderTest.leaks`
lists everything still open once the traffic is done (operations, handler tasks, recorder
in-flight count, unfinished backend requests, live operation contexts), so every test can
end with ``assert await a.settle() == []``.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from nnrp_conformance import contract
from vllm_nnrp_adapter.adapter.adapter import VllmNnrpAdapter
from vllm_nnrp_adapter.benchmark.soak.memory import object_census
from vllm_nnrp_adapter.nnrp_server import NnrpServer, OperationContext
from vllm_nnrp_adapter.observability.observability import Recorder

sys.path.insert(0, str(Path(__file__).parent))
from scripted_backend import ScriptedBackend

REPO = Path(__file__).resolve().parents[2]
MANIFEST = json.loads((REPO / "manifests" / "vllm-nnrp-adapter.json").read_text())
MODEL = "scripted-model"


@pytest.fixture
def anyio_backend() -> str:
    # the server binding schedules its handlers with asyncio primitives
    return "asyncio"


def envelope(body: dict[str, Any] | None = None, *, operation: str = contract.OP_CHAT_COMPLETIONS_CREATE,
             **nnrp: Any) -> dict[str, Any]:
    env: dict[str, Any] = {"schema_version": contract.SCHEMA_VERSION, "operation": operation,
                           "body": body if body is not None else {}}
    if nnrp:
        env["nnrp"] = nnrp
    return env


def chat(script: str = "default", *, stream: bool = True, text: str = "hello", **extra: Any) -> dict[str, Any]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}], "stream": stream,
            "metadata": {"script": script}, **extra}
    return body


@dataclass
class AdapterUnderTest:
    server: NnrpServer
    adapter: VllmNnrpAdapter
    backend: ScriptedBackend
    recorder: Recorder

    @property
    def address(self) -> str:
        return self.server.address

    def leaks(self) -> list[str]:
        out = []
        open_ops = sum(len(s.ops) for s in self.server.sessions.values())
        if open_ops:
            out.append(f"{open_ops} operations still open in the server binding")
        if self.server._tasks:
            out.append(f"{len(self.server._tasks)} handler tasks still running")
        in_flight = self.recorder.snapshot()["in_flight"]
        if in_flight:
            out.append(f"recorder in_flight={in_flight}")
        if self.backend.unfinished:
            out.append(f"{len(self.backend.unfinished)} backend requests unfinished: "
                       f"{sorted(self.backend.unfinished)[:5]}")
        return out

    async def settle(self, limit_s: float = 10.0) -> list[str]:
        """Wait (bounded) for the binding to wind down, then report what is still open."""
        with anyio.move_on_after(limit_s):
            while self.leaks():
                await anyio.sleep(0.01)
        return self.leaks()


def live_contexts() -> int:
    # counted as the soak counts (no other thread runs Python code meanwhile: soak/memory.py)
    return object_census()[OperationContext.__qualname__]


@contextlib.asynccontextmanager
async def serve_adapter(backend: ScriptedBackend | None = None, **server_kw: Any) -> AsyncIterator[AdapterUnderTest]:
    backend = backend or ScriptedBackend([MODEL])
    recorder = Recorder()
    adapter = VllmNnrpAdapter(backend, MANIFEST, recorder=recorder)
    async with NnrpServer(adapter.handle, "127.0.0.1:0", **server_kw) as server:
        yield AdapterUnderTest(server, adapter, backend, recorder)


def after_terminal_findings(op: Any) -> list[dict[str, Any]]:
    """Wire findings that mean an event arrived after the terminal (or after the cancel)."""
    bad = ("wire.frame_after_terminal", "wire.partial_after_cancel", "wire.result_after_cancel")
    return [f for f in op.wire_findings if f["rule"] in bad]
