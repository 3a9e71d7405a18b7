"""The `openai-compatible/1` side of the minimal endpoint: envelope, events, errors, "model".

This module knows nothing about NNRP frames.  It turns one decoded request envelope into a
plan: the ordered event bodies to stream as partial results and the terminal event to
end with.  It also owns the capability document of each ``--levels`` claim; the operations
above Level 1 are planned by ``responses_profile`` and ``discovery_profile``, handed in as
planners.  The "model" is deterministic: it echoes words of the last message, one word per
token, so a request's output is fully predictable.

The profile literals are written out here on purpose: this endpoint plays the part of a
third-party provider that implements the published profile without the suite's code.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Protocol, TypeGuard

import tool_faults

SCHEMA_VERSION = "openai-compatible/1"
PROFILE = "openai-compatible"
ADAPTER = "minimal-endpoint"
OP_CHAT = "chat.completions.create"
OP_RESPONSES = "responses.create"
OP_MODELS = "models.list"
OP_EMBEDDINGS = "embeddings.create"
OP_CAPABILITIES = "nnrp.capabilities.get"
#: the capability document's entry of each profile operation (docs/levels.md): the answers
#: of models.list and embeddings.create are single results, never streamed or cancelled
OPERATION_FLAGS: Final = MappingProxyType({
    OP_CHAT: {"streaming": True, "non_streaming": True, "tool_calls": True, "cancellation": True},
    OP_RESPONSES: {"streaming": True, "non_streaming": True, "tool_calls": True,
                   "cancellation": True},
    OP_MODELS: {"streaming": False, "non_streaming": True, "tool_calls": False,
                "cancellation": False},
    OP_EMBEDDINGS: {"streaming": False, "non_streaming": True, "tool_calls": False,
                    "cancellation": False},
})
#: the operations a level adds to the ones below it (profile §4: a higher level includes them)
LEVEL_OPERATIONS: Final = MappingProxyType(
    {1: (OP_CHAT,), 2: (OP_RESPONSES,), 3: (OP_MODELS, OP_EMBEDDINGS)}
)
ENVELOPE_FIELDS = frozenset({"schema_version", "operation", "request_id", "body", "nnrp"})

#: error code -> its fixed error.type (a subset of the profile's closed list)
ERROR_TYPES = {
    "missing_messages": "invalid_request_error",
    "unsupported_operation": "invalid_request_error",
    "backend_error": "server_error",
    "invalid_request": "invalid_request_error",
    "invalid_schema_version": "invalid_request_error",
    "request_too_large": "invalid_request_error",
    "context_length_exceeded": "invalid_request_error",
    "timeout": "timeout_error",
    "internal_error": "server_error",
}
#: RESULT_PUSH status per error.type
STATUS_OK = 200
STATUS_FOR_TYPE = {"invalid_request_error": 400, "server_error": 500, "timeout_error": 500}

DEFAULT_OUTPUT_TOKENS = 16
MAX_OUTPUT_TOKENS = 4096
MAX_ENVELOPE_BYTES = 1 << 20
MESSAGE_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
FLOOD_EVENT_LIMIT = 200_000
HUGE_DELTA_BYTES = 4 << 20


class ProfileError(Exception):
    """A request the profile answers with ``response.error``; ``invalid_submit``: the submit
    itself is invalid (§6.1: its frame or envelope), not only its body."""

    def __init__(self, code: str, message: str, *, invalid_submit: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.invalid_submit = invalid_submit


def encode(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode("utf-8")


def error_event(code: str, message: str, defect: str | None = None) -> dict[str, Any]:
    error = {"type": ERROR_TYPES[code], "code": code, "message": message}
    if defect == "bad-error-body":
        del error["message"]
    return {"type": "response.error", "error": error}


def cancelled_event(reason: str, **diagnostics: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "response.cancelled", "reason": reason}
    if diagnostics:
        # Profile events are closed; runtime details travel in the event's nnrp member.
        event["nnrp"] = {"diagnostics": {"cancellation": diagnostics}}
    return event


@dataclass
class Plan:
    """What one operation sends: partial bodies (None = a generation step that emits
    nothing), then the terminal event (None = the operation is never ended)."""

    partials: Iterable[bytes | None]
    terminal: dict[str, Any] | None
    status: int = STATUS_OK
    cancel_after_events: int | None = None
    timeout_ms: int | None = None
    request_id: str = ""
    operation: str = ""
    #: end a success with an empty RESULT_PUSH (zero frames) instead of ``terminal``
    empty_terminal: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class Planner(Protocol):
    """Plans one operation's answer from its request body (raises ProfileError)."""

    def __call__(self, body: dict[str, Any], *, op_id: int, request_id: str, model: str,
                 defect: str | None) -> Plan: ...


