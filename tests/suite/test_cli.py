"""``nnrp-conformance run`` and ``plan``: the same core without pytest, same files, exit codes
0 / 1 (a selected recipe failed) / 2 (usage or input error, no traceback) / 3 (target)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import validation

pytestmark = pytest.mark.wire


def cli(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nnrp_conformance.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_run_passes_and_writes_the_same_files(tmp_path: Path, endpoint: Any) -> None:
    proc = cli(tmp_path, "run", "--target", endpoint.address, "--manifest",
               str(endpoint.manifest), "--report", "out/report.html")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert " 0 failed" in proc.stdout
    results = json.loads((tmp_path / "nnrp-conformance" / "case-results.json").read_text())
    assert validation.validate("case-results", results) == []
    plan = json.loads((tmp_path / "nnrp-conformance" / "execution-plan.json").read_text())
    assert validation.validate("execution-plan", plan) == []
    assert {c["id"] for c in plan["cases"]} <= {r["id"] for r in results["results"]}
    assert (tmp_path / "out" / "report.md").is_file()
    assert (tmp_path / "out" / "report.html").is_file()
    # the default folder lands in the caller's repository ignored (as .pytest_cache does), and
    # the run says where it wrote; a folder the caller named is theirs and left unmarked
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert "nnrp-conformance/" not in status and "out/report.html" in status, status
    assert "nnrp-conformance/case-results.json" in proc.stdout
    assert not (tmp_path / "out" / ".gitignore").exists()


def test_run_exits_1_when_a_selected_recipe_fails(
        tmp_path: Path, start_endpoint: Any) -> None:
    with start_endpoint(tmp_path, "schema-invalid-event") as ep:
        proc = cli(tmp_path, "run", "--nnrp-target", ep.address, "--manifest",
                   str(ep.manifest), "--timeout", "3", "--results", "r.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[event.schema]" in proc.stdout
    doc = json.loads((tmp_path / "r.json").read_text())
    assert any(r["outcome"] == "failed" for r in doc["results"])


def test_max_failures_stops_the_run_and_records_what_it_did_not_run(
        tmp_path: Path, start_endpoint: Any) -> None:
    """``--max-failures 2``: the run stops after its second failed case, fails, and every case
    after it has a skipped record naming the stop (a partial run never passes for a whole
    one); without the option the same endpoint fails more cases than that."""
    with start_endpoint(tmp_path, "schema-invalid-event") as ep:
        whole = cli(tmp_path, "run", "--target", ep.address, "--manifest", str(ep.manifest),
                    "--timeout", "3", "--results", "whole.json")
        stopped = cli(tmp_path, "run", "--target", ep.address, "--manifest", str(ep.manifest),
                      "--timeout", "3", "--results", "stopped.json", "--max-failures", "2")
    assert whole.returncode == stopped.returncode == 1, stopped.stdout + stopped.stderr
    all_cases = json.loads((tmp_path / "whole.json").read_text())["results"]
    doc = json.loads((tmp_path / "stopped.json").read_text())
    assert validation.validate("case-results", doc) == []
    assert sum(r["outcome"] == "failed" for r in all_cases) > 2
    outcomes = [r["outcome"] for r in doc["results"]]
    assert outcomes.count("failed") == 2
    last = max(i for i, o in enumerate(outcomes) if o == "failed")
    after = doc["results"][last + 1:]
    assert after and all(r["outcome"] == "skipped" and "--max-failures 2" in r["message"]
                         for r in after), after[:2]
    # the cases before the stop are the whole run's, judged the same way
    assert outcomes[:last + 1] == [r["outcome"] for r in all_cases][:last + 1]


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_max_failures_takes_a_positive_count(tmp_path: Path, value: str) -> None:
    proc = cli(tmp_path, "run", "--target", "127.0.0.1:1", "--manifest", "m.json",
               "--max-failures", value)
    assert proc.returncode == 2 and "--max-failures" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_run_without_target_is_an_argparse_error(tmp_path: Path) -> None:
    proc = cli(tmp_path, "run", "--manifest", "m.json")
    assert proc.returncode == 2
    assert "--target" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_manifest_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "manifest.json"
    bad.write_text(json.dumps({"adapter": "x", "profile": "openai-compatible",
                               "schema_version": "openai-compatible/1",
                               "compatibility_levels": [1], "operations": []}))
    proc = cli(tmp_path, "run", "--target", "127.0.0.1:9", "--manifest", str(bad))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(bad) in proc.stderr and "/operations" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_recipe_names_file_and_field(tmp_path: Path, endpoint: Any) -> None:
    recipe = tmp_path / "broken.yaml"
    recipe.write_text("id: x\nprofile: openai-compatible\nschema_version: openai-compatible/1\n"
                      "operation: chat.completions.create\nrequest: {body: {}}\n"
                      "expect: {events: [], terminal: sometimes}\n")
    proc = cli(tmp_path, "plan", "--manifest", str(endpoint.manifest), "--recipes", str(recipe))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(recipe) in proc.stderr and "/expect/terminal" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_param_is_a_usage_error(tmp_path: Path, endpoint: Any) -> None:
    proc = cli(tmp_path, "plan", "--manifest", str(endpoint.manifest), "--param", "NOEQUALS")
    assert proc.returncode == 2
    assert "KEY=VALUE" in proc.stderr


def test_unreachable_target_exits_3(tmp_path: Path, endpoint: Any) -> None:
    proc = cli(tmp_path, "run", "--target", "127.0.0.1:9", "--manifest",
               str(endpoint.manifest), "--connect-timeout", "2")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "nothing listening on 127.0.0.1:9" in proc.stderr and "Traceback" not in proc.stderr


def test_plan_writes_the_plan_without_running(tmp_path: Path, endpoint: Any) -> None:
    proc = cli(tmp_path, "plan", "--target", endpoint.address, "--manifest",
               str(endpoint.manifest), "--plan", "p.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "p.json").read_text())
    assert validation.validate("execution-plan", doc) == []
    assert doc["cases"]
    assert not (tmp_path / "nnrp-conformance" / "case-results.json").exists()


def test_plan_offline_from_a_capability_file(tmp_path: Path, endpoint: Any) -> None:
    caps = tmp_path / "caps.json"
    caps.write_text(json.dumps({"models": [{"id": "offline-model"}]}))
    proc = cli(tmp_path, "plan", "--manifest", str(endpoint.manifest), "--capabilities",
               str(caps), "--plan", "p.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc.get("model") == "offline-model"
