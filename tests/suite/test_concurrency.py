"""Many operations on one session (issue 30), over the real wire against the example endpoint:
the concurrency recipes pass a correct endpoint (every operation really in flight together),
each multiplexing defect fails by the rule naming it, and ``--concurrency N`` shows such a
defect in ordinary recipes that pass one at a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_runs import run_cli

pytestmark = pytest.mark.wire

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "level1"
MIXED = RECIPES / "concurrent-chat-mixed.yaml"
CANCEL_ONE = RECIPES / "concurrent-chat-cancel-one.yaml"


def run(tmp: Path, ep: Any, *recipes: Path, extra: tuple[str, ...] = ()) -> tuple[int, dict[str, Any]]:
    """One CLI run over ``recipes``; its exit code and case results."""
    chosen = [a for recipe in recipes for a in ("--recipes", str(recipe))]
    return run_cli(tmp, ep, "--timeout", "5", *extra, *chosen)


def failed_rules(result: dict[str, Any]) -> set[str]:
    return {f["rule"] for f in result["diagnostics"]["findings"] if f["level"] == "failed"}


def test_a_correct_endpoint_passes_with_every_operation_in_flight(
        tmp_path: Path, endpoint: Any) -> None:
    code, doc = run(tmp_path, endpoint, MIXED, CANCEL_ONE)
    assert code == 0, doc
    by_id = {r["id"]: r for r in doc["results"]}
    mixed = by_id["level1.concurrent.chat-mixed"]["diagnostics"]["concurrency"]
    assert [o["name"] for o in mixed["operations"]] == [
        "lead", "bravo", "charlie", "backend-error", "invalid-body"]
    assert [o["terminal"] for o in mixed["operations"]] == [
        "success", "success", "success", "error", "error"]
    # each operation has its own request id on the wire: the recipe id and its name
    assert mixed["operations"][1]["request_id"] == "level1.concurrent.chat-mixed/bravo"
    # the example streams its answers over several ms: nothing ended before the last submit
    assert mixed["submitted"] == mixed["in_flight_at_last_submit"] == 5
    cancel = by_id["level1.concurrent.chat-cancel-one"]["diagnostics"]["concurrency"]
    assert [o["terminal"] for o in cancel["operations"]] == ["cancelled", "success", "success"]
    assert all(o["outcome"] == "passed" for o in cancel["operations"])


@pytest.mark.parametrize(("defect", "recipe", "rule"), [
    ("cross-talk", MIXED, "concurrency.cross-talk"),
    ("swapped-terminals", MIXED, "concurrency.terminal-swap"),
    ("error-ends-neighbours", MIXED, "concurrency.neighbour-ended"),
    ("cancel-ends-others", CANCEL_ONE, "concurrency.neighbour-ended"),
])
def test_each_multiplexing_defect_fails_by_its_rule(
        tmp_path: Path, start_endpoint: Any, defect: str, recipe: Path, rule: str) -> None:
    with start_endpoint(tmp_path, defect) as ep:
        code, doc = run(tmp_path, ep, recipe)
    assert code == 1
    (result,) = doc["results"]
    assert rule in failed_rules(result), result["diagnostics"]["findings"]
    # the finding names the operation it was seen on
    assert any(f["message"].startswith("[") for f in result["diagnostics"]["findings"]
               if f["rule"] == rule)


def test_concurrency_n_shows_a_defect_that_ordinary_recipes_pass_one_at_a_time(
        tmp_path: Path, start_endpoint: Any) -> None:
    ordinary = [RECIPES / f"{stem}.yaml" for stem in
                ("chat-cancel-client", "chat-streaming-text", "chat-non-streaming-body")]
    with start_endpoint(tmp_path, "cancel-ends-others") as ep:
        code_one, one = run(tmp_path, ep, *ordinary)
        code_three, three = run(tmp_path, ep, *ordinary, extra=("--concurrency", "3"))
    assert code_one == 0, one
    assert "concurrency" not in one["results"][0]["diagnostics"]
    assert code_three == 1
    by_id = {r["id"]: r for r in three["results"]}
    assert by_id["level1.chat.cancel.client"]["outcome"] == "passed"
    for case in ("level1.chat.streaming-text", "level1.chat.non-streaming-body"):
        assert "concurrency.neighbour-ended" in failed_rules(by_id[case])
        assert by_id[case]["diagnostics"]["concurrency"]["batch"] == [
            "level1.chat.cancel.client", "level1.chat.streaming-text",
            "level1.chat.non-streaming-body"]


def test_concurrency_option_is_checked(tmp_path: Path, endpoint: Any) -> None:
    proc = subprocess.run([sys.executable, "-m", "nnrp_conformance.cli", "run", "--target",
                           endpoint.address, "--concurrency", "0"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--concurrency: must be between 1 and 64, got '0'" in proc.stderr.replace(
        "--concurrency/--nnrp-concurrency", "--concurrency")


def _across_sessions(tmp: Path, session: str) -> Path:
    """Two streams in flight together, the second on the session ``session`` says."""
    path = tmp / f"across-{session}.yaml"
    path.write_text(f"""\
id: level1.concurrent.chat-across-sessions
profile: openai-compatible
schema_version: openai-compatible/1
status: optional
operation: chat.completions.create
required_capabilities: [api.level1, api.chat.completions.create, api.streaming]
parameters: {{MODEL_ID: example-model}}
request:
  body:
    model: ${{MODEL_ID}}
    messages: [{{role: user, content: Write about a lighthouse keeper.}}]
    stream: true
    max_tokens: 48
expect:
  events: [{{type: response.output_text.delta, min_count: 1}}]
  terminal: success
concurrent:
  - name: elsewhere
    session: {session}
    request:
      body:
        model: ${{MODEL_ID}}
        messages: [{{role: user, content: List the planets of the solar system in order.}}]
        stream: true
        max_tokens: 48
    expect:
      events: [{{type: response.output_text.delta, min_count: 1}}]
      terminal: success
""")
    return path


def test_a_group_across_sessions_finds_state_the_sessions_share(
        tmp_path: Path, endpoint: Any, start_endpoint: Any) -> None:
    """``session: another``: the group runs on two sessions opened for it, so a registry of
    streams keyed on the frame id alone (which each session numbers anew) crosses them; on
    one session the same defect never shows, and a correct endpoint passes both ways."""
    across, same = _across_sessions(tmp_path, "another"), _across_sessions(tmp_path, "same")
    code, doc = run(tmp_path, endpoint, across)
    assert code == 0, doc
    operations = doc["results"][0]["diagnostics"]["concurrency"]["operations"]
    assert [(o["name"], o["session"], o["terminal"]) for o in operations] == [
        ("lead", "same", "success"), ("elsewhere", "another", "success")]
    with start_endpoint(tmp_path, "frame-id-registry") as ep:
        code_same, on_one = run(tmp_path, ep, same)
        code_across, on_two = run(tmp_path, ep, across)
    assert code_same == 0, on_one
    assert code_across == 1
    (result,) = on_two["results"]
    assert "concurrency.cross-talk" in failed_rules(result), result["diagnostics"]["findings"]
    assert any("(on the other session)" in f["message"]
               for f in result["diagnostics"]["findings"] if f["rule"] == "concurrency.cross-talk")
