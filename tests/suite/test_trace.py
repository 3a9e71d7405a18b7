"""``--nnrp-trace DIR``: per case, every frame sent and received as NDJSON; for a failure the
offending frame is there to see, and the HTML report links the failed case to its trace."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.wire

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "level1"
CASE = "level1.chat.streaming-text"


def traced_run(tmp: Path, ep: Any, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", ep.address,
         "--manifest", str(ep.manifest), "--recipes", str(RECIPES / "chat-streaming-text.yaml"),
         "--trace", "traces", "--report", "out/report", "--timeout", "10", *extra],
        cwd=tmp, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_trace_shows_the_offending_frame_and_the_report_links_it(
        tmp_path: Path, start_endpoint: Any) -> None:
    with start_endpoint(tmp_path, "garbage-frames") as ep:
        proc = traced_run(tmp_path, ep)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    trace = tmp_path / "traces" / f"{CASE}.ndjson"
    frames = lines(trace)
    # the request as sent, then what came back, in order, one operation
    assert frames[0]["direction"] == "sent" and frames[0]["message_type"] == "FRAME_SUBMIT"
    assert json.loads(frames[0]["body"])["operation"] == "chat.completions.create"
    assert frames[0]["descriptor"]["payload_kind"] >= 0
    assert [f["seq"] for f in frames] == list(range(len(frames)))
    assert all(f["t_ms"] >= 0 for f in frames)
    assert len({f["operation_id"] for f in frames}) == 1
    assert frames[-1]["message_type"] == "RESULT_PUSH"
    # the garbage frame: a PARTIAL_RESULT whose body is not UTF-8, kept byte for byte
    bad = [f for f in frames if "body_base64" in f]
    assert bad and bad[0]["message_type"] == "PARTIAL_RESULT", frames
    assert bad[0]["decode_error"]
    raw = base64.b64decode(bad[0]["body_base64"])
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")
    assert {"result_sequence", "operation_id"} <= set(bad[0]["metadata"])
    good = [f for f in frames if f["message_type"] == "PARTIAL_RESULT" and "body" in f]
    assert all(json.loads(f["body"])["type"] for f in good)
    # the failure names its trace, and the HTML report links it (relative to the report)
    assert f"frame trace: {trace}" in proc.stdout
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    hrefs = re.findall(r'<a class="trace" href="([^"]+)"', html)
    assert hrefs == [f"../traces/{CASE}.ndjson"]
    assert (tmp_path / "out" / hrefs[0]).resolve() == trace.resolve()
    results = json.loads((tmp_path / "nnrp-conformance" / "case-results.json").read_text())
    assert results["results"][0]["diagnostics"]["trace"] == f"traces/{CASE}.ndjson"


def test_a_cancel_shows_in_the_trace_in_order(tmp_path: Path, start_endpoint: Any) -> None:
    with start_endpoint(tmp_path) as ep:
        proc = subprocess.run(
            [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", ep.address,
             "--manifest", str(ep.manifest), "--recipes", str(RECIPES / "chat-cancel-client.yaml"),
             "--trace", "traces"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (trace,) = (tmp_path / "traces").glob("*.ndjson")
    kinds = [(f["direction"], f["message_type"]) for f in lines(trace)]
    cancel = kinds.index(("sent", "FRAME_CANCEL"))
    assert kinds[0] == ("sent", "FRAME_SUBMIT")
    assert 0 < cancel < len(kinds) - 1, kinds
    assert kinds[-1][1] in ("RESULT_DROP_REASON", "RESULT_PUSH"), kinds


def test_a_frame_refused_after_the_terminal_is_in_the_trace_and_fails_its_case(
        tmp_path: Path, start_endpoint: Any) -> None:
    """two-terminals sends a RESULT_DROP_REASON after its RESULT_PUSH; nnrp-py refuses it
    (3/4/105) and names nothing: the client attributes it to the one operation settling."""
    with start_endpoint(tmp_path, "two-terminals") as ep:
        proc = traced_run(tmp_path, ep)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[wire.refused_after_terminal]" in proc.stdout
    frames = lines(tmp_path / "traces" / f"{CASE}.ndjson")
    pushed = [f["seq"] for f in frames if f["message_type"] == "RESULT_PUSH"]
    refused = [f for f in frames if "refused" in f]
    assert len(pushed) == 1 and len(refused) == 1, frames
    assert refused[0]["seq"] > pushed[0] and refused[0]["after_terminal"] is True
    assert "detail=105" in refused[0]["refused"]["status"]
    assert refused[0]["operation_id"] == frames[0]["operation_id"]
