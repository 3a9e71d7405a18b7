"""Checks on the stream as received: the client's wire findings (``wire.*``), an operation
that failed in the client (``wire.transport``), undecodable results (``event.decode``) and
every event against its schema: the strict shape at the schema's top level, what the
profile fixes and nothing more (``event.schema``, with an extra field that collides with a
profile field or a declared extension not in effect), and this project's preferences in the
schema's ``$defs/recommended`` (``event.extra-field`` for an extra field that collides with
nothing, ``event.value-limit`` for a limit or a type the profile leaves open,
``event.diagnostics-field``: recommendations), with the fields of the manifest's extensions
in effect allowed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from nnrp_conformance import contract, validation
from nnrp_conformance.checks.context import Context, at, type_of

#: a top-level event field no profile field collides with, used for diagnostics by other
#: implementations: a recommendation (event.diagnostics-field), not a schema failure
_DIAGNOSTICS_FIELD = "diagnostics"


#: the client's own records that judge nothing: the flood check reports ``client.max_events``
#: as flood.max-events; ``client.cancel_after_end`` says the local runtime had already closed
#: the frame when our cancel was due (the session dropped, or the endpoint's terminal was in
#: the runtime but not yet read). Whether that happened before the cancel is local timing, and
#: what the endpoint sent is judged by the terminal rules (a terminal, or none: timeout.*);
#: judged, it came and went between identical runs (docs/verdicts.md#stable-verdicts). It
#: stays in ``diagnostics.wire_findings``.
_NOT_JUDGED = ("client.max_events", "client.cancel_after_end")


def check_wire(ctx: Context) -> None:
    for wf in ctx.obs.wire_findings:
        rule = str(wf.get("rule") or "unknown")
        if rule in _NOT_JUDGED:
            continue
        ctx.fail(rule if rule.startswith("wire.") else f"wire.{rule}",
                 str(wf.get("detail") or wf.get("message") or rule),
                 index=wf.get("event_index"))


def check_exception(ctx: Context) -> None:
    exc = ctx.obs.extra.get("exception")
    if exc:
        ctx.fail("wire.transport", f"the operation failed in the client: {exc}")


def check_decode(ctx: Context) -> None:
    errors = ctx.obs.extra.get("decode_errors") or {}
    for i, ev in enumerate(ctx.obs.events):
        if ev is None:
            raw = ctx.obs.raw_events[i] if i < len(ctx.obs.raw_events) else None
            detail = errors.get(i) or getattr(raw, "decode_error", None) or "undecodable"
            body = getattr(raw, "raw", None)
            seen = bytes(body[:200]).decode("utf-8", "replace") if isinstance(
                body, bytes | bytearray) else None
            ctx.fail("event.decode", f"partial result #{i} is not one UTF-8 JSON event "
                     f"object: {detail}", index=i, expected="one raw UTF-8 JSON event object",
                     seen=seen)
    term_err = ctx.obs.extra.get("terminal_decode_error")
    if term_err and ctx.obs.extra.get("delivery") == "result_drop":
        # a drop is NNRP's own message, which terminal profile documents do "not replace"
        # (§8.1); the contract lists result_drop among terminal deliveries: its diagnostic
        # may be plain text (issue 43)
        ctx.note("event.decode", f"the result drop's diagnostic is not a profile event: "
                 f"{term_err}", seen=ctx.obs.extra.get("drop_reason"))
    elif term_err:
        ctx.fail("event.decode", f"the terminal result body does not decode: {term_err}",
                 index=len(ctx.obs.events))


def _extension_key(key: str, names: Iterable[str]) -> bool:
    return any(key == n or key.startswith(n + ".") or key == n.replace(".", "_")
               for n in names)


def _allowed_extensions(ctx: Context) -> set[str]:
    """The declared extensions in effect for the case: the non-critical ones, and the
    critical ones the case depends on (selected)."""
    if ctx.manifest is None:
        return set()
    return {n for n, crit in ctx.manifest.extensions.items()
            if not crit or n in (ctx.case.extensions or {})}


def _collision(key: str, event_type: str, ctx: Context, allowed: set[str]) -> str | None:
    """Why a top-level field outside its event type's schema collides with a meaning the
    profile or the manifest gives it (None: it collides with nothing). Such an event is not
    merely open, its shape is outside the profile (event.schema): a field of the profile's
    event table on an event type that does not carry it (``usage`` on a text delta; an
    extension never redefines one), or the field of a declared extension that is not in
    effect for this case (a critical one the case did not select)."""
    if key in validation.profile_event_fields():
        owners = [t for t in contract.PROFILE_TABLE_EVENT_TYPES
                  if key in validation.event_fields(t)]
        return f"field '{key}' is the profile's field of {', '.join(owners)}, " \
               f"not of {event_type}"
    declared = set(ctx.manifest.extensions) - allowed if ctx.manifest is not None else set()
    hit = sorted(n for n in declared if _extension_key(key, (n,)))
    if hit:
        return f"field '{key}' belongs to the declared critical extension {hit[0]!r}, " \
               f"which this case did not select"
    return None


#: where the error body's code list and code families live in its recommended part: judged by
#: checks.errors (error.code for the codes upstream's recipes expect, error.code-choice for
#: the rest), not here
_ERROR_CODE_POINTERS = ("/error/code", "/error/type")


def recommendation_rule(v: validation.Violation, event_type: str | None) -> str | None:
    """The recommendation one departure from an event schema's ``$defs/recommended`` breaks:
    ``event.extra-field`` for a field none of its schemas name, ``event.value-limit`` for the
    rest (a limit, a type the profile leaves open); None for what another check judges (the
    error code list: checks.errors; a usage's counts: usage.shape in checks.sequence)."""
    if v.pointer in _ERROR_CODE_POINTERS and v.rule in ("enum", "const"):
        return None
    if event_type == contract.EV_USAGE and (v.pointer + "/").startswith("/usage/"):
        return None
    if v.rule == "additionalProperties":
        return "event.extra-field"
    return "event.value-limit"


def _expected(violations: list[validation.Violation]) -> Any:
    """What the profile (or the recommendation) expected where the event broke it, by
    pointer: the values themselves (a type, the required fields), never a schema id."""
    shown = {v.pointer or "/": v.expected for v in violations if v.expected is not None}
    return shown or None


def check_schema(ctx: Context) -> None:
    """The profile's shape of every event (``event.schema``: the strict top level of its
    schema), then this suite's preferences (the schema's ``$defs/recommended``), where an
    extra top-level field is judged by what it collides with."""
    allowed = _allowed_extensions(ctx)
    seq = ctx.seq
    diagnostics_at: list[int] = []
    for i, ev in enumerate(seq):
        if ev is None:
            continue
        shape = validation.validate_event(ev)
        broken: dict[str, list[validation.Violation]] = {"event.schema": shape} if shape else {}
        for v in validation.recommended_violations(ev):
            top = v.pointer[1:].replace("~1", "/").replace("~0", "~") \
                if v.rule == "additionalProperties" and v.pointer.count("/") == 1 else None
            collision = None if top is None else _collision(top, type_of(ev) or "", ctx, allowed)
            if collision is not None:
                broken.setdefault("event.schema", []).append(replace(v, message=collision))
                continue
            if top is not None and _extension_key(top, allowed):
                continue
            if top == _DIAGNOSTICS_FIELD:
                diagnostics_at.append(i)  # a recommendation, judged below
                continue
            rule = recommendation_rule(v, type_of(ev))
            if rule is not None:
                broken.setdefault(rule, []).append(v)
        for rule, violations in broken.items():
            what = {"event.schema": "breaks the profile's shape",
                    "event.extra-field": "carries a field the profile does not name",
                    "event.value-limit": "departs from a value this suite recommends"}[rule]
            ctx.fail(rule, f"{type_of(ev) or 'event'} {what}: "
                     + "; ".join(str(v) for v in violations) + f" — {at(seq, i)}",
                     index=i, expected=_expected(violations), seen=[str(v) for v in violations])
    if diagnostics_at:
        first = diagnostics_at[0]
        ctx.fail("event.diagnostics-field", f"{len(diagnostics_at)} event(s) carry a top-level "
                 f"{_DIAGNOSTICS_FIELD!r} field; this suite recommends diagnostics under the "
                 f"event's nnrp member (the profile gives them no place: its §11 only says "
                 f"unknown diagnostic fields must be ignored) — first: {at(seq, first)}",
                 index=first,
                 expected="nnrp.diagnostics", seen=_DIAGNOSTICS_FIELD)
