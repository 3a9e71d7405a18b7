"""Smoke tests of docs/examples/minimal_endpoint over real loopback NNRP, with a plain
nnrp-py client (no suite code), so the example stands on its own."""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from nnrp import StreamSemantics
from nnrp.client import (
    NativeClientOptions,
    NativeClientProviderRoute,
    NativeClientSessionOptions,
    SubmitIdentity,
    SubmitPolicy,
    SubmitRequest,
    TypedPayloadInputFrame,
    TypedPayloadSubmitInput,
    connect_native_client_connection,
)
from nnrp.core import (
    MessageType,
    PayloadKind,
    TransportPolicy,
    unpack_body,
    unpack_typed_payload_frames,
)
from nnrp.native import NativeInvalidStateError, NativeWouldBlockError

pytestmark = pytest.mark.wire

ENDPOINT_DIR = Path(__file__).resolve().parents[2] / "docs" / "examples" / "minimal_endpoint"
ENDPOINT = ENDPOINT_DIR / "endpoint.py"
MODEL = "minimal-model"
SV = "openai-compatible/1"
WAIT_S = 10.0


def start_endpoint(*args: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, str(ENDPOINT), "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout=30)
    if not ready:
        stop_endpoint(proc)
        pytest.fail("endpoint printed no LISTENING line within 30 s")
    line = proc.stdout.readline().strip()
    assert line.startswith("LISTENING 127.0.0.1:"), line
    return proc, int(line.rsplit(":", 1)[1])


def stop_endpoint(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
    return proc.returncode


@pytest.fixture(scope="module")
def endpoint() -> Iterator[int]:
    proc, port = start_endpoint("--model", MODEL)
    yield port
    assert stop_endpoint(proc) == 0


@dataclass
class Outcome:
    partials: list[bytes] = field(default_factory=list)
    push: dict[str, Any] | None = None  # the RESULT_PUSH's terminal event
    pushed: bool = False  # a RESULT_PUSH came (with zero frames, push stays None)
    push_status: int | None = None
    push_frames: int = 0
    drop_code: int | None = None
    drop_diag: bytes = b""
    local_cancelled: bool = False

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(body.decode("utf-8")) for body in self.partials]


def frame(payload: bytes, semantics: StreamSemantics = StreamSemantics.SNAPSHOT) -> Any:
    return TypedPayloadInputFrame(
        profile_id=0,
        payload_kind=PayloadKind.STRUCTURED_EVENT,
        payload=payload,
        stream_semantics=semantics,
    )


def envelope(body: dict[str, Any], operation: str = "chat.completions.create", **extra: Any):
    return {"schema_version": SV, "operation": operation, "body": body, **extra}


def chat(text: str = "hello there world", **body: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": text}], **body}


async def _exchange(port: int, frames: tuple[Any, ...], cancel_after: int | None) -> Outcome:
    options = NativeClientOptions(
        endpoint="nnrp://127.0.0.1",
        provider_routes={
            "tcp": NativeClientProviderRoute(provider_endpoint=f"tcp://127.0.0.1:{port}")
        },
        transport_policy=TransportPolicy.FORCE_TCP,
    )
    out = Outcome()
    with connect_native_client_connection(options) as conn:
        session = await conn.open_session(NativeClientSessionOptions(requested_session_id=1))
        request = SubmitRequest.typed_payload(
            TypedPayloadSubmitInput(
                identity=SubmitIdentity(operation_id=1, frame_id=1),
                policy=SubmitPolicy(),
                frames=frames,
            )
        )
        op = session.submit_operation(request)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                polled = session.poll_events(max_events=1, timeout_ms=20)
            except (NativeInvalidStateError, NativeWouldBlockError):
                continue  # stale events of the cancelled operation come out as errors
            if not polled:
                continue
            event = polled[0]
            if not hasattr(event, "header"):
                out.local_cancelled |= event.payload == b"\x05"
                continue
            kind = event.header.message_type
            if kind is MessageType.PARTIAL_RESULT:
                out.partials.append(bytes(event.tail.body))
                if cancel_after is not None and len(out.partials) == cancel_after:
                    conn.cancel_operation(op)
            elif kind is MessageType.RESULT_PUSH:
                md = event.metadata.value
                out.pushed, out.push_status = True, md.status_code
                if md.payload_frame_count == 0:  # the empty success terminal (spec §3)
                    break
                view = unpack_body(event.tail.body)
                typed = unpack_typed_payload_frames(
                    view.typed_payload_descriptor_region,
                    view.typed_payload_frame_region,
                    payload_kind_bitmap=md.payload_kind_bitmap,
                )
                out.push_status, out.push_frames = md.status_code, len(typed)
                out.push = json.loads(typed[0].payload.decode("utf-8"))
                assert typed[0].stream_semantics == StreamSemantics.SNAPSHOT
                break
            elif kind is MessageType.RESULT_DROP_REASON:
                out.drop_code = int(event.metadata.value.drop_reason_code)
                out.drop_diag = bytes(event.tail.diagnostic)
                break
        session.close()
    return out


def exchange(port: int, env: dict[str, Any] | None = None, *, frames: tuple = (),
             cancel_after: int | None = None) -> Outcome:
    frames = frames or (frame(json.dumps(env).encode("utf-8")),)
    return asyncio.run(_exchange(port, frames, cancel_after))


def test_list_defects_names_at_least_fifteen() -> None:
    done = subprocess.run(
        [sys.executable, str(ENDPOINT), "--list-defects"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    names = [line.split()[0] for line in done.stdout.splitlines() if line.strip()]
    assert len(names) >= 15
    assert len(set(names)) == len(names)
    assert {"silence", "wrong-order", "missing-terminal", "flood"} <= set(names)


def test_unknown_defect_is_a_clear_cli_error() -> None:
    done = subprocess.run(
        [sys.executable, str(ENDPOINT), "--defect", "no-such-defect"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert "unknown defect 'no-such-defect'" in done.stderr


def test_capability_document_agrees_with_manifest(endpoint: int) -> None:
    out = exchange(endpoint, envelope({}, operation="nnrp.capabilities.get"))
    assert out.partials == []
    assert out.push is not None and out.push["type"] == "response.completed"
    doc = out.push["body"]
    manifest = json.loads((ENDPOINT_DIR / "manifest.json").read_text())
    for key in ("adapter", "profile", "schema_version", "compatibility_levels", "operations"):
        assert doc[key] == manifest[key], key
    assert doc["models"] == [{"id": MODEL, "owned_by": "minimal-endpoint"}]


def test_streaming_text_then_usage_then_completed(endpoint: int) -> None:
    body = chat(stream=True, max_tokens=5, stream_options={"include_usage": True})
    out = exchange(endpoint, envelope(body))
    events = out.events
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert len(deltas) == 5 and all(e["index"] == 0 for e in deltas)
    assert events[-1]["type"] == "response.usage"
    usage = events[-1]["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert out.push is not None and out.push["type"] == "response.completed"
    assert out.push_status == 200 and out.push_frames == 1
    message = out.push["body"]["choices"][0]["message"]
    assert message["content"] == "".join(e["delta"] for e in deltas)


def test_non_streaming_single_completion(endpoint: int) -> None:
    out = exchange(endpoint, envelope(chat()))
    assert out.partials == []
    assert out.push is not None
    body = out.push["body"]
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert set(body["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}


@pytest.mark.parametrize(
    ("env", "code"),
    [
        (envelope({"model": MODEL}), "missing_messages"),
        (envelope(chat(), operation="responses.create"), "unsupported_operation"),
        (envelope(chat() | {"model": "backend-error"}), "backend_error"),
        (envelope(chat()) | {"schema_version": "openai-compatible/0"}, "invalid_schema_version"),
        (envelope(chat() | {"messages": []}), "invalid_request"),
    ],
)
def test_profile_errors(endpoint: int, env: dict[str, Any], code: str) -> None:
    out = exchange(endpoint, env)
    assert out.partials == []
    assert out.push is not None and out.push["type"] == "response.error"
    assert out.push["error"]["code"] == code
    assert out.push["error"]["message"]


def test_wrong_stream_semantics_is_rejected(endpoint: int) -> None:
    payload = json.dumps(envelope(chat())).encode()
    out = exchange(endpoint, frames=(frame(payload, StreamSemantics.UNSPECIFIED),))
    assert out.push is not None and out.push["error"]["code"] == "invalid_request"


def test_tool_call_events(endpoint: int) -> None:
    tool = {"type": "function", "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }}
    body = chat("weather in Paris", stream=True, tools=[tool],
                tool_choice={"type": "function", "function": {"name": "get_weather"}})
    out = exchange(endpoint, envelope(body))
    types = [e["type"] for e in out.events]
    assert types[0] == "response.tool_call.started"
    assert types[-1] == "response.tool_call.completed"
    deltas = [e["arguments_delta"] for e in out.events if e["type"] == "response.tool_call.delta"]
    assert 2 <= len(deltas) <= 3
    assert "".join(deltas) == out.events[-1]["arguments"]
    assert json.loads(out.events[-1]["arguments"]) == {"city": "weather in Paris"}
    assert out.push is not None
    assert out.push["body"]["choices"][0]["finish_reason"] == "tool_calls"


def test_cancel_after_events_hint(endpoint: int) -> None:
    out = exchange(endpoint, envelope(chat(stream=True), nnrp={"cancel_after_events": 1}))
    assert len(out.partials) == 1
    assert out.push == {"type": "response.cancelled", "reason": "cancel_after_events",
                        "nnrp": {"diagnostics": {"cancellation": {"events_sent": 1}}}}


def test_timeout_hint(endpoint: int) -> None:
    out = exchange(endpoint, envelope(chat(stream=True, max_tokens=4000), nnrp={"timeout_ms": 5}))
    assert out.push is not None and out.push["error"]["code"] == "timeout"
    assert out.push["error"]["type"] == "timeout_error"


def test_client_cancel_gets_peer_cancelled_drop(endpoint: int) -> None:
    out = exchange(endpoint, envelope(chat(stream=True, max_tokens=4000)), cancel_after=2)
    assert out.local_cancelled
    assert out.push is None
    assert out.drop_code == 3  # PEER_CANCELLED
    diag = json.loads(out.drop_diag)
    assert diag["type"] == "response.cancelled" and diag["reason"] == "client"
    assert len(out.partials) < 4000


@pytest.mark.parametrize(
    ("defect", "env", "check"),
    [
        ("wrong-error-code", envelope({"model": MODEL}),
         lambda o: o.push["error"]["code"] == "invalid_request"),
        ("capability-lies", envelope({}, operation="nnrp.capabilities.get"),
         lambda o: 2 in o.push["body"]["compatibility_levels"]),
        ("ignores-cancel-hint", envelope(chat(stream=True), nnrp={"cancel_after_events": 1}),
         lambda o: o.push["type"] == "response.completed"),
        ("sse-framing", envelope(chat(stream=True)),
         lambda o: o.partials[0].startswith(b"data: ")),
    ],
)
def test_defects_change_exactly_their_aspect(defect: str, env: dict, check: Any) -> None:
    proc, port = start_endpoint("--model", MODEL, "--defect", defect)
    try:
        assert check(exchange(port, env))
        healthy = exchange(port, envelope(chat()))  # an unrelated request stays correct
        assert healthy.push is not None and healthy.push["type"] == "response.completed"
    finally:
        assert stop_endpoint(proc) == 0
