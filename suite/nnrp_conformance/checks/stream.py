"""Checks on the stream as received: the client's wire findings (``wire.*``), an operation
that failed in the client (``wire.transport``), undecodable results (``event.decode``) and
every event against its schema (``event.schema``, ``event.diagnostics-field``), with the
manifest's extension fields allowed as the profile says (§7)."""

from __future__ import annotations

from collections.abc import Iterable

from nnrp_conformance import contract, validation
from nnrp_conformance.checks.context import SPEC, Context, at, type_of

#: a top-level event field no profile field collides with, used for diagnostics by other
#: implementations: a recommendation (event.diagnostics-field), not a schema failure
_DIAGNOSTICS_FIELD = "diagnostics"


def check_wire(ctx: Context) -> None:
    for wf in ctx.obs.wire_findings:
        rule = str(wf.get("rule") or "unknown")
        if rule == "client.max_events":
            continue  # the flood check reports it as flood.max-events
        ctx.fail(rule if rule.startswith("wire.") else f"wire.{rule}",
                 str(wf.get("detail") or wf.get("message") or rule),
                 index=wf.get("event_index"), spec=str(wf.get("spec") or f"{SPEC} §3 wire mapping"))


def check_exception(ctx: Context) -> None:
    exc = ctx.obs.extra.get("exception")
    if exc:
        ctx.fail("wire.transport", f"the operation failed in the client: {exc}",
                 spec=f"{SPEC} §3 failure placement")


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
                     seen=seen, spec=f"{SPEC} §3 non-terminal results (D §7.1)")
    term_err = ctx.obs.extra.get("terminal_decode_error")
    if term_err:
        ctx.fail("event.decode", f"the terminal result body does not decode: {term_err}",
                 index=len(ctx.obs.events), spec=f"{SPEC} §3 terminal (D §8.1)")


def _extension_key(key: str, allowed: Iterable[str]) -> bool:
    return any(key == n or key.startswith(n + ".") or key == n.replace(".", "_")
               for n in allowed)


def _allowed_extensions(ctx: Context) -> set[str]:
    if ctx.manifest is None:
        return set()
    return {n for n, crit in ctx.manifest.extensions.items()
            if not crit or n in (ctx.case.extensions or {})}


def check_schema(ctx: Context) -> None:
    allowed = _allowed_extensions(ctx)
    seq = ctx.seq
    diagnostics_at: list[int] = []
    for i, ev in enumerate(seq):
        if ev is None:
            continue
        violations = []
        for v in validation.validate_event(ev):
            top = v.pointer[1:].replace("~1", "/").replace("~0", "~") \
                if v.rule == "additionalProperties" and v.pointer.count("/") == 1 else None
            if top is not None and _extension_key(top, allowed):
                continue
            if top == _DIAGNOSTICS_FIELD:
                diagnostics_at.append(i)  # a recommendation, judged below
                continue
            if v.pointer == "/error/code" and v.rule == "enum" \
                    and ev["error"]["code"] in contract.ERROR_CODE_ALIASES:
                continue  # an alias: error.code-alias (non-strict) names it
            violations.append(v)
        if violations:
            ctx.fail("event.schema",
                     f"{type_of(ev) or 'event'} breaks its schema: "
                     + "; ".join(str(v) for v in violations) + f" — {at(seq, i)}",
                     index=i, expected=contract.EVENT_SCHEMA_NAMES.get(type_of(ev) or "", "event"),
                     seen=[str(v) for v in violations], spec=f"{SPEC} §4 events")
    if diagnostics_at:
        first = diagnostics_at[0]
        ctx.fail("event.diagnostics-field", f"{len(diagnostics_at)} event(s) carry a top-level "
                 f"{_DIAGNOSTICS_FIELD!r} field; the profile's place for diagnostics is the "
                 f"event's nnrp member — first: {at(seq, first)}", index=first,
                 expected="nnrp.diagnostics", seen=_DIAGNOSTICS_FIELD,
                 spec=f"{SPEC} §4 events (unknown diagnostic fields must be ignored)")