def error_plan(code: str, message: str, defect: str | None = None) -> Plan:
    event = error_event(code, message, defect)
    return Plan(partials=(), terminal=event, status=STATUS_FOR_TYPE[ERROR_TYPES[code]])


def capability_document(model: str, defect: str | None = None, levels: int = 1) -> dict[str, Any]:
    """The document of an endpoint serving every operation of ``levels`` and the ones below."""
    names = [op for level in range(1, levels + 1) for op in LEVEL_OPERATIONS[level]]
    claimed = list(range(1, levels + 1))
    if defect == "capability-lies" and levels == 1:
        claimed, names = [1, 2], [*names, OP_RESPONSES]
    return {
        "profile": PROFILE,
        "schema_version": SCHEMA_VERSION,
        "adapter": ADAPTER,
        "compatibility_levels": claimed,
        "operations": [{"name": name, **OPERATION_FLAGS[name]} for name in names],
        "models": [{"id": model, "owned_by": ADAPTER}],
    }


# --- envelope ----------------------------------------------------------------------------


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_envelope(payload: bytes) -> dict[str, Any]:
    if len(payload) > MAX_ENVELOPE_BYTES:
        raise ProfileError(
            "request_too_large",
            f"request envelope is {len(payload)} bytes; the limit is {MAX_ENVELOPE_BYTES}",
        )
    try:
        envelope = json.loads(payload.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ProfileError("invalid_request", f"request envelope is not UTF-8: {exc}",
                           invalid_submit=True) from None
    except json.JSONDecodeError as exc:
        raise ProfileError("invalid_request", f"request envelope is not JSON: {exc}",
                           invalid_submit=True) from None
    if not isinstance(envelope, dict):
        raise ProfileError("invalid_request", "request envelope must be a JSON object",
                           invalid_submit=True)
    if envelope.get("schema_version") != SCHEMA_VERSION:
        raise ProfileError(
            "invalid_schema_version",
            f"schema_version must be {SCHEMA_VERSION!r}, got {envelope.get('schema_version')!r}",
            invalid_submit=True,
        )
    unknown = sorted(set(envelope) - ENVELOPE_FIELDS)
    if unknown:
        raise ProfileError("invalid_request", f"unknown envelope member(s): {', '.join(unknown)}")
    if not isinstance(envelope.get("operation"), str) or not envelope["operation"]:
        raise ProfileError("invalid_request", "envelope member 'operation' must be a string")
    if "request_id" in envelope and not isinstance(envelope["request_id"], str):
        raise ProfileError("invalid_request", "envelope member 'request_id' must be a string")
    if not isinstance(envelope.get("body"), dict):
        raise ProfileError("invalid_request", "envelope member 'body' must be a JSON object")
    hints = envelope.get("nnrp", {})
    if not isinstance(hints, dict):
        raise ProfileError("invalid_request", "envelope member 'nnrp' must be a JSON object")
    timeout = hints.get("timeout_ms")
    if timeout is not None and (not is_int(timeout) or timeout <= 0):
        raise ProfileError("invalid_request", "nnrp.timeout_ms must be a positive integer")
    after = hints.get("cancel_after_events")
    if after is not None and (not is_int(after) or after < 0):
        raise ProfileError("invalid_request", "nnrp.cancel_after_events must be an integer >= 0")
    if "diagnostics" in hints and not isinstance(hints["diagnostics"], bool):
        raise ProfileError("invalid_request", "nnrp.diagnostics must be a boolean")
    return envelope


# --- chat body ---------------------------------------------------------------------------


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content)
    return ""


