"""The security cases against the example endpoint given a key (``--api-key``,
docs/examples/minimal_endpoint/api_key.py), through the CLI: enforced, the strict run passes
and the three key cases pass; claimed but not enforced (``--api-key-unenforced``), the run
passes non-strict and the strict run fails on the two refusal rules only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli_runs import run_cli

from conftest import REPO

KEY = "example-key-8086"
DISCOVERY = str(REPO / "recipes" / "level1" / "capabilities-document.yaml")
KEY_CASES = ("security.api-key.absent", "security.api-key.wrong", "security.api-key.accepted")


def by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in doc["results"]}


def test_the_example_with_a_key_passes_the_key_cases(tmp_path: Path, start_endpoint: Any
                                                     ) -> None:
    with start_endpoint(tmp_path, None, ("--api-key", KEY)) as ep:
        code, doc = run_cli(tmp_path, ep, "--recipes", DISCOVERY, "--api-key", KEY, "--strict")
    results = by_id(doc)
    assert code == 0, [r["message"] for r in doc["results"]]
    assert [results[c]["diagnostics"]["verdict"] for c in KEY_CASES] == ["passed"] * 3
    seen = results["security.api-key.absent"]["diagnostics"]["security"]["seen"]
    assert "invalid_api_key" in seen, seen
    assert KEY not in (tmp_path / "r.json").read_text()


def test_the_example_that_claims_a_key_and_serves_anyone(tmp_path: Path, start_endpoint: Any
                                                         ) -> None:
    args = ("--api-key", KEY, "--api-key-unenforced")
    with start_endpoint(tmp_path, None, args) as ep:
        code, doc = run_cli(tmp_path, ep, "--recipes", DISCOVERY, "--api-key", KEY)
        assert code == 0, [r["message"] for r in doc["results"]]
        assert by_id(doc)["security.api-key.absent"]["diagnostics"]["verdict"] == "non-strict"
        code, doc = run_cli(tmp_path, ep, "--recipes", DISCOVERY, "--api-key", KEY, "--strict")
    assert code == 1
    failed = {r["id"]: [f["rule"] for f in r["diagnostics"]["findings"]]
              for r in doc["results"] if r["outcome"] == "failed"}
    assert failed == {"security.api-key.absent": ["security.key-required"],
                      "security.api-key.wrong": ["security.wrong-key-refused"]}, failed
