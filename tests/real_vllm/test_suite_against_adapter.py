"""The whole conformance suite against the adapter serving real vLLM CPU, on both lines.

The suite runs as a provider runs it: its own pytest process, ``--nnrp-target`` and
``--manifest``, judging the adapter from the outside over loopback NNRP.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from nnrp_conformance.validation import validate
from vllm_nnrp_adapter import NEWEST_TESTED
from vllm_nnrp_adapter.conformance.conformance import manifest_for_vllm, run_suite
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess
from vllm_nnrp_adapter.vllm_backend.families import limitations

pytestmark = pytest.mark.real_vllm
REPO = Path(__file__).resolve().parents[2]


def full_suite(vllm_env, ad: AdapterProcess, out: Path, *,  # type: ignore[no-untyped-def]
               embeddings: bool) -> dict:
    """Run the whole suite against the adapter ``ad`` serving real vLLM (with ``embeddings``,
    the embedded default's embeddings engine beside it), require every selected recipe to
    pass; returns the run's figures."""
    assert ad.info["vllm_version"] == vllm_env["version"]
    assert ad.info["startup_path"] == "explicit"
    t0 = time.monotonic()
    rc = run_suite(ad.address, manifest_for_vllm(vllm_env["version"], embeddings=embeddings),
                   out)
    suite_s = time.monotonic() - t0
    rss = ad.rss_bytes()
    address = ad.address
    results = json.loads((out / "case-results.json").read_text())
    assert validate("case-results", results) == []
    failed = [r for r in results["results"] if r["outcome"] == "failed"]
    assert not failed, json.dumps(failed, indent=2)[:4000]
    assert ad.log_path is not None
    assert rc == 0, ad.log_path.read_text()[-4000:]
    passed = {r["id"] for r in results["results"] if r["outcome"] == "passed"}
    # Every mandatory and claimed optional recipe ran and passed (nothing silently skipped).
    for r in results["results"]:
        if r["outcome"] == "skipped":
            assert r.get("diagnostics", {}).get("selection") != "selected", r
    assert any("tool-call" in i for i in passed) and any("cancel" in i for i in passed)
    return {"version": vllm_env["version"], "address": address,
            "startup_s": round(ad.started_in_s, 1), "rss_mib": round(rss / 2**20),
            "suite_s": round(suite_s, 1), "passed": len(passed)}


def test_full_suite_passes_against_real_vllm(vllm_env, explicit_adapter, tmp_path,  # type: ignore[no-untyped-def]
                                             record_property):
    """Every claimed recipe on each line, against the shared explicit adapter with its
    embeddings engine: on the current line the Level 3 embeddings recipes run too (the
    release's claim), over a local socket (``ipc://``: a second transport; the transport is
    NNRP's, the same whatever vLLM serves, and the suite runs over every transport nnrp-py
    ships against the example endpoint, tests/suite/test_transports.py); the lower bound
    withholds that operation and claims Level 1, over TCP."""
    embeddings = not limitations(vllm_env["version"])
    figures = full_suite(vllm_env, explicit_adapter, tmp_path / "conformance", embeddings=True)
    assert figures["address"].startswith("unix://") == (vllm_env["version"] == NEWEST_TESTED), \
        figures
    if embeddings:
        results = json.loads((tmp_path / "conformance" / "case-results.json").read_text())
        embedded = [r for r in results["results"] if r["id"].startswith("level3.embeddings.")]
        assert len(embedded) == 4 and all(r["outcome"] == "passed" for r in embedded), embedded
    record_property("figures", json.dumps(figures))
    print("real-vLLM figures:", json.dumps(figures))



def test_backend_binding_in_the_vllm_venv(vllm_env):
    """vllm_backend's own tests, and the plugin's inertness, run inside the vLLM venv.

    Both import vllm; one process pays for that import once.
    """
    proc = subprocess.run(
        [
            vllm_env["python"],
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(REPO / "tests" / "real_vllm" / "test_backend_real.py"),
            str(REPO / "tests" / "real_vllm" / "test_vllm_plugin_inert.py"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
        env={
            **__import__("vllm_nnrp_adapter.launch.embedded", fromlist=["x"]).engine_environment(
                vllm_env["python"]
            ),
            "NNRP_TINY_MODEL": str(vllm_env["model"]),
        },
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
