"""An invalid-input case answered with an error about something else (``error.about-input``).

A recipe that sends an invalid input (an embeddings ``input`` that is a number, a chat body
without ``messages``) expects a request error about that input. The profile fixes no more
than a profile error body, so any error passes it; but an error about the **model** (its
``param`` is ``model``, its code names a model, or its message quotes the requested model)
says the endpoint refused the request before it looked at the input: the suite ran it
against a model the endpoint does not serve for the operation (docs/selection.md#models),
and the invalid input was never tested. That is a recommendation (shown, non-strict; a
failure with ``--nnrp-strict``), never a failure by default.

It applies to a case whose recipe expects an error terminal with a ``response.error`` of the
``invalid_request_error`` family and names no model code among the codes it accepts (the
backend-error recipes, which send a model nobody serves, expect a model error).
"""

from __future__ import annotations

from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.checks.context import Context, at, type_of
from nnrp_conformance.recipes import field_alternatives

#: codes that say the model, not the input, was refused
MODEL_CODES = frozenset(("unsupported_model", "model_not_found", "backend_error"))


def _expects_input_error(expect: Any) -> bool:
    """The recipe expects an invalid-request error and no model code."""
    if (expect or {}).get("terminal") != contract.TERMINAL_ERROR:
        return False
    families: set[Any] = set()
    codes: set[Any] = set()
    for entry in (expect or {}).get("events") or ():
        if entry.get("type") != contract.EV_ERROR:
            continue
        for fields in field_alternatives(entry) or ():
            err = fields.get("error") if isinstance(fields, dict) else None
            if isinstance(err, dict):
                families.add(err.get("type"))
                codes.add(err.get("code"))
    return families == {contract.ERR_TYPE_INVALID_REQUEST} and not codes & MODEL_CODES


def _about_model(err: dict[str, Any], model: Any) -> bool:
    code = err.get("code")
    message = err.get("message")
    return err.get("param") == "model" or (isinstance(code, str) and "model" in code) or (
        isinstance(model, str) and bool(model) and isinstance(message, str)
        and model in message)


def check_error_about_input(ctx: Context) -> None:
    if not _expects_input_error(ctx.case.expect):
        return
    body = ctx.case.envelope.get("body") if isinstance(ctx.case.envelope, dict) else None
    model = body.get("model") if isinstance(body, dict) else None
    for i, ev in enumerate(ctx.seq):
        err = ev.get("error") if type_of(ev) == contract.EV_ERROR else None
        if isinstance(err, dict) and _about_model(err, model):
            ctx.fail("error.about-input", f"the error is about the model {model!r}, not the "
                     f"invalid input the recipe sends: the input was never tested (is "
                     f"{model!r} served for {ctx.case.operation}? --nnrp-model "
                     f"{ctx.case.operation}=ID) — {at(ctx.seq, i)}", index=i,
                     expected="an error about the input", seen=err)
            return