def _check_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    if "messages" not in body:
        raise ProfileError("missing_messages", "chat body has no 'messages'")
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise ProfileError("invalid_request", "'messages' must be a non-empty list")
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ProfileError("invalid_request", f"{where} must be an object")
        if message.get("role") not in MESSAGE_ROLES:
            raise ProfileError(
                "invalid_request", f"{where}.role must be one of {sorted(MESSAGE_ROLES)}"
            )
        if "content" not in message:
            raise ProfileError("invalid_request", f"{where} has no 'content'")
        content = message["content"]
        if content is None and message["role"] == "assistant":
            continue
        if isinstance(content, list):
            for j, part in enumerate(content):
                if not (isinstance(part, dict) and isinstance(part.get("text"), str)):
                    raise ProfileError(
                        "invalid_request", f"{where}.content[{j}] must be a text part"
                    )
        elif not isinstance(content, str):
            raise ProfileError("invalid_request", f"{where}.content must be a string or parts")
    return messages


def _check_tools(body: dict[str, Any]) -> dict[str, Any] | None:
    """The tool the model calls, or None for a text answer."""
    tools = body.get("tools")
    choice = body.get("tool_choice")
    if tools is None:
        if choice not in (None, "none", "auto"):
            raise ProfileError("invalid_request", "'tool_choice' names a tool but no 'tools'")
        return None
    if not isinstance(tools, list) or not tools:
        raise ProfileError("invalid_request", "'tools' must be a non-empty list")
    by_name: dict[str, dict[str, Any]] = {}
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(fn, dict):
            raise ProfileError("invalid_request", f"tools[{i}] must be a function tool")
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ProfileError("invalid_request", f"tools[{i}].function.name must be a string")
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            raise ProfileError("invalid_request", f"tools[{i}].function.parameters: not an object")
        by_name[fn["name"]] = fn
    if choice == "none":
        return None
    if choice in (None, "auto", "required"):
        return next(iter(by_name.values()))
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = (choice.get("function") or {}).get("name")
        if name in by_name:
            return by_name[name]
        raise ProfileError("invalid_request", f"'tool_choice' names unknown tool {name!r}")
    raise ProfileError(
        "invalid_request", "'tool_choice' must be none, auto, required or a function"
    )


def _check_scalars(body: dict[str, Any]) -> None:
    if "stream" in body and not isinstance(body["stream"], bool):
        raise ProfileError("invalid_request", "'stream' must be a boolean")
    for key in ("temperature", "top_p"):
        if key in body and (not isinstance(body[key], int | float) or isinstance(body[key], bool)):
            raise ProfileError("invalid_request", f"'{key}' must be a number")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ProfileError("invalid_request", "'stream_options' must be an object")
    for key in ("max_tokens", "max_completion_tokens"):
        if key not in body or body[key] is None:
            continue
        if not is_int(body[key]) or body[key] <= 0:
            raise ProfileError("invalid_request", f"'{key}' must be a positive integer")
        if body[key] > MAX_OUTPUT_TOKENS:
            raise ProfileError(
                "context_length_exceeded",
                f"'{key}' {body[key]} exceeds this model's {MAX_OUTPUT_TOKENS} output tokens",
            )


def arguments_for(fn: dict[str, Any], prompt: str) -> str:
    """Deterministic arguments that satisfy the tool's parameter types."""
    props = (fn.get("parameters") or {}).get("properties") or {}
    samples = {"string": prompt[:40] or "x", "integer": 1, "number": 1.5, "boolean": True}
    args = {}
    for name, schema in props.items():
        kind = schema.get("type") if isinstance(schema, dict) else None
        if isinstance(schema, dict) and isinstance(schema.get("enum"), list) and schema["enum"]:
            args[name] = schema["enum"][0]
        else:
            args[name] = samples.get(str(kind), [] if kind == "array" else {} if kind else "x")
    return json.dumps(args, separators=(",", ":"))


