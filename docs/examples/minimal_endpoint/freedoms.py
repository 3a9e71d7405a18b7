"""The ``every-freedom`` variant's registry: each choice the three normative texts leave open,
taken the other way from this endpoint's default, with the sentence that leaves it open.

A freedom is a named, separately switchable change (``--variant every-freedom`` takes them all,
``--without NAME`` leaves one out, ``--freedom NAME`` takes only the named ones). Each entry
quotes its authority word for word from the profile design (a numbered section) or the
contract JSON (a member); tests/suite/test_every_freedom.py checks every quote against
``upstream/``. No freedom needed the data-plane spec: it fixes identities and layouts only.
A ``doubt`` says where the texts can be read both ways; docs/verdicts.md#freedoms lists them.
What each freedom does to an answer is ``freedom_acts.py``'s; this module holds only the facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

EVERY_FREEDOM: Final = "every-freedom"

DESIGN: Final = "profile design"
CONTRACT: Final = "contract JSON"


@dataclass(frozen=True)
class Freedom:
    """What the endpoint does instead of its default, and the sentence that allows it."""

    does: str
    document: str  #: DESIGN or CONTRACT
    section: str  #: a section number of the profile design, or a contract member path
    quote: str  #: verbatim from the document (whitespace may differ)
    doubt: str = ""  #: the other reading, when the texts can be read both ways


FREEDOMS: Final = MappingProxyType({
    "empty-terminal": Freedom(
        "a successful stream (chat or Responses) ends with an empty RESULT_PUSH (zero payload "
        "frames): no response.completed at all",
        DESIGN, "8.1", "An empty successful terminal result MAY carry zero payload frames."),
    "one-delta": Freedom(
        "a whole text answer travels as one response.output_text.delta (one per output item)",
        DESIGN, "3", "This profile does not define model quality, sampling correctness, "
        "tokenizer behavior, or tool execution policy."),
    "empty-first-delta": Freedom(
        "a text stream opens with a response.output_text.delta whose delta is \"\" (OpenAI's "
        "first chunk carries the role and no text)",
        DESIGN, "7", "Incremental text output."),
    "no-tool-call-deltas": Freedom(
        "a tool call streams started then completed, with no response.tool_call.delta",
        CONTRACT, "ordering.rules",
        "delta occurs zero or more times and arguments_delta concatenates in event order"),
    "interleaved-tool-calls": Freedom(
        "the events of two tool calls of one Responses answer interleave (only when no "
        "output-item events frame them)",
        DESIGN, "12", "Different calls may interleave, but order within one `call_id` is stable."),
    "own-error-families": Freedom(
        "its own error.type families: invalid_argument, unimplemented, internal, "
        "deadline_exceeded, resource_exhausted",
        CONTRACT, "toolCallEvents.response.tool_call.error.fields.error",
        '"type": { "type": "string", "minLength": 1 }'),
    "own-error-codes": Freedom(
        "its own error codes (messages_required, bad_request, no_such_operation, "
        "model_unavailable, …)",
        CONTRACT, "toolCallEvents.response.tool_call.error.fields.error",
        '"code": { "type": "string", "minLength": 1 }'),
    "own-cancel-reasons": Freedom(
        "its own response.cancelled reasons: \"\" for a client cancel, halted, going_away",
        DESIGN, "7", "Terminal cancellation notification when the adapter observes cancellation.",
        doubt="the table requires the field reason and gives it neither a type nor values; "
              "an empty string is a string (the contract JSON does not define the event)"),
    "usage-extra-field": Freedom(
        "usage objects (response.usage and final bodies) carry an extra nested field "
        "\"cost\": 0.001",
        DESIGN, "11", "Usage data is reported as profile payload data so existing clients can "
        "consume it"),
    "usage-no-total": Freedom(
        "response.usage has no total_tokens (the §11 example has it; the §7 table requires "
        "only usage)",
        DESIGN, "7", "Usage summary."),
    "usage-prompt-names": Freedom(
        "response.usage counts are named prompt_tokens/completion_tokens (the §8 example) "
        "instead of input_tokens/output_tokens (the §11 example)",
        DESIGN, "8", '"prompt_tokens": 12'),
    "no-output-items": Freedom(
        "Responses streams carry no response.output_item.added/done events",
        DESIGN, "7", "Mandatory Level 1 streaming event types:",
        doubt="the profile's event table has no output-item events; OpenAI's Responses stream "
              "has them, and §8 preserves OpenAI's response shape (of the body, not the stream)"),
    "responses-no-usage-event": Freedom(
        "Responses streams send no response.usage (the usage is in the final body, when there "
        "is one)",
        DESIGN, "7", "Final or near-final `PARTIAL_RESULT` event",
        doubt="response.usage is a 'mandatory Level 1 streaming event type' (a type every "
              "client must know, or an event every stream must carry?); a chat stream without "
              "stream_options.include_usage sends none, and OpenAI's Responses stream never does"),
    "openai-chunk": Freedom(
        "every streamed delta and tool-call event carries an openai_chunk object",
        DESIGN, "7", "Adapters may include the original OpenAI-compatible streaming chunk in "
        "`openai_chunk` for clients that need exact downstream replay."),
    "extra-diagnostics": Freedom(
        "every event carries a top-level diagnostics object of unknown fields",
        DESIGN, "11", "Unknown diagnostic fields must be ignored by clients unless the client "
        "explicitly opts into a stricter adapter-specific schema.",
        doubt="§7.1: 'an event shape outside this profile is a profile stream error'; an extra "
              "member may or may not make a shape 'outside'; §2 goal 5 leaves room for richer "
              "diagnostics"),
    "cancel-plain-drop": Freedom(
        "a client cancel is answered by a PEER_CANCELLED drop whose diagnostic is plain text: "
        "no response.cancelled (for odd operation ids; the others carry one, for "
        "own-cancel-reasons)",
        CONTRACT, "nnrpMapping.operationTerminalDelivery",
        '"operationTerminalDelivery": ["result_push", "result_drop", "error"]'),
    "cancel-hint-ignored": Freedom(
        "nnrp.cancel_after_events is not acted on (the profile never names it)",
        DESIGN, "6", "NNRP-specific policy and diagnostics hints."),
    "timeout-not-enforced": Freedom(
        "nnrp.timeout_ms is not enforced: the operation runs to its end",
        DESIGN, "9", "Timeouts are client policy, not an HTTP timeout clone."),
    "error-drop": Freedom(
        "a backend failure (a model it does not serve) ends with a CAPABILITY_MISMATCH "
        "drop whose diagnostic is plain text, no profile error body",
        DESIGN, "7", "NNRP error plus profile error object where available"),
    "invalid-submit-drop": Freedom(
        "an invalid submit (§6.1) ends with an NNRP drop without a profile body",
        DESIGN, "10", "Malformed NNRP frame"),
    "discovery-refused": Freedom(
        "nnrp.capabilities.get (an operation the profile never names) is answered like any "
        "operation it does not serve, with its own code unknown_operation",
        DESIGN, "13", "Adapters advertise profile support with a readable JSON capability "
        "document:"),
    "unstated-flags": Freedom(
        "the capability document (when it is served) states only the operation flags of the "
        "profile design's example: streaming, non_streaming, tool_calls",
        DESIGN, "13", '"tool_calls": true'),
    "overload-refusal": Freedom(
        "an operation past 3 in flight on one session is refused with a profile error body "
        "(server_error / overloaded, then its own family and code) before any output",
        DESIGN, "10", "Model overload or scheduling rejection"),
    "push-status": Freedom(
        "every terminal RESULT_PUSH has status_code 0, whatever its event",
        DESIGN, "2", "Avoid making HTTP status codes, SSE framing, or REST endpoint paths part "
        "of the protocol contract."),
})

#: freedoms considered and left out of the variant: what the texts say against them
NOT_TAKEN: Final = MappingProxyType({
    "cancel-answered-by-push": (
        "answering a client cancel with a RESULT_PUSH response.cancelled instead of a drop: "
        "allowed by §8.1's list of terminal documents, but nnrp-py refuses a push for a frame "
        "whose cancel the runtime has seen, so this endpoint cannot take it"),
    "chat-usage-omitted": (
        "no response.usage on a chat stream that asked for it (stream_options.include_usage): "
        "OpenAI's semantics, which §1 says the profile preserves, send it"),
    "non-streaming-empty-terminal": (
        "an empty RESULT_PUSH for a successful non-streaming answer: §8.1's MAY is written for "
        "an empty result, and §8 says a non-streaming request returns one logical result "
        "payload that preserves OpenAI's response shape"),
    "non-streaming-partials": (
        "partial results before a non-streaming answer's terminal: §8 'A non-streaming request "
        "returns one logical result payload'"),
})


def check_freedoms(names: list[str]) -> frozenset[str]:
    """``names`` as a set; raise ValueError naming the known freedoms on an unknown one."""
    unknown = [name for name in names if name not in FREEDOMS]
    if unknown:
        raise ValueError(f"unknown freedom(s) {', '.join(map(repr, unknown))}; known: "
                         f"{', '.join(FREEDOMS)}")
    return frozenset(names)


def chosen(variant: str | None, only: list[str], without: list[str]) -> frozenset[str]:
    """The freedoms a process takes: ``--freedom`` names, or all but ``--without`` ones with
    ``--variant every-freedom``; none otherwise."""
    if only and without:
        raise ValueError("--freedom and --without exclude each other")
    if only:
        return check_freedoms(only)
    if variant != EVERY_FREEDOM:
        if without:
            raise ValueError(f"--without needs --variant {EVERY_FREEDOM}")
        return frozenset()
    return frozenset(FREEDOMS) - check_freedoms(without)
