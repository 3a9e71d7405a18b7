"""Levels 2 and 3 on the vLLM-plugin start-up path, both lines: inside ``vllm serve``, the
adapter binds the Responses and models serving objects ``init_app_state`` built
(``app.state.openai_serving_responses`` / ``openai_serving_models``) as the explicit path binds
its own, and claims per line exactly what the explicit path claims (test_levels_real.py judges
the operations themselves in depth, on the explicit path).
"""

from __future__ import annotations

import json

import pytest
from probe import connect

from nnrp_conformance import contract
from nnrp_conformance.validation import validate_event
from vllm_nnrp_adapter.conformance.conformance import manifest_for_vllm
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess
from vllm_nnrp_adapter.vllm_backend.families import limitations

pytestmark = [pytest.mark.anyio, pytest.mark.real_vllm, pytest.mark.wire]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def served(plugin_adapter: AdapterProcess) -> AdapterProcess:
    return plugin_adapter  # shared with test_vllm_plugin_real, which stops it last (conftest)


def envelope(operation: str, body: dict) -> dict:
    return {"schema_version": contract.SCHEMA_VERSION, "operation": operation, "body": body}


async def test_the_plugin_path_serves_levels_2_and_3_as_the_explicit_path(served, vllm_env) -> None:  # type: ignore[no-untyped-def]
    assert served.info["startup_path"] == "vllm-plugin"
    expected = json.loads(manifest_for_vllm(vllm_env["version"]).read_text())
    current = not limitations(vllm_env["version"])
    async with await connect(served.address) as client:
        doc = await client.capabilities()
        assert doc["compatibility_levels"] == expected["compatibility_levels"]
        assert doc["operations"] == expected["operations"]
        # inside vllm serve there is no embeddings engine: embeddings.create is withheld on
        # both lines, and responses.create too on the lower bound
        assert set(served.info["withheld_operations"]) == (
            {contract.OP_EMBEDDINGS_CREATE} if current
            else {contract.OP_RESPONSES_CREATE, contract.OP_EMBEDDINGS_CREATE})
        text = envelope(contract.OP_RESPONSES_CREATE,
                        {"model": "tiny-model", "input": "Say hello.", "stream": True,
                         "max_output_tokens": 8, "temperature": 0})
        models = envelope(contract.OP_MODELS_LIST, {})
        for env in (text, models):
            op = await client.submit(env, timeout=300)
            term = await op.result()
            events = [r.event for r in op.received if r.kind == "partial"]
            assert all(validate_event(e) == [] for e in [*events, term.event]), events
            if not current:
                assert term.event["error"]["code"] == contract.ERR_UNSUPPORTED_OPERATION, term
                continue
            assert term.event["type"] == contract.EV_COMPLETED, term
            body = term.event["body"]
            if env is models:
                assert [m["id"] for m in body["data"]] == [m["id"] for m in doc["models"]]
            else:
                added = [e for e in events if e["type"] == contract.EV_OUTPUT_ITEM_ADDED]
                assert [e["item"]["id"] for e in added] == [i["id"] for i in body["output"]]
                assert [e["type"] for e in events][-1] == contract.EV_USAGE
                assert body["object"] == "response" and body["usage"]["output_tokens"] == 8
