"""The chat side of the minimal endpoint: the deterministic "model" and ``plan_request``.

This module knows nothing about NNRP frames.  ``plan_request`` decodes one request envelope
(``envelope``) and plans its answer: the ordered event bodies to stream as partial results
and the terminal event to end with.  It answers ``chat.completions.create`` itself (its body
checked by ``chat_body``) and the discovery operation ``nnrp.capabilities.get`` with
``discovery_profile``'s document; the operations above Level 1 are planned by
``responses_profile`` and ``discovery_profile``, handed in as planners.  The "model" is
deterministic: it echoes words of the last message, one word per token, so a request's
output is fully predictable.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import input_faults
import tool_faults
from chat_body import check_messages, check_scalars, check_tools, message_text
from discovery_profile import capability_document
from envelope import (
    OP_CAPABILITIES,
    OP_CHAT,
    OP_RESPONSES,
    Plan,
    Planner,
    ProfileError,
    encode,
    error_plan,
    parse_envelope,
)

DEFAULT_OUTPUT_TOKENS = 16
FLOOD_EVENT_LIMIT = 200_000
HUGE_DELTA_BYTES = 4 << 20


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


def split3(text: str, parts: int = 3) -> list[str]:
    """``text`` in (at most) ``parts`` pieces: a tool call's argument deltas."""
    step = max(1, -(-len(text) // max(1, parts)))
    return [text[i : i + step] for i in range(0, len(text), step)]


def stop_at(tokens: list[str], stops: list[str]) -> tuple[list[str], bool]:
    """The tokens up to the first stop sequence (which is not returned), and whether one was
    met: OpenAI's stop ("the returned text will not contain the stop sequence")."""
    text = "".join(tokens)
    hits = [i for i in (text.find(s) for s in stops) if i >= 0]
    if not hits:
        return tokens, False
    end, out, length = min(hits), [], 0
    for token in tokens:
        if length + len(token) > end:
            if end > length:
                out.append(token[: end - length])
            break
        out.append(token)
        length += len(token)
    return out, True


@dataclass
class _Chat:
    op_id: int
    request_id: str
    model: str
    body: dict[str, Any]
    defect: str | None

    def limit(self) -> int | None:
        if self.defect == "ignores-max-tokens":
            return None
        return input_faults.token_limit(self.defect, self.body)

    def tokens(self, messages: list[dict[str, Any]]) -> tuple[list[str], bool]:
        """The answer's tokens and whether its limit cut it: the words of the last user
        message, repeated up to the limit (16 without one); in JSON mode, a short object
        holding the first three, which ends on its own when it fits."""
        user = [m for m in messages if m["role"] == "user"] or messages
        words = input_faults.sampled(self.defect, self.body,
                                     message_text(user[-1]).split() or ["ok"])
        count = self.limit() or DEFAULT_OUTPUT_TOKENS
        if input_faults.json_mode(self.defect, self.body):
            whole = split3(json.dumps({"answer": " ".join(words[:3])}, ensure_ascii=False),
                           min(3, len(words)) + 2)
            return whole[:count], len(whole) > count
        cycle = itertools.islice(itertools.cycle(words), count)
        tokens = [w if i == 0 else " " + w for i, w in enumerate(cycle)]
        if self.defect == "huge-event" and len(tokens) > 1:
            tokens[1] = " " + "x" * HUGE_DELTA_BYTES
        return tokens, self.limit() is not None

    def completion(self, message: dict[str, Any], finish: str,
                   usage: dict[str, int]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": f"chatcmpl-{self.request_id}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": i, "message": message, "finish_reason": finish}
                        for i in range(input_faults.choices(self.defect, self.body))],
            "usage": {
                "prompt_tokens": usage["input_tokens"],
                "completion_tokens": usage["output_tokens"],
                "total_tokens": usage["total_tokens"],
            },
        }
        if self.defect == "non-streaming-bad-body" and not self.body.get("stream"):
            del body["choices"]
        return input_faults.cached_answer(self.defect, self.body, self.model, body)

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

    def text_events(self, tokens: list[str], index: int = 0) -> Iterator[bytes | None]:
        for i, token in enumerate(tokens):
            if self.defect == "garbage-frames" and i == 1:
                yield b"\xff\xfe{not json"
            if self.defect == "unknown-event-type" and i == 1:
                yield encode({"type": "response.reasoning.delta", "index": 0, "delta": "hmm"})
            split = input_faults.split_delta(self.defect, token)
            if split is not None:
                yield from split
                continue
            event: dict[str, Any] = {"type": "response.output_text.delta", "index": index}
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

    def tool_events(self, fn: dict[str, Any], arguments: str, parts: int) -> Iterator[bytes]:
        ids = {"index": 0, "item_id": f"item_{self.op_id}_0", "call_id": f"call_{self.op_id}_0"}
        started = {"type": "response.tool_call.started", **ids, "name": fn["name"]}
        deltas = [
            {"type": "response.tool_call.delta", **ids, "arguments_delta": chunk}
            for chunk in split3(arguments, parts)
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
        self.body = input_faults.lenient(self.defect, self.body, self.model)
        if input_faults.unanswered(self.defect, self.body):
            return Plan(partials=(), terminal=None)
        messages = check_messages(self.body)
        model = self.body.get("model")
        if not isinstance(model, str) or not model:
            raise ProfileError("invalid_request", "chat body needs a 'model' string")
        check_scalars(self.body)
        tool = input_faults.tool_choice_fault(self.defect, self.body, check_tools(self.body))
        input_faults.refuse(self.defect, self.body)
        if model != self.model:
            # Mirrors a backend that rejects a model it does not serve; the upstream
            # backend-error recipe (model "backend-error") expects exactly this code.
            raise ProfileError("backend_error", f"model {model!r} is not served here")
        stream = bool(self.body.get("stream", False))
        prompt = " ".join(message_text(m) for m in messages)
        input_tokens = max(1, len(prompt.split()))
        if tool is not None:
            arguments = arguments_for(tool, message_text(messages[-1]))
            # a tool call's argument deltas are its tokens: never more than the limit
            parts = min(3, self.limit() or 3)
            output_tokens = len(split3(arguments, parts))
            partials: list[bytes | None] = list(self.tool_events(tool, arguments, parts))
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
            whole, cut = self.tokens(messages)
            tokens, stopped = stop_at(whole, input_faults.stops(self.defect, self.body))
            # every choice of this deterministic model is the same answer
            n = input_faults.choices(self.defect, self.body)
            output_tokens = len(tokens) * n
            finish = "length" if cut and not stopped else "stop"
            message = {"role": "assistant", "content": "".join(tokens)}
            text_stream = itertools.chain.from_iterable(
                self.text_events(tokens, i) for i in range(n))
        usage = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        }
        final = {"type": "response.completed", "body": self.completion(message, finish, usage)}
        if not stream:
            # Generation still takes one step per token, so timeouts and cancels apply.
            return Plan(partials=[None] * output_tokens, terminal=None
                        if input_faults.never_ends(self.defect, prompt) else final)
        if self.defect == "flood":
            return Plan(partials=self.flood(), terminal=None)
        tail: list[bytes | None] = []
        if input_faults.usage_asked(self.defect, self.body):
            tail.append(encode(self.usage_event(usage)))
            if self.defect == "usage-twice":
                tail.append(encode(self.usage_event(usage)))
        if self.defect == "terminal-as-partial":
            tail.append(encode(final))
        terminal = None if self.defect == "missing-terminal" \
            or input_faults.never_ends(self.defect, prompt) else final
        return Plan(partials=itertools.chain(text_stream, tail), terminal=terminal)

    def flood(self) -> Iterator[bytes]:
        deadline = time.monotonic() + 60.0
        for i in range(FLOOD_EVENT_LIMIT):
            if time.monotonic() >= deadline:
                return
            yield encode({"type": "response.output_text.delta", "index": 0, "delta": f" w{i}"})


_DERIVED = itertools.count(1)


def plan_request(payload: bytes, *, op_id: int, model: str, defect: str | None,
                 levels: int = 1, planners: Mapping[str, Planner] | None = None) -> Plan:
    """Decode one envelope and plan its answer; every invalid request yields an error plan.
    ``planners`` serve the operations of the levels above 1 (``levels`` is the highest)."""
    try:
        envelope = parse_envelope(payload)
        if envelope.get("operation") != OP_CAPABILITIES:
            input_faults.envelope_fault(defect, envelope)
        hints = envelope.get("nnrp") or {}
        # derived from the frame id (§6) and unique in the process: frame ids restart with
        # each session, and an answer's id is made of it
        request_id = envelope.get("request_id") or \
            input_faults.derived_request_id(defect, op_id, next(_DERIVED))
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
    plan.extra["diagnostics_asked"] = hints.get("diagnostics") is True
    return plan
