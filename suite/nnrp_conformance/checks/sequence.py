"""Checks on the order and content of the events: the recipe's ``expect.events`` matched with
one forward cursor (``sequence.expected``), tool-call ordering (``order.tool-call``,
``tool-call.arguments``), one usage summary (``usage.at-most-once``) and the named checks
``usage-shape`` (``usage.shape``) and ``text-order`` (``order.text-index``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.checks.context import SPEC, Context, at, json_contains, mismatch, type_of
from nnrp_conformance.tool_calls import RULE_ARGUMENTS, tool_call_problems


def _entry_count(entry: Mapping[str, Any]) -> int:
    if "min_count" in entry:
        return int(entry["min_count"])
    return 0 if entry.get("optional") else 1


def _with_recommended_code(ev: Any) -> Any:
    err = ev.get("error") if isinstance(ev, dict) else None
    if isinstance(err, dict) and err.get("code") in contract.ERROR_CODE_ALIASES:
        return {**ev, "error": {**err, "code": contract.ERROR_CODE_ALIASES[err["code"]]}}
    return ev


def check_expected(ctx: Context) -> None:
    obs = ctx.obs
    if obs.terminal_kind is None and (obs.timed_out or obs.extra.get("flooded")):
        return  # an unfinished stream: the timeout / flood finding is the verdict's cause
    # an alias code matches its recommended code here; error.code-alias reports it
    seq = [_with_recommended_code(ev) for ev in ctx.seq]
    cursor = 0
    for k, entry in enumerate(ctx.case.expect.get("events") or ()):
        typ = entry["type"]
        fields = entry.get("fields")
        need = _entry_count(entry)
        candidates = [i for i in range(cursor, len(seq)) if type_of(seq[i]) == typ]
        matching = [i for i in candidates if fields is None or json_contains(seq[i], fields)]
        label = f"expect.events[{k}] ({typ}" + (", optional" if entry.get("optional") else "") \
            + ")"
        spec = f"{SPEC} §8 recipe expectations"
        if len(matching) < need or (candidates and not matching):
            if candidates and fields is not None and not matching:
                first = candidates[0]
                ctx.fail("sequence.expected",
                         f"{label}: {typ} at or after event #{cursor} does not contain the "
                         f"expected fields: {mismatch(seq[first], fields)} — {at(seq, first)}",
                         index=first, expected=fields, seen=seq[first], spec=spec)
            else:
                earlier = [i for i in range(cursor) if type_of(seq[i]) == typ]
                where = (f"; {len(earlier)} earlier one(s) out of order (first at #{earlier[0]})"
                         if earlier else "")
                ctx.fail("sequence.expected",
                         f"{label}: expected at least {need} {typ} at or after event #{cursor}, "
                         f"seen {len(matching)}{where}; observed types: "
                         f"{[type_of(e) for e in seq]}",
                         index=cursor if cursor < len(seq) else None,
                         expected={"type": typ, "min_count": need, "fields": fields},
                         seen=len(matching), spec=spec)
        hi = entry.get("max_count")
        if hi is not None and len(candidates) > hi:
            extra = candidates[hi]
            ctx.fail("sequence.expected",
                     f"{label}: at most {hi} {typ} expected at or after event #{cursor}, "
                     f"seen {len(candidates)} — first extra: {at(seq, extra)}",
                     index=extra, expected=hi, seen=len(candidates), spec=spec)
        if need > 0 and len(matching) >= need:
            cursor = matching[need - 1] + 1
        elif need == 0 and matching:
            cursor = matching[0] + 1


def check_tool_calls(ctx: Context) -> None:
    seq = ctx.seq
    spec = f"{SPEC} §4 tool-call ordering"
    for p in tool_call_problems(seq, ctx.obs.terminal_kind):
        where = f" — {at(seq, p.index)}" if p.index is not None else ""
        ctx.fail(p.rule, p.message + where, index=p.index, expected=p.expected, seen=p.seen,
                 spec=spec + (" (arguments = concatenation of the deltas)"
                              if p.rule == RULE_ARGUMENTS else ""))


def check_usage(ctx: Context) -> None:
    seq = ctx.seq
    idx = [i for i, ev in enumerate(seq) if type_of(ev) == contract.EV_USAGE]
    if len(idx) > 1:
        ctx.fail("usage.at-most-once", f"{len(idx)} response.usage events; the stream carries "
                 f"one usage summary — second: {at(seq, idx[1])}", index=idx[1], expected=1,
                 seen=len(idx), spec=f"{SPEC} §4 events (D §7: the usage summary, final or "
                 "near-final)")


def _token_count(value: Any) -> bool:
    """A non-negative integer (``true`` is not ``1``)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_usage_shape(ctx: Context) -> None:
    seq = ctx.seq
    spec = f"{SPEC} §4 response.usage"
    for i, ev in enumerate(seq):
        if type_of(ev) != contract.EV_USAGE:
            continue
        usage = ev.get("usage")
        bad = [k for k in ("input_tokens", "output_tokens", "total_tokens")
               if not (isinstance(usage, dict) and _token_count(usage.get(k)))]
        if bad:
            ctx.fail("usage.shape", f"usage.{', usage.'.join(bad)} must be non-negative "
                     f"integers — {at(seq, i)}", index=i,
                     expected="{input_tokens, output_tokens, total_tokens}", seen=usage,
                     spec=spec)


def check_text_order(ctx: Context) -> None:
    n = ctx.body.get("n")
    if isinstance(n, int) and n > 1:
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
                     expected=first[1], seen=ev.get("index"),
                     spec=f"{SPEC} §4 output_text.delta index (position in the output)")
            return
