"""The twin's second HTTP call (issue 45 item 5): a generated request and its repeat answered
differently over NNRP are sent over HTTP too, and the relation's finding says whether the
HTTP API answers them alike (only the NNRP face breaks the relation) or not (the model
itself does). Over the real wire: the example endpoint, and its HTTP API as the twin, at
``--generate 16 --seed 1`` (one relation group, its third repeat on a session of its own)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_http_twin import http_api

pytestmark = pytest.mark.wire

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "docs" / "examples" / "minimal_endpoint" / "manifest.json"


def _relations(tmp: Path, start_endpoint: Any, defect: str, *http_defects: str) -> list[Any]:
    with start_endpoint(tmp, defect) as ep, http_api(tmp, *http_defects) as url:
        proc = subprocess.run(
            [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", ep.address,
             "--manifest", str(MANIFEST), "--model", "minimal-model", "--generate", "16",
             "--seed", "1", "--http-twin", url, "--results", "r.json"],
            cwd=tmp, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    results = json.loads((tmp / "r.json").read_text())["results"]
    return [(f, r["diagnostics"].get("relation_http_twin")) for r in results
            for f in r["diagnostics"]["findings"] if f["rule"].startswith("answer.")]


def test_a_relation_broken_only_on_the_nnrp_face_says_so(
        tmp_path: Path, start_endpoint: Any) -> None:
    """seed-per-session: each session answers alike, the next one otherwise; its HTTP API
    (no sessions) answers the pair alike."""
    found = _relations(tmp_path, start_endpoint, "seed-per-session")
    assert found, "the repeat on a session of its own differs"
    for finding, http in found:
        assert finding["rule"] == "answer.repeatable"
        assert "on another session" in finding["message"]
        assert "only the NNRP face" in finding["message"], finding["message"]
        assert http["same"] is True and len(http["http"]) == 2


def test_a_relation_broken_over_http_too_is_the_models(
        tmp_path: Path, start_endpoint: Any) -> None:
    """temperature-zero-sampled on both faces: the model itself is not deterministic."""
    found = _relations(tmp_path, start_endpoint, "temperature-zero-sampled", "sampled")
    assert found
    for finding, http in found:
        assert "different answers too" in finding["message"], finding["message"]
        assert http["same"] is False
