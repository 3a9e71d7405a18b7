"""``embeddings.create`` against real vLLM CPU, on both lines, over the real NNRP wire.

The adapter runs the embedded default with its embeddings engine (``--nnrp-embeddings-engine``:
the tiny model a second time, ``--runner pooling --convert embed``, same name): vLLM runs one
runner per engine, so embeddings come from that second engine's own ``ServingEmbedding``.

* 0.22.1 (current line) offers ``embeddings.create`` and keeps Level 3: two inputs of very
  different lengths get two vectors of one length, in input order; a repeated input gets the
  same vector at both places; ``models.list`` names the shared model once; a bad input and an
  unknown model are errors; a large batch cancelled mid-way leaves neither engine holding a
  request.
* 0.18.1 (lower bound) loses Level 2 (vllm_backend.lines), and Level 3 with it: the second
  engine starts and embeds, but the operation is not offered (the start-up information names
  the Responses limitation behind it) and answers ``unsupported_operation``.
"""

from __future__ import annotations

import math
import time
from typing import Any

import anyio
import pytest
from probe import connect, engine_count

from nnrp_conformance import contract
from nnrp_conformance.validation import validate_event
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess
from vllm_nnrp_adapter.vllm_backend.families import limitations

pytestmark = [pytest.mark.anyio, pytest.mark.real_vllm, pytest.mark.wire]

MODEL = "tiny-model"
#: the engines must hold no request this long after a cancel (as test_aborts_real.py)
ABORT_BOUND_S = 3.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def adapter(explicit_adapter: AdapterProcess) -> AdapterProcess:
    return explicit_adapter  # the shared one runs the embeddings engine (conftest)


def embeddings(**body: Any) -> dict:
    return {"schema_version": contract.SCHEMA_VERSION,
            "operation": contract.OP_EMBEDDINGS_CREATE, "body": {"model": MODEL, **body}}


async def answer(client: Any, env: dict) -> Any:
    op = await client.submit(env, timeout=300)
    term = await op.result()
    assert [r for r in op.received if r.kind == "partial"] == []  # embeddings have no stream
    assert term.event is not None and validate_event(term.event) == [], term
    assert not op.wire_findings, op.wire_findings
    if env["body"].get("model") == MODEL and not isinstance(env["body"].get("input"), int) \
            and env["body"].get("input") not in ("", []):
        assert term.event.get("type") == contract.EV_COMPLETED, term.event  # say why, if not
    return term


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


async def test_embeddings_are_offered_where_level_3_is(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    async with await connect(adapter.address) as client:
        doc = await client.capabilities()
        offered = [op["name"] for op in doc["operations"]]
        if limitations(vllm_env["version"]):
            assert doc["compatibility_levels"] == [1]
            assert contract.OP_EMBEDDINGS_CREATE not in offered
            # withheld is Responses (the feature the line breaks); Level 3 goes with Level 2
            assert set(adapter.info["withheld_operations"]) == {contract.OP_RESPONSES_CREATE}
            term = await answer(client, embeddings(input="Hi."))
            assert term.event["error"]["code"] == contract.ERR_UNSUPPORTED_OPERATION
            return
        assert doc["compatibility_levels"] == [1, 2, 3]
        assert contract.OP_EMBEDDINGS_CREATE in offered
        assert [m["id"] for m in doc["models"]] == [MODEL]  # both engines serve one name
        term = await answer(client, {"schema_version": contract.SCHEMA_VERSION,
                                     "operation": contract.OP_MODELS_LIST, "body": {}})
        assert [m["id"] for m in term.event["body"]["data"]] == [MODEL]


async def test_vectors_shape_and_batch_order(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    if limitations(vllm_env["version"]):
        pytest.skip("embeddings.create is not offered on this line (the test above)")
    async with await connect(adapter.address) as client:
        term = await answer(client, embeddings(input=["Hi.", "A much longer sentence, with "
                                                   "many more words than the first one."]))
        body = term.event["body"]
        assert body["object"] == "list" and [d["index"] for d in body["data"]] == [0, 1]
        a, b = (d["embedding"] for d in body["data"])
        assert len(a) == len(b) > 0 and all(math.isfinite(x) for x in a + b)
        assert body["usage"]["prompt_tokens"] > 0
        term = await answer(client, embeddings(input=[
            "The cat sat on the mat.", "Paris is the capital of France.",
            "The cat sat on the mat.", "Quantum chromodynamics describes the strong force."]))
        vectors = [d["embedding"] for d in term.event["body"]["data"]]
        assert cosine(vectors[0], vectors[2]) >= 0.999
        assert cosine(vectors[0], vectors[1]) < 0.999 and cosine(vectors[0], vectors[3]) < 0.999
        for bad in (42, "", []):
            term = await answer(client, embeddings(input=bad))
            assert term.event["error"]["code"] == contract.ERR_INVALID_REQUEST, bad
        term = await answer(client, {**embeddings(input="Hi."),
                                     "body": {"model": "no-such-model", "input": "Hi."}})
        assert term.event["type"] == contract.EV_ERROR


async def test_a_cancelled_batch_leaves_no_engine_request(adapter, vllm_env) -> None:  # type: ignore[no-untyped-def]
    """A batch big enough to run for a while on CPU, cancelled once the engines hold it: both
    engines' unfinished counts reach 0 (the handler's cancellation ends vLLM's own request
    generators, which abort the requests). Uncancelled, this batch took 31 s on vLLM 0.22.1
    here; cancelled, the engines were empty 0.023 s after the cancel."""
    if limitations(vllm_env["version"]):
        pytest.skip("embeddings.create is not offered on this line")
    text = "Count the words of this sentence once more, slowly and carefully. " * 6
    async with await connect(adapter.address) as client, await connect(adapter.address) as obs:
        op = await client.submit(embeddings(input=[f"{i}: {text}" for i in range(2000)]),
                                 timeout=600)
        with anyio.fail_after(120):
            while await engine_count(obs) == 0 and op.terminal is None:
                await anyio.sleep(0.05)
        if op.terminal is not None:
            pytest.fail(f"the batch ended before the engines were seen holding it: {op.terminal}")
        await op.cancel()
        term = await op.result()
        assert term.outcome == contract.TERMINAL_CANCELLED, term
        t0 = time.monotonic()
        with anyio.fail_after(60):
            while await engine_count(obs) != 0:
                await anyio.sleep(0.05)
        latency = time.monotonic() - t0
    print(f"\nembeddings cancel on vLLM {vllm_env['version']}: engines empty {latency:.3f} s "
          f"after the cancel")
    assert latency <= ABORT_BOUND_S
