"""The security cases' claim, plan and judgement without a wire (security.py,
checks/security.py); over the wire: tests/reliability/test_security_cases.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from nnrp_conformance import contract, rules, validation
from nnrp_conformance.checks.security import Attempt, judge_attempt
from nnrp_conformance.security import (
    CASES,
    SecurityClaim,
    _planned,
    claim_of,
    claims_differ,
    plaintext_target,
)

KEY_CLAIM = SecurityClaim(contract.OP_SESSION_AUTHENTICATE, False, "capability document")


def options(target: str = "127.0.0.1:4433", api_key: str | None = "k") -> Any:
    return SimpleNamespace(target=target, api_key=api_key)


def test_the_document_claim_wins_and_an_unknown_method_claims_no_key() -> None:
    manifest = {"security": {"api_key": "nnrp.session.authenticate"}}
    assert claim_of(manifest, None) == SecurityClaim("nnrp.session.authenticate", False,
                                                     "manifest")
    assert claim_of(manifest, {"security": {"tls": True}}) == SecurityClaim(
        None, True, "capability document")
    assert claim_of({}, {"security": {"api_key": "client_hello"}}).api_key is None  # type: ignore[union-attr]
    assert claim_of({}, {}) is None and claim_of(None, None) is None


def test_the_field_is_in_both_schemas_and_closed() -> None:
    doc = {"profile": "openai-compatible", "schema_version": "openai-compatible/1",
           "compatibility_levels": [1], "operations": [{"name": "chat.completions.create", "streaming": True,
                           "non_streaming": True, "tool_calls": False}],
           "security": {"api_key": "nnrp.session.authenticate", "tls": True}}
    assert validation.validate("capability-document", doc) == []
    bad = [v.pointer for v in validation.validate(
        "capability-document", {**doc, "security": {"api_key": "bearer", "x": 1}})]
    assert "/security/api_key" in bad and any(p.startswith("/security") for p in bad), bad
    manifest = {**doc, "adapter": "a", "security": {"tls": "yes"}}
    assert [v.pointer for v in validation.validate("manifest", manifest)] == ["/security/tls"]


@pytest.mark.parametrize(("target", "plain"), [
    ("wss://127.0.0.1:9/nnrp", "ws://127.0.0.1:9/nnrp"), ("tcp+tls://h:9", "h:9"),
    ("quic+tls://h:9", None), ("h:9", None), ("ws://h:9", None), ("ipc:///x", None)])
def test_the_plaintext_twin_of_a_target(target: str, plain: str | None) -> None:
    assert plaintext_target(target) == plain


@pytest.mark.parametrize(("case", "claim", "opts", "selection", "says"), [
    ("security.api-key.absent", KEY_CLAIM, options(), contract.SEL_SELECTED, None),
    ("security.api-key.wrong", KEY_CLAIM, options(api_key=None), contract.SEL_NOT_CLAIMED,
     "--nnrp-api-key"),
    ("security.api-key.accepted", SecurityClaim(None, True, "manifest"), options(),
     contract.SEL_NOT_CLAIMED, "the manifest claims no API key"),
    ("security.tls.plaintext", KEY_CLAIM, options("wss://h:1/p"), contract.SEL_SELECTED, None),
    ("security.tls.plaintext", KEY_CLAIM, options("quic+tls://h:1"),
     contract.SEL_INFORMATIONAL, "RFC 9001"),
    ("security.tls.plaintext", SecurityClaim(None, True, "manifest"), options("ws://h:1"),
     contract.SEL_NOT_CLAIMED, "run against its wss:// or tcp+tls:// address"),
    ("security.tls.plaintext", KEY_CLAIM, options(), contract.SEL_NOT_CLAIMED,
     "not a TLS target"),
])
def test_what_runs_and_why_not(case: str, claim: SecurityClaim, opts: Any, selection: str,
                               says: str | None) -> None:
    planned = _planned(case, claim, opts, "m")
    assert (planned.selection, planned.envelope["body"]["model"]) == (selection, "m")
    assert planned.envelope["operation"] == contract.OP_CHAT_COMPLETIONS_CREATE
    assert (planned.reason is None) if says is None else (says in (planned.reason or ""))
    assert planned.to_plan_case()["expect"]["terminal_rule"] == CASES[case][0]


def test_every_security_rule_is_a_recommendation() -> None:
    for rule, _ in CASES.values():
        assert rules.rulebook()[rule].tag == rules.TAG_RECOMMENDATION


SERVED = Attempt("t", opened=True, open_s=0.01, terminal=contract.TERMINAL_SUCCESS,
                 event={"type": "response.completed", "body": {}})
REFUSED_OP = Attempt("t", opened=True, open_s=0.01, terminal=contract.TERMINAL_ERROR,
                     event={"type": "response.error", "error": {"code": "invalid_api_key"}})
REFUSED_OPEN = Attempt("t", opened=False, open_s=0.02, message="the endpoint refused the key")
HUNG = Attempt("ws://t", opened=False, open_s=10.0, message="no session within 10s")


@pytest.mark.parametrize(("case", "attempt", "level"), [
    ("security.api-key.absent", SERVED, rules.LEVEL_NON_STRICT),
    ("security.api-key.absent", REFUSED_OP, rules.LEVEL_PASSED),
    ("security.api-key.absent", REFUSED_OPEN, rules.LEVEL_PASSED),
    ("security.api-key.wrong", SERVED, rules.LEVEL_NON_STRICT),
    ("security.api-key.wrong", REFUSED_OPEN, rules.LEVEL_PASSED),
    ("security.api-key.accepted", SERVED, rules.LEVEL_PASSED),
    ("security.api-key.accepted", REFUSED_OP, rules.LEVEL_NON_STRICT),
    ("security.api-key.accepted", REFUSED_OPEN, rules.LEVEL_NON_STRICT),
    ("security.tls.plaintext", REFUSED_OPEN, rules.LEVEL_PASSED),
    ("security.tls.plaintext", HUNG, rules.LEVEL_NON_STRICT),
    ("security.tls.plaintext", REFUSED_OP, rules.LEVEL_NON_STRICT),
])
def test_the_judgement(case: str, attempt: Attempt, level: str) -> None:
    rule = CASES[case][0]
    planned = _planned(case, KEY_CLAIM, options("wss://h:1/p"), "m")
    verdict, evidence = judge_attempt(planned, attempt, rule, connect_timeout=10.0)
    assert verdict.level == level, verdict.message
    assert evidence["rule"] == rule and evidence["seen"] == attempt.seen()
    assert [f.rule for f in verdict.findings] == ([] if level == rules.LEVEL_PASSED else [rule])
    if level != rules.LEVEL_PASSED:
        assert verdict.outcome == contract.OUTCOME_PASSED  # shown, not failed
        strict, _ = judge_attempt(planned, attempt, rule, connect_timeout=10.0, strict=True)
        assert strict.outcome == contract.OUTCOME_FAILED and strict.findings[0].expected


def test_a_malformed_claim_in_the_document_is_ours_to_recommend() -> None:
    from nnrp_conformance.checks.capability import _document_rule

    doc = {"profile": "openai-compatible", "schema_version": "openai-compatible/1",
           "compatibility_levels": [1], "security": {"api_key": "bearer"}}
    found = {(v.pointer, _document_rule(v))
             for v in validation.validate("capability-document", doc)}
    assert ("/security/api_key", "capability.document-recommended") in found
    assert ("/operations", "capability.document") in found  # the profile's


def test_a_manifest_and_a_document_that_claim_differently_are_noted() -> None:
    tls, key = {"security": {"tls": True}}, {"security": {"api_key": "nnrp.session.authenticate"}}
    assert "the document's claim is tested" in (claims_differ(tls, key) or "")
    assert claims_differ(tls, tls) is None and claims_differ({}, key) is None


def test_a_security_case_never_joins_a_concurrency_batch() -> None:
    from nnrp_conformance.recording import _batches

    ordinary = [SimpleNamespace(selected=True, companions=(), recipe=None) for _ in range(3)]
    security = _planned("security.api-key.absent", KEY_CLAIM, options(), "m")
    batches = _batches([ordinary[0], security, ordinary[1], ordinary[2]], 2)
    assert [len(b) for b in batches] == [1, 2, 1] and batches[0] == [security], batches
