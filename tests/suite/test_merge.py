"""Reports say what was tested with what, stream as NDJSON, and several runs merge into one.

Runs of the example endpoint over TCP and IPC (two "replicas" of one service), and of a
defective one, through ``nnrp-conformance run``; then ``nnrp-conformance merge``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import __version__

pytestmark = pytest.mark.wire

CLI = [sys.executable, "-m", "nnrp_conformance.cli"]
META_KEYS = {"suite_version", "nnrp_py_version", "python", "target", "transport", "adapter",
             "model", "manifest_digest", "recipe_count", "recipe_set_digest",
             "capabilities_digest"}


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def run_against(ep: Any, tmp: Path, name: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    results = tmp / f"{name}.json"
    proc = cli(tmp, "run", "--target", ep.address, "--manifest", str(ep.manifest),
               "--results", str(results), "--report-ndjson", f"{name}.ndjson", "--timeout", "10")
    return proc, results


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, start_endpoint: Any) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("runs")
    out: dict[str, Any] = {"tmp": tmp}
    with start_endpoint(tmp) as ep:
        out["tcp"] = run_against(ep, tmp, "tcp")
        out["tcp_address"] = ep.address
    with start_endpoint(tmp, None, ("--listen", f"ipc://{tmp / 'ep.sock'}")) as ep:
        out["ipc"] = run_against(ep, tmp, "ipc")
        out["ipc_address"] = ep.address
    with start_endpoint(tmp, "capability-lies") as ep:
        out["lies"] = run_against(ep, tmp, "lies")
        out["lies_address"] = ep.address
    return out


def test_every_result_says_what_was_tested_with_what(runs: dict[str, Any]) -> None:
    (proc, path), (_, ipc) = runs["tcp"], runs["ipc"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    metas = [r["diagnostics"]["run"] for r in json.loads(path.read_text())["results"]]
    assert all(m == metas[0] for m in metas)
    meta = metas[0]
    assert set(meta) == META_KEYS
    assert meta["suite_version"] == __version__ and meta["transport"] == "tcp"
    assert meta["target"] == runs["tcp_address"] and meta["model"] == "minimal-model"
    assert meta["manifest_digest"].startswith("sha256:") and meta["recipe_count"] >= 25
    ipc_meta = json.loads(ipc.read_text())["results"][0]["diagnostics"]["run"]
    assert ipc_meta["transport"] == "ipc"
    # the same manifest, recipes and service: the same digests from either transport
    for key in ("manifest_digest", "recipe_set_digest", "capabilities_digest"):
        assert ipc_meta[key] == meta[key], key
    assert "transport tcp · suite " + __version__ in proc.stdout


def test_the_event_stream_has_one_line_per_run_event(runs: dict[str, Any]) -> None:
    proc, _ = runs["tcp"]
    lines = [json.loads(x) for x in (runs["tmp"] / "tcp.ndjson").read_text().splitlines()]
    kinds = [line["event"] for line in lines]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunFinished"
    cases = [c["id"] for c in lines[0]["cases"]]
    finished = [line["record"]["id"] for line in lines if line["event"] == "CaseFinished"]
    assert finished == cases
    # one CaseStarted per planned case, a skipped one (a Level 2/3 recipe this Level 1
    # manifest does not claim) included, as in the pytest face
    assert kinds.count("CaseStarted") == len(cases)
    assert [c["selection"] for c in lines[0]["cases"]].count("selected") < len(cases)
    assert lines[0]["metadata"]["transport"] == "tcp"
    assert lines[-1]["exit_code"] == proc.returncode == 0
    assert all(line["at"] >= lines[0]["at"] for line in lines)
    assert str(runs["tmp"] / "tcp.ndjson") in proc.stdout  # listed among the files written


def test_two_replicas_merge_into_one_passing_report(runs: dict[str, Any]) -> None:
    tmp = runs["tmp"]
    merged = cli(tmp, "merge", str(runs["tcp"][1]), str(runs["ipc"][1]), "--report", "fleet")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "merged verdict: PASSED" in merged.stdout
    md = (tmp / "fleet.md").read_text()
    ipc_label = f"{runs['ipc_address']} (ipc)"
    assert f"| recipe | {runs['tcp_address']} | {ipc_label} |" in md
    assert "Disagreements" not in md
    assert "<th>" + ipc_label in (tmp / "fleet.html").read_text()


def test_a_disagreeing_replica_is_called_out_and_fails_the_merge(runs: dict[str, Any]) -> None:
    tmp = runs["tmp"]
    assert runs["lies"][0].returncode == 1
    merged = cli(tmp, "merge", str(runs["tcp"][1]), str(runs["lies"][1]))
    assert merged.returncode == 1, merged.stdout + merged.stderr
    out = merged.stdout
    assert "merged verdict: FAILED" in out
    assert "mismatch: capability document differs" in out
    assert "disagreement: level1.capabilities.document" in out


def test_merge_errors_name_the_file(tmp_path: Path, runs: dict[str, Any]) -> None:
    one = cli(tmp_path, "merge", str(runs["tcp"][1]))
    assert one.returncode == 2 and "at least two" in one.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"profile": "x"}')
    proc = cli(tmp_path, "merge", str(runs["tcp"][1]), str(bad))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{bad}: not a case-results document" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_runs_a_baseline_waived_merge_green(tmp_path: Path, start_endpoint: Any) -> None:
    """Issue 27 item 8: a case a baseline waived did not fail its run and does not fail the
    merge (its file keeps upstream's outcome ``failed``: the truth); three green runs, one
    green merge. A non-strict case is merged as the pass it is."""
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "level1" / "chat-streaming-text.yaml"
    baseline = tmp_path / "baseline.yaml"
    paths = []
    with start_endpoint(tmp_path, "schema-invalid-event") as ep:
        common = ["--target", ep.address, "--manifest", str(ep.manifest), "--recipes",
                  str(recipe), "--timeout", "10", "--baseline", str(baseline)]
        first = cli(tmp_path, "run", *common, "--results", "w.json", "--baseline-update")
        assert first.returncode == 1 and baseline.exists(), first.stdout + first.stderr
        for n in range(3):
            done = cli(tmp_path, "run", *common, "--results", f"r{n}.json")
            assert done.returncode == 0, done.stdout + done.stderr
            (result,) = json.loads((tmp_path / f"r{n}.json").read_text())["results"]
            assert result["outcome"] == "failed" and result["diagnostics"]["waived"]
            paths.append(str(tmp_path / f"r{n}.json"))
    merged = cli(tmp_path, "merge", *paths)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "merged verdict: PASSED" in merged.stdout
