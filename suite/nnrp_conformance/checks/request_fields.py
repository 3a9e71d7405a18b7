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
  its own (``finish_reason`` ``stop``, in the body or the OpenAI chunks) holds text that
  parses as JSON: the body's ``message.content``, else the streamed text of its index. Not
  judged: a request with ``stop`` (a stop sequence may cut the JSON short, and "the returned
  text will not contain the stop sequence"), a choice cut at its limit (``length``) or of
  unknown finish, a choice that called a tool. A Response asks for JSON mode with
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


def _finishes(ctx: Context, body: dict[str, Any] | None) -> dict[Any, str]:
    """Each choice index's finish_reason: the body's, else the last OpenAI chunk's."""
    out: dict[Any, str] = {}
    chunks = [ev.get("openai_chunk") for ev in ctx.obs.events if isinstance(ev, dict)]
    for holder in [*chunks, body]:
        for choice in (holder.get("choices") or ()) if isinstance(holder, dict) else ():
            if isinstance(choice, dict) and isinstance(choice.get("finish_reason"), str):
                out[choice.get("index")] = choice["finish_reason"]
    return out


def _texts(ctx: Context, body: dict[str, Any] | None) -> dict[Any, str | None]:
    """Each choice index's text: the body's message.content (None: no text, or a tool call),
    else what streamed for it."""
    texts: dict[Any, str | None] = {}
    for ev in ctx.obs.events:
        if type_of(ev) == contract.EV_OUTPUT_TEXT_DELTA and isinstance(ev.get("delta"), str):
            texts[ev.get("index")] = (texts.get(ev.get("index")) or "") + ev["delta"]
    for choice in (body.get("choices") or ()) if body else ():
        if isinstance(choice, dict):
            message = choice.get("message")
            message = message if isinstance(message, dict) else {}
            content = message.get("content")
            texts[choice.get("index")] = None if message.get("tool_calls") \
                else content if isinstance(content, str) else None
    return texts


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


def _check_response_json_mode(ctx: Context) -> None:
    """A Response in JSON mode (module doc)."""
    text = ctx.body.get("text")
    if not (isinstance(text, dict) and _json_object(text.get("format"))) \
            or not _judged(ctx, contract.OP_RESPONSES_CREATE):
        return
    answer = nnrp_choices(contract.OP_RESPONSES_CREATE, ctx.seq).get(0) or {}
    said = answer.get("text")
    if answer.get("finish_reason") != "completed" or answer.get("tool_calls") \
            or not isinstance(said, str):
        return
    _fails_json(ctx, said, "text.format is json_object but the Response, completed")


def check_json_mode(ctx: Context) -> None:
    _check_response_json_mode(ctx)
    if not _json_object(ctx.body.get("response_format")) \
            or ctx.body.get("stop") or not _judged(ctx):
        return
    body = chat_completion_body(ctx)
    finishes = _finishes(ctx, body)
    for index, text in _texts(ctx, body).items():
        if text is None or finishes.get(index) != "stop":
            continue
        if _fails_json(ctx, text, f"response_format is json_object but choice {index!r}, "
                       "finished on its own"):
            return


REQUEST_FIELD_CHECKS = (check_n, check_json_mode)
