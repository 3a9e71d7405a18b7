"""The release gate on a complete synthetic evidence tree (both lines of the adapter's release
policy: four versions), then with each piece broken, on either line."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import contract, validation
from nnrp_conformance.cli import main as cli_main
from nnrp_conformance.gate import run_gate
from nnrp_conformance.gate.requirements import (
    SCOPE_SHARED,
    RequirementsError,
    load_policy,
    requirements_from_document,
)
from nnrp_conformance.manifest import load_manifest
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import load_recipes
from nnrp_conformance.reports.gate_files import REPORT_HTML, REPORT_JSON, REPORT_MARKDOWN

UPSTREAM = Path(__file__).parent / "data" / "upstream"
REPO = Path(__file__).resolve().parents[2]
POLICY_FILE = REPO / "manifests" / "vllm-nnrp-adapter.release-policy.json"
POLICY = load_policy(POLICY_FILE)
#: the policy's two lines: (lower bound, current tested) each
LOWER, CURRENT = "0.18.1", "0.22.1"
LOWER2, CURRENT2 = "0.23.0", "0.32.0"
VERSIONS = (LOWER, CURRENT, LOWER2, CURRENT2)
LINE1, LINE2 = "line >=0.18.0,<0.23", "line >=0.23.0,<0.33"

README = """# project

## Supported vLLM lines

| | 0.18 to 0.22 | 0.23 to 0.32 |
|---|---|---|
| declared range | `vllm>=0.18.0,<0.23` | `vllm>=0.23.0,<0.33` |
| lower bound tested | 0.18.1 | 0.23.0 |
| current line tested | 0.22.x (0.22.1) | 0.32.x (0.32.0) |

## Optional dependencies

| extra | brings |
|---|---|
| `vllm` | `vllm>=0.18.0,<0.33` |
| `prometheus` | prometheus_client |
| `dev` | ruff |

## Layout
"""

MANIFEST = {
    "adapter": "vllm-nnrp-adapter",
    "profile": contract.PROFILE,
    "schema_version": contract.SCHEMA_VERSION,
    "compatibility_levels": [1],
    "operations": [
        {
            "name": contract.OP_CHAT_COMPLETIONS_CREATE,
            "streaming": True,
            "non_streaming": True,
            "tool_calls": True,
            "cancellation": True,
        }
    ],
}

SMOKE_EVENTS = [
    {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": "Hel"},
    {"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": "lo"},
    {"type": contract.EV_USAGE, "usage": {"input_tokens": 3, "output_tokens": 2,
                                          "total_tokens": 5}},
    {
        "type": contract.EV_COMPLETED,
        "body": {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "tiny-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        },
    },
]


def _write(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")


def _bench(name: str, metrics: tuple[str, ...], vllm: str | None) -> dict[str, Any]:
    values = [1.0 + i * 0.25 for i in range(20)]
    return {
        "name": name,
        "generated_at": "2026-01-31T12:00:00Z",
        "machine": {"cpu": "test cpu", "cores": 2, "python": "3.11.7", "platform": "Linux"},
        "versions": {"nnrp_py": "1.0.0rc4.post20", "suite": "0.1.0", "vllm": vllm},
        "runs": 5,
        "metrics": [
            {"name": m, "unit": "ms", "median": 3.0, "p50": 3.0, "p95": 5.5, "samples": 20,
             "values": values}
            for m in metrics
        ],
    }


def _plan_and_results(recipes_dir: Path, manifest_path: Path) -> tuple[dict, dict]:
    plan = build_plan(load_recipes([recipes_dir]), load_manifest(manifest_path),
                      model_id="tiny-model", level=1)
    doc = plan.to_json()
    results = {
        "profile": contract.PROFILE,
        "schema_version": contract.SCHEMA_VERSION,
        "adapter": MANIFEST["adapter"],
        "results": [
            {
                "id": c.id,
                "outcome": contract.OUTCOME_PASSED,
                "terminal": c.expected_terminal,
                "events": [{"type": contract.TERMINAL_EVENT_FOR[c.expected_terminal]}],
                "diagnostics": {"level": c.level, "status": c.status, "selection": c.selection,
                                "findings": [], "duration_s": 0.0125},
            }
            for c in plan.cases
        ],
    }
    return doc, results


def _smoke(version: str) -> dict[str, Any]:
    return {
        "profile": contract.PROFILE,
        "schema_version": contract.SCHEMA_VERSION,
        "adapter": MANIFEST["adapter"],
        "results": [{"id": "smoke.e2e.streaming", "outcome": "passed", "terminal": "success",
                     "events": json.loads(json.dumps(SMOKE_EVENTS)),
                     "diagnostics": {"vllm": version, "model": "tiny-model"}}],
    }


def _policy_levels(ev: Path, levels: dict[str, list[int]]) -> None:
    """Set the recorded policy's claimed levels of the versions in ``levels``."""
    def change(doc: dict) -> None:
        for line in doc["lines"]:
            for version, claimed in levels.items():
                if version in line["levels"]:
                    line["levels"][version] = claimed
    _edit(ev / "release-policy.json", change)


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for f in UPSTREAM.glob("chat-*.json"):
        shutil.copy(f, recipes / f.name)
    ev = tmp_path / "evidence"
    _write(ev / "manifest.json", MANIFEST)
    shutil.copy(POLICY_FILE, ev / "release-policy.json")
    # the adapter's policy, its lines and tested versions as they are; only the levels are
    # the synthetic manifest's (Level 1 everywhere: the tree has upstream's Level 1 recipes)
    _policy_levels(ev, {v: [1] for v in VERSIONS})
    plan, results = _plan_and_results(recipes, ev / "manifest.json")
    for version in VERSIONS:
        d = ev / f"vllm-{version}"
        _write(d / "execution-plan.json", plan)
        _write(d / "case-results.json", results)
        _write(d / "smoke.json", _smoke(version))
    for b in POLICY.benchmarks:
        if b.scope == SCOPE_SHARED:
            _write(ev / "bench" / f"{b.name}.json", _bench(b.name, b.metrics, None))
        else:
            for version in VERSIONS:
                _write(ev / f"vllm-{version}" / "bench" / f"{b.name}.json",
                       _bench(b.name, b.metrics, version))
    readme = tmp_path / "README.md"
    readme.write_text(README, encoding="utf-8")
    return {"root": tmp_path, "evidence": ev, "recipes": recipes, "readme": readme}


