"""Generated requests without an endpoint (docs/generation.md): the seed draws the same
requests, every one is a valid recipe that reads back from its file, the shrinker keeps the
failure and the family, and text an endpoint sends that UTF-8 cannot hold (a lone surrogate)
reaches every report writer as its escape instead of crashing it."""

from __future__ import annotations

import importlib
import json
from collections import Counter
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from nnrp_conformance import contract
from nnrp_conformance.checks.model import Finding, Verdict
from nnrp_conformance.events import CaseRecord, RunFinished
from nnrp_conformance.generate.envelopes import ENVELOPES
from nnrp_conformance.generate.mutations import MUTATIONS
from nnrp_conformance.generate.recipe_files import recipe_data, save_recipe
from nnrp_conformance.generate.run import draw, still_the_failure, with_models
from nnrp_conformance.generate.shrink import body_candidates, shrink
from nnrp_conformance.generate.strategies import FAMILIES, Claim, Draft, slots
from nnrp_conformance.jsonsafe import jsonable
from nnrp_conformance.planner import build_envelope
from nnrp_conformance.recipes import load_recipe_file
from nnrp_conformance.reports.markdown import render_markdown
from nnrp_conformance.runner import CaseResult

CLAIMS = [Claim(contract.OP_CHAT_COMPLETIONS_CREATE, streaming=True, tool_calls=True,
                cancellation=True),
          Claim(contract.OP_RESPONSES_CREATE, streaming=True, tool_calls=True, cancellation=True),
          Claim(contract.OP_EMBEDDINGS_CREATE)]


def test_the_same_seed_draws_the_same_requests() -> None:
    first = draw(CLAIMS, "m", 40, 3)
    assert len(first) == 40
    assert first == draw(CLAIMS, "m", 40, 3)
    assert first != draw(CLAIMS, "m", 40, 4)
    assert {d.family for d in first} == set(FAMILIES)
    assert {d.operation for d in first} == {c.operation for c in CLAIMS}


def test_a_bounded_run_sends_every_family_and_mutation_evenly() -> None:
    """Families, operations, an operation's mutations and the envelopes are dealt in shuffled
    rounds: a run of 132 chat cases holds 44 of each family, each of the 22 chat mutations
    twice, and each envelope 17 or 18 times (left to hypothesis, 1,000 cases held 2 negative
    max_tokens)."""
    chat = [CLAIMS[0]]
    dealt = slots(chat, 132, 7)
    assert Counter(s.family for s in dealt) == {f: 44 for f in FAMILIES}
    mutations = [n for n, m in MUTATIONS.items() if contract.OP_CHAT_COMPLETIONS_CREATE in
                 m.operations]
    assert len(mutations) == 22
    assert Counter(s.mutation for s in dealt if s.mutation) == {n: 2 for n in mutations}
    envelopes = Counter(s.envelope for s in dealt if s.family != "invalid")
    assert set(envelopes) == set(ENVELOPES) and set(envelopes.values()) <= {17, 18}, envelopes
    assert all(s.envelope is None for s in dealt if s.family == "invalid")
    assert Counter(s.claim.operation for s in slots(CLAIMS, 90, 7)) == {
        c.operation: 30 for c in CLAIMS}
    drafts = draw(chat, "m", 132, 7)
    assert [(d.family, d.mutation, d.envelope) for d in drafts] == [
        (s.family, s.mutation, s.envelope) for s in dealt]


