"""The security cases: what an endpoint claims of its security, tested from sessions of the
suite's own (docs/pytest-plugin.md#security).

Owns the claim (:func:`claim_of`: the ``security`` field of the capability document, else of
the manifest; ours, the profile is silent), the cases it plans (:func:`security_cases`, added
to the plan after the recipes by ``ConformanceCore.build_plan``) and running one
(:func:`run_security_case`, from ``ConformanceCore.run_case``): each opens a session of its
own, never the run's, and sends the Level 1 chat request of ``level1.chat.non-streaming-body``:

* ``security.api-key.absent``: a session that never authenticates;
* ``security.api-key.wrong``: one that authenticates with a key other than the run's;
* ``security.api-key.accepted``: one that authenticates with the run's key (the same request
  answered shows the two refusals were the key's, not the request's);
* ``security.tls.plaintext``: a plaintext client against the run's TLS target (``wss://`` as
  ``ws://``, ``tcp+tls://`` as ``tcp://``; QUIC is TLS by construction: listed, not run).

The key cases run when the endpoint claims a key and the run has one (``--nnrp-api-key``),
the TLS case when the target is TLS; every other case of a claim is listed with the reason
it did not run. What each attempt showed is judged in ``checks/security.py``. No key is
ever written: a message that echoes the run's key has it replaced.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nnrp_conformance import case_results, contract
from nnrp_conformance.checks.security import Attempt, judge_attempt
from nnrp_conformance.plan import PlannedCase
from nnrp_conformance.planner import build_envelope
from nnrp_conformance.recipes import Recipe, bundled_recipes_dir

__all__ = [
    "CASES",
    "SecurityClaim",
    "claim_of",
    "claims_differ",
    "is_security_case",
    "plaintext_target",
    "run_security_case",
    "security_cases",
]

ABSENT, WRONG, ACCEPTED, PLAINTEXT = ("security.api-key.absent", "security.api-key.wrong",
                                      "security.api-key.accepted", "security.tls.plaintext")
#: case id -> (the rule that judges it, what it shows)
CASES: Mapping[str, tuple[str, str]] = {
    ABSENT: ("security.key-required", "a session that never authenticates is refused: its "
             "open, or the Level 1 chat request it sends, ends in an error"),
    WRONG: ("security.wrong-key-refused", "a session that authenticates with a wrong key is "
            "refused: its authentication, or the chat request after it, ends in an error"),
    ACCEPTED: ("security.key-accepted", "a session that authenticates with the run's key is "
               "served the same chat request"),
    PLAINTEXT: ("security.tls-plaintext-refused", "a plaintext client against the TLS target "
                "is refused promptly, never served"),
}
#: the request every case sends: the Level 1 non-streaming chat recipe's
_BODY: dict[str, Any] = {"messages": [{"role": "user", "content": "Say hello."}],
                         "stream": False, "max_tokens": 16, "temperature": 0}
#: our TLS schemes with a plaintext twin on the same carrier (quic+tls has none)
_PLAINTEXT_OF = {"wss": "ws://", "tcp+tls": ""}


@dataclass(frozen=True)
class SecurityClaim:
    """What an endpoint claims: how a session presents its key (None: no key claimed), TLS."""

    api_key: str | None
    tls: bool
    source: str  # "capability document" | "manifest"


def claim_of(manifest: Mapping[str, Any] | None, document: Mapping[str, Any] | None
             ) -> SecurityClaim | None:
    """The claim of the capability document (what the endpoint says now), else of the
    manifest; None when neither has a ``security`` object. A method this suite cannot drive
    is no key claim (the document's schema check reports it)."""
    for source, doc in (("capability document", document), ("manifest", manifest)):
        sec = doc.get("security") if isinstance(doc, Mapping) else None
        if isinstance(sec, Mapping):
            how = sec.get("api_key")
            return SecurityClaim(how if how == contract.OP_SESSION_AUTHENTICATE else None,
                                 sec.get("tls") is True, source)
    return None


def plaintext_target(target: str) -> str | None:
    """The plaintext client's address for a TLS target on the same carrier, or None."""
    scheme, sep, rest = target.partition("://")
    twin = _PLAINTEXT_OF.get(scheme.lower()) if sep else None
    return None if twin is None else twin + rest


def _scheme(target: str | None) -> str:
    scheme, sep, _ = (target or "").partition("://")
    return scheme.lower() if sep else "tcp"


def _selection(case_id: str, claim: SecurityClaim, options: Any) -> tuple[str, str | None]:
    target = options.target
    if case_id == PLAINTEXT:
        scheme = _scheme(target)
        if target and plaintext_target(target) is not None:
            return contract.SEL_SELECTED, None
        if scheme == "quic+tls":
            return contract.SEL_INFORMATIONAL, ("QUIC is TLS by construction (RFC 9001): a "
                                                "quic+tls:// target has no plaintext client")
        if claim.tls:
            return contract.SEL_NOT_CLAIMED, (f"the {claim.source} claims TLS, but the run's "
                                              f"target is {scheme}://, plaintext: run against "
                                              f"its wss:// or tcp+tls:// address to test it")
        return contract.SEL_NOT_CLAIMED, "not a TLS target and no TLS claimed"
    if claim.api_key is None:
        return contract.SEL_NOT_CLAIMED, f"the {claim.source} claims no API key"
    if not options.api_key:
        return contract.SEL_NOT_CLAIMED, (f"the {claim.source} claims an API key and the run "
                                          f"has none: give --nnrp-api-key (NNRP_API_KEY)")
    return contract.SEL_SELECTED, None


def _planned(case_id: str, claim: SecurityClaim, options: Any, model: str | None
             ) -> PlannedCase:
    rule, shows = CASES[case_id]
    terminal = contract.TERMINAL_SUCCESS if case_id == ACCEPTED else contract.TERMINAL_ERROR
    request = {"body": {"model": model or contract.PLACEHOLDER_MODEL_ID, **_BODY}}
    expect: dict[str, Any] = {"events": [], "terminal": terminal, "terminal_rule": rule}
    operation = contract.OP_CHAT_COMPLETIONS_CREATE
    description = f"{shows} (claimed by the {claim.source}; rule {rule})"
    # a re-run of the case runs the discovery recipe, whose document holds the claim, and the
    # security cases the claim plans (reproduce.py takes a recipe file)
    path = bundled_recipes_dir() / "level1" / "capabilities-document.yaml"
    recipe = Recipe(id=case_id, path=path, status=contract.STATUS_OPTIONAL,
                    operation=operation, required_capabilities=(), level=contract.LEVEL_CHAT,
                    rule=f"{rule} (ours: the profile is silent on security, its §2 leaves "
                         f"transport to NNRP)", description=description,
                    data={"id": case_id, "operation": operation, "request": request,
                          "expect": expect, "security": case_id})
    selection, reason = _selection(case_id, claim, options)
    return PlannedCase(
        id=case_id, recipe=recipe, status=contract.STATUS_OPTIONAL, selection=selection,
        reason=reason, operation=operation, required_capabilities=(), level=contract.LEVEL_CHAT,
        request=request, expect=expect, envelope=build_envelope(operation, request, case_id),
        notes=(f"security claimed by the {claim.source}: {description}",))


def claims_differ(manifest: Mapping[str, Any] | None, document: Mapping[str, Any] | None
                  ) -> str | None:
    """A note when the manifest and the capability document both claim security and differ
    (the document's claim is tested; a deployment may well differ from a static manifest)."""
    mine = manifest.get("security") if isinstance(manifest, Mapping) else None
    theirs = document.get("security") if isinstance(document, Mapping) else None
    if isinstance(mine, Mapping) and isinstance(theirs, Mapping) and mine != theirs:
        return (f"the manifest claims security {dict(mine)}, the capability document "
                f"{dict(theirs)}: the document's claim is tested")
    return None


def security_cases(core: Any) -> list[PlannedCase]:
    """The cases of the endpoint's security claim (none without one), in the order they
    run: key absent, wrong, accepted; TLS."""
    manifest = getattr(core.manifest, "data", None)
    claim = claim_of(manifest, core.capabilities)
    if claim is None:
        return []
    models = getattr(core.plan, "models", None) or {}
    model = models.get(contract.OP_CHAT_COMPLETIONS_CREATE) or core.model_id
    differ = claims_differ(manifest, core.capabilities)
    cases = [_planned(case_id, claim, core.options, model) for case_id in CASES]
    for case in cases:
        case.notes = (*case.notes, differ) if differ else case.notes
    return cases


def is_security_case(case: Any) -> bool:
    """Whether ``case`` is one of :func:`security_cases` (it runs on sessions of its own)."""
    recipe = getattr(case, "recipe", None)
    data = getattr(recipe, "data", None)
    return isinstance(data, dict) and data.get("security") in CASES


def _hide(text: str, key: str | None) -> str:
    return text.replace(key, "<the run's API key>") if key else text


async def _attempt(case: PlannedCase, options: Any, *, target: str, api_key: str | None,
                   secure: bool) -> Attempt:
    """Open a session of its own on ``target`` (authenticated with ``api_key`` when given),
    send the case's request, read it to its terminal, close."""
    # lazy on purpose: the client loads nnrp-py's native library (see session.connect)
    from nnrp_conformance.client import NnrpClient
    from nnrp_conformance.terminals import terminal_kind_of

    t0 = time.monotonic()
    try:
        client = await NnrpClient.connect(
            target, connect_timeout=options.connect_timeout, api_key=api_key,
            tls_ca=options.tls_ca if secure else None,
            tls_server_name=options.tls_server_name if secure else None)
    except Exception as exc:
        return Attempt(target, opened=False, open_s=time.monotonic() - t0,
                       message=_hide(str(exc) or type(exc).__name__, options.api_key))
    opened_s = time.monotonic() - t0
    try:
        op = await client.submit(case.envelope, timeout=float(options.timeout))
        events = [ev async for ev in op if ev.kind == "partial"]
        term = op.terminal
        event = getattr(term, "event", None)
        return Attempt(target, opened=True, open_s=opened_s, terminal=terminal_kind_of(term),
                       event=event if isinstance(event, dict) else None, events=len(events),
                       message=_hide(str(getattr(term, "detail", "") or ""), options.api_key))
    except Exception as exc:
        return Attempt(target, opened=True, open_s=opened_s,
                       message=_hide(f"{type(exc).__name__}: {exc}", options.api_key))
    finally:
        await client.aclose()


def run_security_case(core: Any, case: PlannedCase) -> case_results.CaseResult:
    """Run one security case on a session of its own and judge it (``checks/security.py``);
    a case the plan did not select comes back skipped."""
    if case.selection != contract.SEL_SELECTED:
        return case_results.skipped_result(case)
    options = core.options
    started_at = case_results.started_now()
    t0 = time.monotonic()
    target = str(options.target)
    key: str | None = None
    if case.id == PLAINTEXT:
        target = plaintext_target(target) or target
    elif case.id == WRONG:
        key = f"nnrp-conformance-wrong-{secrets.token_hex(8)}"
    elif case.id == ACCEPTED:
        key = options.api_key
    attempt = core.call(_attempt, case, options, target=target, api_key=key,
                        secure=case.id != PLAINTEXT)
    verdict, evidence = judge_attempt(case, attempt, CASES[case.id][0],
                                      connect_timeout=float(options.connect_timeout),
                                      strict=options.strict)
    return case_results.CaseResult(
        id=case.id, outcome=verdict.outcome, terminal=attempt.terminal, verdict=verdict,
        events=[attempt.event] if attempt.event is not None else [],
        duration_s=time.monotonic() - t0, started_at=started_at, level=case.level,
        status=case.status, selection=case.selection, reason=case.reason,
        diagnostics={"expected_terminal": case.expected_terminal, "operation": case.operation,
                     "security": evidence, "notes": list(case.notes)})
