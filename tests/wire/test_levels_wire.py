"""Levels 2 and 3 over the real wire: the adapter's handler on the real NNRP server binding,
the suite's client over loopback TCP, and a backend that replays what real vLLM produced
(tests/fixtures/vllm-responses/, recorded by scripts/record-vllm-responses-fixtures).

Judged here: the events and terminal a client receives for ``responses.create`` (streamed
text, streamed tool call, no stream, a failure mid-stream) and ``models.list``; that a client
cancel, the in-band hint and the envelope's deadline abort the backend request and close its
stream; and that a vLLM line that breaks a Level 2 feature is offered Level 1 only.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient
from nnrp_conformance.validation import validate_event
from vllm_nnrp_adapter.adapter.adapter import VllmNnrpAdapter
from vllm_nnrp_adapter.nnrp_server import NnrpServer
from vllm_nnrp_adapter.profile.mapping import stalled_event
from vllm_nnrp_adapter.profile.responses_mapping import ResponsesMapper
from vllm_nnrp_adapter.vllm_backend import BackendError
from vllm_nnrp_adapter.vllm_backend.families import limitations

pytestmark = [pytest.mark.anyio, pytest.mark.wire]

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "vllm-responses" / "0.22.1"
MANIFEST = json.loads((REPO / "manifests" / "vllm-nnrp-adapter.json").read_text())


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


class ReplayBackend:
    """vLLM's Responses and models answers as recorded; ``metadata.mode`` picks a variant:
    ``endless`` repeats the recorded text deltas until the request is aborted or closed,
    ``fail`` raises vLLM's mid-stream failure after the first events."""

    def __init__(self, version: str = "0.22.1") -> None:
        self.served_model_names = ["tiny-model"]
        self.version = version
        self.limitations = limitations(version)
        self.aborted: list[str] = []
        self.running: set[str] = set()
        self.closed: list[str] = []
        self.hang = False  # models.list and embeddings.create never answer

    async def chat(self, body: dict, *, request_id: str) -> Any:
        raise BackendError("internal", "chat is not replayed here")

    async def responses(self, body: dict, *, request_id: str) -> Any:
        if body.get("model") != "tiny-model":
            raise BackendError("unknown_model", f"The model `{body.get('model')}` does not exist.",
                               status=404, error_type="NotFoundError")
        if not body.get("stream"):
            return fixture("nonstream_tool_named" if body.get("tools") else "nonstream_text")["body"]
        name = "stream_tool_named" if body.get("tools") else "stream_text"
        self.running.add(request_id)
        return self._replay(fixture(name)["events"], request_id,
                            (body.get("metadata") or {}).get("mode"))

    async def _replay(self, events: list[dict], request_id: str, mode: str | None) -> AsyncIterator[dict]:
        try:
            if mode == "endless":
                for event in events[:4]:  # created, in_progress, item added, content part
                    yield event
                delta = next(e for e in events if e["type"] == "response.output_text.delta")
                while request_id in self.running:
                    await anyio.sleep(0.005)
                    yield delta
                return
            for n, event in enumerate(events):
                if mode == "fail" and n == 5:
                    raise BackendError("engine_failure", "the generation failed in vLLM",
                                       status=500, error_type="GenerationError")
                yield event
        finally:
            self.closed.append(request_id)
            self.running.discard(request_id)

    async def list_models(self) -> dict:
        if self.hang:
            await anyio.sleep(3600)
        return fixture("models")

    async def embeddings(self, body: dict, *, request_id: str) -> dict:
        """The recorded answer of the embeddings engine for the same input."""
        if self.hang:
            await anyio.sleep(3600)
        for entry in fixture("embeddings")["requests"].values():
            if entry["request"]["input"] == body.get("input") \
                    and entry["request"]["model"] == body.get("model"):
                if "error" in entry:
                    e = entry["error"]
                    raise BackendError(e["family"], e["message"], status=e["status"],
                                       error_type=e["error_type"])
                return entry["body"]
        raise AssertionError(f"no recorded embeddings answer for {body!r}")

    async def abort(self, request_id: str) -> bool:
        self.aborted.append(request_id)
        running = request_id in self.running
        self.running.discard(request_id)
        return running


