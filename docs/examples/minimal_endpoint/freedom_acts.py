"""What the ``every-freedom`` variant's freedoms (``freedoms.py``) do to an answer.

Three hooks, each a no-op without the freedom it serves:

* ``replan``: which events an operation streams and how it ends (one delta, an empty first
  delta, no tool-call deltas, interleaved calls, no output items, no Responses usage, an
  empty terminal);
* ``restyle``: how one event is written (families, codes, reasons, usage, openai_chunk,
  diagnostics, the capability document's flags);
* the NNRP-side choices the session and the sender ask about: ``takes`` (timeouts, cancel
  hints, discovery, overload, invalid submits), ``push_status``, ``cancel_diagnostic`` and
  ``error_drop``.
"""

from __future__ import annotations

import itertools
import json
from types import MappingProxyType
from typing import Any, Final

from envelope import OP_RESPONSES, Plan, encode
from variants import unstated_flags

#: profile family -> this endpoint's own (unsupported operations get "unimplemented")
FAMILIES: Final = MappingProxyType({
    "invalid_request_error": "invalid_argument", "server_error": "internal",
    "timeout_error": "deadline_exceeded",
})
#: code -> this endpoint's own
CODES: Final = MappingProxyType({
    "missing_messages": "messages_required", "invalid_request": "bad_request",
    "unsupported_operation": "no_such_operation", "backend_error": "model_unavailable",
    "invalid_schema_version": "schema_version_unsupported",
    "request_too_large": "payload_too_large", "context_length_exceeded": "too_many_tokens",
    "timeout": "deadline", "overloaded": "busy",
})
#: the default cancel reasons -> this endpoint's own
REASONS: Final = MappingProxyType({
    "client": "", "disconnect": "", "cancel_after_events": "halted", "shutdown": "going_away",
    "timeout": "",
})
#: operations in flight per session past which overload-refusal refuses (module doc)
OVERLOAD_CAP: Final = 3
DISCOVERY_CODE: Final = "unknown_operation"


def takes(config: Any, name: str) -> bool:
    return name in config.freedoms


# --- replan: which events, and how an operation ends -------------------------------------


def _type(event: dict[str, Any] | None) -> str:
    return str(event.get("type")) if event else ""


def _one_delta(events: list[dict[str, Any] | None]) -> list[dict[str, Any] | None]:
    """Consecutive text deltas of one item merged into the last step (the steps before it
    stay generation steps that emit nothing, so the answer takes as long as before)."""
    def text_of(event: dict[str, Any] | None) -> tuple[Any, ...] | None:
        """The text item an event is a delta of (None: not a text delta)."""
        if event is None or _type(event) != "response.output_text.delta":
            return None
        return (event.get("index"), event.get("item_id"))

    out: list[dict[str, Any] | None] = []
    for item, run in itertools.groupby(events, text_of):
        run_list = list(run)
        if item is None or len(run_list) < 2:
            out += run_list
            continue
        merged = dict(run_list[-1] or {})
        merged["delta"] = "".join(str((e or {}).get("delta", "")) for e in run_list)
        out += [None] * (len(run_list) - 1) + [merged]
    return out


def _interleave(events: list[dict[str, Any] | None]) -> list[dict[str, Any] | None]:
    """Two or more tool calls' events taken in turn; the other events after them."""
    calls: dict[str, list[dict[str, Any]]] = {}
    rest: list[dict[str, Any] | None] = []
    for event in events:
        if event is not None and _type(event).startswith("response.tool_call."):
            calls.setdefault(str(event.get("call_id")), []).append(event)
        else:
            rest.append(event)
    if len(calls) < 2 or any(_type(e).startswith("response.output_item.") for e in rest):
        return events
    turns = itertools.zip_longest(*calls.values())
    return [e for turn in turns for e in turn if e is not None] + rest


def replan(plan: Plan, config: Any) -> Plan:
    """``plan`` with the event freedoms taken (only streaming answers have events)."""
    if not config.freedoms:
        return plan  # untouched: a defect's partials may be a lazy, timed generator (flood)
    partials = list(plan.partials)
    plan.partials = partials
    if not any(p is not None for p in partials):
        return plan
    events: list[dict[str, Any] | None] = []
    for body in partials:
        try:
            events.append(None if body is None else json.loads(body))
        except ValueError:
            return plan  # not this endpoint's event (a defect's): left alone

    def dropped(name: str, types: tuple[str, ...], operation: str | None = None) -> None:
        if takes(config, name) and (operation is None or plan.operation == operation):
            events[:] = [None if _type(e) in types else e for e in events]

    dropped("no-output-items", ("response.output_item.added", "response.output_item.done"))
    dropped("responses-no-usage-event", ("response.usage",), OP_RESPONSES)
    dropped("no-tool-call-deltas", ("response.tool_call.delta",))
    if takes(config, "one-delta"):
        events[:] = _one_delta(events)
    if takes(config, "empty-first-delta"):
        first = next((e for e in events if _type(e) == "response.output_text.delta"), None)
        if first is not None:
            # before the generation steps that lead to the first text: sent at once
            at = events.index(first)
            while at > 0 and events[at - 1] is None:
                at -= 1
            events.insert(at, {**first, "delta": ""})
    if takes(config, "interleaved-tool-calls"):
        events[:] = _interleave(events)
    plan.partials = [None if e is None else encode(e) for e in events]
    if takes(config, "empty-terminal") and _type(plan.terminal) == "response.completed":
        plan.empty_terminal = True
    return plan


