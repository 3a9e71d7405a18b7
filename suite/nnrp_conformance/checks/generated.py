"""The oracles of generated requests that no recipe rule already judges (docs/generation.md).

* :func:`check_stop` (``text.stop``): an answer to a request with ``stop`` carries none of
  its stop sequences. It judges every case, recipe or generated.
* :func:`check_text_unicode` (``event.text-unicode``): no event's text holds a lone UTF-16
  surrogate (a character split in two across deltas, say).
* :func:`judge_generated`: a *valid* generated request (family ``valid`` or ``sequence``)
  may be refused: the profile allows an endpoint's errors. When the endpoint's own
  terminal is a well-formed ``response.error`` (no finding on it but the expectations', their
  authorities' rules, authority.py), the refusal is judged by two recommendations instead
  (a fault elsewhere in the answer stays a finding of its own):
  ``generated.server-error`` (a ``server_error``) and ``generated.refusal-unnamed`` (an
  ``invalid_request_error`` that names neither a field of the request, nor a ``param``, nor
  a code of its own). A generated cancel that was never sent or was crossed judges nothing
  about cancellation (``checks/exercise.py``; the runner moves a generated case's cancel
  point within what the endpoint streamed and runs it again first, ``runner.py``).
* A refusal of a valid request that names what its envelope left out, ``request_id``
  (``envelope.request-id-optional``, strict: §6 makes it optional), or a hint of its
  ``nnrp`` member (``envelope.hints-forwarded``, a recommendation: §6 says the hints are
  never forwarded into the body, but a refusal of a hint's value is the endpoint's policy).
* :func:`session_served_next`: after an invalid request, the session's next operation got a
  terminal (``generated.session-serves-next``; the probe is run by ``generate/settle.py``).
"""

from __future__ import annotations

import re
from typing import Any

from nnrp_conformance import authority, contract, rules
from nnrp_conformance.checks.context import Context, chat_completion_body, type_of
from nnrp_conformance.checks.exercise import KEY as NOT_EXERCISED
from nnrp_conformance.checks.model import Finding

__all__ = ["check_stop", "check_text_unicode", "generated_family", "judge_generated",
           "session_served_next"]

#: codes that say only "the request is invalid": a refusal with one must name the field
GENERIC_CODES = frozenset({None, "", "invalid_request", "invalid_body", "bad_request",
                           "invalid_request_error", "BadRequestError", "400"})
_VALID_FAMILIES = frozenset({"valid", "sequence"})


def generated_family(case: Any) -> str | None:
    """The family of a generated case (its recipe's ``generated.family``), else None."""
    recipe = getattr(case, "recipe", None)
    generated = getattr(recipe, "data", {}).get("generated") if recipe is not None else None
    return generated.get("family") if isinstance(generated, dict) else None


def _stops(body: dict[str, Any]) -> list[str]:
    stop = body.get("stop")
    items = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    return [s for s in items if isinstance(s, str) and s]


def check_stop(ctx: Context) -> None:
    stops = _stops(ctx.body)
    if not stops or ctx.obs.terminal_kind != contract.TERMINAL_SUCCESS:
        return
    streamed: dict[Any, str] = {}
    for ev in ctx.obs.events:
        if type_of(ev) == contract.EV_OUTPUT_TEXT_DELTA and isinstance(ev.get("delta"), str):
            streamed[ev.get("index")] = streamed.get(ev.get("index"), "") + ev["delta"]
    texts = [("streamed text", t) for t in streamed.values()]
    body = chat_completion_body(ctx)
    for choice in (body or {}).get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            texts.append(("message.content", message["content"]))
    for where, text in texts:
        hit = next((s for s in stops if s in text), None)
        if hit is not None:
            at = text.index(hit)
            ctx.fail("text.stop", f"the {where} contains the stop sequence {hit!r} (at "
                     f"character {at}): …{text[max(0, at - 30):at + len(hit) + 30]!r}…",
                     index=ctx.obs.terminal_index, expected=f"no {stops!r} in the text",
                     seen=text[:200])
            return


def _surrogate(value: Any) -> str | None:
    if isinstance(value, str):
        return next((f"U+{ord(c):04X}" for c in value if 0xD800 <= ord(c) <= 0xDFFF), None)
    if isinstance(value, dict):
        return next((s for v in value.values() if (s := _surrogate(v))), None)
    if isinstance(value, list):
        return next((s for v in value if (s := _surrogate(v))), None)
    return None


def check_text_unicode(ctx: Context) -> None:
    for i, ev in enumerate(ctx.seq):
        found = _surrogate(ev)
        if found:
            ctx.fail("event.text-unicode", f"event #{i} ({type_of(ev)}) holds the lone "
                     f"surrogate {found}: not a Unicode character (a character split across "
                     "two events?)", index=i, expected="Unicode text", seen=found)
            return


def _names_feature(err: dict[str, Any], body: dict[str, Any]) -> bool:
    if isinstance(err.get("param"), str) and err["param"]:
        return True
    if err.get("code") not in GENERIC_CODES:
        return True
    message = str(err.get("message") or "").lower()
    return any(_named(key.lower(), message) for key in body)