def split3(text: str) -> list[str]:
    step = max(1, -(-len(text) // 3))
    return [text[i : i + step] for i in range(0, len(text), step)]


@dataclass
class _Chat:
    op_id: int
    request_id: str
    model: str
    body: dict[str, Any]
    defect: str | None

    def tokens(self, messages: list[dict[str, Any]]) -> list[str]:
        user = [m for m in messages if m["role"] == "user"] or messages
        words = message_text(user[-1]).split() or ["ok"]
        limit = self.body.get("max_tokens") or self.body.get("max_completion_tokens")
        count = limit or DEFAULT_OUTPUT_TOKENS
        cycle = itertools.islice(itertools.cycle(words), count)
        tokens = [w if i == 0 else " " + w for i, w in enumerate(cycle)]
        if self.defect == "huge-event" and len(tokens) > 1:
            tokens[1] = " " + "x" * HUGE_DELTA_BYTES
        return tokens

    def completion(self, message: dict[str, Any], finish: str,
                   usage: dict[str, int]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": f"chatcmpl-{self.request_id}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": usage["input_tokens"],
                "completion_tokens": usage["output_tokens"],
                "total_tokens": usage["total_tokens"],
            },
        }
        if self.defect == "non-streaming-bad-body" and not self.body.get("stream"):
            del body["choices"]
        return body

    def usage_event(self, usage: dict[str, int]) -> dict[str, Any]:
        if self.defect == "wrong-usage-fields":
            # neither of the profile's name sets (input/output, prompt/completion)
            fields = {
                "tokens_in": usage["input_tokens"],
                "tokens_out": usage["output_tokens"],
                "total_tokens": usage["total_tokens"],
            }
            return {"type": "response.usage", "usage": fields}
        return {"type": "response.usage", "usage": dict(usage)}

    def text_events(self, tokens: list[str]) -> Iterator[bytes | None]:
        for i, token in enumerate(tokens):
            if self.defect == "garbage-frames" and i == 1:
                yield b"\xff\xfe{not json"
            if self.defect == "unknown-event-type" and i == 1:
                yield encode({"type": "response.reasoning.delta", "index": 0, "delta": "hmm"})
            event: dict[str, Any] = {"type": "response.output_text.delta", "index": 0}
            event["delta"] = token
            if self.defect == "schema-invalid-event":
                del event["index"]
            if self.defect == "extension-misuse":
                # an extension field no manifest declares, on a standard event
                event["acme_trace"] = {"t": i}
            if self.defect == "profile-field-misplaced":
                # a running count on every delta: the profile's usage field, on the wrong event
                event["usage"] = {"output_tokens": i + 1}
            if self.defect == "critical-extension-unselected":
                # the field of a critical extension (manifest-critical-extension.json) sent
                # whether or not the request selected it
                event["acme_priority"] = "high"
            body = encode(event)
            yield b"data: " + body + b"\n\n" if self.defect == "sse-framing" else body

    def tool_events(self, fn: dict[str, Any], arguments: str) -> Iterator[bytes]:
        ids = {"index": 0, "item_id": f"item_{self.op_id}_0", "call_id": f"call_{self.op_id}_0"}
        started = {"type": "response.tool_call.started", **ids, "name": fn["name"]}
        deltas = [
            {"type": "response.tool_call.delta", **ids, "arguments_delta": chunk}
            for chunk in split3(arguments)
        ]
        final_args = arguments + " " if self.defect == "tool-call-args-mismatch" else arguments
        completed = {
            "type": "response.tool_call.completed",
            **ids,
            "name": fn["name"],
            "arguments": final_args,
        }
        events = [started, *deltas, completed]
        if self.defect == "wrong-order":
            events[0], events[1] = events[1], events[0]
        if self.defect == "tool-call-no-completed":
            events.pop()
        for event in events:
            body = encode(event)
            yield b"data: " + body + b"\n\n" if self.defect == "sse-framing" else body

    def plan(self) -> Plan:
        messages = _check_messages(self.body)
        model = self.body.get("model")
        if not isinstance(model, str) or not model:
            raise ProfileError("invalid_request", "chat body needs a 'model' string")
        _check_scalars(self.body)
        tool = _check_tools(self.body)
        if model != self.model:
            # Mirrors a backend that rejects a model it does not serve; the upstream
            # backend-error recipe (model "backend-error") expects exactly this code.
            raise ProfileError("backend_error", f"model {model!r} is not served here")
        stream = bool(self.body.get("stream", False))
        prompt = " ".join(message_text(m) for m in messages)
        input_tokens = max(1, len(prompt.split()))
        if tool is not None:
            arguments = arguments_for(tool, message_text(messages[-1]))
            output_tokens = len(split3(arguments))
            partials: list[bytes | None] = list(self.tool_events(tool, arguments))
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{self.op_id}_0",
                        "type": "function",
                        "function": {"name": tool["name"], "arguments": arguments},
                    }
                ],
            }
            finish = "tool_calls"
            partials, message = tool_faults.apply(self.defect, partials, message)
            text_stream: Iterable[bytes | None] = partials
        else:
            tokens = self.tokens(messages)
            output_tokens = len(tokens)
            limit = self.body.get("max_tokens") or self.body.get("max_completion_tokens")
            finish = "length" if limit else "stop"
            message = {"role": "assistant", "content": "".join(tokens)}
            text_stream = self.text_events(tokens)
        usage = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        }
        final = {"type": "response.completed", "body": self.completion(message, finish, usage)}
        if not stream:
            # Generation still takes one step per token, so timeouts and cancels apply.
            return Plan(partials=[None] * output_tokens, terminal=final)
        if self.defect == "flood":
            return Plan(partials=self.flood(), terminal=None)
        tail: list[bytes | None] = []
        if (self.body.get("stream_options") or {}).get("include_usage") is True:
            tail.append(encode(self.usage_event(usage)))
            if self.defect == "usage-twice":
                tail.append(encode(self.usage_event(usage)))
        if self.defect == "terminal-as-partial":
            tail.append(encode(final))
        terminal = None if self.defect == "missing-terminal" else final
        return Plan(partials=itertools.chain(text_stream, tail), terminal=terminal)

    def flood(self) -> Iterator[bytes]:
        deadline = time.monotonic() + 60.0
        for i in range(FLOOD_EVENT_LIMIT):
            if time.monotonic() >= deadline:
                return
            yield encode({"type": "response.output_text.delta", "index": 0, "delta": f" w{i}"})