def responses(**body: Any) -> dict:
    return {"schema_version": contract.SCHEMA_VERSION, "operation": contract.OP_RESPONSES_CREATE,
            "body": {"model": "tiny-model", "input": "Say hello.", **body}}


async def serve(backend: ReplayBackend, **settings: Any):  # type: ignore[no-untyped-def]
    adapter = VllmNnrpAdapter(backend, MANIFEST, **settings)
    return NnrpServer(adapter.handle)


async def run(client: NnrpClient, env: dict) -> tuple[list[dict], Any]:
    op = await client.submit(env, timeout=30)
    term = await op.result()
    events = [r.event for r in op.received if r.kind == "partial"]
    for e in [*events, *([term.event] if term.event else [])]:
        assert validate_event(e) == [], e
    assert op.wire_findings == []
    return events, term


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_streamed_text_arrives_as_mapped_then_the_response() -> None:
    backend = ReplayBackend()
    expected_mapper = ResponsesMapper()
    recorded = fixture("stream_text")["events"]
    expected = [e for r in recorded for e in expected_mapper.map_event(r)]
    async with await serve(backend) as srv, await NnrpClient.connect(srv.address) as client:
        events, term = await run(client, responses(stream=True))
    assert events == expected
    assert term.delivery == "result_push" and term.status_code == contract.WIRE_STATUS_OK
    assert term.event == expected_mapper.completed_event()
    assert backend.aborted == []  # a stream that ended by itself is not aborted


async def test_streamed_tool_call_and_non_streamed_answers() -> None:
    backend = ReplayBackend()
    async with await serve(backend) as srv, await NnrpClient.connect(srv.address) as client:
        events, term = await run(client, responses(stream=True, tools=[{"type": "function",
                                                                        "name": "lookup"}]))
        kinds = [e["type"] for e in events]
        assert contract.EV_TOOL_CALL_STARTED in kinds and contract.EV_TOOL_CALL_COMPLETED in kinds
        assert term.event["type"] == contract.EV_COMPLETED
        events, term = await run(client, responses())
        assert events == [] and term.event == {"type": contract.EV_COMPLETED,
                                               "body": fixture("nonstream_text")["body"]}


async def test_models_list_and_the_bad_bodies() -> None:
    backend = ReplayBackend()
    async with await serve(backend) as srv, await NnrpClient.connect(srv.address) as client:
        events, term = await run(client, {"schema_version": contract.SCHEMA_VERSION,
                                          "operation": contract.OP_MODELS_LIST, "body": {}})
        assert events == [] and term.event == {"type": contract.EV_COMPLETED,
                                               "body": fixture("models")}
        _, term = await run(client, {"schema_version": contract.SCHEMA_VERSION,
                                     "operation": contract.OP_RESPONSES_CREATE,
                                     "body": {"model": "tiny-model"}})
        assert term.event["error"]["code"] == contract.ERR_INVALID_REQUEST
        assert term.status_code == contract.WIRE_STATUS_ERROR
        _, term = await run(client, responses(model="backend-error"))
        assert term.event["error"]["code"] == contract.ERR_BACKEND_ERROR
        assert term.diagnostics["backend_error"]["status"] == 404


def embeddings(**body: Any) -> dict:
    return {"schema_version": contract.SCHEMA_VERSION,
            "operation": contract.OP_EMBEDDINGS_CREATE, "body": body}


async def test_embeddings_are_vllm_s_answer_as_one_result() -> None:
    """embeddings.create: no partial results, one response.completed whose body is what the
    embeddings engine answered (recorded from real vLLM); a bad input is refused before the
    backend, an unknown model is vLLM's own error."""
    recorded = fixture("embeddings")["requests"]
    backend = ReplayBackend()
    async with await serve(backend) as srv, await NnrpClient.connect(srv.address) as client:
        events, term = await run(client, embeddings(**recorded["shape"]["request"]))
        assert events == [] and term.event == {"type": contract.EV_COMPLETED,
                                               "body": recorded["shape"]["body"]}
        vectors = [d["embedding"] for d in term.event["body"]["data"]]
        assert [d["index"] for d in term.event["body"]["data"]] == [0, 1]
        assert len(vectors[0]) == len(vectors[1]) > 0
        _, term = await run(client, embeddings(model="tiny-model", input=42))
        assert term.event["error"]["code"] == contract.ERR_INVALID_REQUEST
        assert term.diagnostics["param"] == "body.input"
        _, term = await run(client, embeddings(**recorded["unknown_model"]["request"]))
        assert term.event["error"]["code"] == contract.ERR_BACKEND_ERROR
        assert term.diagnostics["backend_error"]["status"] == 404


