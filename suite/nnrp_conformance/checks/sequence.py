"""Checks on the order and content of the events: the recipe's ``expect.events`` matched with
one forward cursor, each miss judged under the element's authority (``authority.py``: an
``expect.*`` profile rule, a recommendation, or upstream's ``sequence.expected``; an entry's
``fields_any_of`` accepts any one of its field subsets), tool-call ordering (``order.tool-call``,
``tool-call.arguments``), one usage summary (``usage.at-most-once``) and the named checks
``usage-shape`` (``usage.shape``) and ``text-order`` (``order.text-index``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nnrp_conformance import authority, contract, validation
from nnrp_conformance.checks.context import (
    Context,
    at,
    json_contains,
    mismatch,
    type_of,
)
from nnrp_conformance.checks.responses import response_body
from nnrp_conformance.recipes import field_alternatives
from nnrp_conformance.tool_calls import tool_call_problems


def _entry_count(entry: Mapping[str, Any]) -> int:
    if "min_count" in entry:
        return int(entry["min_count"])
    return 0 if entry.get("optional") else 1


def _with_recommended_code(ev: Any) -> Any:
    err = ev.get("error") if isinstance(ev, dict) else None
    if isinstance(err, dict) and err.get("code") in contract.ERROR_CODE_ALIASES:
        return {**ev, "error": {**err, "code": contract.ERROR_CODE_ALIASES[err["code"]]}}
    return ev


def _profile_fields(typ: str, fields: Any) -> Any:
    """The part of an expectation's fields the profile fixes. In an error body that is the
    family but never the code: no normative document fixes a code (checks.errors judges it:
    error.code for upstream's recipes, error.code-choice for ours); the family too is open
    for a code upstream's recipe names without one (backend_error)."""
    err = fields.get("error") if typ == contract.EV_ERROR and isinstance(fields, dict) else None
    if not isinstance(err, dict):
        return fields
    code = err.get("code")
    kept = {k: v for k, v in err.items()
            if k != "code" and not (k == "type" and code in contract.FAMILY_OPEN_ERROR_CODES)}
    return {**fields, "error": kept}


def _expected_fields(typ: str, entry: Mapping[str, Any]) -> list[Any] | None:
    """The profile's part of each field subset the entry accepts (None: any event)."""
    alternatives = field_alternatives(entry)
    return None if alternatives is None else [_profile_fields(typ, f) for f in alternatives]


def _shown(alternatives: list[Any]) -> Any:
    """One expectation as findings show it: the subset, or ``{"any_of": [...]}``."""
    return alternatives[0] if len(alternatives) == 1 else {"any_of": alternatives}


def _mismatches(ev: Any, alternatives: list[Any]) -> str | None:
    """Where ``ev`` misses each accepted field set (called only when it misses them all)."""
    if len(alternatives) == 1:
        return mismatch(ev, alternatives[0])
    return "none of the accepted field sets: " + "; ".join(
        f"({n}) {mismatch(ev, fields)}" for n, fields in enumerate(alternatives, 1))


def check_expected(ctx: Context) -> None:
    obs = ctx.obs
    if obs.terminal_kind is None and (obs.timed_out or obs.extra.get("flooded")):
        return  # an unfinished stream: the timeout / flood finding is the verdict's cause
    # an alias code matches its recommended code here; error.code-alias reports it
    seq = [_with_recommended_code(ev) for ev in ctx.seq]
    cursor = 0
    for k, entry in enumerate(ctx.case.expect.get("events") or ()):
        typ = entry["type"]
        alternatives = _expected_fields(typ, entry)
        # each element is judged under its own authority (authority.py): the entry's
        # presence and counts under its rule, the fields it pins under its fields_rule
        rule, frule = authority.entry_rule(entry), authority.fields_rule(entry)
        need = _entry_count(entry)
        candidates = [i for i in range(cursor, len(seq)) if type_of(seq[i]) == typ]
        matching = [i for i in candidates if alternatives is None
                    or any(json_contains(seq[i], fields) for fields in alternatives)]
        # fields under another authority than the presence: an event of the type counts
        # for the presence even when it misses them
        counted = candidates if frule != rule else matching
        label = f"expect.events[{k}] ({typ}" + (", optional" if entry.get("optional") else "") \
            + ")"
        # after our cancel nnrp-py drops the operation's queued partials (docs/verdicts.md
        # #cancel): a partial event never seen is not the endpoint's fault; a terminal is
        unseeable = not counted and ctx.obs.cancelled_at_index is not None \
            and typ not in contract.TERMINAL_EVENT_TYPES
        fields_missed = alternatives is not None and bool(candidates) and not matching
        if alternatives is not None and fields_missed:
            first = candidates[0]
            ctx.fail(frule,
                     f"{label}: {typ} at or after event #{cursor} does not contain the "
                     f"expected fields: {_mismatches(seq[first], alternatives)} — "
                     f"{at(seq, first)}",
                     index=first, expected=_shown(alternatives), seen=seq[first])
        if len(counted) < need and not unseeable and not (fields_missed and frule == rule):
            earlier = [i for i in range(cursor) if type_of(seq[i]) == typ]
            where = (f"; {len(earlier)} earlier one(s) out of order (first at #{earlier[0]})"
                     if earlier else "")
            ctx.fail(rule,
                     f"{label}: expected at least {need} {typ} at or after event #{cursor}, "
                     f"seen {len(counted)}{where}; observed types: "
                     f"{[type_of(e) for e in seq]}",
                     index=cursor if cursor < len(seq) else None,
                     expected={"type": typ, "min_count": need,
                               "fields": None if alternatives is None or frule != rule
                               else _shown(alternatives)},
                     seen=len(counted))
        hi = entry.get("max_count")
        if hi is not None and len(candidates) > hi:
            extra = candidates[hi]
            ctx.fail(rule,
                     f"{label}: at most {hi} {typ} expected at or after event #{cursor}, "
                     f"seen {len(candidates)} — first extra: {at(seq, extra)}",
                     index=extra, expected=hi, seen=len(candidates))
        if need > 0 and len(counted) >= need:
            cursor = counted[need - 1] + 1
        elif need == 0 and counted:
            cursor = counted[0] + 1


def check_tool_calls(ctx: Context) -> None:
    seq = ctx.seq
    for p in tool_call_problems(seq, ctx.obs.terminal_kind):
        where = f" — {at(seq, p.index)}" if p.index is not None else ""
        ctx.fail(p.rule, p.message + where, index=p.index, expected=p.expected, seen=p.seen)


def check_usage(ctx: Context) -> None:
    seq = ctx.seq
    idx = [i for i, ev in enumerate(seq) if type_of(ev) == contract.EV_USAGE]
    if len(idx) > 1:
        ctx.fail("usage.at-most-once", f"{len(idx)} response.usage events; the stream carries "
                 f"one usage summary — second: {at(seq, idx[1])}", index=idx[1], expected=1,
                 seen=len(idx))


#: this suite's recommended usage (rule usage.shape): the part of the usage event's schema
#: that says it (the profile requires only that response.usage carries a usage: event.schema)
_RECOMMENDED_USAGE = "event.usage#/$defs/usage"


def check_usage_shape(ctx: Context) -> None:
    """This suite's recommended counts (``usage.shape``, a recommendation) in every usage
    object the endpoint sent: each ``response.usage`` event's, and a Response body's. The
    profile requires a ``usage`` (its §7 table) and names no count: its two examples (§8, §11)
    are two name sets, both with ``total_tokens``, which is what this suite recommends."""
    seq = ctx.seq
    seen: list[tuple[Any, int | None, str]] = [
        (ev.get("usage"), i, f"response.usage — {at(seq, i)}")
        for i, ev in enumerate(seq) if type_of(ev) == contract.EV_USAGE]
    response = response_body(ctx)
    if response is not None:
        seen.append((response.get("usage"), ctx.obs.terminal_index, "the Response body's usage"))
    sets = " or ".join("{" + ", ".join(n) + "}" for n in contract.USAGE_NAME_SETS)
    for usage, index, where in seen:
        if not isinstance(usage, dict):
            continue  # the profile's shape (event.schema, responses.body) judges that
        problems = validation.validate(_RECOMMENDED_USAGE, usage)
        if problems:
            ctx.fail("usage.shape", f"usage ({'; '.join(str(v) for v in problems)}): this "
                     f"suite recommends non-negative integer counts named {sets}, and only "
                     f"counts or objects beside them — {where}", index=index, expected=sets,
                     seen=usage)


def check_text_order(ctx: Context) -> None:
    """A single-output chat request's text deltas keep one index (a Response may stream
    several output items, each with its own)."""
    n = ctx.body.get("n")
    if ctx.case.operation != contract.OP_CHAT_COMPLETIONS_CREATE or (isinstance(n, int) and n > 1):
        return
    seq = ctx.seq
    first: tuple[int, Any] | None = None
    for i, ev in enumerate(ctx.obs.events):
        if type_of(ev) != contract.EV_OUTPUT_TEXT_DELTA:
            continue
        if first is None:
            first = (i, ev.get("index"))
        elif ev.get("index") != first[1]:
            ctx.fail("order.text-index", f"a single-output request's text deltas change index "
                     f"from {first[1]!r} (event #{first[0]}) — {at(seq, i)}", index=i,
                     expected=first[1], seen=ev.get("index"))
            return