def test_an_envelope_shape_is_sent_as_section_6_allows() -> None:
    """Issue 45 item 1: request_id absent and §6's example hints, in the recipe a valid
    request becomes (validated against recipe.schema.json) and in the envelope it sends."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for name in ENVELOPES:
        draft = Draft("valid", contract.OP_CHAT_COMPLETIONS_CREATE, body, envelope=name)
        data = recipe_data(draft, case_id=f"generated.valid.chat.1-{0:04d}", seed=1, index=0,
                           model="m")
        assert data["generated"]["envelope"] == name
        sent = build_envelope(data["operation"], data["request"], "rid")
        assert ("request_id" in sent) == ("no-request-id" not in name), sent
        assert sent.get("nnrp") == ENVELOPES[name].nnrp
        assert sent["body"]["messages"] == body["messages"]
    assert ENVELOPES["section-6-hints"].nnrp == {"timeout_ms": 30000, "diagnostics": True}


def test_the_draw_ignores_the_constants_of_the_modules_a_process_loaded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hypothesis mixes literals of the process's local modules into its draws: the same
    seed drew other requests under pytest than under the CLI until the draw turned that off."""
    first = draw(CLAIMS, "m", 40, 5)
    words = " ".join(f'"{w}"' for w in ("alpha", "beta", "gamma", "delta", "omega", "zeta"))
    (tmp_path / "provider_constants.py").write_text(
        f"WORDS = [{words.replace(' ', ', ')}]\nNUMBERS = [3, 7, 11, 23, 42, 1999, 2**31 - 5]\n"
        "RATES = [0.25, 0.75, 1.25]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("provider_constants")
    assert draw(CLAIMS, "m", 40, 5) == first


def test_every_generated_request_is_a_recipe_that_reads_back(tmp_path: Path) -> None:
    for index, draft in enumerate(draw(CLAIMS, "m", 40, 11)):
        data = recipe_data(draft, case_id=f"generated.t.{index}", seed=11, index=index,
                           model="m")  # validated against recipe.schema.json
        path = save_recipe(data, tmp_path)
        assert load_recipe_file(path).data == data
        assert data["request"]["body"].get("model", "${MODEL_ID}") == "${MODEL_ID}"


def test_an_invalid_request_is_expected_as_the_profile_reads_it() -> None:
    """Only what the profile makes invalid is expected strictly: a body without model is
    OpenAI's mistake, not the profile's (beyond_profile); a wrong schema_version may also be
    answered by an NNRP-level error, as its fixed recipe allows (error.invalid-submit)."""
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    def recipe(mutation: str) -> dict[str, Any]:
        return recipe_data(Draft("invalid", contract.OP_CHAT_COMPLETIONS_CREATE, base,
                                 mutation=mutation), case_id="generated.t.0", seed=1,
                           index=0, model="m")

    assert recipe("missing-model")["beyond_profile"]["rule"] == "generated.invalid-accepted"
    assert recipe("envelope-schema-version")["expect"]["events"][0]["rule"] \
        == "error.invalid-submit"
    strict = recipe("missing-messages")
    # issue 43: each element names its authority; only the error terminal is the profile's
    assert "beyond_profile" not in strict
    assert strict["expect"]["terminal_rule"] == "expect.invalid-request"
    assert (strict["expect"]["events"][0]["rule"], strict["expect"]["events"][0]["fields_rule"]) \
        == ("error.body-missing", "error.family")


def test_shrinking_keeps_the_failure_and_the_family() -> None:
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
            "temperature": 0.7, "seed": 9, "metadata": {"k": "v"}, "stop": ["b", "zz"],
            "messages": [{"role": "system", "content": "be brief " * 20},
                         {"role": "user", "content": "a b c"},
                         {"role": "assistant", "content": "a"},
                         {"role": "user", "content": [{"type": "text", "text": "a b c d"}]}]}
    companion = Draft("valid", contract.OP_CHAT_COMPLETIONS_CREATE,
                      {"model": "m", "messages": [{"role": "user", "content": "x"}]})
    draft = Draft("sequence", contract.OP_CHAT_COMPLETIONS_CREATE, body,
                  companions=(companion,))
    runs: list[Draft] = []

    def still_fails(d: Draft) -> str | None:  # "the endpoint ignores stop": needs a stop
        runs.append(d)
        return "failed" if "stop" in d.body else None

    small, result, spent, _seconds, stopped = shrink(draft, "failed", still_fails)
    assert result == "failed" and spent == len(runs) <= 30 and not stopped
    assert small.family == "sequence" and small.companions == ()
    assert set(small.body) == {"model", "messages", "stop"}
    assert len(small.body["messages"]) == 1 and small.body["stop"] == ["b"]


def test_shrinking_a_failure_that_drops_the_session_stops_at_its_time_budget() -> None:
    """Each try of a case that drops the session waits for a silence: the tries get a number
    of seconds in all, and the result says shrinking stopped with edits left untried."""
    body = {"model": "m", "stream": True, "temperature": 0.7, "seed": 9, "metadata": {"k": "v"},
            "messages": [{"role": "user", "content": "a b c d e f g h " * 8}]}
    draft = Draft("valid", contract.OP_CHAT_COMPLETIONS_CREATE, body)
    clock = [0.0]

    def silent_try(d: Draft) -> str:  # every try still fails, after a 1 s silence
        clock[0] += 1.0
        return "failed"

    with mock.patch("nnrp_conformance.generate.shrink.time.monotonic", lambda: clock[0]):
        found = shrink(draft, "failed", silent_try, seconds=3.0)
    assert found.runs == 3 and found.seconds == 3.0 and found.stopped
    assert found.draft != draft  # what it had found by then is kept


