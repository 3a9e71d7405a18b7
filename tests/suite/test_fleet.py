"""One verdict for a fleet: ``nnrp-conformance run --target A --target B …`` judges each
target on its own (files of its own), then merges them; the odd target is named.

Three example endpoints run at once: two correct replicas (TCP and IPC), and a replica with a
defect that leaves its capability document alone (``bad-error-body``) or one whose document
differs (``capability-lies``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.wire

CLI = [sys.executable, "-m", "nnrp_conformance.cli"]


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, start_endpoint: Any) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("fleet")
    with contextlib.ExitStack() as stack:
        tcp = stack.enter_context(start_endpoint(tmp))
        ipc = stack.enter_context(start_endpoint(tmp, None,
                                                 ("--listen", f"ipc://{tmp / 'ep.sock'}")))
        usage = stack.enter_context(start_endpoint(tmp, "bad-error-body"))
        lies = stack.enter_context(start_endpoint(tmp, "capability-lies"))
        yield {"tmp": tmp, "tcp": tcp, "ipc": ipc, "usage": usage, "lies": lies,
               "manifest": str(tcp.manifest)}


def run_fleet(fleet: dict[str, Any], name: str, *targets: str,
              extra: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess[str], Path]:
    cwd = fleet["tmp"] / name
    cwd.mkdir()
    args = ["run", "--manifest", fleet["manifest"], "--timeout", "10", *extra]
    for target in targets:
        args += ["--target", target]
    return cli(cwd, *args), cwd


def outcomes(path: Path) -> dict[str, str]:
    return {r["id"]: r["outcome"] for r in json.loads(path.read_text())["results"]}


def test_two_correct_replicas_pass_as_one_fleet(fleet: dict[str, Any]) -> None:
    tcp, ipc = fleet["tcp"].address, fleet["ipc"].address
    proc, cwd = run_fleet(fleet, "replicas", tcp, ipc)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr
    out = cwd / "nnrp-conformance"
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert len(folders) == 2, folders  # each target its own files
    runs = [outcomes(out / f / "case-results.json") for f in folders]
    assert runs[0] == runs[1] and "passed" in runs[0].values()
    assert (out / ".gitignore").exists()
    md = (out / "fleet.md").read_text()
    assert md.startswith("# NNRP openai-compatible/1 conformance: fleet of 2 targets")
    assert "**PASSED" in md and tcp in md and "ipc" in md
    assert (out / "fleet.html").exists()
    assert "fleet verdict: PASSED" in proc.stdout


def test_the_replica_with_a_different_outcome_is_named(fleet: dict[str, Any]) -> None:
    tcp, ipc, odd = fleet["tcp"].address, fleet["ipc"].address, fleet["usage"].address
    proc, cwd = run_fleet(fleet, "odd-outcome", tcp, ipc, odd,
                          extra=("--report", "out/fleet-report"))
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr
    md = (cwd / "out" / "fleet-report.md").read_text()
    assert "**FAILED: 1 of 3 targets have failures" in md
    named = [line for line in md.splitlines() if "disagrees with the others" in line]
    assert len(named) == 1 and named[0].startswith(f"- {odd} disagrees"), named
    assert ": failed" in named[0]
    assert "capability document differs" not in md  # same document, different behaviour
    # each target's own report sits in its own folder
    assert len(list((cwd / "nnrp-conformance").glob("*/report.md"))) == 3


def test_a_replica_announcing_another_document_fails_the_fleet(fleet: dict[str, Any]) -> None:
    tcp, ipc, lies = fleet["tcp"].address, fleet["ipc"].address, fleet["lies"].address
    proc, cwd = run_fleet(fleet, "odd-document", tcp, ipc, lies)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr
    md = (cwd / "nnrp-conformance" / "fleet.md").read_text()
    assert "the targets announce different capability documents" in md
    assert f"- {lies} disagrees with the others: " in md
    assert "its capability document differs" in md
    assert f"- {tcp} disagrees" not in md and f"- {ipc} disagrees" not in md


def test_an_unreachable_replica_fails_the_fleet_and_the_others_are_judged(
        fleet: dict[str, Any]) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    tcp = fleet["tcp"].address
    proc, cwd = run_fleet(fleet, "unreachable", tcp, dead, extra=("--connect-timeout", "2"))
    assert proc.returncode == 3, proc.stdout[-4000:] + proc.stderr
    md = (cwd / "nnrp-conformance" / "fleet.md").read_text()
    assert f"- {dead}: not judged: cannot connect to NNRP target" in md
    assert "1 could not be judged" in md
    assert "| `" in md and "✅ passed" in md  # the reachable one was judged in full


@pytest.mark.parametrize(("targets", "extra", "message"), [
    (("127.0.0.1:1", "127.0.0.1:1"), (), "target '127.0.0.1:1' given twice"),
    (("127.0.0.1:1", "127.0.0.1:2"), ("--baseline", "b.yaml", "--baseline-update"),
     "--baseline-update takes one target"),
])
def test_a_fleet_that_is_not_one_is_a_usage_error(fleet: dict[str, Any], targets: tuple[str, ...],
                                                  extra: tuple[str, ...], message: str) -> None:
    proc, cwd = run_fleet(fleet, f"usage-{len(extra)}", *targets, extra=extra)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (cwd / "nnrp-conformance").exists()


# --- the pytest face ---------------------------------------------------------------------------


def plugin_args(fleet: dict[str, Any], *targets: str) -> list[str]:
    args = ["--manifest", fleet["manifest"], "--nnrp-timeout", "10", "-p", "no:hypothesispytest"]
    for target in targets:
        args += ["--nnrp-target", target]
    return args


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_the_plugin_judges_each_target_and_the_fleet(pytester: pytest.Pytester,
                                                     fleet: dict[str, Any],
                                                     workers: tuple[str, ...]) -> None:
    tcp, ipc, odd = fleet["tcp"].address, fleet["ipc"].address, fleet["usage"].address
    result = pytester.runpytest_subprocess(*plugin_args(fleet, tcp, ipc, odd), *workers, "-rA")
    assert result.ret == 1, result.stdout.str()[-4000:]
    out = result.stdout.str()
    folders = sorted(p for p in (pytester.path / "nnrp-conformance").iterdir() if p.is_dir())
    assert len(folders) == 3
    # one item per recipe and target; the odd target's failures are its own
    item = re.compile(r"^(PASSED|FAILED) \S*nnrp-conformance\[([^\]]+)\]::(\S+)")
    seen = [m.groups() for m in map(item.match, out.splitlines()) if m]
    failed = {(slug, case) for outcome, slug, case in seen if outcome == "FAILED"}
    assert failed and {slug for slug, _ in failed} == {odd.replace(":", "_")}, failed
    per_target = {slug for outcome, slug, _ in seen if outcome == "PASSED"}
    assert len(per_target) == 3, per_target
    assert "nnrp-conformance fleet" in out
    assert f"{odd} disagrees with the others" in out
    md = (pytester.path / "nnrp-conformance" / "fleet.md").read_text()
    assert "**FAILED: 1 of 3 targets have failures" in md


def test_the_plugin_fails_a_fleet_whose_documents_differ_even_without_failed_tests(
        pytester: pytest.Pytester, fleet: dict[str, Any]) -> None:
    tcp, lies = fleet["tcp"].address, fleet["lies"].address
    # only recipes both pass: the documents still differ, and that alone fails the fleet
    result = pytester.runpytest_subprocess(*plugin_args(fleet, tcp, lies), "-k",
                                           "stream and not capabilit")
    out = result.stdout.str()
    assert "failed" not in out.splitlines()[-1], out[-3000:]
    assert result.ret == 1, out[-4000:]
    assert "the targets announce different capability documents" in out
