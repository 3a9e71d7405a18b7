"""Bounded time against hostile endpoints (issue 14 item 4): the idle limit (no frame for N s
while an operation is open) is separate from the case limit and moves with every frame, and
the run-level rule fails the remaining cases at once, naming the last frame seen, after
``UNRESPONSIVE_AFTER`` operations in a row during which the endpoint sent nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance.options import UNRESPONSIVE_AFTER

pytestmark = pytest.mark.wire

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def _run(tmp: Path, ep: Any, *extra: str) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run(
        [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", ep.address,
         "--manifest", str(ep.manifest), "--results", "r.json", *extra],
        cwd=tmp, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads((tmp / "r.json").read_text()), proc.stdout


def _rules(result: dict[str, Any]) -> set[str]:
    return {f["rule"] for f in result["diagnostics"]["findings"]}


def test_silent_endpoint_fails_the_rest_at_once(tmp_path: Path, start_endpoint: Any) -> None:
    with start_endpoint(tmp_path, "silence") as ep:
        # a case limit far above the idle limit: only the idle limit can end the waits
        # (a model given: a silent endpoint teaches none, which is a setup error by itself)
        code, doc, out = _run(tmp_path, ep, "--recipes", str(RECIPES), "--timeout", "120",
                              "--idle-timeout", "1", "--model", "minimal-model")
    assert code == 1, out
    # the Level 2 and 3 recipes this Level 1 manifest does not claim are skipped, never sent
    results = [r for r in doc["results"] if r["outcome"] != "skipped"]
    assert len(results) < len(doc["results"])
    waited = [r for r in results if "endpoint.unresponsive" not in _rules(r)]
    at_once = [r for r in results if "endpoint.unresponsive" in _rules(r)]
    # the discovery operation counts as one of the silent operations
    assert len(waited) == UNRESPONSIVE_AFTER - 1, [r["id"] for r in waited]
    assert waited[0]["diagnostics"]["expired_by"] == "idle", waited[0]["diagnostics"]
    assert len(at_once) == len(results) - len(waited) and len(at_once) > 20
    for r in at_once:
        assert r["outcome"] == "failed" and r["diagnostics"]["duration_s"] == 0.0
        assert "endpoint unresponsive" in r["message"]
        assert "last frame seen: none since the session opened" in r["message"]


def test_idle_limit_moves_with_every_frame(tmp_path: Path, start_endpoint: Any) -> None:
    # 16 tokens at 200 ms each outlast the 1 s idle limit as a whole, never between frames
    with start_endpoint(tmp_path, None, ("--delta-delay-ms", "200")) as ep:
        code, doc, out = _run(tmp_path, ep, "--recipes",
                              str(RECIPES / "level1" / "chat-streaming-text.yaml"),
                              "--idle-timeout", "1")
    (result,) = doc["results"]
    assert code == 0 and result["outcome"] == "passed", out
    assert result["diagnostics"]["timings_ms"]["submit_to_terminal"] > 1000


def test_stalled_stream_names_its_last_frame(tmp_path: Path, start_endpoint: Any) -> None:
    with start_endpoint(tmp_path, "missing-terminal") as ep:
        code, doc, out = _run(tmp_path, ep, "--recipes",
                              str(RECIPES / "level1" / "chat-streaming-text.yaml"),
                              "--timeout", "120", "--idle-timeout", "1")
    (result,) = doc["results"]
    assert code == 1, out
    assert "timeout.no-terminal" in _rules(result)
    assert "idle limit (1.0s)" in result["message"] or "idle limit" in json.dumps(result)
    assert result["diagnostics"]["last_frame"]["message_type"] == "PARTIAL_RESULT"