def _gate(tree: dict[str, Path], **kw: Any):
    return run_gate(tree["evidence"], readme=tree["readme"], recipes=tree["recipes"], **kw)


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_complete_evidence_passes(tree: dict[str, Path]) -> None:
    result = _gate(tree)
    assert [v.failures for v in result.verdicts] == [[]] * 5
    assert result.passed
    assert validation.validate("release-gate-report", result.report) == []
    assert [g["name"] for g in result.report["gates"]] == list(contract.RELEASE_GATES)
    smoke = next(g for g in result.report["gates"] if g["name"] == contract.GATE_VLLM_SMOKE)
    assert smoke["details"]["lines"] == [
        {"declared": ">=0.18.0,<0.23", "lower_bound": {"vllm": LOWER, "passed": True},
         "current": {"vllm": CURRENT, "passed": True}},
        {"declared": ">=0.23.0,<0.33", "lower_bound": {"vllm": LOWER2, "passed": True},
         "current": {"vllm": CURRENT2, "passed": True}}]
    assert smoke["details"]["declared_line"] == ">=0.18.0,<0.33"
    assert result.report["environment"]["vllm"] == ", ".join(VERSIONS)
    assert result.report["environment"]["vllm_lines"] == ">=0.18.0,<0.23; >=0.23.0,<0.33"
    assert {r["id"] for r in result.report["recipes"]} >= {
        "openai-compatible.chat.streaming-text", "openai-compatible.chat.backend-error"}


def test_cli_writes_three_reports_and_exits_zero(tree: dict[str, Path]) -> None:
    out = tree["root"] / "out"
    code = cli_main(["gate", "--evidence", str(tree["evidence"]), "--readme", str(tree["readme"]),
                     "--recipes", str(tree["recipes"]), "--out", str(out)])
    assert code == 0
    report = _load(out / REPORT_JSON)
    assert report["passed"] is True
    assert validation.validate("release-gate-report", report) == []
    html = (out / REPORT_HTML).read_text(encoding="utf-8")
    assert "<svg" in html and "<polyline" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<script" not in html and "<link" not in html
    for version in VERSIONS:
        assert f"vLLM {version}" in html
    assert "release gate" in (out / REPORT_MARKDOWN).read_text(encoding="utf-8").lower()


# --- each piece of evidence broken: the gate fails naming that condition --------------------

Mutation = Callable[[dict[str, Path]], None]


def _edit(path: Path, change: Callable[[Any], None]) -> None:
    doc = _load(path)
    change(doc)
    _write(path, doc)


def _version_dir(tree: dict[str, Path], version: str) -> Path:
    return tree["evidence"] / f"vllm-{version}"


def no_case_results_current(t: dict[str, Path]) -> None:
    (_version_dir(t, CURRENT) / "case-results.json").unlink()


def failed_mandatory(t: dict[str, Path]) -> None:
    def change(doc: dict) -> None:
        r = next(r for r in doc["results"] if r["id"] == "openai-compatible.chat.usage")
        r["outcome"] = "failed"
        r["diagnostics"]["findings"] = [{"rule": "sequence.expected",
                                         "message": "no response.usage event"}]
    _edit(_version_dir(t, LOWER) / "case-results.json", change)


def non_strict_mandatory(t: dict[str, Path]) -> None:
    # a non-strict case passes a provider's run, never the release gate (issue 14)
    def change(doc: dict) -> None:
        r = next(r for r in doc["results"] if r["id"] == "openai-compatible.chat.usage")
        r["diagnostics"]["verdict"] = "non-strict"
        r["diagnostics"]["findings"] = [{"rule": "event.diagnostics-field", "level": "non-strict",
                                         "message": "a top-level diagnostics field"}]
    _edit(_version_dir(t, CURRENT) / "case-results.json", change)


def skipped_optional_claimed(t: dict[str, Path]) -> None:
    def change(doc: dict) -> None:
        r = next(r for r in doc["results"] if r["id"] == "openai-compatible.chat.cancellation")
        r["outcome"] = "skipped"
    _edit(_version_dir(t, CURRENT) / "case-results.json", change)


def missing_result(t: dict[str, Path]) -> None:
    def change(doc: dict) -> None:
        doc["results"] = [r for r in doc["results"]
                          if r["id"] != "openai-compatible.chat.non-streaming"]
    _edit(_version_dir(t, CURRENT) / "case-results.json", change)


def level1_not_selected(t: dict[str, Path]) -> None:
    def change(doc: dict) -> None:
        doc["cases"] = [c for c in doc["cases"]
                        if c["id"] != "openai-compatible.chat.invalid-body"]
    _edit(_version_dir(t, LOWER) / "execution-plan.json", change)


def recorded_not_claimed(t: dict[str, Path]) -> None:
    def change(doc: dict) -> None:
        r = next(r for r in doc["results"] if r["id"] == "openai-compatible.chat.tool-call-delta")
        r["diagnostics"]["selection"] = "not_claimed"
    _edit(_version_dir(t, CURRENT) / "case-results.json", change)


def manifest_without_level1(t: dict[str, Path]) -> None:
    _edit(t["evidence"] / "manifest.json", lambda d: d.update(compatibility_levels=[2]))


def manifest_missing(t: dict[str, Path]) -> None:
    (t["evidence"] / "manifest.json").unlink()


def manifest_no_streaming(t: dict[str, Path]) -> None:
    _edit(t["evidence"] / "manifest.json", lambda d: d["operations"][0].update(streaming=False))


def no_plan(t: dict[str, Path]) -> None:
    (_version_dir(t, LOWER) / "execution-plan.json").unlink()


def missing_shared_bench(t: dict[str, Path]) -> None:
    (t["evidence"] / "bench" / "mapper.json").unlink()


def missing_version_bench(t: dict[str, Path]) -> None:
    (_version_dir(t, CURRENT) / "bench" / "cancellation-latency.json").unlink()


def invalid_bench(t: dict[str, Path]) -> None:
    _edit(t["evidence"] / "bench" / "wire.json", lambda d: d["machine"].pop("cores"))


def invalid_bench_json(t: dict[str, Path]) -> None:
    (t["evidence"] / "bench" / "extra.json").write_text("{not json", encoding="utf-8")


def bench_missing_metric(t: dict[str, Path]) -> None:
    def change(doc: dict) -> None:
        doc["metrics"] = [m for m in doc["metrics"] if m["name"] != "stream.ttft_ms"]
    _edit(_version_dir(t, CURRENT) / "bench" / "streaming-latency.json", change)


def bench_wrong_vllm(t: dict[str, Path]) -> None:
    _edit(_version_dir(t, CURRENT) / "bench" / "parity.json",
          lambda d: d["versions"].update(vllm=LOWER))


def cancel_not_effective(t: dict[str, Path]) -> None:
    _edit(_version_dir(t, CURRENT) / "bench" / "cancellation-latency.json",
          lambda d: d.setdefault("parameters", {}).update(cancel_not_effective=10))


