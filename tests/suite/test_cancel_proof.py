"""No pass without proof from the endpoint (issue 14 item 1): a client cancel passes only when
the endpoint's own terminal for the frame (its drop, or a push carrying response.cancelled)
arrives within the case limit. The example endpoint's ``late-event-after-cancel`` variant
never polls for the cancel while it streams; at 1 ms per token its RESULT_PUSH comes back
quickly, at 20 and 200 ms per token it outlasts any local grace, which used to count as a
pass. It must fail at all three paces, and the correct endpoint must pass at all three."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.wire

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "level1" / "chat-cancel-client.yaml"
#: the case limit: long enough for loopback, shorter than the slow variants' 400-token stream
CASE_LIMIT_S = "5"
#: any of these names the defect: the endpoint's push after our cancel, or no answer at all
CANCEL_RULES = {"wire.result_after_cancel", "wire.partial_after_cancel", "cancel.late-event",
                "cancel.unanswered"}


def _run(tmp: Path, start_endpoint: Any, defect: str | None, delay_ms: str) -> dict[str, Any]:
    with start_endpoint(tmp, defect, ("--delta-delay-ms", delay_ms)) as ep:
        proc = subprocess.run(
            [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", ep.address,
             "--manifest", str(ep.manifest), "--recipes", str(RECIPE), "--timeout",
             CASE_LIMIT_S, "--results", "r.json"],
            cwd=tmp, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads((tmp / "r.json").read_text())
    (result,) = [r for r in doc["results"] if r["id"] == "level1.chat.cancel.client"]
    return {"exit": proc.returncode, "result": result, "out": proc.stdout}


@pytest.mark.parametrize("delay_ms", ["1", "20", "200"])
def test_cancel_ignoring_endpoint_fails_at_every_pace(tmp_path: Path, start_endpoint: Any,
                                                      delay_ms: str) -> None:
    run = _run(tmp_path, start_endpoint, "late-event-after-cancel", delay_ms)
    result = run["result"]
    assert run["exit"] == 1, run["out"]
    assert result["outcome"] == "failed", result
    rules = {f["rule"] for f in result["diagnostics"]["findings"]}
    assert rules & CANCEL_RULES, rules
    # the endpoint never sent a cancelled terminal: the verdict must not say it did
    assert result["diagnostics"]["terminal_observed"] != "cancelled", result["diagnostics"]


@pytest.mark.parametrize("delay_ms", ["1", "20", "200"])
def test_correct_endpoint_answers_the_cancel_at_every_pace(tmp_path: Path, start_endpoint: Any,
                                                           delay_ms: str) -> None:
    run = _run(tmp_path, start_endpoint, None, delay_ms)
    result = run["result"]
    assert run["exit"] == 0 and result["outcome"] == "passed", run["out"]
    cancel = result["diagnostics"]["cancel"]
    # the pass rests on the endpoint's own drop, received after the cancel
    assert cancel["answered_by"] == "result_drop", cancel
    assert cancel["answer_ms"] is not None and cancel["answer_ms"] >= 0, cancel
