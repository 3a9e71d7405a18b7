"""Strict on the profile, fair to the ecosystem (issue 14 item 5), over the real wire.

The example endpoint's ``upstream-names`` variant answers like the upstream vLLM NNRP adapter:
its error-code names, a top-level ``diagnostics`` field on every event, no discovery
operation. Everything it does is conformant to the profile, so every case passes with
``non-strict`` notes, and fails only with ``--strict`` (``--nnrp-strict``). Without a model to
learn the run stops with a setup error naming ``--nnrp-model``; with ``--capabilities FILE``
the capability case judges that document."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance.recipes import load_recipes

pytestmark = pytest.mark.wire

VARIANT = ("--variant", "upstream-names")
NON_STRICT_RULES = {"event.diagnostics-field", "error.code-alias", "capability.discovery"}
DOCUMENT = {
    "profile": "openai-compatible", "schema_version": "openai-compatible/1",
    "adapter": "minimal-endpoint", "compatibility_levels": [1],
    "operations": [{"name": "chat.completions.create", "streaming": True,
                    "non_streaming": True, "tool_calls": True, "cancellation": True}],
    "models": [{"id": "minimal-model", "owned_by": "minimal-endpoint"}],
}


@pytest.fixture(scope="module")
def upstream_like(tmp_path_factory: pytest.TempPathFactory, start_endpoint: Any) -> Any:
    with start_endpoint(tmp_path_factory.mktemp("ep"), None, VARIANT) as ep:
        yield ep


def cli(cwd: Path, ep: Any, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", ep.address,
         "--manifest", str(ep.manifest), "--results", "r.json", "--timeout", "10", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    path = cwd / "r.json"
    return proc.returncode, json.loads(path.read_text()) if path.exists() else None, \
        proc.stdout + proc.stderr


def findings(result: dict[str, Any]) -> list[dict[str, Any]]:
    return result["diagnostics"]["findings"]


def test_upstream_like_endpoint_passes_with_non_strict_notes(tmp_path: Path,
                                                             upstream_like: Any) -> None:
    code, doc, out = cli(tmp_path, upstream_like, "--model", "minimal-model")
    assert code == 0, out
    # the Level 2 and 3 recipes a Level 1 manifest does not claim are skipped, never sent
    results = [r for r in doc["results"] if r["outcome"] != "skipped"]
    assert {r["diagnostics"]["selection"] for r in doc["results"] if r not in results} == {
        "not_claimed"}
    assert all(r["outcome"] == "passed" for r in results), out
    assert {r["diagnostics"]["verdict"] for r in results} == {"non-strict"}
    levels = {(f["rule"], f["level"]) for r in results for f in findings(r)}
    assert {rule for rule, _ in levels} == NON_STRICT_RULES, levels
    assert {lv for _, lv in levels} == {"non-strict", "informational"}
    # every report shows the note with the recommended value
    assert "recommended: invalid_request" in out and "NON-STRICT" in out
    # docs/verdicts.md quotes this run's last line (test_docs holds its counts to the tree)
    level1 = sum(1 for r in load_recipes() if r.level == 1)
    assert len(results) == level1
    assert out.rstrip().endswith(f"{level1} passed, 0 failed, {len(doc['results']) - level1} "
                                 f"skipped ({level1} non-strict)"), out[-300:]


def test_upstream_like_endpoint_fails_only_when_strict(tmp_path: Path,
                                                       upstream_like: Any) -> None:
    code, doc, out = cli(tmp_path, upstream_like, "--model", "minimal-model", "--strict")
    assert code == 1, out
    failed = [r for r in doc["results"] if r["outcome"] == "failed"]
    assert failed and all(r["diagnostics"]["verdict"] == "failed" for r in failed)
    rules = {f["rule"] for r in failed for f in findings(r) if f["level"] == "failed"}
    assert rules == NON_STRICT_RULES, rules


def test_no_learnable_model_is_a_setup_error(tmp_path: Path, upstream_like: Any) -> None:
    code, doc, out = cli(tmp_path, upstream_like)
    assert code == 2 and doc is None, out
    assert "--nnrp-model" in out and "no model to test" in out


def test_capability_document_from_a_file(tmp_path: Path, upstream_like: Any) -> None:
    good = tmp_path / "caps.json"
    good.write_text(json.dumps(DOCUMENT))
    code, doc, out = cli(tmp_path, upstream_like, "--capabilities", str(good))
    assert code == 0, out  # the model comes from the file
    (case,) = [r for r in doc["results"] if r["id"] == "level1.capabilities.document"]
    notes = [f["message"] for f in findings(case) if f["level"] == "informational"]
    assert any(str(good) in n for n in notes), findings(case)
    lying = tmp_path / "lying.json"
    lying.write_text(json.dumps({**DOCUMENT, "compatibility_levels": [1, 2]}))
    code, doc, out = cli(tmp_path, upstream_like, "--capabilities", str(lying))
    (case,) = [r for r in doc["results"] if r["id"] == "level1.capabilities.document"]
    assert code == 1 and case["outcome"] == "failed", out
    assert "capability.agreement" in {f["rule"] for f in findings(case)}


def test_plugin_face_takes_the_same_options(pytester: pytest.Pytester, upstream_like: Any,
                                            args_for: Any) -> None:
    caps = pytester.path / "caps.json"
    caps.write_text(json.dumps(DOCUMENT))
    keyword = ("-k", "capabilities or wrong-schema-version")
    result = pytester.runpytest_subprocess(*args_for(upstream_like, "--nnrp-capabilities",
                                                     str(caps), *keyword))
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    strict = pytester.runpytest_subprocess(*args_for(upstream_like, "--nnrp-capabilities",
                                                     str(caps), "--nnrp-strict", *keyword))
    assert strict.ret == pytest.ExitCode.TESTS_FAILED, strict.stdout.str()
    strict.stdout.fnmatch_lines(["*error.code-alias*"])