def bench_own_verdict_failed(t: dict[str, Path]) -> None:
    _edit(_version_dir(t, CURRENT) / "bench" / "cancellation-latency.json",
          lambda d: d.setdefault("parameters", {}).update(cancel_verdict="fail"))


def frame_after_terminal(t: dict[str, Path]) -> None:
    _edit(_version_dir(t, LOWER) / "bench" / "cancellation-latency.json",
          lambda d: d.setdefault("parameters", {}).update(events_after_terminal=1))


def no_smoke_lower(t: dict[str, Path]) -> None:
    (_version_dir(t, LOWER) / "smoke.json").unlink()


def no_lower_dir(t: dict[str, Path]) -> None:
    shutil.rmtree(_version_dir(t, LOWER))


def no_current_dir(t: dict[str, Path]) -> None:
    shutil.rmtree(_version_dir(t, CURRENT))


def smoke_outside_line(t: dict[str, Path]) -> None:
    _edit(_version_dir(t, CURRENT) / "smoke.json",
          lambda d: d["results"][0]["diagnostics"].update(vllm="0.23.0"))


def smoke_no_version(t: dict[str, Path]) -> None:
    _edit(_version_dir(t, CURRENT) / "smoke.json",
          lambda d: d["results"][0]["diagnostics"].pop("vllm"))


def smoke_bad_sequence(t: dict[str, Path]) -> None:
    def change(doc: dict) -> None:
        events = doc["results"][0]["events"]
        events.append({"type": contract.EV_OUTPUT_TEXT_DELTA, "index": 0, "delta": "late"})
    _edit(_version_dir(t, LOWER) / "smoke.json", change)


def smoke_invalid_event(t: dict[str, Path]) -> None:
    _edit(_version_dir(t, LOWER) / "smoke.json",
          lambda d: d["results"][0]["events"][0].pop("delta"))


def smoke_failed(t: dict[str, Path]) -> None:
    _edit(_version_dir(t, CURRENT) / "smoke.json",
          lambda d: d["results"][0].update(outcome="failed", message="terminal never came"))


def _readme(t: dict[str, Path], old: str, new: str) -> None:
    assert old in README
    t["readme"].write_text(README.replace(old, new), encoding="utf-8")


def readme_no_line(t: dict[str, Path]) -> None:
    _readme(t, "| declared range | `vllm>=0.18.0,<0.23` | `vllm>=0.23.0,<0.33` |\n", "")


def readme_wrong_line(t: dict[str, Path]) -> None:
    t["readme"].write_text(README.replace("<0.23", "<0.24"), encoding="utf-8")


def readme_no_lower_bound(t: dict[str, Path]) -> None:
    _readme(t, "| lower bound tested | 0.18.1 | 0.23.0 |\n", "")


def readme_missing_extra(t: dict[str, Path]) -> None:
    t["readme"].write_text(README.replace("| `prometheus` | prometheus_client |\n", ""),
                           encoding="utf-8")


def readme_missing(t: dict[str, Path]) -> None:
    t["readme"].unlink()


def pyproject_disagrees(t: dict[str, Path]) -> None:
    (t["readme"].parent / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[project.optional-dependencies]\nvllm = ["vllm>=0.17,<0.23"]\n',
        encoding="utf-8")


# --- the second line only: the first is complete, each condition still fails ---------------


def no_second_current_dir(t: dict[str, Path]) -> None:
    shutil.rmtree(_version_dir(t, CURRENT2))


def no_second_lower_smoke(t: dict[str, Path]) -> None:
    (_version_dir(t, LOWER2) / "smoke.json").unlink()


def second_current_bench_missing(t: dict[str, Path]) -> None:
    (_version_dir(t, CURRENT2) / "bench" / "parity.json").unlink()


def second_smoke_outside_its_line(t: dict[str, Path]) -> None:
    # inside the joined range, but on the first line: the smoke did not run on this line
    _edit(_version_dir(t, LOWER2) / "smoke.json",
          lambda d: d["results"][0]["diagnostics"].update(vllm=CURRENT))


def second_failed_recipe(t: dict[str, Path]) -> None:
    def change(doc: dict) -> None:
        next(r for r in doc["results"] if r["id"] == "openai-compatible.chat.usage").update(
            outcome="failed", message="no usage")
    _edit(_version_dir(t, CURRENT2) / "case-results.json", change)


def readme_no_second_lower_bound(t: dict[str, Path]) -> None:
    _readme(t, "| lower bound tested | 0.18.1 | 0.23.0 |", "| lower bound tested | 0.18.1 | |")


def readme_no_second_range(t: dict[str, Path]) -> None:
    _readme(t, " `vllm>=0.23.0,<0.33` |", " |")


def readme_no_second_current(t: dict[str, Path]) -> None:
    _readme(t, " 0.32.x (0.32.0) |", " |")


def readme_extra_first_line_only(t: dict[str, Path]) -> None:
    _readme(t, "| `vllm` | `vllm>=0.18.0,<0.33` |", "| `vllm` | `vllm>=0.18.0,<0.23` |")


def pyproject_first_line_only(t: dict[str, Path]) -> None:
    (t["readme"].parent / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[project.optional-dependencies]\nvllm = ["vllm>=0.18.0,<0.23"]\n',
        encoding="utf-8")


def second_levels_differ(t: dict[str, Path]) -> None:
    # the policy says the adapter claims Levels 1 and 2 on 0.32.0; its run claimed Level 1
    _policy_levels(t["evidence"], {CURRENT2: [1, 2]})


def second_newer_patch_without_levels(t: dict[str, Path]) -> None:
    # 0.32.1 recorded: the newest of the current line is gated, and the policy names no
    # levels for it
    newer = _version_dir(t, "0.32.1")
    shutil.copytree(_version_dir(t, CURRENT2), newer)
    for f in newer.rglob("*.json"):
        f.write_text(f.read_text(encoding="utf-8").replace(f'"{CURRENT2}"', '"0.32.1"'),
                     encoding="utf-8")


