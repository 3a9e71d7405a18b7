"""Generated requests against the adapter serving real vLLM (docs/generation.md), through the
pytest face as a provider runs it: a bounded run with a fixed seed, on the shared adapter of
the current line (no engine of its own). Every generated case ends without a failure: a
valid request vLLM refuses is a recommendation's business (generated.server-error,
generated.refusal-unnamed), never a failed case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnrp_conformance.validation import validate
from vllm_nnrp_adapter.conformance.conformance import manifest_for_vllm, run_suite
from vllm_nnrp_adapter.launch.adapter_process import AdapterProcess

pytestmark = [pytest.mark.real_vllm, pytest.mark.current_line_only]
REPO = Path(__file__).resolve().parents[2]
#: bounded: the run stays well under a minute on the tiny model (figures in the report)
CASES, SEED = 24, 7


def test_generated_requests_against_real_vllm(vllm_env, explicit_adapter: AdapterProcess,  # type: ignore[no-untyped-def]
                                              tmp_path: Path) -> None:
    out = tmp_path / "generated"
    rc = run_suite(explicit_adapter.address,
                   manifest_for_vllm(vllm_env["version"], embeddings=True), out,
                   ["--recipes", str(REPO / "recipes/level1/capabilities-document.yaml"),
                    "--nnrp-generate", str(CASES), "--nnrp-seed", str(SEED)])
    results = json.loads((out / "case-results.json").read_text())
    assert validate("case-results", results) == []
    generated = [r for r in results["results"] if r["id"].startswith("generated.")]
    assert len(generated) == CASES
    failed = [r for r in generated if r["outcome"] == "failed"]
    assert not failed, json.dumps(failed, indent=1, ensure_ascii=False)[:4000]
    assert rc == 0
    shown = sorted({f["rule"] for r in generated for f in r["diagnostics"]["findings"]})
    print(f"real vLLM {vllm_env['version']}: {len(generated)} generated cases (seed {SEED}) "
          f"passed; recommendations shown: {shown}")
