"""Every file of a release's evidence folder describes the one run its record names (issue 43
item 6: the recorded ``release-run.json`` was not the run ``release-cost.json`` described, its
folder had no ``twin/`` though the release writes one, and the gate report and the parity
documents were stamped hours after the run's suite).

A release run records itself (``release/record.py``: id, commit, command, start, end, cost) and
clears what an earlier run wrote; :func:`one_run_problems` names every file the recorded run
did not write. Here on folders built the way the release builds them, and on the committed
evidence (``reports/evidence``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vllm_nnrp_adapter.benchmark.lib.results import now_rfc3339
from vllm_nnrp_adapter.release.record import (
    RUN_FILE,
    SUITE_STEP,
    TWIN_STEP,
    RunRecord,
    clear_earlier_run,
    one_run_problems,
)

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO / "reports" / "evidence"
VERSION = "0.32.0"


def _stamped(path: Path, stamp: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"generated_at": stamp or now_rfc3339()}), encoding="utf-8")


def _release(out: Path) -> RunRecord:
    """A folder as a release run of one version leaves it, its record written at the end."""
    record = RunRecord(command=["--out", str(out)], quick=True, versions=[VERSION])
    out.mkdir(parents=True, exist_ok=True)
    for name in ("manifest.json", "release-policy.json", "release-gate.md",
                 "release-gate.html"):
        (out / name).write_text("{}", encoding="utf-8")
    vdir = out / f"vllm-{VERSION}"
    _stamped(vdir / "execution-plan.json")
    (vdir / "case-results.json").write_text("{}", encoding="utf-8")
    (vdir / "twin").mkdir()
    _stamped(vdir / "twin" / "execution-plan.json")
    _stamped(vdir / "bench" / "streaming-latency.json")
    _stamped(out / "bench" / "wire.json")
    _stamped(out / "release-gate.json")
    steps = [{"step": title, "ok": True, "seconds": 1.0}
             for title in (f"start the adapter on vLLM {VERSION}", SUITE_STEP.format(VERSION),
                           TWIN_STEP.format(VERSION))]
    record.write(out, steps, cache_bytes=123, ended=True)
    return record


def test_a_release_folder_is_one_run_and_records_itself(tmp_path: Path) -> None:
    record = _release(tmp_path)
    assert one_run_problems(tmp_path) == []
    run = json.loads((tmp_path / RUN_FILE).read_text(encoding="utf-8"))["run"]
    assert run["id"] == record.id and len(run["id"]) == 32
    if (REPO / ".git").exists():  # a checkout (a worktree's .git is a file): its HEAD
        assert re.fullmatch(r"[0-9a-f]{40}", run["commit"]), run["commit"]
        assert isinstance(run["dirty"], bool)
    assert run["started_at"] <= run["ended_at"] and run["seconds"] >= 0
    assert run["versions"] == [VERSION] and run["quick"] is True
    assert run["command"].startswith("vllm-nnrp release --out ")
    assert run["cache_bytes"] == 123 and run["machine"]["cores"] >= 1
    assert isinstance(run["cold"], bool)


@pytest.mark.parametrize(("spoil", "named"), [
    # a document of an earlier or a later run (a benchmark or the gate re-run alone)
    (lambda out: _stamped(out / "bench" / "mapper.json", "2026-01-01T00:00:00Z"),
     "bench/mapper.json: generated 2026-01-01T00:00:00Z, outside the run"),
    (lambda out: _stamped(out / "release-gate.json", "2999-01-01T00:00:00Z"),
     "release-gate.json: generated 2999-01-01T00:00:00Z, outside the run"),
    # another command's output, or a hand-written file
    (lambda out: (out / "canary").mkdir(), "canary: not written by the release run"),
    (lambda out: (out / "release-cost.json").write_text("{}"),
     "release-cost.json: not written by the release run"),
    (lambda out: (out / "vllm-0.99.0").mkdir(), "vllm-0.99.0/: not a version of the run"),
    # a version without what its steps wrote
    (lambda out: (out / f"vllm-{VERSION}" / "twin" / "execution-plan.json").unlink()
     or (out / f"vllm-{VERSION}" / "twin").rmdir(),
     f"vllm-{VERSION}/twin/: missing, the run's twin step ran"),
    (lambda out: (out / f"vllm-{VERSION}" / "case-results.json").unlink(),
     f"vllm-{VERSION}/case-results.json: missing"),
    # a record from before release runs recorded themselves: a list of steps
    (lambda out: (out / RUN_FILE).write_text("[]"), "release-run.json: no record of an ended run"),
])
def test_what_the_recorded_run_did_not_write_is_named(tmp_path: Path, spoil, named: str) -> None:  # type: ignore[no-untyped-def]
    _release(tmp_path)
    spoil(tmp_path)
    problems = one_run_problems(tmp_path)
    assert len(problems) == 1 and problems[0].startswith(named), problems


def test_a_release_clears_an_earlier_runs_files_and_nothing_else(tmp_path: Path) -> None:
    _release(tmp_path)
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    clear_earlier_run(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    clear_earlier_run(tmp_path / "absent")  # a first run: nothing to clear


def test_the_recorded_evidence_is_one_release_run() -> None:
    """The committed folder, as the gate reads it. Evidence recorded before release runs
    recorded themselves cannot say which run it is: regenerate it (bash
    scripts/regenerate-evidence), after which this checks it whole."""
    problems = one_run_problems(EVIDENCE)
    recorded = json.loads((EVIDENCE / RUN_FILE).read_text(encoding="utf-8"))
    if not isinstance(recorded, dict):
        pytest.xfail("reports/evidence was recorded before release runs recorded themselves; "
                     "bash scripts/regenerate-evidence rewrites it as one run: "
                     + "; ".join(problems))
    assert problems == []
