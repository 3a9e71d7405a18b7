"""Handlers the wire tests serve (also run in a subprocess server: ``python -m tests.wire.handlers``)."""

from __future__ import annotations

import sys
from typing import Any

import anyio

from nnrp_conformance import contract


def delta(i: int) -> dict[str, Any]:
    return {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": f"d{i}"}


class Recorder:
    """Collects what the handler saw, for assertions (aborts, cancel info)."""

    def __init__(self) -> None:
        self.aborts: list[Any] = []
        self.started: list[int] = []
        self.finished: list[int] = []
        # burst_then_gate: the test opens the gate once its reader has seen the whole burst
        self.gate = anyio.Event()
        self.gate_timed_out: bool | None = None


def make_handler(rec: Recorder | None = None, *, accept_abort: bool = True):  # type: ignore[no-untyped-def]
    rec = rec or Recorder()

    async def handler(ctx: Any) -> Any:
        rec.started.append(ctx.operation_id)
        ctx.on_abort(lambda info: rec.aborts.append((ctx.operation_id, info)) or accept_abort)
        body = ctx.envelope.get("body") or {}
        mode = body.get("mode", "echo")
        try:
            if ctx.envelope.get("operation") == contract.OP_CAPABILITIES_GET:
                yield {"type": contract.EV_COMPLETED, "body": {"profile": contract.PROFILE}}
                return
            if mode == "echo":
                yield {
                    "type": contract.EV_OUTPUT_TEXT_DELTA,
                    "index": 0,
                    "delta": str(body.get("text", "")),
                }
                yield {"type": contract.EV_COMPLETED, "body": {"echo": body.get("text")}}
            elif mode == "stream":
                for i in range(int(body.get("n", 10))):
                    yield delta(i)
                    if body.get("gap_ms"):
                        await anyio.sleep(body["gap_ms"] / 1000)
                if not body.get("no_terminal"):
                    yield {"type": contract.EV_COMPLETED, "body": {"n": body.get("n")}}
            elif mode == "burst_then_pause":
                # back-to-back events (the client holds their hand-off), then a long silence
                for i in range(int(body.get("n", 50))):
                    yield delta(i)
                await anyio.sleep(body.get("pause_ms", 500) / 1000)
                yield {"type": contract.EV_COMPLETED, "body": {"n": body.get("n")}}
            elif mode == "burst_then_gate":
                # back-to-back events, then nothing until the reader has seen all of them:
                # a client that held the last hand-off until the next frame never opens the gate
                for i in range(int(body.get("n", 50))):
                    yield delta(i)
                with anyio.move_on_after(body.get("gate_s", 10)) as scope:
                    await rec.gate.wait()
                rec.gate_timed_out = scope.cancelled_caught
                yield {"type": contract.EV_COMPLETED, "body": {"n": body.get("n")}}
            elif mode == "forever":
                # keeps yielding whatever happens: the binding must stop emission itself
                i = 0
                while True:
                    yield delta(i)
                    i += 1
                    await anyio.sleep(body.get("gap_ms", 5) / 1000)
            elif mode == "silent":
                await anyio.sleep(3600)
            elif mode == "error":
                yield {
                    "type": contract.EV_ERROR,
                    "error": {
                        "type": "invalid_request_error",
                        "code": "missing_messages",
                        "message": "no messages",
                    },
                }
            elif mode == "crash":
                yield delta(0)
                raise RuntimeError("boom")
        finally:
            rec.finished.append(ctx.operation_id)

    return handler


async def _serve(listen: str) -> None:
    from vllm_nnrp_adapter.nnrp_server import NnrpServer

    async with NnrpServer(make_handler(), listen) as srv:
        print(srv.address, flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)


if __name__ == "__main__":
    anyio.run(_serve, sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:0")