CASES: list[tuple[str, Mutation, str, str]] = [
    # (id, mutation, failing condition, a phrase its failure must contain)
    ("no-case-results", no_case_results_current, contract.GATE_RECIPES_PASS, "case results"),
    ("no-case-results-smoke", no_case_results_current, contract.GATE_VLLM_SMOKE,
     "no valid case results"),
    ("failed-mandatory", failed_mandatory, contract.GATE_RECIPES_PASS,
     "openai-compatible.chat.usage failed"),
    ("non-strict-mandatory", non_strict_mandatory, contract.GATE_RECIPES_PASS,
     "non-strict (the release gate is strict): [event.diagnostics-field]"),
    ("skipped-claimed-optional", skipped_optional_claimed, contract.GATE_RECIPES_PASS,
     "cancellation skipped"),
    ("missing-result", missing_result, contract.GATE_RECIPES_PASS, "no result recorded"),
    ("level1-not-selected", level1_not_selected, contract.GATE_LEVEL1_IMPLEMENTED,
     "invalid-body was not selected"),
    ("recorded-not-claimed", recorded_not_claimed, contract.GATE_LEVEL1_IMPLEMENTED,
     "'not_claimed'"),
    ("manifest-without-level1", manifest_without_level1, contract.GATE_LEVEL1_IMPLEMENTED,
     "does not claim Level 1"),
    ("manifest-missing", manifest_missing, contract.GATE_LEVEL1_IMPLEMENTED, "manifest"),
    ("manifest-no-streaming", manifest_no_streaming, contract.GATE_LEVEL1_IMPLEMENTED,
     "streaming is not true"),
    ("no-plan", no_plan, contract.GATE_LEVEL1_IMPLEMENTED, "execution-plan.json: missing"),
    ("missing-shared-benchmark", missing_shared_bench, contract.GATE_BENCHMARK_BASELINE,
     "'mapper'"),
    ("missing-version-benchmark", missing_version_bench, contract.GATE_BENCHMARK_BASELINE,
     "'cancellation-latency'"),
    ("schema-invalid-benchmark", invalid_bench, contract.GATE_BENCHMARK_BASELINE,
     "missing required field 'cores'"),
    ("unparsable-benchmark", invalid_bench_json, contract.GATE_BENCHMARK_BASELINE,
     "invalid JSON"),
    ("benchmark-missing-metric", bench_missing_metric, contract.GATE_BENCHMARK_BASELINE,
     "stream.ttft_ms"),
    ("benchmark-wrong-vllm", bench_wrong_vllm, contract.GATE_BENCHMARK_BASELINE,
     "versions.vllm"),
    ("cancel-not-effective", cancel_not_effective, contract.GATE_BENCHMARK_BASELINE,
     "cancel_not_effective = 10 (must be 0)"),
    ("benchmark-own-verdict-failed", bench_own_verdict_failed, contract.GATE_BENCHMARK_BASELINE,
     "cancel_verdict is 'fail'"),
    ("frame-after-terminal", frame_after_terminal, contract.GATE_BENCHMARK_BASELINE,
     "events_after_terminal = 1 (must be 0)"),
    ("no-smoke-lower-bound", no_smoke_lower, contract.GATE_VLLM_SMOKE, "smoke.json: missing"),
    ("no-lower-bound-dir", no_lower_dir, contract.GATE_VLLM_SMOKE,
     f"lower bound of the vLLM {LINE1} (vLLM 0.18.1)"),
    ("no-current-line-dir", no_current_dir, contract.GATE_VLLM_SMOKE, "current line"),
    ("smoke-outside-line", smoke_outside_line, contract.GATE_VLLM_SMOKE,
     "outside the declared line"),
    ("smoke-without-version", smoke_no_version, contract.GATE_VLLM_SMOKE, "diagnostics.vllm"),
    ("smoke-event-after-terminal", smoke_bad_sequence, contract.GATE_VLLM_SMOKE,
     "after the terminal"),
    ("smoke-schema-invalid-event", smoke_invalid_event, contract.GATE_VLLM_SMOKE, "'delta'"),
    ("smoke-failed", smoke_failed, contract.GATE_VLLM_SMOKE, "terminal never came"),
    ("readme-no-version-line", readme_no_line, contract.GATE_README_DOCUMENTS, "declared range"),
    ("readme-wrong-version-line", readme_wrong_line, contract.GATE_README_DOCUMENTS, "<0.24"),
    ("readme-no-lower-bound", readme_no_lower_bound, contract.GATE_README_DOCUMENTS,
     "lower bound"),
    ("readme-missing-extra", readme_missing_extra, contract.GATE_README_DOCUMENTS,
     "`prometheus`"),
    ("readme-missing", readme_missing, contract.GATE_README_DOCUMENTS, "missing"),
    ("pyproject-disagrees", pyproject_disagrees, contract.GATE_README_DOCUMENTS,
     "pyproject.toml"),
    # the second line only; each failure names the line
    ("second-line-no-current-dir-level1", no_second_current_dir,
     contract.GATE_LEVEL1_IMPLEMENTED, f"current line of the vLLM {LINE2} (vLLM 0.32.x)"),
    ("second-line-no-current-dir-recipes", no_second_current_dir, contract.GATE_RECIPES_PASS,
     f"no case results for the current line of the vLLM {LINE2}"),
    ("second-line-no-current-dir-bench", no_second_current_dir,
     contract.GATE_BENCHMARK_BASELINE, f"no 'parity' benchmark for the vLLM {LINE2}"),
    ("second-line-no-current-dir-smoke", no_second_current_dir, contract.GATE_VLLM_SMOKE,
     f"no smoke for the current line of the vLLM {LINE2}"),
    ("second-line-no-lower-smoke", no_second_lower_smoke, contract.GATE_VLLM_SMOKE,
     f"vLLM {LOWER2} smoke: vllm-{LOWER2}/smoke.json: missing"),
    ("second-line-bench-missing", second_current_bench_missing,
     contract.GATE_BENCHMARK_BASELINE, f"'parity' under vllm-{CURRENT2}/bench/ (vLLM {LINE2})"),
    ("second-line-smoke-outside", second_smoke_outside_its_line, contract.GATE_VLLM_SMOKE,
     f"vLLM {CURRENT} is outside the declared {LINE2}"),
    ("second-line-failed-recipe", second_failed_recipe, contract.GATE_RECIPES_PASS,
     f"vLLM {CURRENT2} ({LINE2}): mandatory recipe openai-compatible.chat.usage failed"),
    ("readme-no-second-lower-bound", readme_no_second_lower_bound,
     contract.GATE_README_DOCUMENTS, f"lower bound tested of the vLLM {LINE2} (0.23.0)"),
    ("readme-no-second-range", readme_no_second_range, contract.GATE_README_DOCUMENTS,
     f"the vLLM {LINE2} has no 'declared range'"),
    ("readme-no-second-current", readme_no_second_current, contract.GATE_README_DOCUMENTS,
     f"current line tested of the vLLM {LINE2} (0.32.x)"),
    ("readme-extra-first-line-only", readme_extra_first_line_only,
     contract.GATE_README_DOCUMENTS, "lines joined are '>=0.18.0,<0.33'"),
    ("pyproject-first-line-only", pyproject_first_line_only, contract.GATE_README_DOCUMENTS,
     "pyproject.toml: the `vllm` extra declares '<0.23,>=0.18.0', the vLLM lines joined are "
     "'>=0.18.0,<0.33'"),
    ("second-line-levels-differ", second_levels_differ, contract.GATE_LEVEL1_IMPLEMENTED,
     f"vLLM {CURRENT2} ({LINE2}): the run's manifest manifest.json claims Level(s) [1], the "
     f"release policy declares [1, 2] for vLLM {CURRENT2}"),
    ("second-line-levels-undeclared", second_newer_patch_without_levels,
     contract.GATE_LEVEL1_IMPLEMENTED,
     f"vLLM 0.32.1 ({LINE2}): the release policy's levels name no claim for vLLM 0.32.1"),
]