# --- restyle: how one event is written ----------------------------------------------------


def _error(err: dict[str, Any], freedoms: frozenset[str]) -> dict[str, Any]:
    out = dict(err)
    if "own-error-families" in freedoms:
        unimplemented = err.get("code") in ("unsupported_operation", DISCOVERY_CODE)
        out["type"] = "unimplemented" if unimplemented else (
            "resource_exhausted" if err.get("code") == "overloaded"
            else FAMILIES.get(str(err.get("type")), err.get("type")))
    if "own-error-codes" in freedoms:
        out["code"] = CODES.get(str(err.get("code")), err.get("code"))
    return out


def _usage(usage: dict[str, Any], freedoms: frozenset[str], event: bool) -> dict[str, Any]:
    out = dict(usage)
    if event and "usage-prompt-names" in freedoms:
        names = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}
        out = {names.get(k, k): v for k, v in out.items()}
    if event and "usage-no-total" in freedoms:
        out.pop("total_tokens", None)
    if "usage-extra-field" in freedoms:
        out["cost"] = 0.001
    return out


def restyle(event: dict[str, Any], freedoms: frozenset[str], operation_id: int) -> dict[str, Any]:
    """The event as the freedoms write it."""
    out = dict(event)
    kind = _type(out)
    if isinstance(out.get("error"), dict):
        out["error"] = _error(out["error"], freedoms)
    if kind == "response.cancelled" and "own-cancel-reasons" in freedoms:
        out["reason"] = REASONS.get(str(out.get("reason")), out.get("reason"))
    if kind == "response.usage" and isinstance(out.get("usage"), dict):
        out["usage"] = _usage(out["usage"], freedoms, event=True)
    body = out.get("body")
    if kind == "response.completed" and isinstance(body, dict) \
            and isinstance(body.get("usage"), dict):
        out["body"] = {**body, "usage": _usage(body["usage"], freedoms, event=False)}
    if "openai-chunk" in freedoms and (kind == "response.output_text.delta"
                                        or kind.startswith("response.tool_call.")):
        out["openai_chunk"] = {"object": "chat.completion.chunk", "choices": [
            {"index": out.get("index", 0), "delta": {"content": out.get("delta")}}]}
    if "unstated-flags" in freedoms:
        out = unstated_flags(out)
    if "extra-diagnostics" in freedoms:
        out["diagnostics"] = {"queue_delay_ms": 0, "acme_scheduler": {"slot": operation_id}}
    return out


# --- NNRP-side choices ----------------------------------------------------------------------


def push_status(config: Any, status: int) -> int:
    return 0 if takes(config, "push-status") else status


def cancel_diagnostic(config: Any, reason: str, operation_id: int) -> bytes | None:
    """cancel-plain-drop: a plain-text diagnostic instead of response.cancelled (None: not
    taken). Only for odd operation ids, so that the variant's other cancels still carry a
    response.cancelled for own-cancel-reasons to write."""
    if not takes(config, "cancel-plain-drop") or operation_id % 2 == 0:
        return None
    return f"operation cancelled ({reason or 'client'})".encode()


def error_drop(config: Any, event: dict[str, Any]) -> bytes | None:
    """error-drop: the plain-text diagnostic of the drop that ends a backend failure instead
    of its response.error (None: pushed as usual)."""
    err = event.get("error")
    if not takes(config, "error-drop") or not isinstance(err, dict) \
            or err.get("code") != "backend_error":
        return None
    return f"backend failure: {err.get('message', '')}".encode()


def discovery_refusal() -> Plan:
    """discovery-refused: the answer to nnrp.capabilities.get, as to any unknown operation."""
    event = {"type": "response.error", "error": {
        "type": "invalid_request_error", "code": DISCOVERY_CODE,
        "message": "operation 'nnrp.capabilities.get' is not served here"}}
    return Plan(partials=(), terminal=event, status=400)


def overload_limits(config: Any) -> tuple[int, str, str] | None:
    """overload-refusal: (cap, family, code) of admission.admit's refusal."""
    return (OVERLOAD_CAP, "server_error", "overloaded") if takes(config, "overload-refusal") \
        else None