async def test_a_failure_mid_stream_ends_in_backend_error() -> None:
    backend = ReplayBackend()
    async with await serve(backend) as srv, await NnrpClient.connect(srv.address) as client:
        events, term = await run(client, responses(stream=True, metadata={"mode": "fail"}))
    assert events and term.event["type"] == contract.EV_ERROR
    assert term.event["error"]["code"] == contract.ERR_BACKEND_ERROR


async def test_client_cancel_aborts_the_backend_request() -> None:
    backend = ReplayBackend()
    async with await serve(backend) as srv, await NnrpClient.connect(srv.address) as client:
        op = await client.submit(responses(stream=True, metadata={"mode": "endless"}), timeout=30)
        with anyio.fail_after(10):
            while len(op.received) < 10:
                await anyio.sleep(0.005)
        await op.cancel()
        term = await op.result()
    assert term.outcome == contract.TERMINAL_CANCELLED and term.delivery == "result_drop"
    assert term.diagnostics["cancellation"]["abort_hooks"] == 1
    # the backend was told to abort exactly this request, and its stream was closed
    assert len(backend.aborted) == 1 and backend.closed == backend.aborted
    assert backend.running == set()


@pytest.mark.parametrize("nnrp", [{"cancel_after_events": 3}, {"timeout_ms": 300}],
                         ids=["hint", "deadline"])
async def test_the_binding_s_own_stops_abort_the_backend_request(nnrp) -> None:  # type: ignore[no-untyped-def]
    backend = ReplayBackend()
    async with await serve(backend) as srv, await NnrpClient.connect(srv.address) as client:
        env = responses(stream=True, metadata={"mode": "endless"})
        env["nnrp"] = nnrp
        events, term = await run(client, env)
    if "cancel_after_events" in nnrp:
        assert len(events) == 3 and term.event["type"] == contract.EV_CANCELLED
    else:
        assert term.event["error"]["code"] == contract.ERR_TIMEOUT
    assert term.diagnostics["cancellation"]["abort_hooks"] == 1
    assert len(backend.aborted) == 1 and backend.closed == backend.aborted
    assert backend.running == set()


async def test_the_lower_bound_line_is_offered_level_1_only() -> None:
    backend = ReplayBackend("0.18.1")
    async with await serve(backend) as srv, await NnrpClient.connect(srv.address) as client:
        doc = await client.capabilities()
        assert doc["compatibility_levels"] == [1]
        for operation in (contract.OP_RESPONSES_CREATE, contract.OP_MODELS_LIST,
                          contract.OP_EMBEDDINGS_CREATE):
            _, term = await run(client, {"schema_version": contract.SCHEMA_VERSION,
                                         "operation": operation, "body": {"input": "hi"}})
            assert term.event["error"]["code"] == contract.ERR_UNSUPPORTED_OPERATION


async def test_a_backend_that_never_answers_models_or_embeddings_ends_in_the_stall_error() -> None:
    """models.list and embeddings.create are awaited whole: a backend that never answers
    ends, after the stall bound, in the same error a stalled stream gets."""
    backend = ReplayBackend()
    backend.hang = True
    async with await serve(backend, backend_stall_timeout_s=0.2) as srv, \
            await NnrpClient.connect(srv.address) as client:
        recorded = fixture("embeddings")["requests"]["shape"]["request"]
        for env in ({"schema_version": contract.SCHEMA_VERSION,
                     "operation": contract.OP_MODELS_LIST, "body": {}}, embeddings(**recorded)):
            events, term = await run(client, env)
            assert events == [] and term.event == stalled_event(0.2), term
            assert term.status_code == contract.WIRE_STATUS_SERVER_ERROR