@pytest.mark.parametrize(("mutate", "condition", "phrase", "second_only"),
                         [pytest.param(m, c, p, i.startswith(("second-line", "readme-no-second")),
                                       id=i) for i, m, c, p in CASES])
def test_broken_evidence_fails_naming_the_condition(
    tree: dict[str, Path], mutate: Mutation, condition: str, phrase: str, second_only: bool
) -> None:
    mutate(tree)
    result = _gate(tree)
    assert not result.passed
    verdict = next(v for v in result.verdicts if v.name == condition)
    assert not verdict.passed
    assert any(phrase in f for f in verdict.failures), verdict.failures
    if second_only:  # broken on the second line only: every failure names that line
        assert [f for v in result.failed for f in v.failures if LINE2 not in f] == []
    assert validation.validate("release-gate-report", result.report) == []


def test_cli_names_each_failing_condition(tree: dict[str, Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    readme_missing_extra(tree)
    no_smoke_lower(tree)
    code = cli_main(["gate", "--evidence", str(tree["evidence"]), "--readme", str(tree["readme"]),
                     "--recipes", str(tree["recipes"]), "--out", str(tree["evidence"])])
    out = capsys.readouterr().out
    assert code == 1
    assert contract.GATE_README_DOCUMENTS in out and contract.GATE_VLLM_SMOKE in out
    report = _load(tree["evidence"] / REPORT_JSON)
    assert [g["name"] for g in report["gates"] if not g["passed"]] == [
        contract.GATE_VLLM_SMOKE, contract.GATE_README_DOCUMENTS]


def test_cli_checks_without_writing_unless_asked(tree: dict[str, Path],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Checking tracked evidence never rewrites it: no --out, no file written anywhere."""
    before = {p: p.stat().st_mtime_ns for p in tree["root"].rglob("*")}
    code = cli_main(["gate", "--evidence", str(tree["evidence"]), "--readme", str(tree["readme"]),
                     "--recipes", str(tree["recipes"])])
    assert code == 0
    assert {p: p.stat().st_mtime_ns for p in tree["root"].rglob("*")} == before
    assert "reports not written (--out DIR writes them)" in capsys.readouterr().out


def test_cli_finds_the_evidence_in_its_conventional_place(
        tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    conventional = tree["root"] / "reports" / "evidence"
    conventional.parent.mkdir()
    shutil.copytree(tree["evidence"], conventional)
    monkeypatch.chdir(tree["root"])
    assert cli_main(["gate", "--readme", str(tree["readme"]), "--recipes", str(tree["recipes"])]) == 0
    assert "release gate passed" in capsys.readouterr().out
    shutil.rmtree(conventional)
    assert cli_main(["gate", "--readme", str(tree["readme"])]) == 2
    err = capsys.readouterr().err
    assert "reports/evidence: evidence directory does not exist (the default" in err, err


def test_cli_missing_evidence_dir_is_a_usage_error(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(["gate", "--evidence", str(tmp_path / "nope")])
    assert code == 2
    assert "does not exist" in capsys.readouterr().err


def _policy_doc(change: Callable[[dict], None]) -> dict[str, Any]:
    doc = json.loads(POLICY_FILE.read_text(encoding="utf-8"))
    change(doc)
    return doc


@pytest.mark.parametrize(("change", "phrase"), [
    pytest.param(lambda d: d["lines"][1].update(lower_bound="0.22.1"),
                 "/lines/1: line '>=0.23.0,<0.33': lower bound 0.22.1 is outside the line",
                 id="lower-bound-outside-its-line"),
    pytest.param(lambda d: d["lines"][1].update(current_tested="0.31.0"),
                 "/lines/1: line '>=0.23.0,<0.33': current tested 0.31.0 is not on the current "
                 "line 0.32", id="current-tested-off-the-current-line"),
    pytest.param(lambda d: d["lines"][1]["levels"].pop("0.23.0"),
                 "/lines/1: line '>=0.23.0,<0.33': levels names no claim for the tested "
                 "version(s) 0.23.0", id="levels-without-the-lower-bound"),
    pytest.param(lambda d: d["lines"][1].update(declared=">=0.24.0,<0.33", lower_bound="0.24.0",
                                                levels={"0.24.0": [1], "0.32.0": [1]}),
                 "/lines: line >=0.24.0,<0.33 must start where line >=0.18.0,<0.23 ends "
                 "(>=0.23)", id="a-gap-between-lines"),
    pytest.param(lambda d: d["lines"][0].update(declared="~=0.18.0", lower_bound="0.18.1",
                                                current_line="0.18", current_tested="0.18.1",
                                                levels={"0.18.1": [1]}),
                 "each must read '>=LOW,<HIGH'", id="lines-that-cannot-be-joined"),
    pytest.param(lambda d: d.update(policy_version=1, line=d.pop("lines")[0]),
                 "policy_version 1 (one 'line') is no longer read: write policy_version 2 with "
                 "'lines', a list of {declared, lower_bound, current_line, current_tested, "
                 "levels} (docs/reference/release-policy.md)", id="format-1"),
    pytest.param(lambda d: d["lines"][0]["levels"].update({"0.18.1": [1, 4]}),
                 "/lines/0/levels/0.18.1/1", id="a-level-out-of-range"),
])
def test_a_policy_whose_lines_do_not_hold_is_refused_naming_the_line(
        change: Callable[[dict], None], phrase: str) -> None:
    with pytest.raises(RequirementsError) as caught:
        requirements_from_document(_policy_doc(change), source="policy.json")
    assert phrase in str(caught.value)


def test_in_line_means_any_declared_line() -> None:
    assert [POLICY.in_line(v) for v in ("0.17.9", "0.18.0", "0.22.9", "0.23.0", "0.32.5",
                                        "0.33.0", "0.33.0rc1", "not-a-version")] == [
        False, True, True, True, True, False, False, False]  # <0.33 excludes 0.33's rcs
    line_of = POLICY.line_of
    assert [ln.name if (ln := line_of(v)) else None for v in ("0.22.1", "0.23.0", "0.33")] == [
        LINE1, LINE2, None]
    assert [ln.on_current_line("0.22.3") for ln in POLICY.lines] == [True, False]
    assert POLICY.lines[1].levels_of("0.32.0") == (1, 2, 3)
    assert POLICY.lines[1].levels_of("0.32.1") is None
    assert POLICY.declared_line == ">=0.18.0,<0.33"


def test_requirements_agree_with_the_adapter_and_the_repository() -> None:
    import vllm_nnrp_adapter as adapter
    from nnrp_conformance.gate.readme import read_readme

    assert POLICY.declared_line == adapter.SUPPORTED_VLLM
    assert [(ln.declared, ln.lower_bound, ln.current_line, ln.current_tested, dict(ln.levels))
            for ln in POLICY.lines] == [
        (ln.declared, ln.lower_bound, ln.current_line, ln.current_tested, dict(ln.levels))
        for ln in adapter.LINES]
    assert VERSIONS == adapter.TESTED_VERSIONS
    # README.md and the pyproject.toml beside it state the policy's lines and extras
    facts = read_readme(REPO / "README.md", POLICY)
    assert facts.problems == []


RECORDED = REPO / "reports" / "evidence"


@pytest.mark.timeout(120)
def test_the_recorded_evidence_against_the_policy() -> None:
    """The committed evidence (reports/evidence) judged with the repository's policy.

    Depends on the recorded evidence. Once every tested version is recorded, the evidence
    carries the policy and the gate passes. Until then (issue 28: 0.18.1 and 0.22.1 are
    recorded, the second line's 0.23.0 and 0.32.0 are not yet) the gate fails, and only on
    the line whose versions are missing: every failure names it, the README passes."""
    missing = [v for v in VERSIONS if not (RECORDED / f"vllm-{v}").is_dir()]
    result = run_gate(RECORDED, readme=REPO / "README.md", policy=POLICY_FILE)
    if not missing:
        assert load_policy(RECORDED / "release-policy.json") == POLICY
        assert result.passed, [v.failures for v in result.failed]
        return
    unrecorded = {ln.name for ln in POLICY.lines
                  if {ln.lower_bound, ln.current_tested} & set(missing)}
    failures = [f for v in result.verdicts for f in v.failures]
    assert not result.passed and failures
    assert [f for f in failures if not any(name in f for name in unrecorded)] == []
    assert next(v for v in result.verdicts
                if v.name == contract.GATE_README_DOCUMENTS).passed


def test_the_suite_names_no_version_of_any_serving_target() -> None:
    """The gate is an engine: the versions it enforces come from the provider's policy."""
    facts = {POLICY.declared_line} | {
        fact for ln in POLICY.lines
        for fact in (ln.declared, ln.lower_bound, f'"{ln.current_line}"', ln.current_tested)}
    suite = REPO / "suite" / "nnrp_conformance"
    found = [f"{path.relative_to(REPO)}: {fact}" for path in sorted(suite.rglob("*.py"))
             for fact in facts if fact in path.read_text(encoding="utf-8")]
    assert found == []


def test_a_missing_policy_is_a_usage_error_naming_where(
        tree: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    (tree["evidence"] / "release-policy.json").unlink()
    assert _gate_cli(tree, tree["evidence"]) == 2
    err = capsys.readouterr().err
    assert "release-policy.json" in err and "no release policy" in err and "--policy" in err


def test_a_broken_policy_names_its_file_and_field(
        tree: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _edit(tree["evidence"] / "release-policy.json",
          lambda d: d["lines"][1].update(current_line="32"))
    assert _gate_cli(tree, tree["evidence"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "release-policy.json" in err and "/lines/1/current_line" in err


def test_another_providers_policy_drives_the_same_engine(
        tree: dict[str, Path], tmp_path: Path) -> None:
    """A provider serving 'Acme' 1.4/2.1 writes its own policy; nothing in the suite changes."""
    ev = tree["evidence"]
    for version in (LOWER2, CURRENT2):  # one line: the second line's evidence goes
        shutil.rmtree(ev / f"vllm-{version}")
    renames = {LOWER: "1.4.2", CURRENT: "2.1.0"}
    for old, new in renames.items():
        d = ev / f"vllm-{old}"
        for f in d.rglob("*.json"):
            text = f.read_text(encoding="utf-8").replace(f'"vllm": "{old}"', f'"acme": "{new}"')
            f.write_text(text, encoding="utf-8")
        d.rename(ev / f"acme-{new}")
    for f in (ev / "bench").glob("*.json"):
        _edit(f, lambda d: d["versions"].update(acme=None))
    policy = json.loads(POLICY_FILE.read_text(encoding="utf-8"))
    policy["target"] = {"name": "Acme", "key": "acme"}
    policy["lines"] = [{"declared": ">=1.4,<3", "lower_bound": "1.4.2", "current_line": "2.1",
                        "current_tested": "2.1.0", "levels": {"1.4.2": [1], "2.1.0": [1]}}]
    policy["readme"]["extras"] = ["acme"]
    _write(ev / "release-policy.json", policy)
    readme = tmp_path / "acme" / "README.md"
    readme.parent.mkdir()
    readme.write_text(
        "# acme\n\n| | |\n|---|---|\n| declared range | `acme>=1.4,<3` |\n"
        "| lower bound tested | 1.4.2 |\n| current line tested | 2.1.0 |\n\n"
        "## Optional dependencies\n\n`acme`: the Acme server\n", encoding="utf-8")
    result = run_gate(ev, readme=readme, recipes=tree["recipes"])
    assert result.passed, [v.failures for v in result.failed]
    assert result.report["environment"]["vllm"] == "1.4.2, 2.1.0"
    # and the same engine fails it on the provider's own terms
    (ev / "acme-1.4.2" / "smoke.json").unlink()
    result = run_gate(ev, readme=readme, recipes=tree["recipes"])
    smoke = next(v for v in result.verdicts if v.name == contract.GATE_VLLM_SMOKE)
    assert not smoke.passed
    assert smoke.reason == "Acme line >=1.4,<3: Acme 1.4.2 smoke: acme-1.4.2/smoke.json: missing"


def test_gate_command_registers_on_any_subparsers() -> None:
    import argparse

    from nnrp_conformance.commands import gate as gate_command

    parser = argparse.ArgumentParser()
    gate_command.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["gate", "--evidence", "x"])
    assert args.evidence == Path("x") and args._command.run is gate_command.main


def test_missed_performance_target_is_shown_not_gating(tree: dict[str, Path]) -> None:
    """Speed on a shared machine is evidence to read: listed in red, the release still passes."""
    _edit(_version_dir(tree, CURRENT) / "bench" / "parity.json",
          lambda d: d.setdefault("parameters", {}).update(
              {"target.c8.tokens_per_s_ratio_ge_0.97": False,
               "target.c1.tokens_per_s_ratio_ge_0.97": True}))
    report = _gate(tree)
    bench = next(g for g in report.verdicts if g.name == contract.GATE_BENCHMARK_BASELINE)
    assert bench.passed, bench
    missed = bench.details["targets_missed"]
    assert len(missed) == 1 and missed[0].endswith("target.c8.tokens_per_s_ratio_ge_0.97")


# --- portability: reports carry paths relative to the evidence folder, and link its files ---


def _gate_cli(tree: dict[str, Path], evidence: Path | str, *extra: str) -> int:
    """The gate on ``evidence``, writing its reports there unless ``extra`` says ``--out``."""
    out = [] if "--out" in extra else ["--out", str(evidence)]
    return cli_main(["gate", "--evidence", str(evidence), "--readme", str(tree["readme"]),
                     "--recipes", str(tree["recipes"]), *out, *extra])


def _add_run_files(tree: dict[str, Path]) -> None:
    """The reports and logs a release run leaves beside the JSON (the gate only links them);
    the lower bounds have no parity run, so no HTTP server or parity log."""
    for version in VERSIONS:
        d = _version_dir(tree, version)
        for name in ("report.html", "report.md", "adapter.log"):
            (d / name).write_text(name, encoding="utf-8")
    for version in (CURRENT, CURRENT2):
        d = _version_dir(tree, version)
        for name in ("http-server.log", "bench/parity-adapter.log",
                     "bench/parity-http-server.log"):
            (d / name).write_text(name, encoding="utf-8")


@pytest.mark.parametrize("broken", [False, True], ids=["passing", "failing"])
def test_reports_carry_no_absolute_path(tree: dict[str, Path], broken: bool,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Failures name files too: with every condition broken, still no machine path."""
    _add_run_files(tree)
    if broken:
        for mutate in (manifest_no_streaming, no_smoke_lower, invalid_bench_json,
                       failed_mandatory, readme_missing_extra, pyproject_disagrees):
            mutate(tree)
    elsewhere = tree["root"] / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert _gate_cli(tree, tree["evidence"]) == (1 if broken else 0)
    roots = {str(tree["root"]), str(tree["root"].resolve()), tree["root"].name}
    for name in (REPORT_JSON, REPORT_MARKDOWN, REPORT_HTML):
        text = (tree["evidence"] / name).read_text(encoding="utf-8")
        assert not [r for r in roots if r in text], name
    report = _load(tree["evidence"] / REPORT_JSON)
    paths = [f["path"] for f in report["files"]]
    paths += [b["file"] for b in next(g for g in report["gates"] if g["name"] ==
                                      contract.GATE_BENCHMARK_BASELINE)["details"]["benchmarks"]]
    paths += [e for g in report["gates"] for e in g["evidence"]]
    assert paths and not [p for p in paths if p.startswith("/")]
    assert report["environment"]["evidence_dir"] == "."
    assert f"vllm-{CURRENT}/case-results.json" in paths
    assert "../README.md" in paths  # outside the folder: reached with ../
    if broken:
        failures = [f for g in report["gates"] for f in g.get("details", {}).get("failures", [])]
        assert f"vLLM {LINE1}: vLLM {LOWER} smoke: vllm-{LOWER}/smoke.json: missing" in failures
        assert any(f.startswith("schema-invalid benchmark: bench/extra.json:") for f in failures)


def test_gate_reads_a_clone_from_any_working_directory(
        tree: dict[str, Path], tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same evidence at another path, the gate run from elsewhere with a relative
    --evidence: the same verdict and the same report, word for word."""
    _add_run_files(tree)
    monkeypatch.chdir(tree["root"])
    assert _gate_cli(tree, "evidence") == 0
    first = _load(tree["evidence"] / REPORT_JSON)
    clone = tmp_path_factory.mktemp("clone") / "repo"
    shutil.copytree(tree["root"], clone)
    (clone / "cwd").mkdir()
    monkeypatch.chdir(clone / "cwd")
    code = cli_main(["gate", "--evidence", "../evidence", "--readme", "../README.md",
                     "--recipes", "../recipes", "--out", "../evidence"])
    assert code == 0
    second = _load(clone / "evidence" / REPORT_JSON)
    for doc in (first, second):
        doc.pop("generated_at")
    assert second == first


def _hrefs(html: str) -> list[str]:
    import re

    return re.findall(r'<a href="([^"]+)"', html)


def test_html_links_each_version_report_log_and_benchmark(tree: dict[str, Path]) -> None:
    _add_run_files(tree)
    assert _gate_cli(tree, tree["evidence"]) == 0
    hrefs = _hrefs((tree["evidence"] / REPORT_HTML).read_text(encoding="utf-8"))
    for version in VERSIONS:
        for name in ("report.html", "report.md", "case-results.json", "adapter.log",
                     "bench/streaming-latency.json", "bench/cancellation-latency.json"):
            assert f"vllm-{version}/{name}" in hrefs, name
    for name in ("http-server.log", "bench/parity-adapter.log", "bench/parity-http-server.log",
                 "bench/parity.json"):
        for current, lower in ((CURRENT, LOWER), (CURRENT2, LOWER2)):
            assert f"vllm-{current}/{name}" in hrefs
            # the lower bounds had no parity run: absent optional files are not linked
            assert f"vllm-{lower}/{name}" not in hrefs or name == "bench/parity.json"
    assert "bench/wire.json" in hrefs and "bench/mapper.json" in hrefs
    assert all((tree["evidence"] / h).is_file() for h in hrefs)


def test_links_hold_when_the_reports_are_written_elsewhere(tree: dict[str, Path]) -> None:
    _add_run_files(tree)
    out = tree["root"] / "site" / "gate"
    assert _gate_cli(tree, tree["evidence"], "--out", str(out)) == 0
    report = _load(out / REPORT_JSON)
    assert report["environment"]["evidence_dir"] == "../../evidence"
    hrefs = _hrefs((out / REPORT_HTML).read_text(encoding="utf-8"))
    markdown = (out / REPORT_MARKDOWN).read_text(encoding="utf-8")
    assert f"../../evidence/vllm-{CURRENT}/adapter.log" in hrefs
    assert f"(../../evidence/vllm-{CURRENT}/report.html)" in markdown
    assert hrefs and all((out / h).resolve().is_file() for h in hrefs)


def test_an_older_evidence_folder_without_logs_still_gates(tree: dict[str, Path]) -> None:
    """No report or log beside the JSON (evidence from before they were linked): the gate
    judges as before and links only what is there."""
    assert _gate_cli(tree, tree["evidence"]) == 0
    hrefs = _hrefs((tree["evidence"] / REPORT_HTML).read_text(encoding="utf-8"))
    assert not [h for h in hrefs if h.endswith(".log") or "report." in h]
    assert all((tree["evidence"] / h).is_file() for h in hrefs)


# --- levels (issue 18 item 5): the first condition and the reports list every level ----------

REPO_RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def _levels_tree(tree: dict[str, Path], plan_level: int) -> None:
    """The tree with the bundled Level 2 recipes beside upstream's, a manifest claiming
    Levels 1 and 2, and plans/results recorded at ``plan_level``."""
    for f in (REPO_RECIPES / "level2").glob("*.yaml"):
        shutil.copy(f, tree["recipes"] / f.name)
    manifest = json.loads(json.dumps(MANIFEST))
    manifest["compatibility_levels"] = [1, 2]
    manifest["operations"].append({**manifest["operations"][0],
                                   "name": contract.OP_RESPONSES_CREATE})
    _write(tree["evidence"] / "manifest.json", manifest)
    plan = build_plan(load_recipes([tree["recipes"]]), load_manifest(tree["evidence"] / "manifest.json"),
                      model_id="tiny-model", level=plan_level)
    doc, results = _plan_and_results(tree["recipes"], tree["evidence"] / "manifest.json")
    doc = plan.to_json()
    results["results"] = [
        {"id": c.id, "outcome": contract.OUTCOME_PASSED, "terminal": c.expected_terminal,
         "events": [{"type": contract.TERMINAL_EVENT_FOR[c.expected_terminal]}],
         "diagnostics": {"level": c.level, "status": c.status, "selection": c.selection,
                         "findings": [], "duration_s": 0.01}}
        for c in plan.cases]
    for version in VERSIONS:
        _write(_version_dir(tree, version) / "execution-plan.json", doc)
        _write(_version_dir(tree, version) / "case-results.json", results)
    _policy_levels(tree["evidence"], {v: [1, 2] for v in VERSIONS})


def test_the_gate_lists_each_claimed_level_and_its_recipes(tree: dict[str, Path]) -> None:
    _levels_tree(tree, plan_level=2)
    result = _gate(tree)
    assert result.passed, [v.failures for v in result.verdicts]
    first = next(g for g in result.report["gates"] if g["name"] == contract.GATE_LEVEL1_IMPLEMENTED)
    levels = {e["level"]: e for e in first["details"]["levels"]}
    assert levels[1]["claimed"] and levels[2]["claimed"] and not levels[3]["claimed"]
    assert "level2.responses.streaming-text" in levels[2]["mandatory"]
    assert sorted(levels[2]["claimed_optional"]) == [
        "level2.responses.cancel.client", "level2.responses.cancel.in-band-hint",
        "level2.responses.timeout"]
    out = tree["root"] / "out"
    assert cli_main(["gate", "--evidence", str(tree["evidence"]), "--readme", str(tree["readme"]),
                     "--recipes", str(tree["recipes"]), "--out", str(out)]) == 0
    markdown = (out / REPORT_MARKDOWN).read_text(encoding="utf-8")
    assert (f"## Levels\n\n| level | vLLM {LOWER} | vLLM {CURRENT} | vLLM {LOWER2} | "
            f"vLLM {CURRENT2} |") in markdown
    assert "| 2 |" + " claimed: 11/11 passed |" * 4 in markdown
    assert "| 3 |" + " not claimed |" * 4 in markdown
    assert "<h2>Levels</h2>" in (out / REPORT_HTML).read_text(encoding="utf-8")


def test_a_version_may_claim_less_in_its_own_manifest(tree: dict[str, Path]) -> None:
    """The lower bound records its own manifest without Level 2 (a serving-target version that
    cannot keep it) and a Level 1 run: the gate passes, and the report says per version."""
    _levels_tree(tree, plan_level=2)
    lower = _version_dir(tree, LOWER)
    own = json.loads((tree["evidence"] / "manifest.json").read_text(encoding="utf-8"))
    own["compatibility_levels"] = [1]
    own["operations"] = own["operations"][:1]
    _write(lower / "manifest.json", own)
    plan, results = _plan_and_results(tree["recipes"], lower / "manifest.json")
    _write(lower / "execution-plan.json", plan)
    _write(lower / "case-results.json", results)
    _policy_levels(tree["evidence"], {LOWER: [1]})
    result = _gate(tree)
    assert result.passed, [v.failures for v in result.verdicts]
    first = next(g for g in result.report["gates"] if g["name"] == contract.GATE_LEVEL1_IMPLEMENTED)
    assert "vllm-" + LOWER + "/manifest.json" in first["evidence"]
    claimed = {v: [e["level"] for e in rows if e["claimed"]]
               for v, rows in first["details"]["versions"].items()}
    assert claimed == {LOWER: [1], CURRENT: [1, 2], LOWER2: [1, 2], CURRENT2: [1, 2]}
    out = tree["root"] / "out"
    cli_main(["gate", "--evidence", str(tree["evidence"]), "--readme", str(tree["readme"]),
              "--recipes", str(tree["recipes"]), "--out", str(out)])
    assert "| 2 | not claimed |" + " claimed: 11/11 passed |" * 3 in (
        out / REPORT_MARKDOWN).read_text()
    # a version's manifest never claims more than the adapter's
    own["compatibility_levels"] = [1, 2, 3]
    own["operations"] = [*own["operations"], {"name": contract.OP_MODELS_LIST,
                                              "streaming": False, "non_streaming": True,
                                              "tool_calls": False}]
    _write(lower / "manifest.json", own)
    failures = next(v.failures for v in _gate(tree).verdicts
                    if v.name == contract.GATE_LEVEL1_IMPLEMENTED)
    assert any("claims Level(s) [3], which the adapter's manifest" in f for f in failures), failures


def test_a_claimed_level_whose_recipes_did_not_run_fails_the_gate(tree: dict[str, Path]) -> None:
    _levels_tree(tree, plan_level=1)  # the run covered Level 1 only
    result = _gate(tree)
    failures = next(v.failures for v in result.verdicts
                    if v.name == contract.GATE_LEVEL1_IMPLEMENTED)
    assert any("Level 2 mandatory recipe level2.responses.streaming-text was not selected" in f
               for f in failures), failures
    assert not result.passed
