"""Each failure prints one command that re-runs just that recipe against the same target with
the same parameters; run alone, it fails the same way (issue 16's "done when")."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.wire

CLI = [sys.executable, "-m", "nnrp_conformance.cli"]


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def failed_rules(path: Path) -> dict[str, set[str]]:
    doc = json.loads(path.read_text())
    return {r["id"]: {f["rule"] for f in r["diagnostics"].get("findings", [])}
            for r in doc["results"] if r["outcome"] == "failed"}


def test_a_failure_prints_a_command_that_fails_the_same_way_alone(
        tmp_path: Path, start_endpoint: Any) -> None:
    with start_endpoint(tmp_path, "schema-invalid-event") as ep:
        first = run([*CLI, "run", "--target", ep.address, "--manifest", str(ep.manifest),
                     "--timeout", "7", "--param", "PROMPT_TEXT=Say hello.", "--report", "out/r"],
                    tmp_path)
        assert first.returncode == 1, first.stdout + first.stderr
        results = tmp_path / "nnrp-conformance" / "case-results.json"
        failed = failed_rules(results)
        case = "openai-compatible.chat.streaming-text"
        assert "event.schema" in failed[case], failed
        doc = json.loads(results.read_text())
        (entry,) = [r for r in doc["results"] if r["id"] == case]
        command = entry["diagnostics"]["reproduce"]
        # printed under the failure, and in both human reports
        assert f"reproduce: {command}" in first.stdout
        assert command in (tmp_path / "out" / "r.md").read_text()
        assert "--timeout 7" in command and "--param 'PROMPT_TEXT=Say hello.'" in command
        argv = shlex.split(command)
        assert argv[:2] == ["nnrp-conformance", "run"]
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        again = run([*CLI, *argv[1:]], elsewhere)  # absolute paths: any directory will do
    assert again.returncode == 1, again.stdout + again.stderr
    out = Path(argv[argv.index("--results") + 1])
    assert failed_rules(out) == {case: failed[case]}
    assert [r["id"] for r in json.loads(out.read_text())["results"]] == [case]
    # the first run's results were not overwritten by the reproduction
    assert failed_rules(results) == failed
