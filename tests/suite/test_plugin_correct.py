"""The plugin against the correct example endpoint: every selected recipe passes, in one
process and with ``-n 2``; results validate; junitxml, ``-k``, ``-m`` and the reports work."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import validation
from nnrp_conformance.manifest import load_manifest
from nnrp_conformance.planner import build_plan
from nnrp_conformance.recipes import load_recipes

pytestmark = pytest.mark.wire
#: hypothesis's pytest plugin costs seconds of import per inner run and is not needed there
NO_HYPOTHESIS = ("-p", "no:hypothesispytest")


def _plan(ep: Any):
    return build_plan(load_recipes(None), load_manifest(ep.manifest), model_id="x")


def _results(pytester: pytest.Pytester, name: str = "results.json") -> dict:
    doc = json.loads((pytester.path / name).read_text())
    assert validation.validate("case-results", doc) == []
    return doc


def test_all_selected_recipes_pass(
        pytester: pytest.Pytester, endpoint: Any, args_for: Any) -> None:
    plan = _plan(endpoint)
    selected = [c.id for c in plan.cases if c.selection == "selected"]
    skipped = [c.id for c in plan.cases if c.selection != "selected"]
    result = pytester.runpytest_subprocess(
        *args_for(endpoint, "--nnrp-report", "out/report", "--junitxml", "junit.xml", "-rs"))
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=len(selected), skipped=len(skipped))
    out = result.stdout.str()
    assert "nnrp-conformance summary" in out
    assert f"{len(selected)} passed, 0 failed, {len(skipped)} skipped" in out

    doc = _results(pytester)
    assert [r["id"] for r in doc["results"]] == [c.id for c in plan.cases]
    assert {r["id"] for r in doc["results"] if r["outcome"] == "passed"} == set(selected)
    for r in doc["results"]:
        assert r["diagnostics"]["selection"] in ("selected", "not_claimed", "informational",
                                                  "extension_not_selected")

    plan_doc = json.loads((pytester.path / "execution-plan.json").read_text())
    assert validation.validate("execution-plan", plan_doc) == []
    assert [c["id"] for c in plan_doc["cases"]] == selected

    md = (pytester.path / "out" / "report.md").read_text()
    assert "# NNRP openai-compatible/1 conformance report" in md
    html = (pytester.path / "out" / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>")
    for external in ("<script", "<link", "src=", "@import", "url("):
        assert external not in html
    for case_id in selected:
        assert case_id in md and case_id in html

    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    names = {c.get("name"): c for c in cases}
    assert set(names) == {c.id for c in plan.cases}
    props = {p.get("name"): p.get("value")
             for p in names[selected[0]].iter("property")}
    assert props["nnrp_recipe"] == selected[0]


def test_xdist_two_workers_merge_results(
        pytester: pytest.Pytester, endpoint: Any, args_for: Any) -> None:
    plan = _plan(endpoint)
    selected = [c.id for c in plan.cases if c.selection == "selected"]
    result = pytester.runpytest_subprocess(*args_for(endpoint, "-n", "2"))
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=len(selected), skipped=len(plan.cases) - len(selected))
    doc = _results(pytester)
    assert [r["id"] for r in doc["results"]] == [c.id for c in plan.cases]
    assert sum(r["outcome"] == "passed" for r in doc["results"]) == len(selected)
    assert "nnrp-conformance summary" in result.stdout.str()
    # workers write nothing of their own: one results file, one plan
    assert sorted(p.name for p in pytester.path.glob("*.json")) == [
        "execution-plan.json", "results.json"]


def test_xdist_workers_write_one_frame_trace_per_selected_case(
        pytester: pytest.Pytester, endpoint: Any, args_for: Any) -> None:
    """--nnrp-trace from the pytest face, cases spread over two workers: each selected case's
    trace is written by the worker that ran it, and its case result names it."""
    plan = _plan(endpoint)
    selected = [c.id for c in plan.cases if c.selection == "selected"]
    result = pytester.runpytest_subprocess(*args_for(endpoint, "-n", "2", "--nnrp-trace", "tr"))
    assert result.ret == 0, result.stdout.str()
    assert sorted(p.stem for p in (pytester.path / "tr").glob("*.ndjson")) == sorted(selected)
    doc = _results(pytester)
    traced = {r["id"]: r["diagnostics"].get("trace") for r in doc["results"]}
    assert all(traced[i] == f"tr/{i}.ndjson" for i in selected), traced


def test_k_selects_recipes_and_keeps_one_result_per_case(
        pytester: pytest.Pytester, endpoint: Any, args_for: Any) -> None:
    plan = _plan(endpoint)
    chosen = [c.id for c in plan.cases if c.selection == "selected" and "streaming-text" in c.id]
    assert chosen
    result = pytester.runpytest_subprocess(*args_for(endpoint, "-k", "streaming-text"))
    assert result.ret == 0, result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == len(chosen)
    doc = _results(pytester)
    by_id = {r["id"]: r for r in doc["results"]}
    assert set(by_id) == {c.id for c in plan.cases}
    others = [i for i in by_id if i not in chosen and by_id[i]["outcome"] != "skipped"]
    assert others == []
    assert_summary_agrees(result)


def assert_summary_agrees(result: pytest.RunResult) -> None:
    """Issue 36: the plugin's own closing line counts as pytest does (a deselected case is
    deselected, not skipped)."""
    got = result.parseoutcomes()
    assert got.get("deselected"), got
    line = f"{got.get('passed', 0)} passed, {got.get('failed', 0)} failed, " \
        f"{got.get('skipped', 0)} skipped, {got['deselected']} deselected"
    assert line in result.stdout.str(), (line, result.stdout.str()[-1500:])


def test_m_selects_by_marker(pytester: pytest.Pytester, endpoint: Any, args_for: Any) -> None:
    plan = _plan(endpoint)
    mandatory = [c.id for c in plan.cases if c.selection == "selected"
                 and c.status == "mandatory"]
    result = pytester.runpytest_subprocess(*args_for(endpoint, "-m", "mandatory and level1"))
    assert result.ret == 0, result.stdout.str()
    assert result.parseoutcomes().get("passed") == len(mandatory)
    assert_summary_agrees(result)


def test_collect_only_lists_nodeids_ending_with_recipe_ids(
        pytester: pytest.Pytester, endpoint: Any, args_for: Any) -> None:
    plan = _plan(endpoint)
    result = pytester.runpytest_subprocess(*args_for(endpoint, "--collect-only", "-q"))
    assert result.ret == 0, result.stdout.str()
    lines = [ln for ln in result.stdout.lines if ln.startswith("nnrp-conformance::")]
    assert lines == [f"nnrp-conformance::{c.id}" for c in plan.cases]


def test_provider_fixtures(pytester: pytest.Pytester, endpoint: Any, args_for: Any) -> None:
    pytester.makepyfile(test_provider="""
        from nnrp_conformance import contract

        def test_capabilities(nnrp_capabilities, nnrp_manifest):
            assert nnrp_capabilities["schema_version"] == contract.SCHEMA_VERSION
            assert nnrp_manifest.adapter

        def test_client_is_sync(nnrp_client):
            assert nnrp_client.capabilities()["profile"] == contract.PROFILE
            model = nnrp_client.capabilities()["models"][0]["id"]
            op = nnrp_client.submit({
                "schema_version": contract.SCHEMA_VERSION,
                "operation": contract.OP_CHAT_COMPLETIONS_CREATE,
                "body": {"model": model, "stream": True,
                         "messages": [{"role": "user", "content": "hi"}]}})
            events = list(op)
            assert events
            assert op.result() is not None

        def test_recipe_runner(nnrp_recipe_runner, nnrp_manifest):
            from nnrp_conformance.recipes import load_recipes
            first = load_recipes(None)[0]
            result = nnrp_recipe_runner(first.id)
            assert result.id == first.id and result.outcome == "passed", result.verdict
            again = nnrp_recipe_runner(dict(first.data))
            assert again.outcome == "passed", again.verdict
    """)
    result = pytester.runpytest_subprocess(*args_for(endpoint, "test_provider.py"))
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=3)
    # explicit paths: the recipes are not collected and no files are written
    assert not (pytester.path / "results.json").exists()
    assert "nnrp-conformance::" not in result.stdout.str()


def test_plugin_is_inert_without_target(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_ok():\n    assert True\n")
    result = pytester.runpytest_subprocess(*NO_HYPOTHESIS)
    assert result.ret == 0
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "nnrp-conformance:" not in out and "nnrp-conformance summary" not in out
    # no artifacts (pytester itself keeps runpytest-*/, stdout and stderr there)
    leftovers = {p.name for p in Path(pytester.path).iterdir()} - {
        "test_plain.py", "stdout", "stderr", ".pytest_cache", "__pycache__"}
    assert {n for n in leftovers if not n.startswith("runpytest")} == set()


def test_fixtures_skip_without_target(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_needs="def test_c(nnrp_client):\n    pass\n")
    result = pytester.runpytest_subprocess("-rs", *NO_HYPOTHESIS)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*needs an NNRP target*--nnrp-target*"])


def test_target_without_manifest_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--nnrp-target", "127.0.0.1:9", *NO_HYPOTHESIS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--manifest is required with --nnrp-target*"])
    assert "Traceback" not in result.stderr.str()


def test_bad_manifest_names_file_and_field(pytester: pytest.Pytester) -> None:
    bad = pytester.makefile(".json", manifest=json.dumps({
        "adapter": "x", "profile": "openai-compatible", "schema_version": "openai-compatible/1",
        "compatibility_levels": [1], "operations": [{"name": "chat.completions.create",
                                                       "streaming": "yes", "non_streaming": True,
                                                       "tool_calls": False}]}))
    result = pytester.runpytest_subprocess("--nnrp-target", "127.0.0.1:9", "--manifest",
                                           str(bad), *NO_HYPOTHESIS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "manifest.json" in err and "/operations/0/streaming" in err
    assert "Traceback" not in err


def test_unreachable_target_is_a_clear_error(pytester: pytest.Pytester, endpoint: Any) -> None:
    manifest = endpoint.manifest
    result = pytester.runpytest_subprocess("--nnrp-target", "127.0.0.1:9", "--manifest",
                                           str(manifest), "--nnrp-timeout", "2", *NO_HYPOTHESIS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*nothing listening on 127.0.0.1:9*"])
    assert "Traceback" not in result.stderr.str()


def test_not_claimed_recipes_are_skipped_with_reason(
        pytester: pytest.Pytester, endpoint: Any, args_for: Any) -> None:
    data = json.loads(endpoint.manifest.read_text())
    for op in data["operations"]:
        op["tool_calls"] = False
    narrow = pytester.makefile(".json", narrow=json.dumps(data))
    plan = build_plan(load_recipes(None), load_manifest(narrow), model_id="x")
    not_claimed = [c for c in plan.cases if c.selection == "not_claimed"]
    assert not_claimed
    args = args_for(endpoint, "-rs")
    args[args.index("--manifest") + 1] = str(narrow)
    result = pytester.runpytest_subprocess(*args)
    # (the capability-document recipe may fail: the narrowed manifest now disagrees with
    # what the endpoint advertises, which is that recipe's business)
    assert result.ret in (0, 1), result.stdout.str()
    result.stdout.fnmatch_lines([f"SKIPPED*not_claimed*{not_claimed[0].reason[:30]}*"])
    by_id = {r["id"]: r for r in _results(pytester)["results"]}
    for case in not_claimed:
        assert by_id[case.id]["outcome"] == "skipped"
        assert by_id[case.id]["diagnostics"]["selection"] == "not_claimed"