def _named(key: str, message: str) -> bool:
    """``key`` occurs in ``message``; a field of one or two letters (``n``) as a word of its
    own (the letter n is in almost every message)."""
    if len(key) > 2:
        return key in message
    return re.search(rf"(?<![a-z0-9_]){re.escape(key)}(?![a-z0-9_])", message) is not None


def _mentions(err: dict[str, Any], name: str,
              where: tuple[str, ...] = ("param", "code", "message")) -> bool:
    """Whether the error's param, code or message (``where``) names ``name``."""
    return any(name.lower() in str(err.get(k) or "").lower() for k in where)


#: a message that asks for the request_id (not one that merely shows a derived one)
_ASKS_REQUEST_ID = re.compile(r"request_id\b.{0,40}\b(required|missing|absent|must)"
                              r"|\b(required|missing|absent|no)\b.{0,40}request_id", re.I)


def _asks_for_request_id(err: dict[str, Any]) -> bool:
    """The error says the request_id is missing: its param or code names it, or its message
    says it is required or missing (an endpoint may show the id it derived in a message)."""
    return _mentions(err, "request_id", ("param", "code")) \
        or bool(_ASKS_REQUEST_ID.search(str(err.get("message") or "")))


def _refused_for_envelope(ctx: Context, err: dict[str, Any]) -> bool:
    """A valid request's refusal that names what its envelope left out (``request_id``, §6:
    optional) or a hint of its ``nnrp`` member (§6: never forwarded into the body); True when
    it judged the refusal (generate/envelopes.py)."""
    envelope = getattr(ctx.case, "envelope", None)
    if not isinstance(envelope, dict):
        return False
    if "request_id" not in envelope and _asks_for_request_id(err):
        ctx.fail("envelope.request-id-optional", "a valid request sent without request_id was "
                 f"refused for it (code {err.get('code')!r}: {str(err.get('message'))[:200]!r})",
                 index=ctx.obs.terminal_index, expected="an answer: request_id is optional "
                 "(§6)", seen=err)
        return True
    nnrp = envelope.get("nnrp")
    hints = sorted(nnrp) if isinstance(nnrp, dict) else []
    named = [k for k in hints if _mentions(err, k)]
    if named:
        ctx.fail("envelope.hints-forwarded", f"a valid request sent with nnrp {hints} "
                 f"was refused naming {named[0]!r} (code {err.get('code')!r}: "
                 f"{str(err.get('message'))[:200]!r}): the hints read as body fields",
                 index=ctx.obs.terminal_index, expected="an answer: nnrp hints are never "
                 "forwarded into the body (§6)", seen=err)
        return True
    return False


def judge_generated(ctx: Context) -> None:
    if generated_family(ctx.case) not in _VALID_FAMILIES or ctx.obs.terminal_kind is None:
        return
    failed = [f for f in ctx.findings if f.level == rules.LEVEL_FAILED]
    expected = authority.expectation_rules(ctx.case.expect)
    # a cancel the generator asked for that was never sent or was crossed left no expectation
    # finding (checks/exercise.py), but a refusal is still judged by the recommendations
    unexercised = bool(ctx.obs.extra.get(NOT_EXERCISED))
    if not any(f.rule in expected for f in failed) and not unexercised:
        return
    # a refusal is judged as one when its own terminal is well-formed: a fault elsewhere in
    # the answer (an event before it) stands on its own and never turns the same refusal into
    # a failed expectation (the upstream adapter's context-length errors were judged two ways)
    if any(f.rule not in expected and (f.rule.startswith("error.")
                                      or f.event_index == ctx.obs.terminal_index) for f in failed):
        return
    term = ctx.obs.terminal_event
    if ctx.obs.terminal_kind != contract.TERMINAL_ERROR or type_of(term) != contract.EV_ERROR:
        return
    err = term.get("error") if isinstance(term, dict) else None
    if not isinstance(err, dict):
        return
    ctx.findings = [f for f in ctx.findings if f.rule not in expected]
    if _refused_for_envelope(ctx, err):
        return
    if err.get("type") == "server_error":
        ctx.fail("generated.server-error", f"a valid request was answered with a server_error "
                 f"(code {err.get('code')!r}: {str(err.get('message'))[:200]})",
                 index=ctx.obs.terminal_index, expected="an answer, or a refusal naming what "
                 "it refuses", seen=err)
    elif not _names_feature(err, ctx.body):
        ctx.fail("generated.refusal-unnamed", f"a valid request was refused without naming "
                 f"what is refused (code {err.get('code')!r}, no param, and the message names "
                 f"no field of the request: {str(err.get('message'))[:200]!r})",
                 index=ctx.obs.terminal_index, expected=f"one of {sorted(ctx.body)} named",
                 seen=err)


def session_served_next(case_id: str, terminal: str | None, detail: str) -> Finding | None:
    """The finding when the operation after an invalid request got no terminal."""
    if terminal in contract.TERMINALS:
        return None
    rule = "generated.session-serves-next"
    return Finding(rule, f"after the invalid request {case_id}, the session's next operation "
                   f"got no terminal ({detail})", None, "a terminal for the next operation",
                   terminal, rules.citation(rule), rules.finding_level(rule, strict=False))
