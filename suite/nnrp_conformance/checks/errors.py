"""Checks on error events: the body ``{type, code, message}`` (``error.body``), a code of
the recommended list in its fixed family, or the code the case maps to (``error.code``), and
another implementation's name for a code (``error.code-alias``, non-strict)."""

from __future__ import annotations

from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.checks.context import SPEC, Context, at, show, type_of


def _recommended_code(code: Any) -> Any:
    """The recommended code an alias stands for (the code itself when it is no alias)."""
    return contract.ERROR_CODE_ALIASES.get(code, code) if isinstance(code, str) else code


def _error_problems(err: Any) -> tuple[str | None, str | None]:
    """(body problem, code problem) of one error object; an alias is no problem here."""
    if not isinstance(err, dict):
        return f"error must be an object {{type, code, message}}, seen {show(err)}", None
    bad = [k for k in ("type", "code", "message")
           if not isinstance(err.get(k), str) or not err.get(k)]
    if bad:
        return f"error.{', error.'.join(bad)} must be non-empty strings", None
    code, typ = _recommended_code(err["code"]), err["type"]
    if code not in contract.ERROR_CODES:
        return None, f"error.code {err['code']!r} is neither in the recommended list " \
                     f"({', '.join(contract.ERROR_CODES)}) nor a documented alias " \
                     f"({', '.join(contract.ERROR_CODE_ALIASES)})"
    if contract.ERROR_CODES[code] != typ:
        return None, f"error.type {typ!r} is not the family of code {err['code']!r} " \
                     f"(expected {contract.ERROR_CODES[code]!r})"
    return None, None


def check_errors(ctx: Context) -> None:
    seq = ctx.seq
    for i, ev in enumerate(seq):
        if type_of(ev) not in (contract.EV_ERROR, contract.EV_TOOL_CALL_ERROR):
            continue
        body_problem, code_problem = _error_problems(ev.get("error"))
        if body_problem:
            ctx.fail("error.body", f"{body_problem} — {at(seq, i)}", index=i,
                     expected="{type, code, message}", seen=ev.get("error"),
                     spec=f"{SPEC} §5 errors")
        if code_problem:
            ctx.fail("error.code", f"{code_problem} — {at(seq, i)}", index=i,
                     expected=dict(contract.ERROR_CODES), seen=ev.get("error"),
                     spec=f"{SPEC} §5 errors (the type family is fixed)")
        code = (ev.get("error") or {}).get("code") if isinstance(ev.get("error"), dict) else None
        alias_of = contract.ERROR_CODE_ALIASES.get(code) if isinstance(code, str) else None
        if not body_problem and not code_problem and alias_of is not None:
            ctx.fail("error.code-alias", f"error.code {code!r} is another implementation's "
                     f"name; this suite recommends {alias_of!r}",
                     index=i, expected=alias_of, seen=code,
                     spec=f"{SPEC} §5 errors (the code list beyond the profile's is a "
                     "recommendation)")
    expected_codes: set[str] = {
        code
        for e in (ctx.case.expect or {}).get("events") or ()
        if e.get("type") == contract.EV_ERROR
        and isinstance(code := ((e.get("fields") or {}).get("error") or {}).get("code"), str)
    }
    seen_errors = [(i, ev) for i, ev in enumerate(seq) if type_of(ev) == contract.EV_ERROR]
    if expected_codes and seen_errors:
        i, ev = seen_errors[-1]
        code = (ev.get("error") or {}).get("code") if isinstance(ev.get("error"), dict) else None
        # an alias of the expected code is the alias rule's (non-strict); never for a code the
        # profile fixes, which aliases cannot name
        if code not in expected_codes and _recommended_code(code) not in expected_codes:
            # The recipe names the code its case must map to: another (valid) code is a wrong
            # mapping, reported under its own rule and not only as a sequence mismatch.
            ctx.fail("error.code", f"error.code {code!r} where this case maps to "
                     f"{' or '.join(sorted(expected_codes))} — {at(seq, i)}", index=i,
                     expected=sorted(expected_codes), seen=code,
                     spec=f"{SPEC} §5 errors (which failure maps to which code)")
    if ctx.obs.terminal_kind == contract.TERMINAL_ERROR and ctx.obs.terminal_event is None \
            and ctx.case.expected_terminal == contract.TERMINAL_ERROR:
        ctx.fail("error.body", "the error terminal carries no profile error body "
                 "(response.error)", expected=contract.EV_ERROR, seen=None,
                 spec=f"{SPEC} §3 failure placement, §5 errors")
