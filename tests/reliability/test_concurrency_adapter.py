"""The reference adapter, on the scripted backend (no vLLM), passes the concurrency recipes:
five operations and three with a cancel in flight together on one session, each judged as
usual and side by side (issue 30), and nothing is left open afterwards."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nnrp_conformance import concurrency
from nnrp_conformance.client import NnrpClient
from nnrp_conformance.manifest import load_manifest
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import load_recipes

sys.path.insert(0, str(Path(__file__).parent))
from scripted_backend import Script, ScriptedBackend

from conftest import MODEL, REPO, serve_adapter

pytestmark = [pytest.mark.anyio, pytest.mark.wire]

RECIPES = [REPO / "recipes" / "level1" / f"concurrent-chat-{n}.yaml" for n in ("mixed", "cancel-one")]


async def test_the_adapter_passes_the_concurrency_recipes() -> None:
    # paced streams, so the cancel lands mid-stream and the operations overlap
    backend = ScriptedBackend([MODEL], scripts={"default": Script(n=40, delay_s=0.002)})
    plan = build_plan(load_recipes(RECIPES),
                      load_manifest(REPO / "manifests" / "vllm-nnrp-adapter.json"),
                      model_id=MODEL)
    async with serve_adapter(backend) as a:
        async with await NnrpClient.connect(a.address) as client:
            for case in plan.cases:
                assert case.selected, case.reason
                cases = [case, *case.companions]
                results, overlap = await concurrency.run_group(client, cases, timeout=30)
                result = concurrency.group_result(case, results, overlap)
                ops = result.diagnostics["concurrency"]["operations"]
                assert result.passed, [(o["name"], o["findings"]) for o in ops]
                assert overlap["in_flight_at_last_submit"] == len(cases), overlap
        assert await a.settle() == []
