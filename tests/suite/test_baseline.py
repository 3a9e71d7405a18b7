"""``--nnrp-baseline FILE``: accepted failures read ``waived`` (never ``passed``) and do not
fail the run; an expired waiver fails again and is reported, a stale one is reported;
``--nnrp-baseline-update`` writes the file from a run (issue 16's "done when")."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.wire

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "level1" / "chat-streaming-text.yaml"
CASE = "level1.chat.streaming-text"


def run(tmp: Path, ep: Any, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    results = tmp / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", ep.address,
         "--manifest", str(ep.manifest), "--recipes", str(RECIPE), "--results", str(results),
         "--report", "report", "--timeout", "10", *extra],
        cwd=tmp, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    doc = json.loads(results.read_text()) if results.exists() else {}
    return proc, doc


def test_a_waived_failure_an_expired_one_and_a_stale_one(tmp_path: Path,
                                                         start_endpoint: Any) -> None:
    baseline = tmp_path / "baseline.yaml"
    with start_endpoint(tmp_path, "schema-invalid-event") as ep:
        # 1. the update writes what this run failed; the run itself still fails
        proc, _ = run(tmp_path, ep, "--baseline", str(baseline), "--baseline-update")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        (waiver,) = yaml.safe_load(baseline.read_text())["waivers"]
        assert (waiver["recipe"], waiver["rule"]) == (CASE, "event.schema")
        assert str(waiver["expires"]) == (dt.date.today() + dt.timedelta(days=90)).isoformat()
        assert "replace this with why" in waiver["reason"]
        # 2. with the baseline: waived, never passed; the run passes
        waiver["reason"] = "deltas lack index until the fix in 2.1 ships"
        baseline.write_text(yaml.safe_dump({"waivers": [waiver]}))
        proc, doc = run(tmp_path, ep, "--baseline", str(baseline))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "0 passed, 0 failed, 1 waived, 0 skipped" in proc.stdout
        assert f"WAIVED {CASE}" in proc.stdout and "fix in 2.1" in proc.stdout
        (result,) = doc["results"]
        assert result["outcome"] == "failed"  # the case-results document keeps the truth
        assert result["diagnostics"]["waived"][0]["rule"] == "event.schema"
        assert "🔕 waived" in (tmp_path / "report.md").read_text()
        assert "v-waived" in (tmp_path / "report.html").read_text()
        # 3. expired yesterday: it fails again, and the baseline says why
        waiver["expires"] = dt.date.today() - dt.timedelta(days=1)
        baseline.write_text(yaml.safe_dump({"waivers": [waiver]}))
        proc, doc = run(tmp_path, ep, "--baseline", str(baseline))
        assert proc.returncode == 1, proc.stdout
        assert f"BASELINE expired waiver {CASE} [event.schema]" in proc.stdout
        assert "matched a failure, which fails" in proc.stdout
        assert doc["results"][0]["diagnostics"]["expired_waivers"][0]["rule"] == "event.schema"
    # 4. a conformant endpoint: the (unexpired) waiver matched nothing and is reported stale
    waiver["expires"] = dt.date.today() + dt.timedelta(days=5)
    baseline.write_text(yaml.safe_dump({"waivers": [waiver]}))
    with start_endpoint(tmp_path) as ep:
        proc, _ = run(tmp_path, ep, "--baseline", str(baseline))
    assert proc.returncode == 0, proc.stdout
    assert f"BASELINE stale waiver {CASE} [event.schema]" in proc.stdout


def test_a_bad_baseline_names_the_file_and_field(tmp_path: Path, endpoint: Any) -> None:
    bad = tmp_path / "baseline.yaml"
    bad.write_text(yaml.safe_dump({"waivers": [{"recipe": CASE, "rule": "event.schema",
                                                 "expires": "2030-01-01"}]}))
    proc, _ = run(tmp_path, endpoint, "--baseline", str(bad))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"invalid baseline: {bad}: /waivers/0" in proc.stderr and "reason" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc, _ = run(tmp_path, endpoint, "--baseline-update")
    assert proc.returncode == 2 and "--baseline-update needs --baseline FILE" in proc.stderr


def test_the_pytest_face_reports_a_waived_case_as_xfailed(
        pytester: pytest.Pytester, start_endpoint: Any, args_for: Any, tmp_path: Path) -> None:
    baseline = pytester.path / "baseline.json"
    baseline.write_text(json.dumps({"waivers": [{
        "recipe": CASE, "rule": "event.schema", "reason": "known", "expires": "2099-01-01"}]}))
    with start_endpoint(tmp_path, "schema-invalid-event") as ep:
        result = pytester.runpytest_subprocess(*args_for(
            ep, "--recipes", str(RECIPE), "--nnrp-baseline", str(baseline), "--nnrp-timeout", "10"))
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(xfailed=1)
    assert "1 waived" in result.stdout.str()
