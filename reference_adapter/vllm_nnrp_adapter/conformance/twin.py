"""The HTTP twin of the reference adapter: vLLM's own HTTP server on the same engine.

Owns running the suite with ``--nnrp-http-twin`` against the adapter where its twin is exact:
inside ``vllm serve`` (the vLLM-plugin start-up path: ``--middleware
vllm_nnrp_adapter.vllm_plugin.NnrpServing`` and ``NNRP_PLUGIN_LISTEN``), so the NNRP answer
and the HTTP answer come from one engine, one model, one set of engine flags; finding that
server's HTTP port (:func:`http_url`); and the run's record, ``twin.json`` beside the suite's
files (:func:`summarize`: every case compared or not, each difference with both sides).
``vllm-nnrp conformance --http-twin`` (:func:`main`) and ``vllm-nnrp release`` (its ``twin/``
folder per vLLM version) run it; docs/twin.md lists what it found on each tested version.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..launch.adapter_process import AdapterProcess
from ..launch.embedded import (
    REPO_ROOT,
    ConformanceSetupError,
    tiny_model,
    vllm_python,
    vllm_version_of,
)
from ..profile.policy import NEWEST_TESTED, TESTED_VERSIONS
from .conformance import manifest_for_vllm, run_suite

__all__ = ["TWIN_DIR", "TWIN_FLAG", "TWIN_PROBES", "TWIN_SUMMARY", "http_url", "main",
           "probe_recipes", "run_twin", "summarize", "twin_server"]

#: ``vllm-nnrp conformance --http-twin`` runs :func:`main` instead of the explicit path's run
TWIN_FLAG = "--http-twin"

#: where the release run records the twin of one vLLM version (below its ``vllm-VERSION/``)
TWIN_DIR = "twin"
#: the run's record of the comparison, beside the suite's case results
TWIN_SUMMARY = "twin.json"
#: requests no recipe sends (optional fields, sampling with a seed, invalid values), each a
#: recipe whose answer the twin compares; in a source checkout only (docs/twin.md#probes)
TWIN_PROBES = REPO_ROOT / "tests" / "real_vllm" / "twin_probes"


def probe_recipes() -> list[str]:
    """The suite's ``--recipes`` options for the bundled recipes plus :data:`TWIN_PROBES`, or
    none (the bundled recipes alone) without a checkout."""
    if not (TWIN_PROBES.is_dir() and (REPO_ROOT / "recipes").is_dir()):
        return []
    return ["--recipes", str(REPO_ROOT / "recipes"), "--recipes", str(TWIN_PROBES)]


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


def twin_server(python: str, model_dir: Path, out_dir: Path) -> AdapterProcess:
    """``vllm serve`` with the plugin on ``python``'s vLLM, not yet started (its log in
    ``out_dir``): the twin's server, started by :func:`run_twin` or ahead of it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return AdapterProcess(python, model_dir, log_path=out_dir / "vllm-serve.log",
                          startup_path="vllm-plugin")


def run_twin(python: str, model_dir: Path, version: str, out_dir: Path,
             extra: Sequence[str] = (), *, manifest: Path | None = None,
             server: AdapterProcess | None = None) -> int:
    """``vllm serve`` with the plugin on ``python``'s vLLM (``server``: one already started by
    :func:`twin_server`, which this stops), then the suite against its NNRP endpoint with its
    HTTP API as the twin (with ``manifest``, else the claims the adapter keeps on ``version``;
    ``extra``: more suite options, by default :func:`probe_recipes`); writes the suite's files
    and :data:`TWIN_SUMMARY` to ``out_dir``. The suite's exit status (0: no case failed; twin
    differences do not fail a case: they are non-strict)."""
    adapter = server or twin_server(python, model_dir, out_dir)
    with contextlib.ExitStack() as stack:
        stack.callback(adapter.stop)
        if server is None:
            adapter.start()
        url = http_url(adapter)
        print(f"==> vllm serve with the NNRP plugin: NNRP {adapter.address}, HTTP {url} "
              f"(vLLM {adapter.info.get('vllm_version')}, up in {adapter.started_in_s:.1f} s)",
              flush=True)
        manifest = (manifest or manifest_for_vllm(version)).resolve()
        rc = run_suite(adapter.address, manifest, out_dir,
                       ["--nnrp-http-twin", url, "-q", *(extra or probe_recipes())])
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


def main(argv: Sequence[str]) -> int:
    """``vllm-nnrp conformance --http-twin``: :func:`run_twin` on the embedded default."""
    p = argparse.ArgumentParser(
        prog=f"vllm-nnrp conformance {TWIN_FLAG}",
        description="Start vllm serve with the NNRP plugin on the embedded default (real vLLM "
        "CPU, tiny local model) and run the suite against its NNRP endpoint, every request "
        "also sent to vLLM's own HTTP API on the same engine and the answers compared "
        "(docs/twin.md).")
    p.add_argument("--vllm-version", default=None,
                   help=f"one of {', '.join(TESTED_VERSIONS)}; default: this interpreter's "
                   f"vLLM, else {NEWEST_TESTED}")
    p.add_argument("--model-dir", type=Path, default=None, help="default: the tiny model")
    p.add_argument("--manifest", type=Path, default=None)
    p.add_argument("--out", type=Path, default=Path("artifacts/twin"))
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = p.parse_args(list(argv))
    try:
        python = vllm_python(args.vllm_version)
        model_dir = args.model_dir or tiny_model(python)
        return run_twin(python, model_dir, vllm_version_of(python), args.out.resolve(),
                        args.pytest_args, manifest=args.manifest)
    except (ConformanceSetupError, subprocess.CalledProcessError, RuntimeError) as exc:
        print(f"vllm-nnrp conformance {TWIN_FLAG}: {exc}", file=sys.stderr)
        return 2
