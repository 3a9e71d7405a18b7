"""What a request's ``n`` and JSON mode (chat's ``response_format``, a Response's
``text.format``) ask of its answer (issue 45 item 2):
OpenAI's request semantics, which the profile keeps for the body (design §1: it "preserves the
request and response semantics that existing AI applications already understand"; §6 keeps
the familiar fields) without restating them, and §3 puts sampling correctness out of its
scope, so each rule is a recommendation (docs/generation.md#oracles):

* ``choices.n``: a successful answer to a request with ``n`` = k carries k choices, indexed
  0 to k-1: the chat completion body's ``choices``, and the ``index`` of every streamed text
  delta. Refusing ``n`` above 1 is the endpoint's right (an error is not judged here; a
  refusal that names nothing is ``generated.refusal-unnamed``'s).
* ``response-format.json``: with ``{"type": "json_object"}``, every choice that finished on
  its own (``finish_reason`` ``stop``, in the OpenAI chunks or the body) holds text that
  parses as JSON: what streamed for its index, else the body's ``message.content``, as
  ``answer_reading.py`` reads every answer. Not judged: a request with ``stop`` (a stop
  sequence may cut the JSON short, and "the returned text will not contain the stop
  sequence"), a choice cut at its limit (``length``) or of unknown finish, a choice that
  called a tool or holds no text (a refusal has none). A Response asks for JSON mode with
  ``text: {"format": {"type": "json_object"}}`` (OpenAI's Responses API): a Response that
  completed (``status`` ``completed``, not ``incomplete`` at its limit) and called no function
  holds output text that parses as JSON, read as ``answer_reading.py`` reads it (the streamed
  text, else the body's ``output_text`` parts joined).

The other request fields are judged where they were before: ``stop`` by ``text.stop``
(``checks/generated.py``), ``max_tokens`` and ``max_completion_tokens`` by
``usage.max-tokens`` (``checks/relations.py``), ``stream_options.include_usage`` by the
expectation ``usage.include-usage`` that a generated recipe carries
(``generate/recipe_files.py``), ``tool_choice`` by ``checks/tool_choice.py``. Only a
successful answer the client read whole is judged. Called by :func:`checks.judge` like every
always-on check; nothing else judges these.
"""

from __future__ import annotations

import json
from typing import Any

from nnrp_conformance import contract
from nnrp_conformance.answer_reading import nnrp_choices
from nnrp_conformance.checks.context import Context, chat_completion_body, show, type_of

__all__ = ["REQUEST_FIELD_CHECKS"]


def _judged(ctx: Context, operation: str = contract.OP_CHAT_COMPLETIONS_CREATE) -> bool:
    """A successful answer of ``operation`` the client read whole (not cancelled by it, not
    flooded)."""
    obs = ctx.obs
    return ctx.case.operation == operation \
        and obs.terminal_kind == contract.TERMINAL_SUCCESS \
        and obs.cancelled_at_index is None and not obs.extra.get("flooded")


def _n(body: dict[str, Any]) -> int | None:
    n = body.get("n")
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else None


def check_n(ctx: Context) -> None:
    n = _n(ctx.body)
    if n is None or not _judged(ctx):
        return
    body = chat_completion_body(ctx)
    choices = body.get("choices") if body else None
    if isinstance(choices, list):
        indexes = [c.get("index") if isinstance(c, dict) else None for c in choices]
        numbers = sorted(i for i in indexes if isinstance(i, int) and not isinstance(i, bool))
        if len(indexes) != n or numbers != list(range(n)):
            ctx.fail("choices.n", f"n is {n} but the completion's choices have the indexes "
                     f"{show(indexes)}", index=ctx.obs.terminal_index,
                     expected=list(range(n)), seen=indexes)
            return
    for i, ev in enumerate(ctx.obs.events):
        index = ev.get("index") if type_of(ev) == contract.EV_OUTPUT_TEXT_DELTA else None
        if isinstance(index, int) and not 0 <= index < n:
            ctx.fail("choices.n", f"n is {n} but event #{i} streams text for choice {index}",
                     index=i, expected=f"an index in 0..{n - 1}", seen=index)
            return


def _json_object(form: Any) -> bool:
    return isinstance(form, dict) and form.get("type") == "json_object"


def _fails_json(ctx: Context, text: str, what: str) -> bool:
    """``response-format.json`` when ``text`` (``what``) does not parse as JSON."""
    try:
        json.loads(text)
    except ValueError as exc:
        ctx.fail("response-format.json", f"{what}, is not JSON ({exc}): {text[:200]!r}",
                 index=ctx.obs.terminal_index, expected="text that parses as JSON",
                 seen=text[:200])
        return True
    return False


def _json_mode(ctx: Context) -> tuple[str, str] | None:
    """The operation whose answer the request asks to be JSON, and the finish of a choice
    that ended on its own (None: no JSON mode, or a request with ``stop``, module doc)."""
    body = ctx.body
    form = body.get("text")
    if ctx.case.operation == contract.OP_RESPONSES_CREATE \
            and isinstance(form, dict) and _json_object(form.get("format")):
        return contract.OP_RESPONSES_CREATE, "completed"
    if ctx.case.operation == contract.OP_CHAT_COMPLETIONS_CREATE \
            and _json_object(body.get("response_format")) and not body.get("stop"):
        return contract.OP_CHAT_COMPLETIONS_CREATE, "stop"
    return None


def check_json_mode(ctx: Context) -> None:
    """Each choice that finished on its own holds JSON, read as ``answer_reading.py`` reads
    it (what streamed for its index, else the body's content): a choice that called a tool,
    or holds no text (a refusal has none), is not judged."""
    mode = _json_mode(ctx)
    if mode is None or not _judged(ctx, mode[0]):
        return
    operation, finished = mode
    for index, choice in nnrp_choices(operation, ctx.seq).items():
        text = choice.get("text")
        if choice.get("finish_reason") != finished or choice.get("tool_calls") \
                or not isinstance(text, str) or not text:
            continue
        what = f"response_format is json_object but choice {index!r}, finished on its own" \
            if operation == contract.OP_CHAT_COMPLETIONS_CREATE \
            else "text.format is json_object but the Response, completed"
        if _fails_json(ctx, text, what):
            return


REQUEST_FIELD_CHECKS = (check_n, check_json_mode)
