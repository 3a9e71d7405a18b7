"""The HTTP twin against real vLLM (issue 37 item 4): the adapter inside ``vllm serve`` (the
shared plugin-path server of conftest.py), vLLM's own HTTP API on the same engine as its twin.

The suite runs a recipe of each kind of answer and every twin probe (tests/real_vllm/
twin_probes) with ``--nnrp-http-twin``: every one is compared, the deterministic ones field by
field, and the differences are exactly the ones docs/twin.md#found lists for these cases, so a
new difference (a vLLM release, an adapter change) fails here until it is fixed or explained.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from vllm_nnrp_adapter.conformance.conformance import manifest_for_vllm, run_suite
from vllm_nnrp_adapter.conformance.twin import TWIN_PROBES, http_url, summarize
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess

pytestmark = [pytest.mark.real_vllm, pytest.mark.wire]
REPO = Path(__file__).resolve().parents[2]
RECIPES = [REPO / "recipes" / name for name in (
    "level1/chat-non-streaming-body.yaml", "level1/chat-streaming-text.yaml",
    "level1/chat-tool-call-forced.yaml", "level1/chat-backend-error.yaml",
    "level1/chat-invalid-body-missing-messages.yaml", "level2/responses-streaming-text.yaml",
    "level2/responses-tool-call-forced.yaml", "level2/responses-backend-error.yaml")]


def documented_differences() -> set[tuple[str, str]]:
    """(case id, rule) of every row of docs/twin.md's "Differences found" table."""
    text = (REPO / "docs" / "twin.md").read_text(encoding="utf-8")
    section = text.split("### Differences found", 1)[1]
    return set(re.findall(r"^\| `([^`]+)` \| `(twin\.[a-z-]+)` \|", section, re.MULTILINE))


def test_the_twin_finds_only_the_documented_differences(
        plugin_adapter: AdapterProcess, vllm_env: dict[str, Any], tmp_path: Path) -> None:
    url = http_url(plugin_adapter)
    recipes = [a for p in [*RECIPES, TWIN_PROBES] for a in ("--recipes", str(p))]
    t0 = time.monotonic()
    rc = run_suite(plugin_adapter.address, manifest_for_vllm(vllm_env["version"]), tmp_path,
                   ["--nnrp-http-twin", url, "-q", *recipes])
    took = time.monotonic() - t0
    results = json.loads((tmp_path / "case-results.json").read_text())
    summary = summarize(results)
    print(f"twin against vLLM {vllm_env['version']}: {summary['compared']} of "
          f"{summary['cases']} cases compared in {took:.1f} s")
    # the shared plugin adapter is keyed (conftest): its claim adds the suite's API-key cases,
    # which ask nothing the twin could ask over HTTP (they open sessions with and without the
    # key), and pass (the TLS one is skipped: no TLS is claimed)
    security = {r["id"]: r["outcome"] for r in results["results"]
                if r["id"].startswith("security.")}
    assert {i: o for i, o in security.items() if i.startswith("security.api-key.")} == {
        "security.api-key.absent": "passed", "security.api-key.wrong": "passed",
        "security.api-key.accepted": "passed"}, security
    ran = {r["id"] for r in results["results"]
           if r["outcome"] != "skipped" and r["id"] not in security}
    assert len(ran) == len(RECIPES) + len(list(TWIN_PROBES.glob("*.yaml"))), ran
    assert summary["compared"] == len(ran), [c for c in summary["results"] if not c["compared"]]
    found = {(c["id"], d["rule"]) for c in summary["results"] for d in c["differences"]}
    assert found == {(case, rule) for case, rule in documented_differences() if case in ran}, \
        json.dumps(summary["results"], indent=1)[:6000]
    deterministic = {c["id"]: c["fields"] for c in summary["results"]
                     if c["id"] in ("level1.chat.tool-call-forced", "twin-probe.seeded-sampling",
                                    "level2.responses.streaming-text")}
    assert deterministic == {
        "level1.chat.tool-call-forced": ["outcome", "choices", "text", "finish-reason",
                                         "tool-calls"],
        "twin-probe.seeded-sampling": ["outcome", "choices", "text", "finish-reason", "usage"],
        "level2.responses.streaming-text": ["outcome", "text", "finish-reason", "usage"],
    }
    assert rc == 0, (tmp_path / "report.md").read_text()[-4000:]