def plan_request(payload: bytes, *, op_id: int, model: str, defect: str | None,
                 levels: int = 1, planners: Mapping[str, Planner] | None = None) -> Plan:
    """Decode one envelope and plan its answer; every invalid request yields an error plan.
    ``planners`` serve the operations of the levels above 1 (``levels`` is the highest)."""
    try:
        envelope = parse_envelope(payload)
        hints = envelope.get("nnrp") or {}
        request_id = envelope.get("request_id") or f"op{op_id}"
        operation = envelope["operation"]
        body = envelope["body"]
        planner = (planners or {}).get(operation)
        if operation == OP_CAPABILITIES:
            document = capability_document(model, defect, levels)
            plan = Plan(partials=(), terminal={"type": "response.completed", "body": document})
        elif planner is not None:
            plan = planner(body, op_id=op_id, request_id=request_id, model=model, defect=defect)
        elif operation == OP_RESPONSES and defect == "unsupported-op-accepted":
            text = body.get("input") if isinstance(body.get("input"), str) else "hello"
            chat = {"model": model, "stream": True, "messages": [{"role": "user", "content": text}]}
            plan = _Chat(op_id, request_id, model, chat, defect).plan()
        elif operation == OP_CHAT:
            if defect == "wrong-error-code" and "messages" not in body:
                raise ProfileError("invalid_request", "chat body has no 'messages'")
            plan = _Chat(op_id, request_id, model, body, defect).plan()
        else:
            raise ProfileError(
                "unsupported_operation", f"operation {operation!r} is not served here"
            )
    except ProfileError as exc:
        plan = error_plan(exc.code, exc.message, defect)
        plan.extra["invalid_submit"] = exc.invalid_submit
        return plan
    plan.request_id = request_id
    plan.operation = operation
    plan.timeout_ms = hints.get("timeout_ms")
    plan.cancel_after_events = hints.get("cancel_after_events")
    return plan