def test_shrinking_never_shortens_a_value_that_must_stay_whole() -> None:
    """A shortened tool_choice ("au"), encoding_format ("fl") or tool-call arguments ("{")
    would turn a valid request into an invalid one: the shrinker leaves them whole."""
    chat = {"model": "m", "tool_choice": "auto",
            "tools": [{"type": "function", "function": {"name": "f"}}],
            "messages": [{"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "done"},
                {"role": "user", "content": "hello"}]}
    embeddings = {"model": "m", "input": "hello", "encoding_format": "float"}
    for operation, body in ((contract.OP_CHAT_COMPLETIONS_CREATE, chat),
                            (contract.OP_EMBEDDINGS_CREATE, embeddings)):
        for smaller in body_candidates(operation, body):
            assert smaller.get("tool_choice", "auto") == "auto"
            assert smaller.get("encoding_format", "float") == "float"
            for m in smaller.get("messages", ()):
                for call in m.get("tool_calls") or ():
                    assert call["function"]["arguments"] == "{}"


def test_a_lone_surrogate_reaches_every_writer_as_its_escape() -> None:
    text = "ok \ud83d"  # half of an emoji: valid JSON as "\\ud83d", not UTF-8
    assert jsonable({"delta": text}) == {"delta": "ok \\ud83d"}
    finding = Finding("event.text-unicode", f"seen {text}", 0, None, text)
    verdict = Verdict(contract.OUTCOME_FAILED, "success", [finding], f"case: {text}",
                      "failed")
    result = CaseResult(id="c", outcome=contract.OUTCOME_FAILED, terminal="success",
                        verdict=verdict, events=[{"type": "response.output_text.delta",
                                                  "index": 0, "delta": text}],
                        duration_s=0.1, started_at="2026-12-06T00:00:00Z", level=1,
                        status="optional", selection="selected", reason=None)
    record = CaseRecord.from_result(result)
    for written in (json.dumps(record.to_dict(), ensure_ascii=False),
                    render_markdown(None, RunFinished([record], 0.1))):
        written.encode("utf-8")  # raised UnicodeEncodeError before the escape
        assert "\\ud83d" in written


def test_a_shrinking_try_with_a_finding_the_drawn_request_lacked_is_another_failure() -> None:
    """Issue 45: the shrinker dropped ``stream: true`` while chasing one finding and met
    another; the saved request then carried a finding the drawn one never had."""
    drawn = {("text.stop", "non-strict"), ("usage.max-tokens", "non-strict")}
    assert still_the_failure({("text.stop", "non-strict")}, drawn)
    assert still_the_failure(set(drawn), drawn)
    assert not still_the_failure({("text.stop", "non-strict"), ("event.schema", "failed")}, drawn)
    assert not still_the_failure(set(), drawn)


def test_each_operation_is_drawn_for_its_own_model_and_api() -> None:
    """Issue 45: every embeddings request went to the chat model (``--nnrp-model
    embeddings.create=ID`` was ignored by the generator), and "valid" Responses requests
    carried ``seed``, which OpenAI's Responses API does not define."""
    drafts = draw(CLAIMS, "chat-m", 150, 5)
    responses = [d.body for d in drafts if d.operation == contract.OP_RESPONSES_CREATE]
    assert responses and not any("seed" in b for b in responses)
    assert any("seed" in d.body for d in drafts if d.operation == contract.OP_CHAT_COMPLETIONS_CREATE)
    models = {contract.OP_EMBEDDINGS_CREATE: "embed-m"}
    moved = [with_models(d, "chat-m", models) for d in drafts]
    every = [x for d in moved for x in (d, *d.companions)]
    assert {x.body["model"] for x in every if x.operation == contract.OP_EMBEDDINGS_CREATE} \
        == {"embed-m"}
    assert {x.body["model"] for x in every if x.operation != contract.OP_EMBEDDINGS_CREATE} \
        == {"chat-m"}
    # an invalid request whose model was drawn away (missing-model keeps the body's) is kept
    assert with_models(drafts[0], "chat-m", {}) == drafts[0]
