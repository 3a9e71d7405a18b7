"""The HTTP twin (``--nnrp-http-twin URL``): every request body a case sent over NNRP also goes
to the provider's own OpenAI-compatible HTTP API, and the two answers are compared.

Owns :class:`HttpTwin`, what the runner calls once a case's NNRP operation has ended
(``runner.run_case``, so recipe cases and generated ones alike): which cases have an HTTP
equivalent (:func:`why_not_compared`), sending the same body (:mod:`.http`), reading both
answers the same way (:mod:`.answers`), comparing them (:mod:`.compare`) and folding the
differences into the case's verdict (non-strict findings of the ``twin.*`` recommendations)
and its diagnostics (``http_twin``: the request, both answers side by side, what was and was
not compared). The HTTP request goes out once the case's NNRP operation has ended, so it
changes nothing the suite measures of that operation. It also makes the second HTTP call the
relations need (:meth:`HttpTwin.pair`, ``pairs.py``): both requests of a relation the NNRP
answers broke, sent over HTTP.

docs/twin.md is the user's page.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nnrp_conformance import contract, rules
from nnrp_conformance.checks.model import verdict_of
from nnrp_conformance.findings import Finding
from nnrp_conformance.jsonsafe import jsonable
from nnrp_conformance.options import SetupError
from nnrp_conformance.twin.answers import from_http, from_nnrp
from nnrp_conformance.twin.compare import compare_answers
from nnrp_conformance.twin.http import (
    HttpTwinUnavailable,
    api_base,
    load_httpx,
    route_for,
    send,
)
from nnrp_conformance.twin.pairs import pair_over_http

if TYPE_CHECKING:
    from nnrp_conformance.options import RunOptions
    from nnrp_conformance.planner import PlannedCase
    from nnrp_conformance.runner import CaseResult

__all__ = ["DIAGNOSTICS_KEY", "RULE_UNANSWERED", "HttpTwin", "HttpTwinUnavailable",
           "open_twin", "why_not_compared"]

#: the case diagnostics' member that holds the comparison
DIAGNOSTICS_KEY = "http_twin"
#: the HTTP API gave no answer (refused, timed out, not JSON): evidence, judging nothing
RULE_UNANSWERED = "twin.unanswered"


def operation_of(case: PlannedCase) -> str:
    """The operation the case's envelope submitted (what the HTTP path follows)."""
    sent = case.envelope.get("operation") if isinstance(case.envelope, dict) else None
    return sent if isinstance(sent, str) else case.operation


def why_not_compared(case: PlannedCase, result: CaseResult) -> str | None:
    """Why ``case`` has nothing to compare over HTTP, or None when it has."""
    envelope = case.envelope if isinstance(case.envelope, dict) else {}
    nnrp = envelope.get("nnrp")
    if route_for(operation_of(case)) is None:
        return f"{operation_of(case)} has no HTTP path"
    if case.raw:
        return "the submit is malformed on purpose (request.raw): NNRP framing has no HTTP form"
    if envelope.get("schema_version") != contract.SCHEMA_VERSION or \
            set(envelope) - set(contract.ENVELOPE_FIELDS) or \
            not isinstance(envelope.get("operation"), str) or \
            not isinstance(envelope.get("body"), dict):
        return "the envelope itself is invalid on purpose: the HTTP API receives only a body"
    if case.cancel_after_events is not None:
        return "the suite cancelled the NNRP operation on purpose: there is no answer to compare"
    hints: dict[str, Any] = nnrp if isinstance(nnrp, dict) else {}
    policy = set(hints) - {"diagnostics"}
    if policy == {"timeout_ms"} and _deadline_not_reached(hints["timeout_ms"], result):
        policy = set()  # a deadline the operation never reached shaped nothing of its answer
    if policy:
        named = ", ".join(sorted(f"nnrp.{k}" for k in policy))
        return f"the request sets NNRP policy ({named}), which the HTTP API has no form of"
    if result.terminal is None:
        return "the NNRP operation did not end (its own findings say why)"
    return None


