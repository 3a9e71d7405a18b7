"""The HTTP twin of the reference adapter: vLLM's own HTTP server on the same engine.

Owns running the suite with ``--nnrp-http-twin`` against the adapter where its twin is exact:
inside ``vllm serve`` (the vLLM-plugin start-up path: ``--middleware
vllm_nnrp_adapter.vllm_plugin.NnrpServing`` and ``NNRP_PLUGIN_LISTEN``), so the NNRP answer
and the HTTP answer come from one engine, one model, one set of engine flags; finding that
server's HTTP port (:func:`http_url`); and the run's record, ``twin.json`` beside the suite's
files (:func:`summarize`: every case compared or not, each difference with both sides).
``vllm-nnrp conformance --http-twin`` and ``vllm-nnrp release`` (its ``twin/`` folder per
vLLM version) run it; docs/twin.md lists what it found on each tested version and why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .conformance import AdapterProcess, manifest_for_vllm, run_suite

__all__ = ["TWIN_DIR", "TWIN_SUMMARY", "http_url", "run_twin", "summarize"]

#: where the release run records the twin of one vLLM version (below its ``vllm-VERSION/``)
TWIN_DIR = "twin"
#: the run's record of the comparison, beside the suite's case results
TWIN_SUMMARY = "twin.json"


def http_url(adapter: AdapterProcess) -> str:
    """The base URL of vLLM's HTTP API in the API server process that serves NNRP: the one
    port that process listens on besides NNRP's (the server was started with ``--port 0``)."""
    nnrp = int(adapter.address.rsplit(":", 1)[1])
    assert adapter.pid is not None, "the adapter is running"
    ports = adapter.listeners().get(adapter.pid, set()) - {nnrp}
    if len(ports) != 1:
        raise RuntimeError(f"expected one HTTP port beside NNRP's {nnrp} in vLLM's API server, "
                           f"found {sorted(ports)}")
    return f"http://127.0.0.1:{ports.pop()}"


def summarize(results: dict[str, Any], **facts: Any) -> dict[str, Any]:
    """The twin's record from a case-results document: per case, compared or why not, and
    each difference (rule, the NNRP value, the HTTP value)."""
    cases = []
    for result in results.get("results") or ():
        twin = (result.get("diagnostics") or {}).get("http_twin")
        if not isinstance(twin, dict):
            continue
        differences = [{"rule": f["rule"], "nnrp": f.get("seen"), "http": f.get("expected"),
                        "message": f.get("message")}
                       for f in (result.get("diagnostics") or {}).get("findings") or ()
                       if str(f.get("rule", "")).startswith("twin.")]
        cases.append({"id": result["id"], "compared": twin.get("compared"),
                      "why": twin.get("why"), "fields": twin.get("fields_compared"),
                      "differences": differences})
    compared = [c for c in cases if c["compared"]]
    return {**facts, "cases": len(cases), "compared": len(compared),
            "with_differences": sorted(c["id"] for c in compared if c["differences"]),
            "results": cases}


def run_twin(python: str, model_dir: Path, version: str, out_dir: Path,
             extra: Sequence[str] = ()) -> int:
    """``vllm serve`` with the plugin on ``python``'s vLLM, then the suite against its NNRP
    endpoint with its HTTP API as the twin; writes the suite's files and :data:`TWIN_SUMMARY`
    to ``out_dir``. The suite's exit status (0: no case failed; twin differences do not fail
    a case: they are non-strict)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with AdapterProcess(python, model_dir, log_path=out_dir / "vllm-serve.log",
                        startup_path="vllm-plugin") as adapter:
        url = http_url(adapter)
        print(f"==> vllm serve with the NNRP plugin: NNRP {adapter.address}, HTTP {url} "
              f"(vLLM {adapter.info.get('vllm_version')}, up in {adapter.started_in_s:.1f} s)",
              flush=True)
        manifest = manifest_for_vllm(version)
        rc = run_suite(adapter.address, manifest, out_dir,
                       ["--nnrp-http-twin", url, "-q", *extra])
        results_path = out_dir / "case-results.json"
        if results_path.is_file():
            results = json.loads(results_path.read_text(encoding="utf-8"))
            summary = summarize(results, vllm_version=adapter.info.get("vllm_version"),
                                startup_path="vllm-plugin", manifest=manifest.name)
            (out_dir / TWIN_SUMMARY).write_text(json.dumps(summary, indent=2) + "\n",
                                                encoding="utf-8")
            print(f"==> twin: {summary['compared']} of {summary['cases']} cases compared, "
                  f"differences in {len(summary['with_differences'])}: "
                  f"{', '.join(summary['with_differences']) or 'none'}", flush=True)
    return rc
