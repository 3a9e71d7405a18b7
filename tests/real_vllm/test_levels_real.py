"""Levels 2 and 3 against real vLLM CPU, on both lines, over the real NNRP wire.

One adapter per line (explicit start-up path, the tiny model with the long context of
``long_context.py``, so a generation asked for ``MAX_TOKENS`` with ``ignore_eos`` cannot end
inside the test's window). What the adapter claims on each line is judged first:

* 0.22.1 (current line) claims Levels 1, 2 and 3: ``responses.create`` streams text with its
  output items (the streamed items are the ones in the final Response), answers without a
  stream, streams a forced tool call (named and ``required``) as ``tool_call.*`` events on
  a ``function_call`` item, refuses ``store``/``background``/``previous_response_id``; a client
  cancel, a session close, ``nnrp.timeout_ms`` and the in-band hint each end the engine
  request (vLLM's own unfinished count, asked through the discovery operation's diagnostics,
  reaches 0 although the generation still needed far longer); ``models.list`` lists exactly
  the capability document's models.
* 0.18.1 (lower bound) claims Level 1 only: vLLM 0.18.1's Responses stream breaks with tools
  (vllm_backend.lines, evidence in tests/fixtures/vllm-responses/0.18.1/), so Level 2 is not
  claimed, nor Level 3 (a higher level includes the lower ones). Every test's own request is
  answered ``unsupported_operation`` there (not half-served), and the ready information names
  the withheld operation and why.

Only the in-band hint proves the *adapter's* abort: vLLM 0.22.1 aborts a request itself when
the task awaiting it is cancelled or its stream is closed, so with the adapter's and the
backend's explicit aborts removed the other causes still empty the engine (checked once, see
the report of the change); the hint stops the operation at an event boundary with the
generation running, and there ``abort_accepted`` says the adapter's abort found the request.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest
from long_context import MAX_TOKENS
from probe import SCHEMA_IGNORED_BY_FORCED_TOOL_CALLS, connect, engine_count

from nnrp_conformance import contract
from nnrp_conformance.client import NnrpClient
from nnrp_conformance.validation import validate_event
from vllm_nnrp_adapter.conformance.conformance import manifest_for_vllm
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess
from vllm_nnrp_adapter.vllm_backend.families import limitations
from vllm_nnrp_adapter.vllm_backend.lines import NO_EMBEDDINGS_ENGINE

pytestmark = [pytest.mark.anyio, pytest.mark.real_vllm, pytest.mark.wire]

MODEL = "tiny-model"
#: the engine must hold no request this long after a cancel (as test_aborts_real.py)
ABORT_BOUND_S = 3.0
TOOLS = [{"type": "function", "name": "lookup",
          "parameters": {"type": "object",
                         "properties": {"q": {"type": "string", "maxLength": 6}},
                         "required": ["q"]}}]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def adapter(long_adapter: AdapterProcess) -> AdapterProcess:
    return long_adapter  # shared with test_aborts_real (conftest)


async def refused_on_the_lower_bound(adapter: AdapterProcess, vllm_env: dict, env: dict) -> bool:
    """On the lower-bound line the test's request itself must be refused with
    ``unsupported_operation`` (Levels 2 and 3 are not offered there, not half-served); True
    then, and the test ends. False on the current line."""
    if not limitations(vllm_env["version"]):
        return False
    async with await connect(adapter.address) as client:
        events, term = await run(client, env)
    assert events == [] and term.event["error"]["code"] == contract.ERR_UNSUPPORTED_OPERATION, term
    return True


def long_generation(**nnrp: Any) -> dict:
    return responses(nnrp, stream=True, max_output_tokens=MAX_TOKENS, ignore_eos=True)


def envelope(operation: str, body: dict, **nnrp: Any) -> dict:
    env: dict = {"schema_version": contract.SCHEMA_VERSION, "operation": operation, "body": body}
    if nnrp:
        env["nnrp"] = nnrp
    return env


def responses(nnrp: dict | None = None, **body: Any) -> dict:
    return envelope(contract.OP_RESPONSES_CREATE,
                    {"model": MODEL, "input": "Say hello.", "temperature": 0, **body},
                    **(nnrp or {}))


async def run(client: NnrpClient, env: dict, timeout: float = 300) -> tuple[list[dict], Any]:
    """All partial events and the terminal of one operation; every event schema-valid."""
    op = await client.submit(env, timeout=timeout)
    term = await op.result()
    partials = [r.event for r in op.received if r.kind == "partial"]
    for event in [*partials, *([term.event] if term.event else [])]:
        assert validate_event(event) == [], event
    assert not op.wire_findings, op.wire_findings
    return partials, term


def of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def check_items(events: list[dict], body: dict) -> None:
    """Each output item: added once, its deltas, done once; the body's output is the same
    items (docs/levels.md#level2-events)."""
    added = of(events, contract.EV_OUTPUT_ITEM_ADDED)
    done = of(events, contract.EV_OUTPUT_ITEM_DONE)
    assert [e["output_index"] for e in added] == list(range(len(added))) == \
        [e["output_index"] for e in done]
    assert [e["item"]["id"] for e in added] == [e["item"]["id"] for e in done] == \
        [item["id"] for item in body["output"]]
    for a, d in zip(added, done, strict=True):
        inside = events[events.index(a) + 1:events.index(d)]
        for e in inside:
            if "item_id" in e:
                assert (e["item_id"], e["index"]) == (a["item"]["id"], a["output_index"]), e


async def test_the_claims_follow_the_vllm_line(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    expected = json.loads(manifest_for_vllm(vllm_env["version"]).read_text())
    async with await connect(adapter.address) as client:
        doc = await client.capabilities()
        assert doc["compatibility_levels"] == expected["compatibility_levels"]
        assert doc["operations"] == expected["operations"]
        if limitations(vllm_env["version"]):
            assert doc["compatibility_levels"] == [1]
            # this adapter runs no embeddings engine: embeddings.create is withheld too
            assert set(adapter.info["withheld_operations"]) == {
                contract.OP_RESPONSES_CREATE, contract.OP_EMBEDDINGS_CREATE}
            for operation, body in ((contract.OP_RESPONSES_CREATE, {"input": "hi"}),
                                    (contract.OP_MODELS_LIST, {})):
                _, term = await run(client, envelope(operation, body))
                assert term.event["error"]["code"] == contract.ERR_UNSUPPORTED_OPERATION, term
        else:
            assert doc["compatibility_levels"] == [1, 2, 3]
            # Level 3 stays with models.list; embeddings need the embeddings engine
            # (test_embeddings_real.py runs it)
            assert adapter.info["withheld_operations"] == {
                contract.OP_EMBEDDINGS_CREATE: NO_EMBEDDINGS_ENGINE}


async def test_streamed_text(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    env = responses(stream=True, max_output_tokens=8)
    if await refused_on_the_lower_bound(adapter, vllm_env, env):
        return
    async with await connect(adapter.address) as client:
        events, term = await run(client, env)
    assert term.delivery == "result_push" and term.event["type"] == contract.EV_COMPLETED
    body = term.event["body"]
    assert body["object"] == "response" and body["id"].startswith("resp_")
    assert body["status"] in ("completed", "incomplete") and body["model"] == MODEL
    check_items(events, body)
    deltas = of(events, contract.EV_OUTPUT_TEXT_DELTA)
    assert deltas and all("item_id" in d for d in deltas)
    message = body["output"][0]
    assert "".join(d["delta"] for d in deltas) == \
        "".join(p["text"] for p in message["content"] if p["type"] == "output_text")
    usage = of(events, contract.EV_USAGE)
    assert len(usage) == 1 and events[-1] == usage[0]
    u = usage[0]["usage"]
    assert u == {k: body["usage"][k] for k in ("input_tokens", "output_tokens", "total_tokens")}
    assert u["total_tokens"] == u["input_tokens"] + u["output_tokens"] and u["output_tokens"] == 8


async def test_non_streaming(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    env = responses(max_output_tokens=5)
    if await refused_on_the_lower_bound(adapter, vllm_env, env):
        return
    async with await connect(adapter.address) as client:
        events, term = await run(client, env)
    assert events == []
    body = term.event["body"]
    assert term.event["type"] == contract.EV_COMPLETED and body["object"] == "response"
    assert body["status"] == "incomplete" and body["usage"]["output_tokens"] == 5
    assert body["output"] and body["output"][0]["type"] == "message"


@pytest.mark.parametrize("tool_choice", [{"type": "function", "name": "lookup"}, "required"],
                         ids=["named", "required"])
async def test_forced_tool_call_streams_as_a_function_call_item(adapter, vllm_env, tool_choice) -> None:  # type: ignore[no-untyped-def]
    env = responses(stream=True, max_output_tokens=48, tools=TOOLS, tool_choice=tool_choice)
    if await refused_on_the_lower_bound(adapter, vllm_env, env):
        return
    async with await connect(adapter.address) as client:
        events, term = await run(client, env)
    body = term.event["body"]
    check_items(events, body)
    items = [e["item"] for e in of(events, contract.EV_OUTPUT_ITEM_DONE)]
    calls = [item for item in items if item["type"] == "function_call"]
    assert len(calls) == 1 and calls[0]["name"] == "lookup", items
    call = calls[0]
    tool_events = [e for e in events if e["type"] in contract.TOOL_CALL_EVENT_TYPES]
    assert tool_events[0]["type"] == contract.EV_TOOL_CALL_STARTED
    assert tool_events[-1]["type"] == contract.EV_TOOL_CALL_COMPLETED
    assert {(e["item_id"], e["call_id"]) for e in tool_events} == {(call["id"], call["call_id"])}
    streamed = "".join(e["arguments_delta"] for e in of(events, contract.EV_TOOL_CALL_DELTA))
    assert tool_events[-1]["arguments"] == streamed == call["arguments"]
    arguments = json.loads(streamed, strict=False)  # valid JSON on every version
    if vllm_env["version"] not in SCHEMA_IGNORED_BY_FORCED_TOOL_CALLS:
        assert isinstance(arguments["q"], str)
    # the tool-call events sit between the item's added and its done
    added = next(e for e in of(events, contract.EV_OUTPUT_ITEM_ADDED) if e["item"]["id"] == call["id"])
    done = next(e for e in of(events, contract.EV_OUTPUT_ITEM_DONE) if e["item"]["id"] == call["id"])
    assert events.index(added) < events.index(tool_events[0])
    assert events.index(tool_events[-1]) < events.index(done)


async def test_state_members_are_refused(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    if await refused_on_the_lower_bound(adapter, vllm_env, responses(store=True)):
        return
    async with await connect(adapter.address) as client:
        for member in ({"store": True}, {"background": True}, {"previous_response_id": "resp_x"}):
            events, term = await run(client, responses(**member))
            assert events == [] and term.event["error"]["code"] == contract.ERR_INVALID_REQUEST
        _, term = await run(client, responses(model="backend-error"))
        assert term.event["error"]["code"] == contract.ERR_BACKEND_ERROR


async def test_models_list_equals_the_served_models(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    if await refused_on_the_lower_bound(adapter, vllm_env, envelope(contract.OP_MODELS_LIST, {})):
        return
    async with await connect(adapter.address) as client:
        doc = await client.capabilities()
        events, term = await run(client, envelope(contract.OP_MODELS_LIST, {}))
    assert events == [] and term.event["type"] == contract.EV_COMPLETED
    body = term.event["body"]
    assert body["object"] == "list"
    assert all(m["object"] == "model" and isinstance(m["owned_by"], str) for m in body["data"])
    assert [m["id"] for m in body["data"]] == [m["id"] for m in doc["models"]] == \
        adapter.info["served_models"] == [MODEL]


async def running(client: NnrpClient, observer: NnrpClient, env: dict):  # type: ignore[no-untyped-def]
    """Submit a generation that cannot end by itself; once it streams and the engine holds it,
    return (the operation, its partials per second)."""
    op = await client.submit(env, timeout=600)
    t0 = time.monotonic()
    with anyio.fail_after(120):
        while len(op.received) < 20:
            await anyio.sleep(0.01)
    rate = len(op.received) / max(time.monotonic() - t0, 1e-3)
    assert await engine_count(observer) == 1
    return op, rate


async def seconds_to_empty(observer: NnrpClient, since: float, limit: float = 20.0) -> float:
    """Seconds from ``since`` until vLLM holds no request (inf past ``limit``)."""
    while await engine_count(observer) != 0:
        if time.monotonic() - since > limit:
            return float("inf")
        await anyio.sleep(0.02)
    return time.monotonic() - since


def check_abort(cause: str, vllm_env: dict, held: float, still_needed: float) -> None:
    print(f"\nresponses.create {cause} on vLLM {vllm_env['version']}: engine empty after "
          f"{held:.3f} s (the generation still needed ~{still_needed:.0f} s)")
    assert still_needed > 3 * ABORT_BOUND_S, f"{cause}: generation too fast to prove an abort"
    assert held <= ABORT_BOUND_S, f"{cause}: the engine still held the request {held:.2f} s after"


async def test_client_cancel_aborts_the_engine_request(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    if await refused_on_the_lower_bound(adapter, vllm_env, long_generation()):
        return
    async with await connect(adapter.address) as client, await connect(adapter.address) as observer:
        op, rate = await running(client, observer, long_generation())
        t0 = time.monotonic()
        await op.cancel()
        held = await seconds_to_empty(observer, t0)
        term = await op.result()
    assert term.outcome == contract.TERMINAL_CANCELLED, term
    check_abort("client cancel", vllm_env, held, (MAX_TOKENS - len(op.received)) / rate)


async def test_session_close_aborts_the_engine_request(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    if await refused_on_the_lower_bound(adapter, vllm_env, long_generation()):
        return
    client = await connect(adapter.address)
    async with await connect(adapter.address) as observer:
        try:
            op, rate = await running(client, observer, long_generation())
        finally:
            t0 = time.monotonic()
            await client.aclose()  # SESSION_CLOSE with the generation in flight
        held = await seconds_to_empty(observer, t0)
    check_abort("session close", vllm_env, held, (MAX_TOKENS - len(op.received)) / rate)


async def test_timeout_ms_aborts_the_engine_request(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    if await refused_on_the_lower_bound(adapter, vllm_env, long_generation(timeout_ms=2000)):
        return
    async with await connect(adapter.address) as client, await connect(adapter.address) as observer:
        op = await client.submit(long_generation(timeout_ms=2000), timeout=600)
        term = await op.result()
        t0 = time.monotonic()
        assert term.event["error"]["code"] == contract.ERR_TIMEOUT, term
        held = await seconds_to_empty(observer, t0)
    check_abort("timeout_ms", vllm_env, held, (MAX_TOKENS - len(op.received)) / max(len(op.received) / 2, 1))


async def test_in_band_hint_aborts_the_engine_request(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    """The hint stops the operation at an event boundary, with vLLM's generation still
    running: the adapter's own abort must find the request in the engine
    (``abort_accepted``; without the adapter's abort there is no hook and this fails), and the
    engine's count then reaches 0."""
    env = long_generation(cancel_after_events=40, diagnostics=True)
    if await refused_on_the_lower_bound(adapter, vllm_env, env):
        return
    async with await connect(adapter.address) as client, await connect(adapter.address) as observer:
        t0 = time.monotonic()
        events, term = await run(client, env)
        rate = len(events) / (time.monotonic() - t0)
        t1 = time.monotonic()
        assert len(events) == 40 and term.delivery == "result_push", term
        assert term.event["type"] == contract.EV_CANCELLED
        cancellation = term.diagnostics["cancellation"]
        assert cancellation["abort_hooks"] == 1 and cancellation["abort_accepted"] is True, \
            cancellation
        held = await seconds_to_empty(observer, t1)
    check_abort("in-band hint", vllm_env, held, (MAX_TOKENS - 40) / rate)