def _deadline_not_reached(timeout_ms: Any, result: CaseResult) -> bool:
    """The NNRP operation succeeded before its ``nnrp.timeout_ms`` (§6's policy hint) was
    due: the deadline cut nothing, so the answer is what the same body gets without it."""
    took = (result.diagnostics.get("timings_ms") or {}).get("submit_to_terminal")
    return result.terminal == contract.TERMINAL_SUCCESS \
        and isinstance(timeout_ms, int | float) and not isinstance(timeout_ms, bool) \
        and isinstance(took, int | float) and took < timeout_ms


class HttpTwin:
    """The twin of one run: one HTTP client (made in the run's event loop on first use)."""

    def __init__(self, url: str, *, timeout: float = 60.0) -> None:
        self.httpx = load_httpx()  # HttpTwinUnavailable (the extra to install) at set-up
        self.url = url
        self.base = api_base(url)
        self.timeout = timeout
        self._client: Any = None

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _http(self) -> Any:
        if self._client is None:
            self._client = self.httpx.AsyncClient(
                timeout=self.timeout, limits=self.httpx.Limits(max_connections=64))
        return self._client

    async def compare(self, case: PlannedCase, result: CaseResult, *, strict: bool = False,
                      timeout: float | None = None) -> CaseResult:
        """``result`` with the comparison folded in (module doc); never raises for what the
        HTTP API does."""
        why = why_not_compared(case, result)
        if why is not None:
            return _with(result, {"url": self.base, "compared": False, "why": why}, [])
        body: dict[str, Any] = case.envelope["body"]
        operation = operation_of(case)
        method, path = route_for(operation) or ("", "")
        where = f"{method} /v1{path}"
        answer = await send(self._http(), self.url, operation, body,
                            timeout=timeout or self.timeout)
        ours = from_nnrp(operation, result.terminal, result.events)
        theirs = from_http(operation, answer)
        diagnostics: dict[str, Any] = {"url": self.base, "request": answer.summary()}
        if theirs.outcome is None:
            finding = Finding(RULE_UNANSWERED, f"the HTTP API gave no answer to the same body "
                              f"({where}): {answer.problem}", seen=answer.problem,
                              spec=rules.citation(RULE_UNANSWERED),
                              level=rules.LEVEL_INFORMATIONAL)
            return _with(result, {**diagnostics, "compared": False,
                                  "why": f"no HTTP answer: {answer.problem}"}, [finding])
        comparison = compare_answers(ours, theirs, body, where=where, strict=strict)
        diagnostics.update({
            "compared": True, "fields_compared": comparison.compared,
            "not_compared": comparison.not_compared,
            "differences": [f.rule for f in comparison.findings],
            "nnrp": ours.view(), "http": theirs.view(),
        })
        return _with(result, diagnostics, comparison.findings)


    async def pair(self, operation: str, first: Any, second: Any) -> dict[str, Any]:
        """Both bodies of a relation the NNRP answers broke, sent over HTTP (``pairs.py``)."""
        return await pair_over_http(self._http(), self.url, operation, (first, second),
                                    timeout=self.timeout)


def open_twin(options: RunOptions) -> HttpTwin | None:
    """The run's twin when ``--nnrp-http-twin`` asks for one; a SetupError (the message meant
    for the user) for a URL that is not HTTP or an install without httpx."""
    url = options.http_twin
    if not url:
        return None
    if not url.startswith(("http://", "https://")):
        raise SetupError(f"--nnrp-http-twin expects the HTTP API's base URL (http://HOST:PORT "
                         f"or http://HOST:PORT/v1), got {url!r}")
    try:
        return HttpTwin(url, timeout=options.timeout)
    except HttpTwinUnavailable as exc:
        raise SetupError(str(exc)) from None


def _with(result: CaseResult, diagnostics: Mapping[str, Any],
          findings: list[Finding]) -> CaseResult:
    """``result`` with the twin's diagnostics and its findings added to its verdict."""
    extra = {**result.diagnostics, DIAGNOSTICS_KEY: jsonable(dict(diagnostics))}
    if not findings:
        return dataclasses.replace(result, diagnostics=extra)
    every = [*result.verdict.findings, *findings]
    verdict = verdict_of(result.id, result.terminal, every, len(result.events))
    return dataclasses.replace(result, outcome=verdict.outcome, verdict=verdict,
                               diagnostics=extra)
