"""The whole Level 1 set over every transport nnrp-py ships that works here: TCP, IPC and
WebSocket, against the independent example endpoint, through ``nnrp-conformance run``.

The suite's checks know nothing of the transport: each run must give the same verdict per
recipe, and a wire defect must be caught by the same rules on each. (QUIC is not offered:
nnrp-py's QUIC carrier insists on TLS, which neither side takes options for yet; a quic://
address is refused, tests/unit/test_addresses_offered.py.)
The reference adapter is run over IPC and WebSocket on real vLLM in
``tests/real_vllm/test_suite_against_adapter.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.wire

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "docs" / "examples" / "minimal_endpoint" / "manifest.json"
RECIPES = REPO / "recipes"


def listen_for(transport: str, tmp: Path) -> str:
    return {"tcp": "127.0.0.1:0", "ipc": f"ipc://{tmp / 'endpoint.sock'}",
            "websocket": "ws://127.0.0.1:0"}[transport]


def run(target: str, tmp: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    results = tmp / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", target, "--manifest",
         str(MANIFEST), "--results", str(results), "--timeout", "20", *extra],
        cwd=tmp, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    doc = json.loads(results.read_text()) if results.exists() else {"results": []}
    return proc.returncode, doc, proc.stdout[-3000:] + proc.stderr[-2000:]


def verdicts(doc: dict[str, Any]) -> dict[str, str]:
    return {r["id"]: r["outcome"] for r in doc["results"]}


def failed_rules(doc: dict[str, Any]) -> set[str]:
    return {f["rule"] for r in doc["results"] if r["outcome"] == "failed"
            for f in r.get("diagnostics", {}).get("findings", [])}


@pytest.fixture(scope="module")
def tcp_verdicts(tmp_path_factory: pytest.TempPathFactory, start_endpoint: Any) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("tcp")
    with start_endpoint(tmp) as ep:
        code, doc, out = run(ep.address, tmp)
    assert code == 0, out
    return verdicts(doc)


@pytest.mark.parametrize("transport", ["ipc", "websocket"])
def test_the_level1_set_gives_the_same_verdicts_over(transport: str, tmp_path: Path,
                                                     start_endpoint: Any,
                                                     tcp_verdicts: dict[str, str]) -> None:
    with start_endpoint(tmp_path, None, ("--listen", listen_for(transport, tmp_path))) as ep:
        assert ep.address.startswith({"ipc": "unix://", "websocket": "ws://"}[transport])
        code, doc, out = run(ep.address, tmp_path)
    assert code == 0, out
    assert verdicts(doc) == tcp_verdicts
    assert sum(v == "passed" for v in tcp_verdicts.values()) >= 25


@pytest.mark.parametrize(("defect", "recipe", "rule"), [
    ("terminal-as-partial", "chat-streaming-text", "wire.partial_result.terminal_event"),
    ("garbage-frames", "chat-streaming-text", "wire.partial_result.utf8"),
])
def test_a_wire_defect_is_caught_by_the_same_rules_on_each_transport(
        defect: str, recipe: str, rule: str, tmp_path: Path, start_endpoint: Any) -> None:
    seen: dict[str, set[str]] = {}
    for transport in ("tcp", "ipc", "websocket"):
        tmp = tmp_path / transport
        tmp.mkdir()
        with start_endpoint(tmp, defect, ("--listen", listen_for(transport, tmp))) as ep:
            code, doc, out = run(ep.address, tmp, "--recipes",
                                 str(RECIPES / "level1" / f"{recipe}.yaml"))
        assert code == 1, out
        seen[transport] = failed_rules(doc)
    assert rule in seen["tcp"], seen
    assert seen["ipc"] == seen["tcp"] == seen["websocket"], seen
