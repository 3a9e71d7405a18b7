"""The two tool-call defects judged across calls and against the final body: an answer's
tool-call events and its ``message.tool_calls``, changed the way each defect says.

``tool-calls-shared-index`` answers with a second call of the same function (its own
``call_id`` and ``item_id``) at the first call's ``index`` 0, in the stream and in the body
alike; ``body-tool-calls-disagree`` streams the call unchanged and puts other arguments in
the final body. Every other defect leaves the answer as it is.
"""

from __future__ import annotations

import json
from typing import Any

#: the defects this module implements
TOOL_FAULTS = ("tool-calls-shared-index", "body-tool-calls-disagree")


def apply(defect: str | None, partials: list[bytes | None],
          message: dict[str, Any]) -> tuple[list[bytes | None], dict[str, Any]]:
    """The tool-call answer (encoded events, the body's message) as ``defect`` sends it."""
    calls = message.get("tool_calls") or []
    if defect == "body-tool-calls-disagree" and calls:
        first = calls[0]
        changed = {**first, "function": {**first["function"], "arguments": '{"query": "elsewhere"}'}}
        return partials, {**message, "tool_calls": [changed, *calls[1:]]}
    if defect != "tool-calls-shared-index" or not calls:
        return partials, message
    # the same call again under new ids: the index stays 0, which the first call holds
    second: list[bytes | None] = []
    for raw in partials:
        event = json.loads(raw) if raw is not None else None
        if isinstance(event, dict) and isinstance(event.get("call_id"), str):
            event = {**event, "call_id": event["call_id"][:-1] + "1",
                     "item_id": event["item_id"][:-1] + "1"}
            second.append(json.dumps(event, separators=(",", ":")).encode("utf-8"))
    first = calls[0]
    twin = {**first, "id": first["id"][:-1] + "1"}
    return [*partials, *second], {**message, "tool_calls": [*calls, twin]}
