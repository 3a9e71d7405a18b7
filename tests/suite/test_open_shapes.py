"""Issue 43 item 1 over the real wire: an endpoint that takes the event shapes' open choices
the other way from this suite's schemas passes by default, with non-strict notes where this
suite has a preference, and fails only under --strict.

The example endpoint's ``open-shapes`` variant sends ``response.cancelled`` with reason ``""``
(the profile's table requires a reason and types it nowhere), every usage without
``total_tokens`` and with a ``cost`` (the table requires a usage and names no count), and
``backend_error`` in a family of its own (the contract makes ``error.type`` any non-empty
string). Before the strict schemas were derived from the profile, the first two failed
``event.schema`` (minLength 1 on the reason; a closed usage requiring total_tokens) and the
Response body's usage failed ``responses.body``.
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
RECIPES = REPO / "recipes"
LEVELS_MANIFEST = REPO / "docs" / "examples" / "minimal_endpoint" / "manifest-levels.json"
NS = "non-strict"

#: recipe -> the findings of the default run (each non-strict: a failure only with --strict)
EXPECTED: dict[str, set[tuple[str, str]]] = {
    "level1/chat-usage-shape.yaml": {("usage.shape", NS)},
    "upstream/chat-usage.json": {("usage.shape", NS)},
    "level2/responses-usage.yaml": {("usage.shape", NS)},
    "level1/chat-cancel-client.yaml": {("cancel.reason", NS)},
    # upstream's recipe fixes the code only: any family is a reading, no note
    "upstream/chat-backend-error.json": set(),
}


def run(cwd: Path, ep: Any, *args: str) -> tuple[int, dict[str, Any], str]:
    chosen = [a for r in EXPECTED for a in ("--recipes", str(RECIPES / r))]
    proc = subprocess.run(
        [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", ep.address,
         "--manifest", str(LEVELS_MANIFEST), "--results", "r.json", "--timeout", "20",
         "--model", "minimal-model", *chosen, *args],
        cwd=cwd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out
    return proc.returncode, json.loads((cwd / "r.json").read_text()), out


def test_the_open_choices_pass_with_notes_and_fail_only_strict(tmp_path: Path,
                                                               start_endpoint: Any) -> None:
    with start_endpoint(tmp_path, None, ("--variant", "open-shapes", "--levels", "3")) as ep:
        code, doc, out = run(tmp_path, ep)
        ran = [r for r in doc["results"] if r["outcome"] != "skipped"]
        assert len(ran) == len(EXPECTED), out
        seen = {(f["rule"], f["level"]) for r in ran for f in r["diagnostics"]["findings"]
                if f["level"] != "informational"}
        assert code == 0 and all(r["outcome"] == "passed" for r in ran), out
        assert seen == set().union(*EXPECTED.values()), out
        code, doc, out = run(tmp_path, ep, "--strict")
        failed = {f["rule"] for r in doc["results"] if r["outcome"] == "failed"
                  for f in r["diagnostics"]["findings"] if f["level"] == "failed"}
        assert code == 1 and failed == {rule for rule, _ in set().union(*EXPECTED.values())}, out
