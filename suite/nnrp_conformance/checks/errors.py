"""Checks on error events: the body ``{type, code, message}`` (``error.body``, the profile's),
the exact code upstream's recipe expects for the case (``error.code``, tag ``upstream``: no
normative document fixes a code, so another code is non-strict; upstream's runner would fail
it), and this suite's recommendations: its code list, each code's family and the code it maps
a case to (``error.code-choice``), another implementation's name for a code
(``error.code-alias``)."""

from __future__ import annotations

from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.checks.context import Context, at, show, type_of
from nnrp_conformance.recipes import field_alternatives


def _recommended_code(code: Any) -> Any:
    """The recommended code an alias stands for (the code itself when it is no alias)."""
    return contract.ERROR_CODE_ALIASES.get(code, code) if isinstance(code, str) else code


def _body_problem(err: Any) -> str | None:
    """What the profile fixes of an error object: ``{type, code, message}``, non-empty strings
    (its §10 shape, and the contract's tool-call error: required type, code, message)."""
    if not isinstance(err, dict):
        return f"error must be an object {{type, code, message}}, seen {show(err)}"
    bad = [k for k in ("type", "code", "message")
           if not isinstance(err.get(k), str) or not err.get(k)]
    return f"error.{', error.'.join(bad)} must be non-empty strings" if bad else None


def _choice_problem(err: dict[str, Any]) -> str | None:
    """This project's code list and each code's family (a recommendation): an unknown code,
    or a known one in another family; an alias is error.code-alias's."""
    code, typ = _recommended_code(err["code"]), err["type"]
    if code not in contract.ERROR_CODES:
        return f"error.code {err['code']!r} is not in this suite's recommended list " \
               f"({', '.join(contract.ERROR_CODES)})"
    if code in contract.FAMILY_OPEN_ERROR_CODES:
        return None  # the profile fixes the code but no family: every family is a reading
    if contract.ERROR_CODES[code] != typ:
        return f"error.type {typ!r} is not the family this suite recommends for code " \
               f"{err['code']!r} ({contract.ERROR_CODES[code]!r})"
    return None


def _expected_codes(expect: Any) -> set[str]:
    """The codes the recipe's response.error expectations accept (each of an entry's
    ``fields_any_of`` alternatives names one)."""
    codes: set[str] = set()
    for entry in (expect or {}).get("events") or ():
        if entry.get("type") != contract.EV_ERROR:
            continue
        for fields in field_alternatives(entry) or ():
            err = fields.get("error") if isinstance(fields, dict) else None
            if isinstance(err, dict) and isinstance(err.get("code"), str):
                codes.add(err["code"])
    return codes


def check_errors(ctx: Context) -> None:
    seq = ctx.seq
    for i, ev in enumerate(seq):
        if type_of(ev) not in (contract.EV_ERROR, contract.EV_TOOL_CALL_ERROR):
            continue
        err = ev.get("error")
        body_problem = _body_problem(err)
        if body_problem:
            ctx.fail("error.body", f"{body_problem} — {at(seq, i)}", index=i,
                     expected="{type, code, message}", seen=err)
            continue
        assert isinstance(err, dict)
        code = err["code"]
        alias_of = contract.ERROR_CODE_ALIASES.get(code)
        choice = _choice_problem(err)
        if choice:
            ctx.fail("error.code-choice", f"{choice} — {at(seq, i)}", index=i,
                     expected=dict(contract.ERROR_CODES), seen=err)
        elif alias_of is not None:
            ctx.fail("error.code-alias", f"error.code {code!r} is another implementation's "
                     f"name; this suite recommends {alias_of!r}",
                     index=i, expected=alias_of, seen=code)
    expected_codes = _expected_codes(ctx.case.expect)
    seen_errors = [(i, ev) for i, ev in enumerate(seq) if type_of(ev) == contract.EV_ERROR]
    if expected_codes and seen_errors:
        i, ev = seen_errors[-1]
        code = (ev.get("error") or {}).get("code") if isinstance(ev.get("error"), dict) else None
        # an alias of the expected code is the alias rule's (non-strict); never for a code the
        # profile fixes, which aliases cannot name
        if code not in expected_codes and _recommended_code(code) not in expected_codes:
            # No normative document fixes a code: the code a recipe of ours expects is this
            # suite's choice for the case; one another recipe (upstream's) expects is theirs.
            recipe = getattr(ctx.case, "recipe", None)
            want = " or ".join(repr(c) for c in sorted(expected_codes))
            if recipe is None or recipe.is_ours:
                ctx.fail("error.code-choice", f"error.code {code!r} where this case maps to "
                         f"{want} — {at(seq, i)}", index=i, expected=sorted(expected_codes),
                         seen=code)
            else:
                ctx.fail("error.code", f"upstream's recipe {recipe.path.name} expects "
                         f"error.code {want}, seen {code!r}; no normative profile document "
                         f"fixes a code (upstream's runner would fail this) — {at(seq, i)}",
                         index=i, expected=sorted(expected_codes), seen=code,
                         about=recipe.path.name)
    expects_body = any(e.get("type") == contract.EV_ERROR
                       for e in (ctx.case.expect or {}).get("events") or ())
    if ctx.obs.terminal_kind == contract.TERMINAL_ERROR and ctx.obs.terminal_event is None \
            and ctx.case.expected_terminal == contract.TERMINAL_ERROR and not expects_body:
        # the profile: "NNRP error plus profile error object where available" (§7); a
        # recipe's own response.error expectation reports it under its authority instead
        ctx.fail("error.body-missing", "the error terminal carries no profile error body "
                 "(response.error)", expected=contract.EV_ERROR, seen=None)
