"""The fault-injection registry of the minimal endpoint: defect names and what each breaks.

Each defect is exactly one class of contract violation; with a defect switched on, every
other aspect of the endpoint keeps behaving correctly.  The names are a stable interface:
the conformance suite's own tests start the endpoint with ``--defect NAME`` and expect the
rule that names the violation to fail.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from input_faults import INPUT_DEFECTS

#: defect name -> one-line description (what the faulty endpoint does differently)
DEFECTS: Final = MappingProxyType(
    {
        "wrong-order": (
            "tool calls: the first response.tool_call.delta is sent before "
            "response.tool_call.started"
        ),
        "missing-terminal": (
            "streams its events, then never sends a terminal (the operation stays open)"
        ),
        "terminal-as-partial": (
            "a response.completed event is also sent as a PARTIAL_RESULT before the RESULT_PUSH"
        ),
        "two-terminals": (
            "after the RESULT_PUSH terminal a second terminal (RESULT_DROP_REASON) is sent "
            "for the same operation: a drop after a success push (a late delta cannot be "
            "sent: nnrp-py's server refuses a PARTIAL_RESULT after a terminal)"
        ),
        "late-event-after-cancel": (
            "never looks for a client cancel while streaming: keeps sending partials and a "
            "RESULT_PUSH after the cancel"
        ),
        "bad-error-body": "response.error bodies lack error.message",
        "wrong-usage-fields": (
            "response.usage counts named tokens_in/tokens_out: neither of the profile's name "
            "sets (input_tokens/output_tokens, prompt_tokens/completion_tokens)"
        ),
        "capability-lies": (
            "the capability document claims level 2 and responses.create, which are not served"
        ),
        "schema-invalid-event": "response.output_text.delta events lack the required index",
        "silence": "never answers any operation: no partial result, no terminal",
        "tool-call-args-mismatch": (
            "response.tool_call.completed.arguments differs from the concatenated deltas"
        ),
        "tool-call-no-completed": (
            "tool calls get started and deltas but never completed or error"
        ),
        "tool-calls-shared-index": (
            "a tool-call answer carries a second call (its own call_id and item_id) at the "
            "first call's index 0, in the stream and in the body"
        ),
        "body-tool-calls-disagree": (
            "the final body's message.tool_calls carry other arguments than the streamed "
            "tool-call events"
        ),
        "usage-twice": "response.usage is emitted twice in a stream",
        "wrong-error-code": (
            "a chat body without messages gets code invalid_request instead of missing_messages"
        ),
        "unsupported-op-accepted": (
            "responses.create is answered with a text stream instead of unsupported_operation"
        ),
        "ignores-cancel-hint": "nnrp.cancel_after_events is ignored: the stream completes",
        "ignores-timeout": "nnrp.timeout_ms is ignored: the operation runs to completion",
        "garbage-frames": (
            "one extra PARTIAL_RESULT in each stream whose body is not UTF-8 JSON"
        ),
        "sse-framing": 'partial result bodies are SSE framed ("data: {...}\\n\\n")',
        "flood": (
            "streams text deltas without end and never a terminal (stops by itself after "
            "200000 events or 60 s; a cancel still ends it)"
        ),
        "huge-event": "one response.output_text.delta of 4 MiB in each text stream",
        "non-streaming-bad-body": (
            "non-streaming response.completed body has no choices"
        ),
        "unknown-event-type": (
            "an event of an undefined type (response.reasoning.delta) in each stream"
        ),
        "cancel-wrong-drop": (
            "a client cancel is answered with RESULT_DROP_REASON reason BACKPRESSURE and an "
            "empty diagnostic instead of PEER_CANCELLED with response.cancelled"
        ),
        "accepts-bad-wire": (
            "requests with extra typed frames or a payload kind other than "
            "structured_event are served instead of rejected"
        ),
        "extension-misuse": (
            "text deltas carry an undeclared extension field (acme_trace) beside the "
            "standard ones"
        ),
        "profile-field-misplaced": (
            "text deltas carry a running usage object: the profile's field of response.usage "
            "on an event type that does not carry it"
        ),
        "critical-extension-unselected": (
            "text deltas carry acme_priority, the field of the critical extension acme.priority "
            "that manifest-critical-extension.json declares, though no request selected it"
        ),
        # operations in flight together on one session (neighbours.py)
        "cross-talk": (
            "with several streams open, one text delta of another stream is sent on an "
            "operation's frame (the other stream never sends it)"
        ),
        "swapped-terminals": (
            "with several streams open, the first to end gets another stream's final body "
            "and that stream gets its"
        ),
        "cancel-ends-others": (
            "a client cancel of one operation ends every open operation of the session "
            "cancelled"
        ),
        "error-ends-neighbours": (
            "an operation ending in a profile error ends every other open operation of the "
            "session with that error"
        ),
        # ... and across sessions: each session alone is right
        "frame-id-registry": (
            "the open streams are registered process-wide by frame id alone, which each "
            "session numbers anew: two sessions' operations with the same frame id read one "
            "queue, and one sends a text delta of the other"
        ),
        # Level 2 (--levels 2 or 3): responses.create
        "item-done-early": (
            "responses: the first output item's response.output_item.done comes right after "
            "its added, before the item's deltas"
        ),
        "delta-wrong-item": (
            "responses: the second text delta names another item_id than its output item"
        ),
        "tool-call-item-mismatch": (
            "responses: the tool_call.* events carry another call_id than their function_call "
            "item"
        ),
        "responses-no-usage": "responses: a successful stream sends no response.usage",
        "responses-chat-body": (
            "responses: response.completed carries a chat.completion instead of a Response object"
        ),
        "responses-item-id-mismatch": (
            "responses: the Response body's output items have other ids than the streamed items"
        ),
        "responses-empty-push": (
            "responses: a successful stream ends with an empty RESULT_PUSH instead of "
            "response.completed with the Response object"
        ),
        "responses-ignores-cancel": (
            "responses: never looks for a client cancel while a responses.create streams: "
            "keeps sending partials and a RESULT_PUSH after the cancel"
        ),
        # Level 3 (--levels 3): models.list, embeddings.create
        "models-omit-served": "models.list answers an empty list: the served model is missing",
        "models-bad-body": "models.list entries lack object and owned_by",
        "embeddings-missing-index": "embeddings: data[0] has no index",
        "embeddings-wrong-count": "embeddings: one embedding fewer than inputs (two for one)",
        "embeddings-unequal-dims": "embeddings: the last vector is one number shorter",
        "embeddings-reversed": (
            "embeddings: a batch is answered in reverse order (data[i] is the vector of the "
            "input n-1-i)"
        ),
        # requests no fixed recipe sends (input_faults.py): caught by generated requests
        **INPUT_DEFECTS,
    }
)


def check_defect(name: str | None) -> str | None:
    """Return ``name`` when it is a known defect (or None); raise ValueError naming the choices."""
    if name is None or name in DEFECTS:
        return name
    raise ValueError(f"unknown defect {name!r}; known: {', '.join(DEFECTS)}")
