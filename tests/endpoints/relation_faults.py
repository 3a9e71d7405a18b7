"""Faulty variants of the example endpoint, one per relation rule (docs/verdicts.md#relations).

Each fault breaks one relation between fields and keeps every event schema-valid, ordered and
otherwise consistent, so that only the rule judging that relation can catch it. It imports
nothing from the suite: it wraps the example endpoint's one hook through which every event body
passes (``Session.restyled``) and then runs the example endpoint's own ``main``.

    python tests/endpoints/relation_faults.py FAULT --listen 127.0.0.1:0 [endpoint options]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "examples" /
                       "minimal_endpoint"))

import endpoint  # the example endpoint, not the suite


def _usage_arithmetic(ev: dict[str, Any], op: Any) -> None:
    # both totals off by one: the streamed and the body usage still agree with each other
    if ev.get("type") == "response.usage":
        ev["usage"]["total_tokens"] += 1
    body = ev.get("body") if ev.get("type") == "response.completed" else None
    if isinstance(body, dict) and isinstance(body.get("usage"), dict):
        body["usage"]["total_tokens"] += 1


def _usage_agreement(ev: dict[str, Any], op: Any) -> None:
    # the streamed usage counts one more input token, arithmetic intact
    if ev.get("type") == "response.usage":
        ev["usage"]["input_tokens"] += 1
        ev["usage"]["total_tokens"] += 1


def _text_agreement(ev: dict[str, Any], op: Any) -> None:
    body = ev.get("body") if ev.get("type") == "response.completed" else None
    for choice in (body or {}).get("choices") or ():
        message = choice.get("message") or {}
        if isinstance(message.get("content"), str) and message["content"]:
            message["content"] += " (edited)"


def _tool_call_identity(ev: dict[str, Any], op: Any) -> None:
    if ev.get("type") == "response.tool_call.delta":
        ev["item_id"] = f"{ev['item_id']}-moved"


#: id(operation) -> (the operation, kept so its id is never reused; its number)
_NUMBERS: dict[int, tuple[Any, int]] = {}


def _number(op: Any) -> int:
    return _NUMBERS.setdefault(id(op), (op, len(_NUMBERS) + 1))[1]


def _completion_identity(ev: dict[str, Any], op: Any) -> None:
    # every text delta carries its "raw chunk"; the chunks agree with each other, but name
    # another completion than the final body
    # (an id of this operation's own: the same id in two operations' answers would be
    # answer.id-reused, another rule's fault)
    if ev.get("type") == "response.output_text.delta":
        ev["openai_chunk"] = {
            "id": f"chatcmpl-replayed-{_number(op)}", "object": "chat.completion.chunk",
            "created": 1,
            "choices": [{"index": ev["index"], "delta": {"content": ev["delta"]},
                         "finish_reason": None}],
        }


def _finish_reason_tool_calls(ev: dict[str, Any], op: Any) -> None:
    # a text answer that says it finished by calling a tool
    body = ev.get("body") if ev.get("type") == "response.completed" else None
    for choice in (body or {}).get("choices") or ():
        if isinstance((choice.get("message") or {}).get("content"), str):
            choice["finish_reason"] = "tool_calls"


def _max_tokens(ev: dict[str, Any], op: Any) -> None:
    # one completion token more than generated (the endpoint generates max_tokens when set),
    # in both usages, totals and the two usages still consistent
    if ev.get("type") == "response.usage":
        ev["usage"]["output_tokens"] += 1
        ev["usage"]["total_tokens"] += 1
    body = ev.get("body") if ev.get("type") == "response.completed" else None
    if isinstance(body, dict) and isinstance(body.get("usage"), dict):
        body["usage"]["completion_tokens"] += 1
        body["usage"]["total_tokens"] += 1


def _capability_behaviour(ev: dict[str, Any], op: Any) -> None:
    # answers name a model the endpoint's capability document does not list
    body = ev.get("body") if ev.get("type") == "response.completed" else None
    if isinstance(body, dict) and body.get("object") == "chat.completion":
        body["model"] = f"{body['model']}-2026-12-04"


#: fault -> (how it corrupts one event in place, the one rule that must catch it)
FAULTS = {
    "usage-arithmetic": (_usage_arithmetic, "usage.arithmetic"),
    "usage-agreement": (_usage_agreement, "usage.agreement"),
    "text-agreement": (_text_agreement, "text.agreement"),
    "tool-call-identity": (_tool_call_identity, "tool-call.identity"),
    "completion-identity": (_completion_identity, "completion.identity"),
    "finish-reason-tool-calls": (_finish_reason_tool_calls, "finish-reason.tool-calls"),
    "max-tokens": (_max_tokens, "usage.max-tokens"),
    "capability-behaviour": (_capability_behaviour, "capability.behaviour"),
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in FAULTS:
        print(f"usage: relation_faults.py FAULT [endpoint options]; FAULT is one of "
              f"{', '.join(FAULTS)}", file=sys.stderr)
        return 2
    corrupt = FAULTS[argv[0]][0]
    original = endpoint.Session.restyled

    def restyled(self: Any, op: Any, body: bytes) -> bytes:
        body = original(self, op, body)
        try:
            event = json.loads(body)
        except ValueError:
            return body
        if not isinstance(event, dict):
            return body
        corrupt(event, op)
        return json.dumps(event, separators=(",", ":")).encode()

    endpoint.Session.restyled = restyled  # type: ignore[method-assign]
    return endpoint.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
