"""The `openai-compatible/1` profile contract as constants: the one source of truth.

Every other module (schemas loader, planner, checks, the reference adapter's profile
module) reads names, codes and wire numbers from here; nothing restates them.
The JSON Schema files under ``schemas/`` carry the same closed lists and a unit test
keeps the two in agreement.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

PROFILE: Final = "openai-compatible"
SCHEMA_VERSION: Final = "openai-compatible/1"
SCHEMA_BASE_URI: Final = "https://nnrp-conformance.dev/schemas/openai-compatible/1/"

# --- levels and operations -------------------------------------------------------------
LEVEL_CHAT: Final = 1
LEVEL_RESPONSES: Final = 2
LEVEL_DISCOVERY: Final = 3
LEVELS: Final = (LEVEL_CHAT, LEVEL_RESPONSES, LEVEL_DISCOVERY)

OP_CHAT_COMPLETIONS_CREATE: Final = "chat.completions.create"
OP_RESPONSES_CREATE: Final = "responses.create"
OP_MODELS_LIST: Final = "models.list"
OP_EMBEDDINGS_CREATE: Final = "embeddings.create"

#: operation name -> the compatibility level it belongs to
OPERATION_LEVELS: Final = MappingProxyType(
    {
        OP_CHAT_COMPLETIONS_CREATE: LEVEL_CHAT,
        OP_RESPONSES_CREATE: LEVEL_RESPONSES,
        OP_MODELS_LIST: LEVEL_DISCOVERY,
        OP_EMBEDDINGS_CREATE: LEVEL_DISCOVERY,
    }
)
PROFILE_OPERATIONS: Final = tuple(OPERATION_LEVELS)

#: The discovery operation this project defines (ours: the profile leaves how a document is fetched open, §13): it returns the capability
#: document as the body of a ``response.completed`` terminal. It belongs to no level and is
#: never listed in a capability document's ``operations``.
OP_CAPABILITIES_GET: Final = "nnrp.capabilities.get"
#: The session authentication operation this project defines (ours: nnrp-py's native carriers
#: cannot carry NNRP's CLIENT_HELLO auth block, docs/sdk-defects.md#auth-block). A client
#: sends it first on a session, the key in the envelope's ``nnrp.api_key``; an endpoint that
#: requires a key ends every other operation of a session that has not authenticated with
#: ``invalid_api_key``. Like discovery, it belongs to no level and is never listed.
OP_SESSION_AUTHENTICATE: Final = "nnrp.session.authenticate"
#: where the key travels in that operation's envelope (``nnrp`` members are never forwarded
#: into the OpenAI body, profile §6)
NNRP_API_KEY_FIELD: Final = "api_key"

# --- events ------------------------------------------------------------------------------
EV_OUTPUT_TEXT_DELTA: Final = "response.output_text.delta"
EV_TOOL_CALL_STARTED: Final = "response.tool_call.started"
EV_TOOL_CALL_DELTA: Final = "response.tool_call.delta"
EV_TOOL_CALL_COMPLETED: Final = "response.tool_call.completed"
EV_TOOL_CALL_ERROR: Final = "response.tool_call.error"
EV_USAGE: Final = "response.usage"
#: Level 2 (docs/levels.md#level2-events): the output-item lifecycle of a Responses stream and
#: the reasoning text of models that reason
EV_OUTPUT_ITEM_ADDED: Final = "response.output_item.added"
EV_OUTPUT_ITEM_DONE: Final = "response.output_item.done"
EV_REASONING_TEXT_DELTA: Final = "response.reasoning_text.delta"
EV_COMPLETED: Final = "response.completed"
EV_ERROR: Final = "response.error"
EV_CANCELLED: Final = "response.cancelled"

TOOL_CALL_EVENT_TYPES: Final = (
    EV_TOOL_CALL_STARTED,
    EV_TOOL_CALL_DELTA,
    EV_TOOL_CALL_COMPLETED,
    EV_TOOL_CALL_ERROR,
)
OUTPUT_ITEM_EVENT_TYPES: Final = (EV_OUTPUT_ITEM_ADDED, EV_OUTPUT_ITEM_DONE)
#: events that travel as PARTIAL_RESULT frames
PARTIAL_EVENT_TYPES: Final = (
    EV_OUTPUT_TEXT_DELTA,
    *TOOL_CALL_EVENT_TYPES,
    EV_USAGE,
    *OUTPUT_ITEM_EVENT_TYPES,
    EV_REASONING_TEXT_DELTA,
)
#: events that end the operation (RESULT_PUSH body, or a drop's diagnostic)
TERMINAL_EVENT_TYPES: Final = (EV_COMPLETED, EV_ERROR, EV_CANCELLED)
EVENT_TYPES: Final = (*PARTIAL_EVENT_TYPES, *TERMINAL_EVENT_TYPES)

#: the event types of the profile's own event table (profile design §7, the public contract's
#: tool-call events): the fields their schemas name are the profile's event fields (see
#: validation.profile_event_fields). Level 2's item and reasoning events are this project's.
PROFILE_TABLE_EVENT_TYPES: Final = (
    EV_OUTPUT_TEXT_DELTA,
    *TOOL_CALL_EVENT_TYPES,
    EV_USAGE,
    EV_COMPLETED,
    EV_ERROR,
    EV_CANCELLED,
)

#: event type -> its schema file's name (without ``.schema.json``)
EVENT_SCHEMA_NAMES: Final = MappingProxyType(
    {
        EV_OUTPUT_TEXT_DELTA: "event.output_text.delta",
        EV_TOOL_CALL_STARTED: "event.tool_call.started",
        EV_TOOL_CALL_DELTA: "event.tool_call.delta",
        EV_TOOL_CALL_COMPLETED: "event.tool_call.completed",
        EV_TOOL_CALL_ERROR: "event.tool_call.error",
        EV_USAGE: "event.usage",
        EV_OUTPUT_ITEM_ADDED: "event.output_item.added",
        EV_OUTPUT_ITEM_DONE: "event.output_item.done",
        EV_REASONING_TEXT_DELTA: "event.reasoning_text.delta",
        EV_COMPLETED: "event.completed",
        EV_ERROR: "event.error",
        EV_CANCELLED: "event.cancelled",
    }
)

# --- terminals ---------------------------------------------------------------------------
TERMINAL_SUCCESS: Final = "success"
TERMINAL_ERROR: Final = "error"
TERMINAL_CANCELLED: Final = "cancelled"
TERMINALS: Final = (TERMINAL_SUCCESS, TERMINAL_ERROR, TERMINAL_CANCELLED)
#: the profile terminal event that goes with each terminal kind
TERMINAL_EVENT_FOR: Final = MappingProxyType(
    {TERMINAL_SUCCESS: EV_COMPLETED, TERMINAL_ERROR: EV_ERROR, TERMINAL_CANCELLED: EV_CANCELLED}
)

# --- errors ------------------------------------------------------------------------------
ERR_TYPE_INVALID_REQUEST: Final = "invalid_request_error"
ERR_TYPE_SERVER: Final = "server_error"
ERR_TYPE_RATE_LIMIT: Final = "rate_limit_error"
ERR_TYPE_TIMEOUT: Final = "timeout_error"
ERROR_TYPES: Final = (
    ERR_TYPE_INVALID_REQUEST,
    ERR_TYPE_SERVER,
    ERR_TYPE_RATE_LIMIT,
    ERR_TYPE_TIMEOUT,
)

#: The closed list of profile error codes, each with its fixed ``error.type`` family.
#: The first four are upstream's, kept exactly; the rest are what Level 1 needs.
ERROR_CODES: Final = MappingProxyType(
    {
        "missing_messages": ERR_TYPE_INVALID_REQUEST,
        "unsupported_operation": ERR_TYPE_INVALID_REQUEST,
        "backend_error": ERR_TYPE_SERVER,
        "unsupported_model": ERR_TYPE_INVALID_REQUEST,
        "invalid_request": ERR_TYPE_INVALID_REQUEST,
        "invalid_schema_version": ERR_TYPE_INVALID_REQUEST,
        "request_too_large": ERR_TYPE_INVALID_REQUEST,
        "context_length_exceeded": ERR_TYPE_INVALID_REQUEST,
        "overloaded": ERR_TYPE_RATE_LIMIT,
        "timeout": ERR_TYPE_TIMEOUT,
        "internal_error": ERR_TYPE_SERVER,
        "tool_call_parse_error": ERR_TYPE_SERVER,
        "invalid_api_key": ERR_TYPE_INVALID_REQUEST,
    }
)
#: The codes upstream's recipes expect (chat-invalid-body.json, chat-unsupported-operation.json,
#: chat-backend-error.json): no normative profile document fixes any code, so another code
#: there is non-strict (rule error.code, tag upstream), failed only with --strict; no alias
#: stands for them. The rest of ERROR_CODES is this project's recommendation.
UPSTREAM_RECIPE_ERROR_CODES: Final = ("missing_messages", "unsupported_operation",
                                      "backend_error")
#: the two names the profile's examples give a usage's counts (input, output, total): its
#: §11 example (input_tokens / output_tokens) and its §8 example, OpenAI's chat names
#: (prompt_tokens / completion_tokens). The profile requires a usage and names no count: these
#: are this suite's recommendation (usage.shape, event.usage's ``$defs/usage``), either set.
USAGE_NAME_SETS: Final = (
    ("input_tokens", "output_tokens", "total_tokens"),
    ("prompt_tokens", "completion_tokens", "total_tokens"),
)
#: codes upstream's recipe names without a family: any error.type is a reading of the
#: profile; the family above is this suite's recommendation
FAMILY_OPEN_ERROR_CODES: Final = ("backend_error",)
#: Other implementations' names for a recommended code (alias -> recommended code): the
#: upstream vLLM NNRP adapter's (NagareWorks/vllm-nnrp-adapter). An alias is ``non-strict``;
#: its ``error.type`` must still be the recommended code's family. Never maps to a
#: code upstream's recipes expect.
ERROR_CODE_ALIASES: Final = MappingProxyType(
    {
        "unsupported_schema_version": "invalid_schema_version",
        "invalid_body": "invalid_request",
        "invalid_submit_body": "invalid_request",
        "invalid_request_id": "invalid_request",
        "invalid_nnrp_policy": "invalid_request",
        "missing_model": "invalid_request",
        "request_timeout": "timeout",
        "backend_overload": "overloaded",
        "scheduler_rejected": "overloaded",
    }
)
ERR_MISSING_MESSAGES: Final = "missing_messages"
ERR_UNSUPPORTED_OPERATION: Final = "unsupported_operation"
ERR_BACKEND_ERROR: Final = "backend_error"
ERR_UNSUPPORTED_MODEL: Final = "unsupported_model"
ERR_INVALID_REQUEST: Final = "invalid_request"
ERR_INVALID_SCHEMA_VERSION: Final = "invalid_schema_version"
ERR_REQUEST_TOO_LARGE: Final = "request_too_large"
ERR_CONTEXT_LENGTH_EXCEEDED: Final = "context_length_exceeded"
ERR_OVERLOADED: Final = "overloaded"
ERR_TIMEOUT: Final = "timeout"
ERR_INTERNAL: Final = "internal_error"
ERR_TOOL_CALL_PARSE: Final = "tool_call_parse_error"
ERR_INVALID_API_KEY: Final = "invalid_api_key"

# --- cancellation ------------------------------------------------------------------------
#: ``response.cancelled.reason`` values and cancellation-diagnostic ``source`` values
CANCEL_SOURCE_CLIENT: Final = "client"  # an NNRP cancel frame from the client
CANCEL_SOURCE_TIMEOUT: Final = "timeout"  # the envelope's nnrp.timeout_ms expired
CANCEL_SOURCE_DISCONNECT: Final = "disconnect"  # the session or connection went away
CANCEL_SOURCE_HINT: Final = "cancel_after_events"  # upstream's in-band test hint
CANCEL_SOURCE_SHUTDOWN: Final = "shutdown"  # the server is stopping
CANCEL_SOURCES: Final = (
    CANCEL_SOURCE_CLIENT,
    CANCEL_SOURCE_TIMEOUT,
    CANCEL_SOURCE_DISCONNECT,
    CANCEL_SOURCE_HINT,
    CANCEL_SOURCE_SHUTDOWN,
)

# --- envelope ----------------------------------------------------------------------------
ENVELOPE_FIELDS: Final = ("schema_version", "operation", "request_id", "body", "nnrp")
#: keys defined inside the envelope's ``nnrp`` member (others are extension hints)
NNRP_HINTS: Final = (
    "timeout_ms",
    "diagnostics",
    "cancel_after_events",
    "extensions",
    "openai_chunk",
    "timing",
    NNRP_API_KEY_FIELD,
)
#: default cap on a submitted envelope, in bytes (configurable by the adapter operator)
DEFAULT_MAX_ENVELOPE_BYTES: Final = 1 << 20

# --- capabilities ------------------------------------------------------------------------
CAP_STREAMING: Final = "api.streaming"
CAP_NON_STREAMING: Final = "api.non_streaming"
CAP_TOOL_CALLS: Final = "api.tool_calls"
CAP_CANCELLATION: Final = "api.cancellation"
#: operation flag in a manifest -> the capability token it grants
OPERATION_FLAG_CAPABILITIES: Final = MappingProxyType(
    {
        "streaming": CAP_STREAMING,
        "non_streaming": CAP_NON_STREAMING,
        "tool_calls": CAP_TOOL_CALLS,
        "cancellation": CAP_CANCELLATION,
    }
)


def level_capability(level: int) -> str:
    """``api.level<N>``"""
    return f"api.level{level}"


def operation_capability(operation: str) -> str:
    """``api.<operation name>``"""
    return f"api.{operation}"


def extension_capability(name: str, *, critical: bool = False) -> str:
    """``api.extension.<name>`` or ``api.extension.<name>.critical``"""
    return f"api.extension.{name}.critical" if critical else f"api.extension.{name}"


# --- recipes -----------------------------------------------------------------------------
STATUS_MANDATORY: Final = "mandatory"
STATUS_OPTIONAL: Final = "optional"
STATUS_EXPERIMENTAL: Final = "experimental"
STATUS_DEPRECATED: Final = "deprecated"
RECIPE_STATUSES: Final = (STATUS_MANDATORY, STATUS_OPTIONAL, STATUS_EXPERIMENTAL, STATUS_DEPRECATED)
#: the placeholder default upstream recipes carry for ${MODEL_ID}; a run-wide model choice
#: replaces it, any other recipe value (e.g. "backend-error") is kept
PLACEHOLDER_MODEL_ID: Final = "example-model"

OUTCOME_PASSED: Final = "passed"
OUTCOME_FAILED: Final = "failed"
OUTCOME_SKIPPED: Final = "skipped"
OUTCOMES: Final = (OUTCOME_PASSED, OUTCOME_FAILED, OUTCOME_SKIPPED)

# --- wire mapping (profile §6.1, §7.1, §8.1; numbers from NNRP Preview4) -------------------------------------
WIRE_PAYLOAD_KIND_STRUCTURED_EVENT: Final = 16
WIRE_PAYLOAD_KIND_BITMAP: Final = 16
WIRE_PROFILE_ID: Final = 0
WIRE_SCHEMA_ID: Final = 0
WIRE_SCHEMA_VERSION: Final = 0
WIRE_STREAM_SEMANTICS_SNAPSHOT: Final = 1
WIRE_DESCRIPTOR_FLAGS: Final = 0
WIRE_PAYLOAD_FRAME_COUNT: Final = 1
WIRE_TYPED_DESCRIPTOR_BYTES: Final = 24
WIRE_PAYLOAD_ENCODING: Final = "utf-8"
#: nnrp-py's standard session profile the client opens and the server accepts
WIRE_SESSION_PROFILE_ID: Final = 2
#: RESULT_PUSH status codes the binding uses
WIRE_STATUS_OK: Final = 200
WIRE_STATUS_ERROR: Final = 400
WIRE_STATUS_SERVER_ERROR: Final = 500
#: ResultDropReasonCode values the mapping uses (NNRP value registry)
WIRE_DROP_DEADLINE_EXPIRED: Final = 1
WIRE_DROP_PEER_CANCELLED: Final = 3
WIRE_DROP_BACKPRESSURE: Final = 4
WIRE_DROP_CAPABILITY_MISMATCH: Final = 5
WIRE_DROP_TRANSPORT_CLOSED: Final = 8
DEFAULT_NNRP_PORT: Final = 4433

# --- release gate ------------------------------------------------------------------------
#: the five conditions a release needs, each reported exactly once in a release-gate report
GATE_LEVEL1_IMPLEMENTED: Final = "level1_implemented"
GATE_RECIPES_PASS: Final = "recipes_pass"
GATE_BENCHMARK_BASELINE: Final = "benchmark_baseline"
GATE_VLLM_SMOKE: Final = "vllm_smoke"
GATE_README_DOCUMENTS: Final = "readme_documents"
RELEASE_GATES: Final = (
    GATE_LEVEL1_IMPLEMENTED,
    GATE_RECIPES_PASS,
    GATE_BENCHMARK_BASELINE,
    GATE_VLLM_SMOKE,
    GATE_README_DOCUMENTS,
)

# --- exit statuses of the nnrp-conformance command (what CI reads) --------------------------
#: every selected case (or every gate condition) passed
EXIT_OK: Final = 0
#: a selected case, or a gate condition, failed
EXIT_FAILED: Final = 1
#: the inputs are unusable (manifest, recipes, options, evidence, policy)
EXIT_USAGE: Final = 2
#: the target could not be reached or answered nothing usable
EXIT_TARGET: Final = 3
#: interrupted (Ctrl-C), as a shell reports SIGINT
EXIT_INTERRUPTED: Final = 130

# --- case selection (execution plan ``selection``, case results ``diagnostics.selection``) --
#: the case runs: its level and capabilities are claimed, its extension selected
SEL_SELECTED: Final = "selected"
#: an optional case whose capability the manifest does not claim (not run)
SEL_NOT_CLAIMED: Final = "not_claimed"
#: an informational case (runs, never fails the run)
SEL_INFORMATIONAL: Final = "informational"
#: a case of a critical extension the run did not select (not run)
SEL_EXTENSION_NOT_SELECTED: Final = "extension_not_selected"
SELECTIONS: Final = (SEL_SELECTED, SEL_NOT_CLAIMED, SEL_INFORMATIONAL, SEL_EXTENSION_NOT_SELECTED)
