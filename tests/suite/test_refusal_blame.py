"""A refusal is what the endpoint says it is, and blame follows the session (issue 47), over the
real wire against the example endpoint's variants of the upstream vLLM adapter's own answers:

* ``limit-before-validation`` admits 4 operations per session and refuses the rest with
  ``adapter_operation_limit`` (``server_error``) before reading their bodies, as the upstream
  adapter does: the fifth operation of ``level1.concurrent.chat-mixed``, its invalid body, is
  refused, not wrongly rejected, and the mandatory recipe passes (§10's overload row, whatever
  the refused request was).
* ``context-length`` answers a prompt longer than its context with vLLM's own error ("This
  model's maximum context length is 128 tokens. However, your request has …"): an invalid
  request for that request, never a refusal, beside other operations or not.
* ``cancel-leak-cap`` leaks cancelled operations on their session and refuses past 2 per
  session: a refusal on the session that holds the leak names the leaking case
  (``left_open_earlier``); a refusal on a fresh session, after it, names nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_runs import run_cli as run

pytestmark = pytest.mark.wire

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "level1"
CANCEL = "level1.chat.cancel.client"
#: a prompt over the context-length variant's 128 words
LONG_PROMPT = " ".join(["lighthouse"] * 150)


def recipes(*names: str) -> list[str]:
    return [a for n in names for a in ("--recipes", str(RECIPES / f"{n}.yaml"))]


def rules_of(findings: list[dict[str, Any]]) -> set[str]:
    return {f["rule"] for f in findings}


def test_an_invalid_body_refused_before_validation_passes_the_mixed_recipe(
        tmp_path: Path, start_endpoint: Any) -> None:
    with start_endpoint(tmp_path, None, ("--variant", "limit-before-validation")) as ep:
        # --strict: the refusal is what the profile allows, not a recommendation shown (the
        # invalid body's own error family is non-strict, so only strictness tells a refusal
        # read as one from an error judged as the wrong family)
        code, doc = run(tmp_path, ep, "--timeout", "5", "--strict",
                        *recipes("concurrent-chat-mixed"))
    (mixed,) = doc["results"]
    operations = {o["name"]: o for o in mixed["diagnostics"]["concurrency"]["operations"]}
    invalid = operations["invalid-body"]
    # the fifth submit, over the limit of 4: the endpoint never read its body
    assert "adapter_operation_limit" in json.dumps(invalid["findings"]), invalid
    assert code == 0, mixed["message"]
    assert mixed["outcome"] == "passed"
    assert [(f["rule"], f["level"]) for f in invalid["findings"]] == \
        [("concurrency.refused", "informational")]


def long_prompt_recipe(tmp: Path) -> Path:
    """A concurrency recipe: a stream beside a request whose prompt is over the context."""
    mixed = yaml.safe_load((RECIPES / "concurrent-chat-mixed.yaml").read_text())
    long = {"name": "long", "request": {"body": {
        "model": "${MODEL_ID}", "messages": [{"role": "user", "content": LONG_PROMPT}],
        "stream": True, "max_tokens": 8}}, "expect": mixed["expect"]}
    recipe = {**mixed, "id": "local.concurrent.long-prompt", "status": "optional",
              "description": "A stream beside a prompt longer than the model's context.",
              "concurrent": [long]}
    path = tmp / "long-prompt.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def test_a_context_length_error_is_never_a_refusal(tmp_path: Path,
                                                   start_endpoint: Any) -> None:
    stream_recipe = yaml.safe_load((RECIPES / "chat-streaming-text.yaml").read_text())
    alone = tmp_path / "long-alone.yaml"
    alone.write_text(yaml.safe_dump({
        **stream_recipe, "id": "local.chat.long-prompt", "status": "optional",
        "request": {**stream_recipe["request"], "body": {
            **stream_recipe["request"]["body"],
            "messages": [{"role": "user", "content": LONG_PROMPT}]}}}, sort_keys=False))
    with start_endpoint(tmp_path, None, ("--variant", "context-length",
                                         "--delta-delay-ms", "20")) as ep:
        _code, grouped = run(tmp_path, ep, "--timeout", "5",
                             "--recipes", str(long_prompt_recipe(tmp_path)))
        _code, batched = run(tmp_path, ep, "--timeout", "5", "--concurrency", "2",
                             "--recipes", str(alone), *recipes("chat-streaming-text"))
    # beside a stream in one recipe: the long operation is judged by what it expected
    (group,) = grouped["results"]
    (long,) = [o for o in group["diagnostics"]["concurrency"]["operations"]
               if o["name"] == "long"]
    assert "This model's maximum context length is 128 tokens" in json.dumps(long["findings"])
    assert "concurrency.refused" not in rules_of(long["findings"])
    # what it expected: a success (expect.success, the profile's Level 1 row, since issue 43's
    # per-element authorities)
    assert "expect.success" in rules_of(long["findings"])
    assert group["outcome"] == "failed"
    # beside another case under --concurrency: not a refusal, so not set aside or run again
    by_id = {r["id"]: r for r in batched["results"]}
    case = by_id["local.chat.long-prompt"]
    assert "refused" not in case["diagnostics"]["concurrency"]
    assert "concurrency.refused" not in rules_of(case["diagnostics"]["findings"])
    assert case["outcome"] == "failed"
    assert by_id["level1.chat.streaming-text"]["outcome"] == "passed"


def test_blame_follows_the_session(tmp_path: Path, start_endpoint: Any) -> None:
    # --concurrency 3, two batches: the first on a session where the cancel case leaks and
    # the third operation is refused (the limit is 2); the second on a fresh session (the
    # leak closed the first), where the third operation is refused again
    first = ("chat-cancel-client", "chat-streaming-text", "chat-usage-shape")
    second = ("chat-non-streaming-body", "chat-text-delta-ordering", "chat-tool-call-forced")
    with start_endpoint(tmp_path, None, ("--variant", "cancel-leak-cap",
                                         "--delta-delay-ms", "20")) as ep:
        code, doc = run(tmp_path, ep, "--timeout", "2", "--concurrency", "3",
                        *recipes(*first, *second))
    batches: dict[str, list[dict[str, Any]]] = {}
    for r in doc["results"]:
        batches.setdefault(r["diagnostics"]["concurrency"]["batch"][0], []).append(r)
    shared = batches[CANCEL]
    (fresh,) = [rs for k, rs in batches.items() if k != CANCEL]
    assert code == 1
    assert [r["id"] for r in doc["results"] if r["outcome"] == "failed"] == [CANCEL]

    def refused(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in results if "refused" in r["diagnostics"]["concurrency"]]

    # the session holding the leaked cancel: its refusal may follow from it, and says so
    assert refused(shared), [r["id"] for r in shared]
    for r in refused(shared):
        note = r["diagnostics"]["concurrency"]["refused"]["left_open_earlier"]
        assert note["cases"] == [CANCEL]
    # the fresh session: refused as well, and blamed on nothing earlier
    assert refused(fresh), [r["id"] for r in fresh]
    for r in fresh:
        assert "left_open_earlier" not in json.dumps(r["diagnostics"]), r["id"]
