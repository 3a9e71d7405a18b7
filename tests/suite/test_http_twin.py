"""The HTTP twin (``--nnrp-http-twin``, issue 37 item 4) over the real wire: the example
endpoint over NNRP, its own OpenAI-compatible HTTP API (``http_api.py``, the same "model" and
checks) over HTTP. A matching API gives no twin finding and every comparable field compared;
each way the API can part from the NNRP answers is reported, side by side, as a non-strict
finding of its own rule; a run without httpx says what to install."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nnrp_conformance import validation

pytestmark = pytest.mark.wire

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "minimal_endpoint"
LEVELS_MANIFEST = EXAMPLE / "manifest-levels.json"
RECIPES = REPO / "recipes"
#: one recipe of each kind of answer: plain, streamed, a tool call, an invalid body, and the
#: Level 2 and 3 operations
PICKED = [RECIPES / "level1" / name for name in (
    "chat-non-streaming-body.yaml", "chat-streaming-text.yaml", "chat-tool-call-forced.yaml",
    "chat-invalid-body-missing-messages.yaml", "chat-cancel-client.yaml")] + [
    RECIPES / "level2" / "responses-streaming-text.yaml",
    RECIPES / "level3" / "embeddings-batch-order.yaml", RECIPES / "level3" / "models-list.yaml"]


@contextlib.contextmanager
def http_api(tmp: Path, *defects: str) -> Iterator[str]:
    """The example endpoint's HTTP API (``--levels 3``); yields its base URL; killed by PID."""
    out = tmp / "http.out"
    cmd = [sys.executable, str(EXAMPLE / "http_api.py"), "--levels", "3"]
    cmd += [a for d in defects for a in ("--defect", d)]
    with out.open("wb") as fout:
        proc = subprocess.Popen(cmd, stdout=fout, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not out.read_text().endswith("\n"):
            assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.02)
        yield out.read_text().split()[1]
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def levels_endpoint(start_endpoint: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with start_endpoint(tmp_path_factory.mktemp("twin"), None, ("--levels", "3")) as ep:
        yield ep


def run(cwd: Path, endpoint: Any, url: str, *extra: str, picked: list[Path] = PICKED,
        ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    recipes = [a for p in picked for a in ("--recipes", str(p))]
    proc = subprocess.run(
        [sys.executable, "-m", "nnrp_conformance.cli", "run", "--target", endpoint.address,
         "--manifest", str(LEVELS_MANIFEST), "--model", "minimal-model", *recipes,
         "--http-twin", url, "--results", "r.json", "--report", "report", *extra],
        cwd=cwd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert "Traceback" not in proc.stderr, proc.stderr
    results = json.loads((cwd / "r.json").read_text())
    assert validation.validate("case-results", results) == []
    return proc, {r["id"]: r for r in results["results"]}


def twin_findings(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in result["diagnostics"]["findings"] if f["rule"].startswith("twin.")]


def test_a_matching_http_api_gives_no_difference_and_compares_every_field(
        tmp_path: Path, levels_endpoint: Any) -> None:
    with http_api(tmp_path) as url:
        proc, results = run(tmp_path, levels_endpoint, url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    compared = {}
    for case_id, result in results.items():
        assert twin_findings(result) == [], (case_id, result["diagnostics"]["http_twin"])
        twin = result["diagnostics"]["http_twin"]
        compared[case_id] = twin["fields_compared"] if twin["compared"] else twin["why"]
    assert compared == {
        "level1.chat.non-streaming-body": ["outcome", "choices", "text", "finish-reason",
                                           "usage"],
        # no stream_options.include_usage: the HTTP stream carries no usage to compare
        "level1.chat.streaming-text": ["outcome", "choices", "text", "finish-reason"],
        "level1.chat.tool-call-forced": ["outcome", "choices", "text", "finish-reason",
                                         "tool-calls"],
        "level1.chat.invalid-body.missing-messages": ["outcome"],
        "level1.chat.cancel.client":
            "the suite cancelled the NNRP operation on purpose: there is no answer to compare",
        "level2.responses.streaming-text": ["outcome", "text", "finish-reason", "usage"],
        "level3.embeddings.batch-order": ["outcome", "usage", "embeddings"],
        "level3.models.list": ["outcome", "models"],
    }
    side = results["level1.chat.non-streaming-body"]["diagnostics"]["http_twin"]
    assert side["request"]["url"] == url + "/v1/chat/completions"
    assert side["nnrp"]["text"] == side["http"]["text"] and side["nnrp"]["text"]


N_TWO = """\
id: twin.n-two{suffix}
profile: openai-compatible
schema_version: openai-compatible/1
level: 1
status: optional
rule: "none: n choices compared by the HTTP twin (docs/twin.md)"
description: Two choices at temperature 0{suffix}; each compared with the HTTP API's.
operation: chat.completions.create
required_capabilities: [api.level1, api.chat.completions.create]
parameters:
  MODEL_ID: example-model
request:
  body:
    model: ${{MODEL_ID}}
    messages:
      - {{role: user, content: Say hello.}}
    stream: {stream}
    max_tokens: 4
    temperature: 0
    n: 2
expect:
  events:
    - {{type: response.completed, min_count: 1, max_count: 1, rule: expect.result-body}}
  terminal: success
  terminal_rule: expect.success
"""


def n_two_recipes(tmp: Path) -> list[Path]:
    """Two recipes asking for ``n: 2`` at temperature 0: a plain answer and a streamed one
    (no bundled recipe sends ``n``)."""
    out = []
    for suffix, stream in (("", "false"), (".streaming", "true")):
        path = tmp / f"n-two{suffix}.yaml"
        path.write_text(N_TWO.format(suffix=suffix, stream=stream))
        out.append(path)
    return out


def test_every_choice_is_compared_and_an_ignored_n_is_reported(
        tmp_path: Path, levels_endpoint: Any, start_endpoint: Any) -> None:
    """The twin compared choice 0 alone (issue 45 item 5): against the matching pair each of
    the two choices is compared, with no difference; an NNRP face that ignores ``n`` (one
    choice) beside an HTTP API that honours it is a ``twin.choices`` difference."""
    picked = n_two_recipes(tmp_path)
    with http_api(tmp_path) as url:
        proc, results = run(tmp_path, levels_endpoint, url, picked=picked)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        for case_id in ("twin.n-two", "twin.n-two.streaming"):
            twin = results[case_id]["diagnostics"]["http_twin"]
            assert twin_findings(results[case_id]) == [], twin
            assert twin["fields_compared"][:6] == ["outcome", "choices", "text",
                                                    "finish-reason", "text[1]",
                                                    "finish-reason[1]"], twin
            assert twin["http"]["other_choices"]["1"]["text"] == twin["http"]["text"]
        ignored_dir = tmp_path / "n-ignored"
        ignored_dir.mkdir()
        with start_endpoint(ignored_dir, "n-ignored", ("--levels", "3")) as ignored:
            _, results = run(ignored_dir, ignored, url, picked=picked)
    for case_id in ("twin.n-two", "twin.n-two.streaming"):
        (finding,) = [f for f in twin_findings(results[case_id]) if f["rule"] == "twin.choices"]
        assert (finding["seen"], finding["expected"]) == (1, 2), finding
        assert finding["level"] == "non-strict"
        twin = results[case_id]["diagnostics"]["http_twin"]
        assert "twin.choices" in twin["differences"]
        assert twin["not_compared"]["choice 1"] == "only in the HTTP answer"


#: HTTP API defect -> (the case that shows it, the rule, the NNRP value, the HTTP value); each
#: changes one field of the answers, so one run with all of them shows each on its own
DIFFERENCES = {
    "text": ("level1.chat.streaming-text", "twin.text", None, None),
    "usage": ("level1.chat.non-streaming-body", "twin.usage",
              {"input": 2, "output": 16, "total": 18}, {"input": 3, "output": 16, "total": 19}),
    "finish": ("level1.chat.non-streaming-body", "twin.finish-reason", "length", "stop"),
    "accepts-invalid": ("level1.chat.invalid-body.missing-messages", "twin.outcome",
                        {"type": "invalid_request_error", "code": "missing_messages",
                         "message": "chat body has no 'messages'"}, "success"),
}


def test_each_difference_is_reported_side_by_side_and_is_non_strict(
        tmp_path: Path, levels_endpoint: Any) -> None:
    with http_api(tmp_path, *DIFFERENCES) as url:
        proc, results = run(tmp_path, levels_endpoint, url)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # recommendations: no failure
    report = (tmp_path / "report.md").read_text()
    for defect, (case_id, rule, nnrp, http) in DIFFERENCES.items():
        result = results[case_id]
        (finding,) = [f for f in twin_findings(result) if f["rule"] == rule]
        assert result["outcome"] == "passed", result
        assert result["diagnostics"]["verdict"] == "non-strict"
        assert finding["level"] == "non-strict"
        if defect == "text":
            assert finding["expected"] == finding["seen"] + " more"
        else:
            assert (finding["seen"], finding["expected"]) == (nnrp, http)
        assert "NNRP " in finding["message"] and " | HTTP " in finding["message"]
        assert rule in result["diagnostics"]["http_twin"]["differences"]
        assert f"{case_id}: [{rule}] NON-STRICT" in report
        # the one command that re-runs the case asks the twin too
        assert f"--http-twin {url} " in result["diagnostics"]["reproduce"]
    assert "  HTTP: " in report and "  NNRP: " in report


def test_strict_makes_a_difference_fail_through_the_pytest_face(
        tmp_path: Path, levels_endpoint: Any) -> None:
    with http_api(tmp_path, "finish") as url:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
             "no:hypothesispytest", "--nnrp-target", levels_endpoint.address, "--manifest",
             str(LEVELS_MANIFEST), "--recipes", str(PICKED[0]), "--nnrp-http-twin", url,
             "--nnrp-strict", "--nnrp-results", "r.json"],
            cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "twin.finish-reason" in proc.stdout
    (result,) = json.loads((tmp_path / "r.json").read_text())["results"]
    assert result["outcome"] == "failed"


def test_without_httpx_the_suite_runs_and_the_option_names_the_extra(tmp_path: Path) -> None:
    hide = "import sys; sys.modules['httpx'] = None; "
    loads = subprocess.run(
        [sys.executable, "-c", hide + "import nnrp_conformance.plugin, nnrp_conformance.cli"],
        capture_output=True, text=True, timeout=60)
    assert loads.returncode == 0, loads.stderr
    proc = subprocess.run(
        [sys.executable, "-c", hide + "from nnrp_conformance.cli import main; sys.exit(main())",
         "run", "--target", "127.0.0.1:1", "--manifest", str(LEVELS_MANIFEST),
         "--http-twin", "http://127.0.0.1:1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "--nnrp-http-twin needs httpx" in proc.stderr
    assert "pip install 'nnrp-conformance[http-twin]'" in proc.stderr


def test_an_http_api_that_does_not_answer_is_shown_and_judges_nothing(
        tmp_path: Path, levels_endpoint: Any) -> None:
    with http_api(tmp_path) as url:
        pass  # stopped: its port now refuses
    proc, results = run(tmp_path, levels_endpoint, url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = results["level1.chat.non-streaming-body"]
    (finding,) = twin_findings(result)
    assert (finding["rule"], finding["level"]) == ("twin.unanswered", "informational")
    assert "ConnectError" in finding["message"]
    assert result["diagnostics"]["http_twin"]["compared"] is False
